"""Running fleet's hook program as the agents do: a subprocess with a payload on stdin."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from fleet._core.events import Event, decode_line
from fleet._hook_command import hook_argv
from fleet._journal import index_worktree

#: Real payloads of every hook event, captured from Claude Code 2.1.197 and 2.1.332 (the tested
#: releases; ``-more-`` holds what the reference capture of 2.1.332 left out: model switches,
#: AskUserQuestion, an MCP elicitation, a subscription's usage limit) and Codex 0.171.0.
REFERENCE = Path(__file__).resolve().parent / "payloads"
CLAUDE_RELEASES: dict[str, tuple[str, ...]] = {
    "2.1.197": ("claude-code-2.1.197-hook-payloads.json",),
    "2.1.332": (
        "claude-code-2.1.332-hook-payloads.json",
        "claude-code-2.1.332-more-hook-payloads.json",
    ),
}
CODEX_PAYLOADS = REFERENCE / "codex-0.171.0-hook-payloads.json"


def claude_payloads(release: str = "2.1.197") -> dict[str, dict[str, Any]]:
    """One release's payloads by scenario name."""
    data: dict[str, dict[str, Any]] = {}
    for name in CLAUDE_RELEASES[release]:
        data.update(json.loads((REFERENCE / name).read_text()))
    return data


def every_claude_payload() -> dict[str, dict[str, Any]]:
    """Every tested release's payloads, by ``"<release> / <scenario>"``."""
    return {
        f"{release} / {name}": payload
        for release in CLAUDE_RELEASES
        for name, payload in claude_payloads(release).items()
    }


def codex_payloads() -> dict[str, dict[str, Any]]:
    """Codex's file maps an event to ``[scenario, payload]``; the NOTIFY entry is not a hook."""
    data = json.loads(CODEX_PAYLOADS.read_text())
    return {k: v[1] for k, v in data.items() if "hook_event_name" in v[1]}


@attrs.frozen
class HookRun:
    returncode: int
    stdout: bytes
    stderr: bytes


@attrs.frozen
class Hook:
    """fleet's hook, installed for one FLEET_HOME, with a registered worker ``w1``."""

    home: Path
    worktree: Path
    elsewhere: Path

    @property
    def journal(self) -> Path:
        return self.home / "workers" / "w1" / "journal.jsonl"

    @property
    def errors(self) -> Path:
        return self.home / "hook-errors.log"

    def run(
        self,
        payload: bytes | Mapping[str, Any],
        *,
        tool: str = "claude",
        env: Mapping[str, str] | None = None,
        project: Path | None = None,
        home_env: bool = True,
        timeout: float = 60,
    ) -> HookRun:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        if home_env:
            full_env["FLEET_HOME"] = str(self.home)
        if project is not None:
            full_env["CLAUDE_PROJECT_DIR"] = str(project)
        full_env.update(env or {})
        proc = subprocess.run(
            hook_argv(tool, home=self.home),
            input=data,
            env=full_env,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        return HookRun(proc.returncode, proc.stdout, proc.stderr)

    def lines(self, worker: str = "w1") -> list[bytes]:
        path = self.home / "workers" / worker / "journal.jsonl"
        return path.read_bytes().splitlines() if path.exists() else []

    def events(self, worker: str = "w1") -> list[Event]:
        return [decode_line(line) for line in self.lines(worker)]

    def error_lines(self) -> list[dict[str, Any]]:
        if not self.errors.exists():
            return []
        return [json.loads(line) for line in self.errors.read_bytes().splitlines()]


@pytest.fixture
def hook(home: Path, tmp_path: Path) -> Hook:
    worktree = tmp_path / "wt"
    elsewhere = tmp_path / "elsewhere"
    worktree.mkdir()
    elsewhere.mkdir()
    index_worktree(home, "w1", str(worktree))
    return Hook(home=home, worktree=worktree, elsewhere=elsewhere)


@pytest.fixture
def set_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine set up as the README says: an agent CLI that tells its release, and
    ``~/.claude`` with fleet's hook installed. Returns the config dir."""
    from fleet._hook_install import claude_target, install

    agents = tmp_path / "agent-bin"
    agents.mkdir()
    claude = agents / "claude"
    claude.write_text('#!/bin/sh\necho "2.1.332 (Claude Code)"\n')
    claude.chmod(0o755)
    monkeypatch.setenv("FLEET_CLAUDE", str(claude))
    config = Path(os.environ["HOME"]) / ".claude"
    config.mkdir()
    install(claude_target(config, claude_version="2.1.332"), home=os.environ["FLEET_HOME"])
    return config
