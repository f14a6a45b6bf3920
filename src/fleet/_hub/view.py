"""The coordinator's view of the hub: every host's workers, folded as their hosts fold them.

Each remote worker's shipped lines go through the very fold a host runs
(:func:`fleet._core.fold.feed_lines`, with the worker's own id and the seq each line carries),
so a remote state is the host's state with ``host/`` put before its worker id and marks. The
reader keeps, per worker, the generation and the next seq it expects: a line it already has
is dropped (a re-send, whatever JetStream's de-duplication window did), a line that comes early
waits for the ones before it, and a reset marker (the journal was replaced on its host) starts
the worker's fold over.

Hosts: a host whose ``fleet ship`` sent no heartbeat for ``offline_after`` seconds (at least
three of its heartbeat intervals), or that said it stopped, is offline. Its workers then read
``offline`` (reason ``no_heartbeat`` or ``ship_stopped``), which needs attention until its mark
``host/worker@<last seq>o`` is seen, and keep what their journal last said in ``known_state``,
``known_reason`` and ``known_mark``. A retired worker stays retired. A host that ships again
clears it.

Seen marks live in the hub's ``fleet-seen`` bucket, one key per mark, under the coordinator's
name: any process or machine of the same coordinator reads them, so none is woken twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Final, cast

import attrs
import orjson

from fleet._clock import Clock, SystemClock
from fleet._core.accumulator import Accumulator
from fleet._core.events import Event, decode_line
from fleet._core.fold import Policy, WorkerState, feed_lines, snapshot
from fleet._core.ids import is_worker_id, parse_mark
from fleet._core.machine import State
from fleet._errors import InvalidMark, Refused, ToolError, UnknownWorker
from fleet._files import atomic_write
from fleet._home import FILE_MODE, cache_dir, ensure_dir
from fleet._hub import client as hc
from fleet._hub.actions import RemoteResult, budget, request, result_of
from fleet._hub.config import HubConfig
from fleet._hub.names import (
    HOSTS_BUCKET,
    SEEN_BUCKET,
    STREAM,
    HubMark,
    is_qualified,
    journal_filter,
    msg_id,
    offline_mark,
    parse_hub_mark,
    parse_line_header,
    qualify,
    reset_msg_id,
    rpc_subject,
    seen_key,
    seen_prefix,
    split_worker,
    untoken,
    worker_of_subject,
)
from fleet._hub.remote import HostInfo, HostState, RemoteState, _Beat, _Remote
from fleet._watch import Transition, WaitResult

CACHE_VERSION: Final = 2
#: Bytes of a line's digest (``Fleet-Line``).
DIGEST: Final = 8
#: Lines of one worker held while an earlier one is missing.
MAX_EARLY: Final = 100_000
OPEN_TIMEOUT: Final = 15.0


def _cache_path(home: Path, cfg: HubConfig) -> Path:
    digest = hashlib.blake2b(cfg.display().encode(), digest_size=8).hexdigest()
    return cache_dir(home) / f"hub-v{CACHE_VERSION}-{digest}.json"


class HubView:
    """A coordinator's live view of the hub. Use as a context manager (or ``open``/``close``):
    it owns a thread with the NATS connection."""

    def __init__(
        self,
        cfg: HubConfig,
        *,
        home: Path,
        clock: Clock | None = None,
        policy: Policy | None = None,
        use_cache: bool = True,
        keep_lines: bool = False,
        open_timeout: float = OPEN_TIMEOUT,
    ) -> None:
        self.cfg = cfg
        self.home = home
        self.clock: Clock = clock or SystemClock()
        self.policy = policy or Policy()
        self.use_cache = use_cache and not keep_lines
        self.keep_lines = keep_lines
        self.open_timeout = open_timeout
        self._cond = threading.Condition()
        self._workers: dict[tuple[str, str], _Remote] = {}
        self._hosts: dict[str, _Beat] = {}
        self._seen: set[str] = set()
        self._version = 0
        self.dropped = 0
        #: messages on a host's subjects that are not what it ships, and lines that came again
        #: with other content; per host: [foreign, conflicts, the first of them]
        self.foreign = 0
        self.conflicts = 0
        self._offenses: dict[str, list[Any]] = {}
        self._rt: hc.Runtime | None = None
        self._nc: hc.NATS | None = None
        self._tails: list[hc.Tail] = []
        self._journal: hc.Tail | None = None
        self._created: str | None = None
        self._closed = False
        #: whether the folds moved since the cache was read or written
        self._unsaved = True

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> HubView:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def open(self) -> HubView:
        if self._rt is not None:
            return self
        start_seq, last_id = self._load_cache()
        self._rt = hc.Runtime("fleet-hub-view")
        try:
            self._rt.call(self._open(start_seq, last_id), self.open_timeout + 5)
        except TimeoutError:
            self.close()
            raise hc.HubUnreachable(
                f"the hub at {self.cfg.display()} did not answer within {self.open_timeout:g}s"
            ) from None
        except BaseException:
            self.close()
            raise
        if self.use_cache:
            self._save_cache()
        return self

    async def _open(self, start_seq: int, last_id: str | None) -> None:
        async def reconnected() -> None:
            # A restarted server may have lost the consumers: make them again.
            for tail in self._tails:
                tail.reset()

        nc = await hc.connect_once(
            self.cfg, name="fleet hub view", timeout=self.open_timeout, on_reconnect=reconnected
        )
        self._nc = nc
        js = nc.jetstream()
        await hc.ensure_stream(js)
        await hc.ensure_buckets(js)
        info = await js.stream_info(STREAM)
        created = str(info.created) if getattr(info, "created", None) else None
        if created != self._created:
            # Not the stream the cache was taken from.
            start_seq, last_id = 0, None
            with self._cond:
                self._workers.clear()
                self._unsaved = True
        self._created = created
        async def prepare() -> None:
            await hc.ensure_stream(js)
            await hc.ensure_buckets(js)

        journal = hc.Tail(nc, js, STREAM, journal_filter(), self._on_line, kind="journal",
                          start_seq=start_seq, last_id=last_id, prepare=prepare)
        hosts = hc.Tail(nc, js, f"KV_{HOSTS_BUCKET}", f"$KV.{HOSTS_BUCKET}.>", self._on_beat,
                        kind="kv", prepare=prepare)
        seen = hc.Tail(nc, js, f"KV_{SEEN_BUCKET}",
                       f"$KV.{SEEN_BUCKET}.{seen_prefix(self.cfg.coordinator)}>", self._on_seen,
                       kind="kv", prepare=prepare)
        self._journal = journal
        self._tails = [journal, hosts, seen]
        for tail in self._tails:
            tail.start()
        try:
            await asyncio.wait_for(
                asyncio.gather(*(t.caught_up.wait() for t in self._tails)), self.open_timeout
            )
        except TimeoutError:
            raise hc.HubUnreachable(
                f"the hub at {self.cfg.display()} did not deliver its journals within "
                f"{self.open_timeout:g}s"
            ) from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        rt, self._rt = self._rt, None
        if rt is not None:
            if self.use_cache and self._journal is not None:
                self._save_cache()
            rt.close(self._shutdown())
        with self._cond:
            self._cond.notify_all()

    async def _shutdown(self) -> None:
        for tail in self._tails:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(tail.close(), 3)
        nc, self._nc = self._nc, None
        if nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 3)

    # -- the cache --------------------------------------------------------------------------

    def _load_cache(self) -> tuple[int, str | None]:
        if not self.use_cache:
            return 0, None
        try:
            data = orjson.loads(_cache_path(self.home, self.cfg).read_bytes())
            if data.get("version") != CACHE_VERSION or data.get("hub") != self.cfg.display():
                return 0, None
            workers: dict[tuple[str, str], _Remote] = {}
            for name, entry in data["workers"].items():
                host, worker = split_worker(name)
                r = _Remote(host, worker, False)
                r.acc = Accumulator.from_dict(entry["acc"])
                r.gen, r.next_seq = int(entry["gen"]), int(entry["next_seq"])
                r.digests = bytearray(bytes.fromhex(entry["digests"]))
                workers[(host, worker)] = r
            start, last_id = int(data["sseq"]), data.get("last_id")
            created = data.get("created")
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            return 0, None
        except Exception:  # a damaged accumulator: the cache is only ever a shortcut
            return 0, None
        self._workers = workers
        self._created = created
        self._unsaved = False
        return start, last_id

    def _save_cache(self) -> None:
        journal = self._journal
        if journal is None:
            return
        with self._cond:
            if not self._unsaved:
                return
            if any(r.early for r in self._workers.values()):
                return  # a worker waits for lines that come late: read them again next time
            entries = {
                qualify(h, w): {"gen": r.gen, "next_seq": r.next_seq, "acc": r.acc.to_dict(),
                                  "digests": r.digests.hex()}
                for (h, w), r in self._workers.items()
            }
            payload = {
                "version": CACHE_VERSION,
                "hub": self.cfg.display(),
                "created": self._created,
                "sseq": journal.sseq,
                "last_id": journal.last_id,
                "workers": entries,
            }
            self._unsaved = False
        path = _cache_path(self.home, self.cfg)
        with contextlib.suppress(OSError):
            ensure_dir(path.parent)
            atomic_write(path, orjson.dumps(payload), FILE_MODE, fsync=False)

    # -- messages (on the client's thread) ----------------------------------------------

    def _changed(self, folded: bool = False) -> None:
        self._unsaved = self._unsaved or folded
        self._version += 1
        self._cond.notify_all()

    def _offend(self, host: str, what: str, *, conflict: bool = False) -> None:
        """Count a message on ``host``'s subjects that is not what its host ships (it is
        ignored), keeping the first of them to show."""
        entry = self._offenses.setdefault(host, [0, 0, what])
        entry[1 if conflict else 0] += 1
        if conflict:
            self.conflicts += 1
        else:
            self.foreign += 1

    def _on_line(self, msg: hc.Msg, sseq: int, ts: float) -> None:
        h = msg.headers or {}
        names = worker_of_subject(msg.subject)
        host, worker = names or ("", "")
        if not is_worker_id(host) or not is_worker_id(worker):
            with self._cond:
                self._offend("?", f"a message on {msg.subject[:80]!r}")
            return
        try:
            reset = "Fleet-Reset" in h
            if reset:
                gen, seq, digest = int(h["Fleet-Reset"]), -1, b""
                expected = reset_msg_id(host, worker, gen)
            else:
                gen, seq, offset, _, hexdigest = parse_line_header(h["Fleet-Line"])
                digest = bytes.fromhex(hexdigest)
                if len(digest) != DIGEST:
                    raise ValueError("not a digest")
                expected = msg_id(host, worker, gen, offset)
            if gen < 0 or h.get("Nats-Msg-Id") != expected:
                raise ValueError("not the id its host gives it")
        except (KeyError, ValueError):
            with self._cond:
                self._offend(host, f"a message on {worker}'s subject that {host} does not ship")
            return
        with self._cond:
            r = self._workers.get((host, worker))
            if r is None:
                r = self._workers[(host, worker)] = _Remote(host, worker, self.keep_lines)
                r.gen = gen
                self._changed(folded=True)
            if gen < r.gen:
                self.dropped += 1  # a line of a journal its host has since replaced
                return
            if gen > r.gen:
                r.restart(gen)
                self._changed(folded=True)
            if reset:
                return
            if seq < r.next_seq or seq in r.early:
                had = r.early[seq][1] if seq in r.early else r.digest(seq)
                if had is not None and had != digest:
                    # The first line stays: a line is never replaced by another at its place.
                    r.conflicts += 1
                    self._offend(host, f"line {seq} of {worker} came again with other content",
                                 conflict=True)
                else:
                    r.dups += 1
                return
            if seq > r.next_seq:
                if len(r.early) >= MAX_EARLY:
                    self.dropped += 1  # read again from the stream when it is made again
                    return
                r.early[seq] = (msg.data, digest)
                return
            self._fold(r, msg.data, digest)
            while r.next_seq in r.early:
                self._fold(r, *r.early.pop(r.next_seq))
            self._changed(folded=True)

    def _fold(self, r: _Remote, line: bytes, digest: bytes) -> None:
        feed_lines(r.acc, (line,), r.next_seq, r.worker)
        r.next_seq += 1
        r.digests += digest
        if r.lines is not None:
            r.lines.append(line)

    def _on_beat(self, msg: hc.Msg, sseq: int, ts: float) -> None:
        host = untoken(msg.subject.rsplit(".", 1)[-1])
        op = (msg.headers or {}).get("KV-Operation")
        with self._cond:
            if op in ("DEL", "PURGE"):
                self._hosts.pop(host, None)
            else:
                try:
                    beat = orjson.loads(msg.data)
                    if not isinstance(beat, dict) or beat.get("host") != host:
                        self._offend(host, "a heartbeat that does not name its host")
                        return
                    new = _Beat(
                        ts=ts,
                        state=str(beat.get("state", "up")),
                        interval=float(beat.get("interval") or self.cfg.heartbeat),
                        shipped=beat.get("shipped"),
                        actions=beat.get("actions"),
                    )
                except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
                    return
                old = self._hosts.get(host)
                self._hosts[host] = new
                if (
                    old is not None
                    and (old.state, old.interval) == (new.state, new.interval)
                    and self.clock.now() < old.ts + self._bound(old)
                ):
                    # A host that stays up changes nothing anyone waits for: waiters wake at
                    # the bound of the beat they last saw, and then read the newer one.
                    return
            self._changed()

    def _on_seen(self, msg: hc.Msg, sseq: int, ts: float) -> None:
        try:
            mark = str(parse_hub_mark(orjson.loads(msg.data)["mark"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, InvalidMark):
            return
        with self._cond:
            if mark not in self._seen:
                self._seen.add(mark)
                self._changed()

    # -- hosts ----------------------------------------------------------------------------

    def _bound(self, beat: _Beat) -> float:
        return max(self.cfg.offline_after, 3 * beat.interval)

    def _host_status(self, host: str, now: float) -> tuple[HostState, str, float | None]:
        """online or offline, why, and since when (offline) or until when (online)."""
        beat = self._hosts.get(host)
        if beat is None:
            return "offline", "no_heartbeat", None
        if beat.state != "up":
            return "offline", "ship_stopped", beat.ts
        due = beat.ts + self._bound(beat)
        if now >= due:
            return "offline", "no_heartbeat", due
        return "online", "heartbeat", due

    def host_online(self, host: str) -> bool:
        with self._cond:
            return self._host_status(host, self.clock.now())[0] == "online"

    def hosts(self) -> list[HostInfo]:
        now = self.clock.now()
        with self._cond:
            # "?" holds what came on subjects of no host: counted (counts()), no host of its own
            names = sorted((set(self._hosts) | {h for h, _ in self._workers}
                            | set(self._offenses)) - {"?"})
            out = []
            for host in names:
                state, reason, _ = self._host_status(host, now)
                beat = self._hosts.get(host)
                out.append(HostInfo(
                    host=host, state=state, reason=reason,
                    last_beat=beat.ts if beat else None,
                    interval=beat.interval if beat else None,
                    workers=sum(1 for h, _ in self._workers if h == host),
                    shipped=beat.shipped if beat else None,
                    actions=beat.actions if beat else None,
                    ignored=self._offenses.get(host, [0])[0],
                    conflicts=self._offenses.get(host, [0, 0])[1],
                    first_ignored=self._offenses[host][2] if host in self._offenses else None,
                ))
        return out

    # -- names ------------------------------------------------------------------------------

    def workers(self) -> list[str]:
        with self._cond:
            return sorted(qualify(h, w) for h, w in self._workers)

    def resolve(self, worker: str) -> str:
        """A worker id as the hub knows it: ``host/worker``, or a bare id that one host has."""
        with self._cond:
            if is_qualified(worker):
                host, name = split_worker(worker)
                if (host, name) not in self._workers:
                    raise UnknownWorker(f"no worker {worker!r} in the hub {self.cfg.display()}")
                return worker
            if not is_worker_id(worker):
                split_worker(worker)  # the error for an invalid id
            found = sorted(qualify(h, w) for h, w in self._workers if w == worker)
        if not found:
            raise UnknownWorker(f"no worker {worker!r} on any host of the hub")
        if len(found) > 1:
            raise UnknownWorker(
                f"worker {worker!r} is on {len(found)} hosts: name one of {', '.join(found)}"
            )
        return found[0]

    def resolve_mark(self, mark: str) -> str:
        """A mark as the hub writes it (``host/worker@seq``); a bare one of a worker that one
        host has is qualified."""
        if "/" in mark:
            return str(parse_hub_mark(mark))
        bare = parse_mark(mark.removesuffix("o") if mark.endswith("o") else mark)
        kind = "o" if mark.endswith("o") else ("q" if bare.quiet else "")
        host, worker = split_worker(self.resolve(bare.worker))
        return str(HubMark(host=host, worker=worker, seq=bare.seq, kind=kind))

    # -- states -----------------------------------------------------------------------------

    def _state(self, r: _Remote, now: float, extra: frozenset[str]) -> RemoteState:
        q = qualify(r.host, r.worker)
        prefix = q + "@"
        local = {m[len(r.host) + 1:] for m in self._seen | extra if m.startswith(prefix)}
        st = snapshot(r.worker, r.acc, now, self.policy, local)
        fields = attrs.asdict(st, recurse=False)
        fields.update(worker=q, mark=f"{r.host}/{st.mark}")
        host_state, why, when = self._host_status(r.host, now)
        beat = self._hosts.get(r.host)
        common = {
            "host": r.host,
            "local_worker": r.worker,
            "host_seen": beat.ts if beat else None,
            "known_state": st.state,
            "known_reason": st.reason,
            "known_mark": fields["mark"],
        }
        if host_state == "online" or st.state == "retired":
            return RemoteState(**fields, **common, host_state=host_state)
        mark = offline_mark(r.host, r.worker, max(r.acc.last_seq, 0))
        seen = mark in self._seen or mark in extra
        fields.update(
            state=cast(State, "offline"),
            reason=why,
            since=when if when is not None else (r.acc.last_event_ts or st.since),
            seq=max(r.acc.last_seq, 0),
            mark=mark,
            seen=seen,
            needs_attention=not seen,
            quiet_at=None,
        )
        return RemoteState(**fields, **common, host_state="offline")

    def _extra(self, seen: Iterable[str]) -> frozenset[str]:
        return frozenset(self.resolve_mark(m) for m in seen)

    def states(
        self, workers: Iterable[str] | None = None, seen: Iterable[str] = ()
    ) -> list[RemoteState]:
        """Every worker (or the named ones) as of now."""
        extra = self._extra(seen)
        wanted = None if workers is None else {split_worker(self.resolve(w)) for w in workers}
        now = self.clock.now()
        with self._cond:
            keys = sorted(self._workers) if wanted is None else sorted(wanted)
            return [self._state(self._workers[k], now, extra) for k in keys]

    def state(self, worker: str) -> RemoteState:
        return self.states([worker])[0]

    def lines(self, worker: str) -> list[bytes]:
        """The lines the hub holds for a worker, in journal order (a view made with
        ``keep_lines``)."""
        key = split_worker(self.resolve(worker))
        with self._cond:
            r = self._workers[key]
            if r.lines is None:
                raise ToolError("this hub view keeps no lines (open it with keep_lines=True)")
            return list(r.lines)

    def log(self, worker: str) -> list[Event]:
        return [decode_line(line) for line in self.lines(worker)]

    def counts(self) -> dict[str, int]:
        """What the reader dropped: re-sent lines, lines of replaced journals, lines still
        waiting for earlier ones, messages a host did not ship, and lines that came again with
        other content (the first kept)."""
        with self._cond:
            return {
                "duplicates": sum(r.dups for r in self._workers.values()),
                "replaced": self.dropped,
                "waiting": sum(len(r.early) for r in self._workers.values()),
                "foreign": self.foreign,
                "conflicts": self.conflicts,
            }

    def next_seqs(self) -> dict[str, tuple[int, int]]:
        """For each worker, the generation and the number of lines folded."""
        with self._cond:
            return {qualify(h, w): (r.gen, r.next_seq) for (h, w), r in self._workers.items()}

    # -- waiting ----------------------------------------------------------------------------

    def poll(self, seen: Iterable[str] = (), only: Iterable[str] | None = None) -> WaitResult:
        states = self.states(None if only is None else list(only), seen)
        if only is None:
            states = [s for s in states if s.state != "retired"]
        live = tuple(states)
        return WaitResult(
            timed_out=False, attention=tuple(s for s in live if s.needs_attention), workers=live
        )

    def _next_wake(self, states: Iterable[WorkerState], deadline: float | None) -> float | None:
        """Seconds until something changes with no message: a quiet deadline, a host's
        heartbeat bound, or the caller's deadline."""
        now, mono = self.clock.now(), self.clock.monotonic()
        waits = [] if deadline is None else [deadline - mono]
        for s in states:
            if s.quiet_at is not None:
                waits.append(s.quiet_at - now)
        with self._cond:
            for beat in self._hosts.values():
                if beat.state == "up":
                    due = beat.ts + self._bound(beat) - now
                    if due > 0:
                        waits.append(due)
        return max(0.0, min(waits)) if waits else None

    def _sleep(self, version: int, seconds: float | None) -> None:
        with self._cond:
            if self._version != version or self._closed:
                return
            self._cond.wait(seconds if seconds is None else max(0.0, seconds) + 0.001)

    def wait(
        self,
        seen: Iterable[str] = (),
        timeout: float | None = None,
        only: Iterable[str] | None = None,
    ) -> WaitResult:
        """Block until a worker (among ``only``) needs attention, or ``timeout`` passes."""
        marks = list(seen)
        wanted = None if only is None else list(only)
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        while True:
            with self._cond:
                version = self._version
            result = self.poll(marks, wanted)
            if result.attention or self._closed:
                return result
            if deadline is not None and self.clock.monotonic() >= deadline:
                return attrs.evolve(result, timed_out=True)
            self._sleep(version, self._next_wake(result.workers, deadline))

    def transitions(
        self, seen: Iterable[str] = (), timeout: float | None = None
    ) -> Iterator[Transition]:
        marks = list(seen)
        last: dict[str, WorkerState] = {}
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        while not self._closed:
            with self._cond:
                version = self._version
            states = self.states(None, marks)
            changed = False
            for state in states:
                before = last.get(state.worker)
                last[state.worker] = state
                if before is None or (before.state, before.reason, before.mark) != (
                    state.state, state.reason, state.mark
                ):
                    changed = True
                    yield Transition(worker=state.worker, before=before, after=state)
            now = self.clock.monotonic()
            if changed and timeout is not None:
                deadline = now + timeout
            if deadline is not None and now >= deadline:
                return
            self._sleep(version, self._next_wake(states, deadline))

    # -- seen marks -------------------------------------------------------------------------

    def record_seen(self, marks: Iterable[str]) -> list[str]:
        """Record marks as seen in the hub, under this coordinator's name."""
        resolved = [parse_hub_mark(self.resolve_mark(m)) for m in marks]
        with self._cond:
            new = [m for m in resolved if str(m) not in self._seen]
        if not new or self._rt is None:
            return [str(m) for m in resolved]
        self._rt.call(self._put_seen(new), 30)
        with self._cond:
            self._seen.update(str(m) for m in resolved)
            self._changed()
        return [str(m) for m in resolved]

    async def _put_seen(self, marks: list[HubMark]) -> None:
        assert self._nc is not None
        js = self._nc.jetstream()
        now = self.clock.now()
        for mark in marks:
            body = orjson.dumps({"mark": str(mark), "ts": now, "by": self.cfg.coordinator})
            await js.publish(
                hc.kv_subject(SEEN_BUCKET, seen_key(self.cfg.coordinator, mark)), body,
                timeout=hc.REQUEST_TIMEOUT,
            )

    # -- remote actions ---------------------------------------------------------------------

    def act(self, verb: str, host: str, args: dict[str, Any], *, as_json: bool) -> RemoteResult:
        """Run ``fleet <verb>`` on ``host`` (see :mod:`fleet._hub.actions`). Refused at once
        when the host is offline."""
        now = self.clock.now()
        with self._cond:
            state, why, _ = self._host_status(host, now)
            beat = self._hosts.get(host)
        if state != "online":
            if why == "ship_stopped":
                how = "its `fleet ship` stopped"
            elif beat is None:
                how = "it never sent a heartbeat"
            else:
                how = f"no heartbeat for {max(0.0, now - beat.ts):.0f}s"
            raise Refused(
                f"host {host} is offline ({how}): {verb} runs on the worker's own host, "
                f"never from the hub's copy; start `fleet ship` on {host} and try again"
            )
        req = request(verb, as_json=as_json, **args)
        assert self._rt is not None
        limit = budget(req)
        data = self._rt.call(self._request(host, req, limit), limit + 10)
        return result_of(host, verb, data)

    async def _request(self, host: str, req: dict[str, Any], limit: float) -> bytes:
        assert self._nc is not None
        try:
            msg = await self._nc.request(
                rpc_subject(host, self.cfg.coordinator), orjson.dumps(req), timeout=limit
            )
        except hc.nats.errors.NoRespondersError:
            raise Refused(
                f"host {host} answers no actions: its `fleet ship` runs with --no-actions, or "
                "has just stopped"
            ) from None
        except (TimeoutError, hc.nats.errors.TimeoutError):
            raise ToolError(f"host {host} did not answer within {limit:g}s") from None
        return bytes(msg.data)
