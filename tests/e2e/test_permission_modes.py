"""Permission policies on the real CLIs, on every tested release: the flags that
:func:`fleet._launch.claude_policy_args` / :func:`~fleet._launch.codex_policy_args` build (the
ones every headless worker is launched with), run through the harness, with fleet's hooks
journaling what happens. tests/e2e/test_headless_policies.py runs them through `fleet start`."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

import fleet
from fleet._core.events import HookEvent
from fleet._errors import Refused, SettingsError
from fleet._launch import claude_policy_args as claude_args
from fleet._launch import codex_policy_args as codex_args
from fleet._permissions import (
    PermissionPolicy,
    check_headless,
    coordinator_mode,
)

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI
from .harness import (
    AgentRun,
    ClaudeSetup,
    CodexSetup,
    hooks_of,
    install_hooks,
    journal,
    register,
    state_sequence,
)
from .script import bash, call, say, shell

pytestmark = pytest.mark.e2e

ALLOWLIST = PermissionPolicy(mode="dontAsk",
                             allowed_tools=["Bash(git status:*)", "Bash(git log:*)"])


def run_claude(claude: ClaudeSetup, repo: Repo, policy: PermissionPolicy,
               prompt: str = "work") -> AgentRun:
    argv = [str(claude.agents.claude), "-p", prompt, "--output-format", "json",
            *claude_args(policy)]
    claude.trust(repo.path)
    return claude.processes.run(argv, cwd=repo.path, env=claude.env(), timeout=90)


def tool_hooks(worker: str, tool_use_id: str) -> list[str]:
    return [e.hook for e in journal(worker)
            if isinstance(e, HookEvent) and e.get("tool_use_id") == tool_use_id]


WORKER = PermissionPolicy(mode="dontAsk", allowed_tools=["Write", "Bash(git:*)"])


def test_dont_ask_with_an_allowlist_completes_a_task_of_allowed_tools(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    """What a worker does: write a file, commit it, push the branch; the allowlist the skill
    recommends is enough."""
    assert check_headless(WORKER, tool="claude", is_root=True, env=claude.env()) == []
    install_hooks(claude)
    register("w1", repo.path, "claude")
    repo.git("checkout", "-q", "-b", "fleet/w1")
    anthropic.script([
        call("Write", {"file_path": str(repo.path / "notes.txt"), "content": "hello\n"}),
        bash("git add notes.txt && git commit -q -m 'add notes'"),
        bash("git push -q -u origin HEAD"),
        say("Pushed.\nFLEET_WORKER_DONE: notes committed and pushed"),
    ])

    run = run_claude(claude, repo, WORKER)

    assert run.returncode == 0, run.describe()
    assert run.result["is_error"] is False
    assert run.result["permission_denials"] == []
    assert repo.git("log", "-1", "--format=%s", "origin/fleet/w1").strip() == "add notes"
    events = journal("w1")
    assert hooks_of(events).count("PostToolUse") == 3
    assert {e.get("permission_mode") for e in events
            if isinstance(e, HookEvent) and e.hook == "PostToolUse"} == {"dontAsk"}
    assert state_sequence("w1", events)[-1] == ("done", "claimed")


def test_dont_ask_denies_a_tool_outside_the_list_without_hanging(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    install_hooks(claude)
    register("w1", repo.path, "claude")
    anthropic.script([bash("git status --short"), bash("touch outside.txt"),
                      say("Could not write.\nFLEET_WORKER_BLOCKED: touch was denied")])

    run = run_claude(claude, repo, ALLOWLIST)

    # It did not wait: the denial came back to the model at once and the run ended.
    assert run.returncode == 0, run.describe()
    assert run.seconds < 60
    assert not (repo.path / "outside.txt").exists()
    (denial,) = run.result["permission_denials"]
    assert denial["tool_name"] == "Bash"
    assert denial["tool_input"]["command"] == "touch outside.txt"
    # No hook fleet journals says a word about the denied call: no PostToolUse, no
    # PostToolUseFailure, no PermissionRequest (only PreToolUse fires, which fleet does not
    # install). The allowed call before it is there. Only the worker's own envelope, and the
    # result's permission_denials, tell the fold.
    assert tool_hooks("w1", denial["tool_use_id"]) == []
    events = journal("w1")
    (allowed,) = [e for e in events if isinstance(e, HookEvent) and e.hook == "PostToolUse"]
    assert allowed.get("tool_use_id") not in (None, denial["tool_use_id"])
    assert "PermissionRequest" not in hooks_of(events)
    assert "PostToolUseFailure" not in hooks_of(events)
    assert ("blocked", "worker") in state_sequence("w1", events)


def test_a_prompting_mode_is_refused_because_the_cli_denies_instead_of_asking(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    """check_headless refuses default; the real CLI shows why: in -p it asks nobody, denies the
    write, and still reports success."""
    policy = PermissionPolicy(mode="default")
    with pytest.raises(Refused, match="permission mode default"):
        check_headless(policy, tool="claude", is_root=True, env=claude.env())
    anthropic.script([bash("touch made.txt"), say("Done.")])

    run = run_claude(claude, repo, policy)

    assert run.returncode == 0, run.describe()
    assert run.result["is_error"] is False
    assert [d["tool_input"]["command"] for d in run.result["permission_denials"]] == [
        "touch made.txt"]
    assert not (repo.path / "made.txt").exists()


def test_root_bypass_needs_is_sandbox_as_the_warning_says(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    env = claude.env()
    del env["IS_SANDBOX"]
    policy = PermissionPolicy(mode="bypassPermissions")
    (warning,) = check_headless(policy, tool="claude", is_root=True, env=env)
    assert "IS_SANDBOX=1" in warning
    anthropic.script([say("never")])
    argv = [str(claude.agents.claude), "-p", "hi", "--output-format", "json",
            *claude_args(policy)]

    run = claude.processes.run(argv, cwd=repo.path, env=env, timeout=60)

    assert run.returncode == 1
    assert "cannot be used with root" in run.stderr
    assert anthropic.recorded("main") == []


@pytest.mark.parametrize("mode", ["bypassPermissions", "dontAsk"])
def test_a_coordinator_command_reads_its_sessions_mode(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, mode: str
) -> None:
    """What the coordinator's Bash tool sees is enough to know the session's mode: a command
    run from inside the session reports it through coordinator_mode."""
    probe = repo.path / "mode.txt"
    code = ("import os, sys; sys.path[:0] = [os.environ['FLEET_SRC']]; "
            "from fleet._permissions import coordinator_mode; "
            "print(coordinator_mode(os.environ))")
    anthropic.script([bash(f"{shlex.quote(sys.executable)} -c {shlex.quote(code)} > mode.txt"),
                      say("ok")])

    run = claude.headless("which mode", cwd=repo.path, permission_mode=mode,
                          args=["--allowedTools", "Bash"],
                          env={"FLEET_SRC": str(Path(fleet.__file__).parents[1])})

    assert run.returncode == 0, run.describe()
    assert run.result["permission_denials"] == []
    assert probe.read_text() == f"{mode}\n"
    assert coordinator_mode({}) is None


def _commit_script(openai: FakeOpenAI) -> None:
    # The push needs the local bare origin (a write outside the worktree); the curl needs the
    # network: the fake server itself, on 127.0.0.1.
    openai.script([
        shell("echo x > f.txt && git add f.txt && git commit -qm 'add f' && echo COMMITTED; "
              "git push -q origin HEAD:refs/heads/perm-probe && echo PUSHED; "
              f"curl -s -o /dev/null -w 'HTTP=%{{http_code}}' {openai.url}/v1/models; echo"),
        say("tried"),
    ])


def _outputs(run: AgentRun) -> str:
    return " ".join(str(e.get("item", {}).get("aggregated_output", "")) for e in run.events)


def test_codex_full_access_commits_and_pushes_and_workspace_write_cannot(
    codex: CodexSetup, openai: FakeOpenAI, repo: Repo
) -> None:
    full = PermissionPolicy()
    assert check_headless(full, tool="codex", is_root=True) == []
    _commit_script(openai)
    run = codex.exec("commit", cwd=repo.path, args=codex_args(full))
    assert run.returncode == 0, run.describe()
    assert repo.git("log", "-1", "--format=%s").strip() == "add f"
    assert "PUSHED" in _outputs(run) and "HTTP=200" in _outputs(run)

    caged = PermissionPolicy(codex_sandbox="workspace-write")
    assert any(".git read-only and blocks the network" in w
               for w in check_headless(caged, tool="codex", is_root=True))
    repo.git("reset", "-q", "--hard", "HEAD~1")
    run = codex.exec("commit", cwd=repo.path, args=codex_args(caged))
    assert run.returncode == 0, run.describe()
    assert repo.git("log", "-1", "--format=%s").strip() != "add f"
    assert "index.lock" in _outputs(run) and "COMMITTED" not in _outputs(run)
    assert "PUSHED" not in _outputs(run) and "HTTP=000" in _outputs(run)

    networked = PermissionPolicy(codex_sandbox="workspace-write", codex_network=True)
    run = codex.exec("commit", cwd=repo.path, args=codex_args(networked))
    assert run.returncode == 0, run.describe()
    assert "HTTP=200" in _outputs(run) and "COMMITTED" not in _outputs(run)


def test_codex_untrusted_is_refused_as_codex_itself_refuses_it(
    codex: CodexSetup, openai: FakeOpenAI, repo: Repo
) -> None:
    with pytest.raises(SettingsError, match="no longer supported"):
        PermissionPolicy(codex_approval="untrusted")
    openai.script([shell("touch made.txt"), say("never")])

    run = codex.exec("go", cwd=repo.path, args=["-c", 'approval_policy="untrusted"'])

    assert run.returncode == 1
    assert "no longer supported" in run.stderr
    assert openai.recorded("main") == []
    assert not (repo.path / "made.txt").exists()


def test_codex_asking_for_approval_runs_without_waiting(
    codex: CodexSetup, openai: FakeOpenAI, repo: Repo
) -> None:
    """on-request in codex exec: nobody is asked; what the read-only sandbox blocks fails and
    the run ends, as the warning says."""
    policy = PermissionPolicy(codex_sandbox="read-only", codex_approval="on-request")
    assert any("fails instead of asking" in w
               for w in check_headless(policy, tool="codex", is_root=True))
    openai.script([shell("echo x > made.txt; echo AFTER"), say("done")])

    run = codex.exec("go", cwd=repo.path, args=codex_args(policy), timeout=60)

    assert run.returncode == 0, run.describe()
    assert not (repo.path / "made.txt").exists()
    assert "Read-only file system" in _outputs(run) and "AFTER" in _outputs(run)


def test_the_prompt_after_the_rules_is_read_as_the_prompt(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    """fleet puts the prompt last: the rule flags take many values, so each is one
    ``--flag=value`` (``--allowedTools Write PROMPT`` would read the prompt as a tool)."""
    anthropic.script([say("Read it.")])
    argv = [str(claude.agents.claude), "-p", "--output-format", "json",
            *claude_args(WORKER), "the-prompt-after-the-rules"]
    claude.trust(repo.path)
    run = claude.processes.run(argv, cwd=repo.path, env=claude.env(), timeout=90)
    assert run.returncode == 0, run.describe()
    assert any(b"the-prompt-after-the-rules" in r.body for r in anthropic.recorded("main"))


def test_the_rules_fleet_writes_into_a_config_dir_are_the_ones_claude_reads(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo
) -> None:
    """An endpoint worker's settings.json gets the policy's rules beside the flags
    (:func:`fleet.adapters._headless_run.config_rules`); with no flag at all, Claude Code runs
    the allowed tool and denies the rest from that file alone."""
    from fleet.adapters._headless_run import LaunchRecord, config_rules

    record = LaunchRecord(worker="w1", tool="claude", worktree=str(repo.path), branch="b",
                          allowed_tools=("Write",), disallowed_tools=("Bash(touch:*)",))
    settings = claude.settings()
    settings["permissions"] = config_rules(record)
    claude.settings_file.write_text(json.dumps(settings))
    anthropic.script([
        call("Write", {"file_path": str(repo.path / "allowed.txt"), "content": "x\n"}),
        bash("touch denied.txt"),
        say("ok"),
    ])

    run = claude.headless("work", cwd=repo.path, permission_mode="dontAsk")

    assert run.returncode == 0, run.describe()
    assert (repo.path / "allowed.txt").read_text() == "x\n"
    assert not (repo.path / "denied.txt").exists()
    assert [d["tool_name"] for d in run.result["permission_denials"]] == ["Bash"]
