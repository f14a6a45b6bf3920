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
