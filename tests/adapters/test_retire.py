"""fleet's retire, end to end through each app's adapter: the retire module finds the adapter
by the worker's registration (``get_deleter``), runs its guards, and the adapter's own guard
runs again right before the app's delete."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet._core.events import Exited, HookEvent
from fleet._occupants import occupants
from fleet._retire import Retirer
from fleet.adapters.headless import HeadlessAdapter
from tests.adapters.conftest import FAKES, Rig, git, make_rig
from tests.conftest import Repo


@pytest.fixture(autouse=True)
def _fakes_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The retire module builds adapters by name: `superset` and `herdr` come from PATH."""
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")


def claim_done(rig: Rig, worker: str) -> None:
    rig.fleet.record(worker, HookEvent(ts=rig.fleet.clock.now(), src="claude", hook="Stop",
                                       data={"last_assistant_message":
                                             "Added it.\nFLEET_WORKER_DONE: added notes.txt"}))


def test_retire_deletes_a_checked_pushed_worker_through_its_adapter(rig: Rig) -> None:
    ws, _ = rig.started("w1")
    (ws.worktree / "notes.txt").write_text("notes\n")
    git(ws.worktree, "add", "notes.txt")
    git(ws.worktree, "commit", "-qm", "notes")
    claim_done(rig, "w1")
    retirer = Retirer(rig.fleet)
    refused = retirer.retire_worker("w1")
    assert not refused.retired and ws.worktree.is_dir()
    assert rig.fleet.state("w1").reason == "failed"
    # a follow-up: the worker pushes and claims done again
    rig.fleet.record("w1", HookEvent(ts=rig.fleet.clock.now(), src="claude",
                                     hook="UserPromptSubmit", data={}))
    git(ws.worktree, "push", "-q", "-u", "origin", "HEAD")
    claim_done(rig, "w1")
    outcome = retirer.retire_worker("w1")
    assert outcome.retired, outcome
    assert not ws.worktree.exists()
    assert rig.fleet.state("w1").state == "retired"
    if rig.host is not None:
        assert any(p == "workspace.delete" for p, _ in rig.host.calls)
    else:
        assert ["worktree", "remove", "--workspace", ws.handle["workspace"]] in (
            rig.herdr_state()["calls"])


@pytest.mark.parametrize("every_rig", ["headless"], indirect=True)
def test_retire_stops_a_headless_agent_still_running_in_the_worktree(every_rig: Rig) -> None:
    """The run claimed done but its process still runs there: retire stops it through the
    adapter (its supervisor ends the agent and journals it), then deletes."""
    rig = every_rig
    ws, _ = rig.started("w1")
    assert rig.agent is not None
    rig.agent.wait_running(1, timeout=60)
    (ws.worktree / "notes.txt").write_text("notes\n")
    git(ws.worktree, "add", "notes.txt")
    git(ws.worktree, "commit", "-qm", "notes")
    git(ws.worktree, "push", "-q", "-u", "origin", "HEAD")
    claim_done(rig, "w1")
    assert occupants(ws.worktree)  # the agent runs in its worktree
    outcome = Retirer(rig.fleet).retire_worker("w1")
    assert outcome.retired, outcome.reason
    assert not ws.worktree.exists()
    assert isinstance(rig.adapter, HeadlessAdapter)
    assert not rig.adapter.supervisor_alive("w1")
    assert any(isinstance(e, Exited) for e in rig.fleet.log("w1"))


@pytest.fixture
def herdr_rig(tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    """herdr whose agents are real processes in their worktrees (scenario `occupy`), each
    ended when the test ends whatever happened."""
    state = tmp_path / "herdr" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"scenario": {"occupy": 1}}))
    try:
        yield from make_rig("herdr", tmp_path, repo, monkeypatch)
    finally:
        if state.exists():
            for agent in json.loads(state.read_text())["agents"].values():
                with contextlib.suppress(OSError):
                    os.killpg(agent["occupant"], signal.SIGKILL)


def test_retire_on_herdr_removes_the_worktree_after_closing_the_last_pane(
    herdr_rig: Rig,
) -> None:
    """The agent runs in its worktree, so retire closes its pane first; herdr closes the
    workspace with its last pane, and the checkout is still removed, never forced."""
    rig = herdr_rig
    ws, _ = rig.started("w1")
    (ws.worktree / "notes.txt").write_text("notes\n")
    git(ws.worktree, "add", "notes.txt")
    git(ws.worktree, "commit", "-qm", "notes")
    git(ws.worktree, "push", "-q", "-u", "origin", "HEAD")
    claim_done(rig, "w1")
    assert occupants(ws.worktree)  # the agent's process
    outcome = Retirer(rig.fleet).retire_worker("w1")
    assert outcome.retired, outcome.reason
    assert not ws.worktree.exists()
    calls = rig.herdr_state()["calls"]
    assert ["pane", "close", ws.handle["pane"]] in calls
    assert ["worktree", "remove", "--workspace", ws.handle["workspace"]] in calls
    assert not any("--force" in c for c in rig.runner.calls)
    assert rig.herdr_state()["workspaces"] == {}
