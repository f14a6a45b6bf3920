"""Reading many workers' states at once, with an optional fold cache.

A full replay is the truth. The cache only saves the fold accumulator together with the byte
offset, line count, inode and fingerprint (:func:`fleet._journal.fingerprint`) it was taken at;
a cached entry is used only when the journal still has that inode, at least that many bytes and
the same fingerprint (a journal rewritten in place is replayed), and the fold simply continues
from there, so a warm read gives exactly what a full replay gives (tests compare them).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import zlib
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from fleet._core.accumulator import Accumulator
from fleet._core.fold import Policy, WorkerState, feed_lines, snapshot
from fleet._errors import SettingsError
from fleet._files import atomic_write, read_input
from fleet._home import FILE_MODE, cache_dir, ensure_dir, journal_path
from fleet._journal import JournalReader, list_workers

#: The cache's format, and the accumulator's shape: a cache saved by a fold with other fields
#: (an older or newer fleet) is never continued from, since its counts would be off.
CACHE_VERSION: Final = f"5-{zlib.crc32(','.join(attrs.fields_dict(Accumulator)).encode()):08x}"
#: A cache larger than this is not read (a replay is slower, never wrong).
CACHE_LIMIT: Final = 256 << 20


class Folded:
    """One worker's reader and accumulator, advanced together."""

    __slots__ = ("acc", "reader", "worker")

    def __init__(self, worker: str, reader: JournalReader, acc: Accumulator) -> None:
        self.worker = worker
        self.reader = reader
        self.acc = acc

    def advance(self) -> bool:
        """Fold whatever was appended since the last call; True when anything changed."""
        first, lines = self.reader.read_lines()
        if self.reader.reset:
            self.acc = Accumulator()
        if not lines and not self.reader.reset:
            return False
        feed_lines(self.acc, lines, first, self.worker)
        return True

    def state(self, now: float, policy: Policy, seen: Iterable[str] = ()) -> WorkerState:
        return snapshot(self.worker, self.acc, now, policy, seen)


def open_folded(home: Path, worker: str) -> Folded:
    folded = Folded(worker, JournalReader(journal_path(home, worker)), Accumulator())
    folded.advance()
    return folded


class FoldCache:
    """A single file under ``$FLEET_HOME/cache`` mapping each worker to a saved fold."""

    def __init__(self, home: Path) -> None:
        self.path = cache_dir(home) / f"fold-v{CACHE_VERSION}.json"

    def load(self) -> dict[str, Any]:
        try:
            data = orjson.loads(read_input(self.path, "fold cache", limit=CACHE_LIMIT) or b"")
        except (SettingsError, orjson.JSONDecodeError):
            return {}  # no cache, or one that is not fleet's: a replay is always right
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return {}
        workers = data.get("workers")
        return workers if isinstance(workers, dict) else {}

    def save(self, entries: dict[str, Any]) -> None:
        # A cache is only ever a shortcut: losing it to a crash costs a replay, so no fsync;
        # and a home that cannot be written (read-only, full), or a fold orjson cannot write,
        # must not fail a command that only reads.
        with contextlib.suppress(OSError, TypeError):
            payload = orjson.dumps({"version": CACHE_VERSION, "workers": entries})
            ensure_dir(self.path.parent)
            atomic_write(self.path, payload, FILE_MODE, fsync=False)


def _from_cache(home: Path, worker: str, entry: Any) -> Folded | None:
    try:
        reader = JournalReader(
            journal_path(home, worker),
            offset=int(entry["offset"]),
            seq=int(entry["seq"]),
            ino=int(entry["ino"]),
            fingerprint=_fingerprint_of(entry),
        )
        acc = Accumulator.from_dict(entry["acc"])
    except (KeyError, TypeError, ValueError):
        return None
    return Folded(worker, reader, acc)


def _fingerprint_of(entry: Any) -> str | None:
    fp = entry["fp"]
    if fp is not None and not isinstance(fp, str):
        raise TypeError("fingerprint")
    return fp


#: Below this many journals to replay from scratch, a second process costs more than it saves.
PARALLEL_MIN_WORKERS: Final = 64


def _replay_chunk(
    home: str, workers: list[str]
) -> list[tuple[str, int, int, int, str | None, Any]]:
    out = []
    for worker in workers:
        folded = Folded(worker, JournalReader(journal_path(Path(home), worker)), Accumulator())
        folded.advance()
        r = folded.reader
        out.append((worker, r.offset, r.seq, r.ino or 0, r.fingerprint, folded.acc.to_dict()))
    return out


def _replay_in_parallel(home: Path, workers: list[str]) -> dict[str, Folded] | None:
    """Full replays spread over the machine's cores, or None where that is not worth it or not
    safe (fork from a process that already runs threads)."""
    cpus = os.cpu_count() or 1
    if cpus < 2 or len(workers) < PARALLEL_MIN_WORKERS or threading.active_count() > 1:
        return None
    procs = min(cpus, 8)
    chunks = [workers[i::procs] for i in range(procs)]
    try:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=procs, mp_context=ctx) as pool:
            results = list(pool.map(_replay_chunk, [str(home)] * procs, chunks))
    except (OSError, RuntimeError, ValueError):
        return None
    out: dict[str, Folded] = {}
    for chunk in results:
        for worker, offset, seq, ino, fp, acc in chunk:
            reader = JournalReader(
                journal_path(home, worker), offset=offset, seq=seq, ino=ino, fingerprint=fp
            )
            out[worker] = Folded(worker, reader, Accumulator.from_dict(acc))
    return out


def load_folded(
    home: Path, workers: Iterable[str] | None = None, *, use_cache: bool = True
) -> dict[str, Folded]:
    """Fold every named worker (default: all), continuing from the cache where it is valid,
    and refresh the cache."""
    names = list_workers(home) if workers is None else list(workers)
    cache = FoldCache(home)
    entries = cache.load() if use_cache else {}
    out: dict[str, Folded] = {}
    cold = [w for w in names if w not in entries]
    replayed = _replay_in_parallel(home, cold) or {}
    changed = bool(cold)
    for worker in names:
        folded = replayed.get(worker)
        if folded is None and worker in entries:
            folded = _from_cache(home, worker, entries[worker])
        if folded is None:
            folded = Folded(worker, JournalReader(journal_path(home, worker)), Accumulator())
        if folded.advance():
            changed = True
        out[worker] = folded
    if use_cache and changed:
        for worker, folded in out.items():
            entries[worker] = {
                "offset": folded.reader.offset,
                "seq": folded.reader.seq,
                "ino": folded.reader.ino or 0,
                "fp": folded.reader.fingerprint,
                "acc": folded.acc.to_dict(),
            }
        cache.save(entries)
    return out


def load_states(
    home: Path,
    workers: Iterable[str] | None,
    now: float,
    policy: Policy | None = None,
    seen: Iterable[str] = (),
    *,
    use_cache: bool = True,
) -> list[WorkerState]:
    extra = frozenset(seen)
    folded = load_folded(home, workers, use_cache=use_cache)
    policy = policy or Policy()
    return [f.state(now, policy, extra) for f in folded.values()]
