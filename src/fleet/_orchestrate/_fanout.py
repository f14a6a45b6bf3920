"""The TASKS.toml fan-out: what to start, on which profile, in which order."""


from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

import attrs

from fleet import _journal
from fleet._clock import Clock
from fleet._core.fold import WorkerState
from fleet._errors import Refused, SettingsError
from fleet._liveness import DeathWatch
from fleet._orchestrate._start import start_worker
from fleet._permissions import (
    PermissionPolicy,
)
from fleet._port import FileJournal
from fleet._runner import Runner
from fleet._supervisor import SRC
from fleet.adapters.headless import (
    HeadlessAdapter,
    HeadlessOptions,
)

# -- fan-out --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Launch:
    """One task of a fan-out: what to start, and then what happened."""

    worker: str
    brief: Path
    tool: str = "claude"
    profile: str | None = None
    model: str | None = None
    reason: str = ""


@attrs.frozen(kw_only=True)
class FanOutResult:
    started: tuple[WorkerState, ...]
    skipped: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()


def plan_launches(
    tasks_file: str | os.PathLike[str], *, endpoint: bool = False
) -> tuple[list[Launch], list[tuple[str, str]], list[str], Path | None, str | None]:
    """The launches of a TASKS.toml: routed by the routing engine (clausona profiles), or, for
    an endpoint fan-out, every task on the endpoint. Returns launches, skipped tasks with the
    reason, the plan's warnings, and the file's repo and base."""
    from fleet._plan import load_task_file, plan_tasks

    tf = load_task_file(tasks_file)
    missing = [t.name for t in tf.tasks if t.brief is None]
    if missing:
        raise SettingsError(f"{tasks_file}: task {', '.join(missing)} has no brief file")
    launches: list[Launch] = []
    skipped: list[tuple[str, str]] = []
    warnings: list[str] = []
    if endpoint:
        for t in tf.tasks:
            assert t.brief is not None
            launches.append(
                Launch(worker=t.name, brief=t.brief, tool=t.tool or "claude", model=t.model,
                       reason="endpoint")
            )
        return launches, skipped, warnings, tf.repo, tf.base
    plan = plan_tasks(tf.tasks, choices=tf.choices)
    warnings += plan.warnings
    by_name = {t.name: t for t in tf.tasks}
    for row in plan.rows:
        task = by_name[row.task]
        assert task.brief is not None
        if row.profile is None:
            skipped.append((row.task, row.reason))
            continue
        warnings += [f"{row.task}: {w}" for w in row.warnings]
        launches.append(
            Launch(worker=row.task, brief=task.brief, tool=row.tool or task.tool or "claude",
                   profile=row.profile, model=row.model, reason=row.reason)
        )
    return launches, skipped, warnings, tf.repo, tf.base


#: How long a fan-out waits on the death watch before it looks for itself (the watcher's sweep).
_SAFETY_NET: Final = 15.0


def _wait_for_slot(
    adapter: HeadlessAdapter, running: list[str], max_parallel: int, *, sweep: float
) -> list[str]:
    """The workers still running once fewer than ``max_parallel`` are. A slot frees when a
    run's supervisor process ends, so this sleeps on the death watch (a pidfd per supervisor)
    rather than a timer; where there are no pidfds, it looks every ``sweep`` seconds."""
    ended = threading.Event()
    deaths = DeathWatch(lambda _worker: ended.set())
    deaths.start()
    try:
        while True:
            running = [w for w in running if adapter.supervisor_alive(w)]
            if len(running) < max_parallel:
                return running
            ended.clear()
            for worker in running:
                sup = adapter.supervisor(worker) or {}
                start = sup.get("start_time")
                if isinstance(sup.get("pid"), int):
                    deaths.watch(worker, sup["pid"], start if isinstance(start, int) else None)
            if not deaths.native:
                deaths.sweep()
            # A safety net as the watcher has one: a death the watch missed is still seen.
            ended.wait(sweep if not deaths.native else _SAFETY_NET)
    finally:
        deaths.close()


def run_tasks(
    tasks_file: str | os.PathLike[str],
    *,
    repo: str | os.PathLike[str] | None = None,
    base: str | None = None,
    max_parallel: int = 4,
    options: HeadlessOptions | None = None,
    permission_mode: str | None = None,
    policies: Mapping[str, PermissionPolicy] | None = None,
    effort: str | None = None,
    home: str | os.PathLike[str] | None = None,
    runner: Runner | None = None,
    clock: Clock | None = None,
    start_timeout: float = 60.0,
    poll: float = 0.25,
    on_start: Callable[[WorkerState], None] | None = None,
) -> FanOutResult:
    """Start every task of a TASKS.toml as a headless worker, at most ``max_parallel`` running
    at once, and return once the last one has started (follow with ``fleet wait``).

    A task waits for a free slot; Claude workers on one profile start one at a time (each
    until its agent journals its first event, or ``start_timeout``), because a starting
    Claude Code rewrites its config dir's state file."""
    if max_parallel < 1:
        raise SettingsError("--max-parallel must be at least 1")
    opts = options or HeadlessOptions()
    launches, skipped, warnings, file_repo, file_base = plan_launches(
        tasks_file, endpoint=opts.endpoint is not None
    )
    where = repo or file_repo or Path.cwd()
    ref = base or file_base
    adapter = HeadlessAdapter(
        runner=runner, options=opts, journal=FileJournal(home, clock=clock, src=SRC)
    )
    taken = [w.worker for w in launches if _journal.exists(adapter.home, w.worker)]
    if taken:
        raise Refused(f"worker {', '.join(taken)} already exists; rename the task(s)")
    running: list[str] = []
    started: list[WorkerState] = []
    for item in launches:
        running = _wait_for_slot(adapter, running, max_parallel, sweep=poll)
        state = start_worker(
            item.worker,
            task=item.brief,
            repo=where,
            profile=item.profile,
            model=item.model,
            tool=item.tool,
            permission_mode=permission_mode,
            policy=(policies or {}).get(item.worker),
            effort=effort,
            base=ref,
            home=adapter.home,
            runner=runner,
            clock=clock,
            options=opts,
            start_timeout=start_timeout,
        )
        started.append(state)
        running.append(item.worker)
        if on_start is not None:
            on_start(state)
    return FanOutResult(started=tuple(started), skipped=tuple(skipped), warnings=tuple(warnings))
