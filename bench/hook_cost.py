"""What fleet's hook costs per event, against the floor of starting the same interpreter.

Runs the installed hook command (``fleet hooks command``) with a real PreToolUse payload on stdin,
many times, for three cases, interleaved so that machine load hits each case alike:

- floor: ``<python> -I -S -c pass`` with the same payload on stdin;
- registered: a session inside a registered worktree (the hook appends a journal line);
- non-worker: a session whose ``CLAUDE_PROJECT_DIR`` belongs to no worker (it writes nothing).

Prints the median wall time of each and its ratio to the floor. Targets: registered <= 1.3x,
non-worker <= 1.1x.

    .venv/bin/python bench/hook_cost.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import fail

from fleet._hook_command import hook_argv
from fleet._journal import index_worktree

TARGETS = {"registered": 1.3, "non-worker": 1.1}
REFERENCE = Path(__file__).resolve().parents[1] / "tests" / "hooks" / "payloads"


def payload(cwd: str) -> bytes:
    source = REFERENCE / "claude-code-2.1.197-hook-payloads.json"
    if source.is_file():
        event = dict(json.loads(source.read_text())["PreToolUse (Bash)"])
    else:
        event = {
            "session_id": "01262196-6b52-4928-94ba-f0e5fb95008c",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "echo hi > out.txt"},
            "tool_use_id": "toolu_01",
        }
    event["cwd"] = cwd
    return json.dumps(event).encode()


def run_once(argv: list[str], stdin: bytes, env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        fail(f"{argv[0]} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-300:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per case (default 200)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="fleet-hook-bench-") as tmp:
        root = Path(tmp)
        home = root / "home"
        worktree = root / "worktree"
        other = root / "elsewhere"
        worktree.mkdir()
        other.mkdir()
        index_worktree(home, "bench", str(worktree))
        hook = hook_argv("claude", home=home)
        floor = [hook[0], "-I", "-S", "-c", "pass"]
        base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root)}
        cases = {
            "floor": (floor, {**base_env, "CLAUDE_PROJECT_DIR": str(worktree)}, worktree),
            "registered": (hook, {**base_env, "CLAUDE_PROJECT_DIR": str(worktree)}, worktree),
            "non-worker": (hook, {**base_env, "CLAUDE_PROJECT_DIR": str(other)}, other),
        }
        stdin = {name: payload(str(cwd)) for name, (_, _, cwd) in cases.items()}
        times: dict[str, list[float]] = {name: [] for name in cases}
        for name, (argv, env, cwd) in cases.items():  # warm up caches and bytecode
            run_once(argv, stdin[name], env, str(cwd))
        for _ in range(args.runs):
            for name, (argv, env, cwd) in cases.items():
                times[name].append(run_once(argv, stdin[name], env, str(cwd)))
        journal = home / "workers" / "bench" / "journal.jsonl"
        lines = journal.read_bytes().count(b"\n") if journal.exists() else 0
        if lines != args.runs + 1:
            fail(f"expected {args.runs + 1} journal lines (one per run of the registered "
                 f"case), found {lines}: the hook did not journal what it was timed on")
        errors = home / "hook-errors.log"
        if errors.exists() and errors.stat().st_size:
            fail(f"the hook recorded failures while it was timed: {errors.read_text()[-300:]}")

    medians = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
    ratios = {name: medians[name] / medians["floor"] for name in TARGETS}
    result = {
        "interpreter": hook[0],
        "runs": args.runs,
        "median_ms": {k: round(v, 3) for k, v in medians.items()},
        "ratio": {k: round(v, 3) for k, v in ratios.items()},
        "target": TARGETS,
        "met": {k: ratios[k] <= TARGETS[k] for k in TARGETS},
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"interpreter {hook[0]}, {args.runs} runs per case, medians:")
        print(f"  floor (-I -S -c pass)  {medians['floor']:7.2f} ms")
        for name, target in TARGETS.items():
            mark = "ok" if ratios[name] <= target else "OVER"
            print(
                f"  {name:<22} {medians[name]:7.2f} ms  {ratios[name]:.3f}x floor "
                f"(target <= {target}x: {mark})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
