"""Headless workers: ``claude -p`` and ``codex exec`` in their own worktrees, each run watched by
a small supervisor process (:mod:`fleet._supervisor`) that journals its start and its result.

Where things live:

- The worktree: ``<repo>/../<repo name>.fleet/<worker>`` on branch ``fleet/<worker>`` (beside the
  repository, on the same file system, where a person finds it), or ``$FLEET_WORKTREES/<repo
  name>/<worker>`` when that is set, or ``worktree_root/<worker>`` when a caller passes one.
- Per worker, under ``$FLEET_HOME/workers/<worker>/``: ``config/`` (the isolated Claude config
  dir or Codex home of an endpoint worker, 0700), ``headless/launch.json`` (how it was
  launched: tool, profile or endpoint, the key *source*, never the key), ``headless/run-<n>.json``
  (one supervised run: the start, then each follow-up), ``headless/run-<n>-<attempt>.out|.err``
  (the agent's output), ``headless/supervisor-<n>.log`` and ``headless/supervisor.json`` (pid
  and start time of the current supervisor).

Which config dir a worker uses:

- ``profile``: ``clausona run <profile> -- ...``, so the profile's own config dir and login.
  Install fleet's hooks there once with ``fleet hooks install``.
- ``endpoint``: a fresh config dir of its own, seeded with fleet's hooks, the effort level and
  the onboarding answers, so a subscription login of the host (``~/.claude.json``'s
  ``oauthAccount``, ``forceLoginMethod``) can never be sent to the endpoint. The key comes from
  ``key_from`` (``env:NAME``, ``command:CMD``, ``keyring:SERVICE/USER``) and reaches the agent
  through its environment only.
- neither: the tool's default config, as the user's own shell would run it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final
from urllib.parse import urlsplit

import attrs
import orjson

from fleet._clock import Clock, SystemClock
from fleet._core.events import Exited, HandedOver
from fleet._core.ids import validate_worker_id
from fleet._errors import Refused, SettingsError, ToolError
from fleet._files import atomic_write, read_input, read_prompt
from fleet._git import Git
from fleet._guards import require_no_hidden_changes
from fleet._home import DIR_MODE, FILE_MODE, ensure_dir, expand, resolve_home, worker_dir
from fleet._keys import parse_key_source, resolve_key
from fleet._port import FileJournal, JournalPort
from fleet._proc import is_alive, process_start_time
from fleet._runner import Runner, SubprocessRunner
from fleet._supervisor import SRC, dump_spec
from fleet._turns import worker_turn
from fleet.adapters._base import LaunchSpec, Workspace, task_title
from fleet.adapters._headless_run import (
    DEFAULT_PERMISSION_MODE,
    LaunchRecord,
    brief_prompt,
    build_run,
    codex_config,
    config_rules,
    default_key_var,
    drop_supervised_hooks,
    key_source_vars,
    record_converter,
    trust_claude,
    trust_codex,
)

NAME: Final = "headless"
WORKTREES_ENV: Final = "FLEET_WORKTREES"
TOOLS: Final = ("claude", "codex")
#: States a worker's turn has ended in: its agent process is about to exit.
_TURN_OVER: Final = frozenset({"stopped", "done", "blocked"})


@attrs.frozen(kw_only=True)
class HeadlessOptions:
    """How headless workers run, beyond the :class:`LaunchSpec`.

    ``endpoint``/``key_from``: an API endpoint and where its key comes from (an isolated
    config dir per worker). ``key_var``: the variable that carries the key (Claude:
    ``ANTHROPIC_AUTH_TOKEN``, or ``ANTHROPIC_API_KEY`` for anthropic.com). ``timeout``:
    wall-clock seconds for a whole run. ``max_attempts``, ``backoff_base``, ``backoff_max``:
    retries of overload and transient errors; after ``fallback_after`` failed attempts the
    small model (if any) takes over. ``agent_retries``: the agent's own retries
    (``CLAUDE_CODE_MAX_RETRIES``); 0 leaves every retry to fleet, bounded and journaled.
    ``env``: more variables for the agent (no secrets: they are written to the run file)."""

    endpoint: str | None = None
    key_from: str | None = None
    key_var: str | None = None
    timeout: float | None = None
    max_attempts: int = 4
    fallback_after: int = 1
    backoff_base: float = 2.0
    backoff_max: float = 60.0
    agent_retries: int | None = 0
    env: Mapping[str, str] = attrs.field(factory=dict)
    claude: str = "claude"
    codex: str = "codex"
    clausona: str | None = None
    worktree_root: Path | None = None
    grace: float = 5.0

    def __attrs_post_init__(self) -> None:
        if self.endpoint is not None:
            try:
                parts = urlsplit(self.endpoint)
                parts.port  # noqa: B018 - raises ValueError for a port that is not a number
            except ValueError:
                raise SettingsError(f"endpoint {self.endpoint!r} is not an http(s) URL") from None
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise SettingsError(f"endpoint {self.endpoint!r} is not an http(s) URL")
            if self.key_from is None:
                raise SettingsError("an endpoint needs --key-from env:NAME|command:CMD|keyring:S/U")
        if self.key_from is not None:
            parse_key_source(self.key_from)
        if self.max_attempts < 1:
            raise SettingsError("max_attempts must be at least 1")
        if self.timeout is not None and self.timeout <= 0:
            raise SettingsError("timeout must be positive")


def _write_private(path: Path, data: bytes) -> None:
    ensure_dir(path.parent)
    atomic_write(path, data, FILE_MODE, fsync=False)


@attrs.frozen(kw_only=True)
class Pending:
    """A supervisor that is running, detached, but waits for its release (the key, or nothing)
    on the pipe ``release_pipe`` writes to. Until :meth:`release`, the agent has not started;
    :meth:`abandon` ends it unstarted."""

    pid: int
    start_time: int | None
    run: int
    release_pipe: IO[bytes] = attrs.field(repr=False)
    key: str | None = attrs.field(repr=False, default=None)

    def release(self) -> None:
        line = orjson.dumps({"key": self.key}) + b"\n"
        try:
            self.release_pipe.write(line)
            self.release_pipe.close()
        except OSError as exc:
            raise ToolError(f"the supervisor (pid {self.pid}) died before it started") from exc

    def abandon(self) -> None:
        with contextlib.suppress(OSError):
            self.release_pipe.close()

    @property
    def handle(self) -> dict[str, str]:
        out = {"supervisor_pid": str(self.pid), "run": str(self.run)}
        if self.start_time is not None:
            out["supervisor_start_time"] = str(self.start_time)
        return out


class HeadlessAdapter:
    """The :class:`~fleet.adapters._base.Adapter` for headless ``claude -p`` / ``codex exec``.

    ``runner`` runs git; ``clock`` stamps events; ``python`` is the interpreter that runs the
    supervisor (this one by default); ``journal`` is where the worker is registered and its
    state read (the :class:`~fleet._port.FileJournal` of ``home`` by default)."""

    name = NAME

    def __init__(
        self,
        *,
        home: str | os.PathLike[str] | None = None,
        runner: Runner | None = None,
        clock: Clock | None = None,
        options: HeadlessOptions | None = None,
        python: str | None = None,
        environ: Mapping[str, str] | None = None,
        journal: JournalPort | None = None,
    ) -> None:
        self.home = journal.home if journal is not None else resolve_home(home)
        self.runner: Runner = runner or SubprocessRunner()
        self.git = Git(self.runner)
        self.clock: Clock = clock or (journal.clock if journal is not None else SystemClock())
        self.journal: JournalPort = journal or FileJournal(self.home, clock=self.clock, src=SRC)
        self.options = options or HeadlessOptions()
        self.python = python or sys.executable
        self.environ: Mapping[str, str] = os.environ if environ is None else environ

    # -- paths ------------------------------------------------------------------------------

    def state_dir(self, worker: str) -> Path:
        return worker_dir(self.home, worker) / "headless"

    def config_dir(self, worker: str) -> Path:
        return worker_dir(self.home, worker) / "config"

    def main_repo(self, repo: Path) -> Path:
        """The repository's main worktree (or its git dir, for a bare repository)."""
        common = self.git.common_dir(repo)
        return common.parent if common.name == ".git" else common

    def worktree_path(self, worker: str, repo: Path) -> Path:
        main = self.main_repo(repo)
        name = main.name.removesuffix(".git") or "repo"
        if self.options.worktree_root is not None:
            return Path(self.options.worktree_root).absolute() / worker
        env_root = self.environ.get(WORKTREES_ENV)
        if env_root:
            return expand(env_root).absolute() / name / worker
        return main.parent / f"{name}.fleet" / worker

    # -- the Adapter protocol ---------------------------------------------------------------

    def create_workspace(self, worker: str, *, repo: Path, base: str, label: str) -> Workspace:
        """``git worktree add -b fleet/<worker> <path> <base>``; refuses an existing path or
        branch rather than reuse someone's work."""
        validate_worker_id(worker)
        repo = Path(repo).absolute()
        if not repo.is_dir():
            raise SettingsError(f"repository {repo} does not exist")
        sha = self.git.resolve(repo, base)
        if sha is None:
            raise SettingsError(f"base {base!r} names no commit in {repo}")
        path = self.worktree_path(worker, repo)
        branch = f"fleet/{worker}"
        if path.exists():
            raise Refused(f"worktree path {path} already exists; retire or remove it first")
        if self.git.resolve(repo, f"refs/heads/{branch}") is not None:
            raise Refused(f"branch {branch} already exists in {repo}; pick another worker id")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.git.run(repo, "worktree", "add", "-q", "-b", branch, str(path), sha)
        return Workspace(
            worktree=Path(os.path.realpath(path)),
            branch=branch,
            base=sha,
            handle={"worker": worker, "label": label},
        )

    def trust(self, workspace: Workspace, spec: LaunchSpec) -> None:
        """Headless runs never show the folder-trust prompt (``-p`` and ``exec`` skip it); an
        isolated config dir still records the trust, so a person can open it interactively."""
        record = self._maybe_record(spec.worker)
        if record is None or record.config_dir is None:
            return
        if record.tool == "claude":
            trust_claude(Path(record.config_dir), workspace.worktree)
        else:
            trust_codex(Path(record.config_dir), workspace.worktree)

    def start(self, workspace: Workspace, spec: LaunchSpec) -> Mapping[str, str]:
        """Launch the agent and register the worker with its handles (the workspace's and
        the run's) before the agent may journal anything; returns those handles."""
        pending = self.launch(workspace, spec)
        handle = {**_without_run(workspace.handle), **pending.handle}
        try:
            self.journal.register(
                spec.worker,
                worktree=workspace.worktree,
                tool=self.record(spec.worker).tool,
                profile=spec.profile,
                model=spec.model,
                adapter=NAME,
                handle=handle,
                branch=workspace.branch,
                base=workspace.base,
                task=task_title(Path(spec.brief)),
            )
        except BaseException:
            pending.abandon()
            raise
        pending.release()
        return handle

    def read(self, workspace: Workspace, *, lines: int = 200) -> str:
        """The latest attempt's output: stdout, then stderr, each cut to its last lines."""
        worker = _worker_of(workspace)
        files = sorted(
            self.state_dir(worker).glob("run-*-*.out"), key=lambda p: p.stat().st_mtime
        )
        if not files:
            return ""
        out = _tail(files[-1], lines)
        err = _tail(files[-1].with_suffix(".err"), lines)
        return out + (f"\n--- stderr ---\n{err}" if err.strip() else "")

    def send(self, workspace: Workspace, text_file: Path, *, queue: bool = True,
             turn: int | None = None) -> None:
        """A follow-up: resume the worker's session with the text of ``text_file`` as the
        prompt (``claude -p --resume <session>``, ``codex exec resume <session>``).

        One at a time (:mod:`fleet._turns`): while a run goes on, the follow-up waits for it
        to end (``queue``) or is refused. ``turn``: the worker's turn lock, when the caller
        already holds it."""
        worker = _worker_of(workspace)
        text = read_prompt(text_file, "follow-up file")
        record = self.record(worker)
        with self._turn(worker, queue=queue, turn=turn) as held:
            self._refuse_running(worker)
            state = self.journal.state(worker)
            session = state.session_id or (state.exit.session_id if state.exit else None)
            if session is None:
                raise Refused(f"worker {worker} has no session to resume (it never started one)")
            self.journal.note_follow_up(worker, text=text, file=str(text_file))
            pending = self._spawn(record, prompt=text, resume=session, turn=held)
            pending.release()

    def hand_over(self, workspace: Workspace, spec: LaunchSpec, *, queue: bool = True,
                  turn: int | None = None) -> Mapping[str, str]:
        """Start the task again on another profile or model, in the same worktree; after the
        run going on, if any (see :meth:`send`)."""
        worker = _worker_of(workspace)
        with self._turn(worker, queue=queue, turn=turn) as held:
            self._refuse_running(worker)
            self.record(worker)
            record = self._new_record(workspace, spec)
            if record.config_dir is not None and not Path(record.config_dir).exists():
                self._prepare_config(record, Path(workspace.worktree))
            pending = self._spawn(record, prompt=brief_prompt(Path(record.brief or spec.brief)),
                                  turn=held)
            # the whole handle, as the other adapters journal it: it still names the worker
            handle = {**_without_run(workspace.handle), **pending.handle}
            try:
                self.journal.append(
                    worker,
                    HandedOver(
                        ts=self.clock.now(),
                        src=SRC,
                        profile=spec.profile,
                        model=spec.model,
                        handle=handle,
                        reason="hand_over",
                    ),
                )
            except BaseException:
                pending.abandon()
                raise
            pending.release()
        return handle

    @contextlib.contextmanager
    def _turn(self, worker: str, *, queue: bool, turn: int | None) -> Iterator[int]:
        """The worker's turn lock: the caller's, or taken here."""
        if turn is not None:
            yield turn
            return
        with worker_turn(self.home, worker, queue=queue) as held:
            yield held

    def close(self, workspace: Workspace) -> None:
        self.stop(_worker_of(workspace))

    def delete(self, workspace: Workspace) -> None:
        """``git worktree remove`` (never ``--force``) from the main worktree; the branch and
        the journal stay."""
        worker = workspace.handle.get("worker")
        if worker:
            self._refuse_running(worker)
        main = self.main_repo(workspace.worktree)
        require_no_hidden_changes(
            self.runner, workspace.worktree,
            what=f"worker {worker}" if worker else f"worktree {workspace.worktree}",
        )
        self.git.worktree_remove(main, workspace.worktree)
        if workspace.worktree.exists():
            raise ToolError(f"git worktree remove left {workspace.worktree} in place")

    def describe(self, workspace: Workspace) -> Mapping[str, object]:
        worker = _worker_of(workspace)
        sup = self.supervisor(worker)
        state = self.journal.state(worker)
        out: dict[str, object] = {
            "host": NAME,
            "adapter": NAME,
            "worktree": str(workspace.worktree),
            "branch": workspace.branch,
            "supervisor_pid": sup.get("pid") if sup else None,
            "supervisor_alive": self.supervisor_alive(worker),
            "agent_pid": state.pid,
            "agent_alive": bool(state.pid and is_alive(state.pid, state.start_time)),
            "run": sup.get("run") if sup else None,
        }
        return out

    # -- launching --------------------------------------------------------------------------

    def launch(self, workspace: Workspace, spec: LaunchSpec) -> Pending:
        """Prepare the config dir and the run, and start its supervisor, held until
        :meth:`Pending.release` (so the caller can register the worker first)."""
        validate_worker_id(spec.worker)
        record = self._new_record(workspace, spec)
        self._prepare_config(record, Path(workspace.worktree))
        # A new worker: nobody else has its turn (a stale run of an earlier worker of that id
        # would, and is refused rather than run beside).
        with worker_turn(self.home, spec.worker, queue=False) as turn:
            return self._spawn(record, prompt=brief_prompt(spec.brief), turn=turn)

    def _new_record(self, workspace: Workspace, spec: LaunchSpec) -> LaunchRecord:
        o = self.options
        tool = spec.tool
        if spec.profile and ":" in spec.profile:
            tool = spec.profile.split(":", 1)[0]
        if tool not in TOOLS:
            raise SettingsError(f"unknown tool {tool!r}: use claude or codex")
        if spec.profile and o.endpoint:
            raise SettingsError("give a profile or an endpoint, not both")
        isolated = o.endpoint is not None
        key_var = o.key_var
        if isolated and key_var is None:
            key_var = default_key_var(tool, o.endpoint or "")
        brief = Path(spec.brief).absolute()
        record = LaunchRecord(
            worker=spec.worker,
            tool=tool,
            worktree=str(workspace.worktree),
            branch=workspace.branch,
            base=workspace.base,
            brief=str(brief),
            profile=spec.profile,
            model=spec.model,
            small_model=spec.small_model,
            permission_mode=spec.permission_mode or DEFAULT_PERMISSION_MODE,
            allowed_tools=spec.allowed_tools,
            disallowed_tools=spec.disallowed_tools,
            add_dirs=spec.add_dirs,
            codex_approval=spec.codex_approval,
            codex_network=spec.codex_network,
            effort=spec.effort,
            endpoint=o.endpoint,
            key_from=o.key_from,
            key_var=key_var,
            config_dir=str(self.config_dir(spec.worker)) if isolated else None,
            timeout=o.timeout,
            max_attempts=o.max_attempts,
            fallback_after=o.fallback_after,
            backoff_base=o.backoff_base,
            backoff_max=o.backoff_max,
            agent_retries=o.agent_retries,
            env=dict(o.env),
            claude=o.claude,
            codex=o.codex,
            clausona=o.clausona,
            grace=o.grace,
        )
        _write_private(
            self.state_dir(spec.worker) / "launch.json",
            orjson.dumps(record_converter.unstructure(record), option=orjson.OPT_INDENT_2),
        )
        return record

    def record(self, worker: str) -> LaunchRecord:
        found = self._maybe_record(worker)
        if found is None:
            raise Refused(f"worker {worker} was not started by the headless adapter")
        return found

    def _maybe_record(self, worker: str) -> LaunchRecord | None:
        path = self.state_dir(worker) / "launch.json"
        raw = read_input(path, "launch record", missing_ok=True)
        if raw is None:
            return None
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise SettingsError(f"cannot read {path}: {exc}") from exc
        try:
            return record_converter.structure(data, LaunchRecord)
        except Exception as exc:
            raise SettingsError(f"{path} is not a launch record: {exc}") from exc

    def _prepare_config(self, record: LaunchRecord, worktree: Path) -> None:
        """Seed an endpoint worker's fresh config dir: fleet's hooks, effort, onboarding."""
        if record.config_dir is None:
            return
        config = Path(record.config_dir)
        if config.exists():
            # A leftover dir may hold another login or session: never reuse one silently.
            raise Refused(f"config dir {config} already exists; remove it or pick another id")
        ensure_dir(config.parent)
        config.mkdir(mode=DIR_MODE)
        from fleet import _agent_config, _agents, _hook_install

        # Nobody else has edited a config dir fleet has just created: no backups, no fsync.
        private: dict[str, bool] = {"backup": False, "fsync": False}
        if record.tool == "claude":
            settings: dict[str, Any] = {}
            if record.effort:
                settings["effortLevel"] = record.effort
            if record.permission_mode == "bypassPermissions":
                settings["skipDangerousModePermissionPrompt"] = True
            rules = config_rules(record)
            if rules:
                settings["permissions"] = rules
            _agent_config.write_json(config / "settings.json", settings, **private)
            state_file = config / ".claude.json"
            state: dict[str, Any] = {"hasCompletedOnboarding": True}
            _agent_config.claude_trust(state, str(worktree), state_file)
            _agent_config.write_json(state_file, state, **private)
            version = _agents.claude_version(record.claude, runner=self.runner)
            target = _hook_install.claude_target(config, claude_version=version)
            _hook_install.install(target, home=self.home)
            drop_supervised_hooks(config / "settings.json")
        else:
            content = codex_config(record, worktree).encode()
            _agent_config.write_file(config / "config.toml", content, **private)
            _hook_install.install(_hook_install.codex_target(config), home=self.home)

    def _spawn(self, record: LaunchRecord, *, prompt: str, turn: int,
               resume: str | None = None) -> Pending:
        """Start a run's supervisor, held until released; it inherits ``turn`` (the worker's
        turn lock, which the caller holds) and keeps it until the run has ended."""
        key = None
        if record.key_from is not None:
            key = resolve_key(record.key_from, environ=self.environ, runner=self.runner)
        state = self.state_dir(record.worker)
        ensure_dir(state)
        run = 1 + sum(1 for _ in state.glob("run-*.json"))
        spec = build_run(
            record, home=self.home, run=run, prompt=prompt, resume=resume, output_dir=state
        )
        spec_path = state / f"run-{run}.json"
        _write_private(spec_path, dump_spec(spec))
        log = state / f"supervisor-{run}.log"
        env = {k: v for k, v in self.environ.items() if k not in key_source_vars(record)}
        env["FLEET_HOME"] = str(self.home)
        pid, pipe = _start_detached(
            [self.python, "-m", "fleet._supervisor", "--spec", str(spec_path),
             "--detach", str(log), "--turn-fd", str(turn)],
            cwd=record.worktree, env=env, pass_fds=(turn,),
        )
        pending = Pending(
            pid=pid,
            start_time=process_start_time(pid),
            run=run,
            release_pipe=pipe,
            key=key,
        )
        _write_private(
            state / "supervisor.json",
            orjson.dumps({"pid": pending.pid, "start_time": pending.start_time, "run": run}),
        )
        return pending

    # -- stopping ---------------------------------------------------------------------------

    def supervisor(self, worker: str) -> dict[str, Any] | None:
        try:
            raw = read_input(self.state_dir(worker) / "supervisor.json", "supervisor record")
            data = orjson.loads(raw or b"")
        except (SettingsError, orjson.JSONDecodeError):
            return None
        return data if isinstance(data, dict) else None

    def supervisor_alive(self, worker: str) -> bool:
        sup = self.supervisor(worker)
        if not sup or not isinstance(sup.get("pid"), int):
            return False
        start = sup.get("start_time")
        return is_alive(sup["pid"], start if isinstance(start, int) else None)

    def _refuse_running(self, worker: str) -> None:
        state = self.journal.state(worker)
        if self.supervisor_alive(worker) and (state.live is False or state.state in _TURN_OVER):
            # The run is over (exited is journaled), or its last turn is (the Stop hook that
            # woke the coordinator runs before the agent exits): the supervisor is only
            # finishing up, which takes its linger after the agent's last hooks.
            end = time.monotonic() + 10.0
            while self.supervisor_alive(worker) and time.monotonic() < end:
                time.sleep(0.02)
        if self.supervisor_alive(worker):
            raise Refused(f"worker {worker} is still running; wait for it or `fleet stop {worker}`")

    def stop(self, worker: str, *, timeout: float = 30.0) -> bool:
        """End a worker's run: SIGTERM to its supervisor, which terminates the agent's process
        group and journals ``exited(reason=stopped)``. If the supervisor is gone but the agent
        is not, fleet ends the agent and journals it. Returns False when nothing was running."""
        validate_worker_id(worker)
        sup = self.supervisor(worker)
        if sup and self.supervisor_alive(worker):
            pid = int(sup["pid"])
            start = sup.get("start_time")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            end = time.monotonic() + timeout
            while is_alive(pid, start if isinstance(start, int) else None):
                if time.monotonic() >= end:
                    raise ToolError(f"the supervisor of {worker} (pid {pid}) did not stop")
                time.sleep(0.05)
            return True
        state = self.journal.state(worker)
        if state.pid and state.live and is_alive(state.pid, state.start_time):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(state.pid, signal.SIGTERM)
            end = time.monotonic() + 5.0
            while is_alive(state.pid, state.start_time) and time.monotonic() < end:
                time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(state.pid, signal.SIGKILL)
            self.journal.append(
                worker, Exited(ts=self.clock.now(), src=SRC, is_error=True, reason="stopped")
            )
            return True
        return False


def _start_detached(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str], pass_fds: Sequence[int] = ()
) -> tuple[int, IO[bytes]]:
    """Start the supervisor so that it is no child of this process: it forks itself away and
    reports its pid (``--detach``), and the process started here is reaped at once. Returns the
    supervisor's pid and the pipe its release goes to."""
    try:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
            pass_fds=tuple(pass_fds),
        )
    except OSError as exc:
        raise ToolError(f"cannot start the supervisor: {exc.strerror or exc}") from exc
    assert proc.stdin is not None and proc.stdout is not None
    with proc.stdout:
        line = proc.stdout.readline(64)
    code = proc.wait()
    try:
        pid = int(line)
    except ValueError:
        proc.stdin.close()
        raise ToolError(f"the supervisor did not start (exit {code})") from None
    return pid, proc.stdin


_RUN_KEYS: Final = ("supervisor_pid", "supervisor_start_time", "run")


def _without_run(handle: Mapping[str, str]) -> dict[str, str]:
    """A handle without an earlier run's keys (a new run brings its own)."""
    return {k: v for k, v in handle.items() if k not in _RUN_KEYS}


def _worker_of(workspace: Workspace) -> str:
    worker = workspace.handle.get("worker")
    if not worker:
        raise SettingsError(f"workspace {workspace.worktree} names no worker in its handle")
    return validate_worker_id(worker)


def _tail(path: Path, lines: int, limit: int = 256 * 1024) -> str:
    """The last ``lines`` lines of an output file (of its last ``limit`` bytes); nothing for
    what is not a regular file (opened without blocking: a FIFO there cannot hang a read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        start = max(0, st.st_size - limit)
        data = os.pread(fd, st.st_size - start, start).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
    return "\n".join(data.splitlines()[-lines:])


__all__: Sequence[str] = (
    "HeadlessAdapter",
    "HeadlessOptions",
    "LaunchRecord",
    "Pending",
    "brief_prompt",
    "build_run",
)
