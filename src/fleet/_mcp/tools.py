"""The tools of ``fleet mcp``: one per CLI verb, with the CLI's options as arguments and the
CLI's ``--json`` output as the result.

Each call runs the ``fleet`` command itself (``python -m fleet --home HOME VERB ... --json``,
stdin closed), so a tool means exactly what its verb means and returns exactly what the verb
prints: the same functions build the same JSON. A child process per call also keeps the
server's stdout (the MCP stream) clean, lets a cancelled ``wait`` be ended with its process,
and keeps any failure of a verb away from the server. A verb's one-line error becomes the
tool's error. Arguments are checked before anything runs: worker ids and marks by fleet's own
parsers, every free-text value passed as ``--option=value`` (never read as an option), files
and repositories against the server's :class:`~fleet._mcp.scope.Scope`.

Starting a worker on an app-hosted adapter (Superset, herdr) has no CLI verb: it runs here,
through the adapter's own verbs, and returns the worker's state as ``fleet status --json``
shows it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import attrs

from fleet._errors import FleetError, SettingsError, one_line
from fleet._files import atomic_write
from fleet._home import FILE_MODE, ensure_dir
from fleet._mcp.args import Args, _num, _opt
from fleet._mcp.scope import Scope, redact, secrets, tool_key_source
from fleet._mcp.specs import ADAPTERS, DEFAULT_MAX_WAIT, TOOLS_, specs
from fleet._retire import MODES, Mode, mode_from_settings


class ToolFailure(Exception):
    """A tool call that failed; its message is one line, shown to the model as the error."""


@attrs.frozen(kw_only=True)
class CliResult:
    returncode: int
    stdout: str
    stderr: str


class Tools:
    """The tool calls of one server: checks, then the ``fleet`` command."""

    def __init__(
        self,
        scope: Scope,
        *,
        python: str | None = None,
        environ: Mapping[str, str] | None = None,
        max_wait: float = DEFAULT_MAX_WAIT,
        quiet_after: float | None = None,
        endpoint: str | None = None,
        key_from: str | None = None,
        key_var: str | None = None,
    ) -> None:
        self.scope = scope
        self.python = python or sys.executable
        self.environ: dict[str, str] = dict(os.environ if environ is None else environ)
        self.max_wait = max_wait
        self.quiet_after = quiet_after
        self.endpoint = endpoint
        self.key_from = key_from
        self.key_var = key_var
        self.specs = {s.name: s for s in specs(max_wait)}
        self._calls: dict[str, Callable[[Args], Any]] = {
            "plan": self._plan,
            "profiles": self._profiles,
            "start": self._start,
            "status": self._status,
            "wait": self._wait,
            "seen": self._seen,
            "answer": self._answer,
            "send": self._send,
            "hand_over": self._hand_over,
            "check": self._check,
            "retire": self._retire,
            "stop": self._stop,
            "report": self._report,
            "log": self._log,
        }

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> str:
        """The tool's result (JSON text, keys redacted), or :class:`ToolFailure`."""
        spec = self.specs.get(name)
        if spec is None:
            raise ToolFailure(f"unknown tool {name!r} (known: {', '.join(self.specs)})")
        keys = [self.key_from]
        try:
            args = Args(spec, arguments)
            keys.append(args.raw.get("key_from") if isinstance(args.raw.get("key_from"), str)
                        else None)
            text: str = await self._calls[name](args)
        except ToolFailure as exc:
            raise ToolFailure(redact(str(exc), secrets(keys, self.environ))) from None
        except FleetError as exc:
            raise ToolFailure(redact(one_line(exc), secrets(keys, self.environ))) from None
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            raise ToolFailure(f"{exc.strerror or one_line(exc)}{where}") from None
        return redact(text, secrets(keys, self.environ))

    # -- running fleet ----------------------------------------------------------------------

    def argv(self, *args: str) -> list[str]:
        return [self.python, "-m", "fleet", "--home", str(self.scope.home), *args]

    async def fleet(self, *args: str) -> CliResult:
        """Run ``fleet ARGS``; a cancelled wait ends its process."""
        proc = await anyio.open_process(
            self.argv(*args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.environ,
            start_new_session=True,
        )
        out: list[bytes] = []
        err: list[bytes] = []

        async def drain(stream: Any, into: list[bytes]) -> None:
            async for chunk in stream:
                into.append(chunk)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain, proc.stdout, out)
                tg.start_soon(drain, proc.stderr, err)
            code = await proc.wait()
        except BaseException:
            if args[:1] == ("wait",):  # only reads: end it with the call
                with anyio.CancelScope(shield=True):
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    await proc.wait()
                    await proc.aclose()
            # A verb that acts (start, retire, ...) is left to finish what it began: it runs
            # in a session of its own, so it outlives the server, and its outcome is
            # journaled.
            raise
        await proc.aclose()
        return CliResult(
            returncode=code,
            stdout=b"".join(out).decode("utf-8", "replace"),
            stderr=b"".join(err).decode("utf-8", "replace"),
        )

    async def json_of(self, *args: str) -> str:
        """What ``fleet ARGS`` (ending in --json) printed, or its one-line error."""
        done = await self.fleet(*args)
        out = done.stdout.strip()
        if out:
            try:
                json.loads(out)
            except ValueError:
                pass
            else:
                return out
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        message = lines[-1].removeprefix("fleet: ") if lines else ""
        raise ToolFailure(message or f"fleet {args[0]} exited {done.returncode} and said nothing")

    # -- reading ----------------------------------------------------------------------------

    def _quiet(self, args: Args) -> list[str]:
        quiet = args.number("quiet_after")
        quiet = quiet if quiet is not None else self.quiet_after
        return [] if quiet is None else [f"--quiet-after={_num(quiet)}"]

    async def _status(self, args: Args) -> str:
        workers, seen = args.workers(), args.marks("seen")
        return await self.json_of(
            "status", *workers, *(["--seen", *seen] if seen else []), *self._quiet(args),
            "--json",
        )

    async def _wait(self, args: Args) -> str:
        workers, seen = args.workers(), args.marks("seen")
        asked = args.number("timeout")
        timeout = self.max_wait if asked is None else min(asked, self.max_wait)
        return await self.json_of(
            "wait", *workers, *(["--seen", *seen] if seen else []), *self._quiet(args),
            f"--timeout={_num(timeout)}", "--json",
        )

    async def _seen(self, args: Args) -> str:
        marks = args.marks("marks")
        if not marks:
            raise SettingsError("seen: marks is required")
        return await self.json_of("seen", *marks, "--json")

    async def _report(self, args: Args) -> str:
        return await self.json_of("report", *args.workers(), "--json")

    async def _log(self, args: Args) -> str:
        worker = args.worker()
        last = args.integer("last", 1)
        text = await self.json_of("log", worker, "--json")
        if last is None:
            return text
        from fleet._cli._common import dumps

        return dumps(json.loads(text)[-last:])

    async def _profiles(self, args: Args) -> str:
        return await self.json_of("profiles", "--json")

    async def _plan(self, args: Args) -> str:
        tasks = self.scope.file(args.text("tasks") or "", "tasks file")
        assign = args.raw.get("assign") or {}
        if not isinstance(assign, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in assign.items()
        ):
            raise SettingsError("assign must map task names to profiles")
        pairs = []
        for task, profile in assign.items():
            if "=" in task or not task.strip() or not profile.strip() or "\n" in task + profile:
                raise SettingsError(f"assign {task!r}: {profile!r} is not TASK -> PROFILE")
            pairs.append(f"--assign={task}={profile}")
        return await self.json_of(
            "plan", str(tasks), *[f"--use={u}" for u in args.texts("use")], *pairs,
            *(["--start"] if args.flag("start") else []), "--json",
        )

    # -- acting on a worker -----------------------------------------------------------------

    async def _in_scope(self, worker: str) -> None:
        from fleet._fleet import Fleet

        def state() -> tuple[str | None, str]:
            with Fleet(self.scope.home) as fleet:
                s = fleet.state(worker)
            return s.worktree, s.state

        worktree, current = await anyio.to_thread.run_sync(state)
        self.scope.require_worker(worker, worktree, current)

    async def _check(self, args: Args) -> str:
        worker = args.worker()
        await self._in_scope(worker)
        timeout = args.number("timeout")
        return await self.json_of(
            "check", worker, *_opt("base", args.one_line("base")),
            *[f"--cmd={c}" for c in args.texts("cmds")],
            *([] if timeout is None else [f"--timeout={_num(timeout)}"]), "--json",
        )

    async def _retire(self, args: Args) -> str:
        workers, all_done = args.workers("workers"), args.flag("all_done")
        if all_done and not workers:
            from fleet._fleet import Fleet

            def done() -> list[tuple[str, str | None, str]]:
                with Fleet(self.scope.home) as fleet:
                    return [(s.worker, s.worktree, s.state) for s in fleet.status()
                            if s.state == "done"]

            for worker, worktree, state in await anyio.to_thread.run_sync(done):
                self.scope.require_worker(worker, worktree, state)
        for worker in workers:
            await self._in_scope(worker)
        return await self.json_of(
            "retire", *workers, *(["--all-done"] if all_done else []),
            "--mode", await anyio.to_thread.run_sync(_retire_mode, args.choice("mode", MODES)),
            *(["--yes"] if args.flag("confirm") else []),
            *_opt("base", args.one_line("base")), *[f"--cmd={c}" for c in args.texts("cmds")],
            "--json",
        )

    async def _stop(self, args: Args) -> str:
        worker = args.worker()
        await self._in_scope(worker)
        wait = args.number("wait")
        return await self.json_of(
            "stop", worker, *([] if wait is None else [f"--wait={_num(wait)}"]), "--json"
        )

    async def _answer(self, args: Args) -> str:
        worker = args.worker()
        decision = args.choice("decision", ("allow", "deny"))
        if decision is None:
            raise SettingsError("answer: decision is required (allow or deny)")
        await self._in_scope(worker)
        return await self.json_of(
            "answer", worker, decision, "--client=mcp", *_opt("reason", args.one_line("reason")),
            *(["--always"] if args.flag("always") else []),
            *_opt("request", args.one_line("request")), "--json",
        )

    async def _send(self, args: Args) -> str:
        worker = args.worker()
        text, file = args.text("text"), args.text("file")
        if (text is None) == (file is None):
            raise SettingsError("send: give the follow-up's text or a file, not both")
        await self._in_scope(worker)
        path = (
            self.scope.file(file, "follow-up file") if file is not None
            else self._save("followups", worker, text or "")
        )
        return await self.json_of("send", worker, str(path), "--json")

    async def _hand_over(self, args: Args) -> str:
        worker = args.worker()
        await self._in_scope(worker)
        brief = args.text("brief_file")
        path = None if brief is None else self.scope.file(brief, "brief file")
        return await self.json_of(
            "hand-over", worker, *_opt("profile", args.one_line("profile")),
            *_opt("model", args.one_line("model")),
            *_opt("brief", None if path is None else str(path)),
            *_opt("permission-mode", args.one_line("permission_mode")),
            *_opt("effort", args.one_line("effort")), "--json",
        )

    # -- starting ---------------------------------------------------------------------------

    def _save(self, kind: str, worker: str, text: str) -> Path:
        """Write a brief or follow-up given as text to a new file under the fleet home."""
        if not text.strip():
            raise SettingsError(f"the {kind[:-1]} is empty")
        folder = self.scope.home / "mcp" / kind
        ensure_dir(folder)  # 0700, its parent `mcp` too, whatever the umask
        stamp = time.strftime("%Y%m%dT%H%M%S")
        n = 1
        while (path := folder / f"{worker}-{stamp}-{n}.md").exists():
            n += 1
        atomic_write(path, text.encode("utf-8"), FILE_MODE)
        return path

    async def _start(self, args: Args) -> str:
        worker = args.worker()
        adapter = args.choice("adapter", ADAPTERS) or "headless"
        repo = self.scope.repository(args.one_line("repo"))
        brief, brief_file = args.text("brief"), args.text("brief_file")
        if (brief is None) == (brief_file is None):
            raise SettingsError("start: give the brief's text or a brief_file, not both")
        tool = args.choice("tool", TOOLS_)
        key_from = args.one_line("key_from")
        key_from = tool_key_source(key_from) if key_from is not None else None
        endpoint = args.one_line("endpoint")
        path = (
            self.scope.file(brief_file, "brief file") if brief_file is not None
            else self._save("briefs", worker, brief or "")
        )
        if adapter != "headless":
            for name in ("endpoint", "key_from", "key_var", "small_model", "timeout",
                         "retries", "backoff"):
                if args.raw.get(name) is not None:
                    raise SettingsError(f"start: {name} is for headless workers only")
            return await anyio.to_thread.run_sync(
                lambda: self._start_in_app(
                    adapter, worker, path, repo.path, tool=tool or "claude",
                    profile=args.one_line("profile"), model=args.one_line("model"),
                    permission_mode=args.one_line("permission_mode"),
                    effort=args.one_line("effort"), base=args.one_line("base"),
                )
            )
        if endpoint is None and key_from is None:
            endpoint = self.endpoint
        if key_from is None and endpoint is not None and endpoint == self.endpoint:
            key_from = self.key_from
        key_var = args.one_line("key_var") or (self.key_var if key_from == self.key_from
                                                else None)
        retries = args.integer("retries")
        timeout, backoff = args.number("timeout"), args.number("backoff")
        return await self.json_of(
            "start", worker, f"--task={path}", f"--repo={repo.path}",
            *_opt("profile", args.one_line("profile")), *_opt("endpoint", endpoint),
            *_opt("key-from", key_from), *_opt("key-var", key_var),
            *_opt("model", args.one_line("model")),
            *_opt("small-model", args.one_line("small_model")), *_opt("tool", tool),
            *_opt("permission-mode", args.one_line("permission_mode")),
            *_opt("effort", args.one_line("effort")), *_opt("base", args.one_line("base")),
            *([] if timeout is None else [f"--timeout={_num(timeout)}"]),
            *([] if retries is None else [f"--retries={retries}"]),
            *([] if backoff is None else [f"--backoff={_num(backoff)}"]),
            "--json",
        )

    def _start_in_app(
        self,
        adapter_name: str,
        worker: str,
        brief: Path,
        repo: Path,
        *,
        tool: str,
        profile: str | None,
        model: str | None,
        permission_mode: str | None,
        effort: str | None,
        base: str | None,
    ) -> str:
        """Create the app's workspace and start the agent there: the same orchestration as
        `fleet start --adapter` (checks first, one start at a time per profile, a failed start
        taken back)."""
        from fleet._cli._common import dumps
        from fleet._cli.core import state_json
        from fleet._orchestrate import app_adapter, start_app_worker

        home = self.scope.home
        state = start_app_worker(
            app_adapter(adapter_name, home=home), worker, task=brief, repo=repo,
            profile=profile, model=model, effort=effort, permission_mode=permission_mode,
            base=base or self._current_branch(repo), tool=tool, home=home,
        )
        return dumps(state_json(state, home=home))

    def _current_branch(self, repo: Path) -> str:
        branch = self.scope.git.branch(repo)
        return branch or "HEAD"


def _retire_mode(asked: str | None) -> Mode:
    """The retire mode a call runs in: the user's setting, made stricter by the call's ``mode``
    argument, never looser (a model asking for ``auto`` does not skip the user's ask). A
    settings file that cannot be read counts as ``ask``."""
    try:
        configured = mode_from_settings()
    except (SettingsError, OSError):
        configured = "ask"
    return "ask" if "ask" in (asked, configured) else "auto"
