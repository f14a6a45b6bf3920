"""Starting, stopping, following up and fanning out headless workers with the scripted fake
agent, through the Python API and the command line."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fleet import Fleet
from fleet._core.events import Exited, FollowUpSent, Registered, Started, TurnEnded
from fleet._errors import Refused, SettingsError, ToolError
from fleet._keys import KeyUnavailable
from fleet._orchestrate import run_tasks, start_worker, stop_worker
from fleet._permissions import PermissionPolicy
from fleet._proc import is_alive
from fleet.adapters._base import Workspace
from fleet.adapters.headless import HeadlessAdapter

from ..conftest import Repo
from .conftest import KEY, FakeAgent, wait_for


def brief(tmp_path: Path, text: str = "# Fix the bug\nMake the tests pass.\n") -> Path:
    path = tmp_path / "brief.md"
    path.write_text(text)
    return path


def exited(home: Path, worker: str, count: int = 1) -> list[Exited]:
    def done() -> list[Exited] | None:
        evs = [e for e in Fleet(home).log(worker) if isinstance(e, Exited)]
        return evs if len(evs) >= count else None

    result: list[Exited] = wait_for(done, 60, f"{worker} to exit")
    return result


def test_start_creates_worktree_registers_and_runs(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    fake.plan([{"result": "done\nFLEET_WORKER_DONE: fixed", "commit": "fix.txt"}])
    state = start_worker("fix-1", task=brief(tmp_path), repo=repo.path, options=fake.options())
    worktree = repo.path.parent / "repo.fleet" / "fix-1"
    assert state.worktree == str(worktree.resolve())
    assert state.branch == "fleet/fix-1"
    assert state.adapter == "headless" and state.tool == "claude"
    assert state.task == "Fix the bug"
    assert state.base == repo.git("rev-parse", "HEAD")
    assert int(state.handle["supervisor_pid"]) > 0
    exited(home, "fix-1")
    final = Fleet(home).state("fix-1")
    assert (final.state, final.reason) == ("done", "claimed")
    assert repo.git("log", "--format=%s", "main..fleet/fix-1") == "work 1"
    call = fake.calls()[0]
    assert call["cwd"] == str(worktree.resolve())
    assert call["env"]["FLEET_WORKER"] == "fix-1"
    assert call["env"]["FLEET_HOME"] == str(home)
    assert call["argv"][-1].startswith("# Fix the bug")
    assert "--permission-mode" in call["argv"] and "bypassPermissions" in call["argv"]
    assert call["stdin_devnull"] is True
    kinds = [type(e) for e in Fleet(home).log("fix-1")]
    # the run's result is journaled as the agent wrote it (read live from its stream), then
    # the exit
    assert kinds == [Registered, Started, TurnEnded, Exited]


def test_endpoint_worker_gets_an_isolated_config_and_the_key_only_in_its_env(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_TEST_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "host-key-must-not-leak")
    monkeypatch.setenv("CLAUDECODE", "1")
    fake.plan([{"sleep": 60}])
    opts = fake.options(endpoint="http://127.0.0.1:9/", key_from="env:FLEET_TEST_KEY")
    state = start_worker("api-1", task=brief(tmp_path), repo=repo.path, model="glm-5",
                         small_model="glm-air", effort="high", options=opts)
    agent_pid = fake.wait_running(1)
    sup_pid = int(state.handle["supervisor_pid"])
    # Nothing of the key in anyone's argv.
    for pid in (agent_pid, sup_pid):
        assert KEY.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    # The supervisor does not hold it in its environment either; the agent does, once.
    assert KEY.encode() not in Path(f"/proc/{sup_pid}/environ").read_bytes()
    agent_env = Path(f"/proc/{agent_pid}/environ").read_bytes().split(b"\0")
    assert [v for v in agent_env if KEY.encode() in v] == [b"ANTHROPIC_AUTH_TOKEN=" + KEY.encode()]
    call = fake.calls()[0]
    assert set(call["key_sha"]) == {"ANTHROPIC_AUTH_TOKEN"}
    assert call["key_sha"]["ANTHROPIC_AUTH_TOKEN"] == hashlib.sha256(KEY.encode()).hexdigest()
    env = call["env"]
    config = home / "workers" / "api-1" / "config"
    assert env["CLAUDE_CONFIG_DIR"] == str(config)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert env["ANTHROPIC_DEFAULT_SONNET_MODEL"] == "glm-5"
    assert env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == "glm-air"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert "CLAUDECODE" not in env
    assert (config.stat().st_mode & 0o777) == 0o700
    settings = json.loads((config / "settings.json").read_text())
    assert settings["effortLevel"] == "high"
    assert settings["skipDangerousModePermissionPrompt"] is True
    assert "Stop" in settings["hooks"] and "fleet-hook" in json.dumps(settings["hooks"])
    # The supervisor journals how a run ends; these would report each retried failure.
    assert "StopFailure" not in settings["hooks"] and "SessionEnd" not in settings["hooks"]
    claude_json = json.loads((config / ".claude.json").read_text())
    assert claude_json["hasCompletedOnboarding"] is True
    assert claude_json["projects"][state.worktree]["hasTrustDialogAccepted"] is True
    # Not in any file fleet wrote, nor in the worktree.
    for root in (home, Path(state.worktree or "")):
        for path in root.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path
    stop_worker("api-1")
    assert not is_alive(agent_pid, None)
    for path in home.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_codex_endpoint_worker(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_TEST_KEY", KEY)
    fake.plan([{"result": "FLEET_WORKER_DONE: codex did it"}])
    opts = fake.options(endpoint="http://127.0.0.1:9", key_from="env:FLEET_TEST_KEY")
    start_worker("cx-1", task=brief(tmp_path), repo=repo.path, tool="codex", model="gpt-x",
                 options=opts)
    done = exited(home, "cx-1")[0]
    assert done.session_id == "session-1"
    assert done.usage == {"input_tokens": 10, "cached_input_tokens": 2, "output_tokens": 5}
    state = Fleet(home).state("cx-1")
    assert (state.state, state.reason, state.tool) == ("done", "claimed", "codex")
    call = fake.calls()[0]
    assert call["argv"][1:4] == ["exec", "--json", "--disable"]
    assert "unbounded_connection_retries" in call["argv"]
    codex_home = home / "workers" / "cx-1" / "config"
    assert call["env"]["CODEX_HOME"] == str(codex_home)
    assert set(call["key_sha"]) == {"FLEET_ENDPOINT_API_KEY"}
    config = (codex_home / "config.toml").read_text()
    assert 'base_url = "http://127.0.0.1:9/v1"' in config
    assert 'env_key = "FLEET_ENDPOINT_API_KEY"' in config
    assert "trusted_hash" in config  # fleet's hooks will run in `codex exec`
    assert (codex_home / "hooks.json").is_file()
    assert KEY not in config


def test_profile_worker_runs_through_clausona(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    clausona = fake.bin / "clausona"
    clausona.write_text(
        "#!/bin/sh\n# clausona run <profile> -- args: run the tool with the rest\n"
        f'shift 3\nexec "{fake.bin}/claude" "$@"\n'
    )
    clausona.chmod(0o755)
    fake.plan([{"result": "FLEET_WORKER_DONE: ok"}])
    opts = fake.options(clausona=str(clausona))
    state = start_worker("pr-1", task=brief(tmp_path), repo=repo.path, profile="claude:work",
                         model="sonnet", options=opts)
    assert state.profile == "claude:work"
    exited(home, "pr-1")
    argv = fake.calls()[0]["argv"]
    assert argv[1:3] == ["-p", "--output-format"]
    assert not (home / "workers" / "pr-1" / "config").exists()
    assert Fleet(home).state("pr-1").state == "done"


def test_bad_input_creates_nothing(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    with pytest.raises(KeyUnavailable, match="FLEET_NOT_SET"):
        start_worker("k-1", task=brief(tmp_path), repo=repo.path,
                     options=fake.options(endpoint="http://127.0.0.1:9",
                                          key_from="env:FLEET_NOT_SET"))
    with pytest.raises(SettingsError, match="empty"):
        start_worker("k-2", task=brief(tmp_path, " \n"), repo=repo.path, options=fake.options())
    with pytest.raises(SettingsError, match="no commit"):
        start_worker("k-3", task=brief(tmp_path), repo=repo.path, base="nope",
                     options=fake.options())
    with pytest.raises(SettingsError, match="key-from"):
        fake.options(endpoint="http://127.0.0.1:9")
    assert not (repo.path.parent / "repo.fleet").exists() or not any(
        (repo.path.parent / "repo.fleet").iterdir()
    )
    assert "fleet/" not in repo.git("branch", "--list")
    assert not (home / "workers").exists() or not any((home / "workers").iterdir())


def test_an_existing_worker_or_branch_is_refused(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    start_worker("dup", task=brief(tmp_path), repo=repo.path, options=fake.options())
    exited(home, "dup")
    with pytest.raises(Refused, match="already exists"):
        start_worker("dup", task=brief(tmp_path), repo=repo.path, options=fake.options())
    repo.git("branch", "fleet/taken")
    with pytest.raises(Refused, match="branch fleet/taken already exists"):
        start_worker("taken", task=brief(tmp_path), repo=repo.path, options=fake.options())


def test_stop_ends_the_worker_cleanly(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    fake.plan([{"sleep": 60}])
    start_worker("long", task=brief(tmp_path), repo=repo.path, options=fake.options())
    pid = fake.wait_running(1)
    state = stop_worker("long")
    assert (state.state, state.reason, state.live) == ("gone", "stopped", False)
    assert not is_alive(pid, None)
    with pytest.raises(Refused, match="not running"):
        stop_worker("long")


def test_follow_up_resumes_the_session(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    fake.plan([{"result": "what next?", "session": "sess-42"},
               {"result": "FLEET_WORKER_DONE: finished", "session": "sess-42"}])
    state = start_worker("talk", task=brief(tmp_path), repo=repo.path, options=fake.options())
    exited(home, "talk")
    assert Fleet(home).state("talk").state == "gone"
    follow = tmp_path / "follow.md"
    follow.write_text("Now write the docs.")
    adapter = HeadlessAdapter(options=fake.options())
    ws = Workspace(worktree=Path(state.worktree or ""), branch="fleet/talk",
                   handle={"worker": "talk"})
    adapter.send(ws, follow)
    exited(home, "talk", 2)
    argv = fake.calls()[1]["argv"]
    assert argv[argv.index("--resume") + 1] == "sess-42"
    assert argv[-1] == "Now write the docs."
    assert any(isinstance(e, FollowUpSent) for e in Fleet(home).log("talk"))
    assert Fleet(home).state("talk").state == "done"
    assert "FLEET_WORKER_DONE" in adapter.read(ws)


def test_send_refuses_a_running_worker(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    fake.plan([{"sleep": 60}])
    state = start_worker("busy", task=brief(tmp_path), repo=repo.path, options=fake.options())
    fake.wait_running(1)
    follow = tmp_path / "f.md"
    follow.write_text("more")
    ws = Workspace(worktree=Path(state.worktree or ""), branch="fleet/busy",
                   handle={"worker": "busy"})
    adapter = HeadlessAdapter(options=fake.options())
    with pytest.raises(Refused, match="one at a time"):
        adapter.send(ws, follow, queue=False)
    assert adapter.describe(ws)["supervisor_alive"] is True
    adapter.close(ws)
    assert Fleet(home).state("busy").reason == "stopped"


def test_delete_removes_the_worktree_without_force(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    state = start_worker("del", task=brief(tmp_path), repo=repo.path, options=fake.options())
    exited(home, "del")
    worktree = Path(state.worktree or "")
    ws = Workspace(worktree=worktree, branch="fleet/del", handle={"worker": "del"})
    (worktree / "untracked.txt").write_text("precious")
    adapter = HeadlessAdapter(options=fake.options())
    with pytest.raises(Exception, match=r"untracked|modified"):
        adapter.delete(ws)
    assert (worktree / "untracked.txt").read_text() == "precious"
    (worktree / "untracked.txt").unlink()
    adapter.delete(ws)
    assert not worktree.exists()


def test_run_tasks_fans_out_under_the_cap(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_TEST_KEY", KEY)
    fake.plan([{"sleep": 0.6, "result": "FLEET_WORKER_DONE: ok"}])
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.md").write_text(f"task {name}\n")
    tasks = tmp_path / "TASKS.toml"
    tasks.write_text(
        f'repo = "{repo.path}"\n'
        + "".join(f'[[task]]\nname = "t-{n}"\nbrief = "{n}.md"\n' for n in ("a", "b", "c"))
    )
    opts = fake.options(endpoint="http://127.0.0.1:9", key_from="env:FLEET_TEST_KEY")
    result = run_tasks(tasks, max_parallel=2, options=opts)
    assert [s.worker for s in result.started] == ["t-a", "t-b", "t-c"]
    for name in ("t-a", "t-b", "t-c"):
        exited(home, name)
    # Never more than two agents at once: the third started after one of the first two ended.
    starts = {c["n"]: c for c in fake.calls()}
    assert len(starts) == 3
    first_end = min(e.ts for n in ("t-a", "t-b") for e in Fleet(home).log(n)
                    if isinstance(e, Exited))
    third_start = next(e.ts for e in Fleet(home).log("t-c") if isinstance(e, Started))
    assert third_start >= first_end
    assert {Fleet(home).state(n).state for n in ("t-a", "t-b", "t-c")} == {"done"}


def fleet_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "fleet"), *args], check=False,
                          capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=120)


def test_cli_start_returns_and_the_supervisor_journals_after_it_exits(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The coordinator (this CLI process) is gone long before the agent finishes.
    monkeypatch.setenv("FAKE_AGENT_DIR", str(fake.dir))
    monkeypatch.setenv("PATH", f"{fake.bin}:{os.environ['PATH']}")
    fake.plan([{"sleep": 1.5, "result": "FLEET_WORKER_DONE: later"}])
    done = fleet_cli("start", "cli-1", "--task", str(brief(tmp_path)), "--repo",
                     str(repo.path), "--json")
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["worker"] == "cli-1" and out["state"] == "starting"
    assert not [e for e in Fleet(home).log("cli-1") if isinstance(e, Exited)]
    exited(home, "cli-1")
    assert Fleet(home).state("cli-1").state == "done"
    stop = fleet_cli("stop", "cli-1")
    assert stop.returncode == 4 and "not running" in stop.stderr


def test_cli_errors_are_one_line(repo: Repo, tmp_path: Path) -> None:
    done = fleet_cli("start", "x", "--task", str(tmp_path / "missing.md"), "--repo",
                     str(repo.path))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "cannot read brief" in done.stderr
    done = fleet_cli("start", "x", "--task", str(brief(tmp_path)), "--repo", str(repo.path),
                     "--endpoint", "http://127.0.0.1:9")
    assert done.returncode == 1 and "key-from" in done.stderr


def test_fleet_api_start_and_stop(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    fake.plan([{"sleep": 60}])
    with Fleet(home) as fleet:
        state = fleet.start("api-call", task=brief(tmp_path), repo=repo.path,
                            options=fake.options())
        assert (state.state, state.adapter) == ("starting", "headless")
        fake.wait_running(1)
        stopped = fleet.stop("api-call")
        assert (stopped.state, stopped.reason) == ("gone", "stopped")
        assert stopped.needs_attention


def test_a_missing_agent_cli_is_refused_before_anything_is_made(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    opts = fake.options(claude=str(tmp_path / "no-such-claude"))
    with pytest.raises(ToolError, match=r"no-such-claude not found: is .* installed"):
        start_worker("nocli", task=brief(tmp_path), repo=repo.path, options=opts)
    assert not (repo.path.parent / "repo.fleet" / "nocli").exists()


def test_the_adapter_registry_builds_the_headless_adapter(home: Path) -> None:
    from fleet._runner import SubprocessRunner
    from fleet.adapters import Adapter, get_adapter, get_deleter

    runner = SubprocessRunner()
    adapter = get_adapter("headless", runner=runner, home=home)
    assert isinstance(adapter, HeadlessAdapter) and isinstance(adapter, Adapter)
    assert adapter.runner is runner and adapter.home == home
    assert isinstance(get_deleter("headless", runner=runner), HeadlessAdapter)


def test_permission_mode_comes_from_the_fleet_settings(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_path / "fleet.json"
    settings.write_text(json.dumps({"permissions": {"claude": "acceptEdits",
                                                    "codexSandbox": "workspace-write"}}))
    monkeypatch.setenv("FLEET_SETTINGS", str(settings))
    start_worker("perm-c", task=brief(tmp_path), repo=repo.path, options=fake.options())
    exited(home, "perm-c")
    start_worker("perm-x", task=brief(tmp_path), repo=repo.path, tool="codex",
                 options=fake.options())
    exited(home, "perm-x")
    start_worker("perm-o", task=brief(tmp_path), repo=repo.path, permission_mode="plan",
                 options=fake.options())
    exited(home, "perm-o")
    claude_argv, codex_argv, own_argv = (c["argv"] for c in fake.calls())
    assert claude_argv[claude_argv.index("--permission-mode") + 1] == "acceptEdits"
    assert codex_argv[codex_argv.index("-s") + 1] == "workspace-write"
    assert own_argv[own_argv.index("--permission-mode") + 1] == "plan"


def test_the_whole_policy_reaches_the_launch_and_the_registration(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    claude = PermissionPolicy(mode="dontAsk", allowed_tools=["Write", "Bash(git:*)"],
                              disallowed_tools=["WebFetch"], add_dirs=[str(tmp_path)])
    start_worker("pol-c", task=brief(tmp_path), repo=repo.path, policy=claude,
                 options=fake.options())
    exited(home, "pol-c")
    codex = PermissionPolicy(codex_sandbox="workspace-write", codex_approval="on-failure",
                             codex_network=True, add_dirs=[str(tmp_path)])
    start_worker("pol-x", task=brief(tmp_path), repo=repo.path, tool="codex", policy=codex,
                 options=fake.options())
    exited(home, "pol-x")
    claude_argv, codex_argv = (c["argv"] for c in fake.calls())
    assert claude_argv[claude_argv.index("--permission-mode") + 1] == "dontAsk"
    assert {"--allowedTools=Write", "--allowedTools=Bash(git:*)", "--disallowedTools=WebFetch",
            f"--add-dir={tmp_path}"} <= set(claude_argv)
    assert codex_argv[codex_argv.index("-s") + 1] == "workspace-write"
    assert {'approval_policy="on-failure"', "sandbox_workspace_write.network_access=true",
            f'sandbox_workspace_write.writable_roots=["{tmp_path}"]'} <= set(codex_argv)
    with Fleet(home) as fleet:
        assert fleet.state("pol-c").permissions == {
            "mode": "dontAsk", "allowed_tools": ["Write", "Bash(git:*)"],
            "disallowed_tools": ["WebFetch"], "add_dirs": [str(tmp_path)]}
        assert fleet.state("pol-x").permissions == {
            "sandbox": "workspace-write", "approval": "on-failure", "network": True,
            "add_dirs": [str(tmp_path)]}


def test_the_registration_records_the_defaults_a_worker_ran_under(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    start_worker("def-c", task=brief(tmp_path), repo=repo.path, options=fake.options())
    exited(home, "def-c")
    start_worker("def-x", task=brief(tmp_path), repo=repo.path, tool="codex",
                 options=fake.options())
    exited(home, "def-x")
    with Fleet(home) as fleet:
        assert fleet.state("def-c").permissions == {"mode": "bypassPermissions"}
        assert fleet.state("def-x").permissions == {
            "sandbox": "danger-full-access", "approval": "never"}


def test_a_mode_the_tool_does_not_have_is_refused_before_anything_is_made(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    with pytest.raises(SettingsError, match="unknown Codex sandbox 'dontAsk'"):
        start_worker("bad-x", task=brief(tmp_path), repo=repo.path, tool="codex",
                     permission_mode="dontAsk", options=fake.options())
    with pytest.raises(SettingsError, match="unknown permission mode 'read-only'"):
        start_worker("bad-c", task=brief(tmp_path), repo=repo.path,
                     permission_mode="read-only", options=fake.options())
    assert fake.calls() == []
    assert not (repo.path.parent / "repo.fleet").exists()


def test_an_endpoint_worker_config_holds_the_policy_rules(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_TEST_KEY", KEY)
    opts = fake.options(endpoint="http://127.0.0.1:9", key_from="env:FLEET_TEST_KEY")
    policy = PermissionPolicy(mode="dontAsk", allowed_tools=["Write", "Bash(git:*)"],
                              disallowed_tools=["WebFetch"], add_dirs=[str(tmp_path)])
    start_worker("api-rules", task=brief(tmp_path), repo=repo.path, policy=policy, options=opts)
    exited(home, "api-rules")
    settings = json.loads((home / "workers/api-rules/config/settings.json").read_text())
    assert settings["permissions"] == {"allow": ["Write", "Bash(git:*)"], "deny": ["WebFetch"],
                                       "additionalDirectories": [str(tmp_path)]}
    assert "skipDangerousModePermissionPrompt" not in settings
    start_worker("api-plain", task=brief(tmp_path), repo=repo.path, options=opts)
    exited(home, "api-plain")
    plain = json.loads((home / "workers/api-plain/config/settings.json").read_text())
    assert "permissions" not in plain
