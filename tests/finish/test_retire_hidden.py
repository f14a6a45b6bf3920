"""Retire sees every difference between the worktree and HEAD, whatever git's index says: edits
that skip-worktree, assume-unchanged or a stale stat cache hide from ``git status`` refuse, the
snapshot holds what is really on disk, and a merely touched (stat-dirty) index is no reason to
refuse."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._git import Git, GitError
from tests.conftest import Repo, git
from tests.finish._helpers import finished_worker, retire


@pytest.mark.parametrize("flag", ["--skip-worktree", "--assume-unchanged"])
def test_an_edit_hidden_by_an_index_flag_refuses(repo: Repo, home: Path, flag: str) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        git(wt, "update-index", flag, "feature.txt")
        (wt / "feature.txt").write_text("an edit git status does not show\n")
        assert git(wt, "status", "--porcelain") == ""  # git itself sees nothing
        outcome = retire(fleet, "w")
    assert not outcome.retired
    assert "modified file feature.txt" in (outcome.reason or "")
    assert flag.strip("-") in (outcome.reason or "")
    assert (wt / "feature.txt").read_text() == "an edit git status does not show\n"


def test_an_edit_the_stat_cache_vouches_for_refuses(repo: Repo, home: Path) -> None:
    """Same size, old mtime, ctime not trusted: git's stat check says unchanged."""
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        git(wt, "config", "core.trustctime", "false")
        target = wt / "feature.txt"
        # an mtime well before the index's, so git does not treat the entry as racily clean
        past = int(time.time()) - 60
        os.utime(target, (past, past))
        git(wt, "update-index", "--refresh")
        target.write_text("WORK\n")  # same size as "work\n"
        os.utime(target, (past, past))
        assert git(wt, "status", "--porcelain") == ""
        outcome = retire(fleet, "w")
    assert not outcome.retired
    assert "modified file feature.txt" in (outcome.reason or "")
    assert target.read_text() == "WORK\n"


def test_a_skip_worktree_file_absent_from_a_sparse_checkout_is_no_change(
    repo: Repo, home: Path
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        git(wt, "update-index", "--skip-worktree", "README.md")
        (wt / "README.md").unlink()  # what a sparse checkout does: the file is not there
        outcome = retire(fleet, "w")
    assert outcome.retired, outcome.reason


def test_the_snapshot_holds_the_real_worktree_content(repo: Repo, home: Path) -> None:
    """Hidden edits, staged-only content and untracked files all land in the snapshot commit."""
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
    head = git(wt, "rev-parse", "HEAD")
    git(wt, "update-index", "--skip-worktree", "feature.txt")
    (wt / "feature.txt").write_text("hidden edit\n")
    (wt / "README.md").write_text("staged\n")
    git(wt, "add", "README.md")
    (wt / "README.md").write_text("then edited again\n")
    (wt / "new.txt").write_text("untracked\n")
    sha = Git().snapshot(wt, "refs/fleet/w/test", "snapshot")
    assert sha != head
    assert git(repo.path, "show", "refs/fleet/w/test:feature.txt") == "hidden edit"
    assert git(repo.path, "show", "refs/fleet/w/test:README.md") == "then edited again"
    assert git(repo.path, "show", "refs/fleet/w/test:new.txt") == "untracked"
    assert git(repo.path, "rev-parse", "refs/fleet/w/test^1") == head
    assert git(repo.path, "show", "refs/fleet/w/test^2:README.md") == "staged"
    # nothing in the worktree or its index was changed by saving it
    assert git(wt, "ls-files", "-v", "feature.txt").startswith("S ")
    assert git(wt, "diff", "--cached", "--name-only") == "README.md"


def test_the_snapshot_of_a_clean_worktree_is_its_head(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
    assert Git().snapshot(wt, "refs/fleet/w/clean", "snapshot") == git(wt, "rev-parse", "HEAD")




def test_a_clean_worker_on_a_stat_dirty_index_retires_on_the_first_try(
    repo: Repo, home: Path
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        later = time.time() + 5
        os.utime(wt / "feature.txt", (later, later))  # touched, content unchanged
        outcome = retire(fleet, "w")
    assert outcome.retired, outcome.reason
    assert not wt.exists()


def test_a_git_failure_that_prints_nothing_still_says_what_failed(tmp_path: Path) -> None:

    with pytest.raises(GitError) as caught:
        Git().run(tmp_path, "diff", "--no-index", "--quiet", "/dev/null", os.devnull,
                  ok_codes=(1,))
    assert not str(caught.value).rstrip().endswith(":")
