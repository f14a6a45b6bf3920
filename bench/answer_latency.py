"""How fast a coordinator's answer reaches a real Claude Code session: from the answer to the
approved tool starting.

Runs the pinned Claude Code TUI (``scripts/install-agents``) in tmux, offline, against the
end-to-end tests' fake Anthropic server, in the default permission mode, with fleet's hooks
installed and the project registered as a worker. The model asks for ``STEPS`` Bash commands,
each one writing the time it started (``date +%s.%N``) and each one needing approval (each is a
different command, so no "don't ask again" covers the next). Steps alternate between:

- ``answer``: :func:`fleet._answer.answer` (what ``fleet answer`` and the MCP tool call), timed
  from the call;
- ``keypress`` (the baseline, measured in the same session): Enter on the dialog's selected
  "Yes" through ``tmux send-keys``, timed from the send: a person at the terminal;
- ``cli``: the ``fleet answer`` command as a coordinator script runs it, timed from its spawn
  (the Python start-up of the command is in it).

Every step waits until the dialog is on the screen before it answers, so each case starts from
the same point. Most of each of these is Claude Code's own work after it has the decision (the
keypress shows how much), so a first phase, without Claude Code, measures fleet's own part:

- ``handoff``: fleet's hook program waiting on a request as Claude Code runs it (a process, the
  payload on stdin, stdout a pipe), timed from :func:`~fleet._answer.answer` to the decision
  readable on the hook's stdout: what Claude Code gets from fleet.

Prints p50/p99/max of each, and the ratios of the TUI cases to the keypress baseline. Target:
``handoff`` p99 under 100 ms; ``answer`` is compared with ``keypress`` (both are mostly Claude
Code's own time, and the machine's noise).

    .venv/bin/python bench/answer_latency.py [--steps N] [--agents known-good|current] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import pct  # noqa: E402
from tests.e2e.binaries import AgentsMissing, find_agents  # noqa: E402
from tests.e2e.fake_anthropic import FakeAnthropic  # noqa: E402
from tests.e2e.harness import (  # noqa: E402
    ClaudeSetup,
    Processes,
    Tmux,
    fleet_argv,
    fleet_cli,
)
from tests.e2e.script import bash, say  # noqa: E402

from fleet._answer import answer, open_requests  # noqa: E402

TARGET_MS = 100.0
CASES = ("answer", "keypress", "cli")
PAYLOAD = {"session_id": "s1", "hook_event_name": "PermissionRequest", "tool_name": "Bash",
           "permission_mode": "default", "tool_input": {"command": "make", "description": "x"}}


def handoff(home: Path, project: Path, rounds: int) -> list[float]:
    """Milliseconds from answer() to the decision on the waiting hook's stdout."""
    from fleet._hook_command import hook_argv

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FLEET_HOME": str(home),
           "CLAUDE_PROJECT_DIR": str(project), "FLEET_ANSWER_TIMEOUT": "60"}
    out: list[float] = []
    for _ in range(rounds):
        proc = subprocess.Popen(hook_argv("claude", home=home), env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({**PAYLOAD, "cwd": str(project)}).encode())
        proc.stdin.close()
        while not open_requests(home, "bench"):
            time.sleep(0.001)
        t0 = time.perf_counter()
        answer(home, "bench", "allow", by="bench")
        line = proc.stdout.readline()
        out.append((time.perf_counter() - t0) * 1000)
        assert b'"allow"' in line, line
        proc.stdout.close()
        proc.wait()
    return out
DIALOG = "Do you want to proceed?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="answers per case (default 20)")
    parser.add_argument("--handoffs", type=int, default=200,
                        help="hand-offs measured without Claude Code (default 200)")
    parser.add_argument("--agents", default="current",
                        help="the pin set to run (tests/e2e/agents/; default current)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    try:
        agents = find_agents(args.agents)
    except AgentsMissing as exc:
        print(f"answer_latency: {exc}", file=sys.stderr)
        return 1
    total = args.steps * len(CASES)
    with tempfile.TemporaryDirectory(prefix="fleet-answer-latency-") as tmp:
        root = Path(tmp)
        home = root / "fleet-home"
        os.environ["FLEET_HOME"] = str(home)
        project = root / "project"
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        starts = project / "starts.txt"
        fleet_cli("register", "bench", "--worktree", str(project), "--tool", "claude")
        handed = handoff(home, project, args.handoffs)
        processes = Processes()
        tmux = Tmux(root / "tmux")
        latencies: dict[str, list[float]] = {name: [] for name in CASES}
        with FakeAnthropic() as server:
            server.script([bash(f"date +%s.%N >> starts.txt  # step {n}")
                           for n in range(total)] + [say("All steps ran.")])
            claude = ClaudeSetup(agents=agents, server=server, config_dir=root / "cfg",
                                 home=root / "home", processes=processes).prepare()
            fleet_cli("hooks", "install", "--config-dir", str(claude.config_dir))
            fleet_cli("trust", "--config-dir", str(claude.config_dir), "--path", str(project))
            try:
                pane = claude.interactive(tmux, cwd=project, prompt="run the steps", trust=False,
                                          permission_mode="default",
                                          env={"FLEET_ANSWER_TIMEOUT": "300"})
                for n in range(total):
                    case = CASES[n % len(CASES)]
                    deadline = time.monotonic() + 60
                    while not (open_requests(home, "bench") and DIALOG in pane.screen()):
                        if time.monotonic() > deadline:
                            print(f"answer_latency: step {n}: no request or dialog\n"
                                  f"{pane.screen()}", file=sys.stderr)
                            return 1
                        time.sleep(0.005)
                    t0 = time.time()
                    if case == "answer":
                        answer(home, "bench", "allow", by="bench")
                    elif case == "keypress":
                        pane.send("Enter")
                    else:
                        subprocess.run([*fleet_argv(), "answer", "bench", "allow"], check=True,
                                       capture_output=True)
                    while len(_lines(starts)) <= n:
                        if time.monotonic() > deadline:
                            print(f"answer_latency: step {n} ({case}) never started\n"
                                  f"{pane.screen()}", file=sys.stderr)
                            return 1
                        time.sleep(0.002)
                    latencies[case].append((float(_lines(starts)[n]) - t0) * 1000)
                    # The next dialog must be a new one: wait until this request is closed.
                    while open_requests(home, "bench") and time.monotonic() < deadline:
                        time.sleep(0.005)
            finally:
                tmux.kill()
                processes.stop_all()

    hand = {"p50_ms": round(pct(handed, 50), 2), "p99_ms": round(pct(handed, 99), 2),
            "max_ms": round(max(handed), 2), "n": len(handed)}
    stats = {name: {"p50_ms": round(pct(v, 50), 1), "p99_ms": round(pct(v, 99), 1),
                    "max_ms": round(max(v), 1), "n": len(v)} for name, v in latencies.items()}
    base = stats["keypress"]
    ratios = {name: {"p50": round(s["p50_ms"] / base["p50_ms"], 2),
                     "p99": round(s["p99_ms"] / base["p99_ms"], 2)} for name, s in stats.items()}
    result = {"claude_code": agents.claude_version, "steps_per_case": args.steps,
              "handoff": hand, "latency": stats, "ratio_to_keypress": ratios,
              "target_p99_ms": TARGET_MS,
              "met": hand["p99_ms"] < TARGET_MS}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"fleet's hand-off, answer() -> decision on the hook's stdout, {len(handed)} "
              f"runs: p50 {hand['p50_ms']:.2f} ms  p99 {hand['p99_ms']:.2f} ms  "
              f"max {hand['max_ms']:.2f} ms")
        print(f"Claude Code {agents.claude_version} TUI, default mode: answer -> tool started, "
              f"{args.steps} steps per case")
        for name in CASES:
            s, r = stats[name], ratios[name]
            print(f"  {name:<9} p50 {s['p50_ms']:6.1f} ms  p99 {s['p99_ms']:6.1f} ms  "
                  f"max {s['max_ms']:6.1f} ms   x{r['p50']:.2f} / x{r['p99']:.2f} of keypress")
        mark = "ok" if result["met"] else "OVER"
        print(f"  hand-off p99 {hand['p99_ms']:.2f} ms (target < {TARGET_MS:.0f} ms: {mark}); "
              f"answer/keypress p99 x{ratios['answer']['p99']:.2f}")
    return 0


def _lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


if __name__ == "__main__":
    sys.exit(main())
