"""Which processes use a directory: their working directory, root, executable, an open file or
a mapped file is inside it. Retire refuses to delete a worktree that any process but fleet
itself still uses (the agent, a dev server, an editor): what it writes next would land in a
directory that is being deleted, or be lost with it.

Linux only: everything comes from ``/proc``. A process fleet may not inspect (another user's)
is skipped, since it cannot be asked; on a system without ``/proc`` nothing is found.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Final

import attrs

_PROC: Final = Path("/proc")
#: How much of a command line a reason quotes.
_COMMAND_CHARS: Final = 80
_DELETED: Final = " (deleted)"
#: How many processes a reason names one by one.
_NAMED: Final = 5


@attrs.frozen(kw_only=True)
class Occupant:
    """A process that uses the directory, and how (``working directory``, ``open file x``)."""

    pid: int
    command: str
    uses: str

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command}): {self.uses}"


def occupants(path: str | os.PathLike[str], *, ignore: Collection[int] = ()) -> list[Occupant]:
    """Every process but this one (and ``ignore``) that uses ``path`` or anything under it."""
    if not (_PROC / "self").is_dir():
        return []
    root = os.path.realpath(path)
    me = os.getpid()
    found: list[Occupant] = []
    for pid in _pids():
        if pid == me or pid in ignore:
            continue
        uses = _uses(pid, root)
        if uses is not None:
            found.append(Occupant(pid=pid, command=_command(pid), uses=uses))
    return found


def describe_occupants(found: list[Occupant]) -> str:
    """One line: ``a process still runs in the worktree: pid 12 (sleep 600): working
    directory``."""
    head = ("a process still runs" if len(found) == 1
            else f"{len(found)} processes still run")
    named = "; ".join(o.describe() for o in found[:_NAMED])
    more = f"; and {len(found) - _NAMED} more" if len(found) > _NAMED else ""
    return f"{head} in the worktree: {named}{more}"


def _pids() -> Iterator[int]:
    try:
        names = os.listdir(_PROC)
    except OSError:
        return
    for name in names:
        if name.isdigit():
            yield int(name)


def _inside(target: str, root: str) -> bool:
    target = target.removesuffix(_DELETED)
    return target == root or target.startswith(root.rstrip("/") + "/")


def _rel(target: str, root: str) -> str:
    target = target.removesuffix(_DELETED)
    return os.path.relpath(target, root) if target != root else "."


def _link(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:  # gone, a kernel thread, or not ours to read
        return None


def _uses(pid: int, root: str) -> str | None:
    base = _PROC / str(pid)
    for name, what in (("cwd", "working directory"), ("exe", "executable"), ("root", "root")):
        target = _link(base / name)
        if target is not None and _inside(target, root):
            return what if name != "exe" else f"executable {_rel(target, root)}"
    try:
        fds = os.listdir(base / "fd")
    except OSError:
        fds = []
    for fd in fds:
        target = _link(base / "fd" / fd)
        if target is not None and target.startswith("/") and _inside(target, root):
            return f"open file {_rel(target, root)}"
    return _mapped(base, root)


def _mapped(base: Path, root: str) -> str | None:
    """A file the process has mapped (a shared library built in the worktree, say)."""
    try:
        with open(base / "maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.rstrip("\n").split(maxsplit=5)
                if len(parts) == 6 and parts[5].startswith("/") and _inside(parts[5], root):
                    return f"mapped file {_rel(parts[5], root)}"
    except OSError:
        return None
    return None


def _command(pid: int) -> str:
    base = _PROC / str(pid)
    try:
        raw = (base / "cmdline").read_bytes()
    except OSError:
        raw = b""
    command = " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
    if not command:
        try:
            command = (base / "comm").read_text(errors="replace").strip()
        except OSError:
            command = "?"
    command = " ".join(command.split())  # one line, whatever the arguments hold
    if len(command) > _COMMAND_CHARS:
        command = command[: _COMMAND_CHARS - 3] + "..."
    return command
