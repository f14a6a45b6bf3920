"""Watching journals: the tailer behind ``wait``, ``poll`` and ``watch``.

One watchdog observer (inotify here) watches the whole ``workers/`` tree; file events only mark a
worker dirty and wake the waiter, which then reads the new bytes from saved offsets and folds them.
A slow stat sweep is the safety net for lost or overflowed file events, quiet deadlines are
timers computed from the fold, and dead processes are reported by a pidfd watch. Nothing polls
in a loop: between events the waiting thread sleeps on a condition variable.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Final, Literal

import attrs
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from fleet._clock import Clock, SystemClock
from fleet._core.events import Vanished
from fleet._core.fold import Policy, WorkerState
from fleet._core.ids import is_worker_id
from fleet._fold_cache import Folded, load_folded
from fleet._home import ensure_dir, journal_path, workers_dir
from fleet._journal import append, list_workers
from fleet._liveness import DeathWatch
from fleet._proc import is_alive

# watchdog's recursive inotify watch warns when a directory made while the watch starts is
# added twice; it is added to the same callback both times, so nothing is lost.
warnings.filterwarnings(
    "ignore", message=r"Callback with id .* already exists for watch", category=RuntimeWarning
)

Backend = Literal["auto", "native", "polling"]
SWEEP_INTERVAL: Final = 15.0
#: How often the polling observer (the fallback when file events are unavailable) looks.
POLL_INTERVAL: Final = 1.0
#: How long a dead process's worker may take to journal its own exit before fleet calls it
#: vanished (a supervisor writes ``exited`` a few milliseconds after its child ends).
VANISH_GRACE: Final = 2.0


@attrs.frozen(kw_only=True)
class WaitResult:
    """What ``wait`` and ``poll`` return: every watched worker that needs attention, or a timeout
    when none does."""

    timed_out: bool
    attention: tuple[WorkerState, ...]
    workers: tuple[WorkerState, ...] = ()
    #: Workers asked for by name whose journal is gone (deleted or moved away while followed).
    missing: tuple[str, ...] = ()

    @property
    def marks(self) -> tuple[str, ...]:
        return tuple(state.mark for state in self.attention)


@attrs.frozen(kw_only=True)
class Transition:
    """A worker's state changed (or it appeared): ``before`` is None for a new worker."""

    worker: str
    before: WorkerState | None
    after: WorkerState


#: Only changes matter. Opens and closes are left out on purpose: the waiter's own reads would
#: otherwise wake it again and again.
_EVENTS: Final = frozenset({"created", "modified", "moved", "deleted"})
_EVENT_FILTER: Final = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileDeletedEvent,
    DirCreatedEvent,
    DirMovedEvent,
    DirDeletedEvent,  # a worker's directory moved out of workers/ (a lone IN_MOVED_FROM)
]


class _JournalEvents(FileSystemEventHandler):
    def __init__(self, root: Path, notify: Callable[[str], None]) -> None:
        self._root = os.fsencode(root)
        self._notify = notify
        self.errors = 0

    def on_any_event(self, event: FileSystemEvent) -> None:
        # Runs on the observer's thread: it must never raise, or watchdog stops dispatching.
        try:
            if event.event_type not in _EVENTS:
                return
            for raw in (event.src_path, getattr(event, "dest_path", b"")):
                if not raw:
                    continue
                path = os.fsencode(raw)
                parent, name = os.path.split(path)
                if name == b"journal.jsonl":
                    self._notify(os.fsdecode(os.path.basename(parent)))
                elif event.is_directory and parent == self._root:
                    self._notify(os.fsdecode(name))
        except Exception:
            self.errors += 1


def open_observer(
    root: Path,
    handler: FileSystemEventHandler,
    backend: Backend,
    on_fallback: Callable[[str], None] | None = None,
) -> BaseObserver:
    """Start an observer on ``root``: the native one, falling back to polling where native
    file events are unavailable or exhausted (inotify's watch or instance limit: watchdog
    raises OSError), and saying so through ``on_fallback``. ``backend="native"`` raises
    instead of falling back."""
    if backend != "polling":
        observer: BaseObserver = Observer()
        try:
            observer.schedule(handler, str(root), recursive=True, event_filter=_EVENT_FILTER)
            observer.start()
            return observer
        except OSError as exc:
            if backend == "native":
                raise
            with contextlib.suppress(Exception):
                observer.stop()
            if on_fallback is not None:
                on_fallback(
                    f"file events are unavailable ({exc.strerror or exc}); watching "
                    f"{root} by polling every {POLL_INTERVAL:g}s instead"
                )
    polling = PollingObserver(timeout=POLL_INTERVAL)
    polling.schedule(handler, str(root), recursive=True)
    polling.start()
    return polling


def _log_note(text: str) -> None:
    logging.getLogger("fleet").warning("%s", text)


def _watch_root(home: Path) -> Path:
    """``workers/``, created if need be; on a home that cannot be written (read-only, full)
    and has no ``workers/`` yet, the home itself: a worker appearing there is still seen."""
    try:
        return ensure_dir(workers_dir(home))
    except OSError:
        if home.is_dir():
            return home
        raise


class Watcher:
    """Follows a set of workers' journals and answers ``poll``, ``wait`` and ``transitions``.

    ``workers=None`` follows every worker, including ones registered later. Use as a context
    manager: ``close()`` stops and joins its threads."""

    def __init__(
        self,
        home: Path,
        *,
        workers: Iterable[str] | None = None,
        clock: Clock | None = None,
        policy: Policy | None = None,
        backend: Backend | None = None,
        sweep_interval: float = SWEEP_INTERVAL,
        liveness: bool = True,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        self.home = home
        self.clock: Clock = clock or SystemClock()
        self.policy = policy or Policy()
        self._names = None if workers is None else list(dict.fromkeys(workers))
        self._sweep_interval = sweep_interval
        self._cond = threading.Condition()
        self._dirty: set[str] = set()
        self._stats: dict[str, tuple[int, int, int]] = {}
        self._vanishing: dict[str, float] = {}
        self._missing: set[str] = set()
        root = _watch_root(home)
        self._folded: dict[str, Folded] = load_folded(home, self._names)
        self._handler = _JournalEvents(root, self._mark_dirty)
        chosen = backend or os.environ.get("FLEET_WATCH_BACKEND", "auto")
        if chosen not in ("auto", "native", "polling"):
            chosen = "auto"
        reasons: list[str] = []
        self._observer = open_observer(
            root, self._handler, chosen, reasons.append  # type: ignore[arg-type]
        )
        #: Why file events are not used, when the native observer could not start.
        self.fallback_reason: str | None = reasons[0] if reasons else None
        if self.fallback_reason is not None:
            (on_note or _log_note)(self.fallback_reason)
        self.backend = "polling" if isinstance(self._observer, PollingObserver) else "native"
        self._deaths: DeathWatch | None = DeathWatch(self._on_death) if liveness else None
        if self._deaths is not None:
            self._deaths.start()
        self._last_sweep = self.clock.monotonic()
        # Events may have landed between the initial fold and the observer's start.
        self._dirty.update(self._folded)
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Watcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._observer.stop()
        self._observer.join(10)
        if self._deaths is not None:
            self._deaths.close()
        with self._cond:
            self._cond.notify_all()

    @property
    def handler_errors(self) -> int:
        return self._handler.errors

    def kick(self) -> None:
        """Wake a waiting thread so it re-evaluates (after moving a MockClock, for example)."""
        with self._cond:
            self._cond.notify_all()

    # -- reading --------------------------------------------------------------------------------

    def _mark_dirty(self, worker: str) -> None:
        with self._cond:
            self._dirty.add(worker)
            self._cond.notify_all()

    def _on_death(self, worker: str) -> None:
        with self._cond:
            self._vanishing[worker] = self.clock.monotonic() + VANISH_GRACE
            self._cond.notify_all()

    def _tracks(self, worker: str) -> bool:
        return worker in self._folded or (self._names is None and is_worker_id(worker))

    def _refresh(self) -> None:
        with self._cond:
            dirty, self._dirty = self._dirty, set()
        if self.clock.monotonic() - self._last_sweep >= self._sweep_interval:
            dirty |= self._sweep()
        for worker in dirty:
            if not self._tracks(worker):
                continue
            folded = self._folded.get(worker)
            if folded is None:
                if not journal_path(self.home, worker).is_file():
                    continue
                folded = self._folded[worker] = load_folded(self.home, [worker])[worker]
            else:
                folded.advance()
            if folded.reader.missing:
                self._missing.add(worker)
            else:
                self._missing.discard(worker)
            self._follow_process(folded)
        self._settle_vanishing()

    def _sweep(self) -> set[str]:
        """The safety net: stat every journal and report those that changed."""
        self._last_sweep = self.clock.monotonic()
        names = list(self._folded)
        if self._names is None:
            names += [w for w in list_workers(self.home) if w not in self._folded]
        changed: set[str] = set()
        for worker in names:
            try:
                st = os.stat(journal_path(self.home, worker))
            except OSError:
                if worker not in self._missing:
                    changed.add(worker)  # its journal went away: the refresh will see that
                continue
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            if self._stats.get(worker) != key:
                self._stats[worker] = key
                changed.add(worker)
        if self._deaths is not None and not self._deaths.native:
            self._deaths.sweep()
        return changed

    def _follow_process(self, folded: Folded) -> None:
        if self._deaths is None:
            return
        acc = folded.acc
        if acc.live and acc.pid is not None and acc.state != "retired":
            self._deaths.watch(folded.worker, acc.pid, acc.start_time)
        else:
            self._deaths.forget(folded.worker)

    def _settle_vanishing(self) -> None:
        now = self.clock.monotonic()
        for worker, due in list(self._vanishing.items()):
            if now < due:
                continue
            del self._vanishing[worker]
            folded = self._folded.get(worker)
            if folded is None:
                continue
            folded.advance()
            acc = folded.acc
            # Still believed alive after the grace period: nobody journaled the exit. A pid
            # journaled since (a supervisor's retry) that is alive is not the one that died.
            if acc.live and acc.pid is not None and not is_alive(acc.pid, acc.start_time):
                with contextlib.suppress(OSError):
                    append(self.home, worker, Vanished(ts=self.clock.now(), pid=acc.pid))
                folded.advance()

    def states(self, seen: Iterable[str] = ()) -> list[WorkerState]:
        """Every followed worker's state as of now, without blocking."""
        self._refresh()
        now = self.clock.now()
        extra = frozenset(seen)
        return [f.state(now, self.policy, extra) for f in self._folded.values()]

    def poll(self, seen: Iterable[str] = (), only: Iterable[str] | None = None) -> WaitResult:
        """Who needs attention right now (among ``only``, when given); never blocks."""
        states = [s for s in self.states(seen) if s.worker not in self._missing]
        missing: tuple[str, ...] = ()
        if only is not None:
            wanted = list(dict.fromkeys(only))
            missing = tuple(w for w in wanted if w in self._missing)
            states = [s for s in states if s.worker in wanted]
        elif self._names is None:
            states = [s for s in states if s.state != "retired"]
        live = tuple(states)
        attention = tuple(s for s in live if s.needs_attention)
        return WaitResult(timed_out=False, attention=attention, workers=live, missing=missing)

    def wait(
        self,
        seen: Iterable[str] = (),
        timeout: float | None = None,
        only: Iterable[str] | None = None,
    ) -> WaitResult:
        """Block until at least one followed worker (among ``only``, when given) needs
        attention, or ``timeout`` seconds pass, or the journal of a worker in ``only``
        disappears (``missing``)."""
        marks = frozenset(seen)
        wanted = None if only is None else list(only)
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        # A line written before this call must be in its answer even when its file event is
        # still on the way (a write by this very process, a moment ago): one stat of each
        # followed journal now, file events after that.
        self._last_sweep = -math.inf
        while True:
            result = self.poll(marks, wanted)
            if result.attention or result.missing or self._closed:
                return result
            now = self.clock.monotonic()
            if deadline is not None and now >= deadline:
                return attrs.evolve(result, timed_out=True)
            self._sleep(self._next_wake(result.workers, deadline, now) - now)

    def until(self, ready: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until ``ready()`` holds, asked now and again after each change to a followed
        journal (and at each safety sweep); False once ``timeout`` seconds pass."""
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        while True:
            # Consume the changes first: one landing while ready() runs wakes the next sleep.
            self._refresh()
            if ready():
                return True
            now = self.clock.monotonic()
            if self._closed or (deadline is not None and now >= deadline):
                return False
            wake = self._last_sweep + self._sweep_interval
            self._sleep((wake if deadline is None else min(wake, deadline)) - now)

    def _next_wake(
        self, states: Iterable[WorkerState], deadline: float | None, now_mono: float
    ) -> float:
        wall = self.clock.now()
        wakes = [self._last_sweep + self._sweep_interval]
        if deadline is not None:
            wakes.append(deadline)
        wakes.extend(self._vanishing.values())
        for state in states:
            if state.quiet_at is not None:
                wakes.append(now_mono + max(0.0, state.quiet_at - wall))
        return min(wakes)

    def _sleep(self, seconds: float) -> None:
        with self._cond:
            if self._dirty or self._closed:
                return
            self._cond.wait(max(0.0, seconds))

    def transitions(
        self, seen: Iterable[str] = (), timeout: float | None = None
    ) -> Iterator[Transition]:
        """Yield a Transition for every worker as first seen, then for every change of state,
        reason or mark, until ``timeout`` seconds pass with no change (forever when None)."""
        marks = frozenset(seen)
        last: dict[str, WorkerState] = {}
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        while not self._closed:
            states = self.states(marks)
            changed = False
            for state in states:
                before = last.get(state.worker)
                if before is None or (before.state, before.reason, before.mark) != (
                    state.state,
                    state.reason,
                    state.mark,
                ):
                    last[state.worker] = state
                    changed = True
                    yield Transition(worker=state.worker, before=before, after=state)
                else:
                    last[state.worker] = state
            now = self.clock.monotonic()
            if changed and timeout is not None:
                deadline = now + timeout
            if deadline is not None and now >= deadline:
                return
            self._sleep(self._next_wake(states, deadline, now) - now)
