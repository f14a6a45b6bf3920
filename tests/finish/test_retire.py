from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest

from fleet import Fleet, Retired, RetireRefused
from fleet._cli import main
from fleet._retire import Candidate, Retirer, confirm_on_tty
from fleet.adapters import WorktreeDeleter, get_deleter
from tests.conftest import Repo, git
from tests.finish._helpers import add_worktree, commit, finished_worker, ls_refs, push, register


def test_retire_removes_a_checked_pushed_worker_and_keeps_a_snapshot(
    repo: Repo, home: Path
) -> None:
    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "w1")
        head = git(path, "rev-parse", "HEAD")
        outcome = Retirer(fleet).retire_worker("w1")
        state = fleet.state("w1")
        events = fleet.log("w1")
    assert outcome.retired, outcome.reason
    assert outcome.checked_now  # the claim was checked first
    assert not path.exists()
    assert state.state == "retired"
    assert [type(e).__name__ for e in events[-2:]] == ["Checked", "Retired"]
    refs = ls_refs(repo)
    assert refs == [outcome.ref]
    assert git(repo.path, "rev-parse", refs[0]) == head
    # the branch stays
    assert git(repo.path, "rev-parse", "refs/heads/fleet/w1") == head


def test_refusals_name_the_reason_and_are_journaled(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        path = add_worktree(repo, "w2")
        commit(path)
        commit(path, "b.txt")
        git(path, "push", "-q", "-u", "origin", "HEAD~1:refs/heads/fleet/w2")
        git(path, "branch", "-q", "--set-upstream-to", "origin/fleet/w2")
        (path / "notes.txt").write_text("keep me\n")
        register(fleet, "w2", path, "fleet/w2")
        outcome = Retirer(fleet).retire_worker("w2")
        state = fleet.state("w2")
    assert not outcome.retired
    assert outcome.reason is not None
    assert "untracked file notes.txt" in outcome.reason
    assert "1 commit not pushed to origin/fleet/w2" in outcome.reason
    assert (path / "notes.txt").read_text() == "keep me\n"
    assert state.refused == outcome.reason
    assert state.state == "done"


def test_a_worker_that_is_not_done_is_refused(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        path = add_worktree(repo, "w3")
        commit(path)
        push(path)
        register(fleet, "w3", path, "fleet/w3", done=False)
        outcome = Retirer(fleet).retire_worker("w3")
    assert outcome.reason == "not done: starting (registered)"
    assert path.exists()


def test_a_failed_check_is_not_retired_until_checked_again(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        path = add_worktree(repo, "w4")
        commit(path)
        register(fleet, "w4", path, "fleet/w4")
        first = Retirer(fleet).retire_worker("w4")
        push(path)
        second = Retirer(fleet).retire_worker("w4")
    assert first.reason is not None and first.reason.startswith("check failed: no upstream")
    assert second.reason is not None and second.reason.startswith("check failed: no upstream")
    assert path.exists()


@pytest.mark.parametrize("change", ["new file", "new commit", "pushed commit", "staged edit"])
def test_a_change_between_the_check_and_the_delete_refuses(
    repo: Repo, home: Path, change: str
) -> None:
    def meddle(candidate: Candidate) -> None:
        wt = candidate.worktree
        if change == "new file":
            (wt / "late.txt").write_text("late\n")
        elif change == "staged edit":
            (wt / "feature.txt").write_text("changed\n")
            git(wt, "add", "feature.txt")
        else:
            commit(wt, "late.txt", "late\n", "late")
            if change == "pushed commit":
                push(wt)

    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "w5")
        outcome = Retirer(fleet, before_delete=meddle).retire_worker("w5")
        state = fleet.state("w5")
    assert not outcome.retired
    assert path.exists()
    assert outcome.ref is not None and outcome.ref in (outcome.reason or "")
    expected = {
        "new file": "untracked file late.txt",
        "staged edit": "staged file feature.txt",
        "new commit": "HEAD moved since the check",
        "pushed commit": "HEAD moved since the check",
    }[change]
    assert expected in (outcome.reason or "")
    assert state.state == "done" and state.refused == outcome.reason


def test_a_delete_that_leaves_the_directory_is_not_retired(repo: Repo, home: Path) -> None:
    class Liar:
        def delete(self, workspace: object) -> None:
            pass

    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "w6")
        outcome = Retirer(fleet, deleter_factory=lambda *a, **k: Liar()).retire_worker("w6")
        events = fleet.log("w6")
    assert not outcome.retired
    assert "still exists after the delete" in (outcome.reason or "")
    assert isinstance(events[-1], RetireRefused)
    assert path.exists()


def test_the_main_worktree_is_never_removed(repo: Repo, home: Path) -> None:
    git(repo.path, "checkout", "-q", "-b", "fleet/main-wt")
    commit(repo.path)
    push(repo.path)
    with Fleet() as fleet:
        register(fleet, "w7", repo.path, "fleet/main-wt")
        outcome = Retirer(fleet).retire_worker("w7")
    assert not outcome.retired
    assert "main worktree" in (outcome.reason or "")
    assert (repo.path / "README.md").exists()


def test_a_locked_worktree_is_refused_by_git_itself(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "w8")
        git(repo.path, "worktree", "lock", str(path))
        outcome = Retirer(fleet).retire_worker("w8")
    assert not outcome.retired
    assert "delete refused" in (outcome.reason or "")
    assert path.exists()


def test_unknown_adapters_refuse_and_headless_falls_back_to_git() -> None:
    assert isinstance(get_deleter(None), WorktreeDeleter)
    with pytest.raises(LookupError):
        get_deleter("nonesuch")


def test_cli_ask_mode_needs_confirmation(
    repo: Repo, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "w9")
    assert main(["retire", "w9"]) == 4
    out = capsys.readouterr().out
    assert "retire mode is ask; these would be retired" in out
    assert "w9: kept: not confirmed: retire mode is ask and there is no terminal" in out
    assert "pass --yes" in out
    assert path.exists()
    assert main(["retire", "w9", "--yes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "ask"
    assert out["outcomes"][0]["retired"] is True
    assert not path.exists()


def test_cli_mode_from_settings_and_all_done(
    repo: Repo, home: Path, capsys: pytest.CaptureFixture[str], _settings_file: Path
) -> None:
    _settings_file.write_text(json.dumps({"retire": "auto", "other": 1}))
    with Fleet() as fleet:
        good = finished_worker(fleet, repo, "a1")
        bad = add_worktree(repo, "a2")
        commit(bad)
        register(fleet, "a2", bad, "fleet/a2")
        idle = add_worktree(repo, "a3")
        register(fleet, "a3", idle, "fleet/a3", done=False)
    assert main(["retire", "--all-done"]) == 4
    out = capsys.readouterr().out
    assert "a1: retired" in out
    assert "a2: kept: check failed: no upstream" in out
    assert "a3: kept: not done: starting (registered)" in out
    assert not good.exists() and bad.exists() and idle.exists()
    assert json.loads(_settings_file.read_text()) == {"retire": "auto", "other": 1}
    with Fleet() as fleet:
        assert isinstance(fleet.log("a1")[-1], Retired)
        # a3 was only reported, not refused
        assert not any(isinstance(e, RetireRefused) for e in fleet.log("a3"))


def test_snapshot_ref_survives_the_remote_branch_being_deleted(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "w10")
        head = git(path, "rev-parse", "HEAD")
        outcome = Retirer(fleet).retire_worker("w10")
    assert outcome.ref is not None
    subprocess.run(["git", "-C", str(repo.remote), "branch", "-q", "-D", "fleet/w10"], check=True)
    git(repo.path, "branch", "-q", "-D", "fleet/w10")
    git(repo.path, "gc", "-q", "--prune=now")
    assert git(repo.path, "cat-file", "-t", head) == "commit"
    assert os.fspath(path) not in git(repo.path, "worktree", "list")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "expected"), [("y\n", True), ("yes\n", True), ("\n", False),
                                                  ("n\n", False)])
def test_confirm_on_a_terminal(answer: str, expected: bool) -> None:
    out = _Tty()
    assert confirm_on_tty("retire? [y/N] ", stdin=_Tty(answer), stdout=out) is expected
    assert out.getvalue() == "retire? [y/N] "
    assert confirm_on_tty("retire?", stdin=io.StringIO(answer), stdout=out) is None
