"""Helpers of the hub benchmarks: a nats-server of their own on 127.0.0.1, and shippers."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fleet._hub.config import HubConfig
from fleet._hub.ship import Shipper


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def nats_server() -> Iterator[str]:
    """A JetStream server on a free port with its store in a temporary directory; its URL."""
    binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
    if not os.access(binary, os.X_OK):
        raise SystemExit("nats-server is not installed (apt-get install nats-server)")
    root = Path(tempfile.mkdtemp(prefix="fleet-bench-nats-"))
    port = free_port()
    proc = subprocess.Popen(
        [binary, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(root / "store")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)


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
            time.sleep(0.01)
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(60)


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


def config(url: str, **kwargs: object) -> HubConfig:
    return HubConfig(url=url, **kwargs)  # type: ignore[arg-type]
