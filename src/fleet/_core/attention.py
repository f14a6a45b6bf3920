"""What a coordinator needs next, for a worker that needs attention: a pure function of its
state, so ``wait``, ``watch``, ``status`` and the Python API all say the same thing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fleet._core.fields import bool_field, list_field, str_field
from fleet._core.fold import WorkerState

_EXCERPT = 300


def _excerpt(text: str | None, limit: int = _EXCERPT) -> str | None:
    if not text:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def exit_why(state: WorkerState, limit: int = 160) -> str | None:
    """The agent's own reason for a run that failed, in one line: the first line of what it
    said when it ended (its error result, else its stderr), e.g. ``--dangerously-skip-
    permissions cannot be used with root/sudo privileges``. None for a run that went well."""
    info = state.exit
    if info is None or not info.result or not (info.is_error or info.exit_code not in (0, None)):
        return None
    for line in info.result.splitlines():
        text = line.strip()
        # Node's stack traces and blank lines say nothing a coordinator can act on.
        if text and not text.startswith("at "):
            return _excerpt(text, limit)
    return None


def _denied(state: WorkerState, shown: int = 3) -> str:
    listed = ", ".join(state.denials[:shown])
    more = len(state.denials) - shown
    return listed + (f" and {more} more" if more > 0 else "")


def next_step(state: WorkerState) -> str:
    """One line: what happened and what the coordinator should do about it."""
    s, reason = state.state, state.reason
    env = state.envelope
    if s == "done":
        if reason == "checked":
            return "checked: retire it (fleet retire) or keep it"
        if reason == "failed":
            findings = "; ".join(state.findings) or "see fleet report"
            return f"check failed ({findings}): send a follow-up naming each finding"
        claim = env.text if env else (_excerpt(state.message, 120) or "")
        denied = f" (its policy denied {_denied(state)})" if state.denials else ""
        return f"claims done: {claim}{denied} — check it before believing it (fleet check)"
    if s == "blocked":
        if reason == "permission":
            if state.waiting_for and not state.permission_tool:
                return (f"waiting for a person ({state.waiting_for}): tell the user, do not "
                        "answer it yourself")
            tool = state.permission_tool or "a tool"
            if state.permission_fallback == "dialog":
                return (f"no answer in time: its own dialog asks for permission to use {tool}: "
                        "tell the user, or answer it on its screen")
            if state.permission_request:
                what = f"{tool} ({state.permission_command})" if state.permission_command else tool
                return (f"waiting for permission to use {what}: answer it (fleet answer "
                        f"{state.worker} allow|deny --reason TEXT) or ask the user")
            return f"waiting for permission to use {tool}: tell the user, do not answer it yourself"
        if reason == "question":
            return "asking a question: read its screen and answer or ask the user"
        if reason == "permission_denied":
            return (f"its permission policy denied {_denied(state) or 'a tool'}: start it again "
                    "with that allowed (--allowed-tools, or another mode), or do that step "
                    "yourself")
        if reason == "limit":
            reset = f" (resets {reset_text(state.limit_reset)})" if state.limit_reset else ""
            return f"hit a usage or rate limit{reset}: hand the task to another profile"
        if reason == "account":
            return (f"its account needs a person ({state.error or 'account error'}): tell the "
                    "user, or hand the task to another profile")
        need = env.text if env else "see its last message"
        return f"blocked: {need}"
    if s == "stopped":
        if reason == "interrupted":
            return "its turn was interrupted: send a follow-up to resume, or retire it"
        if reason.startswith("api_error"):
            return f"the model API failed ({reason[len('api_error:') :]}): retry or hand it over"
        return "its turn ended without a DONE/BLOCKED envelope: read its last message, follow up"
    if s == "quiet":
        if reason == "follow_up_not_taken":
            return ("the follow-up sent to it was not picked up: read its screen, then send it "
                    "again or hand the task over")
        return "no event for a while: read its screen (often a prompt waiting for someone)"
    if s == "gone":
        if reason == "vanished":
            return "its process died without ending the session: check the worktree, restart"
        if reason == "stopped":
            return "stopped by fleet: check the worktree, restart or retire it"
        if reason == "timeout":
            return "ran out of time: check the worktree, restart with more time or a smaller task"
        why = exit_why(state)
        if why:
            return f"its agent failed ({reason}): {why} — fix that, then restart it"
        return f"its session ended ({reason}) with no DONE claim: check the worktree"
    if str(s) == "offline":
        # A hub view: the worker's host stopped shipping its journal.
        why = "its `fleet ship` stopped" if reason == "ship_stopped" else "no heartbeat"
        return (f"its host is offline ({why}): what it last said may be out of date, and "
                "check, send and retire wait until `fleet ship` runs there again")
    return ""


def reset_text(when: float) -> str:
    """A reset time as people read it: ``2026-12-01 10:58 UTC``."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M UTC")


def reason_text(state: WorkerState) -> str:
    """The reason with the one fact that explains it: background work, what a screen waits
    for, when a limit resets, which account error."""
    reason = state.reason
    if state.state == "working" and state.background:
        n = state.background
        return f"{reason} · {n} background task{'s' if n != 1 else ''}"
    if state.state == "blocked":
        if state.waiting_for:
            return f"{reason} · {state.waiting_for}"
        if reason == "limit" and state.limit_reset:
            return f"{reason} · resets {reset_text(state.limit_reset)}"
        if reason == "account" and state.error:
            return f"{reason} · {state.error}"
        if reason == "permission_denied" and state.denials:
            return f"{reason} · {_denied(state, 1)}"
    why = exit_why(state, 60) if state.state in ("gone", "stopped") else None
    return f"{reason} · {why}" if why else reason


def mode_text(state: WorkerState) -> str | None:
    """How fleet started the worker, in a few words: ``dontAsk +3 tools``,
    ``danger-full-access``; None for a worker fleet did not start."""
    policy = state.permissions
    mode = str_field(policy, "mode")
    if mode is not None:
        allowed = list_field(policy, "allowed_tools")
        return f"{mode} +{len(allowed)} tools" if allowed else mode
    sandbox = str_field(policy, "sandbox")
    if sandbox is not None:
        approval = str_field(policy, "approval")
        tail = f" ({approval})" if approval and approval != "never" else ""
        return f"{sandbox}{tail}" + (" +network" if bool_field(policy, "network") else "")
    return None


def attention_details(state: WorkerState) -> dict[str, Any]:
    """The facts behind :func:`next_step`, for programs."""
    out: dict[str, Any] = {"next": next_step(state)}
    if state.envelope is not None:
        out["envelope"] = {"kind": state.envelope.kind, "text": state.envelope.text}
    if state.message:
        out["message"] = state.message
    if state.state == "blocked" and state.reason == "permission" and state.permission_tool:
        out["permission_tool"] = state.permission_tool
        if state.permission_request:
            out["permission_request"] = state.permission_request
        if state.permission_command:
            out["permission_command"] = state.permission_command
        if state.permission_fallback:
            out["fallback"] = state.permission_fallback
    if state.notification and state.state == "blocked":
        out["notification"] = state.notification
    if state.waiting_for and state.state == "blocked":
        out["waiting_for"] = state.waiting_for
    if state.error and state.state in ("blocked", "stopped"):
        out["error"] = state.error
    if state.permission_mode:
        out["permission_mode"] = state.permission_mode
    if state.denials:
        out["denials"] = list(state.denials)
    why = exit_why(state, 300)
    if why:
        out["why"] = why
    if state.limit_reset is not None:
        out["limit_reset"] = state.limit_reset
    if state.exit is not None:
        out["exit"] = {
            "exit_code": state.exit.exit_code,
            "is_error": state.exit.is_error,
            "api_error_status": state.exit.api_error_status,
            "reason": state.exit.reason,
            "result": _excerpt(state.exit.result, 1000),
        }
    if state.verdict:
        out["verdict"] = state.verdict
        out["findings"] = list(state.findings)
    return out
