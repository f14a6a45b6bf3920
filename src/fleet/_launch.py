"""Every agent command line fleet builds: headless runs, app-hosted workers (Superset, herdr)
and clausona's fleet rules. The launch rules are written here once and each host calls them:

- a profile runs through ``clausona run <profile> --``, the tool's own arguments after the
  ``--`` (only clausona puts a worker on the profile chosen, whatever config dir it inherits);
- Claude gets ``--permission-mode`` stated, never inherited; Codex a sandbox (``-s``) and no
  approval prompt;
- ``--strict-mcp-config`` where a worker must not load the user's MCP servers, and API
  profiles a short tool list (their context windows are small).

Pure functions of their arguments: no file, no environment, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Final

from fleet._core.routing import Profile, clausona_run_prefix
from fleet._permissions import DEFAULT_CODEX_SANDBOX, DEFAULT_MODE, PermissionPolicy

#: Short tool list for API profiles, whose context windows are small (clausona fleet-core).
API_TOOLS: Final = "--tools=Bash,Read,Edit,Write,Grep,Glob"
STRICT_MCP: Final = "--strict-mcp-config"
#: The permission mode of a Claude Code worker hosted in an app when nothing chose one: the one
#: where a person watching the app approves each action. Stated, never inherited: Claude Code
#: 2.1.332 made auto mode its default, whose screens and dialogs differ from release to release.
APP_PERMISSION_MODE: Final = "default"
def clausona_run(profile: str, *, clausona: str = "clausona") -> list[str]:
    """``clausona run <profile> --`` with this clausona binary: the tool's own arguments
    follow. The words are the routing plan's (:func:`fleet._core.routing.clausona_run_prefix`),
    so a plan row and a launch never disagree."""
    _, *rest = clausona_run_prefix(profile)
    return [clausona, *rest]


def on_profile(
    profile: str | None, tool: str, args: Sequence[str], *, clausona: str = "clausona"
) -> list[str]:
    """``clausona run <profile> -- <args>`` for a profile, else ``<tool> <args>``."""
    if profile:
        return [*clausona_run(profile, clausona=clausona), *args]
    return [tool, *args]


# -- app-hosted workers (Superset, herdr) ---------------------------------------------------


def app_args(
    *,
    tool: str,
    permission_mode: str | None = None,
    model: str | None = None,
    effort: str | None = None,
    api: bool = False,
    strict_mcp: bool = True,
    extra: Sequence[str] = (),
) -> list[str]:
    """The agent arguments of an interactive worker in an app (after ``clausona run ... --``),
    the same for every app (Superset's agent configs, herdr's panes).

    Claude: ``--permission-mode`` always stated (``APP_PERMISSION_MODE`` when none is given:
    an inherited default changes between releases), ``--model``/``--effort`` when given,
    ``--strict-mcp-config`` (else a worktree below a ``.mcp.json`` stops at Claude Code's "new
    MCP servers found" question, and the servers' tools fill the context), and for an ``api``
    profile the short tool list ``API_TOOLS`` (small context windows). A flag already in
    ``extra`` is not repeated."""
    args: list[str] = []
    if tool == "claude":
        args += ["--permission-mode", permission_mode or APP_PERMISSION_MODE]
        if model:
            args += ["--model", model]
        if effort:
            args += ["--effort", effort]
        if strict_mcp and STRICT_MCP not in extra:
            args.append(STRICT_MCP)
        if api and not any(a == API_TOOLS or a.startswith("--tools") for a in extra):
            args.append(API_TOOLS)
    elif tool == "codex" and model:
        args += ["-m", model]
    return [*args, *extra]


def superset_config_args(profile: str | None, tool: str, args: Sequence[str]) -> list[str]:
    """The args of a Superset worker config (its command is clausona): ``run <profile> --``
    and the agent's ``args`` (from :func:`app_args`, which states ``--strict-mcp-config`` for
    Claude; added here too for args built otherwise)."""
    extra = list(args)
    if tool == "claude" and STRICT_MCP not in extra:
        extra.append(STRICT_MCP)
    return ["run", profile or "", "--", *extra]


# -- headless runs (claude -p, codex exec) --------------------------------------------------


def rule_args(
    allowed_tools: Sequence[str], disallowed_tools: Sequence[str], add_dirs: Sequence[str]
) -> list[str]:
    """Claude Code's tool rules and extra directories, one ``--flag=value`` each: these flags
    take many values, so ``--allowedTools Write PROMPT`` reads the prompt as a second tool
    (seen on 2.1.197 and 2.1.332), while ``--allowedTools=Write PROMPT`` does not."""
    return [
        *(f"--allowedTools={rule}" for rule in allowed_tools),
        *(f"--disallowedTools={rule}" for rule in disallowed_tools),
        *(f"--add-dir={directory}" for directory in add_dirs),
    ]


def claude_policy_args(policy: PermissionPolicy) -> list[str]:
    """Claude Code's flags for a permission policy: the mode stated (never inherited: Claude
    Code's own default differs from release to release), then one ``--flag=value`` per rule."""
    return ["--permission-mode", policy.mode or DEFAULT_MODE,
            *rule_args(policy.allowed_tools, policy.disallowed_tools, policy.add_dirs)]


def _toml_string(value: str) -> str:
    # A TOML basic string is a JSON string for all text fleet passes (no control characters).
    return json.dumps(value)


def codex_policy_args(policy: PermissionPolicy) -> list[str]:
    """``codex exec``'s flags for a permission policy: the sandbox and an approval policy that
    asks nobody (``-c`` overrides win over config.toml). Codex has no tool allowlist; extra
    directories become writable roots of workspace-write."""
    args = ["-s", policy.codex_sandbox or DEFAULT_CODEX_SANDBOX,
            "-c", f"approval_policy={_toml_string(policy.codex_approval or 'never')}"]
    if policy.add_dirs:
        roots = ", ".join(_toml_string(d) for d in policy.add_dirs)
        args += ["-c", f"sandbox_workspace_write.writable_roots=[{roots}]"]
    if policy.codex_network:
        args += ["-c", "sandbox_workspace_write.network_access=true"]
    return args


def headless_claude_argv(
    *,
    claude: str,
    profile: str | None,
    clausona: str,
    policy: PermissionPolicy,
    model: str | None,
    effort: str | None,
    resume: str | None,
) -> list[str]:
    # stream-json: every turn's result, so a claim made before automatic turns (Claude Code
    # answering its background tasks' notifications) is still read from the run's output.
    args = ["-p", "--output-format", "stream-json", "--verbose", *claude_policy_args(policy)]
    if model:
        args += ["--model", model]
    if effort:
        args += ["--effort", effort]
    if resume:
        args += ["--resume", resume]
    return on_profile(profile, claude, args, clausona=clausona)


def headless_codex_argv(
    *,
    codex: str,
    profile: str | None,
    clausona: str,
    policy: PermissionPolicy,
    model: str | None,
    effort: str | None,
    resume: str | None,
) -> list[str]:
    args = ["exec", "--json", "--disable", "unbounded_connection_retries",
            *codex_policy_args(policy)]
    if model:
        args += ["-m", model]
    if effort:
        args += ["-c", f"model_reasoning_effort={_toml_string(effort)}"]
    if resume:
        args += ["resume", resume]
    return on_profile(profile, codex, args, clausona=clausona)


# -- clausona's fleet rules -----------------------------------------------------------------


def profile_tool_args(
    profile: Profile,
    *,
    model: str | None = None,
    effort: str | None = None,
    permissions: Mapping[str, str] | None = None,
    strict_mcp: bool = True,
) -> list[str]:
    """The agent's own arguments for an interactive worker on ``profile``, following clausona's
    fleet rules: Claude gets ``--permission-mode``, ``--strict-mcp-config``, ``--model``,
    ``--effort`` (and a short ``--tools`` list on API profiles); Codex gets ``-s``/``-a`` from
    the permissions, ``-m`` and a reasoning effort, with update checks and MCP servers off."""
    permissions = permissions or {}
    args: list[str] = []
    if profile.tool == "claude":
        if permissions.get("claude"):
            args += ["--permission-mode", permissions["claude"]]
        if strict_mcp:
            args.append(STRICT_MCP)
        if model:
            args += ["--model", model]
        if effort:
            args += ["--effort", effort]
        if profile.is_api:
            args.append(API_TOOLS)
        return args
    args += ["-s", permissions.get("codexSandbox") or "workspace-write"]
    if permissions.get("codex"):
        args += ["-a", permissions["codex"]]
    args += ["-c", "check_for_update_on_startup=false"]
    if strict_mcp:
        args += ["-c", "mcp_servers={}"]
    if model:
        args += ["-m", model]
    if effort:
        args += ["-c", f"model_reasoning_effort={effort}"]
    return args


__all__ = [
    "API_TOOLS",
    "APP_PERMISSION_MODE",
    "STRICT_MCP",
    "app_args",
    "claude_policy_args",
    "clausona_run",
    "codex_policy_args",
    "headless_claude_argv",
    "headless_codex_argv",
    "on_profile",
    "profile_tool_args",
    "superset_config_args",
]
