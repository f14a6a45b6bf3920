"""Wake latency across hosts: from a hook's journal append on one host to `fleet wait` on
another returning, p50 and p99, against the local wake measured in the same run.

The host runs `fleet ship` as its own process (a separate FLEET_HOME) into a nats-server on
127.0.0.1; the coordinator blocks in Fleet(hub=...).wait() in this process. The baseline is
the same append waking a Fleet.wait() on the host's own journals, as bench/wake_latency.py
measures it.

    python bench/hub_wake.py [--trials 200]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import pct, verdict
from _hub import nats_server

from fleet import Fleet, HookEvent
from fleet._hub.config import HubConfig


def prompt(fleet: Fleet) -> None:
    fleet.record("w", HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))


def stop(fleet: Fleet) -> float:
    t = time.perf_counter()
    fleet.record("w", HookEvent(ts=time.time(), src="claude", hook="Stop"))
    return t


def trials(host: Fleet, waiter: Fleet, n: int) -> list[float]:
    out: list[float] = []
    for _ in range(n):
        prompt(host)
        deadline = time.monotonic() + 10
        # settle: the prompt has reached the waiter and nothing needs attention
        while waiter.poll().attention and time.monotonic() < deadline:
            time.sleep(0.002)
        woke: list[float] = []
        done = threading.Event()

        def wait(woke: list[float] = woke, done: threading.Event = done) -> None:
            waiter.wait(timeout=10)
            woke.append(time.perf_counter())
            done.set()

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.01)
        sent = stop(host)
        done.wait(10)
        thread.join()
        if not woke or woke[0] - sent >= 10:
            raise SystemExit("FAIL: the waiter was not woken within 10 s")
        out.append(woke[0] - sent)
    return out


def show(name: str, values: list[float]) -> tuple[float, float]:
    p50, p99 = pct(values, 50) * 1000, pct(values, 99) * 1000
    print(f"{name:<34} n={len(values):<4} p50 {p50:7.1f} ms   p99 {p99:7.1f} ms")
    return p50, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fleet-bench-hub-"))
    host_home, coord_home = root / "host", root / "coordinator"
    with nats_server(["laptop"]) as hub, Fleet(host_home) as host:
        url = hub.url
        host.register("w", worktree="/tmp")
        ship = subprocess.Popen(
            [sys.executable, "-m", "fleet", "--home", str(host_home), "ship", "--nats", url,
             "--host", "laptop", "--nkey", hub.seed("host", "laptop")],
            stdout=subprocess.DEVNULL, env={**os.environ, "FLEET_HOME": str(host_home)},
        )
        try:
            with Fleet(host_home) as local:
                l50, l99 = show("local: hook -> fleet wait", trials(host, local, args.trials))
            coordinator = hub.coordinator_env()
            cfg = HubConfig(url=url, nkey=coordinator["FLEET_HUB_NKEY"],
                            coordinator=coordinator["FLEET_COORDINATOR"])
            with Fleet(coord_home, hub=cfg) as remote:
                deadline = time.monotonic() + 30
                while not remote.workers():
                    if ship.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"FAIL: fleet ship exited ({ship.poll()}) or shipped "
                                         "nothing within 30 s")
                    time.sleep(0.05)
                h50, h99 = show("hub: hook -> ship -> NATS -> wait",
                                trials(host, remote, args.trials))
            if ship.poll() is not None:
                raise SystemExit(f"FAIL: fleet ship died during the trials ({ship.returncode})")
        finally:
            ship.terminate()
            ship.wait(20)
    print(
        f"hub / local: p50 {h50 / l50:.1f}x, p99 {h99 / l99:.1f}x; hub p99 {h99:.1f} ms "
        f"[target < 100 ms: {verdict(h99 < 100)}]"
    )


if __name__ == "__main__":
    main()
