"""Process identity: a pid alone can be reused, so fleet pairs it with the process start time
(field 22 of /proc/<pid>/stat, in clock ticks since boot)."""

from __future__ import annotations

import os


def process_start_time(pid: int) -> int | None:
    """The start time of process ``pid``, or None when there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


def is_alive(pid: int, start_time: int | None) -> bool:
    """True when ``pid`` runs and, if ``start_time`` is known, is the same process."""
    if pid <= 0:
        return False
    current = process_start_time(pid)
    if current is None:
        if os.path.isdir("/proc/self"):
            return False
        try:  # no /proc on this system: fall back to a signal-0 probe
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if _is_zombie(pid):
        return False
    return start_time is None or current == start_time


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    rest = data[data.rfind(b")") + 2 :].split()
    return bool(rest) and rest[0] in (b"Z", b"X")
