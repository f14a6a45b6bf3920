"""Following a headless agent's output as it is written: the supervisor's live second source.

:class:`StreamTail` reads the attempt's output file on a thread, hands every complete line to a
:class:`fleet._core.stream.StreamReader` and passes the events it returns to ``emit`` (the
supervisor journals them). At the end of what was written it sleeps briefly (or until told to
stop), so a fact reaches the journal a few tens of milliseconds after the agent printed it.
:func:`hooks_off_reasons` says why an agent process runs with no hooks.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from fleet._clock import Clock
from fleet._core.events import Event
from fleet._core.stream import MAX_LINE, StreamReader

#: How long the tail sleeps at the end of the file before reading again (seconds).
EOF_SLEEP: Final = 0.05
_CHUNK: Final = 1 << 16


class StreamTail:
    """Follows ``path`` from its start until :meth:`stop`, which reads what is left first."""

    def __init__(
        self,
        path: Path,
        reader: StreamReader,
        emit: Callable[[Event], None],
        clock: Clock,
        *,
        eof_sleep: float = EOF_SLEEP,
    ) -> None:
        self.path = path
        self.reader = reader
        self.emit = emit
        self.clock = clock
        self.eof_sleep = eof_sleep
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet-stream", daemon=True)
        #: what went wrong reading, if anything (the run goes on; the supervisor logs it)
        self.error: str | None = None

    def start(self) -> StreamTail:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Read the rest of the file, then end the thread."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self._follow()
        except Exception as exc:  # a tail that fails loses the second source, not the run
            self.error = f"{type(exc).__name__}: {exc}"

    def _follow(self) -> None:
        fd = -1
        while fd < 0:
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                if self._stop.wait(self.eof_sleep):
                    return
        try:
            partial = b""
            skipping = False
            while True:
                # Whether a stop was asked before this read: then this read sees everything.
                last = self._stop.is_set()
                chunk = os.read(fd, _CHUNK)
                if chunk:
                    partial, skipping = self._lines(partial + chunk, skipping)
                    continue
                if last:
                    if partial and not skipping:
                        self._line(partial)
                    return
                self._stop.wait(self.eof_sleep)
        finally:
            os.close(fd)

    def _lines(self, data: bytes, skipping: bool) -> tuple[bytes, bool]:
        """Handle every complete line of ``data``; returns the rest. A line longer than
        :data:`MAX_LINE` (a huge tool result) is skipped, not held in memory."""
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if not skipping:
                self._line(data[start:end])
            skipping = False
            start = end + 1
        rest = data[start:]
        if len(rest) > MAX_LINE:
            return b"", True
        return rest, skipping

    def _line(self, line: bytes) -> None:
        for event in self.reader.feed(line, self.clock.now()):
            self.emit(event)


#: The environment variable that turns every hook off (``--bare`` sets it too).
SIMPLE_VAR: Final = "CLAUDE_CODE_SIMPLE"


def simple_set(value: str | bytes | None) -> bool:
    """Whether a ``CLAUDE_CODE_SIMPLE`` value turns simple mode on."""
    if value is None:
        return False
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    return text.strip().lower() not in ("", "0", "false", "no", "off")


def hooks_off_reasons(pgid: int) -> tuple[str, ...]:
    """Why the processes of the agent's group run without hooks, read from /proc: the
    ``CLAUDE_CODE_SIMPLE`` variable in a process's environment, ``--bare`` on its command line
    (a wrapper on PATH may add either, so fleet's own argv and environment do not tell)."""
    why: dict[str, None] = {}
    for pid in _group(pgid):
        proc = Path("/proc") / str(pid)
        with contextlib.suppress(OSError):
            args = (proc / "cmdline").read_bytes().split(b"\0")
            if b"--bare" in args:
                why["--bare on its command line"] = None
        with contextlib.suppress(OSError):
            for entry in (proc / "environ").read_bytes().split(b"\0"):
                name, _, value = entry.partition(b"=")
                if name == SIMPLE_VAR.encode() and simple_set(value):
                    shown = value.decode(errors="replace")[:20]
                    why[f"{SIMPLE_VAR}={shown} in its environment"] = None
    return tuple(why)


def _group(pgid: int) -> list[int]:
    out = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(entry.path, "stat").read_bytes().rsplit(b")", 1)[1].split()
                if int(stat[2]) == pgid:
                    out.append(int(entry.name))
    return out
