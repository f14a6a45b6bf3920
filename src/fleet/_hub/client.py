"""The NATS side of the hub: connecting, the stream and buckets, and tailing a stream.

The only module that imports ``nats`` (the ``hub`` extra); the shipper and the hub view import
it, ``import fleet`` never does. Everything here runs on one asyncio loop; :class:`Runtime`
gives the threaded rest of fleet a loop of its own to call into.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, TypeVar

from fleet._errors import FleetError, Refused, ToolError
from fleet._hub.config import HubConfig
from fleet._hub.names import HOSTS_BUCKET, SEEN_BUCKET, STREAM, journal_filter
from fleet._hub.redact import MAX_LINE
from fleet._hub.secure import PROBE_SUBJECT, inbox_prefix

try:
    import nats
    import nats.errors
    import nats.js.errors
    from nats.aio.client import Client as NATS
    from nats.aio.msg import Msg
    from nats.js import JetStreamContext
    from nats.js import api as js_api
except ImportError as exc:  # pragma: no cover - the extra is part of the test install
    from fleet._install import extra_hint

    raise FleetError(f"the hub needs the NATS client (nats-py): {extra_hint('hub')}") from exc

T = TypeVar("T")

#: JetStream drops a message whose id it stored within this window. The shipper and the hub
#: reader never count on it alone (the reader is idempotent by worker, generation and seq).
DUPLICATE_WINDOW: Final = 3600.0
#: How often an idle consumer proves it is alive; three missed beats and it is made again.
CONSUMER_HEARTBEAT: Final = 2.0
CONNECT_TIMEOUT: Final = 2.0
REQUEST_TIMEOUT: Final = 5.0
#: How long the server's refusal of the probe's publish is waited for (on a loaded loopback
#: server it comes within milliseconds).
PROBE_WAIT: Final = 1.5

__all__ = [
    "NATS",
    "HubOpen",
    "HubUnreachable",
    "JetStreamContext",
    "Msg",
    "Runtime",
    "Tail",
    "connect",
    "ensure_buckets",
    "ensure_stream",
    "js_api",
    "nats",
]


class HubUnreachable(ToolError):
    """The hub's server could not be reached (or refused the connection)."""

    def __init__(self, message: str, *, lasting: bool = False, nobody: bool = False) -> None:
        super().__init__(message)
        #: trying again cannot help: the name does not resolve, or the server refused the login
        self.lasting = lasting
        #: nothing listens at any server's address (the connection was refused): a command
        #: says so at once; a daemon waits for the server to come
        self.nobody = nobody


class HubOpen(Refused):
    """The hub lets in a client with no credentials, or lets this identity publish outside its
    own subjects: anyone could speak for a host or make one act."""


class Runtime:
    """An asyncio loop in a thread of its own, for callers that are not async."""

    def __init__(self, name: str = "fleet-hub") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def soon(self, fn: Callable[[], None]) -> None:
        self.loop.call_soon_threadsafe(fn)

    def close(self, cleanup: Coroutine[Any, Any, None] | None = None) -> None:
        if self.loop.is_closed():
            return
        if cleanup is not None and self._thread.is_alive():
            with contextlib.suppress(Exception):
                self.call(cleanup, 10)
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self.call(_cancel_others(), 5)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


async def _cancel_others() -> None:
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=5)


async def connect(
    cfg: HubConfig,
    *,
    name: str,
    role: str = "coordinator",
    retry: bool = True,
    on_reconnect: Callable[[], Awaitable[None]] | None = None,
    on_disconnect: Callable[[], Awaitable[None]] | None = None,
) -> NATS:
    """Connect to the hub as a ``role`` ("host" or "coordinator"). ``retry``: keep reconnecting
    for ever once connected (the first connection is the caller's to retry). Raises
    HubUnreachable when the first attempt fails, HubOpen when the server is an open door."""
    errors: list[str] = []

    async def error_cb(exc: Exception) -> None:
        errors.append(f"{type(exc).__name__}: {exc}".strip())
        del errors[:-5]

    async def reconnected_cb() -> None:
        if on_reconnect is not None:
            await on_reconnect()

    async def disconnected_cb() -> None:
        if on_disconnect is not None:
            await on_disconnect()

    await resolve_some(cfg)
    await listening_some(cfg)
    identity = cfg.host_id() if role == "host" else cfg.coordinator
    nc = NATS()
    try:
        # The client's own annotations say int for what it takes as seconds of any kind.
        options: dict[str, Any] = dict(
            servers=cfg.servers(),
            name=name,
            allow_reconnect=True,
            # Each server is tried twice for the first connection (so a wrong password or an
            # address nobody answers on is said at once); once connected, for ever.
            max_reconnect_attempts=1,
            reconnect_time_wait=0.5,
            connect_timeout=CONNECT_TIMEOUT,
            ping_interval=5,
            max_outstanding_pings=2,
            error_cb=error_cb,
            reconnected_cb=reconnected_cb,
            disconnected_cb=disconnected_cb,
            inbox_prefix=inbox_prefix(role, identity),
            **cfg.connect_options(),
        )
        await nc.connect(**options)
    except asyncio.CancelledError:
        _close_sockets(nc)  # given up on by the caller's deadline: nothing left open
        raise
    except (TimeoutError, OSError, nats.errors.Error) as exc:
        await _drop_client(nc)  # the client leaves a refused connection's socket open
        # The server's own refusal says more than the reset of the socket that followed it.
        telling = [e for e in errors if "uthoriz" in e or "ermission" in e or "SSL" in e]
        unresolved = [e for e in errors if e.startswith("gaierror")]
        why = (telling or errors or [f"{type(exc).__name__}: {exc}".strip(": ")])[-1]
        lasting = bool(telling) or (bool(unresolved) and len(unresolved) == len(errors))
        refused = [e for e in errors if "ConnectionRefused" in e or "Connect call failed" in e]
        nobody = bool(errors) and len(refused) == len(errors)
        if nobody:
            why = "nothing listens there (connection refused)"
        raise HubUnreachable(
            f"cannot reach the hub at {cfg.display()}: {why}", lasting=lasting, nobody=nobody
        ) from None
    if not cfg.insecure:
        try:
            await probe(cfg, nc, errors, role, identity)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 2)
            if isinstance(exc, HubOpen) or not isinstance(
                exc, (TimeoutError, OSError, nats.errors.Error)
            ):
                raise
            # The connection went while it was checked: as any other failed attempt.
            raise HubUnreachable(
                f"cannot reach the hub at {cfg.display()}: {fatal(exc)}"
            ) from None
    nc.options["max_reconnect_attempts"] = -1 if retry else 0
    nc.options["allow_reconnect"] = retry
    return nc


async def probe(cfg: HubConfig, nc: NATS, errors: list[str], role: str, identity: str) -> None:
    """HubOpen unless the server refuses a client with no credentials and refuses this
    identity a publish outside its subjects (to a subject no identity may use)."""
    bare = {k: v for k, v in cfg.connect_options().items()
            if k not in ("user", "password", "token", "nkeys_seed", "user_credentials")}
    anonymous = NATS()
    let_in = False
    try:
        await asyncio.wait_for(
            anonymous.connect(
                servers=[str(nc.connected_url.geturl())] if nc.connected_url else cfg.servers(),
                name="fleet probe", allow_reconnect=False, max_reconnect_attempts=0,
                connect_timeout=int(CONNECT_TIMEOUT), error_cb=_ignore, **bare),
            CONNECT_TIMEOUT * 2,
        )
        let_in = anonymous.is_connected
    except Exception:
        pass
    finally:
        await _drop_client(anonymous)
    if let_in:
        raise HubOpen(
            f"the hub at {cfg.display()} lets in a client with no credentials: anyone who "
            "reaches it could speak for a host or make one act; set it up with "
            "`fleet hub init`, or pass --insecure to use it anyway"
        )
    # Its own inbox: the answer to a request every identity may make comes back there, and
    # does not when the credentials are another identity's (the server refuses the inbox).
    try:
        await nc.request(f"$JS.API.STREAM.INFO.{STREAM}", b"", timeout=CONNECT_TIMEOUT)
    except nats.errors.NoRespondersError:
        pass  # a server without JetStream: said plainly by the first stream command
    except TimeoutError:
        raise HubOpen(
            f"the hub at {cfg.display()} does not let {role} {identity} use its own subjects: "
            f"the credentials given are not {identity}'s (see `fleet hub init`)"
        ) from None
    # The server says a publish was refused after the fact (not always before the answer to
    # a ping sent after it): wait for its word, which a server that lets it through never sends.
    errors.clear()
    await nc.publish(PROBE_SUBJECT, b"")
    await nc.flush(int(CONNECT_TIMEOUT))
    deadline = time.monotonic() + PROBE_WAIT
    while not any("ermission" in e and PROBE_SUBJECT.lower() in e.lower() for e in errors):
        if time.monotonic() >= deadline:
            raise HubOpen(
                f"the hub at {cfg.display()} lets {role} {identity} publish outside its own "
                "subjects: it could speak for other hosts; give it the credentials `fleet hub "
                "init` wrote for it, or pass --insecure to use it anyway"
            )
        await asyncio.sleep(0.005)
    errors.clear()


async def _ignore(_: Exception) -> None:
    return None


async def _drop_client(client: NATS) -> None:
    """Close a client, also one whose connection was refused (the client leaves that socket
    open)."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.close(), 2)
    _close_sockets(client)


def _close_sockets(client: NATS) -> None:
    transport = getattr(client, "_transport", None)
    # Over TLS the plain socket under the TLS stream is a writer of its own.
    for name in ("_io_writer", "_bare_io_writer"):
        writer = getattr(transport, name, None)
        with contextlib.suppress(Exception):
            if writer is not None:
                writer.close()


async def resolve_some(cfg: HubConfig) -> None:
    """Raise a lasting HubUnreachable when no server's name resolves: the client would try each
    again after a pause, and a name that does not resolve now will not in half a second."""
    loop = asyncio.get_running_loop()
    failures: list[str] = []
    for server in cfg.servers():
        parsed = urllib.parse.urlsplit(server)
        try:
            await loop.getaddrinfo(parsed.hostname, parsed.port or 4222, type=socket.SOCK_STREAM)
            return
        except UnicodeError as exc:
            failures.append(f"{parsed.hostname}: {exc}")
        except socket.gaierror as exc:
            if exc.errno != socket.EAI_NONAME:
                return  # no network or no resolver yet: the client's own retries may see one
            failures.append(f"{parsed.hostname}: {exc.args[-1] if exc.args else exc}")
    raise HubUnreachable(
        f"cannot reach the hub at {cfg.display()}: no server's name resolves "
        f"({'; '.join(failures)})",
        lasting=True,
    )


async def listening_some(cfg: HubConfig) -> None:
    """HubUnreachable (nobody) when every server refuses the connection: the client would wait
    and try each again, and a port nobody listens on is said at once."""
    refused: list[str] = []
    for server in cfg.servers():
        parsed = urllib.parse.urlsplit(server)
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(parsed.hostname, parsed.port or 4222), CONNECT_TIMEOUT
            )
        except ConnectionRefusedError:
            refused.append(f"{parsed.hostname}:{parsed.port or 4222}")
            continue
        except (OSError, TimeoutError):
            return  # the client's own attempts say what it is
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
        return
    raise HubUnreachable(
        f"cannot reach the hub at {cfg.display()}: nothing listens there (connection refused)",
        nobody=True,
    )


async def connect_once(
    cfg: HubConfig,
    *,
    name: str,
    timeout: float,
    role: str = "coordinator",
    on_reconnect: Callable[[], Awaitable[None]] | None = None,
) -> NATS:
    """The first connection, tried for up to ``timeout`` seconds (then HubUnreachable)."""
    deadline = time.monotonic() + timeout
    delay = 0.1
    while True:
        try:
            return await asyncio.wait_for(
                connect(cfg, name=name, role=role, on_reconnect=on_reconnect),
                CONNECT_TIMEOUT * 2,
            )
        except (TimeoutError, HubUnreachable) as exc:
            left = deadline - time.monotonic()
            if left <= 0 or getattr(exc, "lasting", False) or getattr(exc, "nobody", False):
                if isinstance(exc, HubUnreachable):
                    raise
                raise HubUnreachable(f"cannot reach the hub at {cfg.display()}") from None
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, 1.0)


def stream_config() -> js_api.StreamConfig:
    return js_api.StreamConfig(
        name=STREAM,
        description="fleet journals, one subject per worker: fleet.<host>.<worker>",
        subjects=[journal_filter()],
        retention=js_api.RetentionPolicy.LIMITS,
        storage=js_api.StorageType.FILE,
        discard=js_api.DiscardPolicy.OLD,
        max_msg_size=MAX_LINE + 4096,
        duplicate_window=DUPLICATE_WINDOW,
    )


def _bucket_config(bucket: str, description: str) -> js_api.StreamConfig:
    # A JetStream key-value bucket is a stream of this shape; making it by hand keeps to the
    # fields every server since 2.9 knows.
    return js_api.StreamConfig(
        name=f"KV_{bucket}",
        description=description,
        subjects=[f"$KV.{bucket}.>"],
        retention=js_api.RetentionPolicy.LIMITS,
        storage=js_api.StorageType.FILE,
        discard=js_api.DiscardPolicy.NEW,
        max_msgs_per_subject=1,
        allow_rollup_hdrs=True,
        deny_delete=True,
        duplicate_window=120.0,
        max_msg_size=64 * 1024,
    )


async def _ensure(js: JetStreamContext, config: js_api.StreamConfig) -> None:
    assert config.name is not None
    try:
        await js.stream_info(config.name)
        return
    except nats.js.errors.NotFoundError:
        pass
    try:
        await js.add_stream(config)
    except nats.js.errors.BadRequestError:
        # Made by someone else in the meantime, with the same name.
        await js.stream_info(config.name)


async def ensure_stream(js: JetStreamContext) -> None:
    """The journal stream, made when missing (an existing one is used as it is)."""
    await _ensure(js, stream_config())


async def ensure_buckets(js: JetStreamContext) -> None:
    await _ensure(js, _bucket_config(HOSTS_BUCKET, "fleet: each shipping host's heartbeat"))
    await _ensure(js, _bucket_config(SEEN_BUCKET, "fleet: coordinators' seen marks"))


def kv_subject(bucket: str, key: str) -> str:
    return f"$KV.{bucket}.{key}"


def reply_meta(reply: str) -> tuple[int, int, int, float] | None:
    """From a JetStream delivery's reply subject: stream seq, consumer seq, pending, and the
    server's timestamp of the message (unix seconds)."""
    tokens = reply.split(".")
    if len(tokens) < 9 or tokens[0] != "$JS" or tokens[1] != "ACK":
        return None
    # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>, or with a domain
    # and an account hash before the stream (and a random token after the pending count).
    base = 2 if len(tokens) == 9 else 4
    try:
        sseq, cseq = int(tokens[base + 3]), int(tokens[base + 4])
        return sseq, cseq, int(tokens[base + 6]), int(tokens[base + 5]) / 1e9
    except (ValueError, IndexError):
        return None


Handler = Callable[[Msg, int, float], None]


class Tail:
    """Follows one stream (the messages of ``filter_subject``) through a push consumer made by
    fleet, with flow control and idle heartbeats, and calls ``handle(msg, stream_seq,
    server_ts)`` for each message in order.

    The consumer is made again, from the last stream sequence handled, whenever the connection
    comes back, a heartbeat is missed or a delivery is skipped. ``kind="journal"`` also checks
    that the stream did not go back (a server that lost its last messages, or a stream made
    anew): then it starts over from the stream's first message, and the handler drops what it
    already had. ``kind="kv"`` starts from the last message of each key every time."""

    def __init__(
        self,
        nc: NATS,
        js: JetStreamContext,
        stream: str,
        filter_subject: str,
        handle: Handler,
        *,
        kind: str = "journal",
        start_seq: int = 0,
        last_id: str | None = None,
        heartbeat: float = CONSUMER_HEARTBEAT,
        prepare: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.nc, self.js, self.stream, self.filter = nc, js, stream, filter_subject
        self.handle = handle
        self.kind = kind
        self.sseq = start_seq
        self.last_id = last_id
        self.heartbeat = heartbeat
        self.prepare = prepare
        self.caught_up = asyncio.Event()
        self.restarts = 0
        self.regressions = 0
        self._cseq = 0
        self._consumer: str | None = None
        self._sub: Any = None
        self._last_beat = time.monotonic()
        self._reset = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._supervise())

    def reset(self) -> None:
        """Make the consumer again (after a reconnection)."""
        self._reset.set()

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        await self._drop()

    async def _supervise(self) -> None:
        delay = 0.1
        while not self._closed:
            try:
                await self._open()
                delay = 0.1
                self._reset.clear()
                while not self._closed:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._reset.wait(), self.heartbeat)
                    if self._reset.is_set():
                        break
                    if time.monotonic() - self._last_beat > 3 * self.heartbeat + 1:
                        break
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            self.restarts += 1
            await self._drop()

    async def _drop(self) -> None:
        sub, self._sub = self._sub, None
        consumer, self._consumer = self._consumer, None
        if sub is not None:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        if consumer is not None and self.nc.is_connected:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.js.delete_consumer(self.stream, consumer), 2)

    async def _start_point(self) -> int:
        """The stream sequence to start from, 0 for 'the last of each key'."""
        if self.kind == "kv" or self.sseq == 0:
            return 0 if self.kind == "kv" else 1
        try:
            msg = await self.js.get_msg(self.stream, seq=self.sseq)
            same = (msg.headers or {}).get("Nats-Msg-Id") == self.last_id
        except nats.js.errors.NotFoundError:
            same = False
        if not same:
            # The stream went back: what it holds from here on is not what was read.
            self.regressions += 1
            self.sseq, self.last_id = 0, None
            return 1
        return self.sseq + 1

    async def _open(self) -> None:
        if self.prepare is not None:
            await self.prepare()  # the stream, made again on a server that lost it
        start = await self._start_point()
        inbox = self.nc.new_inbox()
        self._cseq = 0
        self._last_beat = time.monotonic()
        self._sub = await self.nc.subscribe(inbox, cb=self._on_msg)
        if start == 0:
            policy, opt = js_api.DeliverPolicy.LAST_PER_SUBJECT, None
        else:
            policy, opt = js_api.DeliverPolicy.BY_START_SEQUENCE, start
        config = js_api.ConsumerConfig(
            deliver_subject=inbox,
            deliver_policy=policy,
            opt_start_seq=opt,
            ack_policy=js_api.AckPolicy.NONE,
            filter_subject=self.filter,
            flow_control=True,
            idle_heartbeat=self.heartbeat,
            inactive_threshold=max(30.0, 10 * self.heartbeat),
            mem_storage=True,
            num_replicas=1,
            max_deliver=1,
        )
        info = await self.js.add_consumer(self.stream, config)
        self._consumer = info.name
        delivered = info.delivered.consumer_seq if info.delivered is not None else 0
        if info.num_pending == 0 and delivered == 0:
            self.caught_up.set()

    async def _on_msg(self, msg: Msg) -> None:
        self._last_beat = time.monotonic()
        headers = msg.headers or {}
        status = headers.get("Status")
        if status is not None:
            if status == "100":
                if msg.reply:  # flow control: answer so the server goes on sending
                    with contextlib.suppress(Exception):
                        await self.nc.publish(msg.reply)
                last = headers.get("Nats-Last-Consumer")
                if last is not None and last.isdigit() and int(last) != self._cseq:
                    self._reset.set()  # the heartbeat says a delivery was missed
            return
        meta = reply_meta(msg.reply or "")
        if meta is None:
            return
        sseq, cseq, pending, ts = meta
        if cseq != self._cseq + 1:
            self._reset.set()
            return
        self._cseq = cseq
        if sseq > self.sseq or self.kind == "kv":
            self.handle(msg, sseq, ts)
            self.sseq = max(self.sseq, sseq)
            self.last_id = headers.get("Nats-Msg-Id")
        if pending == 0:
            self.caught_up.set()


def fatal(exc: BaseException) -> str:
    """One line for an error from the NATS client."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}{': ' + text if text else ''}"
