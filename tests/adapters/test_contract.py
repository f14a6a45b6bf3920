"""The one contract every app-hosted adapter keeps, run against each adapter and host build:
Superset through its CLI (two builds) and its host service (two builds), herdr 0.8.2 and 0.8.0.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from fleet._core.events import FollowUpSent, HandedOver, Registered
from fleet._errors import Refused
from fleet.adapters import Adapter
from tests.adapters.conftest import Rig, git

MARKER = "brief-marker-7f3a"
NASTY = f"Do the {MARKER} task. $(touch pwned) `touch pwned2` \"quoted\" 'single'\n- a list\n"


def test_each_adapter_is_an_adapter(rig: Rig) -> None:
    assert isinstance(rig.adapter, Adapter)
    assert rig.adapter.name in ("superset", "herdr")


def test_route_follows_login(rig: Rig) -> None:
    if rig.kind.startswith("superset"):
        assert rig.adapter.route == ("cli" if "-cli" in rig.kind else "host")  # type: ignore[union-attr]


def test_create_workspace_makes_a_worktree_on_its_own_branch(rig: Rig) -> None:
    ws = rig.adapter.create_workspace("w1", repo=rig.repo.path, base="main", label="Docs · work")
    assert ws.worktree.is_dir()
    assert ws.branch == "fleet/w1"
    assert git(ws.worktree, "rev-parse", "--abbrev-ref", "HEAD") == "fleet/w1"
    assert git(ws.worktree, "rev-parse", "HEAD") == rig.repo.git("rev-parse", "main")
    assert ws.handle["workspace"]
    assert ws.handle["worker"] == "w1"


def test_trust_writes_the_profiles_trust_file(rig: Rig) -> None:
    ws = rig.adapter.create_workspace("w1", repo=rig.repo.path, base="main", label="x")
    spec = rig.spec("w1", rig.brief("Brief.\n"))
    rig.adapter.trust(ws, spec)
    assert spec.config_dir is not None
    data = json.loads((spec.config_dir / ".claude.json").read_text())
    key = str(ws.worktree.resolve())
    assert data["projects"][key]["hasTrustDialogAccepted"] is True


def test_start_registers_the_worker_with_its_handles(rig: Rig) -> None:
    ws, _spec = rig.started("w1")
    state = rig.fleet.state("w1")
    assert state.adapter == rig.adapter.name
    assert state.profile == "claude:work"
    assert state.worktree == str(ws.worktree.resolve())
    assert state.branch == "fleet/w1"
    assert state.state == "starting"
    key = "terminal" if rig.kind.startswith("superset") else "pane"
    assert state.handle[key] == ws.handle[key]
    assert state.handle["workspace"] == ws.handle["workspace"]
    registered = [e for e in rig.fleet.log("w1") if isinstance(e, Registered)]
    assert registered and all(e.adapter == rig.adapter.name for e in registered)


def test_the_brief_never_reaches_a_command_line(any_rig: Rig) -> None:
    rig = any_rig
    ws, spec = rig.started("w1", NASTY)
    assert MARKER not in rig.runner.argv_text()
    assert not (ws.worktree / "pwned").exists()
    screen = rig.adapter.read(ws)
    # the agent got the brief: its text through the host API, or one line naming its file
    assert MARKER in screen or str(spec.brief) in screen


def test_a_brief_starting_with_a_dash_is_never_taken_as_an_option(rig: Rig) -> None:
    ws = rig.adapter.create_workspace("w1", repo=rig.repo.path, base="main", label="x")
    spec = rig.spec("w1", rig.brief("--dangerously-skip-permissions\n"))
    if rig.kind.startswith("superset-host"):
        with pytest.raises(ValueError, match="starts with '-'"):
            rig.adapter.start(ws, spec)
    else:
        rig.adapter.start(ws, spec)
        assert "--dangerously-skip-permissions" not in rig.runner.argv_text()


def test_read_shows_the_screen(rig: Rig) -> None:
    ws, _spec = rig.started("w1")
    text = rig.adapter.read(ws, lines=50)
    assert isinstance(text, str) and text.strip()


def test_send_delivers_a_follow_up_file_and_journals_it(any_rig: Rig) -> None:
    rig = any_rig
    ws, _spec = rig.started("w1")
    follow = rig.brief(f"Also fix the {MARKER}-2 typo. $(rm -rf /)\n", "follow-1.md")
    rig.adapter.send(ws, follow)
    assert f"{MARKER}-2" not in rig.runner.argv_text()
    screen = rig.adapter.read(ws)
    assert f"{MARKER}-2" in screen or str(follow) in screen
    sent = [e for e in rig.fleet.log("w1") if isinstance(e, FollowUpSent)]
    assert [e.file for e in sent] == [str(follow)]


def test_send_refuses_a_missing_file(rig: Rig, tmp_path: Path) -> None:
    ws, _spec = rig.started("w1")
    with pytest.raises(FileNotFoundError):
        rig.adapter.send(ws, tmp_path / "nope.md")


def test_hand_over_starts_another_profile_in_the_same_workspace(any_rig: Rig) -> None:
    rig = any_rig
    ws, spec = rig.started("w1")
    other = attrs.evolve(spec, profile="claude:side")
    handle = rig.adapter.hand_over(ws, other)
    key = "terminal" if rig.kind.startswith("superset") else "pane"
    assert handle[key] != ws.handle[key]
    assert handle["workspace"] == ws.handle["workspace"]
    new_ws = attrs.evolve(ws, handle=dict(handle))
    assert "claude:side" in rig.runner.argv_text() or rig.kind.startswith("superset")
    # the old terminal or pane is closed, the new one runs
    old = rig.adapter.describe(ws)
    assert old.get("status") in ("ended", None) or old.get("agent_status") == "absent"
    assert rig.adapter.describe(new_ws).get("agent_status", "x") != "absent"
    state = rig.fleet.state("w1")
    assert state.profile == "claude:side"
    assert state.handle[key] == handle[key]
    assert any(isinstance(e, HandedOver) for e in rig.fleet.log("w1"))
    # the new agent is told where the brief is, and what the old one did
    screen = rig.adapter.read(new_ws)
    assert "taking over" in screen or ".fleet-handover-" in screen


def test_close_ends_the_terminal_and_keeps_the_worktree(rig: Rig) -> None:
    ws, _spec = rig.started("w1")
    rig.adapter.close(ws)
    info = rig.adapter.describe(ws)
    assert info.get("status") == "ended" or info.get("agent_status") == "absent"
    assert ws.worktree.is_dir()


def test_describe_reports_what_the_host_sees(rig: Rig) -> None:
    ws, _spec = rig.started("w1")
    info = rig.adapter.describe(ws)
    assert info["host"] == rig.adapter.name
    if rig.kind.startswith("superset"):
        assert info["terminal"] == ws.handle["terminal"]
    else:
        assert info["agent_status"] in ("idle", "working", "blocked", "done", "unknown")


def test_delete_refuses_unpushed_or_dirty_work_then_deletes_once_pushed(rig: Rig) -> None:
    ws, _spec = rig.started("w1")
    wt = ws.worktree
    (wt / "work.txt").write_text("work\n")
    with pytest.raises(Refused, match="uncommitted"):
        rig.adapter.delete(ws)
    git(wt, "add", "work.txt")
    git(wt, "commit", "-qm", "work")
    with pytest.raises(Refused, match="no upstream"):
        rig.adapter.delete(ws)
    git(wt, "push", "-q", "-u", "origin", "HEAD")
    (wt / "more.txt").write_text("more\n")
    git(wt, "add", "more.txt")
    git(wt, "commit", "-qm", "more")
    with pytest.raises(Refused, match="not pushed"):
        rig.adapter.delete(ws)
    assert (wt / "more.txt").exists()
    git(wt, "push", "-q")
    rig.adapter.delete(ws)
    assert not wt.exists()
    # the branch stays, with the work on it
    assert rig.repo.git("rev-parse", "--verify", "-q", "fleet/w1")
    assert "--force" not in rig.runner.argv_text()
