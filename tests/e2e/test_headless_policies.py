"""Permission policies through `fleet start`, on the real Claude Code and Codex of every tested
release: the mode each worker is launched in, what its state says when the policy denies a
tool, and, for a worker that dies, the agent's own reason in one line."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._core.attention import next_step

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI
from .harness import fleet_argv, fleet_cli, hooks_of, journal
from .script import bash, call, say, shell
from .test_headless_workers import (  # noqa: F401  (fixtures)
    _reap_workers,
    brief,
    coordinator_env,
    exits,
    host_home,
)

pytestmark = pytest.mark.e2e

ROOT_REFUSAL = "cannot be used with root/sudo privileges"


def worktree(repo: Repo, worker: str) -> Path:
    return repo.path.parent / f"{repo.path.name}.fleet" / worker


def start(worker: str, repo: Repo, task: Path, url: str, *options: str,
          env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return fleet_cli("start", worker, "--task", str(task), "--repo", str(repo.path),
                     "--endpoint", url, "--key-from", "env:FLEET_TEST_KEY", "--model", "m",
                     "--retries", "0", *options, env=env)


def test_a_dont_ask_worker_with_an_allowlist_finishes_and_says_how_it_ran(
    anthropic: FakeAnthropic, coordinator_env: dict[str, str], repo: Repo,  # noqa: F811
    tmp_path: Path,
) -> None:
    notes = worktree(repo, "da") / "notes.txt"
    anthropic.script([
        call("Write", {"file_path": str(notes), "content": "hello\n"}),
        bash("git add notes.txt && git commit -q -m 'add notes'"),
        say("Committed.\nFLEET_WORKER_DONE: notes committed"),
    ], key="task-da")
    start("da", repo, brief(tmp_path, "da", "task-da: add notes.\n"), anthropic.url,
          "--permission-mode", "dontAsk", "--allowed-tools", "Write,Bash(git:*)",
          env=coordinator_env)

    (done,) = exits("da")

    assert done.denials == () and done.is_error is False
    with Fleet() as fleet:
        state = fleet.state("da")
    assert (state.state, state.reason) == ("done", "claimed")
    assert state.permissions == {"mode": "dontAsk", "allowed_tools": ["Write", "Bash(git:*)"]}
    assert repo.git("log", "-1", "--format=%s", "fleet/da") == "add notes"
    # The agent itself ran in the mode fleet recorded.
    assert {e.get("permission_mode") for e in journal("da")
            if getattr(e, "hook", None) == "PostToolUse"} == {"dontAsk"}
    status = fleet_cli("status", env=coordinator_env).stdout
    assert "dontAsk +2 tools" in status
    report = fleet_cli("report", env=coordinator_env).stdout
    assert "dontAsk +2 tools" in report


def test_a_dont_ask_worker_denied_a_tool_is_blocked_by_its_policy_without_hanging(
    anthropic: FakeAnthropic, coordinator_env: dict[str, str], repo: Repo,  # noqa: F811
    tmp_path: Path,
) -> None:
    anthropic.script([
        bash("touch outside.txt"),
        say("The allowlist has no touch.\nFLEET_WORKER_BLOCKED: touch was denied"),
    ], key="task-dd")
    began = time.monotonic()
    start("dd", repo, brief(tmp_path, "dd", "task-dd: make a file.\n"), anthropic.url,
          "--permission-mode", "dontAsk", "--allowed-tools", "Bash(git:*)",
          env=coordinator_env)

    woke = json.loads(fleet_cli("wait", "dd", "--timeout", "120", "--json",
                                env=coordinator_env).stdout)

    assert time.monotonic() - began < 90
    (attention,) = woke["attention"]
    # The Stop hook may wake the coordinator on the worker's own BLOCKED a moment before the
    # supervisor journals the run's end with its denials: the same stop, under the same mark.
    assert attention["state"] == "blocked"
    assert attention["reason"] in ("worker", "permission_denied")
    (done,) = exits("dd")
    assert done.denials == ("Bash(touch outside.txt)",)
    (shown,) = json.loads(fleet_cli("status", "dd", "--json", env=coordinator_env).stdout)
    assert (shown["state"], shown["reason"]) == ("blocked", "permission_denied")
    assert shown["mark"] == attention["mark"]
    assert shown["denials"] == ["Bash(touch outside.txt)"]
    with Fleet() as fleet:
        state = fleet.state("dd")
    assert "denied Bash(touch outside.txt)" in next_step(state)
    assert "--allowed-tools" in next_step(state)
    assert not (worktree(repo, "dd") / "outside.txt").exists()
    # No hook said a word of the denial: only the run's result did.
    assert "PermissionRequest" not in hooks_of(journal("dd"))


@pytest.mark.skipif(os.geteuid() != 0, reason="Claude Code refuses bypassPermissions as root only")
def test_a_worker_that_dies_says_why_in_one_line(
    anthropic: FakeAnthropic, coordinator_env: dict[str, str], repo: Repo,  # noqa: F811
    tmp_path: Path,
) -> None:
    """As root, bypassPermissions needs IS_SANDBOX=1: fleet warns before starting, sets
    nothing, and the worker's death says Claude Code's own reason in wait, status and report."""
    anthropic.script([say("never asked")], key="task-root")
    env = {k: v for k, v in {**os.environ, **coordinator_env}.items() if k != "IS_SANDBOX"}
    task = brief(tmp_path, "root", "task-root: anything.\n")
    started = subprocess.run(
        [*fleet_argv(), "start", "root", "--task", str(task), "--repo", str(repo.path),
         "--endpoint", anthropic.url, "--key-from", "env:FLEET_TEST_KEY", "--model", "m"],
        capture_output=True, text=True, env=env, timeout=60, check=False)
    assert started.returncode == 0, started.stderr
    assert "IS_SANDBOX=1" in started.stderr and "sets nothing" in started.stderr

    woke = json.loads(fleet_cli("wait", "root", "--timeout", "120", "--json", env=env).stdout)

    (attention,) = woke["attention"]
    assert (attention["state"], attention["reason"]) == ("gone", "exited:1")
    assert ROOT_REFUSAL in attention["why"] and "\n" not in attention["why"]
    assert ROOT_REFUSAL in attention["next"]
    status = fleet_cli("status", env=env).stdout
    assert "exited:1 · --dangerously-skip-permissions" in status
    assert ROOT_REFUSAL in fleet_cli("report", "--json", env=env).stdout
    assert anthropic.recorded("main") == []
    # Told that the machine is a sandbox, fleet sets IS_SANDBOX=1 for the worker, and it runs.
    anthropic.script([say("Ran.\nFLEET_WORKER_DONE: ran as root")], key="task-boxed")
    boxed = brief(tmp_path, "boxed", "task-boxed: anything.\n")
    started = subprocess.run(
        [*fleet_argv(), "start", "boxed", "--task", str(boxed), "--repo", str(repo.path),
         "--endpoint", anthropic.url, "--key-from", "env:FLEET_TEST_KEY", "--model", "m",
         "--sandboxed"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert started.returncode == 0 and "IS_SANDBOX" not in started.stderr, started.stderr
    exits("boxed")
    with Fleet() as fleet:
        assert fleet.state("boxed").state == "done"


def test_codex_workers_run_in_the_sandbox_fleet_records(
    openai: FakeOpenAI, coordinator_env: dict[str, str], repo: Repo,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The default sandbox lets a Codex worker commit and push; workspace-write, which fleet
    warns about, keeps .git read-only."""
    for worker in ("full", "caged"):
        openai.script([
            shell(f"echo x > f.txt && git add f.txt && git commit -qm 'add f' && "
                  f"git push -q origin HEAD:refs/heads/probe-{worker}"),
            say(f"tried\nFLEET_WORKER_DONE: {worker}"),
        ], key=f"task-{worker}")
    cx = ["--tool", "codex"]
    start("full", repo, brief(tmp_path, "full", "task-full: commit.\n"), openai.url, *cx,
          env=coordinator_env)
    caged = start("caged", repo, brief(tmp_path, "caged", "task-caged: commit.\n"), openai.url,
                  *cx, "--permission-mode", "workspace-write", env=coordinator_env)
    assert ".git read-only" in caged.stderr

    exits("full")
    exits("caged")

    with Fleet() as fleet:
        full, boxed = fleet.state("full"), fleet.state("caged")
    assert full.permissions == {"sandbox": "danger-full-access", "approval": "never"}
    assert boxed.permissions == {"sandbox": "workspace-write", "approval": "never"}
    assert repo.git("log", "-1", "--format=%s", "fleet/full") == "add f"
    assert "probe-full" in subprocess.run(
        ["git", "--git-dir", str(repo.remote), "branch"], capture_output=True, text=True,
        check=True).stdout
    assert repo.git("rev-list", "--count", "main..fleet/caged") == "0"
    assert "danger-full-access" in fleet_cli("status", env=coordinator_env).stdout
