"""Proof that a blind review changed nothing, and the undoing of what it changed.

The reviewer runs with read-only tools, but a review is only trusted when it is shown to have
left everything as it was. Before and after it, fleet takes a :class:`Snapshot` of

- the worktree's git state: HEAD (and the branch it names), every ref but the branches other
  worktrees have checked out (and their remote-tracking refs: other workers commit and push
  while the review runs), the index (each entry and its flags), the repository's config,
  hooks and info files;
- every file of the worktree (``.git`` aside, ignored files included), by its stat: kind,
  mode, size, modification and change times, inode; a write changes the change time, which no
  program can set back;
- the directories fleet can see around it, one level deep: the worktree's parent, the home
  directory, fleet's home; and the scratch directory the review gets its input in.

:func:`compare` (pure) lists what differs; :func:`undo` takes back what it can and deletes
nothing: the worktree's state is first saved under a ref, a new file is moved aside, then the
tracked files, the index, HEAD and the refs are restored from git; it says what it could not
undo.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from fleet._git import Git, GitError

#: What a path looked like: its kind and, where it matters, its stat.
Signature = tuple[object, ...]
#: What the git state looked like: a name (``HEAD``, ``ref refs/heads/x``, ``index``...) and
#: its value.
GitState = Mapping[str, str]

#: Fleet's own files in its home, which other workers and fleet itself write during a review.
_BUSY_IN_FLEET_HOME: Final = frozenset({"worktrees.tsv", "hook-errors.log", "config.toml"})
#: Entries of the repository's git dir whose content a review must not change: they decide
#: what git runs (config, hooks) and what it ignores or how it reads files (info).
_GIT_CONFIG_FILES: Final = ("config", "config.worktree", "info/exclude", "info/attributes",
                            "info/sparse-checkout")


@attrs.frozen(kw_only=True)
class Root:
    """A directory to compare: ``deep`` walks all of it, else only its own entries (whose
    directories count by name, not by their content); ``names_only`` compares which entries
    exist, not their stat; ``files_only`` leaves directories out (where others make
    directories during a review: a new worker's worktree, fleet's own); ``skip``: entry names
    left out."""

    path: str
    label: str
    deep: bool = False
    names_only: bool = False
    files_only: bool = False
    skip: frozenset[str] = frozenset()


@attrs.frozen(kw_only=True)
class Snapshot:
    git: Mapping[str, str]
    #: per root label, each relative path and its signature
    files: Mapping[str, Mapping[str, Signature]]
    roots: tuple[Root, ...] = ()


@attrs.frozen(kw_only=True)
class Change:
    """One difference: ``where`` a root label or ``git``; ``what`` added, removed, changed."""

    where: str
    path: str
    what: str

    def describe(self) -> str:
        return f"{self.what} {self.where}:{self.path}" if self.where != "git" \
            else f"{self.what} {self.path}"


def signature(st: os.stat_result, *, names_only: bool = False) -> Signature:
    if stat.S_ISDIR(st.st_mode):
        return ("dir",) if names_only else ("dir", stat.S_IMODE(st.st_mode))
    kind = "link" if stat.S_ISLNK(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) \
        else "other"
    if names_only:
        return (kind,)
    return (kind, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
            st.st_nlink)


def scan(root: Root) -> dict[str, Signature]:
    """Each path under ``root`` and its signature (nothing for a root that does not exist)."""
    out: dict[str, Signature] = {}
    top = root.path
    try:
        names = os.listdir(top)
    except OSError:
        return out
    stack: list[tuple[str, list[str]]] = [("", names)]
    while stack:
        rel_dir, entries = stack.pop()
        for name in entries:
            if not rel_dir and name in root.skip:
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            full = os.path.join(top, rel)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            if is_dir and root.files_only:
                continue
            out[rel] = signature(st, names_only=root.names_only or (is_dir and not root.deep))
            if is_dir and root.deep:
                try:
                    stack.append((rel, os.listdir(full)))
                except OSError:
                    out[rel] = (*out[rel], "unreadable")
    return out


def git_state(git: Git, worktree: Path) -> dict[str, str]:
    """HEAD, the refs a review could move, the index, the repository's config files."""
    state: dict[str, str] = {}
    head = git.run(worktree, "rev-parse", "-q", "--verify", "HEAD", ok_codes=(0, 1))
    state["HEAD"] = head.stdout.strip()
    sym = git.run(worktree, "symbolic-ref", "-q", "HEAD", ok_codes=(0, 1))
    state["HEAD is"] = sym.stdout.strip() or "detached"
    busy = _busy_refs(git, worktree)
    refs = git.run(worktree, "for-each-ref", "--format=%(objectname) %(refname)").stdout
    for line in refs.splitlines():
        sha, _, ref = line.partition(" ")
        if ref and ref not in busy:
            state[f"ref {ref}"] = sha
    for what, args in (("index", ("ls-files", "--stage", "-z")),
                       ("index flags", ("ls-files", "-v", "-z"))):
        out = git.run(worktree, *args).stdout
        state[what] = hashlib.sha256(out.encode("utf-8", "surrogateescape")).hexdigest()
    common = git.common_dir(worktree)
    own = git.git_dir(worktree)
    for base in dict.fromkeys((common, own)):
        for name in _GIT_CONFIG_FILES:
            state[f"file {base / name}"] = _digest(base / name)
        hooks = base / "hooks"
        for rel, sig in sorted(scan(Root(path=str(hooks), label="hooks", deep=True)).items()):
            state[f"file {hooks / rel}"] = repr(sig)
    return state


def _busy_refs(git: Git, worktree: Path) -> set[str]:
    """The branches other worktrees have checked out, and their remote-tracking refs: their
    workers move them during the review."""
    here = os.path.realpath(worktree)
    busy: set[str] = set()
    try:
        entries = git.worktrees(worktree)
    except GitError:
        return busy
    for entry in entries:
        if entry.branch and os.path.realpath(entry.path) != here:
            busy.add(f"refs/heads/{entry.branch}")
            busy.add(f"refs/remotes/origin/{entry.branch}")
    return busy


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return f"unreadable: {exc.strerror}"


def take(git: Git, worktree: Path, roots: Sequence[Root]) -> Snapshot:
    return Snapshot(git=git_state(git, worktree), roots=tuple(roots),
                    files={root.label: scan(root) for root in roots})


def compare(before: Snapshot, after: Snapshot) -> list[Change]:
    """Every difference between two snapshots, git state first, then each root's paths."""
    changes = list(_diff("git", before.git, after.git))
    for label in dict.fromkeys([*before.files, *after.files]):
        changes.extend(_diff(label, before.files.get(label, {}), after.files.get(label, {})))
    return changes


def _diff(where: str, old: Mapping[str, object], new: Mapping[str, object]) -> Iterable[Change]:
    for key in sorted(set(old) | set(new)):
        if key not in new:
            yield Change(where=where, path=key, what="removed")
        elif key not in old:
            yield Change(where=where, path=key, what="added")
        elif old[key] != new[key]:
            yield Change(where=where, path=key, what="changed")


def outside_roots(worktree: Path, *, fleet_home: Path, user_home: str | None,
                  scratch: Path) -> list[Root]:
    """The directories around the worktree that a review is compared in (see the module)."""
    wt = os.path.realpath(worktree)
    roots = [Root(path=wt, label="worktree", deep=True, skip=frozenset({".git"})),
             Root(path=os.path.dirname(wt), label="beside the worktree", files_only=True),
             Root(path=os.path.realpath(fleet_home), label="fleet home", files_only=True,
                  skip=_BUSY_IN_FLEET_HOME),
             Root(path=os.path.realpath(scratch), label="the review's scratch",
                  names_only=True),
             Root(path=os.path.realpath(scratch / "input"), label="the review's input",
                  deep=True)]
    if user_home:
        roots.append(Root(path=os.path.realpath(user_home), label="home", files_only=True))
    # The same directory seen twice (a worktree right in the home) is compared once.
    seen: set[str] = set()
    unique = []
    for root in roots:
        if root.path not in seen:
            seen.add(root.path)
            unique.append(root)
    return unique


@attrs.frozen(kw_only=True)
class Undone:
    """What :func:`undo` did: where it kept what it took away (nothing is deleted: a file may
    have been written by someone else in the meantime), and what it could not undo."""

    kept: tuple[str, ...] = ()
    left: tuple[str, ...] = ()


def undo(git: Git, worktree: Path, before: Snapshot, changes: Sequence[Change], *,
         keep: Path, keep_ref: str) -> Undone:
    """Take back what the review changed: the worktree's state first saved under ``keep_ref``
    (what it held, the new files too), new files moved into ``keep``, then HEAD, the refs, the
    index and the tracked files restored from git."""
    left: list[str] = []
    kept: list[str] = []
    roots = {root.label: root for root in before.roots}
    git_changed = [c for c in changes if c.where == "git"]
    tracked_changed = any(c.where == "worktree" and c.what != "added" for c in changes)
    if git_changed or any(c.where == "worktree" for c in changes):
        try:
            git.snapshot(worktree, keep_ref, "fleet: what a blind review left in the worktree")
            kept.append(keep_ref)
        except GitError as exc:
            left.append(f"could not save the worktree under {keep_ref}: {exc}")
    for change in changes:
        if change.where == "git":
            continue
        root = roots.get(change.where)
        if root is None:
            continue
        full = os.path.join(root.path, change.path)
        if change.what == "added":
            if root.label.startswith("the review's"):
                continue  # the scratch is removed with everything in it
            where = keep / root.label.replace(" ", "-") / change.path
            if _move(full, where):
                kept.append(str(where))
            else:
                left.append(f"could not move {full} away")
        elif change.where != "worktree":
            left.append(f"{change.what} {full} (it existed before the review)")
    if git_changed or tracked_changed:
        left.extend(_restore_git(git, worktree, before, git_changed))
        after = scan(roots["worktree"]) if "worktree" in roots else {}
        for change in _diff("worktree", before.files.get("worktree", {}), after):
            if change.what != "added" and not _same_content(change, before, after):
                left.append(f"{change.what} {os.path.join(str(worktree), change.path)} "
                            "(not in git: cannot be restored)")
    return Undone(kept=tuple(dict.fromkeys(kept)), left=tuple(left))


def _same_content(change: Change, before: Snapshot, after: Mapping[str, Signature]) -> bool:
    """A tracked file git wrote back has a new stat but its old kind, mode and size."""
    old = before.files.get("worktree", {}).get(change.path)
    new = after.get(change.path)
    return old is not None and new is not None and old[:3] == new[:3]


def _restore_git(git: Git, worktree: Path, before: Snapshot, changed: Sequence[Change]
                 ) -> list[str]:
    left: list[str] = []
    try:
        head_is = before.git.get("HEAD is", "detached")
        for change in changed:
            name = change.path
            if not name.startswith("ref "):
                continue
            ref = name.removeprefix("ref ")
            if change.what == "added":
                git.run(worktree, "update-ref", "-d", ref)
            else:
                git.run(worktree, "update-ref", "--no-deref", ref, before.git[name])
        if head_is != "detached":
            git.run(worktree, "symbolic-ref", "HEAD", head_is)
        elif before.git.get("HEAD"):
            git.run(worktree, "update-ref", "--no-deref", "HEAD", before.git["HEAD"])
        if before.git.get("HEAD"):
            # The worktree was clean before the review (the check passed): HEAD is its content.
            git.run(worktree, "reset", "-q", "--hard", before.git["HEAD"])
        for change in changed:
            if change.path.startswith("file "):
                left.append(f"{change.what} {change.path.removeprefix('file ')} "
                            "(the repository's own files: put it back by hand)")
    except GitError as exc:
        left.append(f"git could not restore the worktree: {exc}")
    return left


def _move(path: str, target: Path) -> bool:
    """Move ``path`` to ``target`` (its parents made); True when nothing is left at ``path``."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.move(path, target)
    except OSError:
        return False
    return True
