"""Every agent command line comes from fleet._launch: each host's, as it was, and one set of
launch rules for every app host (Superset's configs, herdr's panes)."""

from __future__ import annotations

from pathlib import Path

from fleet._core.routing import clausona_run_prefix
from fleet._launch import (
    API_TOOLS,
    APP_PERMISSION_MODE,
    STRICT_MCP,
    app_args,
    clausona_run,
    headless_claude_argv,
    headless_codex_argv,
)
from fleet._permissions import PermissionPolicy
from fleet.adapters._base import LaunchSpec, launch_argv
from fleet.adapters.superset import config_args


def spec(**kw: object) -> LaunchSpec:
    return LaunchSpec(worker="w1", brief=Path("brief.md"), **kw)  # type: ignore[arg-type]


def test_a_profile_runs_through_the_plans_clausona_words() -> None:
    assert clausona_run("claude:work", clausona="/bin/cl") == [
        "/bin/cl", *clausona_run_prefix("claude:work")[1:]
    ]
    assert launch_argv(spec(profile="claude:work", model="sonnet"), clausona="/bin/cl") == [
        "/bin/cl", "run", "claude:work", "--", "--permission-mode", "default", "--model", "sonnet",
        "--strict-mcp-config",
    ]
    assert launch_argv(spec(tool="codex", model="gpt-5")) == ["codex", "-m", "gpt-5"]


def test_a_superset_config_states_strict_mcp_for_claude_once() -> None:
    args = config_args(spec(profile="claude:work", extra_args=("--strict-mcp-config",)))
    assert args == ["run", "claude:work", "--", "--permission-mode", "default",
                    "--strict-mcp-config"]
    assert config_args(spec(tool="codex", profile="codex:x")) == ["run", "codex:x", "--"]


def test_app_claude_workers_state_the_permission_mode_mcp_model_effort_and_api_tools() -> None:
    assert app_args(tool="claude") == ["--permission-mode", APP_PERMISSION_MODE, STRICT_MCP]
    assert app_args(tool="claude", permission_mode="acceptEdits", model="opus", effort="high",
                    api=True) == [
        "--permission-mode", "acceptEdits", "--model", "opus", "--effort", "high", STRICT_MCP,
        API_TOOLS,
    ]
    # a flag the caller already gives is not repeated
    assert app_args(tool="claude", api=True, extra=(STRICT_MCP, "--tools=Read")) == [
        "--permission-mode", APP_PERMISSION_MODE, STRICT_MCP, "--tools=Read",
    ]


def test_herdr_and_superset_get_the_same_claude_args() -> None:
    s = spec(profile="claude:glm", model="glm-5", effort="high", permission_mode="plan", api=True)
    herdr_args = launch_argv(s, clausona="clausona")[4:]
    assert config_args(s)[3:] == herdr_args
    assert herdr_args == ["--permission-mode", "plan", "--model", "glm-5", "--effort", "high",
                          STRICT_MCP, API_TOOLS]


def test_headless_command_lines() -> None:
    assert headless_claude_argv(
        claude="claude", profile=None, clausona="", policy=PermissionPolicy(),
        model="m", effort=None, resume="s1",
    ) == ["claude", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode",
          "bypassPermissions", "--model", "m", "--resume", "s1"]
    assert headless_codex_argv(
        codex="codex", profile="codex:x", clausona="/c",
        policy=PermissionPolicy(codex_sandbox="read-only"), model=None, effort="high",
        resume=None,
    ) == ["/c", "run", "codex:x", "--", "exec", "--json", "--disable",
          "unbounded_connection_retries", "-s", "read-only", "-c", 'approval_policy="never"',
          "-c", 'model_reasoning_effort="high"']
