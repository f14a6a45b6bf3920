"""Whether events are being lost: what ``fleet doctor`` and ``fleet status`` say about a home
that hooks cannot write to.

The hook never disturbs the agent, so it cannot fail loudly: when it cannot journal an event (a
full disk, a read-only home, a journal that is not a file) it records the failure in
``hook-errors.log`` with a message starting with :data:`LOST_PREFIX`, and touches the worker's
:data:`LOST_MARKER`, an empty file that can be made where that line may not fit. A supervisor
that cannot journal does the same. When not even that can be written, what is left to compare
is the home itself: whether it can be written and whether its file system has room.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from fleet._home import worker_dir, workers_dir

if TYPE_CHECKING:
    from fleet._core.fold import WorkerState

#: The start of a hook-errors.log message about an event that was not journaled (the hook
#: program keeps its own copy; a test keeps them equal).
LOST_PREFIX: Final = "event not recorded: "
#: An empty file in a worker's directory whose mtime is when its last event was lost.
LOST_MARKER: Final = "events-lost"


def lost_marker(home: Path, worker: str) -> Path:
    return worker_dir(home, worker) / LOST_MARKER


def note_lost(home: Path, worker: str) -> None:
    """Touch ``worker``'s marker; quietly nothing when even that cannot be written."""
    path = lost_marker(home, worker)
    flags = os.O_RDONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(OSError):
        fd = os.open(path, flags, 0o600)
        try:
            os.utime(fd)
        finally:
            os.close(fd)


def events_lost_at(home: Path, worker: str) -> float | None:
    """When ``worker`` last lost an event (its marker's mtime), or None."""
    try:
        return lost_marker(home, worker).stat().st_mtime
    except (OSError, ValueError):
        return None


def clear_lost(home: Path) -> int:
    """Remove every worker's marker (after ``fleet doctor`` reported them); how many."""
    removed = 0
    for path in workers_dir(home).glob(f"*/{LOST_MARKER}"):
        with contextlib.suppress(OSError):
            path.unlink()
            removed += 1
    return removed


def home_problems(home: Path) -> list[str]:
    """Why hooks could not journal anything in ``home`` right now: it cannot be written, it is
    on a read-only file system, or that file system is full. Empty when none of these."""
    where = workers_dir(home) if workers_dir(home).is_dir() else home
    if not where.is_dir():
        return []
    problems = []
    try:
        fs = os.statvfs(where)
    except OSError:
        fs = None
    if fs is not None and fs.f_flag & os.ST_RDONLY:
        problems.append(f"{home} is on a read-only file system: hook events cannot be recorded")
    elif not os.access(where, os.W_OK):
        problems.append(f"{where} cannot be written: hook events cannot be recorded")
    if fs is not None and not fs.f_flag & os.ST_RDONLY:
        if fs.f_bavail == 0:
            problems.append(f"the file system of {home} is full: hook events may be lost")
        elif fs.f_favail == 0 and fs.f_files > 0:
            problems.append(
                f"the file system of {home} has no free inodes: hook events may be lost"
            )
    return problems


# -- hooks that do not run ------------------------------------------------------------------

#: The variable that turns every Claude Code hook off (``--bare`` sets it too).
SIMPLE_VAR: Final = "CLAUDE_CODE_SIMPLE"
_HOOKS_FIX: Final = (
    "unset CLAUDE_CODE_SIMPLE and drop --bare (a wrapper, alias or settings file may add it) "
    "where the worker starts, then follow it up or start it again"
)


def hooks_not_running(state: WorkerState) -> str | None:
    """What to say of a worker whose agent shows activity in its own stream but never ran a
    hook: fleet follows it from the stream alone (no permission dialogs, no status file)."""
    if not state.hooks_not_running:
        return None
    if state.hooks_off:
        why = "; ".join(state.hooks_off)
        fix = _HOOKS_FIX
    else:
        why = "no hook event ever arrived"
        fix = "`fleet hooks status` and `fleet doctor` say whether the hook is installed and fails"
    return (f"{state.worker}: its hooks are not running ({why}); fleet follows it from the "
            f"agent's own stream only. Fix: {fix}")


def simple_in_environment(environ: Mapping[str, str]) -> str | None:
    """A warning when the coordinator's environment turns hooks off for every worker it
    starts (fleet passes its environment on, and never sets the variable itself)."""
    value = environ.get(SIMPLE_VAR)
    if value is None or value.strip().lower() in ("", "0", "false", "no", "off"):
        return None
    return (f"{SIMPLE_VAR}={value[:20]} is set in this environment: Claude Code workers started "
            "from it run no hooks, and fleet follows headless ones from their own stream only "
            "(no worker in an app is followed at all). Unset it for full tracking.")
