"""Delivery receipts: whether a follow-up or a hand-over was taken."""


from __future__ import annotations

import os

import attrs

from fleet._clock import Clock
from fleet._core.fold import WorkerState
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


def wait_receipt(worker: str, before: WorkerState, *, home: str | os.PathLike[str] | None = None,
                 timeout: float, clock: Clock | None = None) -> Receipt:
    """Block (on the watcher) until the delivery made at ``before`` is known to be taken or
    not, or ``timeout`` passes; the receipt as it then stands."""
    journal = FileJournal(home, clock=clock)
    latest: list[Receipt] = []

    def known() -> bool:
        latest[:] = [receipt_of(before, journal.state(worker))]
        return latest[0].taken is not None

    journal.wait_until(worker, known, timeout=timeout)
    return latest[-1] if latest else receipt_of(before, journal.state(worker))
