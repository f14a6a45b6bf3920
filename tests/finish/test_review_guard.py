"""A blind review changes nothing, and fleet proves it: the worktree, its git state and the
directories around it are compared before and after the review; what a reviewer changed fails
the check, is reported and is taken back. The reviewer here is a stand-in program that writes
where a real one's `git diff --output=...` wrote."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._blind import READ_ONLY_TOOLS, Reviewer, findings_of, run_review
from fleet._check import check_worker
from fleet._git import Git
from fleet._review_guard import Change, Root, Snapshot, compare, outside_roots, scan, take
from tests.conftest import Repo, git

from ._helpers import finished_worker

RESULT = {"type": "result", "subtype": "success", "is_error": False, "session_id": "rev",
          "result": "CRITERION 1: PASS: fine", "num_turns": 1}


def _reviewer(tmp_path: Path, body: str) -> Reviewer:
    """A `claude` that runs ``body`` (Python, in the worktree) and then passes criterion 1;
    it records its arguments in a folder of its own."""
    tmp_path = tmp_path / "tools"
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "fake-claude"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, pathlib, subprocess, sys\n"
        f"pathlib.Path({str(tmp_path / 'argv.json')!r}).write_text(json.dumps(sys.argv))\n"
        f"{body}\n"
        f"print(json.dumps({RESULT!r}))\n")
    script.chmod(0o755)
    return Reviewer(endpoint="http://127.0.0.1:9", key_from="env:REVIEW_KEY",
                    claude=str(script))


def _sig(*parts: object) -> tuple[object, ...]:
    return tuple(parts)


def test_compare_names_every_added_removed_and_changed_path() -> None:
    before = Snapshot(git={"HEAD": "a", "ref refs/heads/x": "1", "index": "i"},
                      files={"worktree": {"a.txt": _sig("file", 1), "gone": _sig("file", 2)},
                             "home": {}})
    after = Snapshot(git={"HEAD": "b", "ref refs/heads/y": "1", "index": "i"},
                     files={"worktree": {"a.txt": _sig("file", 9), "new": _sig("file", 3)},
                            "home": {"x": _sig("file", 4)}})
    assert compare(before, before) == []
    assert [c.describe() for c in compare(before, after)] == [
        "changed HEAD", "removed ref refs/heads/x", "added ref refs/heads/y",
        "changed worktree:a.txt", "removed worktree:gone", "added worktree:new",
        "added home:x"]
    assert Change(where="home", path="x", what="added").describe() == "added home:x"


def test_a_write_shows_in_the_stat_even_with_the_same_size_and_time(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("aaaa")
    root = Root(path=str(tmp_path), label="t", deep=True)
    first = scan(root)
    st = os.stat(tmp_path / "f")
    (tmp_path / "f").write_text("bbbb")
    os.utime(tmp_path / "f", ns=(st.st_atime_ns, st.st_mtime_ns))  # size and mtime put back
    assert scan(root) != first  # the change time cannot be put back


def test_directories_others_create_are_not_counted_where_only_files_are(tmp_path: Path) -> None:
    root = Root(path=str(tmp_path), label="t", files_only=True)
    first = scan(root)
    (tmp_path / "another-workers-worktree").mkdir()
    assert scan(root) == first
    (tmp_path / "x").write_text("written")
    assert set(scan(root)) == {"x"}


def test_the_git_state_holds_head_the_refs_the_index_and_the_config(
    repo: Repo, tmp_path: Path
) -> None:
    g = Git()
    roots = outside_roots(repo.path, fleet_home=tmp_path / "fh", user_home=None,
                          scratch=tmp_path / "scratch")
    before = take(g, repo.path, roots)
    assert before.git["HEAD"] and before.git["HEAD is"] == "refs/heads/main"
    assert "ref refs/heads/main" in before.git
    for change in (("branch", "-q", "extra"), ("config", "core.pager", "evil"),
                   ("update-index", "--skip-worktree", "README.md")):
        git(repo.path, *change)
        after = take(g, repo.path, roots)
        assert compare(before, after), change
        before = after


def test_a_reviewer_that_writes_fails_the_check_and_everything_is_undone(
    home: Path, repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEW_KEY", "k")
    user_home = Path(os.environ["HOME"])
    with Fleet(home) as fleet:
        wt = finished_worker(fleet, repo, "w1")
        head = git(wt, "rev-parse", "HEAD")
        refs = git(wt, "for-each-ref", "refs/heads", "refs/remotes", "refs/tags")
        reviewer = _reviewer(tmp_path, (
            "pathlib.Path('feature.txt').write_text('overwritten')\n"  # a committed file
            "pathlib.Path('stray.txt').write_text('new')\n"
            "pathlib.Path('../outside.txt').write_text('beside')\n"
            "pathlib.Path(os.environ['HOME'], 'x').write_text('home')\n"
            "subprocess.run(['git', 'branch', '-q', 'reviewer-branch'], check=True)\n"
            "subprocess.run(['git', 'commit', '-q', '--allow-empty', '-m', 'r'], check=True)\n"
        ))
        result = check_worker(fleet, "w1", blind=(reviewer, ["it works"]))
        state = fleet.state("w1")

    assert result.verdict == "failed"
    (changed, *rest) = result.findings
    assert rest == []  # criterion 1 passed: only the change fails it
    assert changed.startswith("blind review: a read-only review made changes: ")
    assert "(undone; kept at refs/fleet-review/w1/" in changed
    for what in ("worktree:feature.txt", "worktree:stray.txt", "outside.txt", "home:x",
                 "ref refs/heads/reviewer-branch", "HEAD"):
        assert what in changed, what
    assert state.findings == result.findings
    # Nothing it wrote is left; the worktree is as it was, and clean.
    assert git(wt, "rev-parse", "HEAD") == head
    assert git(wt, "for-each-ref", "refs/heads", "refs/remotes", "refs/tags") == refs
    assert git(wt, "status", "--porcelain", "--untracked-files=all") == ""
    assert (wt / "feature.txt").read_text() == "work\n"
    assert not (wt.parent / "outside.txt").exists() and not (user_home / "x").exists()
    # Nothing is deleted, though: what it wrote is kept aside, out of the way.
    (ref,) = git(wt, "for-each-ref", "--format=%(refname)", "refs/fleet-review/"
                 ).split()
    assert git(wt, "show", f"{ref}:feature.txt") == "overwritten"
    assert git(wt, "show", f"{ref}:stray.txt") == "new"
    (kept,) = (home / "review-leftovers").iterdir()
    assert (kept / "beside-the-worktree" / "outside.txt").read_text() == "beside"
    assert (kept / "home" / "x").read_text() == "home"


def test_a_reviewer_that_reads_only_passes_and_gets_the_history_in_files(
    home: Path, repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEW_KEY", "k")
    with Fleet(home) as fleet:
        wt = finished_worker(fleet, repo, "w2")
        reviewer = _reviewer(tmp_path, (
            "prompt = sys.argv[-1]\n"
            "paths = [l.split(': ')[0].lstrip('- ') for l in prompt.splitlines() "
            "if l.startswith('- /')]\n"
            f"pathlib.Path({str(tmp_path / 'tools' / 'seen.json')!r}).write_text(json.dumps("
            "[[p, pathlib.Path(p).read_text(), os.access(p, os.W_OK)] for p in paths]))\n"
        ))
        review = run_review(fleet.state("w2"), ["it works"], reviewer, base="main",
                            fleet_home=fleet.home)
    assert review.changed == () and [v.passed for v in review.verdicts] == [True]
    (log, log_text, _), (diff, diff_text, _) = json.loads(
        (tmp_path / "tools" / "seen.json").read_text())
    assert log.endswith("log.txt") and "feature.txt | 1 +" in log_text
    assert diff.endswith("changes.diff") and "+work" in diff_text
    assert not Path(log).exists()  # the scratch is gone after the review
    argv = json.loads((tmp_path / "tools" / "argv.json").read_text())
    assert "--tools=Read,Grep,Glob" in argv and "--strict-mcp-config" in argv
    assert f"--add-dir={Path(diff).parent}" in argv
    assert [a for a in argv if a.startswith("--allowedTools")] == [
        f"--allowedTools={t}" for t in READ_ONLY_TOOLS]
    assert not any("Bash(" in a for a in argv)
    assert git(wt, "status", "--porcelain") == ""


def test_the_findings_say_what_could_not_be_undone() -> None:
    assert findings_of([], changed=("added home:x",), kept=("/k/home/x",)) == (
        "blind review: a read-only review made changes: added home:x (undone; kept at "
        "/k/home/x)",)
    assert findings_of([], changed=("added home:x",), left=("changed /h/.bashrc (it existed "
                                                            "before the review)",)) == (
        "blind review: a read-only review made changes: added home:x; could not undo: "
        "changed /h/.bashrc (it existed before the review)",)


def test_the_input_files_are_read_only_for_the_reviewer(tmp_path: Path, repo: Repo) -> None:
    from fleet._blind import render_input

    git(repo.path, "commit", "-q", "--allow-empty", "-m", "second")
    out = render_input(Git(), repo.path, "HEAD~1", tmp_path / "input")
    assert "second" in out.summary
    assert stat.S_IMODE(os.stat(out.diff).st_mode) == 0o400
    assert stat.S_IMODE(os.stat(tmp_path / "input").st_mode) == 0o500
    (tmp_path / "input").chmod(0o700)
