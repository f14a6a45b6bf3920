"""Adapters by name: ``get_adapter("superset", runner=...)``.

Each host lives in its own module (``fleet.adapters.headless``, ``.superset``, ``.herdr``), imported
only when asked for, so ``import fleet`` never pays for a host it does not use. A module offers
either a ``create(**deps)`` function or a class whose ``name`` is the adapter's name; ``deps``
(runner, clock, home, transport, ...) are passed to it by keyword, each only when it accepts it.

Retiring needs nothing from a host but :meth:`Adapter.delete`. A worker registered with no adapter,
or with ``headless`` while that module is not installed, works in a plain git worktree: it is
deleted by :class:`WorktreeDeleter` with ``git worktree remove`` (never ``--force``) from its
repository's main worktree.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

from fleet._errors import ToolError
from fleet._git import Git
from fleet._guards import require_no_hidden_changes
from fleet._runner import Runner
from fleet.adapters._base import Adapter, LaunchSpec, Workspace

#: name -> module that implements it
ADAPTERS: Final = {
    "headless": "fleet.adapters.headless",
    "superset": "fleet.adapters.superset",
    "herdr": "fleet.adapters.herdr",
}


class UnknownAdapter(ToolError, LookupError):
    """No adapter by that name, or its module cannot be loaded."""


@runtime_checkable
class Deleter(Protocol):
    """The one verb retire needs: remove a workspace and its worktree, never forced."""

    def delete(self, workspace: Workspace) -> None: ...


def _construct(factory: Callable[..., Any], deps: dict[str, Any]) -> Any:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return factory()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return factory(**deps)
    return factory(**{k: v for k, v in deps.items() if k in params})


def _factory(module: Any, name: str) -> Callable[..., Any] | None:
    create = getattr(module, "create", None)
    if callable(create):
        return create  # type: ignore[no-any-return]
    for value in vars(module).values():
        if (
            inspect.isclass(value)
            and value.__module__ == module.__name__
            and getattr(value, "name", None) == name
            and callable(getattr(value, "delete", None))
        ):
            return value
    return None


def get_adapter(name: str, **deps: Any) -> Adapter:
    """The adapter called ``name``, built with the ``deps`` its constructor accepts."""
    module_name = ADAPTERS.get(name)
    if module_name is None:
        known = ", ".join(sorted(ADAPTERS))
        raise UnknownAdapter(f"unknown adapter {name!r} (known: {known})")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownAdapter(f"adapter {name!r} is not available: {exc}") from exc
    factory = _factory(module, name)
    if factory is None:
        raise UnknownAdapter(f"{module_name} defines no adapter named {name!r}")
    adapter: Adapter = _construct(factory, deps)
    return adapter


def get_deleter(name: str | None, **deps: Any) -> Deleter:
    """What deletes a worker's workspace: its adapter, or :class:`WorktreeDeleter` for a plain
    worktree (no adapter, or ``headless`` while that module is absent)."""
    if name is None or name in ("", "git", "worktree"):
        return WorktreeDeleter(runner=deps.get("runner"))
    try:
        return get_adapter(name, **deps)
    except UnknownAdapter:
        if name == "headless" and _missing(ADAPTERS["headless"]):
            return WorktreeDeleter(runner=deps.get("runner"))
        raise


def _missing(module_name: str) -> bool:
    try:
        importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        return exc.name == module_name
    return False


class WorktreeDeleter:
    """Removes a linked git worktree with ``git worktree remove`` run from the repository's main
    worktree. Never ``--force``: git itself refuses a worktree with modified or untracked files,
    or a locked one, and the branch is kept; what git's status does not show (an edit hidden by
    an index flag) is refused here first."""

    name = "worktree"

    def __init__(self, runner: Runner | None = None) -> None:
        self.runner = runner
        self.git = Git(runner)

    def main_worktree(self, worktree: Path) -> Path:
        entries = self.git.worktrees(worktree)
        if not entries:
            raise ToolError(f"git lists no worktrees for {worktree}")
        main = entries[0]
        if main.bare:
            # A bare repository has no main worktree to run from; its git dir will do.
            return self.git.common_dir(worktree)
        if _same(main.path, worktree):
            raise ToolError(
                f"{worktree} is the repository's main worktree; only linked worktrees are removed"
            )
        return main.path

    def delete(self, workspace: Workspace) -> None:
        main = self.main_worktree(workspace.worktree)
        require_no_hidden_changes(
            self.git.runner, workspace.worktree, what=f"worktree {workspace.worktree}"
        )
        self.git.worktree_remove(main, workspace.worktree)


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


__all__ = [
    "ADAPTERS",
    "Adapter",
    "Deleter",
    "LaunchSpec",
    "UnknownAdapter",
    "Workspace",
    "WorktreeDeleter",
    "get_adapter",
    "get_deleter",
]
