"""The one contract every adapter keeps, run against each adapter and host build: Superset
through its CLI (two builds) and its host service (two builds), herdr 0.8.2 and 0.8.0, and
headless (``claude -p`` under its supervisor, through clausona).

The tests speak of what every adapter does: the handle names the worker and what its agent runs
in (a terminal, a pane, a supervised run); ``read`` shows what the agent printed; a follow-up is
journaled and delivered; ``close`` ends the agent and keeps the worktree; ``delete`` never loses
uncommitted work. A headless worker takes a follow-up, a hand-over or a delete only between
runs, so tests let the current turn end first (:meth:`Rig.until_idle`, a no-op for an app whose
agent waits at its prompt). What only an app has (its workspace ids, route, trust file, own push
guard) is checked with the ``rig`` fixture, which is the apps alone; ``every_rig`` adds
headless, ``any_rig`` the older app builds.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from fleet._core.events import FollowUpSent, HandedOver, Registered
from fleet._errors import FleetError, Refused, ToolError
from fleet._orchestrate import start_app_worker, workspace_label
from fleet.adapters import Adapter
from fleet.adapters._base import Workspace
from fleet.adapters.superset import SupersetAdapter
from tests.adapters.conftest import Rig, git

MARKER = "brief-marker-7f3a"
NASTY = f"Do the {MARKER} task. $(touch pwned) `touch pwned2` \"quoted\" 'single'\n- a list\n"


def test_each_adapter_is_an_adapter(every_rig: Rig) -> None:
    rig = every_rig
    assert isinstance(rig.adapter, Adapter)
    assert rig.adapter.name == rig.kind.split("-")[0]


@pytest.mark.parametrize("rig", ["superset-cli", "superset-host"], indirect=True)
def test_superset_route_follows_login(rig: Rig) -> None:
    assert isinstance(rig.adapter, SupersetAdapter)
    assert rig.adapter.route == rig.kind.removeprefix("superset-")


def test_create_workspace_makes_a_worktree_on_its_own_branch(every_rig: Rig) -> None:
    rig = every_rig
    ws = rig.adapter.create_workspace("w1", repo=rig.repo.path, base="main", label="Docs · work")
    assert ws.worktree.is_dir()
    assert ws.branch == "fleet/w1"
    assert git(ws.worktree, "rev-parse", "--abbrev-ref", "HEAD") == "fleet/w1"
    assert git(ws.worktree, "rev-parse", "HEAD") == rig.repo.git("rev-parse", "main")
    # the handle identifies the worker, whatever else the host adds to it
    assert ws.handle["worker"] == "w1"


def test_an_app_workspace_carries_the_apps_workspace_id(rig: Rig) -> None:
    ws = rig.adapter.create_workspace("w1", repo=rig.repo.path, base="main", label="Docs · work")
    assert ws.handle["workspace"]


def test_trust_writes_the_profiles_trust_file(rig: Rig) -> None:
    """An app runs the agent interactively, which asks about the folder unless its profile's
    trust file answers first. (Headless ``-p``/``exec`` runs never ask.)"""
    ws = rig.adapter.create_workspace("w1", repo=rig.repo.path, base="main", label="x")
    spec = rig.spec("w1", rig.brief("Brief.\n"))
    rig.adapter.trust(ws, spec)
    assert spec.config_dir is not None
    data = json.loads((spec.config_dir / ".claude.json").read_text())
    key = str(ws.worktree.resolve())
    assert data["projects"][key]["hasTrustDialogAccepted"] is True


def test_start_registers_the_worker_with_its_handles(every_rig: Rig) -> None:
    rig = every_rig
    ws, _spec = rig.started("w1")
    state = rig.fleet.state("w1")
    assert state.adapter == rig.adapter.name
    assert state.profile == "claude:work"
    assert state.worktree == str(ws.worktree.resolve())
    assert state.branch == "fleet/w1"
    assert state.state == "starting"
    # fleet holds the handles start returned: the worker's and what its agent runs in
    assert dict(state.handle) == dict(ws.handle)
    assert state.handle["worker"] == "w1"
    assert state.handle[rig.runs_in]
    registered = [e for e in rig.fleet.log("w1") if isinstance(e, Registered)]
    assert registered and all(e.adapter == rig.adapter.name for e in registered)


def test_the_brief_never_reaches_a_command_line(any_rig: Rig) -> None:
    """No command fleet runs carries the brief's text, and no shell ever reads it. (Headless
    execs the agent with the text as its one prompt argument, never through a shell.)"""
    rig = any_rig
    ws, spec = rig.started("w1", NASTY)
    rig.until_idle(ws)
    assert MARKER not in rig.runner.argv_text()
    launched = rig.agent_argvs()
    assert launched
    assert all(MARKER not in arg or arg == NASTY for argv in launched for arg in argv)
    assert not (ws.worktree / "pwned").exists()
    assert not (ws.worktree / "pwned2").exists()
    screen = rig.adapter.read(ws)
    # the agent got the brief: its text, or one line naming its file
    assert MARKER in screen or str(spec.brief) in screen


def test_a_brief_starting_with_a_dash_is_never_taken_as_an_option(every_rig: Rig) -> None:
    rig = every_rig
    ws = rig.adapter.create_workspace("w1", repo=rig.repo.path, base="main", label="x")
    spec = rig.spec("w1", rig.brief("--dangerously-skip-permissions\n"))
    if rig.kind.startswith("superset-host"):
        # the host service carries the text itself, and refuses it rather than guess
        with pytest.raises(ValueError, match="starts with '-'"):
            rig.adapter.start(ws, spec)
        return
    handle = rig.adapter.start(ws, spec)
    rig.until_idle(attrs.evolve(ws, handle=dict(handle)))
    assert "--dangerously-skip-permissions" not in rig.runner.argv_text()
    launched = rig.agent_argvs()
    assert launched
    assert not any(arg.startswith("--dangerously") for argv in launched for arg in argv)


def test_read_shows_the_agents_output(every_rig: Rig) -> None:
    rig = every_rig
    ws, _spec = rig.started("w1")
    rig.until_idle(ws)
    text = rig.adapter.read(ws, lines=50)
    assert isinstance(text, str) and text.strip()


def test_send_delivers_a_follow_up_file_and_journals_it(any_rig: Rig) -> None:
    rig = any_rig
    ws, _spec = rig.started("w1")
    rig.until_idle(ws)
    follow = rig.brief(f"Also fix the {MARKER}-2 typo. $(rm -rf /)\n", "follow-1.md")
    rig.adapter.send(ws, follow)
    rig.until_idle(ws)
    assert f"{MARKER}-2" not in rig.runner.argv_text()
    screen = rig.adapter.read(ws)
    assert f"{MARKER}-2" in screen or str(follow) in screen
    sent = [e for e in rig.fleet.log("w1") if isinstance(e, FollowUpSent)]
    assert [e.file for e in sent] == [str(follow)]
    # The receipt: sent, and taken only once the agent's own prompt hook says so (these fakes
    # run no agent hooks; tests/e2e/test_receipts.py shows the real agents taking it).
    assert rig.fleet.state("w1").delivery == "sent"


def test_send_refuses_a_missing_file(every_rig: Rig, tmp_path: Path) -> None:
    rig = every_rig
    ws, _spec = rig.started("w1")
    rig.until_idle(ws)
    with pytest.raises(FileNotFoundError):
        rig.adapter.send(ws, tmp_path / "nope.md")
    assert not [e for e in rig.fleet.log("w1") if isinstance(e, FollowUpSent)]


def test_hand_over_starts_another_profile_in_the_same_workspace(any_rig: Rig) -> None:
    rig = any_rig
    ws, spec = rig.started("w1")
    rig.until_idle(ws)
    other = attrs.evolve(spec, profile="claude:side")
    handle = rig.adapter.hand_over(ws, other)
    key = rig.runs_in
    assert handle[key] != ws.handle[key]
    assert handle["worker"] == "w1"
    assert handle.get("workspace") == ws.handle.get("workspace")
    new_ws = attrs.evolve(ws, handle=dict(handle))
    # the old terminal, pane or run is over, the new one runs
    assert not rig.alive(ws)
    assert rig.alive(new_ws)
    state = rig.fleet.state("w1")
    assert state.profile == "claude:side"
    assert state.worktree == str(ws.worktree.resolve())
    assert state.handle[key] == handle[key]
    assert state.handle["worker"] == "w1"
    assert any(isinstance(e, HandedOver) for e in rig.fleet.log("w1"))
    assert state.delivery == "sent"
    # the new agent is given the task: a hand-over note (naming the brief and what the old
    # agent did), or the brief itself
    rig.until_idle(new_ws)
    screen = rig.adapter.read(new_ws)
    assert "taking over" in screen or ".fleet-handover-" in screen or "Write the docs." in screen
    launched = " ".join(" ".join(argv) for argv in rig.agent_argvs())
    # Superset picks the profile's agent config by id, so no argv names the profile there
    assert "claude:side" in launched or rig.kind.startswith("superset")


def test_close_ends_the_agent_and_keeps_the_worktree(every_rig: Rig) -> None:
    rig = every_rig
    ws, _spec = rig.started("w1")
    assert rig.alive(ws)
    rig.adapter.close(ws)
    assert not rig.alive(ws)
    assert ws.worktree.is_dir()


def test_describe_reports_what_the_host_sees(every_rig: Rig) -> None:
    rig = every_rig
    ws, _spec = rig.started("w1")
    info = rig.adapter.describe(ws)
    assert info["host"] == rig.adapter.name
    assert rig.alive(ws)


def test_describe_names_the_apps_terminal_or_agent(rig: Rig) -> None:
    ws, _spec = rig.started("w1")
    info = rig.adapter.describe(ws)
    if rig.adapter.name == "superset":
        assert info["terminal"] == ws.handle["terminal"]
    else:
        assert info["agent_status"] in ("idle", "working", "blocked", "done", "unknown")


def test_delete_never_loses_uncommitted_work_and_keeps_the_branch(every_rig: Rig) -> None:
    rig = every_rig
    ws, _spec = rig.started("w1")
    rig.until_idle(ws)
    wt = ws.worktree
    (wt / "work.txt").write_text("work\n")
    with pytest.raises(FleetError, match=r"uncommitted|untracked"):
        rig.adapter.delete(ws)
    assert (wt / "work.txt").read_text() == "work\n"
    git(wt, "add", "work.txt")
    git(wt, "commit", "-qm", "work")
    git(wt, "push", "-q", "-u", "origin", "HEAD")
    rig.adapter.delete(ws)
    assert not wt.exists()
    # the branch stays, with the work on it
    assert rig.repo.git("rev-parse", "--verify", "-q", "fleet/w1")
    assert rig.repo.git("show", "fleet/w1:work.txt") == "work"
    assert "--force" not in rig.runner.argv_text()


@pytest.mark.parametrize("flag", ["--skip-worktree", "--assume-unchanged"])
def test_delete_never_loses_an_edit_git_status_does_not_show(every_rig: Rig, flag: str) -> None:
    """An index flag hides an edit from `git status` (and so from `git worktree remove` and an
    app's own dirty check); every adapter hashes the files itself before its delete."""
    rig = every_rig
    ws, _spec = rig.started("w1")
    rig.until_idle(ws)
    wt = ws.worktree
    (wt / "work.txt").write_text("work\n")
    git(wt, "add", "work.txt")
    git(wt, "commit", "-qm", "work")
    git(wt, "push", "-q", "-u", "origin", "HEAD")
    git(wt, "update-index", flag, "work.txt")
    (wt / "work.txt").write_text("edited\n")
    with pytest.raises(FleetError, match=r"modified file work\.txt"):
        rig.adapter.delete(ws)
    assert (wt / "work.txt").read_text() == "edited\n"
    (wt / "work.txt").write_text("work\n")
    rig.adapter.delete(ws)
    assert not wt.exists()


def test_an_app_delete_also_refuses_unpushed_work(rig: Rig) -> None:
    """An app's own delete is forceful (Superset) or checks only for a dirty worktree (herdr),
    so its adapter checks the push itself right before. (Headless leaves that to fleet's
    retire guards: `git worktree remove` already refuses what is uncommitted.)"""
    ws, _spec = rig.started("w1")
    wt = ws.worktree
    (wt / "work.txt").write_text("work\n")
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
    assert "--force" not in rig.runner.argv_text()


# -- start through the orchestration: the same path for every adapter -----------------------


def orchestrated(rig: Rig, worker: str = "w1", text: str = "Write the docs.\n") -> Workspace:
    """Start ``worker`` the way `fleet start --adapter` does: fleet._orchestrate decides, the
    adapter acts."""
    spec = rig.spec(worker, rig.brief(text, f"{worker}.md"))
    state = start_app_worker(
        rig.adapter, worker, task=spec.brief, repo=rig.repo.path, profile=spec.profile,
        model=spec.model, permission_mode=spec.permission_mode, config_dir=spec.config_dir,
        base="main", journal=rig.fleet.journal, runner=rig.runner,
    )
    assert state.worktree is not None
    return Workspace(worktree=Path(state.worktree), branch=state.branch or "",
                     base=state.base, handle=dict(state.handle))


def test_every_adapter_starts_through_the_orchestration(every_rig: Rig) -> None:
    rig = every_rig
    ws = orchestrated(rig)
    state = rig.fleet.state("w1")
    assert state.adapter == rig.adapter.name
    assert state.profile == "claude:work"
    assert state.branch == "fleet/w1"
    assert state.task == "Write the docs."
    assert state.handle["worker"] == "w1" and state.handle[rig.runs_in]
    assert git(ws.worktree, "rev-parse", "--abbrev-ref", "HEAD") == "fleet/w1"
    assert rig.alive(attrs.evolve(ws, handle=dict(state.handle)))
    registered = [e for e in rig.fleet.log("w1") if isinstance(e, Registered)]
    assert registered and all(e.adapter == rig.adapter.name for e in registered)
    rig.until_idle(ws)


def test_an_orchestrated_app_start_trusts_the_worktree_for_the_profile(rig: Rig) -> None:
    ws = orchestrated(rig)
    data = json.loads((rig.tmp / "config-claude-work" / ".claude.json").read_text())
    assert data["projects"][str(ws.worktree.resolve())]["hasTrustDialogAccepted"] is True


def test_a_failed_start_leaves_no_half_made_workspace(every_rig: Rig) -> None:
    """Whatever fails after the workspace was made (here the start itself), the workspace,
    its worktree, its branch and the worker's journal are taken back."""
    rig = every_rig
    made: list[Path] = []
    create = rig.adapter.create_workspace

    def remembered(worker: str, **kw: object) -> Workspace:
        ws = create(worker, **kw)  # type: ignore[arg-type]
        made.append(ws.worktree)
        return ws

    def broken(workspace: Workspace, spec: object) -> None:
        raise ToolError("the host fell over")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rig.adapter, "create_workspace", remembered)
        patch.setattr(rig.adapter, "start", broken)
        with pytest.raises(ToolError, match="the host fell over"):
            orchestrated(rig)
    (worktree,) = made
    assert not worktree.exists()
    assert not rig.repo.git("branch", "--list", "fleet/w1")
    assert "w1" not in rig.fleet.workers()
    if rig.host is not None:
        assert rig.host.workspaces == {}
    # and the same worker id starts cleanly afterwards
    ws = orchestrated(rig)
    rig.until_idle(ws)


def test_a_failed_start_keeps_a_worktree_that_holds_changes(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(workspace: Workspace, spec: object) -> None:
        (workspace.worktree / "half.txt").write_text("the agent began\n")
        raise ToolError("the host fell over")

    monkeypatch.setattr(rig.adapter, "start", broken)
    with pytest.raises(ToolError, match=r"kept the workspace at .*: it holds changes"):
        orchestrated(rig)
    assert rig.repo.git("branch", "--list", "fleet/w1")


def test_the_workspace_name_carries_the_task_and_the_profile(rig: Rig) -> None:
    label = workspace_label(rig.adapter.name, "a-long-task-name-for-sure", "work (sonnet)")
    if rig.adapter.name == "superset":
        assert len(label) < 26 and label.endswith(" · work (sonnet)")
    else:
        assert label == "a-long-task-name-for-sure · work (sonnet)"
