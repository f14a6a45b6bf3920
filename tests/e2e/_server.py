"""The common part of the fake model servers: a threaded HTTP server on 127.0.0.1 (ephemeral
port) that records every request and lets a subclass answer it with JSON or server-sent
events."""

from __future__ import annotations

import abc
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import urlsplit

import attrs

from .script import Reply


@attrs.frozen(kw_only=True)
class Recorded:
    """One request the server received. ``headers`` keys are lowercase."""

    t: float
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    json: Any
    #: what the server made of it: "main" (a scripted conversation step), "side" (a call the
    #: script does not drive, e.g. a title), "probe" (HEAD/GET), "other"
    kind: str = "other"
    step: int | None = None
    key: str | None = None

    @property
    def api_key(self) -> str | None:
        """The credential the client sent: ``x-api-key`` or the bearer token."""
        key = self.headers.get("x-api-key")
        if key:
            return key
        auth = self.headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None


class Responder:
    """How a handler answers one request."""

    def __init__(self, handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        self._h = handler
        self._stopping = stopping

    def wait(self, seconds: float) -> None:
        """Sleep, but return at once when the server is stopping."""
        if seconds > 0:
            self._stopping.wait(seconds)

    def json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self._h.send_response(status)
        self._h.send_header("content-type", "application/json")
        self._h.send_header("content-length", str(len(body)))
        self._h.send_header("request-id", f"req_fake_{time.monotonic_ns()}")
        for name, value in (headers or {}).items():
            self._h.send_header(name, value)
        self._h.end_headers()
        if self._h.command != "HEAD":
            self._h.wfile.write(body)

    def empty(self, status: int = 200) -> None:
        self._h.send_response(status)
        self._h.send_header("content-length", "0")
        self._h.end_headers()

    def sse(self, events: Iterable[tuple[str, Any]], *, named: bool = True,
            headers: Mapping[str, str] | None = None) -> None:
        """Stream ``(event name, data)`` pairs, then close the connection (no content-length:
        the client reads to EOF)."""
        self._h.send_response(200)
        self._h.send_header("content-type", "text/event-stream")
        self._h.send_header("cache-control", "no-cache")
        self._h.send_header("connection", "close")
        for name, value in (headers or {}).items():
            self._h.send_header(name, value)
        self._h.end_headers()
        self._h.close_connection = True
        try:
            for name, data in events:
                head = f"event: {name}\n" if named else ""
                self._h.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
                self._h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (interrupted): nothing to tell it


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True


class FakeServer(abc.ABC):
    """Base class: subclasses implement :meth:`answer`. Start with :meth:`start` (or use as a
    context manager); :meth:`stop` closes the socket and wakes any delayed reply."""

    name = "fake"

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._changed = threading.Condition(self._lock)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        server = _HTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"{self.name}-server", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL, without a trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    # -- records --------------------------------------------------------------------------

    def recorded(self, kind: str | None = None) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if kind is None or r.kind == kind]

    def api_keys(self, kind: str | None = None) -> list[str | None]:
        """The credential of each (main by default) request, in order."""
        return [r.api_key for r in self.recorded(kind or "main")]

    def wait_for_requests(self, count: int, *, kind: str = "main", timeout: float = 30) -> None:
        """Block until ``count`` requests of ``kind`` arrived (TimeoutError otherwise)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while sum(r.kind == kind for r in self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"{self.name}: {count} {kind} requests expected, got "
                        f"{sum(r.kind == kind for r in self.requests)}"
                    )
                self._changed.wait(left)

    def _record(self, req: Recorded) -> None:
        with self._changed:
            self.requests.append(req)
            self._changed.notify_all()

    # -- answering ------------------------------------------------------------------------

    @abc.abstractmethod
    def answer(self, req: Recorded, out: Responder) -> Recorded:
        """Answer one request; return the record to keep (with kind/step filled in)."""

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 30  # an idle keep-alive connection must not hold a thread forever

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                try:
                    parsed = json.loads(body) if body else None
                except ValueError:
                    parsed = None
                url = urlsplit(self.path)
                req = Recorded(
                    t=time.time(),
                    method=self.command,
                    path=url.path,
                    query=url.query,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    json=parsed,
                )
                out = Responder(self, fake._stopping)
                try:
                    kept = fake.answer(req, out)
                except Exception as exc:  # a bug in a script must show, not hang the client
                    kept = attrs.evolve(req, kind="error")
                    with contextlib.suppress(OSError):
                        out.json(500, {"error": {"type": "fake_server_bug",
                                                 "message": repr(exc)}})
                fake._record(kept)

            do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _serve

        return Handler


def texts(content: Any) -> Iterator[str]:
    """The text pieces of a message's content (a string or a list of typed blocks)."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, Sequence):
        for block in content:
            if isinstance(block, Mapping):
                text = block.get("text")
                if isinstance(text, str):
                    yield text


@contextmanager
def running(server: FakeServer) -> Iterator[FakeServer]:
    server.start()
    try:
        yield server
    finally:
        server.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pick(scripts: Mapping[str | None, Sequence[Reply]], haystack: str) -> tuple[str | None,
                                                                               Sequence[Reply]]:
    """The keyed script whose key occurs in ``haystack``, else the unkeyed one (or none)."""
    for key, replies in scripts.items():
        if key is not None and key in haystack:
            return key, replies
    return None, scripts.get(None, ())
