"""What a headless worker costs beyond its agent: start latency and the supervisor's idle CPU.

- Start: ``start_worker`` (worktree, isolated config dir with fleet's hooks, launch record,
  detached supervisor, registration) until the agent process runs, against the baseline of
  ``git worktree add`` alone in the same repository.
- Idle: CPU used by the supervisors while their agents run, against the baseline of a process
  that watches the same kind of child by polling it every 50 ms (what ``Popen.wait(timeout)``
  does). The supervisor blocks in select(2) on a pidfd, so it should cost next to nothing.
  Target: under 0.1% of one core per supervisor.

    python bench/headless_supervisor.py [--workers 4] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import Measured, cpu_seconds, fail, finish, median, run_checked, temp_home, verdict

from fleet._orchestrate import start_worker
from fleet.adapters.headless import HeadlessOptions

AGENT = """#!/bin/sh
# A stand-in agent: mark that it runs, wait until the measurement is over (however long the
# other workers took to start), print a Claude-style result.
: > "$BENCH_DIR/running-$FLEET_WORKER"
while [ ! -e "$BENCH_DIR/release" ]; do sleep 0.2; done
printf '{"type":"result","subtype":"success","is_error":false,%s}\\n' \\
  '"result":"FLEET_WORKER_DONE: ok","session_id":"s"'
"""
POLLER = """
import subprocess, sys, time
p = subprocess.Popen(["sleep", sys.argv[1]])
while p.poll() is None:
    time.sleep(0.05)
"""


def git(cwd: Path, *args: str) -> None:
    run_checked(["git", *args], f"git {args[0]}", cwd=cwd)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with temp_home() as home:
        root = home.parent
        repo = root / "repo"
        repo.mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "-c", "user.name=b", "-c", "user.email=b@example.invalid", "commit", "-q",
            "--allow-empty", "-m", "init")
        agent = root / "claude"
        agent.write_text(AGENT)
        agent.chmod(0o755)
        brief = root / "brief.md"
        brief.write_text("bench\n")
        os.environ.update(
            {"BENCH_DIR": str(root), "BENCH_KEY": "k-1"}
        )
        opts = HeadlessOptions(
            claude=str(agent), endpoint="http://127.0.0.1:9", key_from="env:BENCH_KEY"
        )

        baseline: list[float] = []
        for i in range(args.workers):
            t = time.perf_counter()
            git(repo, "worktree", "add", "-q", "-b", f"base-{i}", str(root / f"base-{i}"))
            baseline.append(time.perf_counter() - t)

        starts: list[float] = []
        supervisors: list[int] = []
        for i in range(args.workers):
            t = time.perf_counter()
            state = start_worker(f"w{i}", task=brief, repo=repo, options=opts)
            marker = root / f"running-w{i}"
            deadline = time.monotonic() + 60
            while not marker.exists():
                if time.monotonic() > deadline:
                    fail(f"the agent of w{i} did not start within 60 s")
                time.sleep(0.002)
            starts.append(time.perf_counter() - t)
            supervisors.append(int(state.handle["supervisor_pid"]))

        # Every supervisor and the poller must run through the whole window (the agents wait
        # for the release below): cpu_seconds fails the benchmark on one that ended.
        with Measured([sys.executable, "-c", POLLER, str(args.seconds + 2)],
                      "the polling baseline") as poller:
            time.sleep(0.5)
            before = [cpu_seconds(p) for p in supervisors]
            poll_before = poller.cpu("before its measurement")
            time.sleep(args.seconds)
            used = [cpu_seconds(p) - b for p, b in zip(supervisors, before, strict=True)]
            poll_used = poller.cpu("before the measurement did") - poll_before
            poller.proc.wait()
        (root / "release").touch()  # the agents finish now, and their supervisors with them
        for sup in supervisors:
            while Path(f"/proc/{sup}").exists() and "Z" not in _state(sup):
                time.sleep(0.05)
        exits = [
            json.loads(line)
            for i in range(args.workers)
            for line in (home / "workers" / f"w{i}" / "journal.jsonl").read_text().splitlines()
            if '"exited"' in line
        ]

    if len(exits) != args.workers or any(e.get("exit_code") != 0 for e in exits):
        fail(f"{len(exits)} of {args.workers} runs journaled as exited, with exit codes "
             f"{sorted({e.get('exit_code') for e in exits}, key=str)}: expected every run to "
             "exit 0")
    per_sup = max(used) / args.seconds * 100
    print(f"start to agent running: median {median(starts) * 1000:.0f} ms "
          f"(git worktree add alone: {median(baseline) * 1000:.0f} ms, "
          f"ratio {median(starts) / median(baseline):.1f}x)")
    print(f"supervisor CPU while its agent runs: max {per_sup:.3f}% of a core "
          f"(50 ms poller: {poll_used / args.seconds * 100:.3f}%) "
          f"{verdict(per_sup < 0.1, 'supervisor CPU < 0.1%')} (target < 0.1%)")
    print(f"runs journaled as exited: {len(exits)}/{args.workers}")
    finish()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


if __name__ == "__main__":
    main()
