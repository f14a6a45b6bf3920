"""Property: over random git states, retire never removes a worktree whose work is not safely on
the remote, and always removes one whose work is.

"Safely on the remote" is decided here without fleet: the worktree has nothing modified, staged or
untracked (ignored files do not count), HEAD is on a branch with an upstream, and the bare origin
itself has HEAD in the history of that upstream branch."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import attrs
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleet import Fleet, Retired
from fleet._retire import Retirer
from tests.conftest import git, make_repo
from tests.finish._helpers import add_worktree, claim, commit, ls_refs

REMOTE_STORIES = (
    "never pushed",  # no upstream at all
    "pushed",
    "pushed, then more commits",
    "pushed, then amended",
    "squash-merged, remote branch deleted",  # the local tracking ref is stale
    "tracks main, squash-merged there",
    "remote moved on, fetched",
    "remote moved on, not fetched",
    "remote rewound",
    "remote branch deleted and pruned",  # the tracking ref is gone too
)


DIRT = ("modified", "staged", "untracked", "deleted", "detached")


@attrs.frozen
class GitState:
    story: str
    commits: int
    dirt: frozenset[str]
    ignored: bool

    def __getattr__(self, name: str) -> bool:
        if name in DIRT:
            return name in self.dirt
        raise AttributeError(name)


git_states = st.builds(
    GitState,
    story=st.sampled_from(REMOTE_STORIES),
    commits=st.integers(1, 3),
    # about half the examples are clean, so both outcomes are exercised
    dirt=st.one_of(
        st.just(frozenset()), st.frozensets(st.sampled_from(DIRT), min_size=1, max_size=3)
    ),
    ignored=st.booleans(),
)


def bare(remote: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=remote, check=True, capture_output=True, text=True
    ).stdout.strip()


def build(root: Path, s: GitState) -> tuple[Path, Path, Path, str]:
    """Make the state; return the main repo, the origin, the worktree and the upstream branch."""
    repo = make_repo(root)
    wt = add_worktree(repo, "w")
    branch = "fleet/w"
    commit(wt, ".gitignore", "*.log\n", "ignore logs")
    for i in range(s.commits):
        commit(wt, f"f{i}.txt", f"{i}\n", f"work {i}")
    upstream_branch = branch
    story = s.story
    if story == "tracks main, squash-merged there":
        upstream_branch = "main"
        git(wt, "branch", "-q", "--set-upstream-to", "origin/main")
        git(repo.path, "merge", "-q", "--squash", branch)
        git(repo.path, "commit", "-q", "-m", "squash")
        git(repo.path, "push", "-q", "origin", "main")
        git(wt, "fetch", "-q", "origin")
    elif story != "never pushed":
        git(wt, "push", "-q", "-u", "origin", "HEAD")
        if story == "pushed, then more commits":
            commit(wt, "more.txt", "more\n", "more")
        elif story == "pushed, then amended":
            git(wt, "commit", "-q", "--amend", "-m", "amended")
        elif story == "squash-merged, remote branch deleted":
            git(repo.path, "merge", "-q", "--squash", branch)
            git(repo.path, "commit", "-q", "-m", "squash")
            git(repo.path, "push", "-q", "origin", "main")
            bare(repo.remote, "update-ref", "-d", f"refs/heads/{branch}")
        elif story.startswith("remote moved on"):
            head = git(wt, "rev-parse", "HEAD")
            tree = bare(repo.remote, "rev-parse", f"{head}^{{tree}}")
            extra = bare(repo.remote, "commit-tree", tree, "-p", head, "-m", "someone else")
            bare(repo.remote, "update-ref", f"refs/heads/{branch}", extra)
            if story.endswith(", fetched"):
                git(wt, "fetch", "-q", "origin")
        elif story == "remote branch deleted and pruned":
            bare(repo.remote, "update-ref", "-d", f"refs/heads/{branch}")
            git(wt, "fetch", "-q", "--prune", "origin")
        elif story == "remote rewound":
            bare(repo.remote, "update-ref", f"refs/heads/{branch}", f"{branch}~1")
    if s.modified:
        (wt / "f0.txt").write_text("changed\n")
    if s.staged:
        (wt / "staged.txt").write_text("staged\n")
        git(wt, "add", "staged.txt")
    if s.untracked:
        (wt / "notes" / "todo.txt").parent.mkdir()
        (wt / "notes" / "todo.txt").write_text("todo\n")
    if s.deleted:
        (wt / ".gitignore").unlink()
    if s.ignored:
        (wt / "build.log").write_text("log\n")
    if s.detached:
        git(wt, "checkout", "-q", "--detach")
    return repo.path, repo.remote, wt, upstream_branch


def safe_on_remote(remote: Path, wt: Path, s: GitState, upstream_branch: str) -> bool:
    """The oracle: computed from the state and the bare origin, not from fleet."""
    if s.modified or s.staged or s.untracked or s.deleted or s.detached:
        return False
    if s.story == "never pushed":
        return False
    head = git(wt, "rev-parse", "HEAD")
    ref = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{upstream_branch}"],
        cwd=remote, capture_output=True, text=True, check=False,
    )
    if ref.returncode != 0:
        return False
    on_remote = subprocess.run(
        ["git", "merge-base", "--is-ancestor", head, ref.stdout.strip()],
        cwd=remote, capture_output=True, check=False,
    )
    return on_remote.returncode == 0


def files(wt: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(wt)): p.read_bytes()
        for p in sorted(wt.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(wt).parts[:1]
    }


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(s=git_states)
@example(s=GitState(story="pushed", commits=1, dirt=frozenset(), ignored=True))
@example(
    s=GitState(story="remote moved on, not fetched", commits=2, dirt=frozenset(), ignored=False)
)
@example(s=GitState(story="squash-merged, remote branch deleted", commits=1, dirt=frozenset(),
                    ignored=False))
@example(s=GitState(story="pushed", commits=1, dirt=frozenset({"untracked"}), ignored=False))
def test_retire_removes_exactly_the_worktrees_whose_work_is_on_the_remote(s: GitState) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        main_repo, remote, wt, upstream_branch = build(root, s)
        safe = safe_on_remote(remote, wt, s, upstream_branch)
        head = git(wt, "rev-parse", "HEAD")
        before = files(wt)
        with Fleet(root / "home") as fleet:
            fleet.register("w", worktree=wt, branch="fleet/w", base="main")
            claim(fleet, "w")
            outcome = Retirer(fleet).retire_worker("w")
            last = fleet.log("w")[-1]
        if safe:
            assert outcome.retired, (s, outcome.reason)
            assert not wt.exists()
            assert isinstance(last, Retired)
            assert git(main_repo, "rev-parse", last.ref or "?") == head
        else:
            assert not outcome.retired, s
            assert outcome.reason
            assert wt.exists()
            assert files(wt) == before  # not a byte lost
            assert ls_refs_in(main_repo) == []


def ls_refs_in(main_repo: Path) -> list[str]:
    out = git(main_repo, "for-each-ref", "--format=%(refname)", "refs/fleet/")
    return out.split()


def test_the_property_sees_both_outcomes() -> None:
    """The oracle is not trivially one-sided: a plain pushed state is safe, one detail is not."""
    base = GitState(story="pushed", commits=1, dirt=frozenset(), ignored=True)
    with tempfile.TemporaryDirectory() as tmp:
        _, remote, wt, up = build(Path(tmp), base)
        assert safe_on_remote(remote, wt, base, up)
    amended = attrs.evolve(base, story="pushed, then amended")
    with tempfile.TemporaryDirectory() as tmp:
        _, remote, wt, up = build(Path(tmp), amended)
        assert not safe_on_remote(remote, wt, amended, up)


_ = ls_refs  # the helper is shared with the other tests
