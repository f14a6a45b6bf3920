"""The cost of fleet's hooks on a whole real Claude Code session.

Runs the pinned Claude Code (``scripts/install-agents``) headless, offline, against the
end-to-end tests' fake Anthropic server, scripted to make 20 Bash ``true`` calls and then finish,
in three isolated config dirs (built by the same harness as the e2e tests, clean environment):

- ``none``: no hooks;
- ``fleet``: ``fleet hooks install --config-dir`` and the project registered as a worker (each
  hook appends to the worker's journal);
- ``not-worker``: fleet's hooks installed, but the project belongs to no worker.

Rounds alternate the cases (rotating which goes first), after one warm-up round. Prints the
median wall time of each, the ratio to ``none`` and the cost per tool call. Target: ``fleet`` at
most 1.15x ``none``.

    .venv/bin/python bench/claude_session.py [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.binaries import AgentsMissing, find_agents  # noqa: E402
from tests.e2e.fake_anthropic import FakeAnthropic  # noqa: E402
from tests.e2e.harness import (  # noqa: E402
    ClaudeSetup,
    Processes,
    fleet_cli,
    hooks_of,
    journal,
)
from tests.e2e.script import bash, say  # noqa: E402

TARGET = 1.15
TOOL_CALLS = 20
CASES = ("none", "fleet", "not-worker")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="sessions per case (default 7)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--agents", default="current",
                        help="the pin set to run (tests/e2e/agents/; default current)")
    args = parser.parse_args()
    try:
        agents = find_agents(args.agents)
    except AgentsMissing as exc:
        print(f"claude_session: {exc}", file=sys.stderr)
        return 1

    with tempfile.TemporaryDirectory(prefix="fleet-claude-session-") as tmp:
        root = Path(tmp)
        os.environ["FLEET_HOME"] = str(root / "fleet-home")
        gitconfig = root / "gitconfig"
        gitconfig.write_text("[user]\n\tname = Bench\n\temail = bench@example.invalid\n")
        os.environ["GIT_CONFIG_GLOBAL"] = str(gitconfig)
        os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
        projects = {name: root / f"project-{name}" for name in CASES}
        for project in projects.values():
            subprocess.run(["git", "init", "-q", str(project)], check=True)
        fleet_cli("register", "bench", "--worktree", str(projects["fleet"]), "--tool", "claude")

        processes = Processes()
        times: dict[str, list[float]] = {name: [] for name in CASES}
        with FakeAnthropic() as server:
            server.script([bash("true") for _ in range(TOOL_CALLS)] + [say("All checks ran.")])
            setups = {
                name: ClaudeSetup(agents=agents, server=server, config_dir=root / f"cfg-{name}",
                                  home=root / f"home-{name}", processes=processes).prepare()
                for name in CASES
            }
            for name in ("fleet", "not-worker"):
                fleet_cli("hooks", "install", "--config-dir", str(setups[name].config_dir))
            try:
                for round_no in range(args.rounds + 1):
                    order = CASES[round_no % 3:] + CASES[: round_no % 3]
                    for name in order:
                        run = setups[name].headless("run the checks", cwd=projects[name],
                                                    timeout=300)
                        if run.returncode != 0:
                            print(f"claude_session: {name} run failed\n{run.describe()}",
                                  file=sys.stderr)
                            return 1
                        if round_no > 0:  # round 0 warms caches up
                            times[name].append(run.seconds)
            finally:
                processes.stop_all()
        recorded = hooks_of(journal("bench"))
        stray = sorted(p.name for p in (root / "fleet-home" / "workers").iterdir())

    # Proof the hooks ran: every fleet session journals its 20 PreToolUse and PostToolUse.
    sessions = args.rounds + 1
    if recorded.count("PostToolUse") != sessions * TOOL_CALLS or stray != ["bench"]:
        print(f"claude_session: expected {sessions * TOOL_CALLS} PostToolUse in one journal, "
              f"got {recorded.count('PostToolUse')} in {stray}", file=sys.stderr)
        return 1
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians["none"]
    ratios = {name: value / base for name, value in medians.items()}
    per_call_ms = {name: (value - base) / TOOL_CALLS * 1000 for name, value in medians.items()}
    result = {
        "rounds": args.rounds,
        "tool_calls": TOOL_CALLS,
        "median_s": {k: round(v, 3) for k, v in medians.items()},
        "min_s": {k: round(min(v), 3) for k, v in times.items()},
        "ratio": {k: round(v, 3) for k, v in ratios.items()},
        "per_tool_call_ms": {k: round(v, 1) for k, v in per_call_ms.items()},
        "target": TARGET,
        "met": ratios["fleet"] <= TARGET,
        "journal_hooks": len(recorded),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"Claude Code headless, {TOOL_CALLS} Bash calls per session, "
              f"{args.rounds} rounds (+1 warm-up), medians:")
        for name in CASES:
            print(f"  {name:<11} {medians[name]:7.3f} s  {ratios[name]:6.3f}x  "
                  f"{per_call_ms[name]:+6.1f} ms per tool call  (min {min(times[name]):.3f} s)")
        mark = "ok" if result["met"] else "OVER"
        print(f"  fleet/none {ratios['fleet']:.3f}x (target <= {TARGET}x: {mark})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
