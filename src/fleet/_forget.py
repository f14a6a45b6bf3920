"""Forgetting a worker: fleet stops following it, and nothing is lost.

A worker registered by mistake, or one that failed before it did anything, would otherwise stay
in every status and wait for ever. Forgetting moves its directory (journal, launch record,
logs) to ``$FLEET_HOME/forgotten/<worker>.<time>`` and tells the hook that sessions in its
worktree belong to no worker any more. The worktree, its branch and its commits are not
touched: retiring is what deletes work, with its guards.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import attrs

from fleet._core.fold import WorkerState
from fleet._errors import Refused
from fleet._home import ensure_dir, worker_dir
from fleet._journal import forget_worktree, require, worktrees_of
from fleet._proc import is_alive


@attrs.frozen(kw_only=True)
class Forgotten:
    worker: str
    #: where the worker's directory went
    kept_at: Path
    #: the worktree paths whose sessions no longer reach any worker
    worktrees: tuple[str, ...]


def forget(home: Path, state: WorkerState, *, force: bool = False, now: float | None = None
           ) -> Forgotten:
    """Forget ``state.worker``. Refused while its agent still runs, unless ``force``."""
    worker = state.worker
    require(home, worker)
    if not force and state.pid is not None and is_alive(state.pid, state.start_time):
        raise Refused(
            f"{worker}'s agent (pid {state.pid}) still runs: stop it first (`fleet stop "
            f"{worker}`, or close its terminal), or pass --force to forget it anyway"
        )
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    target = ensure_dir(home / "forgotten") / f"{worker}.{stamp}"
    n = 1
    while target.exists():
        n += 1
        target = target.with_name(f"{worker}.{stamp}.{n}")
    paths = worktrees_of(home, worker)
    # The index first: a session's hook that fires in between finds no worker instead of
    # making a fresh journal for the one being forgotten.
    for path in paths:
        forget_worktree(home, path)
    os.rename(worker_dir(home, worker), target)
    return Forgotten(worker=worker, kept_at=target, worktrees=tuple(paths))


def archived_journals(home: Path, worker: str) -> list[Path]:
    """The journals of ``worker`` set aside by :func:`forget`, oldest first (a worker id can
    be forgotten, registered again and forgotten again)."""
    folder = home / "forgotten"
    if not folder.is_dir():
        return []
    found = [d / "journal.jsonl" for d in folder.iterdir()
             if d.name.split(".", 1)[0] == worker and (d / "journal.jsonl").is_file()]
    return sorted(found, key=lambda p: p.parent.name)
