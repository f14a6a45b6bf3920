"""A session that was not started as a fleet worker (no FLEET_WORKER, its project dir in no
registered worktree) writes nothing, even with fleet's hooks installed; the same session in a
registered worktree is journaled, which shows the hooks did run."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import Repo, make_repo
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI
from .harness import (
    ClaudeSetup,
    CodexSetup,
    fleet_home,
    hooks_of,
    install_hooks,
    journal,
    register,
)
from .script import bash, say, shell

pytestmark = pytest.mark.e2e


def fleet_files() -> set[Path]:
    root = fleet_home()
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def assert_nothing_new(before: set[Path]) -> None:
    new = fleet_files() - before
    errors = fleet_home() / "hook-errors.log"
    detail = errors.read_text() if errors.exists() else ""
    assert not new, f"written by a non-worker session: {sorted(map(str, new))}\n{detail}"


def test_claude_session_outside_any_worker_writes_nothing(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmp_path: Path
) -> None:
    install_hooks(claude)
    # Another worker is registered elsewhere, so the hook does have an index to search.
    other = make_repo(tmp_path / "other")
    register("elsewhere", other.path, "claude")
    before = fleet_files()
    journal_before = journal("elsewhere")
    anthropic.script([bash("true"), say("Done.\nFLEET_WORKER_DONE: not a worker")])

    run = claude.headless("run true", cwd=repo.path)

    assert run.returncode == 0, run.describe()
    assert_nothing_new(before)  # no journal, no hook-errors.log, nothing
    assert journal("elsewhere") == journal_before

    # Control: the same session in the registered worktree is recorded.
    run = claude.headless("run true", cwd=other.path)
    assert run.returncode == 0, run.describe()
    assert "Stop" in hooks_of(journal("elsewhere"))


def test_codex_session_outside_any_worker_writes_nothing(
    codex: CodexSetup, openai: FakeOpenAI, repo: Repo, tmp_path: Path
) -> None:
    install_hooks(codex)
    other = make_repo(tmp_path / "other")
    register("elsewhere", other.path, "codex")
    before = fleet_files()
    openai.script([shell("true"), say("Done.")])

    run = codex.exec("run true", cwd=repo.path)

    assert run.returncode == 0, run.describe()
    assert_nothing_new(before)

    run = codex.exec("run true", cwd=other.path)
    assert run.returncode == 0, run.describe()
    assert "Stop" in hooks_of(journal("elsewhere"))
