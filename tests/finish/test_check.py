from __future__ import annotations

from pathlib import Path

from fleet import Fleet
from fleet._check import check_worker
from fleet._cli import main
from tests.conftest import Repo
from tests.finish._helpers import add_worktree, commit, finished_worker, push, register


def test_a_pushed_clean_worker_checks(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        finished_worker(fleet, repo, "w1")
        result = check_worker(fleet, "w1")
        assert result.verdict == "checked", result.findings
        assert len(result.commits) == 1
        state = fleet.state("w1")
    assert (state.state, state.reason, state.verdict) == ("done", "checked", "checked")
    # the verdict's own mark counts as seen: the check does not wake the coordinator again
    assert not state.needs_attention


def test_each_problem_is_a_finding(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        path = add_worktree(repo, "w2")
        commit(path)
        commit(path, "b.txt")
        (path / "notes.txt").write_text("mine\n")
        register(fleet, "w2", path, "fleet/w2")
        result = check_worker(fleet, "w2", commands=["echo boom; exit 3", "true"])
        state = fleet.state("w2")
    assert result.verdict == "failed"
    assert "untracked file notes.txt" in result.findings
    assert any(f.startswith("no upstream") for f in result.findings)
    assert "check `echo boom; exit 3` failed (exit 3): boom" in result.findings
    assert [c.ok for c in result.commands] == [False, True]
    assert (state.state, state.reason) == ("done", "failed")
    assert state.findings == result.findings


def test_unpushed_commits_and_no_commits(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        path = add_worktree(repo, "w3")
        register(fleet, "w3", path, "fleet/w3")
        push(path)
        empty = check_worker(fleet, "w3")
        commit(path)
        commit(path, "c.txt")
        ahead = check_worker(fleet, "w3")
    assert empty.findings == ("no commits in main..HEAD",)
    assert ahead.findings == ("2 commits not pushed to origin/fleet/w3",)


def test_cli_check_exit_codes(repo: Repo, home: Path, capsys: object) -> None:
    with Fleet() as fleet:
        finished_worker(fleet, repo, "ok1")
        path = add_worktree(repo, "bad1")
        commit(path)
        register(fleet, "bad1", path, "fleet/bad1")
    assert main(["check", "ok1"]) == 0
    assert main(["check", "bad1", "--json"]) == 4


def test_checking_a_retired_worker_is_refused(repo: Repo, home: Path, capsys: object) -> None:
    from fleet._retire import Retirer

    with Fleet() as fleet:
        finished_worker(fleet, repo, "gone1")
        assert Retirer(fleet).retire_worker("gone1").retired
        events = len(fleet.log("gone1"))
    assert main(["check", "gone1"]) == 4
    with Fleet() as fleet:
        assert len(fleet.log("gone1")) == events  # nothing journaled
