"""A follow-up sent with a receipt, on the real Claude Code and Codex of every tested release:
fleet says it was taken once the resumed session's hooks show the agent ran on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet import Fleet

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI
from .harness import fleet_cli
from .script import say
from .test_headless_workers import (  # noqa: F401  (fixtures)
    _reap_workers,
    brief,
    coordinator_env,
    exits,
    host_home,
)

pytestmark = pytest.mark.e2e


def _ask_then_finish(worker: str, tool: str, url: str, repo: Repo, tmp_path: Path,
                     env: dict[str, str]) -> None:
    task = brief(tmp_path, worker, f"task-{worker}: write the notes.\n")
    fleet_cli("start", worker, "--tool", tool, "--task", str(task), "--repo", str(repo.path),
              "--endpoint", url, "--key-from", "env:FLEET_TEST_KEY", "--model", "m", env=env)
    exits(worker)
    follow = tmp_path / f"{worker}-follow.md"
    follow.write_text("Write notes.txt.")

    sent = fleet_cli("send", worker, str(follow), "--receipt", "50", "--json", env=env)

    receipt = json.loads(sent.stdout)["receipt"]
    assert receipt["taken"] is True, receipt
    assert receipt["why"] is None
    exits(worker, 2)
    with Fleet() as fleet:
        state = fleet.state(worker)
    assert (state.state, state.delivery) == ("done", "taken")


def test_a_claude_follow_up_is_taken(
    anthropic: FakeAnthropic, coordinator_env: dict[str, str], repo: Repo,  # noqa: F811
    tmp_path: Path,
) -> None:
    anthropic.script([say("Which file?"), say("FLEET_WORKER_DONE: wrote notes.txt")],
                     key="task-ctalk")
    _ask_then_finish("ctalk", "claude", anthropic.url, repo, tmp_path, coordinator_env)


def test_a_codex_follow_up_is_taken(
    openai: FakeOpenAI, coordinator_env: dict[str, str], repo: Repo,  # noqa: F811
    tmp_path: Path,
) -> None:
    openai.script([say("Which file?"), say("FLEET_WORKER_DONE: wrote it")], key="task-xtalk")
    _ask_then_finish("xtalk", "codex", openai.url, repo, tmp_path, coordinator_env)
