"""The journal port: what an adapter may do with fleet's journals, and nothing more.

Adapters are handed a :class:`JournalPort` by keyword (``journal=``) by whoever composes them
(the :class:`~fleet.Fleet` facade, the orchestration verbs, the CLI); they never reach for the
facade themselves, so the facade may import them without a loop. :class:`FileJournal` is the
port on a fleet home's files, the one used when none is given; a test may hand in any object
with these methods.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from fleet import _journal
from fleet._clock import Clock, SystemClock
from fleet._core.events import Attached, Event, FollowUpSent, Registered
from fleet._core.fold import DEFAULT_QUIET_AFTER, Policy, WorkerState
from fleet._core.ids import validate_worker_id
from fleet._errors import SettingsError, UnknownWorker
from fleet._fold_cache import load_states
from fleet._home import resolve_home, worker_dir


@runtime_checkable
class JournalPort(Protocol):
    """Append to a worker's journal, read its state, wait for it to change."""

    @property
    def home(self) -> Path: ...

    @property
    def clock(self) -> Clock: ...

    def append(self, worker: str, event: Event) -> None:
        """Append ``event`` to ``worker``'s journal."""
        ...

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
        """Journal a worker's registration (with the permission policy it was started with,
        when fleet started it) and index its worktree."""
        ...

    def attach(self, worker: str, handle: dict[str, str]) -> None:
        """Journal handles a host reported after the registration."""
        ...

    def note_follow_up(
        self, worker: str, *, text: str | None = None, file: str | None = None
    ) -> None:
        """Journal that a follow-up was sent (the state it answers counts as seen)."""
        ...

    def state(self, worker: str) -> WorkerState:
        """The worker's state as of now."""
        ...

    def wait_until(
        self, worker: str, ready: Callable[[], bool], *, timeout: float
    ) -> bool:
        """Block until ``ready()`` holds, evaluated now and again each time the worker's
        journal changes; False after ``timeout`` seconds."""
        ...


def check_text(value: str | None) -> None:
    """A value for the journal: JSON text, so valid Unicode (no lone surrogate)."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SettingsError(f"{value!r} is not valid UTF-8 text") from None


class FileJournal:
    """The :class:`JournalPort` on the journal files of a fleet home. ``src`` is what the
    events it writes say they come from."""

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        clock: Clock | None = None,
        src: str = "fleet",
        quiet_after: float = DEFAULT_QUIET_AFTER,
    ) -> None:
        self._home = resolve_home(home)
        self._clock: Clock = clock or SystemClock()
        self.src = src
        self.policy = Policy(quiet_after=quiet_after)

    @property
    def home(self) -> Path:
        return self._home

    @property
    def clock(self) -> Clock:
        return self._clock

    def append(self, worker: str, event: Event) -> None:
        _journal.append(self._home, validate_worker_id(worker), event)

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
        """Everything is checked before anything is written, and a registration that fails
        half-way takes back what it wrote for a new worker: no phantom worker is left."""
        validate_worker_id(worker)
        path = _journal.check_worktree_path(os.path.realpath(os.fspath(worktree)))
        for value in (tool, profile, model, adapter, branch, base, task, *(handle or {}).values()):
            check_text(value)
        event = Registered(
            ts=self._clock.now(),
            src=self.src,
            tool=tool,
            profile=profile,
            model=model,
            adapter=adapter,
            handle=dict(handle or {}),
            worktree=path,
            branch=branch,
            base=base,
            task=task,
            permissions=dict(permissions or {}),
        )
        is_new = not _journal.exists(self._home, worker)
        try:
            # The id is checked above: write and read past this port's own append and state,
            # which check it again for callers that come to them directly.
            _journal.append(self._home, worker, event)
            _journal.index_worktree(self._home, worker, path)
        except BaseException:
            if is_new:
                shutil.rmtree(worker_dir(self._home, worker), ignore_errors=True)
            raise
        return self._state(worker)

    def attach(self, worker: str, handle: dict[str, str]) -> None:
        _journal.require(self._home, validate_worker_id(worker))
        self.append(worker, Attached(ts=self._clock.now(), src=self.src, handle=dict(handle)))

    def note_follow_up(
        self, worker: str, *, text: str | None = None, file: str | None = None
    ) -> None:
        current = self.state(worker)
        self.append(
            worker,
            FollowUpSent(
                ts=self._clock.now(),
                src=self.src,
                text=text[:500] if text else None,
                file=file,
                seen=current.mark,
            ),
        )

    def state(self, worker: str) -> WorkerState:
        return self._state(validate_worker_id(worker))

    def _state(self, worker: str) -> WorkerState:
        """:meth:`state`, for a worker id already checked."""
        _journal.require(self._home, worker)
        states = load_states(self._home, [worker], self._clock.now(), self.policy, ())
        if not states:
            raise UnknownWorker(f"no worker {worker!r}")
        return states[0]

    def wait_until(
        self, worker: str, ready: Callable[[], bool], *, timeout: float
    ) -> bool:
        # watchdog is loaded only by what waits: appending and reading never pay for it.
        from fleet._watch import Watcher

        with Watcher(
            self._home, workers=[validate_worker_id(worker)], clock=self._clock,
            policy=self.policy, liveness=False,
        ) as watcher:
            return watcher.until(ready, timeout)


__all__ = ["FileJournal", "JournalPort", "check_text"]
