"""What Claude Code's statusLine command is given about plan quota, on every tested release:
the facts a statusLine quota source would stand on. fleet has none yet: its headless workers
never run the command, and the statusLine setting holds one command, the user's own.

- A subscriber's session (an OAuth token) passes ``rate_limits`` on the statusLine command's
  stdin once a response carried the ``anthropic-ratelimit-unified-*`` headers:
  ``{"five_hour": {"used_percentage": 42, "resets_at": <unix s>}, "seven_day": {...}}``,
  utilization (0-1) as a percentage, resets as sent.
- An API-key session passes no ``rate_limits`` at all, headers or not.
- ``claude -p`` (fleet's headless workers) never runs the statusLine command.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .harness import ClaudeSetup, Tmux
from .script import Reply

pytestmark = pytest.mark.e2e


def plan_headers(now: int) -> dict[str, str]:
    """What the API answers a subscriber with: 42% of the 5-hour window, 17% of the week."""
    return {
        "anthropic-ratelimit-unified-status": "allowed",
        "anthropic-ratelimit-unified-reset": str(now + 3 * 3600),
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
        "anthropic-ratelimit-unified-5h-status": "allowed",
        "anthropic-ratelimit-unified-5h-utilization": "0.42",
        "anthropic-ratelimit-unified-5h-reset": str(now + 3 * 3600),
        "anthropic-ratelimit-unified-7d-status": "allowed",
        "anthropic-ratelimit-unified-7d-utilization": "0.17",
        "anthropic-ratelimit-unified-7d-reset": str(now + 4 * 86400),
    }


def capture_statusline(claude: ClaudeSetup, into: Path) -> None:
    """A statusLine command that keeps each input it is given, one file each."""
    into.mkdir()
    settings = claude.settings()
    settings["statusLine"] = {
        "type": "command",
        "command": f"cat > {shlex.quote(str(into))}/$(date +%s%N).json; echo fleet-probe",
    }
    claude.settings_file.write_text(json.dumps(settings))


def inputs(into: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(into.glob("*.json")):
        try:
            out.append(json.loads(path.read_text()))
        except ValueError:
            continue  # being written
    return out


def wait_for_input(into: Path, wanted: str, timeout: float = 60) -> list[dict[str, Any]]:
    """The inputs so far, once one of them has the key ``wanted``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = inputs(into)
        if any(wanted in item for item in got):
            return got
        time.sleep(0.1)
    raise AssertionError(f"no statusLine input with {wanted!r}: {inputs(into)}")


def answered(item: dict[str, Any]) -> bool:
    return bool((item.get("cost") or {}).get("total_api_duration_ms"))


def test_a_subscribers_statusline_input_carries_rate_limits(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux, tmp_path: Path
) -> None:
    now = int(time.time())
    anthropic.script([Reply(text="hi", headers=plan_headers(now))])
    capture_statusline(claude, tmp_path / "sl")
    claude.interactive(tmux, cwd=repo.path, prompt="anything", subscription=True,
                       permission_mode="bypassPermissions")
    got = wait_for_input(tmp_path / "sl", "rate_limits")
    limits = next(item["rate_limits"] for item in got if "rate_limits" in item)
    assert limits == {
        "five_hour": {"used_percentage": 42, "resets_at": now + 3 * 3600},
        "seven_day": {"used_percentage": 17, "resets_at": now + 4 * 86400},
    }


def test_an_api_key_sessions_statusline_input_has_no_rate_limits(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux, tmp_path: Path
) -> None:
    anthropic.script([Reply(text="hi", headers=plan_headers(int(time.time())))])
    capture_statusline(claude, tmp_path / "sl")
    claude.interactive(tmux, cwd=repo.path, prompt="anything",
                       permission_mode="bypassPermissions")
    deadline = time.monotonic() + 60
    while not any(answered(item) for item in inputs(tmp_path / "sl")):
        assert time.monotonic() < deadline, inputs(tmp_path / "sl")
        time.sleep(0.1)
    time.sleep(1)  # a refresh after the answer, if any, would carry them
    assert not any("rate_limits" in item for item in inputs(tmp_path / "sl"))


def test_claude_p_never_runs_the_statusline_command(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmp_path: Path
) -> None:
    anthropic.script([Reply(text="hi", headers=plan_headers(int(time.time())))])
    capture_statusline(claude, tmp_path / "sl")
    run = claude.headless("anything", cwd=repo.path, subscription=True)
    assert run.returncode == 0, run.stderr
    time.sleep(1)
    assert inputs(tmp_path / "sl") == []
