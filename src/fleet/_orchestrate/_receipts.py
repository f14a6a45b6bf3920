"""Delivery receipts: whether a follow-up or a hand-over was taken."""


from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Final

import attrs

from fleet import _journal
from fleet._clock import Clock
from fleet._core.events import Event, FollowUpSent, HandedOver
from fleet._core.fold import Policy, WorkerState, fold
from fleet._core.ids import validate_worker_id
from fleet._port import FileJournal

# -- delivery receipts ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Receipt:
    """Whether a follow-up or a hand-over was taken: ``taken`` once the agent ran on it (a
    prompt, a session, a turn that ended), False when it did not (its agent could not start,
    or no prompt came within the quiet bound), None while that is not known yet (still
    starting, or typed into a worker that was busy, which takes it after its turn)."""

    taken: bool | None
    state: str
    reason: str
    #: why it was not taken, in one line, when it was not
    why: str | None = None
    #: it was typed into a turn in progress, which queues it until the turn ends
    queued: bool = False


def receipt_of(before: WorkerState, now: WorkerState) -> Receipt:
    """What ``now`` says of the delivery journaled just after ``before`` (the worker's state
    when it was sent): taken once the agent's next hook ran, not taken when the worker went
    gone or quiet first."""
    from fleet._core.attention import exit_why, reason_text

    if now.delivery == "taken":
        return Receipt(taken=True, state=now.state, reason=now.reason)
    if now.delivery == "sent" and now.state in ("gone", "quiet") and now.needs_attention:
        why = exit_why(now) or reason_text(now)
        return Receipt(taken=False, state=now.state, reason=now.reason, why=why)
    return Receipt(taken=None, state=now.state, reason=now.reason,
                   queued=before.state == "working")


#: The journal lines that deliver something to a worker.
_DELIVERIES: Final = (FollowUpSent, HandedOver)


def own_receipt(before: WorkerState, events: Sequence[Event], now: float,
                policy: Policy | None = None) -> Receipt:
    """The receipt of the delivery journaled just after ``before`` (the first delivery line
    from ``before.events`` on), read from the journal up to the next delivery: what a later
    follow-up or hand-over did never counts for this one."""
    own = next((i for i in range(before.events, len(events))
                if isinstance(events[i], _DELIVERIES)), None)
    if own is None:
        return Receipt(taken=None, state=before.state, reason=before.reason)
    later = next((i for i in range(own + 1, len(events))
                  if isinstance(events[i], _DELIVERIES)), len(events))
    state = fold(before.worker, events[:later], now, policy or Policy())
    receipt = receipt_of(before, state)
    if receipt.taken is None and later < len(events):
        # Another delivery came after it, and it was never taken before that one.
        return Receipt(taken=False, state=state.state, reason=state.reason,
                       why="another delivery followed before this one was taken")
    return receipt


def wait_receipt(worker: str, before: WorkerState, *, home: str | os.PathLike[str] | None = None,
                 timeout: float, clock: Clock | None = None) -> Receipt:
    """Block (on the watcher) until the delivery journaled just after ``before`` is known to
    be taken or not, or ``timeout`` passes; the receipt as it then stands. ``before`` must be
    the state read under the worker's turn lock (:mod:`fleet._orchestrate._deliver`), so that
    the next delivery line is this one."""
    journal = FileJournal(home, clock=clock)
    latest: list[Receipt] = []

    def current() -> Receipt:
        events = _journal.read_events(journal.home, validate_worker_id(worker))
        return own_receipt(before, events, journal.clock.now(), journal.policy)

    def known() -> bool:
        latest[:] = [current()]
        return latest[0].taken is not None

    journal.wait_until(worker, known, timeout=timeout)
    return latest[-1] if latest else current()
