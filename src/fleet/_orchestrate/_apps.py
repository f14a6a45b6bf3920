"""Starting a worker through any adapter, the apps (Superset, herdr) first: the workspace
named for its task and profile, the trust, the brief, the registration, and what to take back
when a start fails."""


from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Final

from fleet import _journal
from fleet._clock import Clock
from fleet._core.fold import WorkerState
from fleet._core.ids import validate_worker_id
from fleet._errors import FleetError, Refused, SettingsError, ToolError
from fleet._git import Git, GitError
from fleet._home import worker_dir
from fleet._orchestrate._fanout import FanOutResult, plan_launches
from fleet._orchestrate._start import (
    _check_argument,
    _profile_lock,
    _require_repository,
    _tool_of,
)
from fleet._orchestrate._waits import wait_for_profile
from fleet._port import FileJournal, JournalPort
from fleet._runner import Runner
from fleet.adapters._base import (
    Adapter,
    Discards,
    LaunchSpec,
    Preflight,
    Workspace,
    task_title,
)
from fleet.adapters.headless import (
    TOOLS,
)

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


def app_launch_spec(
    worker: str,
    *,
    brief: Path,
    profile: str | None = None,
    tool: str = "claude",
    model: str | None = None,
    effort: str | None = None,
    permission_mode: str | None = None,
    config_dir: str | os.PathLike[str] | None = None,
    api: bool | None = None,
    runner: Runner | None = None,
    task: str | None = None,
) -> LaunchSpec:
    """The launch of an app-hosted agent (Superset, herdr) by the one set of rules that
    ``fleet start``, ``fleet hand-over`` and ``fleet superset add-config`` share.

    A profile's name, tool, config dir (for the trust file) and kind (an API profile gets the
    short tool list) come from the profiles fleet knows (``fleet profiles``, clausona) unless
    ``config_dir`` is given (``api`` then says the kind). ``permission_mode`` defaults to the fleet
    settings' ``permissions.claude``, else the app default of :mod:`fleet._launch`."""
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
    return LaunchSpec(
        worker=worker,
        tool=tool,
        brief=brief,
        profile=profile,
        model=model,
        permission_mode=permission_mode,
        effort=effort,
        config_dir=where,
        api=is_api,
        task=task,
    )


def check_app_hand_over(adapter: Adapter, spec: LaunchSpec) -> None:
    """The checks a start makes, before a hand-over to ``spec``'s profile touches anything:
    the host answers, and a Superset agent config runs that profile with the model, effort,
    permission mode and tools asked for."""
    if isinstance(adapter, Preflight):
        adapter.check(spec)


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
    spec = app_launch_spec(
        worker, brief=brief, profile=profile, tool=tool, model=model, effort=effort,
        permission_mode=permission_mode, config_dir=config_dir, api=api, runner=runner,
        task=task_title(brief),
    )
    profile, tool = spec.profile, spec.tool
    repo_path = Path(repo).absolute()
    _require_repository(repo_path, runner)
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


