"""CPU used by `fleet wait` over 500 idle workers for 60 s.

An idle fleet must cost nothing: `fleet wait` sleeps on file events and timers. The baseline,
measured in the same run over the same journals, is a coordinator that re-reads every journal
every 5 s (the polling that fleet replaces). CPU is read from /proc/<pid>/stat after a warm-up,
so start-up (imports, the first fold) is reported separately.
Target: under 1% of one core.

    python bench/idle_cpu.py [--workers 500] [--seconds 60]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import temp_home, verdict

from fleet import Fleet, HookEvent

TICK = os.sysconf("SC_CLK_TCK")
POLLER = """
import sys, time
from pathlib import Path
from fleet._journal import JournalReader, list_workers
from fleet._home import journal_path
home = Path(sys.argv[1])
readers = [JournalReader(journal_path(home, w)) for w in list_workers(home)]
while True:
    for r in readers:
        r.read()
    time.sleep(5)
"""


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        rest = f.read().rsplit(b")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICK


def measure(argv: list[str], seconds: float, warmup: float) -> tuple[float, float]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    try:
        time.sleep(warmup)
        start = cpu_seconds(proc.pid)
        time.sleep(seconds)
        end = cpu_seconds(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    return start, end - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=5)
    args = parser.parse_args()
    with temp_home() as home:
        with Fleet() as fleet:
            for n in range(args.workers):
                name = f"w{n:03d}"
                fleet.register(name, worktree=f"/tmp/{name}")
                fleet.record(name, HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
        wait = [
            sys.executable,
            "-m",
            "fleet",
            "wait",
            "--quiet-after",
            "1e9",
            "--timeout",
            str(args.seconds + args.warmup + 30),
        ]
        start_cpu, fleet_cpu = measure(wait, args.seconds, args.warmup)
        _, poll_cpu = measure([sys.executable, "-c", POLLER, str(home)], args.seconds, args.warmup)
    share = 100 * fleet_cpu / args.seconds
    print(
        f"fleet wait over {args.workers} idle workers: {fleet_cpu:.2f} s CPU in "
        f"{args.seconds:g} s = {share:.2f}% of a core [target < 1%: {verdict(share < 1)}] "
        f"(start-up: {start_cpu:.2f} s)"
    )
    print(
        f"5 s polling baseline: {poll_cpu:.2f} s CPU = {100 * poll_cpu / args.seconds:.2f}% "
        f"of a core; fleet / polling = {fleet_cpu / poll_cpu if poll_cpu else 0:.2f}x"
    )


if __name__ == "__main__":
    main()
