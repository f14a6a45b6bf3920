"""Quota without clausona, on the real Claude Code: a subscriber's usage limit that a worker on
one of fleet's own profiles hits is what `fleet profiles` shows for that profile, with the
reset time the API gave, and routing passes the profile by."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .harness import ClaudeSetup, fleet_cli, install_hooks, wait_for_state
from .test_claude_failures import RESET_IN, failure_recorded, usage_limit

pytestmark = pytest.mark.e2e


def test_a_usage_limit_a_worker_hit_is_its_profiles_quota(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmp_path: Path
) -> None:
    env = {"FLEET_CLAUSONA": str(tmp_path / "no-clausona"), "FLEET_PROFILES": ""}
    install_hooks(claude)
    fleet_cli("profiles", "add", "sub", "--config-dir", str(claude.config_dir), env=env)
    fleet_cli("profiles", "add", "spare", "--config-dir", str(tmp_path / "spare"), env=env)
    fleet_cli("register", "w1", "--worktree", str(repo.path), "--tool", "claude",
              "--profile", "claude:sub", env=env)
    reset_at = int(time.time()) + RESET_IN
    anthropic.script([usage_limit(reset_at)])

    claude.headless("anything", cwd=repo.path, subscription=True)
    wait_for_state("w1", failure_recorded, timeout=60)

    rows = {r["name"]: r for r in json.loads(fleet_cli("profiles", "--json", env=env).stdout)}
    sub, spare = rows["claude:sub"], rows["claude:spare"]
    assert (sub["quotaSource"], sub["worker"]) == ("journal", False), sub
    assert sub["limit"]["worker"] == "w1" and sub["limit"]["active"] is True
    # Claude Code says the minute; fleet reads the end of it when it is the current one.
    assert abs(sub["limit"]["resetsAt"] - reset_at) <= 60, (sub["limit"], reset_at)
    assert (spare["quotaSource"], spare["worker"]) == ("unknown", True)
    table = fleet_cli("profiles", env=env).stdout
    assert "claude:sub: limited, from fleet's journals: worker w1 hit a usage limit" in table
    assert "claude:spare: quota unknown (no clausona reading, no limit seen)" in table

    tasks = tmp_path / "tasks.toml"
    tasks.write_text('[[task]]\nname = "next"\n')
    plan = json.loads(fleet_cli("plan", str(tasks), "--coordinator-tool", "claude", "--json",
                                env=env).stdout)
    assert [t["profile"] for t in plan["tasks"]] == ["claude:spare"]
