"""Journals: one append-only JSONL file per worker.

Appending is one ``write(2)`` of a whole line to an ``O_APPEND`` descriptor while holding an
exclusive ``flock``, so concurrent writers (hooks, supervisors, the coordinator) never interleave
or tear lines. Reading starts from a byte offset, holds back a trailing partial line until its
newline arrives, and turns lines that do not decode into ``Unreadable`` events, so one bad line
never hides the lines after it.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from fleet._core.events import Event, decode_line, encode_line
from fleet._errors import JournalError, SettingsError, UnknownWorker
from fleet._home import (
    FILE_MODE,
    ensure_dir,
    journal_path,
    worker_dir,
    workers_dir,
    worktree_index_path,
)


def append_line(path: Path, line: bytes) -> None:
    """Append one complete line (ending in a newline) atomically with respect to other
    writers.

    The line always starts on a line boundary: if the file ends in a partial line (a writer
    killed mid-write, a crash, a full disk), a newline is written first, so that fragment stays
    a line of its own (read as unreadable, and counted) instead of swallowing this event."""
    if not line.endswith(b"\n") or b"\n" in line[:-1]:
        raise ValueError("a journal line is exactly one line ending in a newline")
    ensure_dir(path.parent)
    try:
        # Read access too: the last byte is read to find out whether the file ends a line.
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    except OSError as exc:
        raise JournalError(exc.errno, f"cannot open journal {path}: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        st = os.fstat(fd)
        if stat.S_ISFIFO(st.st_mode):  # a write could block, and no reader would see it
            raise JournalError(errno.EINVAL, f"cannot write journal {path}: it is a FIFO")
        size = st.st_size
        data = line if ends_a_line(fd, size) else b"\n" + line
        written = os.write(fd, data)
        if written != len(data):
            # A short write means the disk is full: cut the file back so no torn line stays.
            os.ftruncate(fd, size)
            raise JournalError(errno.ENOSPC, f"short write to {path}: disk full?")
    except OSError as exc:
        if isinstance(exc, JournalError):
            raise
        raise JournalError(exc.errno, f"cannot write journal {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def ends_a_line(fd: int, size: int) -> bool:
    """Whether a file of ``size`` bytes open on ``fd`` is empty or ends in a newline (one
    pread of its last byte; a file that cannot be read back, like a device, counts as ended)."""
    if size <= 0:
        return True
    try:
        return os.pread(fd, 1, size - 1) in (b"\n", b"")
    except OSError:
        return True


def append(home: Path, worker: str, event: Event) -> None:
    """Journal ``event`` for ``worker``."""
    append_line(journal_path(home, worker), encode_line(event))


def index_worktree(home: Path, worker: str, worktree: str) -> None:
    """Record that sessions under ``worktree`` belong to ``worker`` (read by the hook).
    ``worker`` is an id its caller checked: :meth:`fleet._port.FileJournal.register`, the one
    caller, checks it before it writes anything."""
    path = check_worktree_path(os.path.realpath(worktree))
    append_line(worktree_index_path(ensure_dir(home)), f"{path}\t{worker}\n".encode())


def forget_worktree(home: Path, worktree: str) -> None:
    """Record that sessions under ``worktree`` belong to no worker any more (an empty worker:
    the last line for a path wins)."""
    append_line(worktree_index_path(ensure_dir(home)), f"{worktree}\t\n".encode())


def worktree_owners(home: Path) -> dict[str, str]:
    """Each indexed worktree path and the worker its sessions reach now (the last line for a
    path wins; a forgotten one reaches none and is left out)."""
    try:
        data = worktree_index_path(home).read_bytes()
    except FileNotFoundError:
        return {}
    index: dict[str, str] = {}
    for raw in data.decode("utf-8", "replace").split("\n")[:-1]:
        path, sep, owner = raw.partition("\t")
        if sep and path:
            index[path] = owner
    return {path: owner for path, owner in index.items() if owner}


def worktrees_of(home: Path, worker: str) -> list[str]:
    """The worktree paths whose sessions reach ``worker`` now."""
    return sorted(path for path, owner in worktree_owners(home).items() if owner == worker)


def check_worktree_path(path: str) -> str:
    """``path`` if worktrees.tsv can hold it (a line of ``<path>\\t<worker>``, UTF-8), else a
    SettingsError (a ValueError) saying why."""
    if "\t" in path or "\n" in path or "\r" in path:
        raise SettingsError(f"worktree path {path!r} contains a tab or a line break")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise SettingsError(f"worktree path {path!r} is not valid UTF-8") from None
    return path


def list_workers(home: Path) -> list[str]:
    """Every worker with a journal, sorted."""
    root = workers_dir(home)
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if (root / n / "journal.jsonl").is_file())


def exists(home: Path, worker: str) -> bool:
    return journal_path(home, worker).is_file()


def require(home: Path, worker: str) -> Path:
    path = journal_path(home, worker)
    if not path.is_file():
        import difflib

        close = difflib.get_close_matches(worker, list_workers(home), n=1)
        hint = f"did you mean {close[0]}?" if close else "register it first"
        raise UnknownWorker(f"no worker {worker!r} in {home} ({hint})")
    return path


#: Bytes at each end of the read part of a journal that its fingerprint covers.
FINGERPRINT_WINDOW = 4096


def fingerprint(fd: int, offset: int) -> str:
    """A digest of the first ``offset`` bytes of the file open on ``fd``, as far as a cache can
    afford: every byte when ``offset`` is at most twice FINGERPRINT_WINDOW, else the window at
    each end (where a rewrite shows: the registration at the head, and the bytes just before
    the offset, which a rewrite that adds or removes anything earlier shifts)."""
    digest = hashlib.blake2b(offset.to_bytes(8, "little"), digest_size=16)
    if offset <= 2 * FINGERPRINT_WINDOW:
        digest.update(os.pread(fd, offset, 0))
    else:
        digest.update(os.pread(fd, FINGERPRINT_WINDOW, 0))
        digest.update(os.pread(fd, FINGERPRINT_WINDOW, offset - FINGERPRINT_WINDOW))
    return digest.hexdigest()


class JournalReader:
    """Reads a journal incrementally from a saved byte offset.

    ``read()`` returns the complete lines appended since the last call as ``(seq, event)`` pairs.
    If the file shrank or was replaced, the reader starts over and ``reset`` is set, so the caller
    knows to refold from scratch. A reader resumed from a saved offset is also given the
    ``fingerprint`` of the bytes before it: a journal rewritten in place (same inode, as long or
    longer, other bytes) does not match it, and the reader starts over too. ``missing`` says
    that the journal was not there at the last read."""

    __slots__ = ("_verify", "fingerprint", "ino", "missing", "offset", "path", "reset", "seq")

    def __init__(
        self,
        path: Path,
        *,
        offset: int = 0,
        seq: int = 0,
        ino: int | None = None,
        fingerprint: str | None = None,
    ):
        self.path = path
        self.offset = offset
        self.seq = seq
        self.ino = ino
        self.fingerprint = fingerprint
        self.reset = False
        self.missing = False
        self._verify = offset > 0

    def read(self) -> list[tuple[int, Event]]:
        """The complete lines appended since the last call, decoded, with their seq."""
        first, lines = self.read_lines()
        return [(first + n, decode_line(line)) for n, line in enumerate(lines)]

    def read_lines(self) -> tuple[int, list[bytes]]:
        """The complete lines appended since the last call, raw (without newlines), and the
        seq of the first."""
        self.reset = False
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self.missing = True
            return self.seq, []
        self.missing = False
        try:
            st = os.fstat(fd)
            if (self.ino is not None and st.st_ino != self.ino) or st.st_size < self.offset:
                self._start_over()
            elif self._verify and fingerprint(fd, self.offset) != self.fingerprint:
                self._start_over()  # rewritten in place: what was read is not there any more
            self._verify = False
            self.ino = st.st_ino
            if st.st_size == self.offset:
                return self.seq, []
            os.lseek(fd, self.offset, os.SEEK_SET)
            data = _read_all(fd, st.st_size - self.offset)
            end = data.rfind(b"\n")
            if end < 0:
                return self.seq, []
            self.offset += end + 1
            self.fingerprint = fingerprint(fd, self.offset)
        finally:
            os.close(fd)
        lines = data[:end].split(b"\n")
        first, self.seq = self.seq, self.seq + len(lines)
        return first, lines

    def _start_over(self) -> None:
        self.offset, self.seq, self.fingerprint, self.reset = 0, 0, None, True


def _read_all(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_events(home: Path, worker: str) -> list[Event]:
    """Every event in a worker's journal (complete lines only), in journal order."""
    reader = JournalReader(require(home, worker))
    return [event for _, event in reader.read()]


def iter_events(home: Path, worker: str) -> Iterator[tuple[int, Event]]:
    yield from JournalReader(require(home, worker)).read()


def prepare(home: Path, worker: str) -> Path:
    """Create the worker's directory (0700) and return its journal path."""
    return ensure_dir(worker_dir(home, worker)) / "journal.jsonl"
