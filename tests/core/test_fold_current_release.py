"""The fold on what Claude Code 2.1.332 changed: background subagents, auto mode's screens (and
the session status file that reports them), new StopFailure and notification kinds, new hook
events."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fleet._core import events as ev
from fleet._core.fold import WorkerState, fold

W = "w1"
DONE = "Main done.\nFLEET_WORKER_DONE: all good"
NOTIFICATION = {"origin": "task-notification"}


def hook(ts: float, name: str, **data: object) -> ev.HookEvent:
    return ev.HookEvent(ts=ts, src="claude", hook=name, data=data)


def status(ts: float, state: str, waiting_for: str | None = None) -> ev.AgentStatus:
    return ev.AgentStatus(ts=ts, status=state, waiting_for=waiting_for, pid=42)


def start() -> list[ev.Event]:
    return [ev.Registered(ts=1.0, worktree="/w"), hook(2, "SessionStart", source="startup"),
            hook(3, "UserPromptSubmit")]


def sequence(events: Sequence[ev.Event]) -> list[tuple[str, str]]:
    """The (state, reason) changes folding each prefix."""
    out: list[tuple[str, str]] = []
    for n in range(1, len(events) + 1):
        state = fold(W, events[:n], now=events[n - 1].ts)
        pair = (state.state, state.reason)
        if not out or out[-1] != pair:
            out.append(pair)
    return out


def last(events: Sequence[ev.Event]) -> WorkerState:
    return fold(W, events, now=events[-1].ts)


# -- background work ----------------------------------------------------------------------------

#: What `claude -p` 2.1.332 journaled when the main turn claimed DONE while a subagent ran.
BACKGROUND_DONE: list[ev.Event] = [
    *start(),
    hook(4, "PostToolUse", tool_name="Agent"),
    hook(4.1, "SubagentStart", agent_id="a1"),
    hook(4.2, "Stop", last_assistant_message=DONE, background_tasks=1),
    hook(8, "PostToolUse", tool_name="Bash", agent_id="a1"),
    hook(8.1, "SubagentStop", agent_id="a1", background_tasks=1),
    hook(8.2, "UserPromptSubmit", **NOTIFICATION),
    hook(8.3, "Stop", last_assistant_message="The subagent finished.", background_tasks=0),
    hook(8.4, "SessionEnd", reason="other"),
]


def test_a_claim_made_while_a_subagent_runs_survives_the_notification_turn() -> None:
    assert sequence(BACKGROUND_DONE) == [
        ("starting", "registered"), ("starting", "session"), ("working", "active"),
        ("done", "claimed"),
    ]
    final = last(BACKGROUND_DONE)
    assert final.envelope is not None and final.envelope.text == "all good"
    assert final.message == DONE
    assert final.seq == 9  # the Stop that ended all the work, not the main turn's (5)


def test_while_background_tasks_run_the_worker_reads_working_with_their_count() -> None:
    during = last(BACKGROUND_DONE[:6])
    assert (during.state, during.background, during.needs_attention) == ("working", 1, False)
    assert last(BACKGROUND_DONE).background == 0


def test_idle_prompt_while_background_tasks_run_wakes_nobody() -> None:
    events = [*BACKGROUND_DONE[:6], hook(64, "Notification", notification_type="idle_prompt")]
    state = last(events)
    assert (state.state, state.needs_attention) == ("working", False)
    assert state.ignored == 0  # deliberately nothing, not a refused move


def test_the_last_envelope_wins_a_blocked_notification_turn() -> None:
    events = [
        *BACKGROUND_DONE[:7],
        hook(8.2, "UserPromptSubmit", **NOTIFICATION),
        hook(8.3, "Stop", last_assistant_message="FLEET_WORKER_BLOCKED: the subagent failed"),
    ]
    state = last(events)
    assert (state.state, state.reason) == ("blocked", "worker")
    assert state.envelope is not None and state.envelope.text == "the subagent failed"


def test_no_envelope_anywhere_is_stopped_when_all_work_ends() -> None:
    events = [
        *start(),
        hook(4, "Stop", last_assistant_message="Started a subagent.", background_tasks=1),
        hook(8, "UserPromptSubmit", **NOTIFICATION),
        hook(9, "Stop", last_assistant_message="It finished.", background_tasks=0),
    ]
    assert sequence(events)[-2:] == [("working", "active"), ("stopped", "turn_end")]


def test_a_new_prompt_is_new_work_the_old_claim_does_not_answer() -> None:
    events = [
        *start(),
        hook(4, "Stop", last_assistant_message=DONE, background_tasks=0),
        ev.FollowUpSent(ts=5, seen="w1@3"),
        hook(6, "UserPromptSubmit"),
        hook(7, "Stop", last_assistant_message="Looked again."),
    ]
    assert sequence(events)[-4:] == [("done", "claimed"), ("starting", "follow_up"),
                                      ("working", "active"), ("stopped", "turn_end")]


def test_the_session_ending_with_background_work_keeps_the_claim() -> None:
    events = [*BACKGROUND_DONE[:6], hook(9, "SessionEnd", reason="prompt_input_exit")]
    assert (last(events).state, last(events).reason) == ("done", "claimed")


def test_without_background_tasks_2_1_197_claims_at_once() -> None:
    events = [*start(), hook(4, "Stop", last_assistant_message=DONE, background_tasks=0),
              hook(5, "SessionEnd", reason="other")]
    assert sequence(events)[-1] == ("done", "claimed")
    assert last(events).seq == 3


def test_the_headless_result_carries_the_claim_of_an_earlier_turn() -> None:
    # No hook reached the journal: the supervisor's result is the only source.
    events: list[ev.Event] = [
        ev.Registered(ts=1.0, worktree="/w"),
        ev.Started(ts=2.0, pid=99),
        ev.Exited(ts=9.0, exit_code=0, result="The subagent finished.", claim=DONE),
    ]
    state = last(events)
    assert (state.state, state.reason) == ("done", "claimed")
    assert state.envelope is not None and state.envelope.text == "all good"


def test_the_result_after_the_hooks_claim_keeps_the_envelope() -> None:
    events = [*BACKGROUND_DONE,
              ev.Exited(ts=9.0, exit_code=0, result="The subagent finished.", claim=DONE)]
    state = last(events)
    assert (state.state, state.reason, state.seq) == ("done", "claimed", 9)
    assert state.envelope is not None and state.exit is not None


# -- waiting for a person -------------------------------------------------------------------------


def test_auto_modes_screen_blocks_from_the_status_file_at_once() -> None:
    events = [*start(), hook(3.1, "PreToolUse", tool_name="Bash"),
              status(3.3, "waiting", "dialog open")]
    state = last(events)
    assert (state.state, state.reason, state.waiting_for) == ("blocked", "permission",
                                                              "dialog open")
    # the Notification that follows six seconds later is the same wait: no new mark
    later = [*events, hook(9.3, "Notification", notification_type="agent_needs_input",
                           message="Auto mode can't check actions in this session")]
    assert last(later).mark == state.mark


def test_agent_needs_input_alone_blocks() -> None:
    events = [*start(), hook(9, "Notification", notification_type="agent_needs_input")]
    assert (last(events).state, last(events).reason) == ("blocked", "permission")


def test_the_approval_dialog_then_no_is_stopped() -> None:
    events = [
        *start(),
        status(3.3, "waiting", "dialog open"),
        status(12.0, "waiting", "permission prompt"),
        hook(24.0, "Notification", notification_type="permission_prompt"),
        status(26.0, "idle"),
    ]
    assert sequence(events)[-2:] == [("blocked", "permission"), ("stopped", "interrupted")]
    assert last(events).waiting_for is None


def test_an_answered_dialog_works_on() -> None:
    events = [*start(), hook(4, "PermissionRequest", tool_name="Bash"),
              status(4.1, "waiting", "permission prompt"), status(7, "busy"),
              hook(7.2, "PostToolUse", tool_name="Bash"), hook(8, "Stop")]
    assert sequence(events)[-3:] == [("blocked", "permission"), ("working", "active"),
                                      ("stopped", "turn_end")]


def test_a_status_written_before_the_wait_began_changes_nothing() -> None:
    # The monitor's line can land after the hook's: its time is Claude Code's own.
    events = [*start(), hook(4, "PermissionRequest", tool_name="Bash"), status(3.5, "busy"),
              status(3.6, "idle")]
    assert (last(events).state, last(events).reason) == ("blocked", "permission")


def test_idle_and_busy_outside_a_wait_move_nothing() -> None:
    events = [*start(), status(3.5, "busy"), hook(4, "Stop"), status(4.1, "idle"),
              status(30, "busy")]
    assert sequence(events)[-1] == ("stopped", "turn_end")


def test_questions_read_as_questions_from_every_source() -> None:
    ask = [*start(), hook(4, "PermissionRequest", tool_name="AskUserQuestion")]
    assert last(ask).reason == "question"
    both = [*ask, status(4.1, "waiting", "input needed"),
            hook(10, "Notification", notification_type="permission_prompt")]
    assert (last(both).reason, last(both).mark) == ("question", last(ask).mark)
    assert last([*start(), status(4, "waiting", "input needed")]).reason == "question"
    elicit = [*start(), hook(4, "Elicitation", message="What name?")]
    assert (last(elicit).state, last(elicit).reason) == ("blocked", "question")


# -- errors and limits ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["account_on_hold", "verification_required",
                                  "cloud_credential_error"])
def test_account_errors_block_for_a_person(kind: str) -> None:
    events = [*start(), hook(4, "StopFailure", error=kind, last_assistant_message="x")]
    state = last(events)
    assert (state.state, state.reason, state.error) == ("blocked", "account", kind)
    assert state.needs_attention


def test_a_usage_limit_says_when_it_resets() -> None:
    # 2026-12-01 08:58:41 UTC; the limit resets at 10:58 the same day.
    at = 1796115521.0
    events = [
        ev.Registered(ts=at - 2, worktree="/w"),
        hook(at - 1, "UserPromptSubmit"),
        hook(at, "StopFailure", error="rate_limit",
             last_assistant_message="You've hit your 5-hour limit · resets 10:58am (UTC)"),
    ]
    state = last(events)
    assert (state.state, state.reason) == ("blocked", "limit")
    assert state.limit_reset == 1796122680.0


@pytest.mark.parametrize("error", ["authentication_failed", "server_error", "something_new"])
def test_other_failures_are_api_errors(error: str) -> None:
    state = last([*start(), hook(4, "StopFailure", error=error)])
    assert (state.state, state.reason) == ("stopped", f"api_error:{error}")


# -- new events and values ---------------------------------------------------------------------


def test_a_forked_session_starts_and_names_its_process() -> None:
    events = [ev.Registered(ts=1.0, worktree="/w"),
              hook(2, "SessionStart", source="fork", agent_pid=4242, agent_start=777)]
    state = last(events)
    assert (state.state, state.reason, state.live) == ("starting", "session", True)
    assert (state.pid, state.start_time) == (4242, 777)


def test_model_switches_are_recorded_and_move_nothing() -> None:
    events = [*start(), hook(4, "PreModelSwitch", to_model="claude-sonnet-4-5"),
              hook(4.1, "PostModelSwitch", to_model="claude-sonnet-4-5")]
    state = last(events)
    assert (state.state, state.seq, state.model) == ("working", 2, "claude-sonnet-4-5")
    assert state.ignored == 0


@pytest.mark.parametrize("name", ["DirectoryAdded", "PreSkillShellCommand", "BrandNewHook"])
def test_hooks_that_tell_nothing_move_nothing(name: str) -> None:
    for before in (start(), [*start(), hook(3.5, "Stop")]):
        assert sequence([*before, hook(4, name)]) == sequence(before)


@pytest.mark.parametrize("kind", ["agent_completed", "auth_storage_failure",
                                  "plugin_notification", "brand_new_kind"])
def test_notifications_that_tell_nothing_move_nothing(kind: str) -> None:
    before = [*start(), hook(3.5, "Stop")]
    assert sequence([*before, hook(4, "Notification", notification_type=kind)]) == \
        sequence(before)


def test_auto_permission_mode_is_shown() -> None:
    events = [*start(), hook(4, "PostToolUse", permission_mode="auto")]
    assert last(events).permission_mode == "auto"


def test_an_unknown_status_is_kept_and_moves_nothing() -> None:
    events = [*start(), hook(4, "PermissionRequest"), status(5, "thinking-hard")]
    assert (last(events).state, last(events).events) == ("blocked", 5)


def test_a_session_that_ends_in_an_api_error_is_that_error_without_its_stopfailure() -> None:
    # The StopFailure hook was stopped before it wrote; SessionEnd read the transcript.
    events = [*start(), hook(4, "SessionEnd", reason="other", error="server_error",
                             last_assistant_message="API Error: 529 Overloaded.")]
    state = last(events)
    assert (state.state, state.reason, state.live) == ("stopped", "api_error:server_error",
                                                       False)
    assert state.message == "API Error: 529 Overloaded."


def test_both_sources_of_one_failure_give_one_mark() -> None:
    failure = hook(4, "StopFailure", error="rate_limit",
                   last_assistant_message="You've hit your limit · resets 5pm (UTC)")
    ended = hook(4.2, "SessionEnd", reason="other", error="rate_limit",
                 last_assistant_message="You've hit your limit · resets 5pm (UTC)")
    for order in ([failure, ended], [ended, failure]):
        state = last([*start(), *order])
        assert (state.state, state.reason, state.seq) == ("blocked", "limit", 3)


def test_a_dialog_opened_at_the_prompt_after_the_turn_is_someone_at_the_terminal() -> None:
    events = [*start(), hook(4, "Stop"), status(9, "waiting", "dialog open"), status(12, "idle")]
    assert sequence(events)[-1] == ("stopped", "turn_end")
    assert last(events).mark == last(events[:4]).mark


def test_what_this_version_does_not_know_is_kept_and_counted() -> None:
    known = [*start(), hook(4, "PostModelSwitch"), hook(5, "Notification",
                                                          notification_type="idle_prompt")]
    assert last(known).unknown == 0
    strange = [
        *start(),
        hook(4, "BrandNewHook", tool_name="x"),
        hook(5, "Notification", notification_type="brand_new_kind"),
        status(6, "pondering"),
        ev.UnknownEvent(ts=7, src="fleet", type="from_the_future", raw={"x": 1}),
    ]
    state = last(strange)
    assert (state.unknown, state.events, state.state) == (4, 7, "working")


def test_a_status_then_the_hook_that_names_the_wait_is_one_wait_with_the_exact_reason() -> None:
    # 2.1.197 says "permission prompt" in its status file for AskUserQuestion's dialog too, a
    # moment before the PermissionRequest hook says which tool.
    first = [*start(), status(4.0, "waiting", "permission prompt")]
    events = [*first, hook(3.99, "PermissionRequest", tool_name="AskUserQuestion"),
              hook(10, "Notification", notification_type="permission_prompt")]
    state = last(events)
    assert (state.state, state.reason, state.mark) == ("blocked", "question", last(first).mark)
    # once named, a later generic event does not rename it
    named = [*start(), hook(4, "PermissionRequest", tool_name="AskUserQuestion"),
             status(4.1, "waiting", "permission prompt")]
    assert last(named).reason == "question"
