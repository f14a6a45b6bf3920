from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet._core import events as ev
from fleet._core.accumulator import Accumulator, find_envelope
from fleet._core.fold import Policy, feed, fold, snapshot, step
from fleet._core.machine import ATTENTION_STATES, MOVES, STATES

from .strategies import journals

W = "w1"


def hook(ts: float, name: str, **data: object) -> ev.HookEvent:
    return ev.HookEvent(ts=ts, src="claude", hook=name, data=data)


def reg(ts: float = 1.0) -> ev.Registered:
    return ev.Registered(ts=ts, worktree="/w")


def final(events: Sequence[ev.Event], now: float = 50.0, **kw: object) -> tuple[str, str]:
    state = fold(W, events, now, **kw)  # type: ignore[arg-type]
    return state.state, state.reason


def test_table_is_validated_and_covers_states() -> None:
    assert set(STATES) == set(MOVES.values()) | {"starting"}
    assert not any(source == "retired" for _, source in MOVES)


CASES: list[tuple[str, list[ev.Event], tuple[str, str]]] = [
    ("registered", [reg()], ("starting", "registered")),
    ("session start", [reg(), hook(2, "SessionStart", source="startup")], ("starting", "session")),
    ("prompt", [reg(), hook(2, "UserPromptSubmit")], ("working", "active")),
    ("turn end", [reg(), hook(2, "UserPromptSubmit"), hook(3, "Stop")], ("stopped", "turn_end")),
    (
        "done envelope",
        [
            reg(),
            hook(2, "UserPromptSubmit"),
            hook(3, "Stop", last_assistant_message="ok\nFLEET_WORKER_DONE: fixed"),
        ],
        ("done", "claimed"),
    ),
    (
        "blocked envelope",
        [reg(), hook(2, "Stop", last_assistant_message="SUPERSET_WORKER_BLOCKED: need key")],
        ("blocked", "worker"),
    ),
    (
        "permission",
        [reg(), hook(2, "PermissionRequest", tool_name="Bash")],
        ("blocked", "permission"),
    ),
    (
        "permission answered",
        [reg(), hook(2, "PermissionRequest"), hook(3, "PostToolUse")],
        ("working", "active"),
    ),
    (
        "permission notification",
        [reg(), hook(2, "Notification", notification_type="permission_prompt")],
        ("blocked", "permission"),
    ),
    (
        "elicitation",
        [reg(), hook(2, "Notification", notification_type="elicitation_dialog")],
        ("blocked", "question"),
    ),
    (
        "idle prompt",
        [
            reg(),
            hook(2, "UserPromptSubmit"),
            hook(3, "Notification", notification_type="idle_prompt"),
        ],
        ("stopped", "turn_end"),
    ),
    (
        "idle prompt keeps blocked",
        [
            reg(),
            hook(2, "Stop", last_assistant_message="FLEET_WORKER_BLOCKED: x"),
            hook(62, "Notification", notification_type="idle_prompt"),
        ],
        ("blocked", "worker"),
    ),
    (
        "api error",
        [reg(), hook(2, "StopFailure", error="server_error")],
        ("stopped", "api_error:server_error"),
    ),
    ("limit", [reg(), hook(2, "StopFailure", error="rate_limit")], ("blocked", "limit")),
    (
        "interrupt",
        [reg(), hook(2, "UserPromptSubmit"), hook(3, "Interrupt")],
        ("stopped", "interrupted"),
    ),
    (
        "session end",
        [reg(), hook(2, "Stop"), hook(3, "SessionEnd", reason="other")],
        ("gone", "ended"),
    ),
    (
        "session end keeps api error",
        [reg(), hook(2, "StopFailure", error="server_error"), hook(3, "SessionEnd")],
        ("stopped", "api_error:server_error"),
    ),
    (
        # Async tool hooks can start after the Stop hook: their later ts must not resume.
        "async tool hook after stop",
        [reg(), hook(2, "UserPromptSubmit"), hook(5, "Stop"), hook(5.1, "PostToolUse")],
        ("stopped", "turn_end"),
    ),
    (
        "async tool hook after session end",
        [reg(), hook(2, "Stop"), hook(3, "SessionEnd"), hook(3.1, "PreToolUse")],
        ("gone", "ended"),
    ),
    (
        "late pre-tool hook keeps the permission dialog",
        [reg(), hook(2, "PermissionRequest"), hook(2.1, "PreToolUse")],
        ("blocked", "permission"),
    ),
    (
        "a new prompt resumes a stopped worker",
        [reg(), hook(2, "Stop"), hook(3, "UserPromptSubmit"), hook(4, "PreToolUse")],
        ("working", "active"),
    ),
    (
        # Claude Code -p runs StopFailure and SessionEnd concurrently: either may land first.
        "api error after session end",
        [reg(), hook(3, "SessionEnd"), hook(3.01, "StopFailure", error="server_error")],
        ("stopped", "api_error:server_error"),
    ),
    (
        "session end keeps done",
        [
            reg(),
            hook(2, "Stop", last_assistant_message="FLEET_WORKER_DONE: y"),
            hook(3, "SessionEnd"),
        ],
        ("done", "claimed"),
    ),
    (
        "exit without claim",
        [reg(), ev.Started(ts=2, pid=5), ev.Exited(ts=3, exit_code=2)],
        ("gone", "exited:2"),
    ),
    (
        "exit with done result",
        [reg(), ev.Exited(ts=3, exit_code=0, result="FLEET_WORKER_DONE: ok")],
        ("done", "claimed"),
    ),
    (
        "exit 429",
        [reg(), ev.Exited(ts=3, exit_code=1, is_error=True, api_error_status=429)],
        ("blocked", "limit"),
    ),
    (
        "exit 401",
        [reg(), ev.Exited(ts=3, exit_code=1, is_error=True, api_error_status=401)],
        ("stopped", "api_error:401"),
    ),
    (
        "exit stopped",
        [reg(), hook(2, "PermissionRequest"), ev.Exited(ts=3, reason="stopped")],
        ("gone", "stopped"),
    ),
    ("exit timeout", [reg(), ev.Exited(ts=3, reason="timeout")], ("gone", "timeout")),
    ("vanished", [reg(), hook(2, "UserPromptSubmit"), ev.Vanished(ts=3)], ("gone", "vanished")),
    (
        "checked",
        [
            reg(),
            hook(2, "Stop", last_assistant_message="FLEET_WORKER_DONE: y"),
            ev.Checked(ts=3, verdict="checked"),
        ],
        ("done", "checked"),
    ),
    (
        "check failed",
        [
            reg(),
            hook(2, "Stop", last_assistant_message="FLEET_WORKER_DONE: y"),
            ev.Checked(ts=3, verdict="failed"),
        ],
        ("done", "failed"),
    ),
    (
        "handed over",
        [reg(), hook(2, "StopFailure", error="rate_limit"), ev.HandedOver(ts=3, profile="b")],
        ("starting", "handed_over"),
    ),
    ("retired", [reg(), ev.Retired(ts=3)], ("retired", "retired")),
    (
        "attached handles keep the state",
        [reg(), hook(2, "UserPromptSubmit"), ev.Attached(ts=3, handle={"terminal": "t"})],
        ("working", "active"),
    ),
    (
        "retired is terminal",
        [reg(), ev.Retired(ts=3), hook(4, "UserPromptSubmit"), ev.Registered(ts=5)],
        ("retired", "retired"),
    ),
    (
        "compaction is activity",
        [reg(), hook(2, "SessionStart", source="compact")],
        ("working", "active"),
    ),
]


@pytest.mark.parametrize(("name", "events", "expected"), CASES, ids=[c[0] for c in CASES])
def test_transitions(name: str, events: list[ev.Event], expected: tuple[str, str]) -> None:
    assert final(events) == expected


def test_late_activity_does_not_resurrect_working() -> None:
    events: list[ev.Event] = [
        reg(),
        hook(2, "UserPromptSubmit"),
        hook(5, "Stop"),
        hook(4.5, "PostToolUse"),  # async hook written after Stop, observed before it
    ]
    state = fold(W, events, 10)
    assert (state.state, state.seq) == ("stopped", 2)
    assert state.ignored == 1


def test_repeated_notification_keeps_the_mark() -> None:
    events: list[ev.Event] = [
        reg(),
        hook(2, "PermissionRequest"),
        hook(8, "Notification", notification_type="permission_prompt"),
    ]
    assert fold(W, events, 10).mark == "w1@1"


def test_quiet_is_derived_from_time() -> None:
    events: list[ev.Event] = [reg(), hook(2, "UserPromptSubmit"), hook(3, "PreToolUse")]
    policy = Policy(quiet_after=10)
    before = fold(W, events, 12.9, policy)
    assert before.state == "working" and before.quiet_at == 13
    after = fold(W, events, 13, policy)
    assert (after.state, after.mark, after.since, after.needs_attention) == (
        "quiet",
        "w1@2q",
        13,
        True,
    )


def test_seen_marks_and_attention() -> None:
    events: list[ev.Event] = [reg(), hook(2, "Stop")]
    assert fold(W, events, 5).needs_attention
    assert not fold(W, events, 5, seen=["w1@1"]).needs_attention
    assert not fold(W, [*events, ev.Seen(ts=3, mark="w1@1")], 5).needs_attention
    # a new state after a seen one needs attention again
    later = [*events, ev.Seen(ts=3, mark="w1@1"), hook(4, "UserPromptSubmit"), hook(5, "Stop")]
    assert fold(W, later, 6).needs_attention


def test_follow_up_marks_its_state_seen() -> None:
    events: list[ev.Event] = [reg(), hook(2, "Stop"), ev.FollowUpSent(ts=3, seen="w1@1")]
    assert not fold(W, events, 5).needs_attention


def test_verdict_is_seen_by_the_coordinator_that_wrote_it() -> None:
    events: list[ev.Event] = [
        reg(),
        hook(2, "Stop", last_assistant_message="FLEET_WORKER_DONE: y"),
        ev.Checked(ts=3, verdict="checked"),
    ]
    state = fold(W, events, 5)
    assert state.reason == "checked" and not state.needs_attention


def test_unreadable_lines_are_counted_not_fatal() -> None:
    events: list[ev.Event] = [reg(), ev.Unreadable(line="garbage", error="bad"), hook(3, "Stop")]
    state = fold(W, events, 5)
    assert (state.state, state.unreadable, state.seq) == ("stopped", 1, 2)


@pytest.mark.parametrize(
    ("message", "kind", "text"),
    [
        ("work\nFLEET_WORKER_DONE: fixed the bug", "done", "fixed the bug"),
        ("FLEET_WORKER_BLOCKED: need creds\n\n", "blocked", "need creds"),
        ("**FLEET_WORKER_DONE:** shipped", "done", "shipped"),
        ("`SUPERSET_WORKER_DONE: x`", "done", "x"),
    ],
)
def test_envelopes(message: str, kind: str, text: str) -> None:
    env = find_envelope(message)
    assert env is not None and (env.kind, env.text) == (kind, text)


@pytest.mark.parametrize(
    "message",
    [None, "", "FLEET_WORKER_DONE: x\nbut then more text", "I will print FLEET_WORKER_DONE later"],
)
def test_not_envelopes(message: str | None) -> None:
    assert find_envelope(message) is None


# -- properties ------------------------------------------------------------------------------


@given(journals(), st.data())
def test_fold_equals_step_by_step_in_any_chunking(
    events: list[ev.Event], data: st.DataObject
) -> None:
    whole = fold(W, events, 2000.0)
    acc = Accumulator()
    pairs = list(enumerate(events))
    i = 0
    while i < len(pairs):
        n = data.draw(st.integers(1, 5))
        feed(acc, pairs[i : i + n], W)
        i += n
        # a cache round trip between chunks must not change anything
        acc = Accumulator.from_dict(acc.to_dict())
    assert snapshot(W, acc, 2000.0) == whole
    manual = Accumulator()
    for seq, event in pairs:
        step(manual, seq, event, W)
    assert snapshot(W, manual, 2000.0) == whole


@given(journals(), st.floats(1000, 3000))
def test_marks_are_stable_across_replays(events: list[ev.Event], now: float) -> None:
    first = fold(W, events, now)
    again = fold(W, list(events), now)
    assert first.mark == again.mark
    assert first == again
    assert first.mark.startswith("w1@")


@given(journals(), journals())
def test_retired_stays_retired(before: list[ev.Event], after: list[ev.Event]) -> None:
    events = [*before, ev.Retired(ts=1050.0), *after]
    state = fold(W, events, 5000.0)
    assert state.state == "retired"
    assert state.seq == len(before) or fold(W, before, 5000.0).state == "retired"


@given(journals())
def test_late_activity_never_resurrects_working(events: list[ev.Event]) -> None:
    base = fold(W, events, 5000.0)
    if base.state not in ("stopped", "blocked", "done", "gone"):
        return
    late = hook(base.since - 0.5, "PostToolUse")
    assert fold(W, [*events, late], 5000.0).state == base.state


@given(journals(), st.floats(1000, 3000))
def test_attention_is_a_function_of_state_and_seen(events: list[ev.Event], now: float) -> None:
    state = fold(W, events, now)
    assert state.needs_attention == (state.state in ATTENTION_STATES and not state.seen)
    assert not fold(W, events, now, seen=[state.mark]).needs_attention


@given(
    journals(),
    st.lists(
        st.sampled_from(
            [
                b"",
                b"junk",
                b"[1]",
                b'{"v":1}',
                b'{"v":1,"ts":true,"src":"claude","type":"PreToolUse"}',
                b'{"v":1,"ts":5,"src":"claude","type":["PreToolUse"]}',
                b'{"v":"1","ts":5,"src":"claude","type":"PreToolUse"}',
                b'{"v":1,"ts":1050,"src":"codex","type":"PostToolUse","session_id":7}',
            ]
        ),
        max_size=6,
    ),
    st.data(),
)
def test_feeding_raw_lines_equals_decoding_then_stepping(
    events: list[ev.Event], junk: list[bytes], data: st.DataObject
) -> None:
    from fleet._core.events import decode_line, encode_line
    from fleet._core.fold import feed_lines

    lines = [encode_line(e)[:-1] for e in events]
    for bad in junk:
        lines.insert(data.draw(st.integers(0, len(lines))), bad)
    expected = Accumulator()
    for seq, line in enumerate(lines):
        step(expected, seq, decode_line(line), W)
    got = Accumulator()
    cut = data.draw(st.integers(0, len(lines)))
    feed_lines(got, lines[:cut], 0, W)
    feed_lines(got, lines[cut:], cut, W)
    assert got.to_dict() == expected.to_dict()
    assert snapshot(W, got, 1080.0) == snapshot(W, expected, 1080.0)


def test_attached_handles_merge_into_the_registered_ones() -> None:
    events: list[ev.Event] = [
        ev.Registered(ts=1, worktree="/w", handle={"workspace": "ws1"}),
        hook(2, "UserPromptSubmit"),
        ev.Attached(ts=3, handle={"terminal": "t9"}),
    ]
    state = fold(W, events, 5)
    assert state.handle == {"workspace": "ws1", "terminal": "t9"}
    assert (state.state, state.seq) == ("working", 1)


def test_a_new_prompt_after_a_verdict_starts_a_turn_even_if_stamped_a_tick_earlier() -> None:
    # The hook stamps its process start floored to a clock tick; the coordinator's verdict and
    # follow-up were journaled first, a few milliseconds "later".
    events: list[ev.Event] = [
        reg(),
        hook(2, "Stop", last_assistant_message="FLEET_WORKER_DONE: y"),
        ev.Checked(ts=10.0, verdict="failed"),
        ev.FollowUpSent(ts=10.002, seen="w1@2"),
        hook(9.995, "UserPromptSubmit"),
        hook(11, "Stop", last_assistant_message="FLEET_WORKER_DONE: pushed"),
    ]
    state = fold(W, events, 20)
    assert (state.state, state.reason, state.mark) == ("done", "claimed", "w1@5")
    assert state.needs_attention


def test_retire_and_report_facts_come_from_the_fold() -> None:
    events: list[ev.Event] = [
        reg(),
        hook(2.0, "Stop", last_assistant_message="DONE: x"),
        ev.FollowUpSent(ts=3.0, seen="w1@1"),
        ev.FollowUpSent(ts=4.0),
        ev.Checked(ts=5.0, verdict="checked", head="abc"),
    ]
    state = fold(W, events, 10.0)
    assert (state.checked_head, state.follow_ups, state.retired_ref) == ("abc", 2, None)
    failed = fold(W, [*events, ev.Checked(ts=6.0, verdict="failed", head="def")], 10.0)
    assert failed.checked_head is None  # only a passed check vouches for a commit
    retired = fold(W, [*events, ev.Retired(ts=7.0, ref="refs/fleet/w1", note="moved")], 10.0)
    assert (retired.retired_ref, retired.retired_note) == ("refs/fleet/w1", "moved")


def test_a_follow_up_nobody_picked_up_wakes_the_coordinator_when_the_bound_passes() -> None:
    stopped = [reg(), hook(2.0, "Stop", last_assistant_message="Looked.")]
    before = fold(W, stopped, 10.0)
    events = [*stopped, ev.FollowUpSent(ts=20.0, seen=before.mark)]
    policy = Policy(quiet_after=60.0)
    waiting = fold(W, events, 50.0, policy)
    assert (waiting.state, waiting.reason, waiting.needs_attention) == (
        "starting", "follow_up", False)
    late = fold(W, events, 81.0, policy)
    assert (late.state, late.reason, late.needs_attention) == (
        "quiet", "follow_up_not_taken", True)
    assert late.mark != before.mark  # not the mark the coordinator already saw
    picked = fold(W, [*events, hook(22.0, "UserPromptSubmit")], 100.0, policy)
    assert picked.state == "quiet" and picked.reason == "no_events"


def test_a_follow_up_whose_agent_cannot_start_is_a_new_state_to_see() -> None:
    gone = [reg(), ev.Started(ts=2, pid=5), ev.Exited(ts=3, exit_code=0, result="Looked.")]
    before = fold(W, gone, 10.0)
    events = [*gone, ev.FollowUpSent(ts=4.0, seen=before.mark), ev.Started(ts=5, pid=6),
              ev.Exited(ts=6, exit_code=127, is_error=True)]
    after = fold(W, events, 10.0)
    assert after.state == "gone" and after.needs_attention and after.mark != before.mark


def test_a_follow_up_typed_into_a_busy_worker_moves_nothing() -> None:
    events = [reg(), hook(2.0, "UserPromptSubmit"), ev.FollowUpSent(ts=3.0)]
    assert (fold(W, events, 5.0).state, fold(W, events, 5.0).seq) == ("working", 1)
