"""A real Claude Code session with 20 tool calls, with fleet's hooks installed versus none.

Runs the pinned Claude Code (``scripts/install-agents``) headless against the tests' fake
Anthropic server on 127.0.0.1, scripted to make 20 Bash calls and then finish. Each round runs
the session three times, interleaved: with an empty settings.json; with ``fleet hooks install``
in the config dir and the project registered as a worker (so every hook appends to a journal);
and, for reference, with the same hook layout running ``<python> -I -S -c pass`` (the least any
Python hook can cost). Prints the median wall time of each and the ratios. Target: fleet's hooks
at most 1.15x the session without hooks.

    .venv/bin/python bench/hook_session.py [--rounds N] [--claude PATH] [--json]
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

from fleet._hooks import claude_target, hook_python, install
from fleet._journal import index_worktree

#: The repository root: the fake model server lives with the end-to-end tests.
ROOT = Path(__file__).resolve().parents[1]

TARGET = 1.15
TOOL_CALLS = 20
API_KEY = "sk-ant-bench-0123456789abcdefghij"


def find_claude(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    from tests.e2e.binaries import find_agents

    return find_agents().claude


def make_config(root: Path, name: str, project: Path) -> Path:
    cfg = root / name
    cfg.mkdir()
    (cfg / "settings.json").write_text("{}\n")
    state = {
        "hasCompletedOnboarding": True,
        "projects": {str(project): {"hasTrustDialogAccepted": True}},
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
    }
    (cfg / ".claude.json").write_text(json.dumps(state))
    return cfg


def run_session(claude: Path, cfg: Path, project: Path, empty_home: Path, url: str,
                fleet_home: Path) -> float:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(empty_home),
        "CLAUDE_CONFIG_DIR": str(cfg),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": API_KEY,
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "IS_SANDBOX": "1",
        "FLEET_HOME": str(fleet_home),
    }
    argv = [str(claude), "-p", "run the checks", "--output-format", "json",
            "--permission-mode", "bypassPermissions"]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=project, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"claude exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="sessions per case (default 5)")
    parser.add_argument("--claude", metavar="PATH", help="the claude binary (default: pinned)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.e2e.fake_anthropic import FakeAnthropic
    from tests.e2e.script import bash, say

    claude = find_claude(args.claude)

    server = FakeAnthropic().start()
    try:
        server.script([bash("true") for _ in range(TOOL_CALLS)] + [say("All checks ran.")])
        with tempfile.TemporaryDirectory(prefix="fleet-session-bench-") as tmp:
            root = Path(tmp)
            project = root / "project"
            project.mkdir()
            subprocess.run(["git", "init", "-q", str(project)], check=True)
            empty_home = root / "home"
            empty_home.mkdir()
            fleet_home = root / "fleet-home"
            plain = make_config(root, "plain", project)
            hooked = make_config(root, "hooked", project)
            install(claude_target(hooked), home=fleet_home)
            index_worktree(fleet_home, "bench", str(project))
            floor = make_config(root, "floor", project)
            settings = json.loads((hooked / "settings.json").read_text())
            for groups in settings["hooks"].values():
                for handler in groups[0]["hooks"]:
                    handler["command"] = f"{hook_python()} -I -S -c pass"
            (floor / "settings.json").write_text(json.dumps(settings))
            cases = {"no hooks": plain, "fleet hooks": hooked, "floor hooks": floor}
            times: dict[str, list[float]] = {name: [] for name in cases}
            for cfg in cases.values():  # warm up
                run_session(claude, cfg, project, empty_home, server.url, fleet_home)
            for _ in range(args.rounds):
                for name, cfg in cases.items():
                    times[name].append(
                        run_session(claude, cfg, project, empty_home, server.url, fleet_home)
                    )
            journal = fleet_home / "workers" / "bench" / "journal.jsonl"
            lines = journal.read_bytes().count(b"\n") if journal.exists() else 0
    finally:
        server.stop()
    # Each hooked session journals at least SessionStart, UserPromptSubmit, 20 PreToolUse and
    # 20 PostToolUse, Stop and SessionEnd: proof the hooks really ran.
    expected = (args.rounds + 1) * (2 * TOOL_CALLS + 4)
    if lines < expected:
        print(f"expected at least {expected} journal lines, found {lines}", file=sys.stderr)
        return 1
    medians = {k: statistics.median(v) for k, v in times.items()}
    ratio = medians["fleet hooks"] / medians["no hooks"]
    floor_ratio = medians["floor hooks"] / medians["no hooks"]
    result = {
        "claude": str(claude),
        "rounds": args.rounds,
        "tool_calls": TOOL_CALLS,
        "median_s": {k: round(v, 3) for k, v in medians.items()},
        "ratio": round(ratio, 3),
        "floor_ratio": round(floor_ratio, 3),
        "target": TARGET,
        "met": ratio <= TARGET,
        "journal_lines": lines,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"claude {claude}, {TOOL_CALLS} tool calls per session, {args.rounds} rounds:")
        for name, value in medians.items():
            print(f"  {name:<12} {value:7.3f} s")
        mark = "ok" if ratio <= TARGET else "OVER"
        print(f"  ratio        {ratio:7.3f}x (target <= {TARGET}x: {mark})")
        print(f"  floor ratio  {floor_ratio:7.3f}x (python -I -S -c pass as every hook)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
