"""A follow-up or hand-over is taken when the agent's next prompt or session shows it ran on
it; the receipt says taken, not taken (and why), or not known yet."""

from __future__ import annotations

from fleet._core import events as ev
from fleet._core.fold import fold
from fleet._orchestrate import receipt_of

W = "w1"


def hook(ts: float, name: str) -> ev.HookEvent:
    return ev.HookEvent(ts=ts, src="claude", hook=name, data={})


BASE: list[ev.Event] = [ev.Registered(ts=1.0, worktree="/w"), hook(2.0, "UserPromptSubmit"),
                        hook(3.0, "Stop")]


def test_no_delivery_no_receipt() -> None:
    assert fold(W, BASE, 10.0).delivery is None


def test_the_next_prompt_or_session_takes_a_follow_up() -> None:
    sent = [*BASE, ev.FollowUpSent(ts=4.0)]
    before = fold(W, BASE, 10.0)
    assert fold(W, sent, 10.0).delivery == "sent"
    assert receipt_of(before, fold(W, sent, 10.0)).taken is None
    for name in ("UserPromptSubmit", "SessionStart"):
        now = fold(W, [*sent, hook(5.0, name)], 10.0)
        assert now.delivery == "taken"
        assert receipt_of(before, now).taken is True


def test_a_follow_up_typed_into_a_busy_turn_is_queued_until_its_prompt() -> None:
    busy = BASE[:2]
    before = fold(W, busy, 10.0)
    sent = [*busy, ev.FollowUpSent(ts=4.0), hook(5.0, "PreToolUse"), hook(6.0, "PostToolUse"),
            hook(7.0, "Stop")]
    now = fold(W, sent, 10.0)
    assert now.delivery == "sent"
    receipt = receipt_of(before, now)
    assert (receipt.taken, receipt.queued) == (None, True)
    assert receipt_of(before, fold(W, [*sent, hook(8.0, "UserPromptSubmit")], 10.0)).taken


def test_a_follow_up_whose_agent_cannot_start_is_not_taken_and_says_why() -> None:
    before = fold(W, BASE, 10.0)
    events = [*BASE, ev.FollowUpSent(ts=4.0),
              ev.Exited(ts=5.0, exit_code=127, is_error=True, result="cannot start claude: x")]
    receipt = receipt_of(before, fold(W, events, 10.0))
    assert (receipt.taken, receipt.state) == (False, "gone")
    assert receipt.why == "cannot start claude: x"


def test_a_follow_up_nobody_picked_up_goes_quiet_and_is_not_taken() -> None:
    before = fold(W, BASE, 10.0)
    receipt = receipt_of(before, fold(W, [*BASE, ev.FollowUpSent(ts=4.0)], 4.0 + 301.0))
    assert (receipt.taken, receipt.state, receipt.reason) == (
        False, "quiet", "follow_up_not_taken")


def test_a_hand_over_is_taken_by_its_new_session() -> None:
    handed = [*BASE, ev.HandedOver(ts=4.0, profile="claude:side")]
    assert fold(W, handed, 10.0).delivery == "sent"
    assert fold(W, [*handed, hook(5.0, "SessionStart")], 10.0).delivery == "taken"
