"""Work git ignores: an ignored nested repository with commits of its own, and commits that only
worktree-private refs reach (refs/worktree/*, bisect refs, a per-worktree stash, an operation in
progress), refuse and are named. Ignored plain files may go; ask mode lists them first."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._cli import main
from tests.conftest import Repo, git
from tests.finish._helpers import exclude, finished_worker, retire


def nested_repo(path: Path, *, pushed: bool, remote: Path | None = None) -> None:
    """A repository at ``path`` with one commit, pushed to ``remote`` when asked."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "lib.txt").write_text("nested\n")
    git(path, "add", "lib.txt")
    git(path, "commit", "-q", "-m", "nested work")
    if pushed:
        assert remote is not None
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        git(path, "remote", "add", "origin", str(remote))
        git(path, "push", "-q", "-u", "origin", "HEAD")


def test_an_ignored_nested_repository_with_its_own_commits_refuses(
    repo: Repo, home: Path
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        exclude(wt, "vendor/")
        nested_repo(wt / "vendor" / "lib", pushed=False)
        assert git(wt, "status", "--porcelain") == ""
        outcome = retire(fleet, "w")
    assert not outcome.retired
    assert "vendor/lib" in (outcome.reason or "")
    assert "nested repository" in (outcome.reason or "")
    assert (wt / "vendor" / "lib" / "lib.txt").exists()


def test_an_ignored_bare_repository_refuses(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        exclude(wt, "*.git/")
        subprocess.run(["git", "clone", "-q", "--bare", str(wt), str(wt / "backup.git")],
                       check=True, capture_output=True)
        # a commit that only the backup has
        tree = git(wt / "backup.git", "rev-parse", "HEAD^{tree}")
        extra = git(wt / "backup.git", "commit-tree", tree, "-p", "HEAD", "-m", "only here")
        git(wt / "backup.git", "update-ref", "refs/heads/only-here", extra)
        outcome = retire(fleet, "w")
    assert not outcome.retired
    assert "backup.git" in (outcome.reason or "")


def test_an_ignored_nested_repository_whose_commits_are_pushed_may_go(
    repo: Repo, home: Path
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        exclude(wt, "vendor/")
        nested_repo(wt / "vendor" / "lib", pushed=True, remote=repo.path.parent / "lib.git")
        outcome = retire(fleet, "w")
    assert outcome.retired, outcome.reason


def test_a_nested_repository_and_its_only_remote_both_ignored_refuse(
    repo: Repo, home: Path
) -> None:
    """The remote that holds the nested commits is itself inside the worktree: both would go."""
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        exclude(wt, "vendor/")
        nested_repo(wt / "vendor" / "lib", pushed=True, remote=wt / "vendor" / "lib.git")
        outcome = retire(fleet, "w")
    assert not outcome.retired
    assert "vendor/lib.git" in (outcome.reason or "")


def test_a_scratch_clone_of_this_repository_may_go(repo: Repo, home: Path) -> None:
    """Its commits are this repository's own, kept by refs the delete leaves in place."""
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        exclude(wt, "scratch/")
        subprocess.run(["git", "clone", "-q", "--no-local", str(repo.path), str(wt / "scratch")],
                       check=True, capture_output=True)
        git(wt / "scratch", "remote", "remove", "origin")  # no remote-tracking refs left
        outcome = retire(fleet, "w")
    assert outcome.retired, outcome.reason


def test_ignored_plain_files_may_go(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        exclude(wt, "build/", "*.log", "__pycache__/")
        (wt / "build" / "deep").mkdir(parents=True)
        (wt / "build" / "deep" / "out.bin").write_bytes(b"x" * 5000)
        (wt / "app.log").write_text("log\n")
        outcome = retire(fleet, "w")
    assert outcome.retired, outcome.reason
    assert outcome.ignored is not None
    assert outcome.ignored.files == 2
    assert outcome.ignored.largest[0].path == "build/"


def private_commit(wt: Path, message: str) -> str:
    tree = git(wt, "rev-parse", "HEAD^{tree}")
    return git(wt, "commit-tree", tree, "-p", "HEAD", "-m", message)


@pytest.mark.parametrize("ref", ["refs/worktree/experiment", "refs/bisect/bad",
                                 "refs/rewritten/onto"])
def test_commits_only_a_worktree_private_ref_reaches_refuse(
    repo: Repo, home: Path, ref: str
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        git(wt, "update-ref", ref, private_commit(wt, "private"))
        outcome = retire(fleet, "w")
    assert not outcome.retired
    assert ref in (outcome.reason or "")
    assert wt.exists()


def test_a_per_worktree_stash_refuses_even_for_an_older_entry(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        old = private_commit(wt, "stash 1")
        git(wt, "update-ref", "--create-reflog", "-m", "one", "refs/worktree/stash", old)
        head = git(wt, "rev-parse", "HEAD")
        git(wt, "update-ref", "-m", "two", "refs/worktree/stash", head)  # top: pushed
        outcome = retire(fleet, "w")
    assert not outcome.retired
    assert "refs/worktree/stash" in (outcome.reason or "")


def test_a_worktree_private_ref_at_a_pushed_commit_may_go(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        git(wt, "update-ref", "refs/worktree/mark", "HEAD")
        git(wt, "update-ref", "refs/bisect/good-1", "HEAD~1")
        outcome = retire(fleet, "w")
    assert outcome.retired, outcome.reason


def test_a_merge_in_progress_with_a_commit_found_nowhere_else_refuses(
    repo: Repo, home: Path
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        gitdir = Path(git(wt, "rev-parse", "--absolute-git-dir"))
        (gitdir / "MERGE_HEAD").write_text(private_commit(wt, "theirs") + "\n")
        outcome = retire(fleet, "w")
    assert not outcome.retired
    assert "MERGE_HEAD" in (outcome.reason or "")


def test_ask_mode_lists_what_will_be_deleted(
    repo: Repo, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        exclude(wt, "node_modules/", "*.log")
        (wt / "node_modules" / "pkg").mkdir(parents=True)
        (wt / "node_modules" / "pkg" / "index.js").write_bytes(b"x" * 300_000)
        (wt / "debug.log").write_text("log\n")
    assert main(["retire", "w"]) == 4
    out = capsys.readouterr().out
    assert "2 ignored files" in out
    assert "node_modules/" in out and "293 KiB" in out
    assert out.index("node_modules/") < out.index("w: kept: not confirmed")
    assert main(["retire", "w", "--yes", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    outcome = data["outcomes"][0]
    assert outcome["retired"] is True
    assert outcome["ignored"]["files"] == 2
    assert outcome["ignored"]["largest"][0]["path"] == "node_modules/"
