"""Fold throughput, and `fleet status` over 1,000 workers x 1,000 events, cold and warm.

Baselines measured in the same run: for the fold, decoding the same lines with orjson alone
(the floor of any reader); for status, reading and decoding every journal line without folding.
Targets: fold >= 100,000 events/s; status < 3 s cold and < 0.3 s warm.

    python bench/fold_status.py [--workers 1000] [--events 1000]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from _common import fail, finish, run_checked, temp_home, verdict

from fleet._core import events as ev
from fleet._core.events import decode_line, encode_line
from fleet._core.fold import fold
from fleet._home import journal_path
from fleet._journal import index_worktree


def journal_lines(n: int, rng: random.Random, start: float) -> list[bytes]:
    """A realistic journal: registration, then turns of prompt, tool calls, and a stop."""
    lines = [encode_line(ev.Registered(ts=start, worktree="/w", profile="claude:work"))]
    ts = start
    while len(lines) < n:
        ts += rng.random()
        lines.append(
            encode_line(
                ev.HookEvent(
                    ts=ts,
                    src="claude",
                    hook="UserPromptSubmit",
                    data={"session_id": "s", "cwd": "/w"},
                )
            )
        )
        for _ in range(rng.randint(2, 12)):
            for hook in ("PreToolUse", "PostToolUse"):
                ts += rng.random()
                lines.append(
                    encode_line(
                        ev.HookEvent(
                            ts=ts,
                            src="claude",
                            hook=hook,
                            data={
                                "session_id": "s",
                                "tool_name": "Bash",
                                "tool_use_id": "toolu_x",
                                "permission_mode": "bypassPermissions",
                                "cwd": "/w",
                            },
                        )
                    )
                )
        ts += rng.random()
        lines.append(
            encode_line(
                ev.HookEvent(
                    ts=ts,
                    src="claude",
                    hook="Stop",
                    data={"session_id": "s", "last_assistant_message": "did some work"},
                )
            )
        )
    return lines[:n]


def bench_fold(n: int = 200_000) -> float:
    rng = random.Random(1)
    lines = journal_lines(n, rng, 1000.0)
    raw = [line[:-1] for line in lines]
    t = time.perf_counter()
    for line in raw:
        orjson.loads(line)
    floor = time.perf_counter() - t
    events = [decode_line(line) for line in raw]
    t = time.perf_counter()
    fold("w", events, 1e12)
    folded = time.perf_counter() - t
    t = time.perf_counter()
    for line in raw:
        decode_line(line)
    decoded = time.perf_counter() - t
    rate = n / folded
    print(
        f"fold: {rate:,.0f} events/s ({n:,} events in {folded:.3f}s)  "
        f"[target >= 100,000/s: {verdict(rate >= 100_000, 'fold >= 100,000 events/s')}]"
    )
    print(
        f"  decode+fold {n / (decoded + folded):,.0f} events/s; orjson alone "
        f"{n / floor:,.0f} lines/s; decode+fold / orjson = {(decoded + folded) / floor:.2f}x"
    )
    return rate


def fleet(*args: str) -> float:
    t = time.perf_counter()
    run_checked([sys.executable, "-m", "fleet", *args], f"fleet {' '.join(args)}")
    return time.perf_counter() - t


def check_status(workers: int, per_worker: int) -> None:
    """The status timed is a status of every worker, each folded to its last event."""
    out = run_checked([sys.executable, "-m", "fleet", "status", "--json"], "fleet status --json",
                      stdout=subprocess.PIPE).stdout
    rows = orjson.loads(out)
    events = sorted({row["events"] for row in rows})
    if len(rows) != workers or events != [per_worker]:
        fail(f"fleet status showed {len(rows)} workers with {events} events each, not "
             f"{workers} with {per_worker}")


def bench_status(workers: int, per_worker: int) -> None:
    with temp_home() as home:
        rng = random.Random(2)
        print(f"writing {workers:,} journals x {per_worker:,} events ...", flush=True)
        template = journal_lines(per_worker, rng, time.time() - 10_000)
        for n in range(workers):
            path = journal_path(home, f"w{n:04d}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"".join(template))
            index_worktree(home, f"w{n:04d}", f"/tmp/w{n}")
        # baseline: read and decode every line, no fold, in a fresh interpreter
        code = (
            "import os,orjson,sys\n"
            f"root={str(home / 'workers')!r}\n"
            "for w in os.listdir(root):\n"
            "    data=open(os.path.join(root,w,'journal.jsonl'),'rb').read()\n"
            "    [orjson.loads(l) for l in data.split(b'\\n') if l]\n"
        )
        t = time.perf_counter()
        run_checked([sys.executable, "-c", code], "the read+decode baseline")
        floor = time.perf_counter() - t
        cold = fleet("status", "--no-cache")
        check_status(workers, per_worker)
        first = fleet("status")  # builds the cache
        warm = min(fleet("status") for _ in range(3))
        # one worker changes: the cache continues its fold from the saved offset
        with journal_path(home, "w0000").open("ab") as f:
            f.write(encode_line(ev.HookEvent(ts=time.time(), src="claude", hook="Stop")))
        warm_changed = fleet("status")
        cold_ok = verdict(cold < 3, "cold status < 3 s")
        warm_ok = verdict(warm < 0.3, "warm status < 0.3 s")
        print(
            f"status cold ({workers * per_worker:,} events): {cold:.2f}s  "
            f"[target < 3s: {cold_ok}]; read+decode floor {floor:.2f}s, "
            f"ratio {cold / floor:.2f}x"
        )
        print(f"status building the cache: {first:.2f}s")
        print(
            f"status warm: {warm:.3f}s  [target < 0.3s: {warm_ok}]; "
            f"after one journal changed: {warm_changed:.3f}s; warm/cold {warm / cold:.3f}x"
        )
        os.environ.pop("FLEET_BENCH", None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--events", type=int, default=1000)
    args = parser.parse_args()
    bench_fold()
    bench_status(args.workers, args.events)
    finish()


if __name__ == "__main__":
    main()
