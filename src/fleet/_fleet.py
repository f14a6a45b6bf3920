"""The Python API for coordinators: :class:`Fleet`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from fleet import _journal
from fleet._clock import Clock, SystemClock
from fleet._core.events import Event, Seen
from fleet._core.fold import DEFAULT_QUIET_AFTER, Policy, WorkerState
from fleet._core.ids import parse_mark, validate_worker_id
from fleet._errors import JournalGone, NoWorkers, UnknownWorker
from fleet._fold_cache import load_states
from fleet._home import journal_path, resolve_home
from fleet._port import FileJournal
from fleet._watch import Backend, Transition, WaitResult, Watcher

if TYPE_CHECKING:
    from fleet._hub.config import HubConfig
    from fleet._hub.view import HubView
    from fleet._orchestrate import FanOutResult


class Fleet:
    """A coordinator's handle on one fleet home.

    Use it as a context manager; it owns the watcher threads that ``wait`` and ``watch`` start,
    and stops and joins them on exit. ``on_note`` is told, once, what a person should know about
    how it watches (file events unavailable, so it polls); by default that is logged as a
    warning on the ``fleet`` logger.

    ``hub`` (a NATS URL, a :class:`fleet._hub.config.HubConfig`, or True for the one the
    environment or settings name) reads every host's workers from the hub instead of this
    home's journals: ``workers``, ``status``, ``state``, ``log``, ``poll``, ``wait``, ``watch``
    and ``seen`` then take and give host-qualified ids and marks (``host/worker``), and seen
    marks are kept in the hub under ``coordinator``'s name. Remote check, send and retire are
    on :attr:`hub` (:meth:`fleet._hub.view.HubView.act`)."""

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        clock: Clock | None = None,
        quiet_after: float = DEFAULT_QUIET_AFTER,
        src: str = "fleet",
        backend: Backend | None = None,
        on_note: Callable[[str], None] | None = None,
        hub: str | HubConfig | bool | None = None,
        coordinator: str | None = None,
    ) -> None:
        self.home: Path = resolve_home(home)
        self.clock: Clock = clock or SystemClock()
        self.policy = Policy(quiet_after=quiet_after)
        self.src = src
        self._closed = False
        self._watcher: Watcher | None = None
        self._backend = backend
        self._on_note = on_note
        self._hub_config = _hub_config(hub, coordinator)
        self._view: HubView | None = None
        #: The journal port this Fleet hands to the adapters it composes.
        self.journal = FileJournal(self.home, clock=self.clock, src=src, quiet_after=quiet_after)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop and join the watcher threads, if any were started."""
        self._closed = True
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.close()
        view, self._view = self._view, None
        if view is not None:
            view.close()

    # -- the hub ----------------------------------------------------------------------------

    @property
    def hub(self) -> HubView | None:
        """The hub this Fleet reads (opened on first use), or None for this home's journals."""
        return None if self._hub_config is None else self._open_hub()

    def _open_hub(self, *, keep_lines: bool = False) -> HubView:
        if self._closed:
            raise RuntimeError("this Fleet is closed")
        from fleet._hub.view import HubView

        assert self._hub_config is not None
        view = self._view
        if view is not None and keep_lines and not view.keep_lines:
            view.close()
            view = None
        if view is None:
            view = self._view = HubView(
                self._hub_config, home=self.home, clock=self.clock, policy=self.policy,
                keep_lines=keep_lines,
            ).open()
        return view

    # -- journaling -------------------------------------------------------------------------

    def record(self, worker: str, event: Event) -> None:
        """Append an event to a worker's journal."""
        self.journal.append(worker, event)

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
        require_top: bool = False,
        exclusive: bool = False,
    ) -> WorkerState:
        """Register a worker and the worktree its sessions run in. Everything is checked before
        anything is written, and a registration that fails half-way takes back what it wrote
        for a new worker: no phantom worker is left behind.

        Refused: a path that is no directory, the filesystem root, the home directory, a
        directory that contains other workers' worktrees
        (:func:`fleet._register.require_registrable`); with ``require_top``, also a directory
        that is not the top of a git worktree; with ``exclusive``, a worktree registered to
        another worker (the command line asks for both)."""
        from fleet._register import require_registrable

        validate_worker_id(worker)
        require_registrable(self.home, worker, worktree, require_top=require_top,
                            exclusive=exclusive)
        return self.journal.register(
            worker, worktree=worktree, tool=tool, profile=profile, model=model,
            adapter=adapter, handle=handle, branch=branch, base=base, task=task,
        )

    def attach(self, worker: str, handle: dict[str, str]) -> None:
        """Journal handles the host reported after registration (a terminal or pane id); they
        are merged into the registered ones, whatever state the worker is in."""
        self.journal.attach(worker, handle)

    def seen(self, *marks: str) -> None:
        """Record marks as handled: those states no longer wake ``wait``."""
        if self._hub_config is not None:
            self._open_hub().record_seen(marks)
            return
        parsed = [parse_mark(m) for m in marks]
        for mark in parsed:
            _journal.require(self.home, mark.worker)
        now = self.clock.now()
        for mark in parsed:
            self.record(mark.worker, Seen(ts=now, src=self.src, mark=str(mark)))

    def note_follow_up(
        self, worker: str, *, text: str | None = None, file: str | None = None
    ) -> None:
        """Journal that a follow-up was sent; the state it answers counts as seen."""
        self.journal.note_follow_up(worker, text=text, file=file)

    # -- reading ----------------------------------------------------------------------------

    def workers(self) -> list[str]:
        if self._hub_config is not None:
            return self._open_hub().workers()
        return _journal.list_workers(self.home)

    def status(
        self, workers: Iterable[str] | None = None, *, seen: Iterable[str] = ()
    ) -> list[WorkerState]:
        """The state of every named worker (default: every worker), as of now."""
        if self._hub_config is not None:
            return list(self._open_hub().states(workers, seen))
        names = None if workers is None else [validate_worker_id(w) for w in workers]
        if names is not None:
            for name in names:
                _journal.require(self.home, name)
        return load_states(self.home, names, self.clock.now(), self.policy, seen)

    def state(self, worker: str) -> WorkerState:
        states = self.status([worker])
        if not states:
            raise UnknownWorker(f"no worker {worker!r}")
        return states[0]

    def log(self, worker: str) -> Sequence[Event]:
        if self._hub_config is not None:
            return self._open_hub(keep_lines=True).log(worker)
        return _journal.read_events(self.home, validate_worker_id(worker))

    # -- waiting --------------------------------------------------------------------------------

    def _open_watcher(self) -> Watcher:
        if self._closed:
            raise RuntimeError("this Fleet is closed")
        if self._watcher is None:
            self._watcher = Watcher(
                self.home, clock=self.clock, policy=self.policy, backend=self._backend,
                on_note=self._on_note,
            )
        return self._watcher

    def _names(self, workers: Iterable[str] | None) -> list[str] | None:
        if workers is None:
            return None
        names = [validate_worker_id(w) for w in workers]
        for name in names:
            _journal.require(self.home, name)
        return names

    def poll(self, workers: Iterable[str] | None = None, *, seen: Iterable[str] = ()) -> WaitResult:
        """Who needs attention now (never blocks). ``workers=None`` means every worker that is
        not retired."""
        if self._hub_config is not None:
            return self._hub_wait(workers, seen, 0.0, poll=True)
        names = self._names(workers)
        marks = [str(parse_mark(m)) for m in seen]
        return self._present(self._open_watcher().poll(marks, names))

    def wait(
        self,
        workers: Iterable[str] | None = None,
        *,
        seen: Iterable[str] = (),
        timeout: float | None = None,
        require_workers: bool = False,
    ) -> WaitResult:
        """Block until at least one of ``workers`` (default: every worker that is not retired)
        needs attention: stopped, quiet, blocked, done or gone, with a mark not in ``seen`` and
        not journaled as seen. Returns all that do, or ``timed_out`` after ``timeout`` seconds.
        Raises :class:`JournalGone` at once when the journal of a worker named in ``workers``
        disappears. With ``require_workers``, raises :class:`NoWorkers` at once when ``workers``
        is None and no worker is left to wait for (none, or every one retired); without it,
        such a wait waits for workers yet to come."""
        if self._hub_config is not None:
            return self._hub_wait(workers, seen, timeout)
        names = self._names(workers)
        marks = [str(parse_mark(m)) for m in seen]
        watcher = self._open_watcher()
        if names is None and require_workers and not watcher.poll(marks, None).workers:
            retired = bool(_journal.list_workers(self.home))
            raise NoWorkers(
                "no workers to wait for ("
                + ("every worker is retired" if retired else "none is registered")
                + "): start one (`fleet start`), or wait for new ones (`fleet wait --for-new`)"
            )
        return self._present(watcher.wait(marks, timeout, names))

    def _present(self, result: WaitResult) -> WaitResult:
        if result.missing:
            gone = ", ".join(result.missing)
            path = journal_path(self.home, result.missing[0])
            raise JournalGone(
                f"the journal of worker {gone} disappeared ({path} is gone): nothing left to "
                "wait for"
            )
        return result

    def watch(
        self,
        workers: Iterable[str] | None = None,
        *,
        seen: Iterable[str] = (),
        timeout: float | None = None,
    ) -> Iterator[Transition]:
        """Yield a :class:`Transition` for every worker as first seen and then for each change,
        until ``timeout`` seconds pass without one (forever when None)."""
        if self._hub_config is not None:
            view = self._open_hub()
            wanted = None if workers is None else {view.resolve(w) for w in workers}
            for change in view.transitions(list(seen), timeout):
                if wanted is None or change.worker in wanted:
                    yield change
            return
        names = self._names(workers)
        marks = [str(parse_mark(m)) for m in seen]
        for transition in self._open_watcher().transitions(marks, timeout):
            if names is None or transition.worker in names:
                yield transition

    def _hub_wait(
        self,
        workers: Iterable[str] | None,
        seen: Iterable[str],
        timeout: float | None,
        *,
        poll: bool = False,
    ) -> WaitResult:
        view = self._open_hub()
        names = None if workers is None else [view.resolve(w) for w in workers]
        marks = [view.resolve_mark(m) for m in seen]
        # Marks passed in were handled: kept in the hub, they never wake this coordinator
        # again, wherever it runs next.
        view.record_seen(marks)
        if poll:
            return view.poll(marks, names)
        return view.wait(marks, timeout, names)

    # -- headless workers (fleet.adapters.headless) -----------------------------------------

    def start(
        self,
        worker: str,
        *,
        task: str | os.PathLike[str],
        repo: str | os.PathLike[str],
        adapter: str = "headless",
        **options: Any,
    ) -> WorkerState:
        """Start a worker in a new worktree: a headless one (``claude -p`` / ``codex exec``)
        under a detached supervisor, with the options of
        :func:`fleet._orchestrate.start_worker` (profile, endpoint, key_from, model,
        small_model, tool, permission_mode, policy, effort, base, timeout, ...); or, with
        ``adapter="superset"`` or ``"herdr"``, in that app, with the options of
        :func:`fleet._orchestrate.start_app_worker` (profile, model, effort, base, ...)."""
        from fleet._orchestrate import app_adapter, start_app_worker, start_worker

        if adapter == "headless":
            return start_worker(
                worker, task=task, repo=repo, home=self.home, clock=self.clock, **options
            )
        return start_app_worker(
            app_adapter(adapter, home=self.home, clock=self.clock), worker, task=task,
            repo=repo, home=self.home, clock=self.clock, **options,
        )

    def stop(self, worker: str, *, timeout: float = 30.0) -> WorkerState:
        """Stop a headless worker; its state then reads gone(stopped)."""
        from fleet._orchestrate import stop_worker

        return stop_worker(worker, home=self.home, clock=self.clock, timeout=timeout)

    def run(self, tasks: str | os.PathLike[str], adapter: str = "headless",
            **options: Any) -> FanOutResult:
        """Plan a TASKS.toml and start every task: as headless workers, at most
        ``max_parallel`` at once (see :func:`fleet._orchestrate.run_tasks`), or in an app
        (``adapter="superset"`` or ``"herdr"``, one at a time per profile: see
        :func:`fleet._orchestrate.run_app_tasks`); follow with :meth:`wait`."""
        from fleet._orchestrate import app_adapter, run_app_tasks, run_tasks

        if adapter == "headless":
            return run_tasks(tasks, home=self.home, clock=self.clock, **options)
        return run_app_tasks(app_adapter(adapter, home=self.home, clock=self.clock), tasks,
                             home=self.home, clock=self.clock, **options)


def _hub_config(
    hub: str | HubConfig | bool | None, coordinator: str | None
) -> HubConfig | None:
    if hub is None or hub is False:
        return None
    from fleet._hub.config import HubConfig, resolve_hub

    if isinstance(hub, HubConfig):
        return hub
    return resolve_hub(None if hub is True else hub, coordinator=coordinator)
