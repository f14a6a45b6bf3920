"""Answering a worker's permission request from the coordinator (``fleet answer``), on the real
Claude Code TUI in tmux, in the default permission mode, on every pinned release: the request
is journaled with its id and a redacted summary, the answer reaches Claude Code through the
PermissionRequest hook without a keypress, and a request nobody answers falls back to the
agent's own dialog."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from fleet._answer import open_requests
from fleet._core.events import Answered, Event, HookEvent
from fleet._core.fold import WorkerState

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .harness import (
    ClaudeSetup,
    Pane,
    Tmux,
    fleet_cli,
    hooks_of,
    install_hooks,
    journal,
    journal_file,
    register,
    wait_for_journal,
    wait_for_state,
)
from .script import bash, say

pytestmark = pytest.mark.e2e

DIALOG = "Do you want to proceed?"


def start_tui(claude: ClaudeSetup, repo: Repo, tmux: Tmux, command: str, *,
              answer_timeout: float = 120) -> Pane:
    install_hooks(claude)
    register("w1", repo.path, "claude")
    fleet_cli("trust", "--config-dir", str(claude.config_dir), "--path", str(repo.path))
    # 2.1.332 defaults to auto mode, which runs this without asking: the mode is explicit.
    return claude.interactive(tmux, cwd=repo.path, prompt="do it", trust=False,
                              permission_mode="default",
                              env={"FLEET_ANSWER_TIMEOUT": str(answer_timeout)})


def asking(state: WorkerState) -> bool:
    return state.state == "blocked" and state.permission_request is not None


def answers(events: list[Event]) -> list[Answered]:
    return [e for e in events if isinstance(e, Answered)]


def tool_result_text(anthropic: FakeAnthropic, step: int) -> str:
    """What the model was told about its tool call, in the request of ``step``."""
    request = anthropic.recorded("main")[step].json
    content: list[Any] = request["messages"][-1]["content"]
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert results, request["messages"][-1]
    return json.dumps(results[-1].get("content"))


def test_allow_from_the_coordinator_runs_the_tool_without_a_keypress(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux
) -> None:
    anthropic.script([bash("echo approved > out.txt"), say("Wrote out.txt.")])
    start_tui(claude, repo, tmux, "echo approved > out.txt")

    state = wait_for_state("w1", asking, timeout=60)
    assert (state.reason, state.permission_tool) == ("permission", "Bash")
    assert state.permission_command == "echo approved > out.txt"
    status = json.loads(fleet_cli("wait", "w1", "--json", "--timeout", "5").stdout)
    (row,) = status["attention"]
    assert row["mark"] == state.mark
    assert row["permission_request"] == state.permission_request
    assert row["next"].startswith("waiting for permission to use Bash (echo approved > out.txt)")

    done = json.loads(fleet_cli("answer", "w1", "allow", "--json").stdout)

    assert done["request"] == state.permission_request and done["decision"] == "allow"
    events = wait_for_journal("w1", lambda ev: "Stop" in hooks_of(ev), timeout=60)
    assert (repo.path / "out.txt").read_text() == "approved\n"
    (given,) = answers(events)
    assert (given.request, given.decision) == (state.permission_request, "allow")
    assert given.by.startswith("cli:")
    # A second answer to the same request is refused in one line, exit 4.
    again = fleet_cli("answer", "w1", "deny", "--request", state.permission_request,
                      check=False)
    assert again.returncode == 4
    assert again.stderr.count("\n") == 1 and "already answered" in again.stderr
    assert "no open permission request" in fleet_cli("answer", "w1", "allow",
                                                      check=False).stderr


def test_deny_from_the_coordinator_tells_the_model_the_reason(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux
) -> None:
    anthropic.script([bash("echo nope > out.txt"), say("Understood, not writing it.")])
    start_tui(claude, repo, tmux, "echo nope > out.txt")
    wait_for_state("w1", asking, timeout=60)

    out = fleet_cli("answer", "w1", "deny", "--reason", "use the fixture in tests/data")

    assert out.stdout.startswith("w1: denied Bash (echo nope > out.txt)")
    anthropic.wait_for_requests(2, timeout=60)
    assert "use the fixture in tests/data" in tool_result_text(anthropic, 1)
    assert not (repo.path / "out.txt").exists()
    (given,) = answers(journal("w1"))
    assert (given.decision, given.reason) == ("deny", "use the fixture in tests/data")


def test_no_answer_falls_back_to_the_dialog_and_a_keypress_still_answers(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux
) -> None:
    anthropic.script([bash("echo late > out.txt"), say("Wrote it.")])
    pane = start_tui(claude, repo, tmux, "echo late > out.txt", answer_timeout=3)
    state = wait_for_state("w1", asking, timeout=60)

    events = wait_for_journal("w1", lambda ev: bool(answers(ev)), timeout=30)

    (closed,) = answers(events)
    assert (closed.request, closed.decision, closed.by) == (
        state.permission_request, "dialog", "timeout")
    assert closed.reason == "no answer from the coordinator within 3 s"
    after = wait_for_state("w1", lambda s: s.permission_fallback == "dialog", timeout=5)
    assert (after.state, after.reason) == ("blocked", "permission")
    late = fleet_cli("answer", "w1", "allow", "--request", state.permission_request, check=False)
    assert late.returncode == 4 and "already answered" in late.stderr
    pane.wait_for(DIALOG, timeout=30)
    assert not (repo.path / "out.txt").exists()

    pane.send("Enter")  # "1. Yes" is selected

    wait_for_journal("w1", lambda ev: "Stop" in hooks_of(ev), timeout=60)
    assert (repo.path / "out.txt").read_text() == "late\n"


def test_always_answers_the_same_command_again_inside_the_hook(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux
) -> None:
    anthropic.script([bash("echo again >> out.txt"), bash("echo again >> out.txt"),
                      say("Twice.")])
    start_tui(claude, repo, tmux, "echo again >> out.txt")
    wait_for_state("w1", asking, timeout=60)

    out = fleet_cli("answer", "w1", "allow", "--always")

    assert "Bash(echo again >> out.txt) is now allowed for the rest of this session" in out.stdout
    events = wait_for_journal("w1", lambda ev: "Stop" in hooks_of(ev), timeout=60)
    assert (repo.path / "out.txt").read_text() == "again\nagain\n"
    first, second = answers(events)
    assert first.by.startswith("cli:") and first.always == "Bash(echo again >> out.txt)"
    assert (second.by, second.request, second.rule) == ("rule", None, first.always)
    # The rule answered inside the hook: one request reached the journal, not two.
    assert hooks_of(events).count("PermissionRequest") == 1


def test_the_request_is_journaled_redacted(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux
) -> None:
    secret = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
    command = f"curl -H 'x-api-key: {secret}' http://127.0.0.1:9/ > out.txt"
    anthropic.script([bash(command), say("Done.")])
    start_tui(claude, repo, tmux, command)

    state = wait_for_state("w1", asking, timeout=60)

    assert secret not in journal_file("w1").read_text()
    assert state.permission_command is not None and "[redacted]" in state.permission_command
    request = next(e for e in journal("w1")
                   if isinstance(e, HookEvent) and e.hook == "PermissionRequest")
    assert request.get("request") == state.permission_request
    fleet_cli("answer", "w1", "deny")
    wait_for_journal("w1", lambda ev: "Stop" in hooks_of(ev), timeout=60)


def test_a_keypress_in_the_dialog_answers_while_the_hook_still_waits(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux
) -> None:
    """The person at the terminal is never made to wait for the coordinator: the dialog is up
    while the hook waits, a keypress answers it, and the request closes."""
    anthropic.script([bash("echo by-hand > out.txt"), say("Wrote it.")])
    pane = start_tui(claude, repo, tmux, "echo by-hand > out.txt", answer_timeout=300)
    state = wait_for_state("w1", asking, timeout=60)
    pane.wait_for(DIALOG, timeout=30)

    pane.send("Enter")  # "1. Yes" is selected

    events = wait_for_journal("w1", lambda ev: "Stop" in hooks_of(ev), timeout=60)
    assert (repo.path / "out.txt").read_text() == "by-hand\n"
    events = wait_for_journal("w1", lambda ev: bool(answers(ev)), timeout=30)
    (closed,) = answers(events)
    assert (closed.request, closed.by, closed.decision) == (
        state.permission_request, "agent", "withdrawn")
    stale = fleet_cli("answer", "w1", "allow", "--request", state.permission_request,
                      check=False)
    assert stale.returncode == 4


def test_the_mcp_answer_tool_allows_and_denies(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux
) -> None:
    from tests.mcp._client import serving

    anthropic.script([bash("echo one > one.txt"), bash("echo two > two.txt"),
                      say("One written, two refused.")])
    start_tui(claude, repo, tmux, "echo one > one.txt")
    with serving(["--repo", str(repo.path)]) as mcp:
        first = wait_for_state("w1", asking, timeout=60)
        assert mcp.ok("answer", {"worker": "w1", "decision": "allow"})["request"] == (
            first.permission_request)
        second = wait_for_state(
            "w1", lambda s: asking(s) and s.permission_request != first.permission_request,
            timeout=60)
        assert second.permission_command == "echo two > two.txt"
        mcp.ok("answer", {"worker": "w1", "decision": "deny", "reason": "two is not needed"})

    events = wait_for_journal("w1", lambda ev: "Stop" in hooks_of(ev), timeout=60)
    assert (repo.path / "one.txt").read_text() == "one\n"
    assert not (repo.path / "two.txt").exists()
    assert "two is not needed" in tool_result_text(anthropic, 2)
    assert [(a.decision, a.by.split(":")[0]) for a in answers(events)] == [
        ("allow", "mcp"), ("deny", "mcp")]


#: Claude Code releases that run the PermissionRequest hook in ``-p`` (and wait for it).
ASKS_IN_PRINT_MODE = ("2.1.332",)


def coordinator(stop: threading.Event, decisions: list[str]) -> threading.Thread:
    """A coordinator script: answers each request of w1 with ``fleet answer`` as it opens."""
    home = Path(os.environ["FLEET_HOME"])

    def run() -> None:
        for decision in decisions:
            while not stop.is_set() and not open_requests(home, "w1"):
                stop.wait(0.02)
            if stop.is_set():
                return
            fleet_cli("answer", "w1", decision, "--reason", f"coordinator says {decision}")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_headless_worker_in_default_mode_is_answered_by_the_coordinator(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    install_hooks(claude)
    register("w1", repo.path, "claude")
    claude.trust(repo.path)
    anthropic.script([bash("echo one > one.txt"), bash("echo two > two.txt"),
                      say("Done.\nFLEET_WORKER_DONE: one written, two refused")])
    stop = threading.Event()
    thread = coordinator(stop, ["allow", "deny"])
    try:
        run = claude.headless("write the files", cwd=repo.path, permission_mode="default",
                              env={"FLEET_ANSWER_TIMEOUT": "60"})
    finally:
        stop.set()
        thread.join(timeout=30)

    assert run.returncode == 0, run.describe()
    events = journal("w1")
    if claude.agents.claude_version in ASKS_IN_PRINT_MODE:
        assert (repo.path / "one.txt").read_text() == "one\n"
        assert not (repo.path / "two.txt").exists()
        assert [(a.decision, a.by.split(":")[0]) for a in answers(events)] == [
            ("allow", "cli"), ("deny", "cli")]
        assert "coordinator says deny" in tool_result_text(anthropic, 2)
        assert [d["tool_input"]["command"] for d in run.result["permission_denials"]] == [
            "echo two > two.txt"]
    else:
        # This release asks no hook in -p: both calls are denied at once, nobody is asked.
        assert "PermissionRequest" not in hooks_of(events)
        assert answers(events) == []
        assert len(run.result["permission_denials"]) == 2


def test_a_headless_request_nobody_answers_is_denied_with_a_reason(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    install_hooks(claude)
    register("w1", repo.path, "claude")
    claude.trust(repo.path)
    anthropic.script([bash("echo x > x.txt"), say("Could not.\nFLEET_WORKER_BLOCKED: no answer")])

    run = claude.headless("write x", cwd=repo.path, permission_mode="default",
                          env={"FLEET_ANSWER_TIMEOUT": "1"})

    assert run.returncode == 0, run.describe()
    assert not (repo.path / "x.txt").exists()
    events = journal("w1")
    if claude.agents.claude_version in ASKS_IN_PRINT_MODE:
        (closed,) = answers(events)
        assert (closed.decision, closed.by) == ("deny", "timeout")
        assert "no answer from the coordinator within 1 s" in tool_result_text(anthropic, 1)
    else:
        assert "PermissionRequest" not in hooks_of(events) and answers(events) == []
