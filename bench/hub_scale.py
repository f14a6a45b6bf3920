"""One hub, 100 simulated hosts x 10 workers: `fleet status --hub` cold and warm, and the CPU
of an idle `fleet wait --hub` while every host sends its heartbeat.

Each host is a FLEET_HOME of its own with 10 journals, shipped by a shipper of its own (all on
one event loop here, as `fleet ship --once` would ship them) into a nats-server on 127.0.0.1.
The baseline, measured in the same run, is the same 1,000 journals in one local FLEET_HOME:
`fleet status` cold (--no-cache) and warm, and an idle local `fleet wait`.

    python bench/hub_scale.py [--hosts 100] [--workers 10] [--events 50] [--seconds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import verdict
from _hub import ShipperThread, measure_alive, nats_server, ship_once

from fleet._core.events import HookEvent, Registered, encode_line
from fleet._home import journal_path
from fleet._hub.ship import Shipper


def journal(worker: str, events: int, now: float) -> bytes:
    lines = [encode_line(Registered(ts=now - events, tool="claude", worktree=f"/w/{worker}",
                                    branch=f"fleet/{worker}"))]
    for n in range(1, events):
        hook = "PreToolUse" if n % 2 else "PostToolUse"
        lines.append(encode_line(HookEvent(
            ts=now - events + n, src="claude", hook=hook,
            data={"session_id": f"s-{worker}", "tool_name": "Bash"},
        )))
    return b"".join(lines)


def timed(*argv: str, home: Path, env: dict[str, str] | None = None,
          expect: int | None = None) -> float:
    """Seconds one command took; fails (SystemExit) when it fails or, with ``expect``, when
    it does not list that many workers."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "fleet", "--home", str(home), *argv],
                          check=False, capture_output=True,
                          env={**os.environ, "FLEET_HOME": str(home), **(env or {})})
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"FAIL: fleet {' '.join(argv)} exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace').strip()}")
    if expect is not None and len(json.loads(done.stdout)) != expect:
        raise SystemExit(f"FAIL: fleet {' '.join(argv)} listed {len(json.loads(done.stdout))} "
                         f"workers, not {expect}")
    return took


def best(runs: int, *argv: str, home: Path, env: dict[str, str] | None = None,
         expect: int | None = None) -> float:
    return min(timed(*argv, home=home, env=env, expect=expect) for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=8)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fleet-bench-hub-scale-"))
    now = time.time()
    local = root / "local"
    coord = root / "coordinator"
    homes = {f"h{h:03d}": root / "hosts" / f"h{h:03d}" for h in range(args.hosts)}
    total = args.hosts * args.workers * args.events
    print(f"writing {args.hosts} hosts x {args.workers} workers x {args.events} events "
          f"({total:,} lines) ...", flush=True)
    for host, home in homes.items():
        for w in range(args.workers):
            data = journal(f"w{w}", args.events, now)
            for path in (journal_path(home, f"w{w}"), journal_path(local, f"{host}-w{w}")):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    try:
        with nats_server(list(homes)) as hub_server:
            url = hub_server.url
            heartbeat = 5.0
            shippers = [Shipper(hub_server.host(host, heartbeat=heartbeat), home, host=host,
                                watch_files=False) for host, home in homes.items()]
            took = ship_once(shippers)
            shipped = sum(s.shipped for s in shippers)
            if shipped != total:
                raise SystemExit(f"FAIL: shipped {shipped:,} lines, not {total:,}")
            rate = total / took
            print(f"shipped {total:,} lines from {args.hosts} hosts in {took:.1f}s "
                  f"({rate:,.0f} lines/s) [target >= 5,000: {verdict(rate >= 5000)}]")
            beating = ShipperThread(
                [Shipper(hub_server.host(host, heartbeat=heartbeat), home, host=host,
                         watch_files=False, actions=False) for host, home in homes.items()]
            ).start()
            env = hub_server.coordinator_env()
            n = args.hosts * args.workers
            try:
                hub = ["status", "--hub", url, "--json"]
                cold = best(3, *hub, "--no-cache", home=coord, env=env, expect=n)
                timed(*hub, home=coord, env=env)  # builds the hub cache
                warm = best(3, *hub, home=coord, env=env, expect=n)
                local_cold = best(3, "status", "--json", "--no-cache", home=local, expect=n)
                timed("status", "--json", home=local)
                local_warm = best(3, "status", "--json", home=local, expect=n)
                print(f"status --hub, {args.hosts * args.workers:,} workers: cold {cold:.2f}s, "
                      f"warm {warm:.3f}s (warm/cold {warm / cold:.2f}x)")
                print(f"local status, same journals:  cold {local_cold:.2f}s, "
                      f"warm {local_warm:.3f}s")
                print(f"hub / local: cold {cold / local_cold:.1f}x, warm {warm / local_warm:.1f}x")
                # A day: no worker turns quiet while it is measured (the CLI takes up to a year).
                wait = [sys.executable, "-m", "fleet", "--home", str(coord), "wait", "--hub", url,
                        "--quiet-after", "86400", "--timeout",
                        str(args.seconds + args.warmup + 60)]
                hub_cpu = measure_alive(wait, args.seconds, args.warmup, env)
                beating.check()
                local_wait = [sys.executable, "-m", "fleet", "--home", str(local), "wait",
                              "--quiet-after", "86400", "--timeout",
                              str(args.seconds + args.warmup + 60)]
                local_cpu = measure_alive(local_wait, args.seconds, args.warmup)
            finally:
                beating.stop()
        hub_share = 100 * hub_cpu / args.seconds
        local_share = 100 * local_cpu / args.seconds
        print(f"idle fleet wait --hub ({args.hosts} hosts beating every {heartbeat:g}s): "
              f"{hub_cpu:.2f}s CPU in {args.seconds:g}s = {hub_share:.2f}% of a core")
        print(f"idle local fleet wait, same journals: {local_cpu:.2f}s = {local_share:.2f}%; "
              f"hub / local = {hub_cpu / local_cpu if local_cpu else float('inf'):.1f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
