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
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import Measured, finish, temp_home, verdict

from fleet import Fleet, HookEvent

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


def measure(argv: list[str], what: str, seconds: float, warmup: float) -> tuple[float, float]:
    """CPU used during start-up and warm-up, and over the next ``seconds``; the process must
    run throughout, or the benchmark fails."""
    with Measured(argv, what) as proc:
        time.sleep(warmup)
        start = proc.cpu("during its warm-up")
        time.sleep(seconds)
        end = proc.cpu("before the measurement did")
    return start, end - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--quiet-after", type=float, default=None,
                        help="fleet wait's --quiet-after (default: longer than the run)")
    args = parser.parse_args()
    with temp_home() as home:
        with Fleet() as fleet:
            for n in range(args.workers):
                name = f"w{n:03d}"
                worktree = home.parent / "worktrees" / name  # register takes a real directory
                worktree.mkdir(parents=True)
                fleet.register(name, worktree=worktree)
                fleet.record(name, HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
        # Every worker stays working (not quiet) and wait keeps waiting past the measurement.
        span = args.seconds + args.warmup
        quiet_after = args.quiet_after if args.quiet_after is not None else span + 60
        wait = [sys.executable, "-m", "fleet", "wait", "--quiet-after", f"{quiet_after:g}",
                "--timeout", f"{span + 30:g}"]
        start_cpu, fleet_cpu = measure(wait, "fleet wait", args.seconds, args.warmup)
        _, poll_cpu = measure([sys.executable, "-c", POLLER, str(home)], "the polling baseline",
                              args.seconds, args.warmup)
    share = 100 * fleet_cpu / args.seconds
    ok = verdict(share < 1, "fleet wait's idle CPU < 1% of a core")
    print(
        f"fleet wait over {args.workers} idle workers: {fleet_cpu:.2f} s CPU in "
        f"{args.seconds:g} s = {share:.2f}% of a core [target < 1%: {ok}] "
        f"(start-up: {start_cpu:.2f} s)"
    )
    print(
        f"5 s polling baseline: {poll_cpu:.2f} s CPU = {100 * poll_cpu / args.seconds:.2f}% "
        f"of a core; fleet / polling = {fleet_cpu / poll_cpu if poll_cpu else 0:.2f}x"
    )
    finish()


if __name__ == "__main__":
    main()
