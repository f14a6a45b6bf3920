"""A worker that waits for a person reads blocked, with its reason, within seconds, in every
permission mode of the real Claude Code: a permission dialog, auto mode's "can't check actions"
screen and the approval dialog behind it, a question (AskUserQuestion) and an MCP elicitation.

Some of these fire no hook, or fire one only seconds later (auto mode's screen: a Notification
after about 6 s). The second source is Claude Code's own per-session status file, which fleet's
session monitor journals as ``agent_status`` events; the fold decides. Nothing here reads the
screen to decide a state: the tests read it only to know when the person would have seen it."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

from fleet._core.events import AgentStatus, HookEvent
from fleet._core.fold import WorkerState

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .harness import (
    ClaudeSetup,
    Pane,
    Tmux,
    hooks_of,
    install_hooks,
    journal,
    register,
    state_sequence,
    wait_for_journal,
    wait_for_state,
    watch_screen_and_state,
)
from .script import bash, call, say

pytestmark = pytest.mark.e2e

#: What "within seconds" means here: from the screen showing the wait to the state saying so.
PROMPTLY = 3.0
#: A command auto mode will not run unchecked behind a custom ANTHROPIC_BASE_URL: it deletes
#: outside the working folder.
RISKY = "rm -rf {outside} && echo approved > out.txt"
DIALOG = r"Do you want to proceed\?"
AUTO_SCREEN = r"Auto mode can't check actions"


def blocked(reason: str):  # type: ignore[no-untyped-def]
    def check(state: WorkerState) -> bool:
        return state.state == "blocked" and state.reason == reason
    return check


def press_until(pane: Pane, key: str, screen: str, *, gone: bool = False,
                tries: int = 5) -> None:
    """Press ``key`` until the screen shows ``screen`` (or, with ``gone``, no longer does): a
    dialog drawn a moment ago may not take keys yet."""
    rx = re.compile(screen)
    for _ in range(tries):
        time.sleep(0.5)
        pane.send(key)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            if bool(rx.search(pane.screen())) != gone:
                return
            time.sleep(0.05)
    raise AssertionError(f"{key} never {'closed' if gone else 'brought up'} {screen!r}:\n"
                         f"{pane.screen()}")


def worker(claude: ClaudeSetup, repo: Repo) -> None:
    install_hooks(claude)
    register("w1", repo.path, "claude")


def statuses() -> list[AgentStatus]:
    return [e for e in journal("w1") if isinstance(e, AgentStatus)]


def test_a_worker_started_in_the_releases_default_mode_blocks_on_a_risky_command(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux, tmp_path: Path
) -> None:
    """No --permission-mode: 2.1.197 asks in its permission dialog; 2.1.332 runs in auto mode,
    whose safety check cannot run behind a custom endpoint, so it shows its own screen and then
    an approval dialog. Either way the worker waits for a person and reads blocked at once."""
    worker(claude, repo)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    anthropic.script([bash(RISKY.format(outside=outside)), say("Wrote out.txt.")])

    pane = claude.interactive(tmux, cwd=repo.path, prompt="write out.txt")

    first = watch_screen_and_state(pane, "w1", f"{AUTO_SCREEN}|{DIALOG}", blocked("permission"))
    assert first.lag <= PROMPTLY, f"blocked {first.lag:.2f}s after the screen"
    mark = first.state.mark
    if AUTO_SCREEN in pane.screen():
        assert first.state.waiting_for == "dialog open"
        assert first.state.permission_mode == "auto"
        press_until(pane, "Enter", DIALOG)  # "stay in auto mode": the approval dialog next
        dialog = watch_screen_and_state(pane, "w1", DIALOG, blocked("permission"))
        assert dialog.state.mark == mark  # the same wait, not a second wake
        # Its default answer is "No": the tool does not run, and no hook says so.
        press_until(pane, "Enter", DIALOG, gone=True)
    else:
        # 2.1.197's dialog: cancel, which fires no hook either
        press_until(pane, "Escape", DIALOG, gone=True)
    state = wait_for_state("w1", lambda s: s.state != "blocked", timeout=30)
    assert (state.state, state.reason) == ("stopped", "interrupted"), hooks_of(journal("w1"))
    assert not (repo.path / "out.txt").exists() and outside.exists()
    assert [s.status for s in statuses()][-1] == "idle"


def test_the_permission_dialog_in_default_mode_blocks_at_once_and_yes_resumes(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux
) -> None:
    worker(claude, repo)
    anthropic.script([bash("echo approved > out.txt"), say("Wrote out.txt.")])

    pane = claude.interactive(tmux, cwd=repo.path, prompt="write out.txt",
                              permission_mode="default")

    seen = watch_screen_and_state(pane, "w1", DIALOG, blocked("permission"))
    assert seen.lag <= PROMPTLY
    assert seen.state.permission_tool == "Bash"
    pane.send("Enter")  # "1. Yes"
    events = wait_for_journal("w1", lambda ev: "Stop" in hooks_of(ev), timeout=60)
    assert (repo.path / "out.txt").read_text() == "approved\n"
    assert state_sequence("w1", events)[-3:] == [
        ("blocked", "permission"), ("working", "active"), ("stopped", "turn_end"),
    ]


QUESTION = {"questions": [{
    "question": "Which color should the banner be?", "header": "Color", "multiSelect": False,
    "options": [{"label": "Red", "description": "warm"},
                {"label": "Blue", "description": "cool"}],
}]}


@pytest.mark.parametrize("mode", [None, "bypassPermissions"])
def test_a_question_blocks_as_a_question(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux, mode: str | None
) -> None:
    worker(claude, repo)
    anthropic.script([call("AskUserQuestion", QUESTION), say("Red it is.")])

    pane = claude.interactive(tmux, cwd=repo.path, prompt="pick a color", permission_mode=mode)

    seen = watch_screen_and_state(pane, "w1", "Which color should the banner be",
                                  blocked("question"))
    assert seen.lag <= PROMPTLY
    pane.send("Enter")  # "1. Red"
    events = wait_for_journal("w1", lambda ev: "Stop" in hooks_of(ev), timeout=60)
    assert state_sequence("w1", events)[-3:] == [
        ("blocked", "question"), ("working", "active"), ("stopped", "turn_end"),
    ]
    # one wait, one mark: the permission_prompt Notification a few seconds in changes nothing
    assert sum(1 for s, _ in state_sequence("w1", journal("w1")) if s == "blocked") == 1


def test_an_mcp_elicitation_blocks_as_a_question(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux, tmp_path: Path
) -> None:
    worker(claude, repo)
    server = Path(__file__).with_name("elicit_server.py")
    config = tmp_path / "mcp.json"
    log = tmp_path / "asker.log"
    config.write_text(json.dumps({"mcpServers": {"asker": {
        "command": sys.executable, "args": [str(server)], "env": {"ASKER_LOG": str(log)}}}}))
    # Claude Code registers a server's tools a moment after listing them: the tool is called
    # in the second request, a second after the first.
    anthropic.script([bash("sleep 1"), call("mcp__asker__ask_name", {}), say("Thanks.")])

    pane = claude.interactive(
        tmux, cwd=repo.path, permission_mode="bypassPermissions",
        args=["--strict-mcp-config", "--mcp-config", str(config)],
    )
    deadline = time.monotonic() + 60
    while not (log.exists() and "tools/list" in log.read_text()):
        assert time.monotonic() < deadline, f"the MCP server was never listed:\n{pane.screen()}"
        time.sleep(0.05)
    pane.type("ask me for a name")
    pane.send("Enter")

    seen = watch_screen_and_state(pane, "w1", "What name should the report use",
                                  blocked("question"), timeout=90)
    assert seen.lag <= PROMPTLY
    pane.send("Escape")  # decline: the tool gets no answer and the turn goes on
    state = wait_for_state("w1", lambda s: s.state != "blocked", timeout=60)
    assert state.state in ("working", "stopped"), state


def test_the_session_monitor_follows_the_agent_and_ends_with_it(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmux: Tmux
) -> None:
    worker(claude, repo)
    anthropic.script([say("Hello.")])

    pane = claude.interactive(tmux, cwd=repo.path, prompt="say hello",
                              permission_mode="bypassPermissions")

    wait_for_journal("w1", lambda ev: any(isinstance(e, AgentStatus) and e.status == "idle"
                                          for e in ev), timeout=60)
    start = next(e for e in journal("w1") if isinstance(e, HookEvent)
                 and e.hook == "SessionStart")
    agent_pid = start.get("agent_pid")
    assert isinstance(agent_pid, int) and Path(f"/proc/{agent_pid}").exists()
    lock = Path(journal_dir("w1")) / f"monitor-{agent_pid}.lock"
    assert lock.exists()
    assert {s.pid for s in statuses()} == {agent_pid}
    pane.type("/exit")
    pane.send("Enter")
    deadline = time.monotonic() + 30
    while lock.exists():
        assert time.monotonic() < deadline, "the monitor outlived its agent"
        time.sleep(0.05)
    assert "SessionEnd" in hooks_of(journal("w1"))


def journal_dir(worker_id: str) -> Path:
    import os

    return Path(os.environ["FLEET_HOME"]) / "workers" / worker_id
