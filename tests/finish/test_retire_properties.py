"""Property: over random git states, retire never removes a worktree whose work is not safely on
the remote, and always removes one whose work is.

"Safely on the remote" is decided here without fleet: the worktree has nothing modified, staged or
untracked (ignored plain files do not count), HEAD is on a branch with an upstream, and the bare
origin itself has HEAD in the history of that upstream branch; and nothing git does not show
holds work: no edit hidden by an index flag or a stale stat cache, no ignored nested repository
with commits found nowhere else, no commit only a worktree-private ref reaches, no process
running in the worktree. A merely touched file (a stat-dirty index) and a sparse checkout's
absent file are no change.

Each example is a fresh repository with a local bare origin; a refused worktree must be left
byte for byte as it was ("0 lost"). ``FLEET_PROPERTY_EXAMPLES`` sets how many states are tried
(200 by default)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs
import pytest
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


#: Edits git status does not show; the first two of these lose nothing.
HIDDEN = (None, "touched", "sparse absent", "skip-worktree edit", "assume-unchanged edit",
          "stat-cache edit")
SAFE_HIDDEN = frozenset({None, "touched", "sparse absent"})
#: Work git ignores.
LEFTOVERS = (None, "build output", "nested repo pushed", "scratch clone", "nested repo unpushed",
             "nested repo and its remote", "bare backup with a commit of its own")
SAFE_LEFTOVERS = frozenset({None, "build output", "nested repo pushed", "scratch clone"})
#: Worktree-private refs.
PRIVATE = (None, "refs/worktree at HEAD", "bisect refs at pushed commits", "refs/worktree unique",
           "refs/bisect unique", "per-worktree stash, older entry unique", "MERGE_HEAD unique")
SAFE_PRIVATE = frozenset({None, "refs/worktree at HEAD", "bisect refs at pushed commits"})


@attrs.frozen
class GitState:
    story: str
    commits: int
    dirt: frozenset[str]
    ignored: bool
    hidden: str | None = None
    leftover: str | None = None
    private: str | None = None
    process: bool = False

    def __getattr__(self, name: str) -> bool:
        if name in DIRT:
            return name in self.dirt
        raise AttributeError(name)


def mostly_absent(variants: tuple[str | None, ...]) -> st.SearchStrategy[str | None]:
    """None two times in three, else one of the variants (safe and unsafe alike)."""
    return st.sampled_from((None,) * (2 * (len(variants) - 1)) + variants[1:])


git_states = st.builds(
    GitState,
    # a pushed branch half the time, so that the safe states (with every harmless variant of
    # the hostile dimensions below) are about a fifth of all and both outcomes are exercised
    story=st.one_of(st.just("pushed"), st.sampled_from(REMOTE_STORIES)),
    commits=st.integers(1, 3),
    dirt=st.one_of(
        st.just(frozenset()), st.just(frozenset()),  # clean two times in three
        st.frozensets(st.sampled_from(DIRT), min_size=1, max_size=3),
    ),
    ignored=st.booleans(),
    hidden=mostly_absent(HIDDEN),
    leftover=mostly_absent(LEFTOVERS),
    private=mostly_absent(PRIVATE),
    process=st.integers(0, 9).map(lambda n: n == 0),
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
    commit(wt, "hidden.txt", "hidden\n", "a file an index flag may hide")
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
    build_hidden(wt, s.hidden)
    build_leftover(root, wt, s.leftover)
    build_private(wt, s.private)
    return repo.path, repo.remote, wt, upstream_branch


def build_hidden(wt: Path, hidden: str | None) -> None:
    target = wt / "hidden.txt"
    if hidden == "touched":
        later = time.time() + 5
        os.utime(target, (later, later))
    elif hidden == "sparse absent":
        git(wt, "update-index", "--skip-worktree", "hidden.txt")
        target.unlink()
    elif hidden in ("skip-worktree edit", "assume-unchanged edit"):
        git(wt, "update-index", f"--{hidden.removesuffix(' edit')}", "hidden.txt")
        target.write_text("edited where git status does not look\n")
    elif hidden == "stat-cache edit":
        git(wt, "config", "core.trustctime", "false")
        past = int(time.time()) - 60
        os.utime(target, (past, past))
        # exit 1 when another file is modified too: the refresh of hidden.txt still happens
        subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=wt, check=False,
                       capture_output=True)
        target.write_text("HIDDEN\n")  # same size, same mtime: the stat cache vouches for it
        os.utime(target, (past, past))


def exclude(wt: Path, pattern: str) -> None:
    info = Path(git(wt, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "info"
    info.mkdir(exist_ok=True)
    with (info / "exclude").open("a") as fh:
        fh.write(f"{pattern}\n")


def nested(path: Path, remote: Path | None) -> None:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "lib.txt").write_text("nested\n")
    git(path, "add", "lib.txt")
    git(path, "commit", "-q", "-m", "nested work")
    if remote is not None:
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        git(path, "remote", "add", "origin", str(remote))
        git(path, "push", "-q", "-u", "origin", "HEAD")


def build_leftover(root: Path, wt: Path, leftover: str | None) -> None:
    if leftover is None:
        return
    exclude(wt, "/vendor/")
    vendor = wt / "vendor"
    if leftover == "build output":
        (vendor / "out" / "obj").mkdir(parents=True)
        (vendor / "out" / "obj" / "a.o").write_bytes(b"\0" * 4096)
        (vendor / "cache.bin").write_bytes(b"c" * 100)
    elif leftover == "nested repo pushed":
        nested(vendor / "lib", root / "lib-origin.git")
    elif leftover == "nested repo unpushed":
        nested(vendor / "lib", None)
    elif leftover == "nested repo and its remote":
        nested(vendor / "lib", vendor / "lib-origin.git")
    elif leftover == "scratch clone":
        subprocess.run(["git", "clone", "-q", "--no-local", str(wt), str(vendor / "scratch")],
                       check=True, capture_output=True)
        git(vendor / "scratch", "remote", "remove", "origin")
    elif leftover == "bare backup with a commit of its own":
        vendor.mkdir()
        subprocess.run(["git", "clone", "-q", "--bare", str(wt), str(vendor / "backup.git")],
                       check=True, capture_output=True)
        bare_dir = vendor / "backup.git"
        tree = git(bare_dir, "rev-parse", "HEAD^{tree}")
        own = git(bare_dir, "commit-tree", tree, "-p", "HEAD", "-m", "only in the backup")
        git(bare_dir, "update-ref", "refs/heads/backup-only", own)


def build_private(wt: Path, private: str | None) -> None:
    if private is None:
        return
    head = git(wt, "rev-parse", "HEAD")
    own = git(wt, "commit-tree", git(wt, "rev-parse", "HEAD^{tree}"), "-p", head, "-m", "private")
    if private == "refs/worktree at HEAD":
        git(wt, "update-ref", "refs/worktree/mark", head)
    elif private == "bisect refs at pushed commits":
        git(wt, "update-ref", "refs/bisect/good-1", "main")
        git(wt, "update-ref", "refs/bisect/bad", head)
    elif private == "refs/worktree unique":
        git(wt, "update-ref", "refs/worktree/experiment", own)
    elif private == "refs/bisect unique":
        git(wt, "update-ref", "refs/bisect/bad", own)
    elif private == "per-worktree stash, older entry unique":
        git(wt, "update-ref", "--create-reflog", "-m", "one", "refs/worktree/stash", own)
        git(wt, "update-ref", "-m", "two", "refs/worktree/stash", head)
    elif private == "MERGE_HEAD unique":
        gitdir = Path(git(wt, "rev-parse", "--absolute-git-dir"))
        (gitdir / "MERGE_HEAD").write_text(own + "\n")


def safe_on_remote(remote: Path, wt: Path, s: GitState, upstream_branch: str) -> bool:
    """The oracle: computed from the state and the bare origin, not from fleet."""
    if s.modified or s.staged or s.untracked or s.deleted or s.detached:
        return False
    if s.story == "never pushed":
        return False
    if s.hidden not in SAFE_HIDDEN or s.leftover not in SAFE_LEFTOVERS:
        return False
    if s.private not in SAFE_PRIVATE or s.process:
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


EXAMPLES = int(os.environ.get("FLEET_PROPERTY_EXAMPLES", "200"))


@settings(
    max_examples=EXAMPLES,
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
@example(s=GitState(story="pushed", commits=1, dirt=frozenset(), ignored=False, hidden="touched"))
@example(s=GitState(story="pushed", commits=1, dirt=frozenset(), ignored=False,
                    hidden="skip-worktree edit"))
@example(s=GitState(story="pushed", commits=1, dirt=frozenset(), ignored=True,
                    leftover="nested repo unpushed"))
@example(s=GitState(story="pushed", commits=1, dirt=frozenset(), ignored=True,
                    private="per-worktree stash, older entry unique"))
@example(s=GitState(story="pushed", commits=1, dirt=frozenset(), ignored=False, process=True))
def test_retire_removes_exactly_the_worktrees_whose_work_is_on_the_remote(s: GitState) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        main_repo, remote, wt, upstream_branch = build(root, s)
        safe = safe_on_remote(remote, wt, s, upstream_branch)
        head = git(wt, "rev-parse", "HEAD")
        before = files(wt)
        proc = None
        if s.process:
            proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                    cwd=wt)
        try:
            with Fleet(root / "home") as fleet:
                fleet.register("w", worktree=wt, branch="fleet/w", base="main")
                claim(fleet, "w")
                outcome = Retirer(fleet).retire_worker("w")
                last = fleet.log("w")[-1]
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()
        STATES_TRIED.append(safe)
        if safe:
            assert outcome.retired, (s, outcome.reason)
            assert not wt.exists()
            assert isinstance(last, Retired)
            assert git(main_repo, "rev-parse", last.ref or "?") == head
        else:
            assert not outcome.retired, s
            assert outcome.reason and outcome.reason.strip(), s
            assert not outcome.reason.rstrip().endswith(":"), outcome.reason
            assert wt.exists()
            assert files(wt) == before  # not a byte lost
            assert ls_refs_in(main_repo) == []


#: one entry per generated state (True when its work was safe), for the count in the summary
STATES_TRIED: list[bool] = []


def test_the_generated_states_had_both_outcomes() -> None:
    """Run after the property (file order): its states were both safe and unsafe, and the
    count is printed (``pytest -s``) for the record."""
    if not STATES_TRIED:
        pytest.skip("the property did not run in this session")
    safe = sum(STATES_TRIED)
    print(f"\nretire property: {len(STATES_TRIED)} git states tried, {safe} safe and retired, "
          f"{len(STATES_TRIED) - safe} unsafe and kept byte for byte (0 lost)")
    assert 0 < safe < len(STATES_TRIED)


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
