"""Any git failure while guarding a delete refuses it; adapters are found by name."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._retire import Retirer
from fleet._runner import Completed, SubprocessRunner
from fleet.adapters import Adapter, Deleter, get_adapter, get_deleter
from tests.conftest import Repo
from tests.finish._helpers import claim, finished_worker


class FailingGit:
    """Runs everything for real, except that one git subcommand fails from a given call on."""

    def __init__(self, subcommand: str, *, after: int = 0) -> None:
        self.real = SubprocessRunner()
        self.subcommand = subcommand
        self.after = after
        self.seen = 0

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float | None = 60.0,
    ) -> Completed:
        if list(argv[:1]) == ["git"] and _subcommand(argv[1:]) == self.subcommand:
            self.seen += 1
            if self.seen > self.after:
                return Completed(argv=tuple(argv), returncode=128, stdout="",
                                 stderr="fatal: injected failure")
        return self.real.run(argv, cwd=cwd, env=env, input=input, timeout=timeout)


def _subcommand(args: Sequence[str]) -> str | None:
    """git's subcommand, past any ``-c key=value`` options."""
    rest = list(args)
    while len(rest) >= 2 and rest[0] == "-c":
        rest = rest[2:]
    return rest[0] if rest else None


GUARD_COMMANDS = ["rev-parse", "symbolic-ref", "status", "for-each-ref", "rev-list", "ls-remote",
                  "log", "ls-files", "read-tree", "update-index", "diff-files", "add",
                  "write-tree", "update-ref", "worktree"]


@pytest.mark.parametrize("subcommand", GUARD_COMMANDS)
def test_a_git_failure_anywhere_refuses(repo: Repo, home: Path, subcommand: str) -> None:
    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "w")
        runner = FailingGit(subcommand)
        outcome = Retirer(fleet, runner=runner).retire_worker("w")
        state = fleet.state("w")
    assert runner.seen, f"git {subcommand} was never run"
    assert not outcome.retired
    assert outcome.reason and "injected failure" in outcome.reason
    assert path.exists()
    assert state.state == "done" and state.refused == outcome.reason


@pytest.mark.parametrize(
    "subcommand", ["status", "ls-remote", "rev-parse", "symbolic-ref", "diff-files"]
)
def test_a_git_failure_in_the_last_round_of_guards_refuses(
    repo: Repo, home: Path, subcommand: str
) -> None:
    """Every guard passed once; git fails only when they run again, right before the delete."""
    runner = FailingGit(subcommand, after=10**9)

    def arm(_: object) -> None:
        runner.after = runner.seen

    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "w")
        outcome = Retirer(fleet, runner=runner, before_delete=arm).retire_worker("w")
    assert not outcome.retired
    assert "injected failure" in (outcome.reason or "")
    assert path.exists()


@pytest.mark.parametrize("name", ["headless", "superset", "herdr"])
def test_adapters_by_name(name: str) -> None:
    runner = SubprocessRunner()
    adapter = get_adapter(name, runner=runner, home="/nonexistent/fleet-home", unused=object())
    assert isinstance(adapter, Adapter)
    assert adapter.name == name
    assert getattr(adapter, "runner", runner) is runner
    assert isinstance(get_deleter(name, runner=runner), Deleter)


def test_a_headless_worker_is_deleted_by_its_adapter(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "hw")
        fleet.register("hw", worktree=path, adapter="headless", branch="fleet/hw", base="main")
        claim(fleet, "hw")
        outcome = Retirer(fleet).retire_worker("hw")
    assert outcome.retired, outcome.reason
    assert not path.exists()
