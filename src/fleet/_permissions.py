"""A worker's permission policy: which mode it runs in, which tools it may use, and whether a
headless run in that mode can work at all.

Pure: values and functions, no I/O except :func:`coordinator_mode`, which reads the
coordinator's own transcript when asked to.

What the real CLIs do (observed offline on Claude Code 2.1.197 and 2.1.332, Codex 0.171.0):

- ``claude -p`` never waits for a person. A tool call that needs approval is denied at once:
  in ``default`` and ``plan`` any command that writes is denied, in ``acceptEdits`` only file
  edits (and edit-like commands such as ``touch``) run, in ``dontAsk`` everything outside
  ``--allowedTools`` is denied. The run still exits 0 with ``is_error: false``; the denials are
  listed in the result's ``permission_denials`` and no hook reports them (PreToolUse fires,
  then nothing: no PostToolUse, no PostToolUseFailure). So these modes do not hang a headless
  worker: they leave it unable to do its task while it looks successful. The exception, on
  2.1.332: in ``default`` (and ``acceptEdits``) a call that needs approval first runs the
  PermissionRequest hook and waits for its decision, so a coordinator can answer
  (``--answer coordinator``, :mod:`fleet._answer`); 2.1.197 runs no such hook in ``-p``.
- 2.1.332 runs ``plan`` through auto mode's server-side check; behind a custom endpoint it
  exits 1 ("Auto mode can't check actions in this session").
- As root, ``bypassPermissions`` exits 1 before any request unless ``IS_SANDBOX=1``
  ("--dangerously-skip-permissions cannot be used with root/sudo privileges").
- The mode a session runs in is in its transcript, ``<config dir>/projects/*/<session
  id>.jsonl``, as ``permissionMode`` on each user entry (and ``permission-mode`` entries); a
  switch (shift+tab) shows there from the next prompt on, which is the turn a command runs in;
  ``CLAUDE_CODE_SESSION_ID`` and ``CLAUDECODE=1`` are in the Bash tool's environment. Neither
  the environment nor the session status file (``sessions/<pid>.json``) holds the mode.
- Codex ``workspace-write`` keeps ``.git`` read-only (even under ``writable_roots``), so a
  worker cannot commit, and blocks the network (127.0.0.1 too) unless
  ``sandbox_workspace_write.network_access=true``; ``danger-full-access`` (or
  ``--dangerously-bypass-approvals-and-sandbox``) can. ``codex exec`` never waits for an
  approval: with ``on-request`` or ``on-failure`` a blocked command just fails;
  ``untrusted`` makes Codex exit 1 ("no longer supported").
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from fleet._errors import Refused, SettingsError

CLAUDE_MODES: Final = ("default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions")
#: Modes in which a headless worker can do its work without a person.
HEADLESS_MODES: Final = ("bypassPermissions", "dontAsk")
#: Modes in which a tool that needs approval is denied, since nobody can answer.
PROMPTING_MODES: Final = ("acceptEdits", "default", "plan")
CODEX_SANDBOXES: Final = ("read-only", "workspace-write", "danger-full-access")
CODEX_APPROVALS: Final = ("on-failure", "on-request", "never")
#: Approval policies Codex itself refuses (0.171.0 exits 1: "no longer supported").
CODEX_GONE_APPROVALS: Final = ("untrusted",)
DEFAULT_MODE: Final = "bypassPermissions"
#: A headless Codex worker's sandbox when nothing chose one: the one in which it can commit
#: and push (workspace-write keeps .git read-only), caged by its worktree like Claude's.
DEFAULT_CODEX_SANDBOX: Final = "danger-full-access"
#: A Claude permission mode, or a Codex sandbox, as the Codex sandbox it means (a mode given
#: once for workers of either tool).
CODEX_SANDBOX_OF: Final = {
    "bypassPermissions": "danger-full-access",
    "danger-full-access": "danger-full-access",
    "workspace-write": "workspace-write",
    "read-only": "read-only",
    "plan": "read-only",
}


def _tools(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class PermissionPolicy:
    """How a worker may act. ``mode`` is Claude Code's permission mode; ``codex_sandbox`` and
    ``codex_approval`` are Codex's; ``None`` leaves the agent's own default (Claude) or
    fleet's full-access default (Codex)."""

    mode: str | None = None
    allowed_tools: tuple[str, ...] = attrs.field(default=(), converter=_tools)
    disallowed_tools: tuple[str, ...] = attrs.field(default=(), converter=_tools)
    add_dirs: tuple[str, ...] = attrs.field(default=(), converter=_tools)
    codex_sandbox: str | None = None
    codex_approval: str | None = None
    #: workspace-write only: let commands reach the network (the sandbox blocks it, loopback
    #: included, unless this is set).
    codex_network: bool = False

    def __attrs_post_init__(self) -> None:
        if self.mode is not None and self.mode not in CLAUDE_MODES:
            raise SettingsError(
                f"unknown permission mode {self.mode!r} (known: {', '.join(CLAUDE_MODES)})")
        if self.codex_sandbox is not None and self.codex_sandbox not in CODEX_SANDBOXES:
            raise SettingsError(f"unknown Codex sandbox {self.codex_sandbox!r} "
                                f"(known: {', '.join(CODEX_SANDBOXES)})")
        if self.codex_approval in CODEX_GONE_APPROVALS:
            raise SettingsError(f"Codex approval policy {self.codex_approval!r} is no longer "
                                f"supported by Codex (use {', '.join(CODEX_APPROVALS)})")
        if self.codex_approval is not None and self.codex_approval not in CODEX_APPROVALS:
            raise SettingsError(f"unknown Codex approval policy {self.codex_approval!r} "
                                f"(known: {', '.join(CODEX_APPROVALS)})")
        for name in (*self.allowed_tools, *self.disallowed_tools, *self.add_dirs):
            if not name.strip() or "\n" in name or "\x00" in name:
                raise SettingsError(f"invalid tool rule or directory {name!r}")


def split_rules(values: Iterable[str]) -> tuple[str, ...]:
    """Tool rules from repeated options, each possibly comma-separated, as Claude Code takes
    them (``Bash(git status:*),Read``). A comma inside parentheses stays in its rule."""
    out: list[str] = []
    for value in values:
        depth, start = 0, 0
        for i, ch in enumerate(value):
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth = max(0, depth - 1)
            elif ch == "," and depth == 0:
                out.append(value[start:i])
                start = i + 1
        out.append(value[start:])
    return tuple(rule.strip() for rule in out if rule.strip())


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return split_rules([value])
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return split_rules(value)
    raise SettingsError(f"{where} must be text or a list of texts")


_FIELDS: Final = {
    "mode": "mode", "claude": "mode", "allowedTools": "allowed_tools",
    "disallowedTools": "disallowed_tools", "addDirs": "add_dirs",
    "codexSandbox": "codex_sandbox", "codex": "codex_approval",
}


def _layer(raw: Any, where: str, *, tables: bool = False) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{where} must be an object")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if tables and key in ("profiles", "kinds"):
            continue
        field = _FIELDS.get(key)
        if field is None:
            raise SettingsError(
                f"{where}: unknown key {key!r} (known: {', '.join(sorted(_FIELDS))})")
        if field in ("allowed_tools", "disallowed_tools", "add_dirs"):
            out[field] = _str_list(value, f"{where}.{key}")
        elif isinstance(value, str) and value.strip():
            out[field] = value.strip()
        else:
            raise SettingsError(f"{where}.{key} must be non-empty text")
    return out


def policy_from_settings(
    permissions: Mapping[str, Any] | None, *, profile: str | None = None,
    kind: str | None = None, task: Mapping[str, Any] | None = None,
    cli: PermissionPolicy | None = None,
) -> PermissionPolicy:
    """The policy for one worker, each layer overriding the one before: settings
    ``permissions`` (``claude``, ``codex``, ``codexSandbox``, ``allowedTools``,
    ``disallowedTools``, ``addDirs``), then ``permissions.kinds.<kind>``, then
    ``permissions.profiles.<profile>``, then the task's own fields (same keys), then what the
    command line set."""
    merged: dict[str, Any] = {}
    base = permissions or {}
    merged.update(_layer(base, "permissions", tables=True))
    for section, name in (("kinds", kind), ("profiles", profile)):
        table = base.get(section)
        if table is None or name is None:
            continue
        if not isinstance(table, Mapping):
            raise SettingsError(f"permissions.{section} must be an object")
        if name in table:
            merged.update(_layer(table[name], f"permissions.{section}.{name}"))
    if task:
        merged.update(_layer(task, "task permissions"))
    if cli is not None:
        for field in attrs.fields(PermissionPolicy):
            value = getattr(cli, field.name)
            # Only what the command line set: its unset fields must not undo a layer below.
            if value is not None and value != () and value is not False:
                merged[field.name] = value
    return PermissionPolicy(**merged)


def task_layer(raw: Any) -> PermissionPolicy:
    """A TASKS.toml task's ``permissions`` table, checked (keys and values) on its own."""
    return PermissionPolicy(**_layer(raw, "permissions"))


# -- checks ---------------------------------------------------------------------------------


#: Who may answer a headless worker's permission requests: the coordinator (``fleet answer``,
#: the MCP ``answer`` tool), through fleet's PermissionRequest hook.
ANSWERERS: Final = ("coordinator",)
#: Prompting modes a headless worker may run in when the coordinator answers: plan runs
#: through auto mode's server-side check on 2.1.332 and exits behind a custom endpoint.
ANSWERED_MODES: Final = ("acceptEdits", "default")


def check_headless(policy: PermissionPolicy, *, tool: str, is_root: bool,
                   force: bool = False, env: Mapping[str, str] | None = None,
                   answerer: str | None = None) -> list[str]:
    """Refuse a headless Claude worker whose mode leaves it unable to work with nobody to
    answer (Codex has no such mode: ``codex exec`` asks nobody, so it only gets warnings);
    return warnings for what will work but deserves a word. ``force`` (``--insist``)
    turns the refusal into a warning. With ``answerer`` ``coordinator`` a prompting mode
    (default, acceptEdits) is allowed: Claude Code 2.1.332 runs the PermissionRequest hook in
    ``-p`` and waits for its decision, which the coordinator gives (2.1.197 runs no such hook
    in ``-p`` and denies at once: said in a warning)."""
    warnings: list[str] = []
    if tool == "codex":
        approval = policy.codex_approval or "never"
        if approval != "never":
            # Observed: codex exec never asks; what the sandbox blocks simply fails.
            warnings.append(
                f"Codex approval policy {approval} has nobody to ask in codex exec: a command "
                "the sandbox blocks fails instead of asking (never says so plainly)")
        if policy.codex_sandbox in ("read-only", "workspace-write"):
            network = "" if policy.codex_network else " and blocks the network"
            warnings.append(
                f"Codex sandbox {policy.codex_sandbox} keeps .git read-only{network}: the "
                "worker can neither commit nor push; use danger-full-access for a worker "
                "that commits")
        if policy.allowed_tools or policy.disallowed_tools:
            warnings.append("Codex has no tool allowlist: --allowed-tools and "
                            "--disallowed-tools apply to Claude workers only")
        return warnings
    mode = policy.mode or DEFAULT_MODE
    if answerer is not None and answerer not in ANSWERERS:
        raise SettingsError(f"unknown answerer {answerer!r} (known: {', '.join(ANSWERERS)})")
    if answerer == "coordinator" and mode in ANSWERED_MODES:
        warnings.append(
            f"permission mode {mode}: each request waits for the coordinator (fleet answer "
            "WORKER allow|deny), and is denied after FLEET_ANSWER_TIMEOUT (300 s); Claude "
            "Code 2.1.197 asks no hook in -p and denies such calls at once (2.1.332 asks)")
        return warnings
    if mode in PROMPTING_MODES:
        reason = (f"permission mode {mode} would ask a person before tools run, and a "
                  "headless worker has nobody to ask: claude -p denies each such call and "
                  "still reports success")
        works = ("bypassPermissions, or dontAsk with --allowed-tools, or default/acceptEdits "
                 "with --answer coordinator")
        if not force:
            raise Refused(f"{reason}; modes that work: {works} (or --insist)")
        warnings.append(f"{reason}; starting anyway (--insist)")
    if mode == "dontAsk" and not policy.allowed_tools:
        warnings.append("dontAsk with no --allowed-tools denies every tool that is not "
                        "read-only: give the worker an allowlist")
    if mode == "bypassPermissions" and is_root and (env or {}).get("IS_SANDBOX") != "1":
        warnings.append("bypassPermissions as root exits at once unless IS_SANDBOX=1 is in "
                        "the worker's environment: on a machine that is a sandbox, pass "
                        "--sandboxed (fleet sets nothing unless told)")
    return warnings


# -- the coordinator's own mode -------------------------------------------------------------


def transcript_mode(lines: Iterable[str]) -> str | None:
    """The last ``permissionMode`` in a Claude Code transcript (JSONL); None when none."""
    mode: str | None = None
    for line in lines:
        if "permissionMode" not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        value = entry.get("permissionMode") if isinstance(entry, dict) else None
        if isinstance(value, str) and value:
            mode = value
    return mode


def coordinator_mode(
    env: Mapping[str, str], *, home: Path | None = None,
    glob: Callable[[Path, str], Sequence[Path]] | None = None,
    read_lines: Callable[[Path], Iterable[str]] | None = None,
) -> str | None:
    """The permission mode of the Claude Code session this process runs inside (its Bash
    tool), from that session's transcript; None outside a session or when it cannot be read.
    """
    if env.get("CLAUDECODE") != "1":
        return None
    session = env.get("CLAUDE_CODE_SESSION_ID", "")
    if not session or "/" in session or session.startswith("."):
        return None
    config = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else (
        (home or Path(env.get("HOME", "~")).expanduser()) / ".claude")
    find = glob or (lambda root, pattern: sorted(root.glob(pattern)))
    read = read_lines or _read_lines
    for transcript in find(config / "projects", f"*/{session}.jsonl"):
        try:
            mode = transcript_mode(read(transcript))
        except OSError:
            continue
        if mode is not None:
            return mode
    return None


def _read_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.readlines()


def default_policy(coordinator: str | None, allowlist: Sequence[str] = ()) -> tuple[
        PermissionPolicy, str | None]:
    """The policy for a worker whose mode nobody chose, and a message when it was picked for a
    reason: an auto-mode coordinator may not spawn a bypassPermissions agent, so its workers
    run in dontAsk with the profile's allowlist."""
    if coordinator == "auto":
        message = ("the coordinator runs in auto mode, which may not start a "
                   "bypassPermissions worker: starting it in dontAsk"
                   + (f" with the allowlist {', '.join(allowlist)}" if allowlist else
                      " with no allowlist (give one with --allowed-tools)"))
        return PermissionPolicy(mode="dontAsk", allowed_tools=tuple(allowlist)), message
    return PermissionPolicy(mode=DEFAULT_MODE, allowed_tools=tuple(allowlist)), None


def launched_with(policy: PermissionPolicy, tool: str) -> dict[str, Any]:
    """What a worker's registration records of its policy, in its tool's terms and with the
    defaults it ran under filled in, so status and report can say how each worker ran."""
    out: dict[str, Any]
    if tool == "codex":
        out = {"sandbox": policy.codex_sandbox or DEFAULT_CODEX_SANDBOX,
               "approval": policy.codex_approval or "never"}
        if policy.codex_network:
            out["network"] = True
    else:
        out = {"mode": policy.mode or DEFAULT_MODE}
        if policy.allowed_tools:
            out["allowed_tools"] = list(policy.allowed_tools)
        if policy.disallowed_tools:
            out["disallowed_tools"] = list(policy.disallowed_tools)
    if policy.add_dirs:
        out["add_dirs"] = list(policy.add_dirs)
    return out


def is_root() -> bool:
    return os.geteuid() == 0
