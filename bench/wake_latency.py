"""Wake latency: from a journal append to `fleet wait` returning, p50 and p99.

Measured three ways in one run:
- fleet, in process: a thread blocked in Fleet.wait(); the append happens in this thread.
- fleet, the command: a `fleet wait --json` process, already blocked, until it exits.
- the baseline: a coordinator polling every 5 s (as Superset's helper does), measured the same
  way: append at a random moment, time until the next poll sees it.
Target: fleet's p99 under 50 ms.

    python bench/wake_latency.py [--trials 200] [--cli-trials 20] [--poll-trials 12]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import Measured, fail, finish, pct, temp_home, verdict

from fleet import Fleet, HookEvent
from fleet._home import journal_path
from fleet._journal import JournalReader


def prompt(fleet: Fleet, worker: str) -> None:
    fleet.record(worker, HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))


def stop(fleet: Fleet, worker: str) -> float:
    t = time.perf_counter()
    fleet.record(worker, HookEvent(ts=time.time(), src="claude", hook="Stop"))
    return t


def in_process(trials: int) -> list[float]:
    out: list[float] = []
    handled: list[str] = []  # a coordinator passes the marks it handled, as `seen`
    with Fleet() as fleet:
        fleet.register("w", worktree="/tmp")
        for _ in range(trials):
            prompt(fleet, "w")
            fleet.wait(seen=handled, timeout=0)  # settle: nothing needs attention now
            done = threading.Event()
            woke: list[float] = []

            def waiter(woke: list[float] = woke, done: threading.Event = done) -> None:
                result = fleet.wait(seen=handled, timeout=10)
                if not result.timed_out and [s.worker for s in result.attention] == ["w"]:
                    woke.append(time.perf_counter())
                    handled.append(result.attention[0].mark)
                done.set()

            thread = threading.Thread(target=waiter)
            thread.start()
            time.sleep(0.01 + random.random() * 0.02)
            if done.is_set():
                thread.join()
                fail(f"Fleet.wait returned before the Stop it should wait for (trial {len(out)})")
            sent = stop(fleet, "w")
            done.wait(10)
            thread.join()
            if not woke:
                fail("Fleet.wait did not return the stopped worker within 10 s")
            out.append(woke[0] - sent)
    return out


def cli(trials: int) -> list[float]:
    out: list[float] = []
    with Fleet() as fleet:
        fleet.register("c", worktree="/tmp")
        for _ in range(trials):
            prompt(fleet, "c")
            with Measured([sys.executable, "-m", "fleet", "wait", "c", "--json",
                           "--timeout", "30"], "fleet wait") as proc:
                time.sleep(1.0)  # let it start and block
                proc.check("before the Stop it should wait for")
                sent = stop(fleet, "c")
                try:
                    code = proc.proc.wait(30)
                except subprocess.TimeoutExpired:
                    fail("fleet wait did not return within 30 s of the Stop")
                out.append(time.perf_counter() - sent)
                if code != 0:
                    fail(f"fleet wait exited {code} after the Stop, not 0 (attention)")
    return out


def polling_baseline(trials: int, interval: float = 5.0) -> list[float]:
    """A coordinator that re-reads the journal every ``interval`` seconds."""
    out: list[float] = []
    lock = threading.Lock()
    with Fleet() as fleet:
        names = [f"p{n}" for n in range(trials)]
        for name in names:
            fleet.register(name, worktree="/tmp")
            prompt(fleet, name)

        def trial(name: str) -> None:
            reader = JournalReader(journal_path(fleet.home, name))
            reader.read()
            phase = random.random() * interval
            sent_at: list[float] = []

            def append_later() -> None:
                time.sleep(phase)
                sent_at.append(stop(fleet, name))

            threading.Thread(target=append_later).start()
            while True:
                time.sleep(interval)
                if any(getattr(e, "hook", "") == "Stop" for _, e in reader.read()):
                    with lock:
                        out.append(time.perf_counter() - sent_at[0])
                    return

        threads = [threading.Thread(target=trial, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return out


def show(name: str, values: list[float]) -> tuple[float, float]:
    p50, p99 = pct(values, 50) * 1000, pct(values, 99) * 1000
    print(f"{name:<28} n={len(values):<4} p50 {p50:8.1f} ms   p99 {p99:8.1f} ms")
    return p50, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--cli-trials", type=int, default=20)
    parser.add_argument("--poll-trials", type=int, default=12)
    args = parser.parse_args()
    with temp_home():
        _, p99 = show("fleet wait (in process)", in_process(args.trials))
        _, cli99 = show("fleet wait (command)", cli(args.cli_trials))
        _, b99 = show("5 s polling loop", polling_baseline(args.poll_trials))
    print(
        f"p99 in process {p99:.1f} ms "
        f"[target < 50 ms: {verdict(p99 < 50, 'p99 wake latency < 50 ms')}]; "
        f"command {cli99:.1f} ms (includes interpreter exit)"
    )
    print(f"polling / fleet at p99: {b99 / p99:,.0f}x slower")
    finish()


if __name__ == "__main__":
    main()
