"""The one interface every host adapter implements (headless, Superset, herdr), so a
coordinator changes one word to move between them.

Adapters are thin: they translate fleet's verbs into the host's commands or API calls, through
the injected :class:`~fleet._runner.Runner` (and, for HTTP hosts, an injected httpx transport).
State never comes from an adapter: it comes from the journal that fleet's hooks write. What an
adapter reports about a worker (``describe``) is shown beside fleet's state, never folded into
it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

import attrs

from fleet._files import read_prompt
from fleet._launch import app_args, on_profile
from fleet._runner import Runner


@attrs.frozen(kw_only=True)
class Workspace:
    """Where a worker works: its worktree and branch, and the host's handles for it (workspace,
    terminal or pane ids, a pid), journaled with the worker's registration."""

    worktree: Path
    branch: str
    base: str | None = None
    handle: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class LaunchSpec:
    """What to run in a workspace: the tool, the profile or endpoint, and the brief *file*
    (never the brief's text on a command line)."""

    worker: str
    tool: str = "claude"
    brief: Path
    profile: str | None = None
    model: str | None = None
    small_model: str | None = None
    permission_mode: str | None = None
    effort: str | None = None
    config_dir: Path | None = None
    extra_args: tuple[str, ...] = ()
    #: tool rules and extra directories of the worker's permission policy (Claude Code's
    #: --allowedTools, --disallowedTools, --add-dir)
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    add_dirs: tuple[str, ...] = ()
    #: the profile is an API profile (clausona ``kind: "api"``): an app-hosted Claude worker
    #: then gets the short tool list (fleet._launch.API_TOOLS)
    api: bool = False
    #: the task as one line, journaled with the registration (default: none)
    task: str | None = None
    #: Codex's approval policy, and whether workspace-write lets commands reach the network
    codex_approval: str | None = None
    codex_network: bool = False


@runtime_checkable
class Adapter(Protocol):
    name: str

    def create_workspace(self, worker: str, *, repo: Path, base: str, label: str) -> Workspace:
        """Create the worktree (and the host's workspace) for a task."""
        ...

    def trust(self, workspace: Workspace, spec: LaunchSpec) -> None:
        """Pre-answer the agent's folder-trust prompt for this worktree and profile."""
        ...

    def start(self, workspace: Workspace, spec: LaunchSpec) -> Mapping[str, str]:
        """Start the agent on the brief; returns the handles to journal (terminal, pane, pid)."""
        ...

    def read(self, workspace: Workspace, *, lines: int = 200) -> str:
        """The worker's screen or output, as text."""
        ...

    def send(self, workspace: Workspace, text_file: Path) -> None:
        """Send a follow-up, read from a file."""
        ...

    def hand_over(self, workspace: Workspace, spec: LaunchSpec) -> Mapping[str, str]:
        """Start the same task on another profile in the same worktree; returns new handles."""
        ...

    def close(self, workspace: Workspace) -> None:
        """Close the worker's terminal or process, keeping the worktree."""
        ...

    def delete(self, workspace: Workspace) -> None:
        """Remove the workspace and its worktree, never forced. Callers run fleet's retire
        guards first; this is only the last step."""
        ...

    def describe(self, workspace: Workspace) -> Mapping[str, object]:
        """What the host itself reports about the worker (for display, never for state)."""
        ...


@runtime_checkable
class Preflight(Protocol):
    """An adapter that can tell, before anything is created, whether a start can work (the
    host answers, a Superset agent config runs the profile)."""

    def check(self, spec: LaunchSpec) -> None: ...


@runtime_checkable
class Discards(Protocol):
    """An adapter that can take back the workspace of a start that failed (the host's
    workspace and its worktree; the caller has checked that it holds no work)."""

    def discard(self, workspace: Workspace) -> None: ...


# -- shared by the app-hosted adapters (Superset, herdr) ------------------------------------


def handle_of(workspace: Workspace, key: str, what: str) -> str:
    """The ``key`` handle of a workspace, or a ValueError naming what is missing."""
    value = workspace.handle.get(key)
    if not value:
        raise ValueError(f"this workspace has no {what}")
    return value


def task_title(brief: Path) -> str:
    """A worker's task as one line: the brief's first line of text, without its heading
    marks (at most 120 characters), or the file's name."""
    for line in read_prompt(brief, "brief").splitlines():
        text = line.strip().lstrip("#").strip()
        if text:
            return text[:120]
    return brief.name


def pointer_line(path: Path, *, kind: str = "brief") -> str:
    """The one line an agent is sent instead of a brief's text: the text stays in its file,
    so nothing in it is ever read by a shell or parsed as an option."""
    return f"Read the {kind} in {path.absolute()} and do what it says."


def claude_args(spec: LaunchSpec) -> list[str]:
    """The agent arguments a launch spec implies (after ``clausona run <profile> --``): the
    app launch rules of :func:`fleet._launch.app_args`, the same for every app host."""
    return app_args(
        tool=spec.tool, permission_mode=spec.permission_mode, model=spec.model,
        effort=spec.effort, api=spec.api, extra=spec.extra_args,
    )


def launch_argv(spec: LaunchSpec, *, clausona: str = "clausona") -> list[str]:
    """``clausona run <profile> -- <args>`` for a profile, else the bare tool."""
    return on_profile(spec.profile, spec.tool, claude_args(spec), clausona=clausona)


def trust_folder(spec: LaunchSpec, worktree: Path) -> Path | None:
    """Pre-answer the agent's folder-trust prompt for ``worktree`` in the spec's config dir
    (Claude ``.claude.json`` or Codex ``config.toml``, through ``fleet trust``), verified.
    Returns the file written, or None when the spec names no config dir: the agent's default
    config is then left alone and an adapter may answer the prompt on screen instead."""
    if spec.config_dir is None:
        return None
    from fleet import _hook_install, _trust

    target = (
        _hook_install.codex_target(spec.config_dir, spec.profile)
        if spec.tool == "codex"
        else _hook_install.claude_target(spec.config_dir, spec.profile)
    )
    return Path(_trust.trust(target, worktree).file)


def write_worktree_note(runner: Runner, worktree: Path, stem: str, text: str) -> Path:
    """Write ``text`` to a new ``<worktree>/.fleet-<stem>-<n>.md`` that git ignores (through
    the repository's ``info/exclude``, so no tracked file changes and the worktree stays
    clean for the retire checks)."""
    common = runner.run(
        ["git", "-C", str(worktree), "rev-parse", "--path-format=absolute", "--git-common-dir"],
        timeout=60,
    ).check("git rev-parse")
    exclude = Path(common.stdout.strip()) / "info" / "exclude"
    pattern = "/.fleet-*.md"
    existing = exclude.read_text() if exclude.exists() else ""
    if pattern not in existing.splitlines():
        exclude.parent.mkdir(parents=True, exist_ok=True)
        sep = "" if not existing or existing.endswith("\n") else "\n"
        with exclude.open("a") as fh:
            fh.write(f"{sep}{pattern}\n")
    n = 1
    while (path := worktree / f".fleet-{stem}-{n}.md").exists():
        n += 1
    path.write_text(text)
    return path
