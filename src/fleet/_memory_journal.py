"""An in-memory :class:`~fleet._port.JournalPort`: events kept in a list per worker and folded
on every read, for tests of code that drives adapters (published in :mod:`fleet.testing`)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fleet._clock import Clock
from fleet._clock import MockClock as _MockClock
from fleet._core.events import Attached, Event, FollowUpSent, Registered
from fleet._core.fold import Policy, WorkerState, fold
from fleet._core.ids import validate_worker_id
from fleet._errors import UnknownWorker


class MemoryJournal:
    """Journals in memory. ``home`` is only where an adapter keeps its own files (worktrees,
    launch records); nothing of the journal is written there. Thread-safe: ``wait_until``
    wakes on every append."""

    def __init__(self, home: str | os.PathLike[str], *, clock: Clock | None = None,
                 src: str = "fleet", policy: Policy | None = None) -> None:
        self._home = Path(home)
        self._clock: Clock = clock or _MockClock()
        self.src = src
        self.policy = policy or Policy()
        self._events: dict[str, list[Event]] = {}
        self._changed = threading.Condition()

    @property
    def home(self) -> Path:
        return self._home

    @property
    def clock(self) -> Clock:
        return self._clock

    def events(self, worker: str) -> tuple[Event, ...]:
        """Everything journaled for ``worker``, in order."""
        with self._changed:
            return tuple(self._events.get(worker, ()))

    def append(self, worker: str, event: Event) -> None:
        validate_worker_id(worker)
        with self._changed:
            self._events.setdefault(worker, []).append(event)
            self._changed.notify_all()

    def register(
        self,
        worker: str,
        *,
        worktree: str | os.PathLike[str],
        tool: str | None = None,
        profile: str | None = None,
        model: str | None = None,
        adapter: str | None = None,
        handle: dict[str, str] | None = None,
        branch: str | None = None,
        base: str | None = None,
        task: str | None = None,
        permissions: Mapping[str, Any] | None = None,
    ) -> WorkerState:
        self.append(worker, Registered(
            ts=self._clock.now(), src=self.src, worktree=os.fspath(worktree), tool=tool,
            profile=profile, model=model, adapter=adapter, handle=dict(handle or {}),
            branch=branch, base=base, task=task, permissions=dict(permissions or {}),
        ))
        return self.state(worker)

    def attach(self, worker: str, handle: dict[str, str]) -> None:
        self.state(worker)
        self.append(worker, Attached(ts=self._clock.now(), src=self.src, handle=dict(handle)))

    def note_follow_up(
        self, worker: str, *, text: str | None = None, file: str | None = None
    ) -> None:
        current = self.state(worker)
        self.append(worker, FollowUpSent(ts=self._clock.now(), src=self.src,
                                         text=text[:500] if text else None, file=file,
                                         seen=current.mark))

    def state(self, worker: str) -> WorkerState:
        events = self.events(validate_worker_id(worker))
        if not events:
            raise UnknownWorker(f"no worker {worker!r} in this memory journal")
        return fold(worker, events, self._clock.now(), self.policy)

    def wait_until(self, worker: str, ready: Callable[[], bool], *, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(ready, timeout)
