"""herdr specifics: the folder-trust answer, the error codes that need a decision, the builds."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from fleet._errors import Refused, ToolError
from fleet._runner import MockRunner
from fleet.adapters._base import Workspace
from fleet.adapters.herdr import (
    AgentBlocked,
    DirtyWorktree,
    HerdrAdapter,
    HerdrError,
    HerdrNotRunning,
    HerdrTimeout,
    PromptStalled,
    _trust_prompt,
    agent_name,
    choose_trust,
    trust_keys,
)
from tests.adapters.conftest import CLAUSONA, HERDR, RecordingRunner, Rig, git, make_rig
from tests.conftest import Repo


@pytest.fixture
def herdr(tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from make_rig("herdr", tmp_path, repo, monkeypatch)


@pytest.fixture(params=["herdr", "herdr-0.8.0"])
def both_builds(
    request: pytest.FixtureRequest, tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Rig]:
    yield from make_rig(request.param, tmp_path, repo, monkeypatch)


def scenario(rig: Rig, **knobs: Any) -> None:
    path = rig.tmp / "herdr" / "state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    state = json.loads(path.read_text()) if path.exists() else {}
    state.setdefault("scenario", {}).update(knobs)
    path.write_text(json.dumps(state))


def calls(rig: Rig, *prefix: str) -> list[list[str]]:
    return [c for c in rig.herdr_state()["calls"] if c[: len(prefix)] == list(prefix)]


def new_workspace(rig: Rig, worker: str = "w1") -> Workspace:
    return rig.adapter.create_workspace(worker, repo=rig.repo.path, base="main", label="Docs")


def test_launch_runs_clausona_in_the_pane_and_names_the_agent(herdr: Rig) -> None:
    ws, spec = herdr.started("w1")
    (run,) = calls(herdr, "pane", "run")
    assert run[2] == ws.handle["pane"]
    # the app launch rules (fleet._launch.app_args), the same as a Superset config's
    assert shlex.split(run[3]) == [CLAUSONA, "run", "claude:work", "--", "--permission-mode",
                                   "acceptEdits", "--model", "sonnet", "--strict-mcp-config"]
    assert calls(herdr, "agent", "rename") == [["agent", "rename", ws.handle["pane"], "w1"]]
    (prompt,) = calls(herdr, "agent", "prompt")
    assert prompt[3] == f"Read the brief in {spec.brief} and do what it says."
    assert "--wait" in prompt


def test_worktree_create_labels_and_never_focuses(herdr: Rig) -> None:
    new_workspace(herdr)
    (create,) = calls(herdr, "worktree", "create")
    assert create[create.index("--label") + 1] == "Docs"
    assert "--no-focus" in create
    assert create[create.index("--branch") + 1] == "fleet/w1"


@pytest.mark.parametrize(("release", "keys"), [("2.1.197", ["enter"]),
                                             ("2.1.332", ["down", "enter"])])
def test_folder_trust_is_answered_for_this_worktree(
    herdr: Rig, release: str, keys: list[str]
) -> None:
    """2.1.197 starts on "Yes", 2.1.332 on "No, exit": the answer is read from the screen."""
    scenario(herdr, trust_prompt=True, claude=release)
    ws, _spec = herdr.started("w1")
    # one key at a time, each read back from the screen
    assert calls(herdr, "agent", "send-keys") == [["agent", "send-keys", "w1", k] for k in keys]
    assert herdr.adapter.describe(ws)["agent_status"] == "working"


CAPTURES = Path(__file__).resolve().parents[1] / "fakes" / "captures"


@pytest.mark.parametrize(("capture", "agent", "keys"), [
    ("claude-2.1.197-trust.txt", "claude", ("enter",)),
    ("claude-2.1.332-trust.txt", "claude", ("down", "enter")),
    ("codex-0.171.0-trust.txt", "codex", ("enter",)),
])
def test_the_trust_answer_is_read_from_the_real_screens(
    capture: str, agent: str, keys: tuple[str, ...]
) -> None:
    screen = (CAPTURES / capture).read_text().replace("{path}", "/w/repo")
    prompt = _trust_prompt(agent, screen)
    assert prompt is not None
    assert trust_keys(prompt, screen) == keys


def test_a_trust_question_without_a_selection_is_not_guessed(herdr: Rig) -> None:
    screen = (CAPTURES / "claude-2.1.332-trust.txt").read_text().replace("❯", " ")
    prompt = _trust_prompt("claude", screen)
    assert prompt is not None and trust_keys(prompt, screen) is None


def test_folder_trust_for_another_folder_is_left_to_the_user(herdr: Rig) -> None:
    scenario(herdr, trust_prompt=True, trust_path="/home/someone/elsewhere")
    ws = new_workspace(herdr)
    spec = herdr.spec("w1", herdr.brief("Brief.\n"))
    with pytest.raises(Refused, match="not its worktree"):
        herdr.adapter.start(ws, spec)
    assert calls(herdr, "agent", "send-keys") == []
    assert calls(herdr, "agent", "prompt") == []


class SlowTUI:
    """Claude Code 2.1.332's trust question on a clock: options No (selected) and Yes in a
    list that wraps; keys pressed before ``live`` are dropped, the others land ``delay``
    seconds after they were pressed; enter on Yes trusts, on No exits."""

    def __init__(self, *, live: float, delay: float) -> None:
        self.now, self.live, self.delay = 0.0, live, delay
        self.pending: list[tuple[float, str]] = []
        self.cursor, self.outcome = 0, ""
        self.pressed: list[str] = []
        self.screen = (CAPTURES / "claude-2.1.332-trust.txt").read_text()

    def press(self, key: str) -> None:
        self.pressed.append(key)
        if self.now >= self.live:
            self.pending.append((self.now + self.delay, key))

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        for due, key in [p for p in self.pending if p[0] <= self.now]:
            self.pending.remove((due, key))
            if self.outcome:
                continue
            if key == "enter":
                self.outcome = "trusted" if self.cursor == 1 else "exited"
            else:
                self.cursor = (self.cursor + (1 if key == "down" else -1)) % 2

    def read(self) -> str:
        if self.outcome:
            return "> \n" if self.outcome == "trusted" else "$ \n"
        no, yes = ("❯ No, exit", "  Yes, I trust") if self.cursor == 0 else (
            "  No, exit", "❯ Yes, I trust")
        return self.screen.replace("❯ No, exit", no).replace("  Yes, I trust", yes)


@pytest.mark.parametrize(("live", "delay"), [(0.0, 0.1), (2.5, 0.1), (0.0, 1.5), (2.5, 1.9),
                                           (1.0, 3.0), (0.0, 5.0)])
def test_the_trust_answer_survives_dropped_and_slow_keys(
    monkeypatch: pytest.MonkeyPatch, live: float, delay: float
) -> None:
    """Keys dropped before the question takes input are pressed again; a key that was only
    slow lands before enter (2.1.332's list wraps: a late down under the enter would exit)."""
    import fleet.adapters.herdr as herdr_module

    tui = SlowTUI(live=live, delay=delay)
    monkeypatch.setattr(herdr_module.time, "monotonic", lambda: tui.now)
    prompt = _trust_prompt("claude", tui.screen)
    assert prompt is not None
    choose_trust(prompt, tui.read, tui.press, timeout=60, poll=0.05, sleep=tui.sleep,
                 screen=tui.read())
    tui.sleep(10)  # whatever is still on its way lands
    assert tui.outcome == "trusted", tui.pressed
    assert tui.pressed[-1] == "enter"


def test_codex_trust_is_answered_with_enter(herdr: Rig) -> None:
    scenario(herdr, trust_prompt=True)
    ws = new_workspace(herdr)
    spec = attrs.evolve(herdr.spec("w1", herdr.brief("Brief.\n")), tool="codex",
                        profile="codex:work")
    herdr.adapter.start(ws, spec)
    assert calls(herdr, "agent", "send-keys") == [["agent", "send-keys", "w1", "enter"]]


def test_a_stalled_prompt_is_reported_and_not_resent(herdr: Rig) -> None:
    scenario(herdr, stall=True)
    ws = new_workspace(herdr)
    spec = herdr.spec("w1", herdr.brief("Brief.\n"))
    with pytest.raises(PromptStalled, match="read its screen before sending again"):
        herdr.adapter.start(ws, spec)
    assert len(calls(herdr, "agent", "prompt")) == 1
    assert herdr.fleet.state("w1").adapter == "herdr"


def test_a_stall_after_delivery_counts_as_started(herdr: Rig) -> None:
    scenario(herdr, stall_delivered=True)
    ws, _spec = herdr.started("w1")
    assert herdr.adapter.describe(ws)["agent_status"] == "working"
    assert len(calls(herdr, "agent", "prompt")) == 1


def test_a_blocked_agent_gets_no_prompt_on_any_build(both_builds: Rig) -> None:
    herdr = both_builds
    ws, _spec = herdr.started("w1")
    path = herdr.tmp / "herdr" / "state.json"
    state = json.loads(path.read_text())
    state["agents"][ws.handle["pane"]]["status"] = "blocked"
    path.write_text(json.dumps(state))
    follow = herdr.brief("More.\n", "follow.md")
    with pytest.raises(AgentBlocked, match="answer it in its pane"):
        herdr.adapter.send(ws, follow)
    assert str(follow) not in herdr.adapter.read(ws)
    assert len(calls(herdr, "agent", "prompt")) == 1


def test_agent_blocked_from_herdr_itself_is_mapped(tmp_path: Path) -> None:
    """0.8.2 answers agent_blocked even when the agent turned blocked after fleet looked."""

    def handler(argv: tuple[str, ...], _o: Any) -> tuple[int, str, str]:
        if argv[1:3] == ("agent", "get"):
            info = {"agent": {"name": "w1", "agent_status": "idle"}}
            return 0, json.dumps({"id": "cli:agent:get", "result": {"type": "agent_info",
                                                                   **info}}), ""
        err = {"id": "x", "error": {"code": "agent_blocked", "message": "agent is blocked"}}
        return 1, "", json.dumps(err)

    adapter = HerdrAdapter(runner=MockRunner(handler))
    with pytest.raises(AgentBlocked) as info:
        adapter.prompt("w1", "Read the brief in /x and do what it says.")
    assert info.value.code == "agent_blocked"


def test_a_prompt_timeout_is_a_timeout(herdr: Rig) -> None:
    scenario(herdr, prompt_timeout=True)
    ws = new_workspace(herdr)
    with pytest.raises(HerdrTimeout) as info:
        herdr.adapter.start(ws, herdr.spec("w1", herdr.brief("Brief.\n")))
    assert isinstance(info.value, TimeoutError)


def test_herdr_refuses_to_remove_a_dirty_worktree(herdr: Rig) -> None:
    ws = new_workspace(herdr)
    (ws.worktree / "scratch.txt").write_text("x\n")
    with pytest.raises(DirtyWorktree) as info:
        herdr.adapter._call("worktree", "remove", "--workspace", ws.handle["workspace"])
    assert isinstance(info.value, Refused)
    assert info.value.code == "dirty_worktree_requires_force"
    assert ws.worktree.is_dir()


def test_delete_maps_herdrs_own_refusal_without_forcing(tmp_path: Path, repo: Repo) -> None:
    wt = tmp_path / "wt"
    repo.git("worktree", "add", "-q", "-b", "fleet/w1", str(wt))
    git(wt, "push", "-q", "-u", "origin", "HEAD")

    def handler(argv: tuple[str, ...], o: Any) -> tuple[int, str, str]:
        if argv[0] == "git":
            import subprocess

            done = subprocess.run(argv, cwd=o["cwd"], env=o["env"], input=o["input"],
                                  capture_output=True, text=True, check=False)
            return done.returncode, done.stdout, done.stderr
        assert "--force" not in argv
        err = {"id": "x", "error": {"code": "dirty_worktree_requires_force", "message": "dirty"}}
        return 1, "", json.dumps(err)

    adapter = HerdrAdapter(runner=MockRunner(handler))
    ws = Workspace(worktree=wt, branch="fleet/w1", handle={"workspace": "w1", "agent": "w1"})
    with pytest.raises(DirtyWorktree, match="never forces"):
        adapter.delete(ws)


def test_usage_errors_say_the_build_may_be_older(herdr: Rig) -> None:
    with pytest.raises(HerdrError, match="usage error") as info:
        herdr.adapter._call("agent", "frobnicate")
    assert info.value.code == "usage"


def test_server_errors_carry_their_code(herdr: Rig) -> None:
    with pytest.raises(HerdrError) as info:
        herdr.adapter.agent("nobody")
    assert info.value.code == "agent_not_found"
    assert "nobody" in str(info.value)


def test_no_agent_showing_up_reports_the_screen(herdr: Rig) -> None:
    scenario(herdr, no_agent=True)
    herdr.adapter.start_timeout = 0.2  # type: ignore[union-attr]
    ws = new_workspace(herdr)
    with pytest.raises(HerdrError, match="command not found"):
        herdr.adapter.start(ws, herdr.spec("w1", herdr.brief("Brief.\n")))


def test_a_herdr_command_that_hangs_is_a_timeout() -> None:
    def handler(argv: tuple[str, ...], _o: Any) -> tuple[int, str, str]:
        raise ToolError("herdr timed out after 60s")

    with pytest.raises(HerdrTimeout):
        HerdrAdapter(runner=MockRunner(handler)).agents()


def test_hand_over_names_the_new_agent_apart_and_closes_the_old_pane(herdr: Rig) -> None:
    ws, spec = herdr.started("w1")
    handle = herdr.adapter.hand_over(ws, attrs.evolve(spec, profile="claude:side"))
    assert handle["agent"] == "w1-2"
    assert calls(herdr, "pane", "close") == [["pane", "close", ws.handle["pane"]]]
    (split,) = calls(herdr, "pane", "split")
    assert split[split.index("--cwd") + 1] == str(ws.worktree)
    note = next(ws.worktree.glob(".fleet-handover-*.md"))
    assert str(spec.brief) in note.read_text()
    # the note is ignored by git: the worktree stays clean for the retire checks
    assert git(ws.worktree, "status", "--porcelain") == ""


@pytest.mark.parametrize(
    ("worker", "name"),
    [("w1", "w1"), ("Docs.Fix", "docs-fix"), ("7up", "w7up"), ("a" * 64, "a" * 32)],
)
def test_agent_names_fit_herdrs_rule(worker: str, name: str) -> None:
    assert agent_name(worker) == name
    assert len(agent_name(worker, 12)) <= 32


# -- the pre-start check: `herdr status --json` as herdr's src/cli/status.rs prints it ----------

#: herdr 0.8.2's line for a running server and for none (src/cli/status.rs:205-289): no
#: `result` envelope, exit 0 both times.
RUNNING = (
    '{"client":{"version":"0.8.2","channel":"stable","protocol":14,"binary":"/usr/bin/herdr",'
    '"session":null},"server":{"status":"running","running":true,"version":"0.8.2",'
    '"protocol":14,"capabilities":{"live_handoff":true,"detached_server_daemon":true},'
    '"compatible":true,"socket":"/run/herdr.sock","session":null,"restart_needed":false},'
    '"update":{"restart_needed":false}}'
)
DOWN = RUNNING.replace('"status":"running","running":true', '"status":"not_running",'
                       '"running":false')


def status_runner(line: str, seen: list[tuple[str, ...]]) -> MockRunner:
    def handler(argv: tuple[str, ...], _o: Any) -> tuple[int, str, str]:
        seen.append(argv)
        return 0, line + "\n", ""

    return MockRunner(handler)


def test_check_reads_the_server_from_status_json() -> None:
    seen: list[tuple[str, ...]] = []
    HerdrAdapter(runner=status_runner(RUNNING, seen)).check(_spec())
    assert seen == [("herdr", "status", "--json")]


def test_check_refuses_in_one_line_when_no_server_runs() -> None:
    with pytest.raises(HerdrNotRunning) as info:
        HerdrAdapter(runner=status_runner(DOWN, [])).check(_spec())
    message = str(info.value)
    assert "no herdr server is running (at /run/herdr.sock)" in message
    assert "\n" not in message
    assert info.value.code == "server_not_running"


def test_check_refuses_a_server_of_another_protocol() -> None:
    line = RUNNING.replace('"compatible":true', '"compatible":false')
    with pytest.raises(HerdrError, match="another protocol") as info:
        HerdrAdapter(runner=status_runner(line, [])).check(_spec())
    assert info.value.code == "protocol_mismatch"


def test_check_says_what_it_got_when_status_prints_no_status() -> None:
    text = "client:\n  version: 0.8.2\n\nserver:\n  status: running\n"
    with pytest.raises(HerdrError, match="printed no server status") as info:
        HerdrAdapter(runner=status_runner(text, [])).check(_spec())
    assert info.value.code == "bad_output"


def test_the_fake_answers_status_as_herdr_does(herdr: Rig) -> None:
    """Exit 0 and `server.running` false with no server; every other command then answers
    herdr's server_not_running error (src/cli/server_not_running.rs), exit 1."""
    scenario(herdr)
    path = herdr.tmp / "herdr" / "state.json"
    state = json.loads(path.read_text())
    state["server"] = False
    path.write_text(json.dumps(state))
    done = herdr.runner.run([str(herdr.adapter.herdr), "status", "--json"])  # type: ignore[union-attr]
    assert done.returncode == 0
    line = json.loads(done.stdout)
    assert "result" not in line and line["server"]["running"] is False
    with pytest.raises(HerdrNotRunning, match="no herdr server is running"):
        herdr.adapter.agents()  # type: ignore[union-attr]


def _spec() -> Any:
    from fleet.adapters._base import LaunchSpec

    return LaunchSpec(worker="w1", brief=Path("/dev/null"))


# -- closing the last pane closes the workspace (src/app/api/panes.rs close_pane) -------------


def test_closing_the_agents_pane_closes_its_workspace_and_keeps_the_checkout(herdr: Rig) -> None:
    ws, _spec = herdr.started("w1")
    herdr.adapter.close(ws)
    assert ws.handle["workspace"] not in herdr.herdr_state()["workspaces"]
    assert ws.worktree.is_dir()
    with pytest.raises(HerdrError) as info:
        herdr.adapter._call(  # type: ignore[union-attr]
            "worktree", "remove", "--workspace", ws.handle["workspace"])
    assert info.value.code == "workspace_not_found"
    herdr.adapter.close(ws)  # closed already: nothing to do


def test_delete_removes_the_checkout_of_a_workspace_herdr_already_closed(herdr: Rig) -> None:
    ws, _spec = herdr.started("w1")
    git(ws.worktree, "push", "-q", "-u", "origin", "HEAD")
    herdr.adapter.close(ws)
    herdr.adapter.delete(ws)
    assert not ws.worktree.exists()
    # never forced, and the branch stays
    assert not any("--force" in c for c in herdr.runner.calls)
    assert git(herdr.repo.path, "branch", "--list", "fleet/w1")


def test_delete_after_the_workspace_closed_still_refuses_uncommitted_work(herdr: Rig) -> None:
    ws, _spec = herdr.started("w1")
    git(ws.worktree, "push", "-q", "-u", "origin", "HEAD")
    herdr.adapter.close(ws)
    (ws.worktree / "scratch.txt").write_text("x\n")
    with pytest.raises(Refused):
        herdr.adapter.delete(ws)
    assert (ws.worktree / "scratch.txt").is_file()


# -- delivery confirmed by the agent's own hook (the screen may no longer show the line) ------


class HookingRunner(RecordingRunner):
    """Journals the agent's UserPromptSubmit right after herdr types a prompt, as fleet's hook
    in a real agent does."""

    def __init__(self, journal: Any, worker: str) -> None:
        super().__init__()
        self.journal, self.worker = journal, worker

    def run(self, argv: Any, **kw: Any) -> Any:
        done = super().run(argv, **kw)
        if list(argv[1:3]) == ["agent", "prompt"] and done.returncode == 0:
            from fleet._core.events import HookEvent

            self.journal.append(self.worker, HookEvent(
                ts=self.journal.clock.now(), src="claude", hook="UserPromptSubmit", data={}))
        return done


def test_the_agents_prompt_hook_confirms_a_brief_the_screen_no_longer_shows(herdr: Rig) -> None:
    """Claude Code 2.1.332 draws on the alternate screen: the typed line can be gone from the
    pane before it is read. The agent's UserPromptSubmit, journaled after the send, confirms
    it; without it the same start fails (test_start_apps: the brief that never shows)."""
    scenario(herdr, swallow=True)
    runner = HookingRunner(herdr.fleet.journal, "w1")
    adapter = HerdrAdapter(runner=runner, journal=herdr.fleet.journal, herdr=HERDR,
                           clausona=CLAUSONA, poll=0.05, confirm_timeout=5)
    ws = adapter.create_workspace("w1", repo=herdr.repo.path, base="main", label="Docs")
    spec = herdr.spec("w1", herdr.brief("Brief.\n"))
    adapter.start(ws, spec)
    assert str(spec.brief) not in adapter.read(ws)  # the screen never showed it
    assert herdr.fleet.state("w1").state == "working"


def test_a_brief_neither_hooked_nor_shown_is_not_confirmed(herdr: Rig) -> None:
    scenario(herdr, swallow=True)
    adapter = HerdrAdapter(runner=RecordingRunner(), journal=herdr.fleet.journal, herdr=HERDR,
                           clausona=CLAUSONA, poll=0.05, confirm_timeout=0.3)
    ws = adapter.create_workspace("w1", repo=herdr.repo.path, base="main", label="Docs")
    with pytest.raises(HerdrError, match="does not show it") as info:
        adapter.start(ws, herdr.spec("w1", herdr.brief("Brief.\n")))
    assert info.value.code == "prompt_not_shown"
