"""A worker forgotten while its session goes on, on the real Claude Code of every tested
release: fleet refuses to forget it while its hooks are fresh, and once forced, the session's
later hook events (it still has FLEET_WORKER) go to the worker's archive: no new worker of that
id appears, and `fleet doctor` says where they went."""

from __future__ import annotations

import json

import pytest

from fleet._forget import archived_journals

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .harness import ClaudeSetup, fleet_cli, fleet_home, hooks_of, install_hooks, journal
from .script import bash, say

pytestmark = pytest.mark.e2e


def test_a_forgotten_workers_session_journals_into_its_archive(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    install_hooks(claude)
    fleet_cli("register", "fw", "--worktree", str(repo.path), "--tool", "claude")
    anthropic.script([bash("true"), say("Done.\nFLEET_WORKER_DONE: first")])
    run = claude.headless("run true", cwd=repo.path, env={"FLEET_WORKER": "fw"})
    assert run.returncode == 0, run.describe()
    assert "Stop" in hooks_of(journal("fw"))

    refused = fleet_cli("forget", "fw", check=False)
    assert refused.returncode == 4 and "journal moved" in refused.stderr, refused
    fleet_cli("forget", "fw", "--force")

    run = claude.headless("run true again", cwd=repo.path, env={"FLEET_WORKER": "fw"})
    assert run.returncode == 0, run.describe()

    assert not (fleet_home() / "workers" / "fw").exists()
    assert json.loads(fleet_cli("status", "--json").stdout) == []
    (archive,) = archived_journals(fleet_home(), "fw")
    types = [json.loads(line)["type"] for line in archive.read_text().splitlines()]
    assert types.count("SessionStart") == 2 and types.count("Stop") == 2, types
    doctor = json.loads(fleet_cli("doctor", "--json", check=False).stdout)
    assert any("fw was forgotten, but" in p and str(archive.parent) in p
               for p in doctor["problems"]), doctor["problems"]
