"""What a run's end tells beyond its exit code: the tool calls its permission policy denied
(Claude Code lists them only in its result) and, for a run that failed, the agent's own reason
in one line."""

from __future__ import annotations

import json

from fleet._core import events as ev
from fleet._core.attention import attention_details, exit_why, next_step, reason_text
from fleet._core.fold import fold
from fleet._core.results import parse_claude
from fleet._report import report_line

W = "w1"
ROOT = ("--dangerously-skip-permissions cannot be used with root/sudo privileges for "
        "security reasons")


def reg() -> ev.Registered:
    return ev.Registered(ts=1.0, worktree="/w")


def stop(ts: float, message: str) -> ev.HookEvent:
    return ev.HookEvent(ts=ts, src="claude", hook="Stop",
                        data={"last_assistant_message": message})


def denied_result(**kw: object) -> str:
    body = {"type": "result", "subtype": "success", "is_error": False, "result": "ok",
            "session_id": "s1", "permission_denials": [
                {"tool_name": "Bash", "tool_use_id": "t1",
                 "tool_input": {"command": "touch  outside.txt", "description": "x"}},
                {"tool_name": "Write", "tool_use_id": "t2",
                 "tool_input": {"file_path": "/w/a.txt", "content": "x"}},
                {"tool_name": "Bash", "tool_use_id": "t3",
                 "tool_input": {"command": "touch  outside.txt"}},
                {"tool_name": "WebFetch", "tool_use_id": "t4", "tool_input": {}},
                {"tool_use_id": "no tool name"},
            ], **kw}
    return json.dumps(body)


def test_the_result_lists_each_distinct_denied_call() -> None:
    outcome = parse_claude(denied_result(), "", 0, 100.0)
    assert outcome.kind == "ok"
    assert outcome.denials == ("Bash(touch outside.txt)", "Write(/w/a.txt)", "WebFetch")
    assert parse_claude(denied_result(permission_denials=[]), "", 0, 1.0).denials == ()
    assert parse_claude(denied_result(permission_denials="x"), "", 0, 1.0).denials == ()


def test_denials_survive_the_journal() -> None:
    event = ev.Exited(ts=3.0, exit_code=0, denials=("Bash(touch x)",))
    assert ev.decode_line(ev.encode_line(event)) == event
    assert b"denials" not in ev.encode_line(ev.Exited(ts=3.0, exit_code=0))


def test_a_run_that_only_ends_after_denials_is_blocked_by_its_policy() -> None:
    events = [reg(), ev.Started(ts=2, pid=5),
              ev.Exited(ts=3, exit_code=0, result="I could not.", denials=("Bash(touch x)",))]
    state = fold(W, events, 10.0)
    assert (state.state, state.reason) == ("blocked", "permission_denied")
    assert state.needs_attention and state.denials == ("Bash(touch x)",)
    assert reason_text(state) == "permission_denied · Bash(touch x)"
    assert "denied Bash(touch x)" in next_step(state) and "--allowed-tools" in next_step(state)
    assert attention_details(state)["denials"] == ["Bash(touch x)"]
    # Without the denial the same run is a worker gone with no claim.
    plain = fold(W, [*events[:2], ev.Exited(ts=3, exit_code=0, result="I could not.")], 10.0)
    assert (plain.state, plain.reason) == ("gone", "exited:0")


def test_the_denial_names_the_blocked_its_last_turn_wrote_without_a_second_wake() -> None:
    said = "The allowlist has no touch.\nFLEET_WORKER_BLOCKED: cannot create the file"
    turn = [reg(), ev.Started(ts=2, pid=5), stop(3.0, said)]
    before = fold(W, turn, 10.0)
    assert (before.state, before.reason) == ("blocked", "worker")
    after = fold(W, [*turn, ev.Exited(ts=4, exit_code=0, result=said,
                                      denials=("Bash(touch x)",))], 10.0)
    assert (after.state, after.reason) == ("blocked", "permission_denied")
    assert after.mark == before.mark
    # With no denial, the run's end leaves the worker's own BLOCKED as it was.
    kept = fold(W, [*turn, ev.Exited(ts=4, exit_code=0, result=said)], 10.0)
    assert (kept.state, kept.reason, kept.mark) == ("blocked", "worker", before.mark)


def test_a_done_claim_stays_done_and_says_what_was_denied() -> None:
    said = "Wrote it another way.\nFLEET_WORKER_DONE: notes added"
    events = [reg(), ev.Started(ts=2, pid=5), stop(3.0, said),
              ev.Exited(ts=4, exit_code=0, result=said, denials=("Bash(touch x)",))]
    state = fold(W, events, 10.0)
    assert (state.state, state.reason) == ("done", "claimed")
    assert "its policy denied Bash(touch x)" in next_step(state)


def test_a_later_run_without_denials_clears_them() -> None:
    events = [reg(), ev.Started(ts=2, pid=5),
              ev.Exited(ts=3, exit_code=0, result="no", denials=("Bash(touch x)",)),
              ev.FollowUpSent(ts=4.0), ev.Started(ts=5, pid=6),
              ev.Exited(ts=6, exit_code=0, result="ok\nFLEET_WORKER_DONE: done")]
    state = fold(W, events, 10.0)
    assert (state.state, state.denials) == ("done", ())


def test_a_worker_that_dies_says_why_in_one_line() -> None:
    stderr = f"{ROOT}\n    at main (file:///cli.js:1:1)\n"
    outcome = parse_claude("", stderr, 1, 10.0)
    events = [reg(), ev.Started(ts=2, pid=5),
              ev.Exited(ts=3, exit_code=1, is_error=True, result=outcome.result)]
    state = fold(W, events, 10.0)
    assert (state.state, state.reason) == ("gone", "exited:1")
    assert exit_why(state) == ROOT
    assert ROOT in next_step(state)
    assert reason_text(state).startswith("exited:1 · --dangerously-skip-permissions cannot")
    assert len(reason_text(state)) < 80
    assert attention_details(state)["why"] == ROOT
    assert report_line(state).why == f"not done: gone (exited:1): {ROOT}"


def test_a_run_that_went_well_has_no_reason_to_give() -> None:
    events = [reg(), ev.Started(ts=2, pid=5), ev.Exited(ts=3, exit_code=0, result="Looked.")]
    state = fold(W, events, 10.0)
    assert exit_why(state) is None
    assert reason_text(state) == "exited:0"
    assert "why" not in attention_details(state)
    blank = fold(W, [*events[:2], ev.Exited(ts=3, exit_code=2, is_error=True,
                                            result="\n  \n")], 10.0)
    assert exit_why(blank) is None
