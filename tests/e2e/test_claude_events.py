"""Hook events and values that the current Claude Code added, on every tested release: each one
is journaled and either moves the state or deliberately does not (the fold's unit tests say
which for every captured payload; these show the real CLI sending them)."""

from __future__ import annotations

import time

import pytest

from fleet._core.events import HookEvent
from fleet._core.fold import fold

from ..conftest import Repo
from .binaries import Agents, version_tuple
from .fake_anthropic import FakeAnthropic
from .harness import (
    ClaudeSetup,
    Tmux,
    hooks_of,
    install_hooks,
    journal,
    register,
    state_sequence,
    wait_for_journal,
)
from .script import say

pytestmark = pytest.mark.e2e


def is_current(agents: Agents) -> bool:
    return version_tuple(agents.claude_version) >= (2, 1, 332)


def test_installed_hooks_suit_the_release_and_a_model_switch_moves_nothing(
    claude: ClaudeSetup, anthropic: FakeAnthropic, agents: Agents, repo: Repo, tmux: Tmux
) -> None:
    """`fleet hooks install` asked the release: 2.1.197 would stop at a warning dialog for the
    hook events it does not know, and gets none of them; 2.1.332 gets them, and its model
    switch is journaled, recorded, and moves no state."""
    install_hooks(claude)
    installed = set(claude.settings()["hooks"])
    assert ("PostModelSwitch" in installed) == is_current(agents)
    register("w1", repo.path, "claude")
    anthropic.script([say("Hello.")])

    pane = claude.interactive(tmux, cwd=repo.path, prompt="say hello",
                              permission_mode="bypassPermissions")

    wait_for_journal("w1", lambda ev: "Stop" in hooks_of(ev), timeout=60)
    assert "Unknown hook event" not in pane.screen()
    before = fold("w1", journal("w1"), now=time.time())
    assert (before.state, before.reason) == ("stopped", "turn_end")
    pane.type("/model claude-sonnet-4-5")
    time.sleep(0.3)
    pane.send("Enter")
    screen = pane.wait_for("(?i)set model to|switch model\\?", timeout=30)
    if "Switch model?" in screen:  # a cached conversation asks first (2.1.332)
        pane.send("Enter")
        pane.wait_for("(?i)set model to", timeout=30)
    if is_current(agents):
        events = wait_for_journal("w1", lambda ev: "PostModelSwitch" in hooks_of(ev),
                                  timeout=30)
        switch = next(e for e in events if isinstance(e, HookEvent)
                      and e.hook == "PostModelSwitch")
        assert switch.get("to_model") == "claude-sonnet-4-5"
        assert "PreModelSwitch" in hooks_of(events)
    after = fold("w1", journal("w1"), now=time.time())
    assert (after.state, after.reason, after.mark) == (before.state, before.reason, before.mark)
    if is_current(agents):
        assert after.model == "claude-sonnet-4-5"


def test_a_forked_session_starts_a_turn_like_any_other(
    claude: ClaudeSetup, anthropic: FakeAnthropic, agents: Agents, repo: Repo
) -> None:
    install_hooks(claude)
    register("w1", repo.path, "claude")
    anthropic.script([say("First."), say("Second.")])
    first = claude.headless("one", cwd=repo.path)
    assert first.returncode == 0, first.describe()

    second = claude.headless("two", cwd=repo.path,
                             args=["--resume", first.result["session_id"], "--fork-session"])

    assert second.returncode == 0, second.describe()
    events = journal("w1")
    sources = [e.get("source") for e in events if isinstance(e, HookEvent)
               and e.hook == "SessionStart"]
    assert sources == ["startup", "fork" if is_current(agents) else "resume"]
    fork_start = [e for e in events if isinstance(e, HookEvent) and e.hook == "SessionStart"][1]
    assert isinstance(fork_start.get("agent_pid"), int)
    assert state_sequence("w1", events)[-4:] == [
        ("starting", "session"), ("working", "active"), ("stopped", "turn_end"),
        ("gone", "ended"),
    ]
