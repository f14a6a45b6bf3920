"""Forgetting a worker: fleet stops following it, and nothing is lost.

A worker registered by mistake, or one that failed before it did anything, would otherwise stay
in every status and wait for ever. Forgetting moves its directory (journal, launch record,
logs) to ``$FLEET_HOME/forgotten/<worker>.<time>`` and tells the hook that sessions in its
worktree belong to no worker any more. The worktree, its branch and its commits are not
touched: retiring is what deletes work, with its guards.

A worker whose agent still runs, or whose journal moved within the quiet bound (a session fleet
knows no process of, an interactive one, is only seen through its hooks), is not forgotten
without ``force``. Should a session go on anyway (its hooks name the worker with
``FLEET_WORKER``), its events go to the archive, never to a new worker of that id, and
:func:`late_events` (``fleet doctor``) says so.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Final

import attrs
import orjson

from fleet._core.events import Event, HookEvent, Started
from fleet._core.fold import DEFAULT_QUIET_AFTER, WorkerState
from fleet._errors import Refused
from fleet._files import atomic_write
from fleet._home import FILE_MODE, ensure_dir, journal_path, worker_dir
from fleet._journal import forget_worktree, read_events, require, worktrees_of
from fleet._proc import is_alive

#: ``<worker>.<UTC stamp>[.<n>]``: a worker id has no capital letter, so the stamp (with its T
#: and Z) cannot be part of one, and ids with dots (``a`` and ``a.b``) stay apart.
_ARCHIVE: Final = re.compile(r"^(?P<worker>.+)\.(?P<stamp>\d{8}T\d{6}Z)(?:\.(?P<n>\d+))?$")
#: What the archive keeps of the moment it was made: the journal's size then.
ARCHIVE_NOTE: Final = "forgotten.json"


@attrs.frozen(kw_only=True)
class Forgotten:
    worker: str
    #: where the worker's directory went
    kept_at: Path
    #: the worktree paths whose sessions no longer reach any worker
    worktrees: tuple[str, ...]


def last_sign_of_life(events: list[Event]) -> float | None:
    """When the worker's agent was last heard of: its last hook event or run start (fleet's
    own lines, a registration or a seen mark, say nothing of the agent)."""
    times = [e.ts for e in events if isinstance(e, (HookEvent, Started))]
    return max(times) if times else None


def forget(home: Path, state: WorkerState, *, force: bool = False, now: float | None = None,
           quiet_after: float = DEFAULT_QUIET_AFTER) -> Forgotten:
    """Forget ``state.worker``. Refused while its agent still runs, or, unless it is gone,
    while its agent was heard of within ``quiet_after`` seconds; ``force`` overrides both."""
    worker = state.worker
    require(home, worker)
    now = time.time() if now is None else now
    if not force and state.pid is not None and is_alive(state.pid, state.start_time):
        raise Refused(
            f"{worker}'s agent (pid {state.pid}) still runs: stop it first (`fleet stop "
            f"{worker}`, or close its terminal), or pass --force to forget it anyway"
        )
    # A gone worker's session has ended (or its process is dead): nothing more will come.
    if not force and state.state not in ("gone", "retired"):
        heard = last_sign_of_life(read_events(home, worker))
        if heard is not None and now - heard < quiet_after:
            raise Refused(
                f"{worker}'s journal moved {max(0.0, now - heard):.0f}s ago (less than the "
                f"quiet bound, {quiet_after:g}s): a session may still run for it; end it, "
                "wait, or pass --force to forget it anyway"
            )
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
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
    try:
        size = journal_path(home, worker).stat().st_size
    except OSError:
        size = 0
    os.rename(worker_dir(home, worker), target)
    # What was in the journal when it was forgotten: lines past it came later (late_events).
    atomic_write(target / ARCHIVE_NOTE,
                 orjson.dumps({"worker": worker, "at": now, "journal_size": size}),
                 FILE_MODE, fsync=False)
    return Forgotten(worker=worker, kept_at=target, worktrees=tuple(paths))


def archive_owner(name: str) -> str | None:
    """The worker an archive directory's name belongs to, or None for another name."""
    m = _ARCHIVE.match(name)
    return m["worker"] if m else None


def _archives(home: Path, worker: str | None = None) -> list[Path]:
    folder = home / "forgotten"
    if not folder.is_dir():
        return []
    found = []
    for d in folder.iterdir():
        m = _ARCHIVE.match(d.name)
        if m and (worker is None or m["worker"] == worker) and d.is_dir():
            found.append((m["stamp"], int(m["n"] or 1), d))
    return [d for *_, d in sorted(found)]


def archived_journals(home: Path, worker: str) -> list[Path]:
    """The journals of ``worker`` set aside by :func:`forget`, oldest first (a worker id can
    be forgotten, registered again and forgotten again)."""
    return [d / "journal.jsonl" for d in _archives(home, worker)
            if (d / "journal.jsonl").is_file()]


@attrs.frozen(kw_only=True)
class LateEvents:
    worker: str
    archive: Path
    #: journal lines that arrived after the worker was forgotten
    count: int


def late_events(home: Path) -> list[LateEvents]:
    """The forgotten workers whose sessions went on journaling after they were forgotten (into
    their archive, where the hook sends them), with how many lines each."""
    out = []
    for archive in _archives(home):
        try:
            note = orjson.loads((archive / ARCHIVE_NOTE).read_bytes())
            size = int(note["journal_size"])
        except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            continue
        try:
            with (archive / "journal.jsonl").open("rb") as journal:
                journal.seek(size)
                count = journal.read(64 << 20).count(b"\n")
        except OSError:
            continue
        if count:
            out.append(LateEvents(worker=archive_owner(archive.name) or archive.name,
                                  archive=archive, count=count))
    return out
