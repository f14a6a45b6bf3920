"""The Superset adapter: one Superset workspace (a git worktree) and agent terminal per worker.

Two routes to the same app, chosen once per adapter:

- the ``superset`` CLI when ``superset auth whoami`` succeeds. Its ``--json`` output is the bare
  payload. Flags differ between builds (``--local`` on the ``terminals`` and ``agents``
  commands), so each command's ``--help`` is read once and only the flags it lists are passed;
- else the local host service (:mod:`fleet.adapters.superset_host`): manifest, bearer token,
  tRPC with superjson, through one httpx client.

Workers run through Superset agent configs whose command is ``clausona run <profile> -- …``;
a config is matched to a profile by its args. A missing one is reported with the exact label,
command and args to add, or added (host route only) when the caller says the user agreed.

Briefs are never put on a command line: on the CLI route the agent is sent one line naming the
brief's file; on the host route the brief's text goes in the JSON body of ``agents.run``.
Superset's workspace delete removes the worktree even when it holds uncommitted work, so
:meth:`SupersetAdapter.delete` re-checks that the worktree is clean and pushed first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx

from fleet._clock import Clock
from fleet._core.events import HandedOver
from fleet._errors import Refused, SettingsError, ToolError
from fleet._guards import require_safe
from fleet._launch import API_TOOLS, superset_config_args
from fleet._port import FileJournal, JournalPort
from fleet._runner import Completed, Runner, SubprocessRunner
from fleet.adapters._base import (
    LaunchSpec,
    Workspace,
    claude_args,
    handle_of,
    pointer_line,
    trust_folder,
    write_worktree_note,
)
from fleet.adapters.superset_host import (
    HostAPIChanged,
    NoHost,
    SupersetHost,
    SupersetHostError,
    discover_host,
)

__all__ = [
    "ConfigMismatch",
    "HostAPIChanged",
    "MissingAgentConfig",
    "NoHost",
    "SupersetAdapter",
    "SupersetCLIError",
    "SupersetHostError",
    "add_config_command",
    "config_label",
    "config_mismatch",
    "match_config",
    "workspace_name",
]

#: The Superset sidebar cuts names at this length.
NAME_LIMIT = 26
HANDOFF_CHARS = 36000
HANDOFF_INTRO = (
    "You are taking over a task that another agent was working on in this workspace "
    "(Superset terminal {terminal})."
)


class SupersetCLIError(ToolError):
    """The ``superset`` CLI failed; the message is its own error line."""


class ConfigMismatch(SettingsError):
    """The agent config that runs a profile states another model, effort, permission mode or
    tool list than the start asks for; ``command`` is the ``fleet superset add-config`` line
    that shows and makes the change."""

    def __init__(self, message: str, *, command: str) -> None:
        super().__init__(message)
        self.command = command


class MissingAgentConfig(SettingsError):
    """No Superset agent config runs this clausona profile. ``label``, ``command``
    and ``config_args`` are exactly what to add under Superset → Settings → Agents."""

    def __init__(self, profile: str, label: str, command: str, args: Sequence[str]) -> None:
        self.profile, self.label, self.command = profile, label, command
        self.config_args = list(args)
        super().__init__(
            f"no Superset agent config runs clausona profile {profile}. Add one under "
            f"Superset → Settings → Agents with label {label!r}, command {command!r} and args "
            f"{json.dumps(self.config_args)}"
        )


def workspace_name(task: str, profile_label: str) -> str:
    """``<short task> · <profile label>``, cut to fit Superset's sidebar (under 26 chars)."""
    sep = " · "
    room = NAME_LIMIT - 1 - len(sep) - len(profile_label)
    if room < 4:
        return _cut(f"{task}{sep}{profile_label}", NAME_LIMIT - 1)
    return f"{_cut(task, room)}{sep}{profile_label}"


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _profile_name(profile: str) -> str:
    return profile.split(":", 1)[1] if ":" in profile else profile


def config_label(spec: LaunchSpec) -> str:
    """``<Tool> · <profile> (<model>)``."""
    tool = "Codex" if spec.tool == "codex" else "Claude"
    name = _profile_name(spec.profile or "default")
    return f"{tool} · {name} ({spec.model})" if spec.model else f"{tool} · {name}"


def config_args(spec: LaunchSpec) -> list[str]:
    """The args a worker config for this spec needs: model and effort live here, because
    Superset ignores a launch's model and effort for custom configs."""
    return superset_config_args(spec.profile, spec.tool, claude_args(spec))


def config_mismatch(config: Mapping[str, Any], spec: LaunchSpec) -> list[str]:
    """How an agent config's args differ from what ``spec`` asks for (empty when they agree):
    the model, effort and permission mode it states, and an API profile's short tool list.
    Superset ignores a launch's model and effort for custom configs, so a config that states
    others would run something else than was asked."""
    if spec.tool != "claude":
        return []
    args = [str(a) for a in config.get("args") or []]
    wrong = [
        f"{flag} {_flag_value(args, flag) or '(none)'} instead of {want}"
        for flag, want in (("--model", spec.model), ("--effort", spec.effort),
                           ("--permission-mode", spec.permission_mode))
        if want and _flag_value(args, flag) != want
    ]
    if spec.permission_mode is None and _flag_value(args, "--permission-mode") is None:
        # an inherited mode changes between Claude Code releases (2.1.332 made auto mode
        # the default): a worker's mode is stated, never inherited
        wrong.append("no --permission-mode")
    if spec.api and not any(a == "--tools" or a.startswith("--tools=") for a in args):
        wrong.append(f"no --tools list (an API profile runs with {API_TOOLS})")
    return wrong


def add_config_command(spec: LaunchSpec, *, update: bool = False) -> str:
    """The ``fleet superset add-config`` command line that writes the config ``spec`` needs."""
    words = ["fleet", "superset", "add-config", spec.profile or "?"]
    if spec.tool != "claude":
        words += ["--tool", spec.tool]
    for flag, value in (("--model", spec.model), ("--effort", spec.effort),
                        ("--permission-mode", spec.permission_mode)):
        if value:
            words += [flag, value]
    if update:
        words.append("--update")
    return " ".join(words)


def _same_profile(a: str, b: str) -> bool:
    a, b = a.lower(), b.lower()
    # "work" names "claude:work", but "codex:work" never does
    return a == b or (_profile_name(a) == _profile_name(b) and (":" not in a or ":" not in b))


def match_config(configs: Sequence[Mapping[str, Any]], profile: str) -> Mapping[str, Any] | None:
    """The agent config whose command is ``clausona run <profile> -- …`` for ``profile``
    (``claude:work`` matches ``work`` and the reverse); an exact spelling wins."""
    found: list[Mapping[str, Any]] = []
    for config in configs:
        command = Path(str(config.get("command") or "")).name
        args = config.get("args") or []
        if command not in ("clausona", "csn") or len(args) < 2 or args[0] != "run":
            continue
        if _same_profile(str(args[1]), profile):
            found.append(config)
    exact = [c for c in found if str((c.get("args") or ["", ""])[1]).lower() == profile.lower()]
    if exact:
        return exact[0]
    return found[0] if found else None


class _Backend(Protocol):
    route: str
    #: True when a prompt travels in a request body (it may carry a brief's text); False when
    #: it would be a command-line argument (it then carries one line naming a file).
    carries_text: bool

    def projects(self) -> list[dict[str, Any]]: ...
    def configs(self) -> list[dict[str, Any]]: ...
    def add_config(self, label: str, command: str, args: Sequence[str]) -> dict[str, Any]: ...
    def update_config(self, config: str, label: str, args: Sequence[str]) -> dict[str, Any]: ...
    def create_workspace(
        self, project: str, name: str, branch: str, base: str | None
    ) -> dict[str, Any]: ...
    def workspace(self, workspace: str) -> dict[str, Any]: ...
    def run_agent(self, workspace: str, agent: str, prompt: str) -> dict[str, Any]: ...
    def transcript(self, workspace: str, terminal: str) -> str: ...
    def screen(self, workspace: str, terminal: str, lines: int) -> str: ...
    def send(self, workspace: str, terminal: str, text: str) -> None: ...
    def close(self, workspace: str, terminal: str) -> None: ...
    def delete(self, workspace: str) -> dict[str, Any]: ...
    def terminals(self, workspace: str) -> dict[str, Any]: ...


class HostBackend:
    route = "host"
    carries_text = True

    def __init__(self, host: SupersetHost) -> None:
        self.host = host

    def projects(self) -> list[dict[str, Any]]:
        rows = self.host.query("project.list") or []
        return [{**r, "path": r.get("repoPath") or r.get("path")} for r in rows]

    def configs(self) -> list[dict[str, Any]]:
        return list(self.host.query("settings.agentConfigs.list") or [])

    def add_config(self, label: str, command: str, args: Sequence[str]) -> dict[str, Any]:
        return dict(
            self.host.mutate(
                "settings.agentConfigs.add",
                {
                    "label": label,
                    "command": command,
                    "args": list(args),
                    "promptTransport": "argv",
                    "promptArgs": [],
                    "env": {},
                    "presetId": "custom",
                },
            )
        )

    def update_config(self, config: str, label: str, args: Sequence[str]) -> dict[str, Any]:
        return dict(
            self.host.mutate(
                "settings.agentConfigs.update",
                {"id": config, "patch": {"label": label, "args": list(args)}},
            )
        )

    def create_workspace(
        self, project: str, name: str, branch: str, base: str | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"projectId": project, "name": name, "branch": branch}
        if base:
            body["baseBranch"] = base
        result = self.host.mutate("workspaces.create", body) or {}
        if result.get("alreadyExists"):
            raise Refused(
                f"Superset already has a workspace on branch {branch}; fleet does not reuse "
                "another worker's workspace (pick another worker id)"
            )
        return dict(result.get("workspace") or result)

    def workspace(self, workspace: str) -> dict[str, Any]:
        for row in self.host.query("workspace.list") or []:
            if row.get("id") == workspace:
                return dict(row)
        raise SupersetHostError(f"no Superset workspace {workspace}")

    def run_agent(self, workspace: str, agent: str, prompt: str) -> dict[str, Any]:
        return dict(
            self.host.mutate(
                "agents.run", {"workspaceId": workspace, "agent": agent, "prompt": prompt}
            )
        )

    def transcript(self, workspace: str, terminal: str) -> str:
        try:
            result = self.host.query(
                "terminal.transcript",
                {"terminalId": terminal, "workspaceId": workspace, "maxChars": HANDOFF_CHARS},
            )
            return str((result or {}).get("text") or "")
        except HostAPIChanged:
            # builds before terminal.transcript (2026-08) only have the screen
            return self.screen(workspace, terminal, 400)

    def screen(self, workspace: str, terminal: str, lines: int) -> str:
        result = self.host.query(
            "terminal.snapshot",
            {"terminalId": terminal, "workspaceId": workspace, "maxLines": lines},
        )
        return str((result or {}).get("text") or "")

    def send(self, workspace: str, terminal: str, text: str) -> None:
        self.host.mutate(
            "terminal.send",
            {"terminalId": terminal, "workspaceId": workspace, "text": text, "submit": True},
        )

    def close(self, workspace: str, terminal: str) -> None:
        self.host.mutate("terminal.killSession", {"terminalId": terminal, "workspaceId": workspace})

    def delete(self, workspace: str) -> dict[str, Any]:
        return dict(self.host.mutate("workspace.delete", {"id": workspace}) or {})

    def terminals(self, workspace: str) -> dict[str, Any]:
        sessions = (self.host.query("terminal.list", {"workspaceId": workspace}) or {}).get(
            "sessions"
        ) or []
        agents = [
            {k: v for k, v in row.items() if k != "account"}
            for row in self.host.query("terminalAgents.list") or []
            if row.get("workspaceId") == workspace
        ]
        return {"sessions": sessions, "agents": agents}


class CLIBackend:
    route = "cli"
    carries_text = False

    def __init__(self, runner: Runner, superset: str) -> None:
        self.runner = runner
        self.superset = superset
        self._help: dict[tuple[str, ...], str] = {}

    def supports(self, command: Sequence[str], flag: str) -> bool:
        """Whether ``superset <command> --help`` lists ``flag`` (read once per command)."""
        key = tuple(command)
        if key not in self._help:
            done = self.runner.run([self.superset, *key, "--help"], timeout=30)
            self._help[key] = done.stdout + done.stderr
        return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", self._help[key]) is not None

    def _json(self, command: Sequence[str], *args: str, local: bool = True) -> Any:
        argv = [self.superset, *command, *args]
        if local and self.supports(command, "--local"):
            argv.append("--local")
        argv.append("--json")
        done = self.runner.run(argv, timeout=180)
        if not done.ok:
            raise SupersetCLIError(f"superset {' '.join(command)} failed: {_cli_error(done)}")
        text = done.stdout.strip()
        try:
            return json.loads(text) if text else None
        except ValueError:
            raise SupersetCLIError(
                f"superset {' '.join(command)} printed no JSON: {text[:200]!r}"
            ) from None

    def projects(self) -> list[dict[str, Any]]:
        return list(self._json(("projects", "list")) or [])

    def configs(self) -> list[dict[str, Any]]:
        return list(self._json(("agents", "list")) or [])

    def add_config(self, label: str, command: str, args: Sequence[str]) -> dict[str, Any]:
        raise MissingAgentConfig(args[1] if len(args) > 1 else "?", label, command, args)

    def update_config(self, config: str, label: str, args: Sequence[str]) -> dict[str, Any]:
        # the superset CLI lists and uses agent configs but has no command that edits one
        raise SettingsError(
            f"the superset CLI cannot edit agent configs: set the args of {config} to "
            f"{json.dumps(list(args))} under Superset → Settings → Agents, or use the host "
            "route (--route host)"
        )

    def create_workspace(
        self, project: str, name: str, branch: str, base: str | None
    ) -> dict[str, Any]:
        args = ["--project", project, "--name", name, "--branch", branch]
        if base:
            args += ["--base-branch", base]
        result = self._json(("workspaces", "create"), *args) or {}
        if result.get("alreadyExists"):
            raise Refused(
                f"Superset already has a workspace on branch {branch}; fleet does not reuse "
                "another worker's workspace (pick another worker id)"
            )
        return dict(result.get("workspace") or result)

    def workspace(self, workspace: str) -> dict[str, Any]:
        return dict(self._json(("workspaces", "get"), workspace) or {})

    def run_agent(self, workspace: str, agent: str, prompt: str) -> dict[str, Any]:
        return dict(
            self._json(
                ("agents", "create"), "--workspace", workspace, "--agent", agent,
                "--prompt", prompt,
            )
            or {}
        )

    def transcript(self, workspace: str, terminal: str) -> str:
        return self.screen(workspace, terminal, 400)

    def screen(self, workspace: str, terminal: str, lines: int) -> str:
        result = self._json(
            ("terminals", "read"), "--workspace", workspace, "--terminal", terminal,
            "--max-lines", str(lines),
        )
        return str((result or {}).get("text") or "")

    def send(self, workspace: str, terminal: str, text: str) -> None:
        self._json(
            ("terminals", "send"), "--workspace", workspace, "--terminal", terminal,
            "--text", text,
        )

    def close(self, workspace: str, terminal: str) -> None:
        self._json(("terminals", "close"), "--workspace", workspace, "--terminal", terminal)

    def delete(self, workspace: str) -> dict[str, Any]:
        return dict(self._json(("workspaces", "delete"), workspace) or {})

    def terminals(self, workspace: str) -> dict[str, Any]:
        result = self._json(("terminals", "list"), "--workspace", workspace) or {}
        return {"sessions": result.get("sessions") or [], "agents": result.get("agents") or []}


def _cli_error(done: Completed) -> str:
    lines = [line.strip() for line in (done.stderr or done.stdout).strip().splitlines()]
    return " ".join(line for line in lines if line)[:400] or f"exit {done.returncode}"


#: Superset's own reading of an agent's last hook event (agentStatusFromEvent).
EVENT_STATUS = {
    "Attached": "starting",
    "Start": "working",
    "PermissionRequest": "permission",
    "Failed": "failed",
    "Stop": "review",
}


class SupersetAdapter:
    """Workers in Superset workspaces. See the module docstring.

    ``route``: ``auto`` (the CLI when ``superset auth whoami`` succeeds, else the host
    service), ``cli`` or ``host``. ``transport`` replaces httpx's for the host service (tests).
    ``add_missing_configs``: on the host route, add a missing worker config instead of
    reporting it; pass True only after the user agreed to the config it would add.
    Workers are registered through ``journal`` (default: the
    :class:`~fleet._port.FileJournal` of ``home``) with
    adapter ``superset`` and handles ``workspace``, ``project``, ``terminal``: before the launch
    (so the agent's first hook event finds its worker), and again with the terminal id while
    no hook event has arrived yet."""

    name = "superset"

    def __init__(
        self,
        *,
        runner: Runner | None = None,
        journal: JournalPort | None = None,
        home: str | os.PathLike[str] | None = None,
        clock: Clock | None = None,
        route: Literal["auto", "cli", "host"] = "auto",
        superset: str = "superset",
        clausona: str | None = None,
        superset_home: Path | None = None,
        transport: httpx.BaseTransport | None = None,
        add_missing_configs: bool = False,
    ) -> None:
        self.runner: Runner = runner or SubprocessRunner()
        # every worker is journaled, so fleet's hooks find it by its worktree
        self.journal: JournalPort = journal if journal is not None else FileJournal(
            home, clock=clock
        )
        self.superset = superset
        self.clausona = clausona
        self.superset_home = superset_home
        self.transport = transport
        self.add_missing_configs = add_missing_configs
        self._route = route
        self._backend: _Backend | None = None

    # -- route --------------------------------------------------------------------------------

    @property
    def backend(self) -> _Backend:
        if self._backend is None:
            self._backend = self._choose()
        return self._backend

    @property
    def route(self) -> str:
        return self.backend.route

    def _choose(self) -> _Backend:
        if self._route == "cli" or (self._route == "auto" and self._logged_in()):
            return CLIBackend(self.runner, self.superset)
        manifest = discover_host(self.superset_home)
        return HostBackend(SupersetHost(manifest, transport=self.transport))

    def _logged_in(self) -> bool:
        try:
            done = self.runner.run([self.superset, "auth", "whoami", "--json"], timeout=30)
        except ToolError:
            return False
        return done.ok

    def status(self) -> dict[str, Any]:
        """Which route is in use, and what it sees (no secrets)."""
        backend = self.backend
        info: dict[str, Any] = {"route": backend.route, "projects": len(backend.projects())}
        if isinstance(backend, HostBackend):
            info["endpoint"] = backend.host.manifest.endpoint
        return info

    # -- helpers ------------------------------------------------------------------------------

    def project_for(self, repo: Path) -> dict[str, Any]:
        real = os.path.realpath(repo)
        projects = self.backend.projects()
        for project in projects:
            path = project.get("path") or project.get("repoPath")
            if path and os.path.realpath(str(path)) == real:
                return project
        raise SettingsError(
            f"{repo} is not a Superset project (open it in Superset first); projects: "
            + ", ".join(str(p.get("name")) for p in projects)
        )

    def config_for(self, spec: LaunchSpec) -> Mapping[str, Any]:
        """The agent config that runs ``spec.profile``; reports (or adds) a missing one."""
        if not spec.profile:
            raise SettingsError("a Superset worker needs a clausona profile (spec.profile)")
        found = match_config(self.backend.configs(), spec.profile)
        if found is not None:
            return found
        command = self.clausona or shutil.which("clausona") or "clausona"
        label, args = config_label(spec), config_args(spec)
        if self.add_missing_configs and self.backend.route == "host":
            return self.backend.add_config(label, command, args)
        raise MissingAgentConfig(spec.profile, label, command, args)

    def _prompt(self, workspace: Workspace, path: Path, kind: str) -> str:
        if not self.backend.carries_text:
            return pointer_line(path, kind=kind)
        text = path.read_text()
        if not text.strip():
            raise ValueError(f"the {kind} {path} is empty")
        if text.lstrip().startswith("-"):
            raise ValueError(
                f"the {kind} {path} starts with '-', which the agent would read as an option; "
                "start it with a word"
            )
        return text.rstrip("\n")

    def _journal(self, spec: LaunchSpec, workspace: Workspace, handle: Mapping[str, str]) -> None:
        self.journal.register(
            spec.worker,
            worktree=workspace.worktree,
            tool=spec.tool,
            profile=spec.profile,
            model=spec.model,
            adapter=self.name,
            handle=dict(handle),
            branch=workspace.branch,
            base=workspace.base,
            task=spec.task,
        )

    # -- the Adapter verbs --------------------------------------------------------------------

    def create_workspace(self, worker: str, *, repo: Path, base: str, label: str) -> Workspace:
        project = self.project_for(repo)
        branch = f"fleet/{worker}"
        created = self.backend.create_workspace(
            str(project["id"]), _cut(label, NAME_LIMIT - 1), branch, base
        )
        ws_id = str(created.get("id") or "")
        if not ws_id:
            raise ToolError(f"Superset created a workspace without an id: {created}")
        path = created.get("worktreePath") or self.backend.workspace(ws_id).get("worktreePath")
        if not path:
            raise ToolError(f"Superset workspace {ws_id} has no worktree path")
        return Workspace(
            worktree=Path(str(path)),
            branch=str(created.get("branch") or branch),
            base=base,
            handle={"workspace": ws_id, "project": str(project["id"]), "worker": worker},
        )

    def trust(self, workspace: Workspace, spec: LaunchSpec) -> None:
        trust_folder(spec, workspace.worktree)

    def check(self, spec: LaunchSpec) -> None:
        """Before anything is created: Superset answers, and an agent config runs the spec's
        profile (else :class:`MissingAgentConfig` says exactly what to add) with the model,
        effort and permission mode the spec states. Superset ignores a launch's model and
        effort for custom configs, so a config that states others would run something else
        than was asked."""
        config = self.config_for(spec)
        wrong = config_mismatch(config, spec)
        if wrong:
            raise ConfigMismatch(
                f"the Superset agent config {config.get('label')!r} for {spec.profile} states "
                f"{'; '.join(wrong)}: run `{add_config_command(spec, update=True)}` to see the "
                "change and add --yes to make it (or set its args to "
                f"{json.dumps(config_args(spec))} under Superset → Settings → Agents)",
                command=add_config_command(spec, update=True),
            )

    def update_config(self, config: Mapping[str, Any], spec: LaunchSpec) -> dict[str, Any]:
        """Rewrite ``config``'s label and args to what ``spec`` needs (host route; the CLI
        route says what to set by hand). Only a config that runs ``spec.profile`` is
        rewritten."""
        if not spec.profile or match_config([config], spec.profile) is None:
            raise SettingsError(
                f"the Superset agent config {config.get('label')!r} does not run "
                f"{spec.profile}; not rewriting it"
            )
        return self.backend.update_config(str(config["id"]), config_label(spec),
                                          config_args(spec))

    def discard(self, workspace: Workspace) -> None:
        """Take back a workspace a failed start made. Superset's delete is forceful, so the
        caller must have checked that the worktree holds no work (fleet's orchestration
        does); the branch stays."""
        self.backend.delete(_workspace_id(workspace))

    def start(self, workspace: Workspace, spec: LaunchSpec) -> Mapping[str, str]:
        config = self.config_for(spec)
        prompt = self._prompt(workspace, spec.brief, "brief")
        ws_id = _workspace_id(workspace)
        # registered before launch: the agent's first hook event must find its worker
        self._journal(spec, workspace, workspace.handle)
        result = self.backend.run_agent(ws_id, str(config["id"]), prompt)
        handle = {**workspace.handle, "terminal": str(result.get("sessionId") or "")}
        if not handle["terminal"]:
            raise ToolError(f"Superset started an agent without a terminal id: {result}")
        # The agent's hooks may already have moved the worker on: attach, do not re-register.
        self.journal.attach(spec.worker, {"terminal": handle["terminal"]})
        return handle

    def read(self, workspace: Workspace, *, lines: int = 200) -> str:
        return self.backend.screen(_workspace_id(workspace), _terminal(workspace), lines)

    def send(self, workspace: Workspace, text_file: Path) -> None:
        if not text_file.is_file():
            raise FileNotFoundError(f"no follow-up file {text_file}")
        text = self._prompt(workspace, text_file, "follow-up")
        worker = workspace.handle.get("worker")
        if worker:
            # Journaled before it is typed: the mark it records as answered is the one the
            # coordinator saw, never the worker's answer to this follow-up.
            self.journal.note_follow_up(worker, file=str(text_file))
        self.backend.send(_workspace_id(workspace), _terminal(workspace), text)

    def hand_over(self, workspace: Workspace, spec: LaunchSpec) -> Mapping[str, str]:
        config = self.config_for(spec)
        ws_id, old = _workspace_id(workspace), _terminal(workspace)
        # fleet writes the hand-off prompt itself on every build: Superset's own
        # (`agents create --from-terminal`) carries the old terminal's transcript but refuses a
        # prompt, so the brief the task is handed over with would never reach the new agent.
        transcript = self.backend.transcript(ws_id, old)
        text = (
            HANDOFF_INTRO.format(terminal=old)
            + f"\n\nThe task's brief is in {spec.brief.absolute()}: read it first and do "
            "what it says. Check `git status` and `git log` for what is already done.\n\n"
            f"<previous-terminal-output>\n{transcript[-HANDOFF_CHARS:].rstrip()}\n"
            "</previous-terminal-output>"
        )
        if self.backend.carries_text:
            prompt = text
        else:
            note = write_worktree_note(self.runner, workspace.worktree, "handover", text)
            prompt = pointer_line(note, kind="hand-over note")
        result = self.backend.run_agent(ws_id, str(config["id"]), prompt)
        how = "transcript"
        terminal = str(result.get("sessionId") or "")
        if not terminal:
            raise ToolError(f"Superset handed over without a terminal id: {result}")
        handle = {**workspace.handle, "terminal": terminal, "previous_terminal": old}
        self.journal.append(
            spec.worker,
            HandedOver(
                ts=self.journal.clock.now(),
                src=self.name,
                profile=spec.profile,
                model=spec.model,
                handle=handle,
                reason=f"{how} {old}",
            ),
        )
        self.backend.close(ws_id, old)
        return handle

    def close(self, workspace: Workspace) -> None:
        self.backend.close(_workspace_id(workspace), _terminal(workspace))

    def delete(self, workspace: Workspace) -> None:
        ws_id = _workspace_id(workspace)
        require_safe(
            self.runner, workspace.worktree, what=f"Superset workspace {ws_id}"
        )
        self.backend.delete(ws_id)
        if workspace.worktree.exists():
            raise ToolError(
                f"Superset deleted workspace {ws_id} but its worktree {workspace.worktree} is "
                "still there"
            )

    def describe(self, workspace: Workspace) -> Mapping[str, object]:
        ws_id = _workspace_id(workspace)
        terminal = workspace.handle.get("terminal")
        listing = self.backend.terminals(ws_id)
        session = next(
            (s for s in listing["sessions"] if s.get("terminalId") == terminal), None
        )
        agent = next((a for a in listing["agents"] if a.get("terminalId") == terminal), None)
        info: dict[str, object] = {
            "host": self.name,
            "route": self.backend.route,
            "workspace": ws_id,
            "terminal": terminal,
            "session": session,
            "agent": agent,
        }
        if agent is not None:
            info["status"] = EVENT_STATUS.get(str(agent.get("lastEventType")), "idle")
        elif session is None or session.get("exited"):
            info["status"] = "ended"
        else:
            info["status"] = "attached"
        return info


def _flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value of ``flag`` in an argument list (``--flag V`` or ``--flag=V``)."""
    for n, arg in enumerate(args):
        if arg == flag and n + 1 < len(args):
            return args[n + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _workspace_id(workspace: Workspace) -> str:
    return handle_of(workspace, "workspace", "Superset workspace id")


def _terminal(workspace: Workspace) -> str:
    return handle_of(workspace, "terminal", "Superset terminal id (start a worker first)")
