"""What ``fleet mcp`` tells a client of its tools: each tool's name, title, description and
input schema, and the MCP hints (read-only, destructive, idempotent) it carries.

Apart from the calls (:mod:`fleet._mcp.tools`): the server lists these without running
anything, and a tool's arguments are checked against them (:mod:`fleet._mcp.args`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

#: How long ``wait`` blocks when the call names no timeout, and at most: MCP clients give up
#: on a tool call after a limit of their own (Codex's default is 60 s), and a coordinator loses
#: nothing by calling ``wait`` again with the marks it has.
DEFAULT_MAX_WAIT: Final = 50.0
ADAPTERS: Final = ("headless", "superset", "herdr")
TOOLS_: Final = ("claude", "codex")


@attrs.frozen(kw_only=True)
class ToolSpec:
    name: str
    title: str
    description: str
    properties: Mapping[str, Any]
    required: tuple[str, ...] = ()
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False

    @property
    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": dict(self.properties),
            "additionalProperties": False,
        }
        if self.required:
            schema["required"] = list(self.required)
        return schema


def _s(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **more}


def _strings(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description, **more}


def _number(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "number", "minimum": 0, "description": description, **more}


def _flag(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


WORKER = _s("worker id: lowercase letters, digits, '.', '_', '-'")
WORKERS = _strings("worker ids (default: every worker)")
SEEN = _strings("marks already handled (WORKER@SEQ or WORKER@SEQq), as wait and status print them")
QUIET = _number("seconds without events before a running worker reads as quiet (default 300)")
CMDS = _strings("check commands from the brief, each run with sh -c in the worktree")


def specs(max_wait: float = DEFAULT_MAX_WAIT) -> list[ToolSpec]:
    """Every tool, in the order a coordinator meets them."""
    return [
        ToolSpec(
            name="plan",
            title="Plan tasks",
            description="Route the tasks of a TASKS.toml to clausona profiles and say why, "
            "starting nothing: the JSON of `fleet plan TASKS --json` (rows with profile, "
            "model, reason; needsOk when the user must agree first).",
            properties={
                "tasks": _s("path of the TASKS.toml (absolute, or in the repository), inside "
                            "a repository of this server or its fleet home"),
                "use": _strings("only these profiles (replaces the settings' workers)"),
                "assign": {"type": "object", "additionalProperties": {"type": "string"},
                           "description": "task name -> profile, whatever the defaults say"},
                "start": _flag("the user said to start without asking"),
            },
            required=("tasks",),
            read_only=True,
        ),
        ToolSpec(
            name="profiles",
            title="Profiles",
            description="profiles with their quota (and where it comes from: clausona, a "
            "usage limit a worker hit, or unknown) and whether each may be a worker now: the "
            "JSON of `fleet profiles --json`.",
            properties={},
            read_only=True,
        ),
        ToolSpec(
            name="start",
            title="Start a worker",
            description="Create the worktree and branch fleet/WORKER and start an agent there "
            "on the brief. adapter headless (default) runs `claude -p` / `codex exec` under a "
            "supervisor, as `fleet start`: give a clausona profile, or an endpoint with "
            "key_from, or neither for the tool's own config. adapter superset or herdr starts "
            "it in that app on a profile. Returns the worker's state (as `fleet status --json` "
            "shows one worker). Then call wait.",
            properties={
                "worker": WORKER,
                "brief": _s("the brief's text (saved under the fleet home); or brief_file"),
                "brief_file": _s("path of a brief file (absolute, or in the repository), "
                                 "inside a repository or the fleet home"),
                "repo": _s("the repository (default: this server's only one)"),
                "adapter": _s("what hosts the worker (default headless)", enum=list(ADAPTERS)),
                "tool": _s("the agent CLI (default claude; a profile's own tool wins)",
                           enum=list(TOOLS_)),
                "profile": _s("clausona profile to run on, e.g. claude:work"),
                "endpoint": _s("headless: an API endpoint; the worker gets a config dir of its "
                               "own"),
                "key_from": _s("the endpoint's key: env:NAME or keyring:SERVICE/USER"),
                "key_var": _s("the variable that carries the key to the agent"),
                "model": _s("the model"),
                "small_model": _s("headless: the small model (background calls, fallback)"),
                "permission_mode": _s("Claude permission mode, or Codex sandbox"),
                "effort": _s("effort level (low, medium, high, ...)"),
                "base": _s("where the branch starts (default: the repository's HEAD)"),
                "timeout": _number("headless: wall-clock limit of the run in seconds"),
                "retries": {"type": "integer", "minimum": 0,
                            "description": "headless: retries after overload (default 3)"},
                "backoff": _number("headless: first backoff delay in seconds (default 2)"),
            },
            required=("worker",),
        ),
        ToolSpec(
            name="status",
            title="Status",
            description="Every worker (or the named ones) as of now, with state, reason, "
            "mark and needs_attention: the JSON of `fleet status --json`. Never blocks.",
            properties={"workers": WORKERS, "seen": SEEN, "quiet_after": QUIET},
            read_only=True,
        ),
        ToolSpec(
            name="wait",
            title="Wait for a worker",
            description="Block until a worker (default: every worker not retired) needs "
            "attention: stopped, quiet, blocked, done or gone, with a mark not seen. Returns "
            'the JSON of `fleet wait --json`: result "attention" with each worker and what to '
            'do next, or "timeout". It blocks at most `timeout` seconds (default and most '
            f"{max_wait:g}): when it times out, call it again. Pass every mark you have "
            "handled in seen (or record them with the seen tool).",
            properties={
                "workers": _strings("worker ids (default: every worker not retired)"),
                "seen": SEEN,
                "timeout": _number(f"seconds to block, at most {max_wait:g}"),
                "quiet_after": QUIET,
            },
            read_only=True,
        ),
        ToolSpec(
            name="seen",
            title="Record marks as seen",
            description="Journal the marks you have handled, so wait never wakes you for "
            "them again (it survives your context being compacted): the JSON of "
            "`fleet seen MARK... --json`.",
            properties={"marks": _strings("marks, as wait and status print them", minItems=1)},
            required=("marks",),
            idempotent=True,
        ),
        ToolSpec(
            name="answer",
            title="Answer a permission request",
            description="Allow or deny the permission request a Claude Code worker waits on "
            "(blocked, reason permission; wait and status show permission_tool, "
            "permission_command and permission_request): its hook hands the decision to Claude "
            "Code at once, so the tool runs or the model reads your reason. Answer only what "
            "the user's instructions cover; otherwise ask the user. A request already "
            "answered, timed out or whose session ended is refused. The JSON of `fleet answer "
            "WORKER allow|deny --json`.",
            properties={
                "worker": WORKER,
                "decision": _s("allow or deny", enum=["allow", "deny"]),
                "reason": _s("why; on a deny the model reads it (one line, at most 1000 "
                             "characters)"),
                "always": _flag("keep this answer for the rest of the worker's session (the "
                                "same Bash command, or the same tool)"),
                "request": _s("the request id (default: the worker's latest open request)"),
            },
            required=("worker", "decision"),
        ),
        ToolSpec(
            name="send",
            title="Send a follow-up",
            description="Deliver a follow-up to a worker through its host (a resumed session "
            "for headless workers, the terminal or pane in an app); the state it answers "
            "counts as seen. Give the text (saved under the fleet home) or a file: the JSON "
            "of `fleet send WORKER FILE --json`.",
            properties={
                "worker": WORKER,
                "text": _s("the follow-up's text"),
                "file": _s("path of a follow-up file (absolute, or in the repository), "
                           "inside a repository or the fleet home"),
            },
            required=("worker",),
        ),
        ToolSpec(
            name="hand_over",
            title="Hand a worker over",
            description="Start a worker's task again on another profile or model in the same "
            "worktree (after a usage limit, or when stuck): the JSON of `fleet hand-over "
            "--json`.",
            properties={
                "worker": WORKER,
                "profile": _s("clausona profile to hand the task to"),
                "model": _s("model to run"),
                "brief_file": _s("the task's brief (default: the one it was started with)"),
                "permission_mode": _s("Claude permission mode"),
                "effort": _s("effort level"),
            },
            required=("worker",),
        ),
        ToolSpec(
            name="check",
            title="Check a DONE claim",
            description="Check a worker's claim in its worktree: commits since the base, a "
            "clean worktree, HEAD pushed to its upstream, and each check command passing. "
            "The verdict (checked or failed, with one finding per problem) is journaled and "
            "returned: the JSON of `fleet check --json`.",
            properties={
                "worker": WORKER,
                "base": _s("compare with this ref (default: the registered base)"),
                "cmds": CMDS,
                "timeout": _number("seconds each check command may run (default 900)"),
            },
            required=("worker",),
        ),
        ToolSpec(
            name="retire",
            title="Retire workers",
            description="Remove the worktrees of checked, clean, pushed workers (never "
            "forced; the branch is kept and the state snapshotted to a ref), and only those: "
            "the JSON of `fleet retire --json`, one outcome per worker with the reason it was "
            "kept. In ask mode (the default, or the retire setting) nothing is removed unless "
            "confirm is true: without it the outcomes list what would be retired, 'not "
            "confirmed'; ask the user, then call again with confirm.",
            properties={
                "workers": _strings("worker ids"),
                "all_done": _flag("every worker that claimed done (instead of names)"),
                "mode": _s("ask or auto (default: the retire setting)", enum=["ask", "auto"]),
                "confirm": _flag("the user confirmed: retire in ask mode"),
                "base": _s("base for a claim checked here"),
                "cmds": CMDS,
            },
            destructive=True,
        ),
        ToolSpec(
            name="stop",
            title="Stop a headless worker",
            description="Stop a running headless worker (its whole process group); its state "
            "becomes gone(stopped) and its worktree stays: the JSON of `fleet stop --json`.",
            properties={
                "worker": WORKER,
                "wait": _number("seconds to wait for its supervisor (default 30)"),
            },
            required=("worker",),
            destructive=True,
        ),
        ToolSpec(
            name="report",
            title="Report",
            description="One line per worker: profile and model, workspace and branch, "
            "verdict checked or only claimed, retired or kept and why: the JSON of "
            "`fleet report --json`.",
            properties={"workers": WORKERS},
            read_only=True,
        ),
        ToolSpec(
            name="log",
            title="A worker's journal",
            description="A worker's journal, decoded, one event per entry with its seq (the "
            "number in marks): the JSON of `fleet log WORKER --json`, or its last entries.",
            properties={
                "worker": WORKER,
                "last": {"type": "integer", "minimum": 1,
                         "description": "only the last N events"},
            },
            required=("worker",),
            read_only=True,
        ),
    ]
