"""Claude Code with fleet's hooks (installed by ``fleet hooks install``): what each kind of
session leaves in the worker's journal, and the states the fold makes of it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fleet._core.events import AgentStatus, Event, HookEvent
from fleet._core.fold import fold

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .harness import (
    ClaudeSetup,
    Tmux,
    fleet_cli,
    hooks_of,
    install_hooks,
    journal,
    journal_file,
    register,
    state_sequence,
    wait_for_journal,
)
from .script import bash, error, say

pytestmark = pytest.mark.e2e

STARTED = [("starting", "registered"), ("starting", "session"), ("working", "active")]


def headless_worker(claude: ClaudeSetup, repo: Repo, worker: str = "w1") -> None:
    install_hooks(claude)
    register(worker, repo.path, "claude")


TOOL_HOOKS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})


def synchronous(events: list[Event]) -> list[str]:
    """The hooks Claude Code waits for, in journal order."""
    return [h for h in hooks_of(events) if h not in TOOL_HOOKS]


def tool_hooks(events: list[Event]) -> list[str]:
    """Tool hooks run async (fleet installs them so): all arrive, in no fixed order."""
    return sorted(h for h in hooks_of(events) if h in TOOL_HOOKS)


def assert_failure_sequence(events: list[Event], error: str) -> None:
    """Claude Code -p fires StopFailure and SessionEnd without waiting for the first: either
    may be journaled first, and the API error wins either way."""
    hooks = hooks_of(events)
    assert hooks[:2] == ["SessionStart", "UserPromptSubmit"]
    assert sorted(hooks[2:]) == ["SessionEnd", "StopFailure"]
    failure = next(e for e in events if isinstance(e, HookEvent) and e.hook == "StopFailure")
    assert failure.get("error") == error
    # A SessionEnd journaled first names the error too when the transcript already ends in it
    # (its second source); otherwise it reads as gone until StopFailure lands.
    end = next(e for e in events if isinstance(e, HookEvent) and e.hook == "SessionEnd")
    ended_first = (
        [("gone", "ended")] if hooks[2] == "SessionEnd" and not end.text("error") else []
    )
    assert end.text("error") in (None, error)
    assert state_sequence("w1", events) == [
        *STARTED, *ended_first, ("stopped", f"api_error:{error}"),
    ]
    final = fold("w1", events, now=time.time())
    assert events[final.seq] is failure and final.error == error


def assert_private(worker: str, claude: ClaudeSetup, secrets: list[str]) -> None:
    """Neither the key nor tool inputs reach the journal."""
    raw = journal_file(worker).read_text()
    assert claude.api_key not in raw
    for secret in secrets:
        assert secret not in raw
    assert "tool_input" not in raw and "tool_response" not in raw


def test_headless_turn_with_tools_stops_then_session_end_is_gone(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    headless_worker(claude, repo)
    anthropic.script([bash("true"), bash("echo marker-31337"), say("Ran both commands.")])

    run = claude.headless("run two commands", cwd=repo.path)

    assert run.returncode == 0, run.describe()
    assert run.result["is_error"] is False
    events = journal("w1")
    assert synchronous(events) == ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"]
    assert tool_hooks(events) == ["PostToolUse"] * 2
    stop = next(e for e in events if isinstance(e, HookEvent) and e.hook == "Stop")
    assert stop.get("last_assistant_message") == "Ran both commands."
    assert state_sequence("w1", events) == [
        *STARTED, ("stopped", "turn_end"), ("gone", "ended"),
    ]
    assert_private("w1", claude, ["marker-31337"])
    hook_events = [e for e in events if isinstance(e, HookEvent)]
    assert {e.src for e in hook_events} == {"claude"}
    assert len({e.get("session_id") for e in hook_events}) == 1
    assert run.result["session_id"] == hook_events[0].get("session_id")
    assert anthropic.api_keys() == [claude.api_key] * 3


def test_headless_done_envelope_is_claimed(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    headless_worker(claude, repo)
    anthropic.script([
        bash("true"),
        say("Implemented it and pushed.\nFLEET_WORKER_DONE: parser fixed, tests pass"),
    ])

    run = claude.headless("fix the parser", cwd=repo.path)

    assert run.returncode == 0, run.describe()
    events = journal("w1")
    assert synchronous(events) == ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"]
    assert tool_hooks(events) == ["PostToolUse"]
    assert state_sequence("w1", events) == [*STARTED, ("done", "claimed")]
    final = fold("w1", events, now=time.time())
    assert final.envelope is not None and final.envelope.text == "parser fixed, tests pass"
    assert final.live is False


def test_headless_blocked_envelope_via_fleet_worker_env(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmp_path: Path
) -> None:
    # No registration: FLEET_WORKER alone routes the session to its journal.
    install_hooks(claude)
    anthropic.script([say("I cannot go on.\nFLEET_WORKER_BLOCKED: need the staging password")])

    run = claude.headless("deploy", cwd=repo.path, env={"FLEET_WORKER": "w-env"})

    assert run.returncode == 0, run.describe()
    events = journal("w-env")
    assert hooks_of(events) == ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"]
    assert state_sequence("w-env", events) == [
        ("starting", "session"), ("working", "active"), ("blocked", "worker"),
    ]
    final = fold("w-env", events, now=time.time())
    assert final.envelope is not None and final.envelope.text == "need the staging password"


def test_headless_overloaded_with_retries_off_is_api_error(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    headless_worker(claude, repo)
    anthropic.script([error(529)])

    run = claude.headless("anything", cwd=repo.path, env={"CLAUDE_CODE_MAX_RETRIES": "0"})

    assert run.returncode == 1, run.describe()
    assert run.result["is_error"] is True
    assert len(anthropic.recorded("main")) == 1  # no retry
    events = journal("w1")
    assert_failure_sequence(events, "server_error")


def test_headless_bad_key_is_api_error_with_the_key_sent(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    headless_worker(claude, repo)
    anthropic.script([error(401)])

    run = claude.headless("anything", cwd=repo.path,
                          env={"ANTHROPIC_API_KEY": "sk-ant-profile-b-key-000000000000"})

    assert run.returncode == 1, run.describe()
    assert anthropic.api_keys() == ["sk-ant-profile-b-key-000000000000"]
    assert_failure_sequence(journal("w1"), "authentication_failed")


DIALOG = "Do you want to proceed?"


def test_interactive_permission_dialog_blocks_at_once_and_approval_resumes(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux
) -> None:
    headless_worker(claude, repo)
    fleet_cli("trust", "--config-dir", str(claude.config_dir), "--path", str(repo.path))
    anthropic.script([bash("echo approved > out.txt"), say("Wrote out.txt.")])

    # fleet trust answered the folder-trust dialog: the harness does not. The mode is explicit:
    # Claude Code 2.1.332 defaults to auto mode, which runs this command without a dialog.
    pane = claude.interactive(tmux, cwd=repo.path, prompt="write out.txt", trust=False,
                              permission_mode="default")

    # Watch the screen and the fold together: the dialog's first sighting, then the state.
    deadline = time.monotonic() + 60
    dialog_at: float | None = None
    blocked_at: float | None = None
    while blocked_at is None or dialog_at is None:
        assert time.monotonic() < deadline, f"no dialog/blocked state:\n{pane.screen()}"
        if dialog_at is None and DIALOG in pane.screen():
            dialog_at = time.monotonic()
        state = fold("w1", journal("w1"), now=time.time())
        if blocked_at is None and state.state == "blocked":
            blocked_at = time.monotonic()
        time.sleep(0.02)
    events = journal("w1")
    state = fold("w1", events, now=time.time())
    assert (state.state, state.reason) == ("blocked", "permission")
    # Entered by the PermissionRequest hook, or by the session's status file saying "waiting"
    # a moment before it (2.1.332's monitor): one wait either way, which the hook then names.
    entered = events[state.seq]
    assert (isinstance(entered, HookEvent) and entered.hook == "PermissionRequest") or (
        isinstance(entered, AgentStatus) and entered.status == "waiting"
    ), entered
    assert state.permission_tool == "Bash"
    assert blocked_at - dialog_at <= 1.0, f"blocked {blocked_at - dialog_at:.2f}s after dialog"

    pane.send("Enter")  # "1. Yes" is selected

    events = wait_for_journal("w1", lambda ev: "Stop" in hooks_of(ev), timeout=60)
    assert (repo.path / "out.txt").read_text() == "approved\n"
    assert state_sequence("w1", events) == [
        *STARTED, ("blocked", "permission"), ("working", "active"), ("stopped", "turn_end"),
    ]
