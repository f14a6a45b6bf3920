"""Fixtures for headless workers: fake ``claude``/``codex`` executables that follow a script,
and a finalizer that ends every supervisor and agent a test started."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet._proc import is_alive
from fleet.adapters.headless import HeadlessOptions

HERE = Path(__file__).parent
KEY = "sk-fleet-test-3f9c1e7d5b2a4c6e8f0a1b2c3d4e5f60"


class FakeAgent:
    """The scripted agent: ``plan(steps)`` sets what the next runs do; ``calls()`` says what
    each run saw."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "agent-state"
        self.bin = root / "bin"
        self.dir.mkdir()
        self.bin.mkdir()
        source = (HERE / "fake_agent.py").read_text()
        for name in ("claude", "codex"):
            path = self.bin / name
            path.write_text(f"#!{sys.executable}\n{source}")
            path.chmod(0o755)
        self.plan([{"result": "ok"}])

    def plan(self, steps: list[dict[str, Any]]) -> None:
        (self.dir / "plan.json").write_text(json.dumps(steps))

    def calls(self) -> list[dict[str, Any]]:
        path = self.dir / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def wait_running(self, n: int = 1, timeout: float = 30.0) -> int:
        """The pid of run ``n`` once it is sleeping in its step."""
        path = self.dir / f"running-{n}"
        end = time.monotonic() + timeout
        while not path.exists() or not path.read_text():
            if time.monotonic() > end:
                raise TimeoutError(f"fake agent run {n} never started")
            time.sleep(0.02)
        return int(path.read_text())

    def options(self, **kw: Any) -> HeadlessOptions:
        env = {"FAKE_AGENT_DIR": str(self.dir), **kw.pop("env", {})}
        defaults: dict[str, Any] = {
            "claude": str(self.bin / "claude"),
            "codex": str(self.bin / "codex"),
            "backoff_base": 0.01,
            "backoff_max": 0.05,
            "grace": 2.0,
        }
        defaults.update(kw)
        return HeadlessOptions(env=env, **defaults)


@pytest.fixture
def fake(tmp_path: Path, home: Path) -> Iterator[FakeAgent]:
    agent = FakeAgent(tmp_path)
    yield agent
    _stop_everything(home, agent)


def _stop_everything(home: Path, agent: FakeAgent) -> None:
    pids: list[int] = []
    for sup in (home / "workers").glob("*/headless/supervisor.json"):
        with contextlib.suppress(ValueError, OSError):
            pids.append(int(json.loads(sup.read_text())["pid"]))
    pids += [c["pid"] for c in agent.calls()]
    for pid in pids:
        if is_alive(pid, None):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def wait_for(predicate: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)
