"""Hypothesis strategies for journal events."""

from __future__ import annotations

from hypothesis import strategies as st

from fleet._core import events as ev

HOOKS = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "Notification",
    "Stop",
    "StopFailure",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
    "Interrupt",
    "Elicitation",
    "PostModelSwitch",
    "SomethingNew",
]
MESSAGES = [
    "all done",
    "did it\nFLEET_WORKER_DONE: tests pass",
    "FLEET_WORKER_BLOCKED: need a token",
    "SUPERSET_WORKER_DONE: shipped",
    "",
]

ts_values = st.floats(min_value=1000.0, max_value=1100.0, allow_nan=False).map(
    lambda t: round(t, 3)
)


@st.composite
def hook_events(draw: st.DrawFn) -> ev.HookEvent:
    hook = draw(st.sampled_from(HOOKS))
    data: dict[str, object] = {"session_id": "s1"}
    if hook == "Stop":
        data["last_assistant_message"] = draw(st.sampled_from(MESSAGES))
        data["background_tasks"] = draw(st.sampled_from([0, 0, 1, 2]))
    elif hook == "Notification":
        data["notification_type"] = draw(
            st.sampled_from(["permission_prompt", "idle_prompt", "elicitation_dialog",
                             "agent_needs_input", "agent_completed", "other"])
        )
    elif hook == "StopFailure":
        data["error"] = draw(
            st.sampled_from(["server_error", "rate_limit", "authentication_failed",
                             "account_on_hold"])
        )
        data["last_assistant_message"] = "You've hit your limit · resets 5pm (UTC)"
    elif hook == "SessionStart":
        data["source"] = draw(st.sampled_from(["startup", "resume", "compact", "clear", "fork"]))
        if draw(st.booleans()):
            data["agent_pid"], data["agent_start"] = 4242, 99
    elif hook == "UserPromptSubmit":
        if draw(st.booleans()):
            data["origin"] = "task-notification"
        data["permission_mode"] = draw(st.sampled_from(["default", "auto"]))
    elif hook in ("PreToolUse", "PostToolUse"):
        data["tool_name"] = "Bash"
    elif hook == "PermissionRequest":
        data["tool_name"] = draw(st.sampled_from(["Bash", "AskUserQuestion"]))
    elif hook == "PostModelSwitch":
        data["to_model"] = "claude-sonnet-4-5"
    return ev.HookEvent(
        ts=draw(ts_values), src=draw(st.sampled_from(["claude", "codex"])), hook=hook, data=data
    )


def coordinator_events(worker: str = "w1") -> st.SearchStrategy[ev.Event]:
    return st.one_of(
        st.builds(ev.Registered, ts=ts_values, worktree=st.just("/tmp/w"), profile=st.just("p")),
        st.builds(ev.Started, ts=ts_values, pid=st.integers(1, 99999)),
        st.builds(ev.Attached, ts=ts_values, handle=st.just({"terminal": "t1"})),
        st.builds(
            ev.Exited,
            ts=ts_values,
            exit_code=st.sampled_from([0, 1, None]),
            is_error=st.booleans(),
            api_error_status=st.sampled_from([None, 401, 429, 529]),
            result=st.sampled_from(MESSAGES),
            reason=st.sampled_from([None, "stopped", "timeout", "limit"]),
            claim=st.sampled_from([None, "FLEET_WORKER_DONE: earlier"]),
        ),
        st.builds(ev.Vanished, ts=ts_values),
        st.builds(
            ev.AgentStatus,
            ts=ts_values,
            status=st.sampled_from(["busy", "idle", "waiting", "other"]),
            waiting_for=st.sampled_from([None, "permission prompt", "input needed"]),
        ),
        st.builds(ev.Seen, ts=ts_values, mark=st.integers(0, 30).map(lambda n: f"{worker}@{n}")),
        st.builds(ev.Checked, ts=ts_values, verdict=st.sampled_from(["checked", "failed"])),
        st.builds(ev.HandedOver, ts=ts_values, profile=st.just("q")),
        st.builds(ev.Retired, ts=ts_values),
        st.builds(ev.RetireRefused, ts=ts_values, reason=st.just("dirty")),
        st.builds(ev.FollowUpSent, ts=ts_values, text=st.just("more")),
        st.builds(
            ev.UnknownEvent,
            ts=ts_values,
            src=st.just("fleet"),
            type=st.just("future"),
            raw=st.just({"x": 1}),
        ),
    )


def events(worker: str = "w1") -> st.SearchStrategy[ev.Event]:
    return st.one_of(hook_events(), hook_events(), coordinator_events(worker))


def journals(worker: str = "w1") -> st.SearchStrategy[list[ev.Event]]:
    return st.lists(events(worker), max_size=40)
