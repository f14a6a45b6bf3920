"""Delivering to a worker: a follow-up or a hand-over, one at a time per worker.

Each delivery holds the worker's turn lock (:mod:`fleet._turns`) from the moment it reads the
worker's state to the moment its own delivery is journaled, so the state it returns is the one
just before its own line: a receipt read against it is about this delivery and no other. A
headless worker keeps the lock for the whole run the delivery starts (its supervisor holds
it), so a second follow-up waits for the first one's run to end, or is refused with
``queue=False``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from fleet._core.fold import WorkerState
from fleet._port import FileJournal, JournalPort
from fleet._turns import Busy, worker_turn
from fleet.adapters._base import Adapter, LaunchSpec, Workspace
from fleet.adapters.headless import HeadlessAdapter


@attrs.frozen(kw_only=True)
class Delivery:
    """A delivery made: the worker's state just before its own journal line (read under the
    worker's turn lock), and for a hand-over the new handles."""

    worker: str
    adapter: str
    before: WorkerState
    handle: Mapping[str, str] = attrs.field(factory=dict)


def send_follow_up(
    adapter: Adapter,
    workspace: Workspace,
    text_file: Path,
    *,
    worker: str,
    journal: JournalPort | None = None,
    queue: bool = True,
    waiting: Callable[[], None] | None = None,
) -> Delivery:
    """Send the follow-up in ``text_file`` to ``worker`` through ``adapter``, after any
    delivery under way (``queue``; else :class:`~fleet._turns.Busy`). A worker in an app that
    is in the middle of a turn is refused too without ``queue``: its agent would queue it."""
    journal = journal or FileJournal()
    with worker_turn(journal.home, worker, queue=queue, waiting=waiting) as turn:
        before = journal.state(worker)
        if isinstance(adapter, HeadlessAdapter):
            adapter.send(workspace, text_file, queue=queue, turn=turn)
        else:
            if not queue and before.state == "working":
                raise Busy(f"{worker} is in the middle of a turn; nothing was sent: send it "
                           "again once it stops, or without --no-queue to let its agent "
                           "queue it")
            adapter.send(workspace, text_file)
    return Delivery(worker=worker, adapter=adapter.name, before=before)


def hand_over(
    adapter: Adapter,
    workspace: Workspace,
    spec: LaunchSpec,
    *,
    journal: JournalPort | None = None,
    queue: bool = True,
    waiting: Callable[[], None] | None = None,
) -> Delivery:
    """Hand ``spec.worker``'s task over through ``adapter``, after any delivery under way (see
    :func:`send_follow_up`)."""
    journal = journal or FileJournal()
    worker = spec.worker
    with worker_turn(journal.home, worker, queue=queue, waiting=waiting) as turn:
        before = journal.state(worker)
        if isinstance(adapter, HeadlessAdapter):
            handle = adapter.hand_over(workspace, spec, queue=queue, turn=turn)
        else:
            handle = adapter.hand_over(workspace, spec)
    return Delivery(worker=worker, adapter=adapter.name, before=before, handle=dict(handle))
