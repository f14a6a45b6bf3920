"""Background work with the real Claude Code: a worker that claims DONE while a subagent still
runs is done when all of its work is, not gone or stopped when its main turn ends.

Claude Code 2.1.332 runs subagents in the background by default: the main turn's Stop fires
while the subagent works (``background_tasks`` lists it), and when it finishes Claude Code
injects a task notification as a new prompt, answered in a turn of its own. 2.1.197 runs the
subagent in the foreground. The same script runs on both: the worker spawns a subagent, claims
DONE, and (on the current release) answers the notification without a claim."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from fleet._core.events import Exited, HookEvent
from fleet._core.fold import fold
from fleet._core.machine import ATTENTION_STATES

from ..conftest import Repo
from .binaries import Agents, version_tuple
from .fake_anthropic import FakeAnthropic
from .harness import (
    ClaudeSetup,
    Tmux,
    fleet_argv,
    fleet_cli,
    hooks_of,
    install_hooks,
    journal,
    register,
    state_sequence,
    wait_for_journal,
)
from .script import bash, call, say

pytestmark = pytest.mark.e2e

CLAIM = "Main work done; the check runs in a subagent.\nFLEET_WORKER_DONE: parser fixed"
SUBAGENT_KEY = "subtask-5150"


def script_background_work(anthropic: FakeAnthropic, seconds: float = 3.0) -> None:
    anthropic.script([
        call("Agent", {"description": "slow check", "subagent_type": "general-purpose",
                       "prompt": f"{SUBAGENT_KEY}: run the slow check"}),
        say(CLAIM),
        say("The slow check finished too."),  # the answer to the task notification: no claim
    ])
    anthropic.script([bash(f"sleep {seconds}"), say("Slow check passed.")], key=SUBAGENT_KEY)


def runs_subagents_in_background(agents: Agents) -> bool:
    """What the pinned releases do; a newer one (``FLEET_E2E_AGENTS=latest``) is expected to
    behave like the current one."""
    return version_tuple(agents.claude_version) >= (2, 1, 332)


def background_stops(events: list) -> list[HookEvent]:  # type: ignore[type-arg]
    return [e for e in events if isinstance(e, HookEvent) and e.hook == "Stop"
            and (e.get("background_tasks") or 0) > 0]


def start_wait(*workers: str) -> subprocess.Popen[str]:
    """`fleet wait` as a coordinator runs it, started before the worker."""
    return subprocess.Popen([*fleet_argv(), "wait", *workers, "--timeout", "120", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def woke(wait: subprocess.Popen[str]) -> dict:  # type: ignore[type-arg]
    out, err = wait.communicate(timeout=150)
    assert wait.returncode == 0, (out, err)
    result: dict = json.loads(out)  # type: ignore[type-arg]
    return result


def assert_no_attention_before_the_claim(worker: str) -> None:
    states = state_sequence(worker, journal(worker))
    assert states[-1] == ("done", "claimed"), states
    assert not [s for s in states[:-1] if s[0] in ATTENTION_STATES], states


def test_headless_claim_survives_the_background_subagent(
    claude: ClaudeSetup, anthropic: FakeAnthropic, agents: Agents, repo: Repo
) -> None:
    install_hooks(claude)
    register("w1", repo.path, "claude")
    script_background_work(anthropic)
    wait = start_wait("w1")

    run = claude.headless("fix the parser", cwd=repo.path)

    assert run.returncode == 0, run.describe()
    woken = woke(wait)
    [attention] = woken["attention"]
    assert (attention["state"], attention["reason"]) == ("done", "claimed")
    events = journal("w1")
    final = fold("w1", events, now=time.time())
    assert final.mark == attention["mark"]  # woken once, for the end of all the work
    assert final.envelope is not None and final.envelope.text == "parser fixed"
    assert_no_attention_before_the_claim("w1")
    if runs_subagents_in_background(agents):
        [main_stop] = background_stops(events)
        assert main_stop.get("last_assistant_message") == CLAIM
        while_running = fold("w1", events[: events.index(main_stop) + 1], now=main_stop.ts)
        assert (while_running.state, while_running.background) == ("working", 1)
        prompts = [e for e in events if isinstance(e, HookEvent) and e.hook == "UserPromptSubmit"]
        assert [p.get("origin") for p in prompts] == [None, "task-notification"]
        assert run.result["result"] == "The slow check finished too."
        assert final.seq > events.index(main_stop)
    else:
        assert background_stops(events) == []


def test_the_headless_adapter_reads_the_claim_from_the_run_too(
    anthropic: FakeAnthropic, agents: Agents, repo: Repo, tmp_path: Path
) -> None:
    """A worker fleet starts: the supervisor's result (every turn, stream-json) carries the
    claim as a second source beside the hooks."""
    script_background_work(anthropic, seconds=2.0)
    brief = tmp_path / "brief.md"
    brief.write_text("Fix the parser.\n")
    env = {"PATH": agents.path_env(), "IS_SANDBOX": "1", "FLEET_TEST_KEY": "sk-fleet-e2e-bg",
           "HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    fleet_cli("start", "bg", "--task", str(brief), "--repo", str(repo.path), "--endpoint",
              anthropic.url, "--key-from", "env:FLEET_TEST_KEY", env=env)
    events = wait_for_journal("bg", lambda evs: any(isinstance(e, Exited) for e in evs),
                              timeout=120)
    [exited] = [e for e in events if isinstance(e, Exited)]
    assert exited.is_error is False, exited
    final = fold("bg", events, now=time.time())
    assert (final.state, final.reason) == ("done", "claimed")
    assert final.envelope is not None and final.envelope.text == "parser fixed"
    if runs_subagents_in_background(agents):
        assert exited.result == "The slow check finished too."
        assert exited.claim == CLAIM
    # the claim stands on the supervisor's result alone, as when no hook reached the journal
    without_hooks = [e for e in events if not isinstance(e, HookEvent)]
    alone = fold("bg", without_hooks, now=time.time())
    assert (alone.state, alone.reason) == ("done", "claimed")


def test_interactive_claim_survives_the_background_subagent(
    claude: ClaudeSetup, anthropic: FakeAnthropic, agents: Agents, repo: Repo, tmux: Tmux
) -> None:
    install_hooks(claude)
    register("w1", repo.path, "claude")
    script_background_work(anthropic)
    wait = start_wait("w1")

    pane = claude.interactive(tmux, cwd=repo.path, prompt="fix the parser",
                              permission_mode="bypassPermissions")

    woken = woke(wait)
    [attention] = woken["attention"]
    assert (attention["state"], attention["reason"]) == ("done", "claimed"), pane.screen()
    events = journal("w1")
    assert_no_attention_before_the_claim("w1")
    final = fold("w1", events, now=time.time())
    assert final.envelope is not None and final.envelope.text == "parser fixed"
    assert final.live is True  # the session is still open: the worker waits at its prompt
    if runs_subagents_in_background(agents):
        [main_stop] = background_stops(events)
        while_running = fold("w1", events[: events.index(main_stop) + 1], now=main_stop.ts)
        assert (while_running.state, while_running.background) == ("working", 1)
        assert hooks_of(events).count("Stop") == 2
