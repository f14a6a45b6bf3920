"""One real worker per app-hosted adapter: the fake app (the Superset host service behind the
fake `superset` CLI, or the fake `herdr`) launches the real Claude Code CLI through the fake
`clausona run <profile> -- ...` in the worker's worktree; fleet's hooks, installed with
`fleet hooks install --config-dir`, drive the worker to done; the adapter's guarded delete
refuses while the branch is unpushed and succeeds once it is pushed."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from fleet._errors import Refused
from fleet._fleet import Fleet
from fleet._runner import Completed, SubprocessRunner
from fleet.adapters._base import LaunchSpec, Workspace
from fleet.adapters.herdr import HerdrAdapter, _trust_prompt, choose_trust
from fleet.adapters.superset import SupersetAdapter, workspace_name
from tests.adapters.superset_fake import FakeSupersetHost

from ..conftest import Repo
from .binaries import Agents
from .fake_anthropic import FakeAnthropic
from .harness import ClaudeSetup, Tmux, install_hooks
from .script import bash, say

pytestmark = pytest.mark.e2e

FAKES = Path(__file__).resolve().parents[1] / "fakes"
CLAUSONA = str(FAKES / "clausona")
WORKER = "e2e-w1"
DONE = "FLEET_WORKER_DONE: added hello.txt"


class EnvRunner(SubprocessRunner):
    """The real runner with the agent's environment added (model endpoint, PATH to node)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float | None = 60.0,
    ) -> Completed:
        merged = {**os.environ, **self.env, **(env or {})}
        return super().run(argv, cwd=cwd, env=merged, input=input, timeout=timeout)


def clausona_state(tmp: Path, claude: ClaudeSetup, agents: Agents) -> Path:
    path = tmp / "clausona.json"
    usage = {"cost": 0, "inputTokens": 0, "outputTokens": 0}
    path.write_text(json.dumps({
        "profiles": [{
            "name": "claude:work", "tool": "claude", "email": "w@example.invalid",
            "configDir": str(claude.config_dir), "isPrimary": False, "isActive": False,
            "today": usage, "week": usage, "month": usage, "total": usage,
        }],
        "binaries": {"claude": str(agents.claude)},
    }))
    return path


def prepare(claude: ClaudeSetup, anthropic: FakeAnthropic, tmp: Path) -> Path:
    install_hooks(claude)
    anthropic.script([
        bash("echo hello > hello.txt && git add hello.txt && git commit -qm 'add hello'"),
        say(f"Committed hello.txt.\n{DONE}"),
    ])
    brief = tmp / "brief.md"
    brief.write_text("Add hello.txt containing 'hello' and commit it.\n")
    return brief


def wait_done(fleet: Fleet, worker: str, timeout: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout
    state = fleet.state(worker)
    while time.monotonic() < deadline:
        state = fleet.state(worker)
        if state.state in ("done", "gone", "blocked", "stopped"):
            return state
        time.sleep(0.5)
    raise AssertionError(f"{worker} never finished: {state.state} ({state.reason})")


def finish_and_retire(adapter: Any, fleet: Fleet, ws: Workspace, repo: Repo) -> None:
    state = wait_done(fleet, WORKER)
    assert (state.state, state.envelope.kind if state.envelope else None) == ("done", "done"), (
        state, adapter.read(ws)
    )
    assert state.adapter == adapter.name
    assert (ws.worktree / "hello.txt").read_text() == "hello\n"
    assert "FLEET_WORKER_DONE" in adapter.read(ws)
    # unpushed: the guard refuses and the worktree stays
    with pytest.raises(Refused, match="no upstream"):
        adapter.delete(ws)
    assert (ws.worktree / "hello.txt").exists()
    subprocess.run(["git", "-C", str(ws.worktree), "push", "-q", "-u", "origin", "HEAD"],
                   check=True)
    adapter.delete(ws)
    assert not ws.worktree.exists()
    assert repo.git("ls-remote", "origin", "fleet/e2e-w1")


def test_superset_worker_runs_real_claude_to_done(
    claude: ClaudeSetup, anthropic: FakeAnthropic, agents: Agents, repo: Repo, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    brief = prepare(claude, anthropic, tmp_path)
    home = tmp_path / "superset-home"
    monkeypatch.setenv("SUPERSET_HOME_DIR", str(home))
    monkeypatch.setenv("FAKE_SUPERSET_LOGGED_IN", "1")
    agent_env = claude.env(CLAUSONA_FAKE=str(clausona_state(tmp_path, claude, agents)))
    host = FakeSupersetHost(home, spawn=True, env=agent_env).start()
    try:
        host.add_project(repo.path, "demo")
        host.add_config("Claude · work", CLAUSONA,
                        ["run", "claude:work", "--", "--permission-mode", "bypassPermissions",
                         "-p"])
        fleet = Fleet()
        adapter = SupersetAdapter(runner=SubprocessRunner(), journal=fleet.journal,
                                  superset=str(FAKES / "superset"), superset_home=home)
        assert adapter.route == "cli"
        ws = adapter.create_workspace(WORKER, repo=repo.path, base="main",
                                      label=workspace_name("Hello", "work"))
        spec = LaunchSpec(worker=WORKER, brief=brief, profile="claude:work",
                          config_dir=claude.config_dir)
        adapter.trust(ws, spec)
        handle = adapter.start(ws, spec)
        ws = Workspace(worktree=ws.worktree, branch=ws.branch, base=ws.base, handle=dict(handle))
        finish_and_retire(adapter, fleet, ws, repo)
        # the worker ran on the profile, through clausona, with one line naming the brief
        session = host.sessions[handle["terminal"]]
        assert session.argv[:3] == [CLAUSONA, "run", "claude:work"]
        assert session.argv[-1] == f"Read the brief in {brief} and do what it says."
    finally:
        host.stop()


def test_herdr_worker_runs_real_claude_to_done(
    claude: ClaudeSetup, anthropic: FakeAnthropic, agents: Agents, repo: Repo, tmp_path: Path,
) -> None:
    brief = prepare(claude, anthropic, tmp_path)
    state = tmp_path / "herdr" / "state.json"
    state.parent.mkdir()
    state.write_text(json.dumps({"scenario": {"exec": True}}))
    env = claude.env(
        CLAUSONA_FAKE=str(clausona_state(tmp_path, claude, agents)),
        HERDR_FAKE_STATE=str(state),
    )
    fleet = Fleet()
    adapter = HerdrAdapter(runner=EnvRunner(env), journal=fleet.journal,
                           herdr=str(FAKES / "herdr"), clausona=CLAUSONA, poll=0.1)
    try:
        ws = adapter.create_workspace(WORKER, repo=repo.path, base="main", label="Hello · work")
        spec = LaunchSpec(worker=WORKER, brief=brief, profile="claude:work",
                          permission_mode="bypassPermissions", config_dir=claude.config_dir)
        adapter.trust(ws, spec)
        handle = adapter.start(ws, spec)
        ws = Workspace(worktree=ws.worktree, branch=ws.branch, base=ws.base, handle=dict(handle))
        finish_and_retire(adapter, fleet, ws, repo)
    finally:
        for agent in json.loads(state.read_text()).get("agents", {}).values():
            if agent.get("pid"):
                with contextlib.suppress(OSError):
                    os.killpg(agent["pid"], 15)


#: herdr's key names as tmux spells them
TMUX_KEYS = {"down": "Down", "up": "Up", "enter": "Enter"}


def test_the_herdr_trust_answer_trusts_the_folder_on_every_pinned_release(
    claude: ClaudeSetup, tmux: Tmux, repo: Repo
) -> None:
    """The real folder-trust question, answered the way the herdr adapter answers it
    (:func:`fleet.adapters.herdr.choose_trust`: one key at a time, read back from the screen):
    on 2.1.197 the cursor starts on "Yes", on 2.1.332 on "No, exit" and the first keys are
    dropped (a fixed down+enter exits 2.1.197 and does nothing on 2.1.332). The folder ends
    trusted in the profile's state file and the agent runs."""
    pane = claude.interactive(tmux, cwd=repo.path, trust=False)
    screen = pane.wait_for("Is this a project you created or one you trust", timeout=60)
    prompt = _trust_prompt("claude", screen)
    assert prompt is not None
    pressed: list[str] = []

    def press(key: str) -> None:
        pressed.append(key)
        pane.send(TMUX_KEYS[key])

    after = choose_trust(prompt, pane.screen, press, timeout=60, poll=0.05, screen=screen)
    # a key the screen does not show in time is pressed again; enter only with "Yes" selected
    assert pressed[-1] == "enter" and set(pressed) <= {"down", "up", "enter"}, pressed
    assert "one you trust" not in after
    key = os.path.realpath(repo.path)
    deadline = time.monotonic() + 30
    while not _trusted(claude, key):
        assert not pane.dead(), pane.screen()
        assert time.monotonic() < deadline, pane.screen()
        time.sleep(0.1)
    assert not pane.dead(), pane.screen()


def _trusted(claude: ClaudeSetup, project: str) -> bool:
    try:
        data = json.loads(claude.state_file.read_text())
    except (OSError, ValueError):
        return False  # being rewritten
    return bool(data.get("projects", {}).get(project, {}).get("hasTrustDialogAccepted"))
