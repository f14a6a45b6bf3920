"""The coordinator's verbs for starting workers, and the TASKS.toml fan-out: what to start,
where, on which profile, in which order, and what to take back when a start fails.

This module decides; the adapters only act on their host and journal through the port they
are handed: :class:`~fleet.adapters.headless.HeadlessAdapter` (the worktree, the config dir,
the supervisor) through :func:`start_worker`, and any adapter, the apps (Superset, herdr)
first, through :func:`start_app_worker`.
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
from fleet._core.events import Event, Exited, HandedOver, Registered, Started
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
from fleet._port import FileJournal, JournalPort
from fleet._runner import Runner
from fleet._supervisor import SRC
from fleet.adapters._base import (
    Adapter,
    Discards,
    LaunchSpec,
    Preflight,
    Workspace,
    task_title,
)
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


# -- workers hosted by an app (Superset, herdr), or by any adapter -----------------------------

#: The adapters `fleet start --adapter` and `fleet run --adapter` start app-hosted workers in.
APP_ADAPTERS: Final = ("superset", "herdr")


def app_adapter(
    name: str,
    *,
    home: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    runner: Runner | None = None,
) -> Adapter:
    """The app adapter called ``name``, handed the journal port of ``home`` by keyword (never
    the facade) and the program that runs a profile (absolute, as a Superset config's command
    must be)."""
    from fleet._profiles import clausona_binary
    from fleet.adapters import get_adapter

    if name not in APP_ADAPTERS:
        raise SettingsError(f"unknown app adapter {name!r}: use {' or '.join(APP_ADAPTERS)}")
    program = clausona_binary()
    return get_adapter(
        name,
        runner=runner,
        journal=FileJournal(home, clock=clock),
        clausona=shutil.which(program) or program,
    )


def workspace_label(adapter: str, task: str, profile_label: str) -> str:
    """``<task> · <profile label>``: the host's sidebar shows which account runs where. Superset
    cuts names at 26 characters, so there the task part is cut and the profile label kept."""
    if adapter == "superset":
        from fleet.adapters.superset import workspace_name

        return workspace_name(task, profile_label)
    return f"{' '.join(task.split())} · {profile_label}"


def profile_label(profile: str | None, tool: str, model: str | None) -> str:
    """``<profile> (<model>)``, e.g. ``work (sonnet)``; the tool when there is no profile."""
    name = profile.split(":", 1)[-1] if profile else tool
    return f"{name} ({model})" if model else name


def start_app_worker(
    adapter: Adapter,
    worker: str,
    *,
    task: str | os.PathLike[str],
    repo: str | os.PathLike[str],
    profile: str | None = None,
    model: str | None = None,
    effort: str | None = None,
    permission_mode: str | None = None,
    base: str | None = None,
    tool: str = "claude",
    config_dir: str | os.PathLike[str] | None = None,
    api: bool | None = None,
    journal: JournalPort | None = None,
    home: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    runner: Runner | None = None,
    start_timeout: float = 60.0,
) -> WorkerState:
    """Start a worker through ``adapter`` (Superset, herdr, or any adapter): check what can be
    checked, create the workspace named ``<worker> · <profile label>``, trust the worktree for
    the worker's profile, start the agent on the brief file ``task`` (the adapter registers
    the worker, adapter and handles, before the agent can journal anything), and return its
    state. The handles (workspace, terminal or pane) are in ``state.handle``.

    The profile's config dir (for the trust file), tool and kind (an API profile gets the
    short tool list) come from the profiles fleet knows (``fleet profiles``, clausona) unless
    ``config_dir`` is given. ``permission_mode`` defaults to the fleet settings'
    ``permissions.claude``, else the app default of :mod:`fleet._launch`.

    Claude workers on one profile start one at a time (the lock and wait of
    :func:`start_worker`), because a starting Claude Code rewrites the profile's state file,
    and can drop the trust entry written for the next one. When anything fails after the
    workspace was made, the workspace is taken back (never when its worktree holds changes)
    and a new worker's journal removed: no half-made worker is left."""
    validate_worker_id(worker)
    for name, value in (("profile", profile), ("model", model), ("permission mode",
                        permission_mode), ("effort", effort), ("base", base)):
        _check_argument(name, value)
    brief = Path(task).absolute()
    from fleet._files import read_prompt

    read_prompt(brief, "brief")  # before anything is created
    port: JournalPort = journal if journal is not None else FileJournal(home, clock=clock)
    if _journal.exists(port.home, worker):
        raise Refused(f"worker {worker} already exists; pick another id")
    where = Path(config_dir).absolute() if config_dir is not None else None
    is_api = bool(api)
    if profile and where is None:
        from fleet._profiles import find_profile, load_profiles

        found = find_profile(profile, load_profiles(runner=runner))
        profile, tool, where = found.name, found.tool, found.config_dir
        is_api = found.is_api if api is None else api
    tool = _tool_of(profile, tool)
    if tool not in TOOLS:
        raise SettingsError(f"unknown tool {tool!r}: use claude or codex")
    if permission_mode is None and tool == "claude":
        from fleet._settings import load_settings

        # the user's mode for workers; an app's worker is watched, so any Claude mode goes
        permission_mode = load_settings().permissions.get("claude") or None
    repo_path = Path(repo).absolute()
    _require_repository(repo_path, runner)
    spec = LaunchSpec(
        worker=worker,
        tool=tool,
        brief=brief,
        profile=profile,
        model=model,
        permission_mode=permission_mode,
        effort=effort,
        config_dir=where,
        api=is_api,
        task=task_title(brief),
    )
    if isinstance(adapter, Preflight):
        adapter.check(spec)  # a missing agent config, a host that does not answer
    label = workspace_label(adapter.name, worker, profile_label(profile, tool, model))
    serialize = bool(profile) and tool == "claude"
    with _profile_lock(port.home, profile if serialize else None):
        if serialize and profile:
            wait_for_profile(profile, home=port.home, clock=port.clock, timeout=start_timeout)
        workspace = adapter.create_workspace(
            worker, repo=repo_path, base=base or "HEAD", label=label
        )
        made = Git(runner).resolve(workspace.worktree, "HEAD")
        try:
            adapter.trust(workspace, spec)
            adapter.start(workspace, spec)
        except BaseException as exc:
            kept = _take_back(adapter, workspace, made, port, worker, runner)
            if isinstance(exc, FleetError) and not kept:
                raise
            if isinstance(exc, FleetError | ValueError):
                raise _failed_start(exc, kept) from exc
            raise
    return port.state(worker)


def _failed_start(exc: Exception, kept: str) -> FleetError:
    """The error a failed start reports: the adapter's, with what was kept, as a FleetError
    of the same kind (an adapter's ValueError, e.g. a brief its host refuses, is a bad
    input: a SettingsError)."""
    if not isinstance(exc, FleetError):
        return SettingsError(f"{exc}; {kept}" if kept else str(exc))
    try:
        return type(exc)(f"{exc}; {kept}")
    except TypeError:  # an error class that takes more than a message
        return ToolError(f"{exc}; {kept}")


def _take_back(
    adapter: Adapter,
    workspace: Workspace,
    made: str | None,
    journal: JournalPort,
    worker: str,
    runner: Runner | None,
) -> str:
    """Undo a start that failed after its workspace was made: the host's workspace and
    worktree, the branch (``git branch -d``: only while it holds nothing new), and the journal
    of the worker this start registered. A worktree that holds changes or commits is kept
    (Superset's delete is forceful, and the agent may have begun): returns what was kept and
    why, empty when everything was taken back."""
    git = Git(runner)
    try:
        dirty = git.run(workspace.worktree, "status", "--porcelain").stdout.strip()
        moved = made is None or git.resolve(workspace.worktree, "HEAD") != made
    except (FleetError, OSError):
        dirty, moved = "", True
    if dirty or moved:
        return f"kept the workspace at {workspace.worktree}: it holds changes"
    repo = workspace.handle.get("repo")
    with contextlib.suppress(FleetError, OSError, ValueError):
        main = Path(repo) if repo else _main_worktree(git, workspace.worktree)
        if isinstance(adapter, Discards):
            adapter.discard(workspace)
        if workspace.worktree.exists():
            git.worktree_remove(main, workspace.worktree)
        git.run(main, "branch", "-d", workspace.branch)
    if workspace.worktree.exists():
        return f"could not remove the workspace at {workspace.worktree}"
    if _journal.exists(journal.home, worker):  # this start registered it: nothing else did
        with contextlib.suppress(OSError):
            _journal.forget_worktree(journal.home, os.path.realpath(workspace.worktree))
            shutil.rmtree(worker_dir(journal.home, worker))
    return ""


def _main_worktree(git: Git, worktree: Path) -> Path:
    entries = git.worktrees(worktree)
    if not entries:
        raise GitError(f"git lists no worktrees for {worktree}")
    return entries[0].path


def run_app_tasks(
    adapter: Adapter,
    tasks_file: str | os.PathLike[str],
    *,
    repo: str | os.PathLike[str] | None = None,
    base: str | None = None,
    permission_mode: str | None = None,
    effort: str | None = None,
    journal: JournalPort | None = None,
    home: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    runner: Runner | None = None,
    start_timeout: float = 60.0,
    on_start: Callable[[WorkerState], None] | None = None,
) -> FanOutResult:
    """Route every task of a TASKS.toml (as :func:`plan_launches` does) and start each through
    ``adapter`` with :func:`start_app_worker`, in the file's order; Claude workers on one
    profile one at a time. An app's workers run until the coordinator retires them, so there
    is no slot to wait for: every routed task starts. A start that fails stops the fan-out
    (its own workspace taken back; the workers started before it keep running)."""
    port: JournalPort = journal if journal is not None else FileJournal(home, clock=clock)
    launches, skipped, warnings, file_repo, file_base = plan_launches(tasks_file)
    taken = [w.worker for w in launches if _journal.exists(port.home, w.worker)]
    if taken:
        raise Refused(f"worker {', '.join(taken)} already exists; rename the task(s)")
    where = repo or file_repo or Path.cwd()
    started: list[WorkerState] = []
    for item in launches:
        state = start_app_worker(
            adapter,
            item.worker,
            task=item.brief,
            repo=where,
            profile=item.profile,
            model=item.model,
            tool=item.tool,
            effort=effort,
            permission_mode=permission_mode,
            base=base or file_base,
            journal=port,
            runner=runner,
            start_timeout=start_timeout,
        )
        started.append(state)
        if on_start is not None:
            on_start(state)
    return FanOutResult(started=tuple(started), skipped=tuple(skipped), warnings=tuple(warnings))


#: Where the agents' own events come from (their hooks), as opposed to fleet's and the hosts'.
AGENT_SOURCES: Final = ("claude", "codex")


def _agent_spoke(event: Event) -> bool:
    """An event only a running agent (or its end) can cause: a hook, or a run's exit."""
    return isinstance(event, Exited) or event.src in AGENT_SOURCES


def wait_started(
    worker: str,
    *,
    home: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    timeout: float = 30.0,
) -> bool:
    """Wait until a freshly started worker's agent has journaled its first event after its
    latest launch (a headless ``started``, or an app worker's registration or hand-over):
    SessionStart or any hook, or its run ended. False on timeout."""
    journal = FileJournal(home, clock=clock)
    reader = _journal.JournalReader(_journal.require(journal.home, worker))
    followed: bool | None = None  # did the agent speak after the latest launch?

    def ready() -> bool:
        nonlocal followed
        for _, event in reader.read():
            if isinstance(event, Started | Registered | HandedOver):
                # a headless run is registered before its supervisor journals `started`
                followed = False
            elif followed is not None and (followed or _agent_spoke(event)):
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
    now = journal.clock.now()
    states = load_states(journal.home, None, now, journal.policy, ())
    adapter = HeadlessAdapter(journal=journal)

    def starting(s: WorkerState) -> bool:
        if s.profile != profile:
            return False
        if s.adapter == NAME:
            return s.last_event in ("registered", "started", "handed_over") and (
                adapter.supervisor_alive(s.worker)
            )
        # An app worker has no supervisor to ask: one whose agent stayed silent for longer
        # than a start may take (no hooks installed, a closed pane) is not waited for again.
        return (
            s.state == "starting"
            and s.last_event in ("registered", "attached", "handed_over")
            and now - s.since < timeout
        )

    busy = [s.worker for s in states if starting(s)]
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
    "APP_ADAPTERS",
    "FanOutResult",
    "Launch",
    "app_adapter",
    "plan_launches",
    "run_app_tasks",
    "run_tasks",
    "start_app_worker",
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
