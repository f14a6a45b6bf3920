"""Codex with fleet's hooks (``fleet hooks install --codex-home``, which also writes the trust
entries Codex needs): exec runs, an interrupted run, and the TUI with no bypass flag."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from ..conftest import Repo
from .fake_openai import FakeOpenAI
from .harness import (
    CodexSetup,
    Tmux,
    fleet_cli,
    has_hook,
    hooks_of,
    install_hooks,
    journal,
    journal_file,
    register,
    state_sequence,
    wait_for_journal,
)
from .script import say, shell

pytestmark = pytest.mark.e2e

STARTED = [("starting", "registered"), ("starting", "session"), ("working", "active")]


def codex_worker(codex: CodexSetup, repo: Repo, worker: str = "c1") -> None:
    install_hooks(codex)
    register(worker, repo.path, "codex")


def test_exec_tool_call_then_stop(codex: CodexSetup, openai: FakeOpenAI, repo: Repo) -> None:
    codex_worker(codex, repo)
    openai.script([shell("echo codex-marker-4242 > made.txt"), say("Made the file.")])

    run = codex.exec("make a file", cwd=repo.path)

    assert run.returncode == 0, run.describe()
    assert (repo.path / "made.txt").read_text() == "codex-marker-4242\n"
    events = journal("c1")
    # No --dangerously-bypass-hook-trust: the hooks ran because fleet wrote their trust.
    assert hooks_of(events) == [
        "SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd",
    ]
    assert all(e.src == "codex" for e in events[1:])
    assert state_sequence("c1", events) == [
        *STARTED, ("stopped", "turn_end"), ("gone", "ended"),
    ]
    raw = journal_file("c1").read_text()
    assert "codex-marker-4242" not in raw and codex.api_key not in raw
    assert openai.api_keys() == [codex.api_key] * 2


def wait_for_path(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout:g}s")
        time.sleep(0.05)


def test_exec_interrupted_by_sigint(codex: CodexSetup, openai: FakeOpenAI, repo: Repo) -> None:
    codex_worker(codex, repo)
    openai.script([shell("touch started.flag && sleep 60"), say("never reached")])

    proc = codex.spawn_exec("wait a minute", cwd=repo.path)
    wait_for_path(repo.path / "started.flag", timeout=60)  # the tool is running
    proc.send_signal(signal.SIGINT)
    proc.wait(30)

    events = wait_for_journal("c1", has_hook("SessionEnd"), timeout=30)
    assert hooks_of(events) == [
        "SessionStart", "UserPromptSubmit", "Interrupt", "SessionEnd",
    ]
    # The session's end keeps the more telling state.
    assert state_sequence("c1", events) == [*STARTED, ("stopped", "interrupted")]
    assert len(openai.recorded("main")) == 1


def test_tui_runs_pre_trusted_hooks(
    codex: CodexSetup, openai: FakeOpenAI, repo: Repo, tmux: Tmux
) -> None:
    codex_worker(codex, repo)
    fleet_cli("trust", "--codex-home", str(codex.codex_home), "--path", str(repo.path))
    openai.script([shell("echo tui > tui.txt"), say("Wrote tui.txt.")])

    # No trust of our own and no bypass flag: fleet's entries must be enough.
    pane = codex.tui(tmux, cwd=repo.path, args=["--no-daemon"], trust=False)
    # The composer shows while Codex still loads; the model line below it means it is ready.
    screen = pane.wait_for(r"fake-model", timeout=60)
    assert "Hooks need review" not in screen and "Trust this folder" not in screen
    pane.type("write tui.txt")
    pane.wait_for("write tui.txt")
    pane.send("Enter")

    try:
        events = wait_for_journal("c1", has_hook("Stop"), timeout=60)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{pane.screen()}") from None
    assert (repo.path / "tui.txt").read_text() == "tui\n"
    assert hooks_of(events) == [
        "SessionStart", "UserPromptSubmit", "PostToolUse", "Stop",
    ]
    assert state_sequence("c1", events) == [*STARTED, ("stopped", "turn_end")]
