"""The herdr adapter: one herdr workspace (a git worktree) and pane per worker.

It drives the ``herdr`` CLI (herdr 0.8.0 and later) through the injected runner:

- ``worktree create`` makes the worktree, its workspace and a root pane, labelled
  ``<task> · <profile>``;
- ``pane run <pane> "clausona run <profile> -- <args>"`` starts the agent (``agent start`` only
  launches herdr's canonical binaries, so a wrapper cannot go through it), then ``agent rename``
  gives it a stable name;
- Claude Code's or Codex's folder-trust prompt is answered only when the screen shows the
  worktree being worked on;
- ``agent prompt <name> "<one line>" --wait`` sends a pointer to the brief file, never its text;
- ``agent read`` reads the screen, ``pane split`` hands the task to another profile beside the
  old pane, ``pane close`` closes it, ``worktree remove`` (never ``--force``) deletes.

Results are single-line JSON (``{"id":…,"result":{"type":…}}``) on stdout; server errors are
JSON (``{"error":{"code","message"}}``) on stderr with exit 1 (``server_not_running`` when no
server runs); usage errors exit 2. ``herdr status --json`` is the exception: the CLI answers it
itself, without a ``result`` envelope, exit 0 whether or not a server runs. Each error code
that needs a decision becomes its own exception, so a coordinator can tell a stalled prompt
from a blocked agent from a dirty worktree.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from fleet._clock import Clock
from fleet._core.events import HandedOver
from fleet._errors import FleetError, Refused, ToolError
from fleet._guards import require_safe
from fleet._port import FileJournal, JournalPort
from fleet._runner import Completed, Runner, SubprocessRunner
from fleet.adapters._base import (
    LaunchSpec,
    Workspace,
    handle_of,
    launch_argv,
    pointer_line,
    trust_folder,
    write_worktree_note,
)

__all__ = [
    "AgentBlocked",
    "DirtyWorktree",
    "HerdrAdapter",
    "HerdrError",
    "HerdrNotRunning",
    "HerdrTimeout",
    "PromptStalled",
    "TrustUnanswered",
    "agent_name",
    "choose_trust",
    "trust_keys",
]

_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
#: herdr's statuses after which an agent waits for input.
SETTLED = ("idle", "done", "blocked")


class HerdrError(ToolError):
    """herdr answered with an error code (``code``) and message."""

    def __init__(self, message: str, *, code: str = "", command: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.command = command


class PromptStalled(HerdrError):
    """``agent prompt --wait`` saw no lifecycle change within herdr's 5 s: the prompt may or may
    not have been delivered. Read the screen before sending it again."""


class AgentBlocked(HerdrError):
    """The agent shows a question or approval; herdr refused to type a prompt into it."""


class HerdrTimeout(HerdrError, TimeoutError):
    """herdr's own wait ran out of time, or the herdr command did."""


class DirtyWorktree(HerdrError, Refused):
    """``worktree remove`` refused: the checkout has uncommitted changes."""


class HerdrNotRunning(HerdrError):
    """No herdr server runs (``server_not_running``): herdr must be started first."""


def agent_name(worker: str, suffix: int | None = None) -> str:
    """A herdr agent name for a worker: ``[a-z][a-z0-9_-]{0,31}``, unique per hand-over."""
    base = re.sub(r"[^a-z0-9_-]", "-", worker.lower())
    if not base or not base[0].isalpha():
        base = "w" + base
    tail = f"-{suffix}" if suffix else ""
    return base[: 32 - len(tail)] + tail


@attrs.frozen(kw_only=True)
class _TrustPrompt:
    """How one agent asks whether to trust a folder: the question's text, the option that
    trusts it, and the mark before the option selected."""

    agent: str
    markers: tuple[str, ...]
    accept: str
    pointer: str


#: Which option starts selected differs between releases: Claude Code 2.1.197 starts on
#: "1. Yes, I trust this folder", 2.1.332 on "No, exit" (unnumbered); Codex 0.171 on
#: "1. Trust and continue" (tests/fakes/captures). So the answer is read from the screen.
TRUST_PROMPTS: tuple[_TrustPrompt, ...] = (
    _TrustPrompt(
        agent="claude",
        markers=("Is this a project you created or one you trust", "Do you trust the files"),
        accept="Yes, I trust this folder",
        pointer="❯",
    ),
    _TrustPrompt(agent="codex", markers=("Trust this folder",), accept="Trust and continue",
                 pointer="›"),
)


class HerdrAdapter:
    """Workers in herdr panes. See the module docstring for the command flow.

    Every worker is registered through ``journal`` (default: the
    :class:`~fleet._port.FileJournal` of ``home``) with
    adapter ``herdr`` and handles ``workspace``, ``pane``, ``agent``, before its agent starts, so
    fleet's hooks, which find a worker by its worktree, journal it from its first event."""

    name = "herdr"

    def __init__(
        self,
        *,
        runner: Runner | None = None,
        journal: JournalPort | None = None,
        home: str | os.PathLike[str] | None = None,
        clock: Clock | None = None,
        herdr: str = "herdr",
        clausona: str = "clausona",
        start_timeout: float = 20.0,
        ready_timeout: float = 60.0,
        prompt_timeout: float = 30.0,
        confirm_timeout: float = 10.0,
        poll: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.runner: Runner = runner or SubprocessRunner()
        # every worker is journaled, so fleet's hooks find it by its worktree
        self.journal: JournalPort = journal if journal is not None else FileJournal(
            home, clock=clock
        )
        self.herdr = herdr
        self.clausona = clausona
        self.start_timeout = start_timeout
        self.ready_timeout = ready_timeout
        self.prompt_timeout = prompt_timeout
        self.confirm_timeout = confirm_timeout
        self.poll = poll
        self._sleep = sleep

    # -- the herdr CLI ------------------------------------------------------------------------

    def _run(self, *args: str, timeout: float = 60.0) -> Completed:
        argv = [self.herdr, *args]
        try:
            done = self.runner.run(argv, timeout=timeout)
        except ToolError as exc:
            if "timed out" in str(exc):
                raise HerdrTimeout(
                    f"herdr {' '.join(args[:2])} did not answer within {timeout:g}s",
                    code="timeout",
                    command=" ".join(args[:2]),
                ) from exc
            raise
        if done.returncode == 0:
            return done
        command = " ".join(args[:2])
        if done.returncode == 2:
            detail = (done.stderr.strip().splitlines() or [""])[0]
            raise HerdrError(
                f"herdr rejected `herdr {command} ...` as a usage error ({detail.strip()}); "
                "this herdr may be older than fleet expects (0.8.0+): check `herdr --version`",
                code="usage",
                command=command,
            )
        code, message = _parse_error(done)
        raise _error_for(code, f"herdr {command}: {message} ({code})", command)

    def _call(self, *args: str, timeout: float = 60.0) -> dict[str, Any]:
        """Run a command that answers with one JSON line; return its ``result``."""
        done = self._run(*args, timeout=timeout)
        for line in reversed(done.stdout.strip().splitlines()):
            try:
                payload = json.loads(line)
            except ValueError:
                continue
            result = payload.get("result") if isinstance(payload, dict) else None
            if isinstance(result, dict):
                return result
        raise HerdrError(
            f"herdr {' '.join(args[:2])} printed no JSON result: {done.stdout.strip()[:200]!r}",
            code="bad_output",
        )

    def agents(self) -> list[dict[str, Any]]:
        agents = self._call("agent", "list").get("agents") or []
        return [a for a in agents if isinstance(a, dict)]

    def agent(self, target: str) -> dict[str, Any]:
        return dict(self._call("agent", "get", target).get("agent") or {})

    def wait(
        self, target: str, *, until: Sequence[str] = SETTLED, timeout: float = 60.0
    ) -> dict[str, Any]:
        """``agent wait``: returns at once when the agent is already in one of ``until``."""
        args = ["agent", "wait", target]
        for status in until:
            args += ["--until", status]
        args += ["--timeout", str(int(timeout * 1000))]
        return dict(self._call(*args, timeout=timeout + 30).get("agent") or {})

    def prompt(
        self,
        target: str,
        line: str,
        *,
        until: Sequence[str] = ("working", "blocked", "idle", "done"),
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """``agent prompt --wait``: one line, submitted; returns the agent once it moved.

        An agent already blocked is refused here for every herdr build (0.8.0 has no
        ``agent_blocked`` and would type the line into the question); a stall is re-checked
        with ``agent get``, because herdr reports some delivered prompts as stalled."""
        if "\n" in line or line.startswith("-"):
            raise ValueError("a herdr prompt must be one line that does not start with '-'")
        current = self.agent(target)
        if current.get("agent_status") == "blocked":
            raise AgentBlocked(
                f"herdr agent {target} is blocked (a question or approval is on its screen); "
                "answer it in its pane, then send again",
                code="agent_blocked",
                command="agent prompt",
            )
        wait_s = timeout if timeout is not None else self.prompt_timeout
        args = ["agent", "prompt", target, line, "--wait"]
        for status in until:
            args += ["--until", status]
        args += ["--timeout", str(int(wait_s * 1000))]
        try:
            return dict(self._call(*args, timeout=wait_s + 30).get("agent") or {})
        except PromptStalled:
            after = self.agent(target)
            if after.get("agent_status") in until and after.get("agent_status") != current.get(
                "agent_status"
            ):
                return after
            raise

    def keys(self, workspace: Workspace, *keys: str) -> None:
        """Press keys in the worker's agent (``agent send-keys``), e.g. ``esc`` or
        ``down enter``."""
        self._run("agent", "send-keys", _agent(workspace), *keys)

    # -- the Adapter verbs --------------------------------------------------------------------

    def create_workspace(self, worker: str, *, repo: Path, base: str, label: str) -> Workspace:
        branch = f"fleet/{worker}"
        result = self._call(
            "worktree",
            "create",
            "--cwd",
            str(repo),
            "--branch",
            branch,
            "--base",
            base,
            "--label",
            label,
            "--no-focus",
            timeout=120,
        )
        workspace = result.get("workspace") or {}
        pane = result.get("root_pane") or {}
        tree = result.get("worktree") or {}
        path = tree.get("path")
        if not (workspace.get("workspace_id") and pane.get("pane_id") and path):
            raise HerdrError(f"herdr worktree create answered without ids: {result}")
        return Workspace(
            worktree=Path(str(path)),
            branch=str(tree.get("branch") or branch),
            base=base,
            handle={
                "workspace": str(workspace["workspace_id"]),
                "pane": str(pane["pane_id"]),
                "agent": agent_name(worker),
                "repo": str(repo),
                "worker": worker,
            },
        )

    def trust(self, workspace: Workspace, spec: LaunchSpec) -> None:
        trust_folder(spec, workspace.worktree)

    def start(self, workspace: Workspace, spec: LaunchSpec) -> Mapping[str, str]:
        handle = dict(workspace.handle)
        name = handle.get("agent") or agent_name(spec.worker)
        handle["agent"] = name
        self.journal.register(
            spec.worker,
            worktree=workspace.worktree,
            tool=spec.tool,
            profile=spec.profile,
            model=spec.model,
            adapter=self.name,
            handle=handle,
            branch=workspace.branch,
            base=workspace.base,
            task=spec.task,
        )
        self._launch(handle["pane"], name, workspace, spec)
        self._send_pointer(handle["pane"], name, pointer_line(spec.brief), "brief",
                           spec.worker)
        return handle

    def check(self, spec: LaunchSpec) -> None:
        """Before anything is created: the herdr server runs and speaks this CLI's protocol.

        ``herdr status --json`` is answered by the CLI itself, not the server (herdr
        src/cli/status.rs, the same in 0.8.0 and 0.8.2): one compact line
        ``{"client":{…},"server":{"status","running","compatible",…},"update":{…}}`` with no
        ``result`` envelope, exit 0 even when no server runs. So the answer is read, never
        the exit code alone."""
        done = self._run("status", "--json", timeout=30)
        server = _status_server(done.stdout)
        if server is None:
            raise HerdrError(
                "herdr status --json printed no server status "
                f"({done.stdout.strip()[:200]!r}); fleet needs herdr 0.8.0 or later: check "
                "`herdr --version`",
                code="bad_output",
                command="status",
            )
        socket = str(server.get("socket") or "its socket")
        if server.get("running") is not True:
            raise HerdrNotRunning(
                f"no herdr server is running (at {socket}); start herdr (run `herdr`), "
                "then start the worker again",
                code="server_not_running",
                command="status",
            )
        if server.get("compatible") is False:
            raise HerdrError(
                f"the herdr server at {socket} (version {server.get('version') or '?'}) speaks "
                "another protocol than this herdr CLI: restart herdr after its update, then "
                "start the worker again",
                code="protocol_mismatch",
                command="status",
            )

    def discard(self, workspace: Workspace) -> None:
        """Take back a workspace a failed start made (the caller checked that it holds no
        work): ``worktree remove`` (never ``--force``) closes its panes; the branch stays."""
        ws = handle_of(workspace, "workspace", "herdr workspace id")
        self._call("worktree", "remove", "--workspace", ws, timeout=120)

    def _send_pointer(
        self, pane: str, name: str, line: str, kind: str, worker: str | None = None
    ) -> None:
        """Prompt the agent with ``line``, then confirm it arrived: herdr can report a prompt
        delivered that never reached the agent's input (a paste dropped by a redraw, an Enter
        sent too early), and a worker without its brief only idles. The agent's own
        ``UserPromptSubmit`` hook, journaled after the send, confirms it; else the line on the
        pane's screen does (Claude Code 2.1.332 draws on the alternate screen, so the typed
        line may leave the screen as soon as the agent works: the hook is read first)."""
        since = self._hook_count(worker)
        self.prompt(name, line)
        want = "".join(line.split())
        deadline = time.monotonic() + self.confirm_timeout
        while True:
            now = self._hook_count(worker) if since is not None else None
            if since is not None and now is not None and now > since:
                return
            screen = self._run(
                "pane", "read", pane, "--source", "recent-unwrapped", "--lines", "200"
            ).stdout
            # the agent's screen may wrap the line anywhere; compare without whitespace
            if want in "".join(screen.split()):
                return
            if time.monotonic() >= deadline:
                raise HerdrError(
                    f"herdr agent {name} took the {kind} line but its pane {pane} does not "
                    f"show it after {self.confirm_timeout:g}s; its screen ends with: "
                    f"{_tail(screen)}. Read the pane before sending it again",
                    code="prompt_not_shown",
                    command="agent prompt",
                )
            self._sleep(self.poll)

    def _hook_count(self, worker: str | None) -> int | None:
        """How many ``UserPromptSubmit`` hooks the worker's journal holds (None without one)."""
        if not worker:
            return None
        from fleet import _journal
        from fleet._core.events import HookEvent

        try:
            events = _journal.read_events(self.journal.home, worker)
        except (FleetError, OSError):
            return None
        return sum(isinstance(e, HookEvent) and e.hook == "UserPromptSubmit" for e in events)

    def _launch(self, pane: str, name: str, workspace: Workspace, spec: LaunchSpec) -> None:
        command = shlex.join(launch_argv(spec, clausona=self.clausona))
        self._run("pane", "run", pane, command)
        found = self._await_agent(pane)
        if found is None:
            screen = self._run(
                "pane", "read", pane, "--source", "recent-unwrapped", "--lines", "60"
            ).stdout
            raise HerdrError(
                f"no agent showed up in herdr pane {pane} within {self.start_timeout:g}s of "
                f"`{command}`; its screen ends with: {_tail(screen)}",
                code="agent_not_running",
            )
        if found.get("name") != name:
            self._call("agent", "rename", pane, name)
        self._answer_trust(name, workspace, spec)

    def _await_agent(self, pane: str) -> dict[str, Any] | None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            for agent in self.agents():
                if agent.get("pane_id") == pane and agent.get("agent"):
                    return agent
            if time.monotonic() >= deadline:
                return None
            self._sleep(self.poll)

    def _ready_or_blocked(self, name: str) -> dict[str, Any]:
        """The agent once it is ready for input or shows a question. herdr reports a freshly
        detected agent ``idle`` before its first screen is drawn (its fallback for a known
        agent), so ``idle`` alone does not prove the trust question absent: where herdr
        reports ``interactive_ready`` (0.8.2), this waits for it."""
        deadline = time.monotonic() + self.ready_timeout
        while True:
            info = self.agent(name)
            status = info.get("agent_status")
            if status == "blocked" or (
                status in ("idle", "done") and info.get("interactive_ready", True) is not False
            ):
                return info
            if time.monotonic() >= deadline:
                raise HerdrTimeout(
                    f"herdr agent {name} was not ready for input within "
                    f"{self.ready_timeout:g}s (it is {status}); read its pane",
                    code="timeout",
                    command="agent get",
                )
            self._sleep(self.poll)

    def _answer_trust(self, name: str, workspace: Workspace, spec: LaunchSpec) -> None:
        """Answer the folder-trust question, and only for this worker's own worktree; any
        other question stays for the user. Returns once the question was answered or is
        proven absent: the agent is ready for input and its screen shows no trust question."""
        info = self._ready_or_blocked(name)
        kind = str(info.get("agent") or spec.tool)
        screen = self._run("agent", "read", name, "--source", "visible").stdout
        prompt = _trust_prompt(kind, screen)
        if info.get("agent_status") != "blocked" and prompt is None:
            return
        if prompt is None:
            raise AgentBlocked(
                f"herdr agent {name} is blocked before its brief was sent; its screen ends "
                f"with: {_tail(screen)}. Answer it in its pane, then send the brief again",
                code="agent_blocked",
            )
        if not _mentions(screen, workspace.worktree):
            raise Refused(
                f"herdr agent {name} asks to trust a folder that is not its worktree "
                f"{workspace.worktree}; not answering it"
            )
        try:
            choose_trust(
                prompt,
                lambda: self._run("agent", "read", name, "--source", "visible").stdout,
                lambda key: self._run("agent", "send-keys", name, key),
                timeout=self.ready_timeout, poll=self.poll, sleep=self._sleep, screen=screen,
            )
        except TrustUnanswered as exc:
            raise AgentBlocked(
                f"herdr agent {name} asks whether to trust {workspace.worktree}: {exc}. Answer "
                "it in its pane, then send the brief again",
                code="agent_blocked",
            ) from exc
        self.wait(name, until=("idle", "done"), timeout=self.ready_timeout)
        screen = self._run("agent", "read", name, "--source", "visible").stdout
        if _trust_prompt(kind, screen) is not None:
            raise AgentBlocked(
                f"herdr agent {name} still asks whether to trust {workspace.worktree} after "
                "it was answered; answer it in its pane, then send the brief again",
                code="agent_blocked",
            )

    def read(self, workspace: Workspace, *, lines: int = 200) -> str:
        try:
            return self._run(
                "agent", "read", _agent(workspace), "--source", "recent-unwrapped",
                "--lines", str(lines),
            ).stdout
        except HerdrError as exc:
            if exc.code not in ("agent_not_found", "agent_not_running", "pane_not_found"):
                raise
        return self._run(
            "pane", "read", _pane(workspace), "--source", "recent-unwrapped",
            "--lines", str(lines),
        ).stdout

    def send(self, workspace: Workspace, text_file: Path) -> None:
        if not text_file.is_file():
            raise FileNotFoundError(f"no follow-up file {text_file}")
        worker = workspace.handle.get("worker")
        if worker:
            # Journaled before it is typed: the mark it records as answered is the one the
            # coordinator saw, never the worker's answer to this follow-up.
            self.journal.note_follow_up(worker, file=str(text_file))
        self.prompt(_agent(workspace), pointer_line(text_file, kind="follow-up"))

    def hand_over(self, workspace: Workspace, spec: LaunchSpec) -> Mapping[str, str]:
        old_pane, old_name = _pane(workspace), _agent(workspace)
        note = write_worktree_note(
            self.runner,
            workspace.worktree,
            "handover",
            _handover_text(workspace, spec, old_name, self._screen_or_empty(workspace)),
        )
        split = self._call(
            "pane", "split", old_pane, "--direction", "down", "--cwd", str(workspace.worktree),
            "--no-focus",
        )
        pane = str((split.get("pane") or {}).get("pane_id") or "")
        if not pane:
            raise HerdrError(f"herdr pane split answered without a pane id: {split}")
        taken = {str(a.get("name")) for a in self.agents()}
        n = 2
        while agent_name(spec.worker, n) in taken:
            n += 1
        name = agent_name(spec.worker, n)
        handle = {**workspace.handle, "pane": pane, "agent": name, "previous_pane": old_pane}
        self._launch(pane, name, workspace, spec)
        self.journal.append(
            spec.worker,
            HandedOver(
                ts=self.journal.clock.now(),
                src=self.name,
                profile=spec.profile,
                model=spec.model,
                handle=handle,
                reason=f"from {old_name}",
            ),
        )
        self._send_pointer(pane, name, pointer_line(note, kind="hand-over note"),
                           "hand-over note", spec.worker)
        self._run("pane", "close", old_pane)
        return handle

    def _screen_or_empty(self, workspace: Workspace) -> str:
        try:
            return self.read(workspace, lines=400)
        except HerdrError:
            return ""

    def close(self, workspace: Workspace) -> None:
        """Close the agent's pane. herdr closes a workspace with its last pane (its
        src/app/api/panes.rs ``close_pane``), so after this the workspace may be gone too; its
        checkout stays, and :meth:`delete` still removes it. A pane already closed is closed."""
        try:
            self._run("pane", "close", _pane(workspace))
        except HerdrError as exc:
            if exc.code != "pane_not_found":
                raise

    def delete(self, workspace: Workspace) -> None:
        """``worktree remove --workspace`` (never ``--force``). When herdr no longer has the
        workspace (closed with its last pane, by :meth:`close` or by hand: herdr then answers
        ``workspace_not_found`` and keeps no record of the checkout), the checkout is removed
        the way herdr removes one: ``git worktree remove`` without ``--force`` from the
        repository's main worktree, which refuses modified or untracked files."""
        ws = workspace.handle.get("workspace")
        if not ws:
            raise ValueError("this workspace has no herdr workspace id")
        require_safe(self.runner, workspace.worktree, what=f"herdr workspace {ws}")
        try:
            self._call("worktree", "remove", "--workspace", ws, timeout=120)
        except DirtyWorktree as exc:
            raise DirtyWorktree(
                f"herdr refused to remove {workspace.worktree}: it has uncommitted changes; "
                "fleet never forces it",
                code=exc.code,
                command=exc.command,
            ) from exc
        except HerdrError as exc:
            if exc.code != "workspace_not_found":
                raise
            from fleet.adapters import WorktreeDeleter

            WorktreeDeleter(runner=self.runner).delete(workspace)
        if workspace.worktree.exists():
            raise HerdrError(f"herdr reported {workspace.worktree} removed, but it is still there")

    def describe(self, workspace: Workspace) -> Mapping[str, object]:
        try:
            info = self.agent(_agent(workspace))
        except HerdrError as exc:
            if exc.code not in ("agent_not_found", "agent_not_running", "pane_not_found"):
                raise
            return {"host": self.name, "agent": _agent(workspace), "agent_status": "absent"}
        keep = ("name", "agent", "agent_status", "pane_id", "workspace_id", "cwd", "title")
        return {"host": self.name, **{k: info[k] for k in keep if k in info}}


def _agent(workspace: Workspace) -> str:
    return handle_of(workspace, "agent", "herdr agent name")


def _pane(workspace: Workspace) -> str:
    return handle_of(workspace, "pane", "herdr pane id")


def _parse_error(done: Completed) -> tuple[str, str]:
    for text in (done.stderr, done.stdout):
        for line in reversed(text.strip().splitlines()):
            try:
                payload = json.loads(line)
            except ValueError:
                continue
            error = payload.get("error") if isinstance(payload, dict) else None
            if isinstance(error, dict):
                return str(error.get("code") or "error"), str(error.get("message") or "")
    detail = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or [""])[-1]
    return "error", f"exit {done.returncode}: {detail.strip()}"


def _error_for(code: str, message: str, command: str) -> HerdrError:
    kind: type[HerdrError] = {
        "agent_prompt_stalled": PromptStalled,
        "agent_blocked": AgentBlocked,
        "timeout": HerdrTimeout,
        "dirty_worktree_requires_force": DirtyWorktree,
        "server_not_running": HerdrNotRunning,
    }.get(code, HerdrError)
    if kind is PromptStalled:
        message += (
            "; the agent showed no activity within 5s. The prompt may still have been "
            "delivered: read its screen before sending again"
        )
    return kind(message, code=code, command=command)


def _status_server(stdout: str) -> dict[str, Any] | None:
    """The ``server`` object of ``herdr status --json``'s one line, if it printed one."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            payload = json.loads(line)
        except ValueError:
            continue
        server = payload.get("server") if isinstance(payload, dict) else None
        if isinstance(server, dict):
            return server
    return None


def _trust_prompt(kind: str, screen: str) -> _TrustPrompt | None:
    """The trust question of agent ``kind`` if the screen shows it."""
    return next(
        (p for p in TRUST_PROMPTS if p.agent == kind and any(m in screen for m in p.markers)),
        None,
    )


class TrustUnanswered(HerdrError):
    """The trust question showed no selection fleet could read, or did not take its keys."""


#: How long a key may take to show on the screen before it counts as dropped and is pressed
#: again (Claude Code 2.1.332 draws the question before it takes keys, and drops those).
KEY_TAKEN = 1.0
#: How long the trusting option must stay selected, with no key pressed, before enter: a
#: key that was only slow, not dropped, lands meanwhile (2.1.332's list wraps, so a late
#: down would move the selection to "No, exit" under the enter).
SETTLE = 2.0


def choose_trust(
    prompt: _TrustPrompt,
    read: Callable[[], str],
    press: Callable[[str], object],
    *,
    timeout: float,
    poll: float = 0.1,
    sleep: Callable[[float], None] = time.sleep,
    screen: str | None = None,
) -> str:
    """Answer ``prompt`` yes one key at a time, reading the screen after each: move the
    selection toward the trusting option (a key the screen does not show within
    ``KEY_TAKEN`` seconds is pressed again, and allowed twice as long each time), and press
    enter only once the screen has shown that option selected, unchanged, for ``SETTLE``
    seconds (or twice the time a key is allowed) since the last key. Returns the
    screen once the question is gone; raises :class:`TrustUnanswered` when no selection can
    be read or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    screen = read() if screen is None else screen
    last_key = time.monotonic()
    # how long a key may take to show; doubled each time one turns out slower than that
    wait = KEY_TAKEN
    while any(m in screen for m in prompt.markers):
        keys = trust_keys(prompt, screen)
        if keys is None:
            raise TrustUnanswered(
                f"the screen shows no selected answer fleet can read: {_tail(screen)}",
                code="agent_blocked",
            )
        if time.monotonic() >= deadline:
            raise TrustUnanswered(
                f"the question did not take its answer within {timeout:g}s: {_tail(screen)}",
                code="agent_blocked",
            )
        before = screen
        if keys == ("enter",):
            # nothing pressed may still be on its way: the selection holds, unchanged
            settle = last_key + max(SETTLE, 2 * wait)
            while screen == before and time.monotonic() < min(settle, deadline):
                sleep(poll)
                screen = read()
            if screen != before:
                wait *= 2  # a key landed late: keys take longer than was allowed
                continue
            if time.monotonic() < settle:
                continue  # the deadline cut the wait short
        press(keys[0])
        last_key = time.monotonic()
        while screen == before and time.monotonic() < min(last_key + wait, deadline):
            sleep(poll)
            screen = read()
        if screen == before:
            wait *= 2  # dropped, or slower than allowed: press again, allowing it longer
    return screen


def trust_keys(prompt: _TrustPrompt, screen: str) -> tuple[str, ...] | None:
    """The keys that choose the trusting answer of ``prompt`` on ``screen``: as many ``down``
    (or ``up``) as the options between the selected one and it, then ``enter``. None when the
    screen does not show both (fleet then never guesses: a wrong Enter exits the agent)."""
    lines = [line.strip() for line in screen.splitlines()]
    accept = [n for n, line in enumerate(lines) if prompt.accept in line]
    if not accept:
        return None
    at = accept[-1]
    # the selected option is next to it: the options are one line each
    near = [n for n in range(max(0, at - 4), min(len(lines), at + 5))
            if lines[n].startswith(prompt.pointer)]
    if len(near) != 1:
        return None
    moves = at - near[0]
    return ("down",) * moves + ("up",) * -moves + ("enter",)


def _mentions(screen: str, worktree: Path) -> bool:
    flat = "".join(screen.split())
    candidates = {str(worktree), str(worktree.resolve())}
    home = str(Path.home())
    candidates |= {c.replace(home, "~", 1) for c in list(candidates) if c.startswith(home)}
    # the dialog may wrap a long path across lines; compare without whitespace
    return any("".join(c.split()) in flat for c in candidates)


def _tail(screen: str, lines: int = 6) -> str:
    kept = [line.rstrip() for line in screen.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[-400:] or "(nothing)"


def _handover_text(workspace: Workspace, spec: LaunchSpec, old_name: str, screen: str) -> str:
    """The hand-over note: the brief's path and the old agent's last screen."""
    return (
        "You are taking over a task that another agent was working on in this worktree "
        f"({workspace.worktree}, herdr agent {old_name}).\n\n"
        f"The task's brief is in {spec.brief.absolute()}: read it first and do what it says. "
        "Check `git status` and `git log` to see what was already done.\n\n"
        "<previous-agent-screen>\n"
        f"{screen.rstrip()}\n"
        "</previous-agent-screen>\n"
    )
