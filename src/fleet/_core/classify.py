"""Which move of the state machine (:mod:`fleet._core.machine`) an agent's hook or status
file asks for, and the hooks, notifications and statuses this version knows.

The exit of a headless run is classified in :mod:`fleet._core.fold` itself, next to where it is
recorded. These functions read the accumulator and change nothing; recording what an event tells
is the fold's.
"""

from __future__ import annotations

from typing import Final

from fleet._core.accumulator import Accumulator, Envelope
from fleet._core.events import AgentStatus, HookEvent
from fleet._core.limits import is_limit_error

ACTIVITY_HOOKS: Final = frozenset(
    {
        "UserPromptSubmit",
        "UserPromptExpansion",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PostToolBatch",
        "PermissionDenied",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
        "TaskCreated",
        "TaskCompleted",
        "ElicitationResult",
        "CwdChanged",
        "FileChanged",
    }
)
#: StopFailure kinds that need a person to act on the account: blocked, not a plain API error.
ACCOUNT_ERRORS: Final = frozenset(
    {"account_on_hold", "verification_required", "cloud_credential_error"}
)
#: Notifications that tell the fold nothing: journaled, deliberately folded as nothing.
IGNORED_NOTIFICATIONS: Final = frozenset(
    {"agent_completed", "auth_storage_failure", "plugin_notification"}
)
#: Hooks journaled for the record that move no state (the model a worker switched to is kept).
IGNORED_HOOKS: Final = frozenset(
    {"PreModelSwitch", "PostModelSwitch", "DirectoryAdded", "PreSkillShellCommand"}
)
#: Hooks of the tested releases that fleet does not install and that tell the fold nothing,
#: should a user's own settings journal them.
_QUIET_HOOKS: Final = frozenset(
    {"InstructionsLoaded", "MessageDisplay", "ConfigChange", "Setup", "TeammateIdle",
     "WorktreeCreate", "WorktreeRemove"}
)
_STATE_HOOKS: Final = frozenset(
    {"SessionStart", "Stop", "PermissionRequest", "Notification", "Elicitation", "StopFailure",
     "Interrupt", "SessionEnd"}
)
KNOWN_NOTIFICATIONS: Final = IGNORED_NOTIFICATIONS | {
    "permission_prompt", "agent_needs_input", "elicitation_dialog", "idle_prompt",
    "elicitation_response",
}
KNOWN_STATUSES: Final = frozenset({"busy", "idle", "waiting"})


Move = tuple[str, str]


def _classify_hook(event: HookEvent, acc: Accumulator) -> Move | None:
    hook = event.hook
    if hook in ACTIVITY_HOOKS:
        return ("activity", "active")
    if hook == "SessionStart":
        return ("activity", "active") if event.text("source") == "compact" else ("start", "session")
    if hook == "Stop":
        return _turn_over(acc)
    if hook == "PermissionRequest":
        # Claude Code asks its AskUserQuestion tool's questions through a permission dialog.
        question = event.text("tool_name") == "AskUserQuestion"
        return ("block", "question" if question else "permission")
    if hook == "Notification":
        kind = event.text("notification_type")
        if kind in ("permission_prompt", "agent_needs_input"):
            # agent_needs_input (2.1.332): auto mode cannot check an action and waits for a
            # person to choose; the only hook of that screen, and it comes seconds late.
            return ("block", "permission")
        if kind == "elicitation_dialog":
            return ("block", "question")
        if kind == "idle_prompt":
            # The main turn ended a minute ago, but work that it started may still run.
            return None if acc.background else ("idle", "turn_end")
        if kind == "elicitation_response":
            return ("activity", "active")
        return None  # IGNORED_NOTIFICATIONS and any kind this version does not know
    if hook == "Elicitation":
        return ("block", "question")
    if hook == "StopFailure":
        return _failure(event.text("error") or "unknown")
    if hook == "Interrupt":
        return ("interrupt", "interrupted")
    if hook == "SessionEnd":
        error = event.text("error")
        if error:
            # The transcript ended in an API error (the hook read it): the StopFailure hook
            # may have been stopped before it wrote.
            return _failure(error)
        return _verdict_of(acc.pending) if acc.pending and _working_on(acc) else ("end", "ended")
    return None  # IGNORED_HOOKS and any hook this version does not know


def _failure(error: str) -> Move:
    """A turn that failed on the API, by the kind Claude Code names."""
    if error in ACCOUNT_ERRORS:
        return ("block", "account")
    if is_limit_error(error):
        return ("limit", "limit")
    return ("api_error", f"api_error:{error}")


def _working_on(acc: Accumulator) -> bool:
    """Whether the worker's last claim still waits for work it started: background tasks, or
    an automatic turn answering their notifications."""
    return acc.background > 0 or acc.auto_turn


def _verdict_of(envelope: Envelope) -> Move:
    return ("claim", "claimed") if envelope.kind == "done" else ("block", "worker")


def _turn_over(acc: Accumulator) -> Move:
    """A turn ended (a Stop, recorded by :func:`_record_stop`). While background tasks run,
    the end of the main turn is not the end of the work."""
    if acc.background:
        return ("activity", "active")
    if acc.envelope is None:
        return ("turn_end", "turn_end")
    return _verdict_of(acc.envelope)


def _classify_status(event: AgentStatus, acc: Accumulator) -> Move | None:
    """The agent's own status file. Waiting during the work blocks; a dialog that closes
    (busy: it was answered and the tool runs; idle: refused or cancelled, which fires no hook at
    all) ends the wait. A dialog opened at the prompt after the turn ended (``/model``, say) is
    someone at the terminal, not the worker waiting; a status written before the current state
    began tells nothing new."""
    if event.status == "waiting":
        if acc.state not in ("starting", "working"):
            return None
        return ("block", _waiting_reason(event.waiting_for))
    waiting = acc.state == "blocked" and acc.reason in ("permission", "question")
    if not waiting or event.ts <= acc.since:
        return None
    if event.status == "busy":
        return ("activity", "active")
    if event.status == "idle":
        return ("interrupt", "interrupted")
    return None


def _waiting_reason(waiting_for: str | None) -> str:
    text = (waiting_for or "").lower()
    if any(word in text for word in ("input", "question", "elicit", "answer")):
        return "question"
    return "permission"


def _knows_hook(event: HookEvent) -> bool:
    hook = event.hook
    if hook == "Notification":
        return event.text("notification_type") in KNOWN_NOTIFICATIONS
    return (hook in ACTIVITY_HOOKS or hook in _STATE_HOOKS or hook in IGNORED_HOOKS
            or hook in _QUIET_HOOKS)
