"""The one guard that says whether a worktree's work is safe on the remote: it exists, is a
git worktree on the expected branch, has nothing modified, staged, untracked or hidden by an
index flag, and the commit at HEAD is on the remote branch its upstream names.

``fleet check`` runs it on a claimed ``done``, retire re-runs it just before a delete, and every
adapter runs it again immediately before its host's delete (some hosts delete a dirty worktree
without asking). It knows git and nothing of fleet's layers above."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import attrs

from fleet._errors import Refused
from fleet._git import ContentChange, Git, GitError, StatusEntry, Upstream, printable
from fleet._runner import Runner

#: How many dirty paths a finding names one by one before it summarises the rest.
_NAMED_PATHS: Final = 5



@attrs.frozen(kw_only=True)
class Inspection:
    """What git says about a worktree, and every reason its work is not safe on the remote.

    ``problems`` empty means: the worktree exists and is a git worktree, HEAD is on the expected
    branch, nothing is modified, staged or untracked, and the commit at HEAD is on the remote
    branch the upstream names."""

    worktree: Path
    head: str | None = None
    branch: str | None = None
    upstream: Upstream | None = None
    remote_head: str | None = None
    ahead: int | None = None
    dirty: tuple[StatusEntry, ...] = ()
    hidden: tuple[ContentChange, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def safe(self) -> bool:
        return not self.problems


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def describe_dirty(entries: Sequence[StatusEntry | ContentChange]) -> list[str]:
    """One finding per dirty path, the first few by name: ``untracked file notes.txt``."""
    out = [e.describe() for e in entries[:_NAMED_PATHS]]
    if len(entries) > _NAMED_PATHS:
        out.append(f"{plural(len(entries) - _NAMED_PATHS, 'more changed file')}")
    return out


def hidden_changes(
    git: Git, path: Path, dirty: Sequence[StatusEntry]
) -> tuple[ContentChange, ...]:
    """The content changes ``git status`` did not report (an index flag or a stale stat cache
    hid them); what it did report is named once, by status."""
    seen = {e.path for e in dirty} | {e.orig for e in dirty if e.orig}
    return tuple(c for c in git.content_changes(path) if c.path not in seen)


def inspect_worktree(
    git: Git, worktree: str | os.PathLike[str], *, branch: str | None = None
) -> Inspection:
    """Run every guard on a worktree. Never raises for git trouble: a git error is a problem,
    because a guard that cannot be evaluated must not pass."""
    path = Path(worktree)
    problems: list[str] = []
    fields: dict[str, object] = {"worktree": path}
    try:
        if not path.is_dir():
            return Inspection(worktree=path, problems=(f"worktree {path} does not exist",))
        top = git.toplevel(path)
        if os.path.realpath(top) != os.path.realpath(path):
            return Inspection(
                worktree=path, problems=(f"{path} is inside the worktree {top}, not its top",)
            )
        head = git.head(path)
        fields["head"] = head
        current = git.branch(path)
        fields["branch"] = current
        dirty = tuple(git.status(path))
        fields["dirty"] = dirty
        problems.extend(describe_dirty(dirty))
        hidden = hidden_changes(git, path, dirty)
        fields["hidden"] = hidden
        problems.extend(describe_dirty(hidden))
        if current is None:
            problems.append("detached HEAD")
        else:
            if branch and current != branch:
                problems.append(f"on branch {current}, registered branch {branch}")
            problems.extend(_remote_problems(git, path, current, head, fields))
    except GitError as exc:
        problems.append(f"git error: {exc}")
    return Inspection(
        problems=tuple(printable(p) for p in problems), **fields  # type: ignore[arg-type]
    )


def _remote_problems(
    git: Git, path: Path, branch: str, head: str, fields: dict[str, object]
) -> list[str]:
    upstream = git.upstream(path, branch)
    fields["upstream"] = upstream
    if upstream is None:
        return ["no upstream (never pushed: git push -u origin HEAD)"]
    if upstream.remote in ("", ".") or not upstream.ref.startswith("refs/remotes/"):
        return [f"upstream {upstream.short} is a local branch, not a remote one"]
    if git.resolve(path, upstream.ref) is None:
        return [f"upstream {upstream.short} is gone"]
    ahead = git.count(path, f"{upstream.ref}..{head}")
    fields["ahead"] = ahead
    if ahead:
        return [f"{plural(ahead, 'commit')} not pushed to {upstream.short}"]
    # The tracking ref is only what the remote held at the last fetch: a branch deleted or
    # rewritten on the remote since (say, after a squash merge) still looks pushed here.
    remote_head = git.ls_remote(path, upstream.remote, upstream.remote_ref)
    fields["remote_head"] = remote_head
    if remote_head is None:
        return [f"branch {upstream.remote_ref.removeprefix('refs/heads/')} is gone from "
                f"remote {upstream.remote}"]
    if remote_head == head:
        return []
    if not git.has_commit(path, remote_head):
        # The remote branch moved on (someone pushed on top, or rewrote it): fetch it to see
        # whether HEAD is still in its history.
        git.fetch(path, upstream.remote, upstream.remote_ref)
        if not git.has_commit(path, remote_head):
            return [f"{upstream.short} on the remote is at {remote_head[:12]}, which fetching "
                    "did not bring here"]
    if git.is_ancestor(path, head, remote_head):
        return []
    missing = git.count(path, f"{remote_head}..{head}")
    return [f"{plural(missing, 'commit')} not on the remote branch {upstream.short}"]




def require_safe(runner: Runner, worktree: Path, *, what: str) -> None:
    """Refuse (:class:`~fleet._errors.Refused`) unless :func:`inspect_worktree` finds nothing:
    what an adapter runs immediately before a host's delete, whatever guards the caller ran
    earlier, because Superset's workspace delete removes a dirty worktree without asking and
    herdr's only refuses a dirty one, not an unpushed one."""
    found = inspect_worktree(Git(runner), worktree)
    if found.problems:
        raise Refused(
            f"not deleting {what}: {'; '.join(found.problems)}; commit and push first"
        )


def require_no_hidden_changes(runner: Runner, worktree: Path, *, what: str) -> None:
    """Refuse (:class:`~fleet._errors.Refused`) when a file of HEAD has other content in
    ``worktree`` than HEAD gives it, though ``git status`` says nothing: an index flag
    (skip-worktree, assume-unchanged) or a stale stat cache hides it, and so ``git worktree
    remove`` would delete it. Each file is hashed again; what status reports, git itself
    refuses."""
    git = Git(runner)
    try:
        hidden = hidden_changes(git, worktree, git.status(worktree))
    except GitError as exc:
        raise Refused(f"not deleting {what}: {exc}") from exc
    if hidden:
        raise Refused(
            f"not deleting {what}: {'; '.join(describe_dirty(hidden))}; commit and push it, "
            "or restore it, first"
        )
