"""What may be registered as a worker's worktree.

A registered directory decides which sessions reach a worker: the hook gives every session whose
project dir lies under it to that worker. So a directory that is too wide would take sessions
that are not the worker's: the filesystem root or the home directory (every session anywhere, or
every one of the user's), or a directory above other workers' worktrees (their sessions would
reach whichever of the two the hook found first). Those are refused; so is a worktree already
registered to another worker.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from fleet._errors import Refused, SettingsError


def require_registrable(
    home: Path,
    worker: str,
    worktree: str | os.PathLike[str],
    *,
    owners: Mapping[str, str] | None = None,
    user_home: str | None = None,
    require_top: bool = False,
    exclusive: bool = True,
) -> str:
    """The real path of ``worktree`` if ``worker`` may be registered there, else Refused or
    SettingsError saying why in one line. ``owners`` is the worktree index (read from ``home``
    when not given); ``user_home`` the home directory (``$HOME``); ``require_top``: the
    directory must be the top of a git worktree; ``exclusive``: refuse a worktree registered
    to another worker."""
    from fleet._journal import worktree_owners

    shown = os.fspath(worktree)
    if not os.path.isdir(shown):
        # No session would ever run there, so its hook events would never reach this worker.
        raise SettingsError(f"worktree {shown} is not a directory; nothing registered")
    real = os.path.realpath(shown)
    if real == os.path.realpath(os.sep):
        raise Refused(f"{shown} is the filesystem root: every session on this machine would "
                      "reach the worker; register its own worktree; nothing registered")
    user_home = user_home if user_home is not None else os.path.expanduser("~")
    if user_home and real == os.path.realpath(user_home):
        raise Refused(f"{shown} is the home directory: every session of yours would reach the "
                      "worker; register its own worktree; nothing registered")
    if require_top:
        _require_worktree_top(shown)
    owners = worktree_owners(home) if owners is None else owners
    owner = owners.get(real)
    if exclusive and owner and owner != worker:
        raise Refused(f"{shown} is registered to worker {owner}: forget it first (`fleet "
                      f"forget {owner}`) or register another worktree; nothing registered")
    below = sorted((path, who) for path, who in owners.items()
                   if who and who != worker and _is_below(path, real))
    if below:
        path, who = below[0]
        more = f" and {len(below) - 1} more" if len(below) > 1 else ""
        raise Refused(f"{shown} contains the worktree {path} of worker {who}{more}: their "
                      "sessions would reach this worker too; register a worktree of its own; "
                      "nothing registered")
    return real


def _is_below(path: str, parent: str) -> bool:
    return path != parent and path.startswith(parent.rstrip(os.sep) + os.sep)


def _require_worktree_top(path: str) -> None:
    """Refuse a directory that is not the top of a git worktree: every session under it would
    reach the worker (registering /tmp would take them all), and check and retire need git."""
    from fleet._git import Git, GitError

    try:
        top = Git().run(path, "rev-parse", "--show-toplevel").stdout.strip()
    except GitError:
        top = ""
    if not top or os.path.realpath(top) != os.path.realpath(path):
        where = f" (it is inside the worktree {top})" if top else ""
        raise SettingsError(
            f"{path} is not the top directory of a git worktree{where}: register the "
            "worktree the worker's sessions run in (or pass --any-dir); nothing registered"
        )
