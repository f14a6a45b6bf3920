"""``fleet ship``: tail every local journal into the hub, say the host is alive, and answer
remote actions.

Correctness first:

- Only complete lines are shipped (a torn tail waits for its newline), each as one message on
  ``fleet.<host>.<worker>`` with two headers: ``Nats-Msg-Id`` (``<host>/<worker>/<offset>``, see
  :func:`fleet._hub.names.msg_id`) and ``Fleet-Line`` (``<gen> <seq> <offset> <end> <digest>``:
  the journal's generation, the line's index, which marks use, its bytes, and a digest).
- A line is published in journal order and the cursor moves past it only once the server
  acknowledged it and every line before it; the cursors are saved after each batch.
- On every (re)connection the cursor is checked against the server: it must still hold the
  last message it acknowledged for the worker, at the stream sequence it gave (a server only
  ever loses its last messages, so then it holds every earlier one too). When it does not (it
  lost messages in a crash, or it is a new server), the worker's generation is sent again from
  its first line; de-duplication drops what the server has. A lost cursor file is rebuilt from
  the server's last message for the worker when the journal still holds that very line.
- A journal that was replaced (another inode), shortened, or whose last shipped line changed is
  shipped again from its first line as a new generation, after a reset marker that tells
  readers to drop the old one: never shipped twice into one fold, never skipped.
- Offline is normal: the host keeps journaling and the shipper keeps trying, then catches up.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import orjson

from fleet._core.ids import is_worker_id
from fleet._errors import Refused
from fleet._home import ensure_dir, journal_path, workers_dir
from fleet._hub import client as hc
from fleet._hub.actions import record_action
from fleet._hub.config import HubConfig
from fleet._hub.cursor import Cursor, CursorStore, line_hash, ship_dir
from fleet._hub.names import (
    HOSTS_BUCKET,
    STREAM,
    coordinator_of_rpc,
    journal_subject,
    line_header,
    msg_id,
    parse_line_header,
    reset_msg_id,
    rpc_filter,
    token,
    validate_host_id,
)
from fleet._hub.redact import redact_line
from fleet._hub.secure import inbox_prefix
from fleet._journal import list_workers

#: Lines published before their acknowledgements are awaited.
BATCH: Final = 256
#: Bytes read from a journal at a time (a longer line is read whole).
READ_CHUNK: Final = 1 << 20
ACK_TIMEOUT: Final = 5.0
#: The safety net for lost file events: every journal is stat'ed this often.
SWEEP_INTERVAL: Final = 5.0

Emit = Callable[[dict[str, Any]], None]


class Reconnected(Exception):
    """The connection was made again since the cursors were checked against the server."""


def _quiet(_: dict[str, Any]) -> None:
    return None


class ShipLock:
    """One shipper per fleet home and host: a second one would race the first's cursors."""

    def __init__(self, home: Path, host: str) -> None:
        self.host = host
        self.path = ensure_dir(ship_dir(home)) / f"ship-{host}.lock"
        self._fd: int | None = None

    def __enter__(self) -> ShipLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise Refused(
                f"another `fleet ship` already ships this home as host {self.host} (pid {other})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class Acks:
    """Pipelined JetStream publishes: each line is sent with a reply subject of its own under
    one inbox, and its acknowledgement resolves a future. A future given up on is forgotten, so
    nothing holds a slot for an acknowledgement that never comes (a server that died)."""

    def __init__(self, nc: hc.NATS) -> None:
        self.nc = nc
        self.prefix = nc.new_inbox()
        self.pending: dict[str, asyncio.Future[bytes]] = {}
        self._n = 0

    async def start(self) -> None:
        await self.nc.subscribe(f"{self.prefix}.*", cb=self._on_ack)

    async def _on_ack(self, msg: hc.Msg) -> None:
        future = self.pending.pop(msg.subject.rsplit(".", 1)[-1], None)
        if future is not None and not future.done():
            future.set_result(msg.data)

    async def publish(
        self, subject: str, payload: bytes, headers: dict[str, str]
    ) -> asyncio.Future[bytes]:
        self._n += 1
        token = str(self._n)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.pending[token] = future
        try:
            await self.nc.publish(subject, payload, reply=f"{self.prefix}.{token}",
                                  headers=headers)
        except BaseException:
            self.pending.pop(token, None)
            raise
        return future

    def forget(self, futures: list[asyncio.Future[bytes]]) -> None:
        gone = set(map(id, futures))
        for tag, future in list(self.pending.items()):
            if id(future) in gone:
                del self.pending[tag]
        for future in futures:
            future.cancel()


class Shipper:
    """Ships one fleet home as one host. Run it with ``await shipper.run(stop)``."""

    def __init__(
        self,
        cfg: HubConfig,
        home: Path,
        *,
        host: str | None = None,
        actions: bool = True,
        allow_commands: bool = False,
        emit: Emit | None = None,
        watch_files: bool = True,
        sweep_interval: float = SWEEP_INTERVAL,
        batch: int = BATCH,
    ) -> None:
        self.cfg = cfg
        self.home = home
        self.host = validate_host_id(host or cfg.host_id())
        self.actions = actions
        self.allow_commands = allow_commands
        self.emit = emit or _quiet
        self.watch_files = watch_files
        self.sweep_interval = sweep_interval
        self.batch = max(1, batch)
        self.store = CursorStore(home, self.host)
        self.cursors: dict[str, Cursor] = self.store.load()
        self.shipped = 0
        self.resets = 0
        self.resyncs = 0
        #: requests not acted on: an untrusted coordinator, or not a coordinator's own
        self.refused = 0
        self.connected = False
        self.started = time.time()
        self._dirty: set[str] = set()
        self._wake: asyncio.Event | None = None
        self._need_resync = True
        self._nc: hc.NATS | None = None
        self._stats: dict[str, tuple[int, int, int]] = {}
        self._last_sweep = 0.0
        self._next_beat = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._acting: asyncio.Semaphore | None = None
        self._acks: Acks | None = None
        #: the connection's reconnection count when the cursors were last checked
        self._epoch = -1
        self._stopping = False

    # -- the loop -------------------------------------------------------------------------

    def _mark(self, worker: str) -> None:
        self._dirty.add(worker)
        if self._wake is not None:
            self._wake.set()

    def _wake_soon(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def run(self, stop: asyncio.Event, *, once: bool = False) -> None:
        """Ship until ``stop`` is set (``once``: until every journal is shipped as it stands
        now, then return)."""
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._acting = asyncio.Semaphore(4)
        root = ensure_dir(workers_dir(ensure_dir(self.home)))
        observer = None
        if self.watch_files and not once:
            from fleet._watch import _JournalEvents, open_observer

            def notify(worker: str) -> None:
                loop.call_soon_threadsafe(self._mark, worker)

            observer = open_observer(root, _JournalEvents(root, notify), "auto")
        self._dirty.update(list_workers(self.home))
        self._dirty.update(self.cursors)
        stopper = loop.create_task(stop.wait())
        stopper.add_done_callback(lambda _: self._wake_soon())
        delay = 0.2
        ever_connected = False
        try:
            while not stop.is_set():
                try:
                    nc = await hc.connect(
                        self.cfg,
                        name=f"fleet ship {self.host}",
                        role="host",
                        on_reconnect=self._on_reconnect,
                        on_disconnect=self._on_disconnect,
                    )
                except hc.HubUnreachable as exc:
                    if once or (exc.lasting and not ever_connected):
                        # A name that does not resolve or a login refused at the very start
                        # is a slip in the settings: retrying for ever would only hide it.
                        raise
                    self.emit({"event": "unreachable", "error": str(exc)})
                    await self._pause(stop, delay)
                    delay = min(delay * 2, 5.0) * (0.8 + 0.4 * random.random())
                    continue
                ever_connected = True
                self._nc = nc
                try:
                    await self._connected(nc, stop, once)
                except (TimeoutError, hc.nats.errors.Error, OSError) as exc:
                    # Setting up on a server that is not ready (JetStream still starting, or
                    # too slow to answer): a daemon tries again, as when it is out of reach.
                    if once:
                        raise
                    self.emit({"event": "retry", "error": hc.fatal(exc)})
                    await self._pause(stop, delay)
                    delay = min(delay * 2, 5.0) * (0.8 + 0.4 * random.random())
                    continue
                finally:
                    self._nc = None
                    self.connected = False
                    await self._goodbye(nc)
                delay = 0.2
                if once:
                    return
        finally:
            stopper.cancel()
            if observer is not None:
                observer.stop()
                observer.join(5)
            for task in list(self._tasks):
                task.cancel()

    async def _pause(self, stop: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)

    async def _on_reconnect(self) -> None:
        self._need_resync = True
        self.connected = True
        self.emit({"event": "reconnected"})
        self._next_beat = 0.0
        self._wake_soon()

    async def _on_disconnect(self) -> None:
        self.connected = False
        if not self._stopping:
            self.emit({"event": "disconnected"})

    async def _connected(self, nc: hc.NATS, stop: asyncio.Event, once: bool) -> None:
        self._stopping = False
        js = nc.jetstream()
        self._acks = Acks(nc)
        await self._acks.start()
        await hc.ensure_stream(js)
        await hc.ensure_buckets(js)
        if self.actions and not once:
            await nc.subscribe(rpc_filter(self.host), cb=self._on_request)
        self.connected = True
        self._need_resync = True
        self._next_beat = 0.0
        trusts = None if self.cfg.insecure or not self.actions else list(self.cfg.trust)
        self.emit({"event": "connected", "hub": self.cfg.display(), "host": self.host,
                   "trusts": trusts})
        assert self._wake is not None
        failures = 0
        while not stop.is_set() and not nc.is_closed:
            self._wake.clear()
            if nc.is_connected:
                try:
                    if self._need_resync or self._epoch != nc.stats["reconnects"]:
                        epoch = nc.stats["reconnects"]
                        await self._resync(js)
                        self._need_resync = False
                        self._epoch = epoch
                    if time.monotonic() >= self._next_beat:
                        await self._beat(js, "up")  # the host says it is up before it ships
                    if time.monotonic() - self._last_sweep >= self.sweep_interval:
                        self._sweep()
                    while self._dirty:
                        worker = self._dirty.pop()
                        try:
                            await self._ship(js, worker)
                        except BaseException:
                            self._dirty.add(worker)
                            raise
                    if time.monotonic() >= self._next_beat:
                        await self._beat(js, "up")
                    failures = 0
                    if once:
                        return
                except (TimeoutError, hc.nats.errors.Error, OSError, Reconnected) as exc:
                    failures += 1
                    self._need_resync = True
                    self.emit({"event": "retry", "error": hc.fatal(exc)})
                    if once and failures > 20:
                        raise
                    await self._pause(stop, min(0.1 * 2**failures, 2.0))
                    continue
            wait = min(
                max(0.0, self._next_beat - time.monotonic()),
                max(0.0, self._last_sweep + self.sweep_interval - time.monotonic()),
            )
            if not nc.is_connected:
                wait = min(wait, 0.5)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _goodbye(self, nc: hc.NATS) -> None:
        self._stopping = True
        if nc.is_connected:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._beat(nc.jetstream(), "stopped"), 2)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.close(), 5)

    def _sweep(self) -> None:
        self._last_sweep = time.monotonic()
        for worker in list_workers(self.home):
            try:
                st = os.stat(journal_path(self.home, worker))
            except OSError:
                continue
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            cursor = self.cursors.get(worker)
            if self._stats.get(worker) != key or cursor is None or cursor.offset != st.st_size:
                self._stats[worker] = key
                self._dirty.add(worker)

    # -- heartbeats -------------------------------------------------------------------------

    async def _beat(self, js: hc.JetStreamContext, state: str) -> None:
        beat = {
            "host": self.host,
            "state": state,
            "ts": time.time(),
            "interval": self.cfg.heartbeat,
            "pid": os.getpid(),
            "started": self.started,
            "workers": len(self.cursors),
            "shipped": self.shipped,
            "actions": self.actions,
        }
        await js.publish(
            hc.kv_subject(HOSTS_BUCKET, token(self.host)),
            orjson.dumps(beat),
            timeout=ACK_TIMEOUT,
        )
        self._next_beat = time.monotonic() + self.cfg.heartbeat

    # -- checking the server ----------------------------------------------------------------

    async def _resync(self, js: hc.JetStreamContext) -> None:
        """Line the cursors up with what the server holds (see the module's docstring)."""
        self.resyncs += 1
        # A server that lost its store has lost the stream and the buckets too.
        await hc.ensure_stream(js)
        await hc.ensure_buckets(js)
        workers = sorted(set(list_workers(self.home)) | set(self.cursors))
        for worker in workers:
            subject = journal_subject(self.host, worker)
            before = self.cursors.get(worker)
            if before is not None and before.sseq > 0:
                try:
                    held = await js.get_msg(STREAM, seq=before.sseq)
                    intact = held.subject == subject and (
                        (held.headers or {}).get("Nats-Msg-Id") == before.last_id
                    )
                except hc.nats.js.errors.NotFoundError:
                    intact = False
                if intact:
                    continue
                after: Cursor | None = Cursor(
                    gen=before.gen, ino=before.ino, reset_pending=before.gen > 0
                )
            elif before is not None:
                continue  # nothing of this generation acknowledged yet
            else:
                try:
                    last = await js.get_last_msg(STREAM, subject)
                    headers, sseq = last.headers or {}, int(last.seq or 0)
                except hc.nats.js.errors.NotFoundError:
                    headers, sseq = None, 0
                after = self._adopt(worker, headers, sseq)
            if after is not None:
                if before is None or after.to_dict() != before.to_dict():
                    self.emit({"event": "resync", "worker": worker,
                               "from": None if before is None else before.seq, "to": after.seq,
                               "gen": after.gen})
                self.cursors[worker] = after
                self._dirty.add(worker)
        self.store.save(self.cursors)

    def _adopt(self, worker: str, last: dict[str, str] | None, sseq: int) -> Cursor | None:
        """A cursor for a worker this shipper has none for (its file was lost), from the last
        message the server holds for it: where the server stops, when the journal still holds
        that very line; else the journal is a new generation."""
        if last is None:
            return None  # nothing shipped, nothing known: start at the beginning
        try:
            if "Fleet-Reset" in last:
                gen, seq, start, end, digest = int(last["Fleet-Reset"]), -1, 0, 0, None
            else:
                gen, seq, start, end, digest = parse_line_header(last["Fleet-Line"])
        except (KeyError, ValueError):
            return None
        adopted = Cursor(
            gen=gen, offset=end, seq=seq + 1, last_start=start if digest else -1,
            last_hash=digest, sseq=sseq, last_id=last.get("Nats-Msg-Id"),
        )
        try:
            with open(journal_path(self.home, worker), "rb") as f:
                adopted.ino = os.fstat(f.fileno()).st_ino
                f.seek(start)
                line = f.read(end - start)
        except OSError:
            return Cursor(gen=gen + 1, reset_pending=True)
        if digest is None or (line.endswith(b"\n") and line_hash(line[:-1]) == digest):
            return adopted
        return Cursor(gen=gen + 1, ino=adopted.ino, reset_pending=True)

    # -- shipping ---------------------------------------------------------------------------

    async def _ship(self, js: hc.JetStreamContext, worker: str) -> None:
        subject = journal_subject(self.host, worker)
        while True:
            known = worker in self.cursors
            cursor = self.cursors.setdefault(worker, Cursor())
            lines, ino = self._read(worker, cursor)
            if ino is None:
                if not known:
                    del self.cursors[worker]
                return
            # _read starts a new generation in place of a journal that was replaced.
            cursor = self.cursors[worker]
            cursor.ino = ino
            if cursor.reset_pending:
                assert self._acks is not None
                epoch = self._epoch
                if self._acks.nc.stats["reconnects"] != epoch:
                    raise Reconnected
                marker = reset_msg_id(self.host, worker, cursor.gen)
                ack = await js.publish(
                    subject,
                    b"",
                    timeout=ACK_TIMEOUT,
                    headers={"Nats-Msg-Id": marker, "Fleet-Reset": str(cursor.gen)},
                )
                if self._acks.nc.stats["reconnects"] != epoch:
                    raise Reconnected
                cursor.reset_pending = False
                cursor.sseq, cursor.last_id = int(ack.seq), marker
                self.store.save(self.cursors)
            if not lines:
                return
            await self._publish(js, subject, worker, cursor, lines)
            if len(lines) < self.batch:
                return
            if time.monotonic() >= self._next_beat:
                await self._beat(js, "up")  # a long catch-up still says the host is up

    def _read(self, worker: str, cursor: Cursor) -> tuple[list[tuple[int, bytes]], int | None]:
        """The complete lines after the cursor (at most a batch), as (start offset, line),
        noticing a journal that was replaced since the last read."""
        try:
            fd = os.open(journal_path(self.home, worker), os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return [], None
        try:
            st = os.fstat(fd)
            replaced = None
            if cursor.ino is not None and st.st_ino != cursor.ino:
                replaced = "replaced"
            elif st.st_size < cursor.offset:
                replaced = "shortened"
            elif cursor.last_hash is not None and cursor.last_start >= 0:
                size = cursor.offset - cursor.last_start
                was = os.pread(fd, size, cursor.last_start)
                if len(was) != size or not was.endswith(b"\n") or line_hash(
                    was[:-1]
                ) != cursor.last_hash:
                    replaced = "rewritten"
            if replaced is not None:
                self.resets += 1
                self.emit({"event": "journal-" + replaced, "worker": worker,
                           "gen": cursor.gen + 1})
                fresh = Cursor(gen=cursor.gen + 1, ino=st.st_ino, reset_pending=True)
                self.cursors[worker] = fresh
                cursor = fresh
            data = b""
            want = READ_CHUNK
            while True:
                data = os.pread(fd, want, cursor.offset)
                if b"\n" in data or len(data) < want:
                    break
                want *= 2
        finally:
            os.close(fd)
        end = data.rfind(b"\n")
        out: list[tuple[int, bytes]] = []
        if end >= 0:
            pos = 0
            for line in data[:end].split(b"\n"):
                out.append((cursor.offset + pos, line))
                pos += len(line) + 1
                if len(out) >= self.batch:
                    break
        return out, st.st_ino

    async def _publish(
        self,
        js: hc.JetStreamContext,
        subject: str,
        worker: str,
        cursor: Cursor,
        lines: list[tuple[int, bytes]],
    ) -> None:
        assert self._acks is not None
        acks = self._acks
        epoch = self._epoch
        futures: list[asyncio.Future[bytes]] = []
        acked = 0
        last_sseq = 0
        failure: BaseException | None = None
        try:
            for n, (start, line) in enumerate(lines):
                # Nothing goes to a server before its cursors were checked against it: a line
                # sent from a stale cursor could land after a gap the check would not see.
                if acks.nc.stats["reconnects"] != epoch:
                    raise Reconnected
                headers = {
                    "Nats-Msg-Id": msg_id(self.host, worker, cursor.gen, start),
                    "Fleet-Line": line_header(
                        cursor.gen, cursor.seq + n, start, start + len(line) + 1, line_hash(line)
                    ),
                }
                futures.append(await acks.publish(subject, redact_line(line), headers))
            for future in futures:
                try:
                    ack = orjson.loads(await asyncio.wait_for(future, ACK_TIMEOUT))
                except (TimeoutError, orjson.JSONDecodeError) as exc:
                    failure = exc
                    break
                if not isinstance(ack, dict) or "error" in ack or "seq" not in ack:
                    failure = hc.nats.errors.Error(f"the server refused a line: {ack!r}")
                    break
                acked += 1
                last_sseq = int(ack["seq"])
        finally:
            acks.forget(futures)
            if acks.nc.stats["reconnects"] != epoch:
                # Acknowledged, maybe, by a server that came back without what came before.
                acked, failure = 0, failure or Reconnected()
            if acked:
                start, line = lines[acked - 1]
                cursor.offset = start + len(line) + 1
                cursor.seq += acked
                cursor.last_start, cursor.last_hash = start, line_hash(line)
                cursor.sseq = last_sseq
                cursor.last_id = msg_id(self.host, worker, cursor.gen, start)
                self.shipped += acked
                self.store.save(self.cursors)
        if failure is not None:
            raise failure

    # -- remote actions ---------------------------------------------------------------------

    async def _on_request(self, msg: hc.Msg) -> None:
        task = asyncio.get_running_loop().create_task(self._answer(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _asker(self, msg: hc.Msg) -> tuple[str | None, str | None]:
        """Who asks (the coordinator the subject names: the server lets each publish only under
        its own name), or why the request is not acted on."""
        who = coordinator_of_rpc(msg.subject)
        if who is None or not is_worker_id(who):
            return None, "a request on a subject fleet does not use"
        if not self.cfg.insecure and not (msg.reply or "").startswith(
            inbox_prefix("coordinator", who) + "."
        ):
            # Not a coordinator's own request: a message a JetStream consumer delivered here.
            return who, f"a request said to be from {who} that {who} did not send"
        if self.cfg.trust and who not in self.cfg.trust:
            return who, f"coordinator {who} is not one this host trusts (fleet ship --coordinator)"
        if not self.cfg.trust and not self.cfg.insecure:
            return who, "this host trusts no coordinator (fleet ship --coordinator NAME)"
        return who, None

    async def _answer(self, msg: hc.Msg) -> None:
        from fleet._hub.actions import REFUSED, refuse, run_on_host

        assert self._acting is not None
        who, why = self._asker(msg)
        if why is not None:
            self.refused += 1
            self.emit({"event": "refused", "by": who, "why": why})
            reply = refuse("?", None, REFUSED, f"host {self.host} refused: {why}", self.host)
        else:
            async with self._acting:
                reply = await run_on_host(
                    self.home, self.host, msg.data, allow_commands=self.allow_commands
                )
            self.emit({"event": "action", "verb": reply.get("verb"),
                       "worker": reply.get("worker"), "exit": reply.get("exit"), "by": who})
            record_action(self.home, self.host, who or "?", reply)
        if msg.reply and not msg.reply.startswith("$JS."):
            with contextlib.suppress(Exception):
                await msg.respond(orjson.dumps(reply))
