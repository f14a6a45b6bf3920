"""How far one ``fleet start`` travels: the fleet modules whose functions run in the CLI's
process while it starts a headless worker, counted with ``sys.setprofile``.

Reported: the distinct modules whose functions run (a module's import-time code does not
count), how many calls climb back up the layers (a call from an adapter into the facade or
orchestration, say; layers from the top: the CLI; the facade and MCP server; orchestration;
adapters; the rest of the shell; the core), and how many times the worker id is validated. The
supervisor and the agent run in processes of their own and are not counted; the agent is a
stand-in that exits at once.

    python bench/start_path.py [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

AGENT = """#!/bin/sh
printf '{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s"}\\n'
"""


def _repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "base"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    return repo


def _trace_start(root: Path) -> dict[str, Any]:
    from fleet._cli import main

    repo = _repo(root)
    brief = root / "brief.md"
    brief.write_text("# Say hello\n")
    calls: list[str] = []  # the module of each function call, in order
    climbs: list[str] = []
    validations = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal validations
        if event != "call" or not _is_function(frame):
            return
        module = frame.f_globals.get("__name__", "")
        if module != "fleet" and not module.startswith("fleet."):
            return
        calls.append(module)
        if frame.f_code.co_name == "validate_worker_id":
            validations += 1
        caller = frame.f_back
        while caller is not None and not _is_function(caller):
            caller = caller.f_back
        source = caller.f_globals.get("__name__", "") if caller is not None else ""
        if source.startswith("fleet.") and _layer(source) > _layer(module):
            climbs.append(f"{source}.{caller.f_code.co_name} -> {module}"  # type: ignore[union-attr]
                          f".{frame.f_code.co_name}")

    out = io.StringIO()
    sys.setprofile(profile)
    try:
        with contextlib.redirect_stdout(out):
            code = main(["start", "w1", "--task", str(brief), "--repo", str(repo)])
    finally:
        sys.setprofile(None)
    if code != 0:
        raise SystemExit(f"fleet start failed ({code}): {out.getvalue()}")
    modules = list(dict.fromkeys(calls))
    return {
        "modules": len(modules),
        "path": modules,
        "climbs": len(climbs),
        "climbed": dict(Counter(climbs).most_common()),
        "validations": validations,
    }


def _is_function(frame: FrameType) -> bool:
    # A module's or a class body's code runs at import, not on the path of a start.
    return bool(frame.f_code.co_flags & inspect.CO_OPTIMIZED)


#: Layers from the top; a module not named is in the shell's middle layer.
_LAYERS = (
    ("fleet._cli",),
    ("fleet._fleet", "fleet._mcp"),
    ("fleet._orchestrate",),
    ("fleet.adapters",),
)


def _layer(module: str) -> int:
    if module.startswith("fleet._core"):
        return len(_LAYERS) + 1
    for rank, prefixes in enumerate(_LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return len(_LAYERS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fleet-bench-start-"))
    bin_dir = root / "bin"
    bin_dir.mkdir()
    agent = bin_dir / "claude"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    os.environ.update(
        FLEET_HOME=str(root / "home"), HOME=str(root), FLEET_SETTINGS=str(root / "fleet.json"),
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    try:
        result = _trace_start(root)
        time.sleep(1.0)  # the stand-in agent and its supervisor finish before the clean-up
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"modules entered: {result['modules']}")
        print(f"climbs back up:  {result['climbs']}")
        print(f"id validations:  {result['validations']}")
        print("modules, in order of first call:",
              " > ".join(m.removeprefix("fleet.") for m in result["path"]))
        for climb, times in result["climbed"].items():
            print(f"  climbs: {climb} ({times}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
