"""`fleet start --adapter superset|herdr` and `fleet run --adapter ...`: app-hosted workers from
the command line, through the orchestration (fleet._orchestrate.start_app_worker), against the
fake Superset (CLI and host service) and the fake herdr, first on PATH as the real tools would
be. Profiles come from a `clausona list --json` snapshot ($FLEET_PROFILES)."""

from __future__ import annotations

import json
import os
import shlex
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet._cli import main
from fleet._core.events import HookEvent, Registered
from fleet._fleet import Fleet
from fleet._launch import API_TOOLS, STRICT_MCP
from fleet._orchestrate import app_adapter, start_app_worker
from fleet.adapters.superset import NAME_LIMIT
from tests.adapters.conftest import FAKES, Rig, make_rig
from tests.conftest import Repo


@pytest.fixture(autouse=True)
def _fakes_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture(autouse=True)
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """claude:work and claude:side (subscriptions), claude:glm (an API profile)."""
    dirs = {name: tmp_path / f"config-{name}" for name in ("work", "side", "glm")}
    listing: list[dict[str, Any]] = [
        {"name": f"claude:{name}", "tool": "claude", "configDir": str(path)}
        for name, path in dirs.items()
    ]
    listing[2] |= {"kind": "api", "model": "glm-5", "label": "openrouter.ai"}
    for path in dirs.values():
        path.mkdir()
    snapshot = tmp_path / "profiles.json"
    snapshot.write_text(json.dumps(listing))
    monkeypatch.setenv("FLEET_PROFILES", str(snapshot))
    return dirs


@pytest.fixture(params=["superset-cli", "superset-host"])
def superset(
    request: pytest.FixtureRequest, tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Rig]:
    yield from make_rig(request.param, tmp_path, repo, monkeypatch)


@pytest.fixture
def herdr(tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from make_rig("herdr", tmp_path, repo, monkeypatch)


def brief(rig: Rig, text: str = "Fix the paths.\n", name: str = "brief.md") -> Path:
    return rig.brief(text, name)


def start(rig: Rig, worker: str, adapter: str, *extra: str, text: str = "Fix the paths.\n"
          ) -> list[str]:
    return ["start", worker, "--task", str(brief(rig, text, f"{worker}.md")), "--repo",
            str(rig.repo.path), "--adapter", adapter, *extra]


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, Any]:
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out) if code == 0 else out


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("fleet: ") and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err
    return captured.err


def herdr_calls(rig: Rig, *prefix: str) -> list[list[str]]:
    if not (rig.tmp / "herdr" / "state.json").exists():
        return []  # herdr was never called
    return [c for c in rig.herdr_state()["calls"] if c[: len(prefix)] == list(prefix)]


def nothing_left(rig: Rig, worker: str = "w1") -> None:
    """No workspace, worktree, branch or journal of ``worker``."""
    assert not rig.repo.git("branch", "--list", f"fleet/{worker}")
    assert rig.repo.git("worktree", "list").count("\n") == 0  # the main worktree alone
    assert worker not in Fleet().workers()
    if rig.host is not None:
        assert rig.host.workspaces == {}
    else:
        assert rig.herdr_state()["workspaces"] == {}


# -- Superset -------------------------------------------------------------------------------


def test_fleet_start_superset_creates_trusts_starts_and_registers(
    superset: Rig, profiles: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert superset.host is not None
    code, state = run_json(capsys, start(
        superset, "paths", "superset", "--profile", "claude:work", "--model", "sonnet",
        "--permission-mode", "acceptEdits", "--json",
    ))
    assert code == 0
    assert state["adapter"] == "superset" and state["state"] == "starting"
    assert state["handle"]["workspace"] and state["handle"]["terminal"]
    assert state["task"] == "Fix the paths."
    (ws,) = superset.host.workspaces.values()
    assert ws["name"] == "paths · work (sonnet)"
    assert state["handle"]["workspace"] == ws["id"]
    # trusted for the worker's profile before its agent started
    trust = json.loads((profiles["work"] / ".claude.json").read_text())
    assert trust["projects"][str(Path(ws["worktreePath"]).resolve())]["hasTrustDialogAccepted"]
    registered = [e for e in Fleet().log("paths") if isinstance(e, Registered)]
    assert registered and registered[0].adapter == "superset"
    assert registered[0].profile == "claude:work"


def test_a_superset_name_keeps_the_profile_label_under_26_characters(
    superset: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert superset.host is not None
    argv = start(superset, "rename-every-module-path", "superset", "--profile", "claude:work",
                 "--model", "sonnet", "--permission-mode", "acceptEdits")
    assert main(argv) == 0
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and line.startswith("rename-every-module-path: starting")
    assert "superset" in line and "terminal" in line
    (ws,) = superset.host.workspaces.values()
    assert len(ws["name"]) < NAME_LIMIT
    assert ws["name"].endswith(" · work (sonnet)")
    assert ws["name"].startswith("rename")


def test_a_superset_start_that_fails_leaves_no_workspace(
    superset: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    """The host service carries a brief's text and refuses one that starts with '-': that
    happens after the workspace was made, so the start takes it back."""
    argv = start(superset, "w1", "superset", "--profile", "claude:work", "--permission-mode",
                 "acceptEdits", text="--help me\n")
    if superset.kind == "superset-cli":
        assert main(argv) == 0  # the CLI route sends one line naming the file
        capsys.readouterr()
        return
    err = one_line_error(capsys, argv)
    assert "starts with '-'" in err
    nothing_left(superset)


def test_superset_refuses_before_creating_when_no_config_runs_the_profile(
    superset: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_line_error(capsys, start(superset, "w1", "superset", "--profile", "claude:glm",
                                       "--effort", "high"))
    # exactly what to add: the app launch rules, an API profile's short tool list included
    assert "no Superset agent config runs clausona profile claude:glm" in err
    assert json.dumps(["run", "claude:glm", "--", "--permission-mode", "default", "--effort",
                       "high", STRICT_MCP, API_TOOLS]) in err
    nothing_left(superset)


def test_superset_refuses_a_config_that_runs_another_model(
    superset: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    """Superset ignores a launch's model for custom configs: the worker would run the
    config's model, not the one asked for."""
    err = one_line_error(capsys, start(superset, "w1", "superset", "--profile", "claude:work",
                                       "--model", "opus"))
    assert "--model sonnet instead of opus" in err
    nothing_left(superset)


def test_a_config_mismatch_names_the_command_that_fixes_it(
    superset: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal names the add-config line; on the host route running it with --yes
    rewrites the config and the same start then works."""
    argv = start(superset, "w1", "superset", "--profile", "claude:work", "--model", "opus")
    err = one_line_error(capsys, argv)
    fix = "fleet superset add-config claude:work --model opus --update"
    assert f"run `{fix}` to see the change and add --yes to make it" in err
    words = [*fix.split()[1:], "--yes"]
    if superset.kind == "superset-cli":
        # the superset CLI has no command that edits an agent config: said in one line
        assert main(words) == 1
        assert "cannot edit agent configs" in capsys.readouterr().err
        return
    assert main(words) == 0
    assert capsys.readouterr().out.startswith("updated: Claude · work (opus): ")
    assert main(argv) == 0


def test_superset_refuses_an_api_profile_config_without_its_tool_list(
    superset: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert superset.host is not None
    superset.host.add_config("Claude · glm", "/opt/clausona/bin/clausona",
                             ["run", "claude:glm", "--", "--permission-mode", "default",
                              STRICT_MCP])
    err = one_line_error(capsys, start(superset, "w1", "superset", "--profile", "claude:glm"))
    assert f"no --tools list (an API profile runs with {API_TOOLS})" in err
    nothing_left(superset)


def test_superset_needs_a_profile(superset: Rig, capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(capsys, start(superset, "w1", "superset"))
    assert "--profile" in err
    nothing_left(superset)


# -- herdr ----------------------------------------------------------------------------------


def test_fleet_start_herdr_runs_the_app_launch_rules_in_a_labelled_pane(
    herdr: Rig, profiles: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, state = run_json(capsys, start(
        herdr, "paths", "herdr", "--profile", "claude:glm", "--model", "glm-5", "--effort",
        "high", "--json",
    ))
    assert code == 0
    assert state["adapter"] == "herdr"
    assert state["handle"]["pane"] and state["handle"]["workspace"]
    assert state["handle"]["agent"] == "paths"
    (create,) = herdr_calls(herdr, "worktree", "create")
    assert create[create.index("--label") + 1] == "paths · glm (glm-5)"
    (run,) = herdr_calls(herdr, "pane", "run")
    words = shlex.split(run[3])
    assert words[1:4] == ["run", "claude:glm", "--"]
    # permission mode stated (the app default), MCP servers off, model, effort, API tools
    assert words[4:] == ["--permission-mode", "default", "--model", "glm-5", "--effort",
                         "high", STRICT_MCP, API_TOOLS]
    trust = json.loads((profiles["glm"] / ".claude.json").read_text())
    assert trust["projects"]
    (prompt,) = herdr_calls(herdr, "agent", "prompt")
    assert prompt[3].startswith("Read the brief in ") and prompt[3].endswith("paths.md and do "
                                                                              "what it says.")


def test_fleet_start_herdr_refuses_in_one_line_when_no_herdr_server_runs(
    herdr: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    """`herdr status` exits 0 with no server (herdr src/cli/status.rs): the check reads
    `server.running` and refuses before anything is created."""
    (herdr.tmp / "herdr").mkdir(exist_ok=True)
    (herdr.tmp / "herdr" / "state.json").write_text(json.dumps({"server": False}))
    err = one_line_error(capsys, start(herdr, "w1", "herdr", "--profile", "claude:work"))
    assert "no herdr server is running" in err and "start herdr" in err
    assert herdr_calls(herdr) == [["status", "--json"]]
    assert "w1" not in Fleet().workers()


def test_the_permission_mode_comes_from_the_settings(
    herdr: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["settings", "set", "permissions.claude", "acceptEdits"]) == 0
    capsys.readouterr()
    assert main(start(herdr, "w1", "herdr", "--profile", "claude:work")) == 0
    (run,) = herdr_calls(herdr, "pane", "run")
    assert "--permission-mode acceptEdits" in run[3]


def test_the_adapter_comes_from_the_settings(
    herdr: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["settings", "set", "adapter", "herdr"]) == 0
    assert main(["settings", "set", "adapter", "tmux"]) == 2
    capsys.readouterr()
    argv = start(herdr, "w1", "herdr", "--profile", "claude:work")
    argv.remove("--adapter")
    argv.remove("herdr")
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["adapter"] == "herdr"


@pytest.mark.parametrize("option", [["--endpoint", "https://x.invalid"], ["--small-model", "m"],
                                    ["--allowed-tools", "Read"], ["--retries", "1"],
                                    ["--retries", "3"], ["--backoff", "2"]])
def test_an_app_refuses_headless_only_options(
    herdr: Rig, capsys: pytest.CaptureFixture[str], option: list[str]
) -> None:
    err = one_line_error(capsys, start(herdr, "w1", "herdr", "--profile", "claude:work",
                                       *option))
    assert f"{option[0]} is for headless workers" in err
    assert not herdr_calls(herdr, "worktree")


@pytest.mark.parametrize("value", ["2", "4"])
def test_fleet_run_refuses_max_parallel_with_an_app_whatever_its_value(
    herdr: Rig, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """4 is the headless default: it is refused as explicitly as any other value."""
    tasks = herdr.tmp / "TASKS.toml"
    tasks.write_text('[[task]]\nname = "w1"\nbrief = "b.md"\n')
    err = one_line_error(capsys, ["run", str(tasks), "--adapter", "herdr", "--max-parallel",
                                  value])
    assert "--max-parallel is for headless workers; not with --adapter herdr" in err
    assert not herdr_calls(herdr)


def test_herdr_answers_a_late_trust_question_before_the_brief(
    herdr: Rig, capsys: pytest.CaptureFixture[str], profiles: dict[str, Path]
) -> None:
    """herdr reports a new agent idle before its first screen: the brief waits until the
    agent is ready, and the trust question drawn meanwhile is answered first."""
    (herdr.tmp / "herdr").mkdir(exist_ok=True)
    (herdr.tmp / "herdr" / "state.json").write_text(json.dumps({"scenario": {"trust_late": 1}}))
    # the profile's trust file does not reach the fake's screen: the question is drawn
    assert main(start(herdr, "w1", "herdr", "--profile", "claude:work")) == 0
    calls = herdr.herdr_state()["calls"]
    keys = [n for n, c in enumerate(calls) if c[:2] == ["agent", "send-keys"]]
    prompt = next(n for n, c in enumerate(calls) if c[:2] == ["agent", "prompt"])
    # 2.1.332's question starts on "No, exit": down, read back, then enter
    assert [calls[n][3:] for n in keys] == [["down"], ["enter"]]
    assert keys[-1] < prompt


def test_a_herdr_brief_that_never_shows_fails_the_start_and_leaves_nothing(
    herdr: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    adapter = app_adapter("herdr")
    adapter.confirm_timeout = 0.3  # type: ignore[attr-defined]
    adapter.poll = 0.05  # type: ignore[attr-defined]
    (herdr.tmp / "herdr").mkdir(exist_ok=True)
    (herdr.tmp / "herdr" / "state.json").write_text(json.dumps({"scenario": {"swallow": 1}}))
    with pytest.raises(Exception, match="does not show it") as info:
        start_app_worker(adapter, "w1", task=brief(herdr), repo=herdr.repo.path,
                         profile="claude:work")
    assert getattr(info.value, "code", "") == "prompt_not_shown"
    nothing_left(herdr)


def test_a_herdr_start_with_no_agent_is_one_line_and_leaves_nothing(
    herdr: Rig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleet.adapters.herdr import HerdrAdapter

    monkeypatch.setattr(HerdrAdapter, "__init__", _quick(HerdrAdapter.__init__))
    (herdr.tmp / "herdr").mkdir(exist_ok=True)
    (herdr.tmp / "herdr" / "state.json").write_text(json.dumps({"scenario": {"no_agent": 1}}))
    err = one_line_error(capsys, start(herdr, "w1", "herdr", "--profile", "claude:work"))
    assert "no agent showed up" in err
    nothing_left(herdr)


def _quick(init: Any) -> Any:
    def quick(self: Any, **kw: Any) -> None:
        init(self, **{**kw, "start_timeout": 0.3, "poll": 0.05})

    return quick


def test_fleet_run_herdr_starts_every_task(
    herdr: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("paths", "docs"):
        brief(herdr, f"Task {name}.\n", f"{name}.md")
    tasks = herdr.tmp / "briefs" / "TASKS.toml"
    tasks.write_text(
        '[[task]]\nname = "paths"\nbrief = "paths.md"\nprofile = "claude:work"\n'
        '[[task]]\nname = "docs"\nbrief = "docs.md"\nprofile = "claude:side"\nmodel = "opus"\n'
    )
    code, result = run_json(capsys, ["run", str(tasks), "--adapter", "herdr", "--repo",
                                     str(herdr.repo.path), "--json"])
    assert code == 0
    assert [s["worker"] for s in result["started"]] == ["paths", "docs"]
    assert {s["adapter"] for s in result["started"]} == {"herdr"}
    labels = [c[c.index("--label") + 1] for c in herdr_calls(herdr, "worktree", "create")]
    assert labels == ["paths · work", "docs · side (opus)"]
    runs = [c[3] for c in herdr_calls(herdr, "pane", "run")]
    assert "claude:side -- --permission-mode default --model opus" in runs[1]


def test_fleet_run_refuses_an_endpoint_with_an_app(
    herdr: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = herdr.tmp / "TASKS.toml"
    tasks.write_text('[[task]]\nname = "a"\nbrief = "a.md"\n')
    err = one_line_error(capsys, ["run", str(tasks), "--adapter", "herdr", "--endpoint", "x"])
    assert "--endpoint is for headless workers" in err


# -- one at a time per profile ---------------------------------------------------------------


def test_workers_on_one_profile_start_one_at_a_time(herdr: Rig) -> None:
    """The second worker on a profile starts only once the first one's agent has spoken (its
    first hook event): a starting Claude Code rewrites the profile's state file, and could
    drop the trust entry just written for the next one. Another profile does not wait."""
    adapter = app_adapter("herdr")
    fleet = Fleet()

    def go(worker: str, profile: str) -> None:
        start_app_worker(adapter, worker, task=brief(herdr, f"{worker}.\n", f"{worker}.md"),
                         repo=herdr.repo.path, profile=profile, start_timeout=30)

    go("w1", "claude:work")
    t0 = time.monotonic()
    go("other", "claude:side")
    assert time.monotonic() - t0 < 10  # claude:side has nobody starting

    spoke = threading.Event()

    def speak() -> None:
        time.sleep(1.0)
        fleet.record("w1", HookEvent(ts=time.time(), src="claude", hook="SessionStart"))
        spoke.set()

    talker = threading.Thread(target=speak)
    talker.start()
    try:
        go("w2", "claude:work")
    finally:
        talker.join()
    assert spoke.is_set()
    first = next(e for e in fleet.log("w1") if isinstance(e, HookEvent))
    second = next(e for e in fleet.log("w2") if isinstance(e, Registered))
    assert second.ts >= first.ts


def test_a_silent_worker_is_waited_for_only_as_long_as_a_start_may_take(herdr: Rig) -> None:
    adapter = app_adapter("herdr")

    def go(worker: str, timeout: float) -> float:
        t0 = time.monotonic()
        start_app_worker(adapter, worker, task=brief(herdr, f"{worker}.\n", f"{worker}.md"),
                         repo=herdr.repo.path, profile="claude:work", start_timeout=timeout)
        return time.monotonic() - t0

    go("w1", 1.0)
    assert go("w2", 1.0) >= 1.0  # w1 never spoke: waited for, up to the bound


def test_fleet_start_superset_waits_for_the_profiles_starting_worker(
    superset: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI: Superset returns as soon as the terminal exists, so the second worker
    on the profile waits for the first one's agent to speak before its workspace is made."""
    assert superset.host is not None
    mode = ["--profile", "claude:work", "--permission-mode", "acceptEdits"]
    assert main(start(superset, "w1", "superset", *mode)) == 0
    fleet = Fleet()

    def speak() -> None:
        time.sleep(1.0)
        fleet.record("w1", HookEvent(ts=time.time(), src="claude", hook="SessionStart"))

    talker = threading.Thread(target=speak)
    talker.start()
    try:
        assert main(start(superset, "w2", "superset", *mode)) == 0
    finally:
        talker.join()
    capsys.readouterr()
    first = next(e for e in fleet.log("w1") if isinstance(e, HookEvent))
    second = next(e for e in fleet.log("w2") if isinstance(e, Registered))
    assert second.ts >= first.ts
    assert len(superset.host.workspaces) == 2


def test_the_facade_starts_in_an_app_through_the_same_orchestration(herdr: Rig) -> None:
    from fleet import Fleet
    from fleet._errors import SettingsError

    task = brief(herdr, "Fix the paths.\n", "facade.md")
    with Fleet() as fleet:
        state = fleet.start("facade", task=task, repo=herdr.repo.path, adapter="herdr",
                            profile="claude:work")
        assert (state.adapter, state.profile) == ("herdr", "claude:work")
        assert state.handle["pane"]
        (create,) = herdr_calls(herdr, "worktree", "create")
        assert create[create.index("--label") + 1] == "facade · work"
        with pytest.raises(SettingsError, match="unknown app adapter 'tmux'"):
            fleet.start("other", task=task, repo=herdr.repo.path, adapter="tmux")


# -- hand-over: start's launch rules and checks -------------------------------------------------


def test_a_herdr_hand_over_launches_by_starts_rules(
    herdr: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    """The settings' permission mode and an API profile's tool list reach the new agent."""
    assert main(["settings", "set", "permissions.claude", "acceptEdits"]) == 0
    assert main(start(herdr, "w1", "herdr", "--profile", "claude:work")) == 0
    capsys.readouterr()
    assert main(["hand-over", "w1", "--profile", "claude:glm", "--brief",
                 str(herdr.tmp / "briefs" / "w1.md")]) == 0, capsys.readouterr().err
    first, second = herdr_calls(herdr, "pane", "run")
    words = shlex.split(second[3])
    assert words[1:4] == ["run", "claude:glm", "--"]
    assert words[4:6] == ["--permission-mode", "acceptEdits"]
    assert API_TOOLS in words and API_TOOLS not in shlex.split(first[3])


def test_a_herdr_hand_over_is_refused_before_anything_when_no_server_runs(
    herdr: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(start(herdr, "w1", "herdr", "--profile", "claude:work")) == 0
    capsys.readouterr()
    path = herdr.tmp / "herdr" / "state.json"
    state = json.loads(path.read_text())
    state["server"] = False
    path.write_text(json.dumps(state))
    err = one_line_error(capsys, ["hand-over", "w1", "--profile", "claude:side", "--brief",
                                  str(herdr.tmp / "briefs" / "w1.md")])
    assert "no herdr server is running" in err
    assert herdr_calls(herdr, "pane", "split") == []


def test_a_superset_hand_over_checks_the_config_as_start_does(
    superset: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    """claude:side's config runs sonnet: a hand-over asking for opus is refused before a new
    agent starts, with the command that fixes it."""
    assert superset.host is not None
    assert main(start(superset, "w1", "superset", "--profile", "claude:work")) == 0
    capsys.readouterr()
    runs = [c for c in superset.host.calls if c[0] == "agents.run"]
    assert runs  # the start's
    err = one_line_error(capsys, ["hand-over", "w1", "--profile", "claude:side", "--model",
                                  "opus", "--brief", str(superset.tmp / "briefs" / "w1.md")])
    assert "--model sonnet instead of opus" in err
    assert "fleet superset add-config claude:side --model opus --update" in err
    assert [c for c in superset.host.calls if c[0] == "agents.run"] == runs
    assert Fleet().state("w1").profile == "claude:work"
