"""The agent's own stream, read into journal events, and what the fold makes of them alone and
beside the hooks: the same states, one mark per fact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet._core.events import (
    Event,
    Exited,
    HookEvent,
    RateLimited,
    Registered,
    Started,
    TurnEnded,
    decode_line,
    encode_line,
)
from fleet._core.fold import fold
from fleet._core.stream import ACTIVITY_EVERY, StreamReader

MEASURED = Path(__file__).parents[1] / "e2e" / "stream"


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


INIT = {"type": "system", "subtype": "init", "session_id": "s1", "model": "m",
        "permissionMode": "dontAsk", "cwd": "/w"}


def tool_use(name: str = "Bash", ident: str = "t1") -> dict[str, Any]:
    return {"type": "assistant", "session_id": "s1",
            "message": {"content": [{"type": "tool_use", "id": ident, "name": name,
                                     "input": {"command": "ls"}}]}}


def result(text: str, **more: Any) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "result": text,
            "session_id": "s1", "permission_denials": [], **more}


def read(objs: list[dict[str, Any] | bytes], start: float = 100.0) -> list[Event]:
    reader = StreamReader("claude")
    out: list[Event] = []
    for n, obj in enumerate(objs):
        out += reader.feed(obj if isinstance(obj, bytes) else line(obj), start + n)
    return out


def journal(*events: Event) -> list[Event]:
    head: list[Event] = [Registered(ts=1.0, tool="claude"), Started(ts=2.0, src="headless", pid=9)]
    # every event goes through the journal's codec, as the supervisor writes it
    return [decode_line(encode_line(e).rstrip(b"\n")) for e in [*head, *events]]


def test_init_tool_use_and_a_done_result() -> None:
    events = read([INIT, tool_use(), tool_use(ident="t2"),
                   result("ok\nFLEET_WORKER_DONE: wrote x")])
    assert [getattr(e, "hook", type(e).__name__) for e in events] == [
        "SessionStart", "PreToolUse", "TurnEnded"]
    assert all(e.src == "stream" for e in events)
    working = fold("w", journal(*events[:2]), now=200.0)
    assert (working.state, working.stream_seen, working.hooks_seen) == ("working", True, False)
    assert working.hooks_not_running
    done = fold("w", journal(*events), now=200.0)
    assert (done.state, done.reason) == ("done", "claimed")
    assert done.session_id == "s1"


def test_activity_is_journaled_at_most_every_so_often() -> None:
    reader = StreamReader("claude")
    assert reader.feed(line(tool_use()), 0.0)
    assert not reader.feed(line(tool_use()), ACTIVITY_EVERY - 1)
    assert reader.feed(line(tool_use()), ACTIVITY_EVERY + 1)


def test_denials_block_with_the_policy_reason() -> None:
    denied = result("I could not.", permission_denials=[
        {"tool_name": "Bash", "tool_use_id": "t1", "tool_input": {"command": "touch /etc/x"}}])
    events = read([INIT, tool_use(), denied])
    assert events[-1] == TurnEnded(ts=102.0, result="I could not.",
                                   denials=("Bash(touch /etc/x)",), session_id="s1")
    state = fold("w", journal(*events), now=200.0)
    assert (state.state, state.reason, state.denials) == (
        "blocked", "permission_denied", ("Bash(touch /etc/x)",))


def hook(name: str, ts: float, **data: Any) -> HookEvent:
    return HookEvent(ts=ts, src="claude", hook=name, data=data)


def test_the_stop_hook_and_the_stream_result_give_one_mark() -> None:
    """The Stop hook runs before the result is written: stopped(turn_end) becomes the
    denial's block with the same mark; and a Stop after the result changes nothing."""
    denied = TurnEnded(ts=11.0, result="I could not.", denials=("Bash(x)",))
    exited = Exited(ts=12.0, src="headless", exit_code=0, result="I could not.",
                    denials=("Bash(x)",))
    stop = hook("Stop", 10.0, last_assistant_message="I could not.")
    hook_first = fold("w", journal(hook("PreToolUse", 9.0), stop, denied, exited), now=20.0)
    stream_first = fold("w", journal(hook("PreToolUse", 9.0), denied, stop, exited), now=20.0)
    for state in (hook_first, stream_first):
        assert (state.state, state.reason) == ("blocked", "permission_denied")
    # the mark is that of the first of the two, whichever it was
    assert hook_first.seq == 3 and stream_first.seq == 3
    assert hook_first.hooks_seen and not hook_first.hooks_not_running


def test_a_blocked_envelope_after_a_denial_keeps_its_mark_whichever_comes_first() -> None:
    text = "FLEET_WORKER_BLOCKED: need perm"
    denied = TurnEnded(ts=11.0, result=text, denials=("Bash(x)",))
    stop = hook("Stop", 10.0, last_assistant_message=text)
    for order in ((stop, denied), (denied, stop)):
        state = fold("w", journal(*order), now=20.0)
        assert (state.state, state.reason, state.seq) == ("blocked", "permission_denied", 2)


def test_done_from_both_sources_is_one_mark() -> None:
    text = "ok\nFLEET_WORKER_DONE: x"
    stop, turn = hook("Stop", 10.0, last_assistant_message=text), TurnEnded(ts=10.5, result=text)
    end = Exited(ts=12.0, src="headless", exit_code=0, result=text)
    for order in ((stop, turn), (turn, stop)):
        state = fold("w", journal(*order, end), now=20.0)
        assert (state.state, state.reason, state.seq) == ("done", "claimed", 2)


def test_a_claim_before_automatic_turns_is_kept() -> None:
    events = read([INIT, result("FLEET_WORKER_DONE: main work"), tool_use(),
                   result("noted the task", origin={"kind": "task-notification"})])
    state = fold("w", journal(*events), now=200.0)
    assert (state.state, state.reason) == ("done", "claimed")
    assert state.envelope is not None and state.envelope.text == "main work"


def test_a_limit_from_the_synthetic_message_and_the_rate_limit_event() -> None:
    rejected = {"type": "rate_limit_event", "session_id": "s1", "rate_limit_info": {
        "status": "rejected", "resetsAt": 5000, "rateLimitType": "five_hour",
        "unifiedWindows": {"five_hour": {"utilization": 1, "resetsAt": 5000}}}}
    synthetic = {"type": "assistant", "error": "rate_limit", "session_id": "s1", "message": {
        "model": "<synthetic>", "content": [{"type": "text", "text": "You've hit your limit"}]}}
    failed = {"type": "result", "is_error": True, "api_error_status": 429, "result": "x"}
    events = read([INIT, rejected, synthetic, failed])
    assert events[1] == RateLimited(ts=101.0, status="rejected", resets_at=5000.0,
                                    utilization=1.0, limit_type="five_hour")
    assert isinstance(events[2], HookEvent) and events[2].hook == "StopFailure"
    assert len(events) == 3  # the failed result adds nothing: the exit says how it ended
    state = fold("w", journal(*events), now=200.0)
    assert (state.state, state.reason, state.seq) == ("blocked", "limit", 3)
    assert state.limit_reset == 5000.0


def test_overload_is_left_to_the_supervisor() -> None:
    synthetic = {"type": "assistant", "error": "server_error", "message": {
        "content": [{"type": "text", "text": "API Error: 529 Overloaded"}]}}
    assert read([synthetic]) == []


@pytest.mark.parametrize("junk", [b"", b"not json", b"[1,2]", b'{"type":"assistant"}',
                                  b'{"type":"rate_limit_event","rate_limit_info":{"status":7}}',
                                  b'{"type":"result","result":["x"],"permission_denials":"x"}',
                                  b"\xff\xfe", b'{"type":"system","subtype":"init","cwd":5}'])
def test_any_line_is_read_without_raising(junk: bytes) -> None:
    for event in read([junk]):
        # whatever came of it can be journaled and read back
        assert decode_line(encode_line(event).rstrip(b"\n")) == event


#: ``codex exec --json`` lines as Codex 0.171.0 wrote them (tests/e2e measures them again).
CODEX_DONE = [
    b'{"type":"thread.started","thread_id":"th1"}',
    b'{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata'
    b' for `fake-model` not found."}}',
    b'{"type":"turn.started"}',
    b'{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"ls",'
    b'"aggregated_output":"","exit_code":null,"status":"in_progress"}}',
    b'{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"ls",'
    b'"aggregated_output":"","exit_code":0,"status":"completed"}}',
    b'{"type":"item.completed","item":{"id":"item_2","type":"agent_message",'
    b'"text":"ok\\nFLEET_WORKER_DONE: x"}}',
    b'{"type":"turn.completed","usage":{"input_tokens":50,"output_tokens":20}}',
]
CODEX_LIMIT = [
    b'{"type":"thread.started","thread_id":"th1"}',
    b'{"type":"turn.started"}',
    b'{"type":"error","message":"You\xe2\x80\x99ve hit your usage limit. Try again later."}',
    b'{"type":"turn.failed","error":{"message":"You\xe2\x80\x99ve hit your usage limit. Try again'
    b' later."}}',
]


def read_codex(lines: list[bytes]) -> list[Event]:
    reader = StreamReader("codex")
    return [e for n, raw in enumerate(lines) for e in reader.feed(raw, 100.0 + n)]


def test_codex_events() -> None:
    events = read_codex(CODEX_DONE)
    assert [getattr(e, "hook", type(e).__name__) for e in events] == [
        "SessionStart", "PreToolUse", "TurnEnded"]
    assert events[1] == HookEvent(ts=103.0, src="stream", hook="PreToolUse", data={
        "tool_name": "command_execution", "tool_use_id": "item_1", "session_id": "th1"})
    state = fold("w", journal(*events), now=200.0)
    assert (state.state, state.reason, state.session_id) == ("done", "claimed", "th1")


def test_a_codex_limit_is_journaled_once() -> None:
    events = read_codex(CODEX_LIMIT)
    assert [getattr(e, "hook", "") for e in events] == ["SessionStart", "StopFailure"]
    state = fold("w", journal(*events), now=200.0)
    assert (state.state, state.reason) == ("blocked", "limit")


def test_a_result_while_background_tasks_run_is_not_the_end_of_the_work() -> None:
    """2.1.332 lists its running background tasks whenever they change; a result written
    while one runs keeps the worker working, and the claim stands when the work is over."""
    started = {"type": "system", "subtype": "background_tasks_changed",
               "tasks": [{"task_id": "a1", "task_type": "local_agent"}]}
    finished = {"type": "system", "subtype": "background_tasks_changed", "tasks": []}
    events = read([INIT, tool_use(), started, result("FLEET_WORKER_DONE: main work")])
    assert isinstance(events[-1], TurnEnded) and events[-1].background == 1
    running = fold("w", journal(*events), now=200.0)
    assert (running.state, running.background) == ("working", 1)
    more = read([INIT, tool_use(), started, result("FLEET_WORKER_DONE: main work"), finished,
                 result("the check passed", origin={"kind": "task-notification"})])
    done = fold("w", journal(*more), now=200.0)
    assert (done.state, done.reason) == ("done", "claimed")
    assert done.envelope is not None and done.envelope.text == "main work"
