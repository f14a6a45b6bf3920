"""Task files and plans: read a TASKS.toml, gather profiles and settings, and route.

TASKS.toml::

    repo = "."                 # optional: the repository workers branch from (relative here)
    base = "main"              # optional: the ref their work starts from
    use = ["claude:work"]      # optional: the profiles the user named for this request
                               # (replaces settings `workers` for this plan)
    start = false              # optional: true when the user said to start without asking

    [[task]]
    name = "paths"             # the worker id: lowercase letters, digits, '.', '_', '-'
    brief = "briefs/paths.md"  # the brief file (relative to this file)
    tool = "claude"            # optional: claude or codex (default: routing chooses)
    profile = "claude:work"    # optional: the user's choice, used even over the defaults
    model = "sonnet"           # optional: the model to run
    kind = "wide-mechanical"   # optional: default, wide-mechanical or exploratory
    checker_of = "other-task"  # optional: this task checks that task's work
    permissions = { mode = "dontAsk", allowedTools = ["Read", "Bash(git status:*)"] }
                               # optional: this task's permission policy, over the settings'
                               # (keys: mode, allowedTools, disallowedTools, addDirs,
                               # codexSandbox, codex)

Unknown keys are refused, so a typo never silently changes a plan.
"""

from __future__ import annotations

import os
import re
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from fleet._core.ids import is_worker_id
from fleet._core.routing import (
    TOOLS,
    WORK_KINDS,
    Choices,
    Plan,
    Profile,
    Settings,
    Task,
    plan,
)
from fleet._errors import SettingsError
from fleet._files import decode_utf8, read_input
from fleet._home import expand
from fleet._permissions import task_layer
from fleet._profiles import coordinator_profile, detect_coordinator_tool, load_profiles
from fleet._runner import Runner
from fleet._settings import load_settings

TOP_KEYS: Final = frozenset({"repo", "base", "use", "start", "task"})
TASK_KEYS: Final = frozenset(
    {"name", "brief", "tool", "profile", "model", "kind", "checker_of", "permissions"}
)


@attrs.frozen(kw_only=True)
class TaskFile:
    """A parsed TASKS.toml: where the work starts, what the user named, and the tasks."""

    path: Path
    repo: Path | None = None
    base: str | None = None
    use: tuple[str, ...] = ()
    start: bool = False
    tasks: tuple[Task, ...] = ()
    #: Each task's own ``permissions`` table (task name -> keys as in the settings), checked.
    permissions: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)

    @property
    def choices(self) -> Choices:
        return Choices(use=self.use, start_now=self.start)


def _text(value: object, where: str, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(f"{where}: {key} must be non-empty text")
    return value.strip()


def _task(raw: object, index: int, base_dir: Path, path: Path) -> Task:
    where = f"{path}: task {index + 1}"
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{where} is not a table")
    unknown = sorted(set(raw) - TASK_KEYS)
    if unknown:
        raise SettingsError(
            f"{where}: unknown key {', '.join(unknown)} (known: {', '.join(sorted(TASK_KEYS))})"
        )
    name = _text(raw.get("name"), where, "name")
    if name is None:
        raise SettingsError(f"{where} has no name")
    where = f"{path}: task {name!r}"
    if not is_worker_id(name):
        raise SettingsError(
            f"{where}: the name must be a worker id (1-64 lowercase letters, digits, '.', '_', "
            "'-', starting with a letter or digit)"
        )
    tool = _text(raw.get("tool"), where, "tool")
    if tool is not None and tool not in TOOLS:
        raise SettingsError(f"{where}: tool must be claude or codex, not {tool!r}")
    kind = _text(raw.get("kind"), where, "kind") or "default"
    if kind not in WORK_KINDS:
        raise SettingsError(f"{where}: kind must be one of {', '.join(WORK_KINDS)}, not {kind!r}")
    brief = _text(raw.get("brief"), where, "brief")
    return Task(
        name=name,
        tool=tool,
        profile=_text(raw.get("profile"), where, "profile"),
        model=_text(raw.get("model"), where, "model"),
        kind=kind,
        checker_of=_text(raw.get("checker_of"), where, "checker_of"),
        brief=(base_dir / expand(brief)) if brief else None,
    )


def load_task_file(path: str | os.PathLike[str]) -> TaskFile:
    """Parse a TASKS.toml (format in this module's docstring); SettingsError names the file
    and the task on any problem. Paths are resolved relative to the file."""
    path = Path(path)
    raw = read_input(path, "task file", missing_ok=True)
    if raw is None:
        raise SettingsError(f"no task file {path}")
    text = decode_utf8(raw, str(path))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path} is not valid TOML: {' '.join(str(exc).split())}") from None
    except (ValueError, RecursionError) as exc:  # a number too long, nesting too deep
        why = "nested too deeply" if isinstance(exc, RecursionError) else " ".join(
            str(exc).split()
        )[:200]
        raise SettingsError(f"{path} is TOML fleet cannot read ({why})") from None
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise SettingsError(
            f"{path}: unknown key {', '.join(unknown)} (known: {', '.join(sorted(TOP_KEYS))}; "
            "tasks go in [[task]] tables)"
        )
    base_dir = path.parent
    raw_tasks = data.get("task", [])
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise SettingsError(f"{path} has no [[task]] tables")
    tasks = tuple(_task(raw, i, base_dir, path) for i, raw in enumerate(raw_tasks))
    names = [t.name for t in tasks]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SettingsError(f"{path}: task names must be unique: {', '.join(repeated)} repeats")
    for t in tasks:
        if t.checker_of is not None and t.checker_of not in names:
            raise SettingsError(f"{path}: task {t.name!r} checks {t.checker_of!r}, not a task")
        if t.checker_of == t.name:
            raise SettingsError(f"{path}: task {t.name!r} cannot check itself")
    use = data.get("use", [])
    if isinstance(use, str):
        use = [use]
    if not isinstance(use, list) or not all(isinstance(u, str) and u for u in use):
        raise SettingsError(f"{path}: use must be a list of profile names")
    start = data.get("start", False)
    if not isinstance(start, bool):
        raise SettingsError(f"{path}: start must be true or false")
    repo = _text(data.get("repo"), str(path), "repo")
    permissions: dict[str, Mapping[str, Any]] = {}
    for raw_task, t in zip(raw_tasks, tasks, strict=True):
        table = raw_task.get("permissions")
        if table is None:
            continue
        try:
            # Strict at load time: a typo in a key or a mode fails the plan, not the launch.
            task_layer(table)
        except SettingsError as exc:
            raise SettingsError(f"{path}: task {t.name!r}: {exc}") from None
        permissions[t.name] = dict(table)
    return TaskFile(
        path=path,
        repo=(base_dir / expand(repo)) if repo else None,
        base=_text(data.get("base"), str(path), "base"),
        use=tuple(use),
        start=start,
        tasks=tasks,
        permissions=permissions,
    )


def load_tasks(path: str | os.PathLike[str]) -> list[Task]:
    """The tasks of a TASKS.toml."""
    return list(load_task_file(path).tasks)


def plan_tasks(
    tasks: Sequence[Task],
    *,
    profiles: Sequence[Profile] | None = None,
    profiles_source: str | os.PathLike[str] | None = None,
    settings: Settings | None = None,
    settings_path: str | os.PathLike[str] | None = None,
    coordinator_tool: str | None = None,
    choices: Choices | None = None,
    env: Mapping[str, str] | None = None,
    runner: Runner | None = None,
    now: float | None = None,
) -> Plan:
    """Route ``tasks``: profiles from ``profiles``, else ``profiles_source``, else
    ``clausona list --json``; settings from ``settings``, else the settings file; the
    coordinator's own profile found from ``env`` (default: this process's)."""
    env = os.environ if env is None else env
    if profiles is None:
        profiles = load_profiles(runner=runner, source=profiles_source)
    if settings is None:
        settings = load_settings(settings_path)
    tool = coordinator_tool or detect_coordinator_tool(env)
    result = plan(
        tasks,
        profiles,
        settings=settings,
        coordinator=coordinator_profile(profiles, tool, env),
        coordinator_tool=tool,
        choices=choices,
        now=time.time() if now is None else now,
    )
    return _unknown_quota_said(result, profiles)


def _unknown_quota_said(result: Plan, profiles: Sequence[Profile]) -> Plan:
    """Rows on one of fleet's own profiles say that its quota is unknown (routing counts it
    as room) and launch through ``fleet-profile-run``."""
    from fleet._profile_store import LAUNCHER, quota_unknown

    unknown = {p.name for p in profiles if quota_unknown(p)}
    if not unknown:
        return result
    rows = []
    for r in result.rows:
        if r.profile in unknown:
            reason = re.sub(r"\b\d+% headroom", "quota unknown", r.reason)
            launch = (LAUNCHER, *r.launch[1:]) if r.launch[:1] == ("clausona",) else r.launch
            rows.append(attrs.evolve(r, reason=reason, launch=launch))
        else:
            rows.append(r)
    return attrs.evolve(result, rows=tuple(rows))


def plan_json(p: Plan) -> dict[str, Any]:
    """The plan as JSON for programs (``fleet plan --json``)."""
    return {
        "needsOk": p.needs_ok,
        "complete": p.complete,
        "coordinator": p.coordinator,
        "maxUsage": p.max_usage,
        "routing": list(p.routing),
        "warnings": list(p.all_warnings),
        "tasks": [
            {
                "task": r.task,
                "tool": r.tool,
                "profile": r.profile,
                "model": r.model,
                "kind": r.kind,
                "checkerOf": r.checker_of,
                "configDir": str(r.config_dir) if r.config_dir else None,
                "launch": list(r.launch),
                "named": r.named,
                "reason": r.reason,
                "warnings": list(r.warnings),
            }
            for r in p.rows
        ],
    }
