"""What deleting a worktree takes with it that ``git status`` does not show.

- Ignored files: build output and caches may go, but the user is told how many and which are
  largest (ask mode lists them before the yes). An ignored directory fleet cannot read refuses:
  what is in it is unknown, and a delete that fails half way leaves half a worktree.
- Ignored nested repositories (a ``.git`` inside an ignored directory, or a bare repository)
  whose commits exist nowhere else: on none of its own remote-tracking refs and not in this
  repository. They refuse, by name.
- Commits only worktree-private refs reach: ``refs/worktree/*`` (a per-worktree stash among
  them, each entry of its reflog counted), ``refs/bisect/*``, ``refs/rewritten/*``, and an
  operation in progress (``MERGE_HEAD``, ``CHERRY_PICK_HEAD``, ...). Those refs live in the
  worktree's own git dir, which the delete removes. They refuse, by name.

Nothing here changes anything; git trouble is a problem (a guard that cannot be evaluated must
not pass), never an exception.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

import attrs

from fleet._git import Git, GitError, printable

#: Ref namespaces git keeps per worktree (in ``.git/worktrees/<name>/refs``).
PRIVATE_REF_PREFIXES: Final = ("refs/worktree/", "refs/bisect/", "refs/rewritten/")
#: Per-worktree pseudorefs that hold a commit while an operation is in progress.
PSEUDOREFS: Final = {
    "MERGE_HEAD": "a merge in progress",
    "CHERRY_PICK_HEAD": "a cherry-pick in progress",
    "REVERT_HEAD": "a revert in progress",
    "REBASE_HEAD": "a rebase in progress",
    "BISECT_HEAD": "a bisect in progress",
}
#: How many of the largest ignored entries are named.
LARGEST: Final = 5
#: How many nested repositories or private refs a reason names before it summarises.
_NAMED: Final = 3


@attrs.frozen(kw_only=True)
class IgnoredEntry:
    """One ignored path as git lists it (a directory wholly ignored ends in ``/``), with the
    bytes and files under it (symlinks are not followed)."""

    path: str
    size: int
    files: int


@attrs.frozen(kw_only=True)
class IgnoredSummary:
    """The ignored files a delete takes: how many, how big, and the largest entries."""

    files: int = 0
    dirs: int = 0
    size: int = 0
    largest: tuple[IgnoredEntry, ...] = ()

    def describe(self) -> str:
        if not self.files and not self.dirs:
            return "no ignored files"
        where = f" ({_plural(self.dirs, 'ignored directory', 'ignored directories')})"
        names = ", ".join(f"{human_size(e.size)} {e.path}" for e in self.largest)
        return (f"{_plural(self.files, 'ignored file')}{where if self.dirs else ''}, "
                f"{human_size(self.size)}" + (f"; largest: {names}" if names else ""))


@attrs.frozen(kw_only=True)
class Leftovers:
    """What a delete would take that git status does not show, and every reason it must not."""

    ignored: IgnoredSummary = IgnoredSummary()
    nested: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit in ("B", "KiB") else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def _named(items: Sequence[str], what: str) -> str:
    shown = "; ".join(items[:_NAMED])
    more = len(items) - _NAMED
    return shown + (f"; {more} more {what}" if more > 0 else "")


# -- the whole inspection --------------------------------------------------------------------


def inspect_leftovers(git: Git, worktree: str | os.PathLike[str]) -> Leftovers:
    """Every check above, on one worktree."""
    path = Path(worktree)
    problems: list[str] = []
    try:
        listed = git.ignored(path)
    except GitError as exc:
        return Leftovers(problems=(f"git error: {exc}",))
    walked = walk_ignored(path, listed)
    problems.extend(walked.unreadable)
    nested_problems = []
    for repo in walked.repos:
        try:
            found = nested_repo_problem(git, path, repo)
        except GitError as exc:
            found = f"ignored nested repository {_rel(path, repo)}: {exc}"
        if found:
            nested_problems.append(found)
    if nested_problems:
        problems.append(_named(nested_problems, "nested repositories"))
    try:
        private = private_ref_problems(git, path)
    except GitError as exc:
        private = [f"git error: {exc}"]
    if private:
        problems.append(_named(private, "refs"))
    return Leftovers(
        ignored=walked.summary,
        nested=tuple(printable(_rel(path, r)) for r in walked.repos),
        problems=tuple(printable(p) for p in problems),
    )


# -- ignored files ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Walked:
    summary: IgnoredSummary
    repos: tuple[Path, ...] = ()
    unreadable: tuple[str, ...] = ()


def walk_ignored(worktree: Path, listed: Iterable[str]) -> Walked:
    """Measure each ignored entry, and find the git repositories inside them."""
    entries: list[IgnoredEntry] = []
    repos: list[Path] = []
    unreadable: list[str] = []
    files = dirs = 0
    for name in listed:
        top = worktree / name
        try:
            info = os.lstat(top)
        except FileNotFoundError:
            continue  # gone since git listed it: nothing to lose
        except OSError as exc:
            unreadable.append(f"cannot read ignored {name}: {exc.strerror or exc}")
            continue
        if not stat.S_ISDIR(info.st_mode):
            files += 1
            entries.append(IgnoredEntry(path=printable(name), size=info.st_size, files=1))
            continue
        dirs += 1
        size, count = _walk_dir(top, worktree, repos, unreadable)
        entries.append(IgnoredEntry(path=printable(name), size=size, files=count))
        files += count
    largest = tuple(sorted(entries, key=lambda e: (-e.size, e.path))[:LARGEST])
    summary = IgnoredSummary(
        files=files, dirs=dirs, size=sum(e.size for e in entries), largest=largest
    )
    return Walked(summary=summary, repos=tuple(repos), unreadable=tuple(unreadable))


def _walk_dir(
    top: Path, worktree: Path, repos: list[Path], unreadable: list[str]
) -> tuple[int, int]:
    size = count = 0

    def failed(exc: OSError) -> None:
        where = _rel(worktree, Path(exc.filename)) if exc.filename else _rel(worktree, top)
        unreadable.append(f"cannot read ignored directory {where}: {exc.strerror or exc}")

    # git dirs found so far: what is inside one is a repository's storage, measured but not
    # searched for more repositories
    git_dirs: list[str] = []
    for dirpath, dirnames, filenames in os.walk(top, onerror=failed, followlinks=False):
        here = Path(dirpath)
        if not any(dirpath == d or dirpath.startswith(d + os.sep) for d in git_dirs):
            if ".git" in dirnames or ".git" in filenames:
                repos.append(here)
                if ".git" in dirnames:
                    git_dirs.append(os.path.join(dirpath, ".git"))
            elif _looks_bare(dirnames, filenames):
                repos.append(here)
                git_dirs.append(dirpath)
        for name in filenames:
            try:
                size += os.lstat(here / name).st_size
            except OSError:
                continue  # gone, or unreadable metadata: its size is unknown, not its loss
            count += 1
        # symlinks to directories are listed among dirnames and never followed; count them
        for name in dirnames:
            if os.path.islink(here / name):
                count += 1
    return size, count


def _looks_bare(dirnames: list[str], filenames: list[str]) -> bool:
    """A bare repository's layout: HEAD, objects/ and refs/ side by side."""
    return "HEAD" in filenames and "objects" in dirnames and "refs" in dirnames


def _rel(worktree: Path, path: Path) -> str:
    try:
        return path.relative_to(worktree).as_posix()
    except ValueError:
        return str(path)


# -- nested repositories ---------------------------------------------------------------------


def nested_repo_problem(git: Git, worktree: Path, repo: Path) -> str | None:
    """Why deleting ``repo`` (a repository inside an ignored directory) would lose commits, or
    None when every commit it holds is also on one of its remotes or in this repository."""
    gitdir = repo / ".git" if os.path.lexists(repo / ".git") else repo
    nested = NestedGit(git, repo, gitdir)
    rel = _rel(worktree, repo)
    common = nested.common_dir()
    if not _inside(common, worktree):
        # Its object store lives outside this worktree and survives the delete; only what its
        # own HEAD alone reaches would be lost.
        if nested.head() is None:
            return None
        lost = nested.count("HEAD", "--not", "--branches", "--tags", "--remotes")
        if lost:
            return (f"ignored nested worktree {rel} has {_plural(lost, 'commit')} that only "
                    "its HEAD reaches")
        return None
    if not nested.count("--all", "--not", "--remotes"):
        return None
    # Some commits are on none of its remotes; they may still be in this repository (a
    # scratch clone of it, say), reachable from refs the delete leaves in place.
    lost_tips = [
        (ref, sha) for ref, sha in nested.tips()
        if nested.count(sha, "--not", "--remotes") and not _kept_here(git, worktree, sha)
    ]
    if not lost_tips:
        return None
    refs = ", ".join(ref for ref, _ in lost_tips[:_NAMED])
    more = f" and {len(lost_tips) - _NAMED} more" if len(lost_tips) > _NAMED else ""
    return (f"ignored nested repository {rel} has commits on no remote and nowhere else "
            f"({refs}{more})")


class NestedGit:
    """git on a nested repository, by its git dir: never discovered upwards, so a directory
    that only looks like a repository cannot answer for the worktree around it."""

    def __init__(self, git: Git, repo: Path, gitdir: Path) -> None:
        self.git = git
        self.repo = repo
        self.gitdir = gitdir

    def run(self, *args: str, ok_codes: Sequence[int] = (0,)) -> str:
        return self.git.run(
            self.repo, f"--git-dir={self.gitdir}", *args, ok_codes=ok_codes
        ).stdout

    def common_dir(self) -> Path:
        out = self.run("rev-parse", "--path-format=absolute", "--git-common-dir")
        return Path(out.strip())

    def head(self) -> str | None:
        out = self.run("rev-parse", "--verify", "--quiet", "HEAD^{commit}", ok_codes=(0, 1))
        return out.strip() or None

    def count(self, *revs: str) -> int:
        out = self.run("rev-list", "--count", *revs, "--").strip()
        try:
            return int(out)
        except ValueError as exc:
            raise GitError(f"git rev-list --count printed {out!r}") from exc

    def tips(self) -> list[tuple[str, str]]:
        """Every ref (and HEAD) that names a commit: (name, sha)."""
        out = self.run(
            "for-each-ref",
            "--format=%(refname)%00%(objectname)%00%(objecttype)%00%(*objectname)%00"
            "%(*objecttype)",
        )
        tips: list[tuple[str, str]] = []
        for line in out.splitlines():
            name, sha, kind, peeled, peeled_kind = ([*line.split("\0"), "", "", "", ""])[:5]
            if name.startswith("refs/remotes/"):
                continue
            if peeled_kind == "commit":
                tips.append((name, peeled))
            elif kind == "commit":
                tips.append((name, sha))
            # a tag of a tree or a blob names no commit: nothing for rev-list to count
        head = self.head()
        if head:
            tips.append(("HEAD", head))
        return tips


def _kept_here(git: Git, worktree: Path, sha: str) -> bool:
    """Whether this repository has commit ``sha`` and refs that outlive the worktree reach it."""
    if not git.has_commit(worktree, sha):
        return False
    return git.count(worktree, sha, "--not", *_shared_refs()) == 0


def _inside(path: Path, root: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


# -- worktree-private refs -------------------------------------------------------------------


def _shared_refs() -> tuple[str, ...]:
    """rev-list arguments for every ref the delete leaves in place (and HEAD, whose commit the
    other guards prove is on the remote)."""
    excludes = tuple(f"--exclude={prefix}*" for prefix in PRIVATE_REF_PREFIXES)
    return (*excludes, "--all")


def private_ref_problems(git: Git, worktree: Path) -> list[str]:
    """One problem per worktree-private ref or pseudoref that reaches commits no shared ref
    does. A private ref's reflog is private too: each of its entries counts."""
    problems: list[str] = []
    for ref in git.private_refs(worktree, PRIVATE_REF_PREFIXES):
        tips = [ref, *git.reflog(worktree, ref)]
        lost = git.count(worktree, *dict.fromkeys(tips), "--not", *_shared_refs())
        if lost:
            problems.append(f"{ref} reaches {_plural(lost, 'commit')} found nowhere else")
    for name, why in PSEUDOREFS.items():
        sha = git.resolve(worktree, name)
        if sha is None:
            continue
        lost = git.count(worktree, sha, "--not", *_shared_refs())
        if lost:
            problems.append(f"{name} ({why}) reaches {_plural(lost, 'commit')} found nowhere "
                            "else")
    return problems
