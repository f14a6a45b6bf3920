"""Changes racing the delete: a commit or a file that lands between fleet's last check and the
delete is never reported as pushed or clean; the outcome says what happened."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fleet import Fleet, Retired
from fleet._report import build_report, format_line
from fleet._retire import Retirer
from fleet.adapters import WorktreeDeleter
from fleet.adapters._base import Workspace
from tests.conftest import Repo, git
from tests.finish._helpers import finished_worker, ls_refs, retire


class RacingDeleter(WorktreeDeleter):
    """Does something to the worktree after fleet's last check, then deletes for real."""

    def __init__(self, race: str, repo: Repo) -> None:
        super().__init__()
        self.race = race
        self.repo = repo
        self.failed: str | None = None

    def delete(self, workspace: Workspace) -> None:
        wt = workspace.worktree
        if self.race == "file":
            (wt / "late.txt").write_text("late\n")
        elif self.race == "commit":
            (wt / "late.txt").write_text("late\n")
            git(wt, "add", "late.txt")
            done = subprocess.run(["git", "commit", "-q", "-m", "late"], cwd=wt,
                                  capture_output=True, text=True, check=False)
            self.failed = done.stderr if done.returncode else None
        elif self.race == "branch moved":
            tree = git(wt, "rev-parse", "HEAD^{tree}")
            late = git(wt, "commit-tree", tree, "-p", "HEAD", "-m", "late")
            git(self.repo.path, "update-ref", f"refs/heads/{workspace.branch}", late)
        super().delete(workspace)


def test_a_file_landing_after_the_last_check_is_not_reported_clean(
    repo: Repo, home: Path
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        racer = RacingDeleter("file", repo)
        outcome = retire(fleet, "w", deleter_factory=lambda *a, **k: racer)
    assert not outcome.retired
    assert "untracked file late.txt" in (outcome.reason or "")
    assert (wt / "late.txt").read_text() == "late\n"


def test_a_commit_in_the_worktree_after_the_last_check_cannot_be_lost(
    repo: Repo, home: Path
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        head = git(wt, "rev-parse", "HEAD")
        racer = RacingDeleter("commit", repo)
        outcome = retire(fleet, "w", deleter_factory=lambda *a, **k: racer)
    # git could not commit while fleet held the worktree's HEAD; the staged file stopped the
    # delete, and the outcome says so
    assert racer.failed and "HEAD.lock" in racer.failed
    assert not outcome.retired
    assert "staged file late.txt" in (outcome.reason or "")
    assert git(wt, "rev-parse", "HEAD") == head
    assert not (Path(git(wt, "rev-parse", "--absolute-git-dir")) / "HEAD.lock").exists()


def test_a_branch_that_moves_after_the_last_check_is_not_reported_pushed(
    repo: Repo, home: Path
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        racer = RacingDeleter("branch moved", repo)
        outcome = retire(fleet, "w", deleter_factory=lambda *a, **k: racer)
        last = fleet.log("w")[-1]
        line = format_line(build_report(fleet, ["w"])[0])
    assert outcome.retired  # the worktree is gone: nothing of it was lost
    assert not wt.exists()
    late = git(repo.path, "rev-parse", "refs/heads/fleet/w")
    assert outcome.warnings and late[:7] in outcome.warnings[0]
    assert "not on the remote" in outcome.warnings[0]
    assert isinstance(last, Retired) and last.note == outcome.warnings[0]
    assert "clean and pushed" not in line and late[:7] in line
    assert ls_refs(repo) == [outcome.ref]


def test_refusal_reasons_are_never_empty(repo: Repo, home: Path) -> None:
    """Whatever goes wrong, the refusal names it."""

    class Mute:
        def delete(self, workspace: object) -> None:
            raise OSError()

    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        outcome = retire(fleet, "w", deleter_factory=lambda *a, **k: Mute())
    assert not outcome.retired and wt.exists()
    reason = outcome.reason or ""
    assert reason.startswith("delete refused: ") and len(reason) > len("delete refused: ") + 3


def test_a_refusal_without_words_still_gets_a_sentence(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        finished_worker(fleet, repo, "w")
        outcome = Retirer(fleet)._refuse(fleet.state("w"), " \n ")
        state = fleet.state("w")
    assert outcome.reason and outcome.reason.strip()
    assert state.refused == outcome.reason


def test_a_host_that_deletes_and_then_fails_is_retired_with_its_error(
    repo: Repo, home: Path
) -> None:
    class DeletesThenFails(WorktreeDeleter):
        def delete(self, workspace: Workspace) -> None:
            super().delete(workspace)
            raise OSError("connection reset after the delete")

    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        outcome = retire(fleet, "w", deleter_factory=lambda *a, **k: DeletesThenFails())
        state = fleet.state("w")
    assert not wt.exists()
    assert outcome.retired and state.state == "retired"
    assert outcome.warnings == ("the adapter reported an error: connection reset after the delete",)


def test_a_git_command_holding_the_worktrees_head_refuses(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        lock = Path(git(wt, "rev-parse", "--absolute-git-dir")) / "HEAD.lock"
        lock.write_text("")  # what a running `git commit` holds
        outcome = retire(fleet, "w")
    assert not outcome.retired and wt.exists()
    assert "git is busy in the worktree" in (outcome.reason or "")
    assert lock.exists()  # not fleet's to remove
