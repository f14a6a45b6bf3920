"""What the hub view holds of each remote host and worker: the state it shows
(:class:`RemoteState`, :class:`HostInfo`), and per host its last heartbeat, per worker its
fold in progress and the lines it still waits for.

Plain data: the view (:mod:`fleet._hub.view`), with its connection, its threads and its
waiting, fills and reads it; nothing here talks to a server.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from fleet._core.accumulator import Accumulator
from fleet._core.fold import WorkerState

HostState = Literal["online", "offline"]


@attrs.frozen(kw_only=True)
class RemoteState(WorkerState):
    """A worker's state as the hub shows it: ``worker`` and ``mark`` are host-qualified.

    ``state`` is ``offline`` while the worker's host is offline (and the worker not retired);
    ``known_*`` then hold what its journal last said."""

    host: str = ""
    local_worker: str = ""
    host_state: HostState = "online"
    #: the time of the host's last heartbeat (the server's clock)
    host_seen: float | None = None
    known_state: str = ""
    known_reason: str = ""
    known_mark: str = ""

    def hub_fields(self) -> dict[str, Any]:
        """What the hub adds to a state, for JSON output beside the usual fields."""
        return {
            "host": self.host,
            "host_state": self.host_state,
            "host_seen": self.host_seen,
            "known_state": self.known_state,
            "known_reason": self.known_reason,
            "known_mark": self.known_mark,
        }


@attrs.frozen(kw_only=True)
class HostInfo:
    host: str
    state: HostState
    reason: str
    last_beat: float | None
    interval: float | None
    workers: int
    shipped: int | None = None
    actions: bool | None = None
    #: messages on this host's subjects that it did not ship (ignored), and lines that came
    #: again with other content (the first kept); the first of them, said in words
    ignored: int = 0
    conflicts: int = 0
    first_ignored: str | None = None


@attrs.define
class _Beat:
    ts: float
    state: str
    interval: float
    shipped: int | None
    actions: bool | None


class _Remote:
    __slots__ = ("acc", "conflicts", "digests", "dups", "early", "gen", "host", "lines",
                 "next_seq", "worker")

    def __init__(self, host: str, worker: str, keep_lines: bool) -> None:
        self.host, self.worker = host, worker
        self.acc = Accumulator()
        self.gen = 0
        self.next_seq = 0
        #: lines that came before one they follow: seq -> (line, digest)
        self.early: dict[int, tuple[bytes, bytes]] = {}
        self.lines: list[bytes] | None = [] if keep_lines else None
        self.dups = 0
        self.conflicts = 0
        #: the digest of every line folded, 8 bytes each, in seq order
        self.digests = bytearray()

    def digest(self, seq: int) -> bytes | None:
        """The digest of folded line ``seq`` (None when it is not known: a cache of old)."""
        piece = bytes(self.digests[seq * 8:(seq + 1) * 8])
        return piece if len(piece) == 8 else None

    def restart(self, gen: int) -> None:
        self.acc = Accumulator()
        self.gen, self.next_seq = gen, 0
        self.digests = bytearray()
        self.early.clear()
        if self.lines is not None:
            self.lines = []
