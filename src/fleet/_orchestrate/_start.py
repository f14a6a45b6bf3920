"""Starting and stopping a headless worker: its worktree, its policy, the one-at-a-time
start per profile, and what to take back when a start fails."""


from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs

from fleet import _journal
from fleet._clock import Clock
from fleet._core.fold import WorkerState
from fleet._core.ids import validate_worker_id
from fleet._errors import FleetError, Refused, SettingsError, ToolError
from fleet._git import Git, GitError
from fleet._home import FILE_MODE, ensure_dir, worker_dir
from fleet._keys import resolve_key
from fleet._orchestrate._waits import wait_for_profile
from fleet._permissions import (
    CODEX_SANDBOX_OF,
    PermissionPolicy,
    launched_with,
    policy_from_settings,
)
from fleet._port import FileJournal
from fleet._runner import Runner
from fleet._supervisor import SRC
from fleet.adapters._base import (
    LaunchSpec,
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
