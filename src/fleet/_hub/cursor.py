"""The shipper's cursors: how far each local journal has been shipped and acknowledged.

One file per host id, ``$FLEET_HOME/hub/ship-<host>.json`` (0600, written atomically). A cursor
is a hint, never the truth: on every (re)connection the shipper checks that the server still
holds the last message it acknowledged, at the same stream sequence; when it does not (a server
that lost its last messages, or a new one), the worker's generation is sent again from its
first line, which de-duplication drops where the server has it: a re-send, never a gap.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from fleet._files import atomic_write
from fleet._home import FILE_MODE, ensure_dir

VERSION: Final = 1


def line_hash(line: bytes) -> str:
    """A short digest of a journal line as the host holds it (before redaction)."""
    return hashlib.blake2b(line, digest_size=8).hexdigest()


@attrs.define(kw_only=True)
class Cursor:
    """Where shipping one worker's journal stands. ``gen`` counts the times the journal was
    found replaced (another inode, shorter, or its last shipped line changed): each generation
    is shipped from its first line, after a reset marker."""

    gen: int = 0
    ino: int | None = None
    #: the byte offset and seq of the next line to ship
    offset: int = 0
    seq: int = 0
    #: where the last acknowledged line starts, and its digest (to notice a rewrite)
    last_start: int = -1
    last_hash: str | None = None
    #: the reset marker of this generation is still to be sent
    reset_pending: bool = False
    #: the stream sequence and message id of the last message the server acknowledged for
    #: this worker: while the server holds that very message there, it holds every earlier
    #: one (a server loses only its last messages)
    sseq: int = 0
    last_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Cursor:
        if not isinstance(data, dict):
            raise ValueError("not a cursor")
        cursor = cls(
            gen=int(data["gen"]),
            ino=None if data.get("ino") is None else int(data["ino"]),
            offset=int(data["offset"]),
            seq=int(data["seq"]),
            last_start=int(data.get("last_start", -1)),
            last_hash=data.get("last_hash"),
            reset_pending=bool(data.get("reset_pending", False)),
            sseq=int(data.get("sseq", 0)),
            last_id=data.get("last_id"),
        )
        if min(cursor.gen, cursor.offset, cursor.seq) < 0:
            raise ValueError("negative cursor")
        return cursor


def ship_dir(home: Path) -> Path:
    return home / "hub"


class CursorStore:
    def __init__(self, home: Path, host: str) -> None:
        self.path = ship_dir(home) / f"ship-{host}.json"

    def load(self) -> dict[str, Cursor]:
        """The saved cursors; a missing or damaged file gives none (the server then says where
        shipping stands)."""
        try:
            data = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return {}
        if not isinstance(data, dict) or data.get("version") != VERSION:
            return {}
        out: dict[str, Cursor] = {}
        workers = data.get("workers")
        if not isinstance(workers, dict):
            return {}
        for worker, entry in workers.items():
            try:
                out[str(worker)] = Cursor.from_dict(entry)
            except (KeyError, TypeError, ValueError):
                continue
        return out

    def save(self, cursors: dict[str, Cursor]) -> None:
        ensure_dir(self.path.parent)
        payload = orjson.dumps(
            {"version": VERSION, "workers": {w: c.to_dict() for w, c in sorted(cursors.items())}}
        )
        # The server is checked on every connection, so a cursor lost to a crash costs a
        # re-send, not an event: no fsync.
        atomic_write(self.path, payload, FILE_MODE, fsync=False)
