"""The coordinator's verbs for headless workers, and the TASKS.toml fan-out: what to start,
where, on which profile, in which order, and what to take back when a start fails.

This module decides; :class:`~fleet.adapters.headless.HeadlessAdapter` only acts on the host
(the worktree, the config dir, the supervisor) and journals through the port it is handed.
Waiting goes through the watcher (:mod:`fleet._watch`): a start that must let another worker of
its profile settle first sleeps until that worker's journal changes, never on a timer.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from fleet import _journal
from fleet._clock import Clock
from fleet._core.events import Exited, Started
from fleet._core.fold import WorkerState
from fleet._core.ids import validate_worker_id
from fleet._errors import FleetError, Refused, SettingsError, ToolError
from fleet._fold_cache import load_states
from fleet._git import Git, GitError
from fleet._home import FILE_MODE, ensure_dir, worker_dir
from fleet._keys import resolve_key
from fleet._liveness import DeathWatch
from fleet._permissions import (
    CODEX_SANDBOX_OF,
    PermissionPolicy,
    launched_with,
    policy_from_settings,
)
from fleet._port import FileJournal
from fleet._runner import Runner
from fleet._supervisor import SRC
from fleet.adapters._base import LaunchSpec, Workspace, task_title
from fleet.adapters.headless import (
    NAME,
    TOOLS,
    HeadlessAdapter,
    HeadlessOptions,
    Pending,
    brief_prompt,
)


def start_worker(
    worker: str,
    *,
    task: str | os.PathLike[str],
    repo: str | os.PathLike[str],
    profile: str | None = None,
    endpoint: str | None = None,
    key_from: str | None = None,
    key_var: str | None = None,
    model: str | None = None,
    small_model: str | None = None,
    tool: str = "claude",
    permission_mode: str | None = None,
    policy: PermissionPolicy | None = None,
    effort: str | None = None,
    base: str | None = None,
    timeout: float | None = None,
    max_attempts: int = 4,
    backoff_base: float = 2.0,
    env: Mapping[str, str] | None = None,
    home: str | os.PathLike[str] | None = None,
    runner: Runner | None = None,
    clock: Clock | None = None,
    options: HeadlessOptions | None = None,
    start_timeout: float = 60.0,
) -> WorkerState:
    """Start a headless worker: create its worktree and branch ``fleet/<worker>`` from
    ``base`` (default: the repository's HEAD), register it, and launch the agent on the brief
    ``task`` under a detached supervisor. Returns the worker's state right after the start.

    Give a clausona ``profile``, or an ``endpoint`` with ``key_from`` (``env:NAME``,
    ``command:CMD``, ``keyring:SERVICE/USER``) for an isolated config dir; neither runs the
    tool's default config. ``permission_mode`` defaults to the fleet settings' ``permissions``
    (``claude``, or ``codexSandbox`` for Codex), else ``bypassPermissions`` (Codex:
    ``danger-full-access``): a headless run cannot answer a prompt, and the worktree is its
    cage. A ``policy`` (:mod:`fleet._permissions`, checked by the caller) gives the mode and
    the tool rules and extra directories the agent is started with.

    Claude workers on one profile start one at a time: this waits (up to ``start_timeout``)
    until every other worker of the profile that is still starting up has journaled its first
    event, because a starting Claude Code rewrites the profile's state file."""
    validate_worker_id(worker)
    for name, value in (("profile", profile), ("model", model), ("small model", small_model),
                        ("permission mode", permission_mode), ("effort", effort), ("base", base),
                        ("endpoint", endpoint), ("key variable", key_var)):
        _check_argument(name, value)
    brief = Path(task).absolute()
    brief_prompt(brief)  # refuse a brief no agent could be given before anything is created
    opts = options or HeadlessOptions(
        endpoint=endpoint,
        key_from=key_from,
        key_var=key_var,
        timeout=timeout,
        max_attempts=max_attempts,
        backoff_base=backoff_base,
        env=dict(env or {}),
    )
    if profile and opts.endpoint:
        raise SettingsError("give a profile or an endpoint, not both")
    if tool not in TOOLS:
        raise SettingsError(f"unknown tool {tool!r}: use claude or codex")
    launch_tool = _tool_of(profile, tool)
    policy = _launch_policy(policy, permission_mode, launch_tool, profile)
    if opts.key_from is not None:
        resolve_key(opts.key_from, runner=runner)  # fail before creating anything
    _require_executable(_executable(opts, profile, tool))
    journal = FileJournal(home, clock=clock, src=SRC)
    adapter = HeadlessAdapter(runner=runner, options=opts, journal=journal)
    if _journal.exists(adapter.home, worker):
        raise Refused(f"worker {worker} already exists; pick another id")
    repo_path = Path(repo).absolute()
    _require_repository(repo_path, runner)  # before the profile lock writes anything
    serialize = bool(profile) and _tool_of(profile, tool) == "claude"
    with _profile_lock(adapter.home, profile if serialize else None):
        if serialize and profile:
            wait_for_profile(profile, home=adapter.home, clock=clock, timeout=start_timeout)
        ref = base or "HEAD"
        spec = LaunchSpec(
            worker=worker,
            tool=tool,
            brief=brief,
            profile=profile,
            model=model,
            small_model=small_model,
            permission_mode=policy.codex_sandbox if launch_tool == "codex" else policy.mode,
            effort=effort,
            allowed_tools=policy.allowed_tools,
            disallowed_tools=policy.disallowed_tools,
            add_dirs=policy.add_dirs,
            codex_approval=policy.codex_approval,
            codex_network=policy.codex_network,
        )
        workspace = adapter.create_workspace(worker, repo=repo_path, base=ref, label=worker)
        pending: Pending | None = None
        try:
            pending = adapter.launch(workspace, spec)
            journal.register(
                worker,
                worktree=workspace.worktree,
                tool=launch_tool,
                profile=profile,
                model=model,
                adapter=NAME,
                handle={**workspace.handle, **pending.handle},
                branch=workspace.branch,
                base=workspace.base,
                task=task_title(brief),
                permissions=launched_with(policy, launch_tool),
            )
            pending.release()
        except BaseException:
            if pending is not None:
                pending.abandon()
            _undo_workspace(adapter, workspace, worker)
            raise
    return journal.state(worker)


def _check_argument(name: str, value: str | None) -> None:
    """A value that ends up in the agent's command line or environment: no NUL byte (no
    process can be given one) and valid Unicode (no lone surrogate)."""
    if value is None:
        return
    if "\x00" in value:
        raise SettingsError(f"the {name} contains a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SettingsError(f"the {name} is not valid UTF-8 text") from None


def _require_repository(path: Path, runner: Runner | None) -> None:
    """SettingsError unless ``path`` is a directory in a git repository."""
    if not path.is_dir():
        raise SettingsError(f"repository {path} is not a directory")
    try:
        Git(runner).run(path, "rev-parse", "--git-dir")
    except GitError:
        raise SettingsError(f"{path} is not in a git repository") from None


@contextlib.contextmanager
def _profile_lock(home: Path, profile: str | None) -> Iterator[None]:
    """Held from the wait for a profile's starting workers until this one is registered, so
    two coordinators never start Claude workers on one profile at the same moment."""
    if profile is None:
        yield
        return
    locks = home / "locks"
    ensure_dir(locks)
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in profile)
    fd = os.open(locks / f"profile-{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _tool_of(profile: str | None, tool: str) -> str:
    return profile.split(":", 1)[0] if profile and ":" in profile else tool


def _launch_policy(policy: PermissionPolicy | None, permission_mode: str | None, tool: str,
                   profile: str | None) -> PermissionPolicy:
    """The policy a worker starts with: the caller's (else the fleet settings' ``permissions``
    for this profile), with ``permission_mode`` as its mode when given: for Codex, the sandbox
    it means. SettingsError for a mode the tool does not have."""
    if policy is None:
        from fleet._settings import load_settings

        policy = policy_from_settings(load_settings().permission_rules, profile=profile)
    if permission_mode is None:
        return policy
    if tool == "codex":
        sandbox = CODEX_SANDBOX_OF.get(permission_mode, permission_mode)
        return attrs.evolve(policy, codex_sandbox=sandbox)
    return attrs.evolve(policy, mode=permission_mode)


def _executable(opts: HeadlessOptions, profile: str | None, tool: str) -> str:
    if profile:
        from fleet._profiles import clausona_binary

        return opts.clausona or clausona_binary()
    return opts.codex if tool == "codex" else opts.claude


def _require_executable(name: str) -> None:
    if shutil.which(name) is None:
        what = {"claude": "Claude Code", "codex": "Codex", "clausona": "clausona"}.get(
            Path(name).name, name
        )
        raise ToolError(f"{name} not found: is {what} installed and on PATH?")


def _undo_workspace(adapter: HeadlessAdapter, workspace: Workspace, worker: str) -> None:
    """Take back a start that failed before the agent ran: nothing of the worker's was made
    in the worktree yet, so removing it (never forced) loses nothing."""
    with contextlib.suppress(FleetError, OSError):
        adapter.git.worktree_remove(adapter.main_repo(workspace.worktree), workspace.worktree)
        adapter.git.run(adapter.main_repo(workspace.worktree), "branch", "-d", workspace.branch)
    if not _journal.exists(adapter.home, worker):
        with contextlib.suppress(OSError):
            shutil.rmtree(worker_dir(adapter.home, worker))


def stop_worker(
    worker: str,
    *,
    home: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    timeout: float = 30.0,
) -> WorkerState:
    """Stop a headless worker cleanly; its state then reads ``gone`` with reason ``stopped``.
    A worker that is not running is refused."""
    journal = FileJournal(home, clock=clock, src=SRC)
    adapter = HeadlessAdapter(journal=journal)
    _journal.require(adapter.home, validate_worker_id(worker))
    if not adapter.stop(worker, timeout=timeout):
        state = journal.state(worker)
        raise Refused(f"worker {worker} is not running (state {state.state}({state.reason}))")
    return journal.state(worker)


def wait_started(
    worker: str,
    *,
    home: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    timeout: float = 30.0,
) -> bool:
    """Wait until a freshly started worker's agent has journaled its first event after
    ``started`` (SessionStart or any hook), or its run ended. False on timeout."""
    journal = FileJournal(home, clock=clock)
    reader = _journal.JournalReader(_journal.require(journal.home, worker))
    followed: bool | None = None  # did anything follow the latest `started`?

    def ready() -> bool:
        nonlocal followed
        for _, event in reader.read():
            if isinstance(event, Started):
                followed = False
            elif followed is not None or isinstance(event, Exited):
                followed = True
        return bool(followed)

    return journal.wait_until(worker, ready, timeout=timeout)


def wait_for_profile(
    profile: str,
    *,
    home: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    timeout: float = 60.0,
) -> list[str]:
    """Wait until no worker on ``profile`` is starting up (launched, no event from its agent
    yet); returns the workers waited for. A worker that takes longer than ``timeout`` is no
    longer waited for."""
    journal = FileJournal(home, clock=clock)
    states = load_states(journal.home, None, journal.clock.now(), journal.policy, ())
    adapter = HeadlessAdapter(journal=journal)
    busy = [
        s.worker
        for s in states
        if s.profile == profile
        and s.adapter == NAME
        and s.last_event in ("registered", "started", "handed_over")
        and adapter.supervisor_alive(s.worker)
    ]
    end = journal.clock.monotonic() + timeout
    for worker in busy:
        wait_started(
            worker, home=journal.home, clock=journal.clock,
            timeout=max(0.0, end - journal.clock.monotonic()),
        )
    return busy


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


__all__: Sequence[str] = (
    "FanOutResult",
    "Launch",
    "plan_launches",
    "run_tasks",
    "start_worker",
    "stop_worker",
    "wait_for_profile",
    "wait_started",
)


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
