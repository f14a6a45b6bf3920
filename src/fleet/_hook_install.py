"""Installing fleet's hook into Claude Code config dirs and Codex homes.

Claude Code reads hooks from ``<config dir>/settings.json``; Codex from ``$CODEX_HOME/hooks.json``,
and runs a hook only once ``config.toml`` trusts it (:mod:`fleet._codex_trust`).

Merging never loses the user's content: other hooks and keys survive, reinstalling leaves the file
byte-for-byte as it was, uninstalling removes only fleet's entries (recognized by the hook
program's file name in their command), a malformed file is refused and left untouched, and every
write is atomic with a backup (:mod:`fleet._agent_config`).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import attrs
import tomlkit

from fleet._agent_config import dump_json, dump_toml, read_json_object, read_toml, write_file
from fleet._agents import Tool, version_tuple
from fleet._codex_trust import (
    CODEX_SHORT_EVENTS,
    CODEX_SHORT_MAX_TIMEOUT,
    CODEX_UNMATCHED_EVENTS,
    CodexCheck,
    codex_check,
    codex_hooks_key_path,
    codex_trust_problems,
    retrust,
    trust_key,
    trust_state,
)
from fleet._errors import SettingsError
from fleet._home import ensure_dir, expand
from fleet._hook_command import (
    COMMAND_PREFIX,
    HOOK_SCRIPT,
    LAUNCHER,
    Position,
    command_argv,
    fleet_positions,
    hook_command,
    is_fleet_command,
    launcher_names,
    write_launcher,
)
from fleet._runner import Runner

#: Claude Code events fleet's state machine reads. WorktreeCreate/WorktreeRemove are never
#: registered: a hook there replaces Claude Code's own worktree handling. PreToolUse is left out
#: on purpose: every hook costs the agent a process spawn per firing, and a tool's start tells
#: the fold nothing that the prompt before it and the PostToolUse after it do not (a real
#: 20-tool-call session: 1.15x slower than no hooks with it, 1.11x without, measured with
#: bench/claude_session.py).
CLAUDE_EVENTS: Final = (
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "Notification",
    "Elicitation",
    "ElicitationResult",
    "Stop",
    "StopFailure",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
)
#: Hook events of later Claude Code releases, by the first release fleet knows to have them.
#: An older release that finds one in settings.json stops every interactive start at a warning
#: dialog ("Unknown hook event ... was ignored", seen on 2.1.197), which would hold a worker at
#: a screen, so they are installed only where the Claude Code to run is known to be that new.
#: They are journaled for the record (the model a worker switched to) and move no state.
CLAUDE_LATER_EVENTS: Final[tuple[tuple[tuple[int, ...], tuple[str, ...]], ...]] = (
    ((2, 1, 332), ("PreModelSwitch", "PostModelSwitch", "DirectoryAdded", "PreSkillShellCommand")),
)
#: Tool activity fires on every call and only ever means "working": it runs in the background so
#: it never delays a tool. Everything that changes what a coordinator should do stays synchronous,
#: so it is in the journal before the agent moves on. The 2.1.332 events change no state either.
CLAUDE_ASYNC_EVENTS: Final = frozenset(
    {
        "PostToolUse",
        "PostToolUseFailure",
        "PreModelSwitch",
        "PostModelSwitch",
        "DirectoryAdded",
        "PreSkillShellCommand",
    }
)
#: Codex runs hooks synchronously, so a PreToolUse hook would delay every tool; see above.
CODEX_EVENTS: Final = (
    "SessionStart",
    "UserPromptSubmit",
    "PermissionRequest",
    "PostToolUse",
    "PreCompact",
    "PostCompact",
    "SubagentStart",
    "SubagentStop",
    "Stop",
    "Interrupt",
    "SessionEnd",
)
MATCH_ALL: Final = "*"


# -- targets -----------------------------------------------------------------------------------


def claude_events(version: str | None) -> tuple[str, ...]:
    """The events fleet installs for a Claude Code release (None: not known, the events every
    release has)."""
    events: tuple[str, ...] = CLAUDE_EVENTS
    have = version_tuple(version) if version else None
    if have is not None:
        for since, later in CLAUDE_LATER_EVENTS:
            if have >= since:
                events += later
    return events


@attrs.frozen(kw_only=True)
class Target:
    """Where a hook is installed: a Claude Code config dir or a Codex home, maybe a profile's.
    ``claude_version`` is the Claude Code that will run there, when known."""

    tool: Tool
    config_dir: Path
    profile: str | None = None
    claude_version: str | None = None

    @property
    def hooks_file(self) -> Path:
        return self.config_dir / ("settings.json" if self.tool == "claude" else "hooks.json")

    @property
    def config_toml(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def events(self) -> tuple[str, ...]:
        return claude_events(self.claude_version) if self.tool == "claude" else CODEX_EVENTS

    @property
    def label(self) -> str:
        return self.profile or f"{self.tool}:{self.config_dir}"


def claude_target(
    config_dir: str | os.PathLike[str], profile: str | None = None, *,
    claude_version: str | None = None,
) -> Target:
    path = expand(config_dir).absolute()
    return Target(tool="claude", config_dir=path, profile=profile, claude_version=claude_version)


def codex_target(codex_home: str | os.PathLike[str], profile: str | None = None) -> Target:
    path = expand(codex_home).absolute()
    return Target(tool="codex", config_dir=path, profile=profile)


def require_dir(target: Target, *, create: bool = False) -> Target:
    """``target`` when its config dir exists (made first when ``create``); a SettingsError
    otherwise. A config dir named by hand that does not exist is most often a typo
    (``~/.cluade``): writing there would leave hooks no agent ever reads."""
    what = "Claude Code config dir" if target.tool == "claude" else "Codex home"
    where = target.config_dir
    if where.is_dir():
        return target
    if where.exists() or where.is_symlink():
        raise SettingsError(f"the {what} {where} is not a directory; nothing was written")
    if not create:
        raise SettingsError(
            f"the {what} {where} does not exist (a typo?): name one that does, or pass "
            "--create to make it; nothing was written"
        )
    ensure_dir(where)
    return target


# -- merging hook entries ----------------------------------------------------------------------

#: A change to a hooks table: the new table and where each of the user's handlers moved.
Merge = Callable[[Mapping[str, Any]], tuple[dict[str, Any], dict[Position, Position]]]


def _hooks_table(data: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = data.get("hooks")
    if hooks is None:
        return {}
    if not isinstance(hooks, dict):
        raise SettingsError(f"{path}: 'hooks' is not an object; left it untouched")
    for event, groups in hooks.items():
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise SettingsError(
                f"{path}: hooks.{event} is not a list of matcher groups; left it untouched"
            )
        for group in groups:
            handlers = group.get("hooks", [])
            if not isinstance(handlers, list) or not all(isinstance(h, dict) for h in handlers):
                raise SettingsError(
                    f"{path}: a hooks.{event} group has no list of hooks; left it untouched"
                )
    return hooks


def strip_fleet(hooks: Mapping[str, Any]) -> tuple[dict[str, Any], dict[Position, Position]]:
    """``hooks`` without fleet's handlers (a group left empty goes too; an event left empty goes
    too) and where every other handler moved."""
    out: dict[str, Any] = {}
    moves: dict[Position, Position] = {}
    for event, groups in hooks.items():
        kept_groups: list[Any] = []
        for gi, group in enumerate(groups):
            handlers = group.get("hooks", [])
            kept = [h for h in handlers if not is_fleet_command(h.get("command"))]
            if len(kept) == len(handlers):
                new_group = group
            elif kept:
                new_group = {**group, "hooks": kept}
            else:
                continue
            ngi = len(kept_groups)
            nhi = 0
            for hi, handler in enumerate(handlers):
                if not is_fleet_command(handler.get("command")):
                    moves[(event, gi, hi)] = (event, ngi, nhi)
                    nhi += 1
            kept_groups.append(new_group)
        if kept_groups or not groups:
            out[event] = kept_groups
    return out, moves


def fleet_group(target: Target, command: str, event: str) -> dict[str, Any]:
    handler: dict[str, Any] = {"type": "command", "command": command}
    if target.tool == "claude":
        if event in CLAUDE_ASYNC_EVENTS:
            handler["async"] = True
        return {"matcher": MATCH_ALL, "hooks": [handler]}
    if event in CODEX_SHORT_EVENTS:
        handler["timeout"] = CODEX_SHORT_MAX_TIMEOUT
    if event in CODEX_UNMATCHED_EVENTS:
        return {"hooks": [handler]}
    return {"matcher": MATCH_ALL, "hooks": [handler]}


def desired_hooks(
    target: Target, hooks: Mapping[str, Any], command: str
) -> tuple[dict[str, Any], dict[Position, Position]]:
    """``hooks`` with exactly fleet's current groups: kept as they are when already right,
    otherwise every fleet handler removed and one fleet group appended per event."""
    wanted = {event: fleet_group(target, command, event) for event in target.events}
    positions = fleet_positions(hooks)
    already = (
        len(positions) == len(wanted)
        and {p[0] for p in positions} == set(wanted)
        and all(hooks[event][gi] == wanted[event] for event, gi, _ in positions)
    )
    if already:
        identity = {
            (e, gi, hi): (e, gi, hi)
            for e, groups in hooks.items()
            for gi, g in enumerate(groups)
            for hi in range(len(g.get("hooks", [])))
        }
        return copy.deepcopy(dict(hooks)), identity
    stripped, moves = strip_fleet(hooks)
    for event, group in wanted.items():
        stripped.setdefault(event, []).append(group)
    return stripped, moves


# -- install / uninstall / status --------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Change:
    """What one install or uninstall did to one target."""

    target: str
    tool: str
    file: str
    changed: bool
    files_written: tuple[str, ...] = ()
    backups: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    removed: int = 0
    codex_check: CodexCheck | None = None


def install(
    target: Target,
    *,
    home: str | os.PathLike[str] | None = None,
    codex: str | None = None,
    runner: Runner | None = None,
) -> Change:
    """Install (or refresh) fleet's hook for every event of ``target``. For a Codex home, when
    a ``codex`` binary is given, Codex is then asked whether it trusts the entries, and any hash
    it disagrees with is replaced by the one it reports."""
    command = hook_command(target.tool, home=home)
    # The launcher first: the command installed names it, and it names this fleet.
    write_launcher(home)
    # With Codex to ask, a hash already in config.toml stays until Codex says it is wrong: it may
    # be one Codex reported earlier, which fleet's copy of the recipe would undo every time.
    merge: Merge = lambda hooks: desired_hooks(target, hooks, command)  # noqa: E731
    change = _apply(target, merge, keep_trust=codex is not None)
    if target.tool == "codex" and codex is not None:
        check = codex_check(target.config_dir, codex, repair=True, runner=runner)
        written = change.files_written
        if check.repaired and str(target.config_toml) not in written:
            written = (*written, str(target.config_toml))
        change = attrs.evolve(
            change, codex_check=check, files_written=written, changed=bool(written)
        )
    return change


def uninstall(target: Target) -> Change:
    """Remove fleet's hook entries (and their Codex trust) from ``target``."""
    return _apply(target, strip_fleet)


def _apply(target: Target, change: Merge, *, keep_trust: bool = False) -> Change:
    path = target.hooks_file
    data, raw = read_json_object(path)
    hooks = _hooks_table(data, path)
    doc: tomlkit.TOMLDocument | None = None
    toml_raw: bytes | None = None
    if target.tool == "codex":
        doc, toml_raw = read_toml(target.config_toml)  # refuse a bad config before any write
        trust_state(doc, create=False, path=target.config_toml)
    old_fleet = fleet_positions(hooks)
    new_hooks, moves = change(hooks)
    new_data = dict(data)
    if new_hooks:
        new_data["hooks"] = new_hooks
    else:
        new_data.pop("hooks", None)
    written: list[str] = []
    backups: list[str] = []
    if new_data != data or (raw is None and new_hooks):
        saved = write_file(path, dump_json(new_data))
        written.append(str(path))
        if saved:
            backups.append(str(saved))
    if doc is not None:
        hooks_file = codex_hooks_key_path(target.config_dir)
        retrust(doc, hooks_file, old_fleet, moves, new_hooks, keep_existing=keep_trust)
        if dump_toml(doc) != (toml_raw or b""):
            saved = write_file(target.config_toml, dump_toml(doc, trim=True))
            written.append(str(target.config_toml))
            if saved:
                backups.append(str(saved))
    events = tuple(p[0] for p in fleet_positions(new_hooks))
    return Change(
        target=target.label,
        tool=target.tool,
        file=str(path),
        changed=bool(written),
        files_written=tuple(written),
        backups=tuple(backups),
        events=events,
        removed=max(0, len(old_fleet) - len(events)),
    )


@attrs.frozen(kw_only=True)
class Status:
    """Whether fleet's hook is installed in a target and will actually run."""

    target: str
    tool: str
    file: str
    installed: tuple[str, ...]
    missing: tuple[str, ...]
    will_run: bool
    problems: tuple[str, ...] = ()
    command: str | None = None
    current: bool = False
    untrusted: tuple[str, ...] = ()
    codex_check: CodexCheck | None = None


def status(
    target: Target,
    *,
    home: str | os.PathLike[str] | None = None,
    codex: str | None = None,
    runner: Runner | None = None,
) -> Status:
    """What is installed in ``target`` and whether it will run. For a Codex home, trust is
    judged by fleet's copy of Codex's hash recipe, or, when a ``codex`` binary is given, by
    Codex itself."""
    path = target.hooks_file
    problems: list[str] = []
    try:
        data, _ = read_json_object(path)
        hooks = _hooks_table(data, path)
    except SettingsError as exc:
        return Status(
            target=target.label, tool=target.tool, file=str(path), installed=(),
            missing=target.events, will_run=False, problems=(str(exc),),
        )
    positions = fleet_positions(hooks)
    installed = tuple(e for e in target.events if any(p[0] == e for p in positions))
    missing = tuple(e for e in target.events if e not in installed)
    unknown = sorted({p[0] for p in positions} - set(target.events))
    commands = sorted({hooks[e][gi]["hooks"][hi]["command"] for e, gi, hi in positions})
    try:
        expected: str | None = hook_command(target.tool, home=home)
    except SettingsError as exc:
        expected = None
        problems.append(str(exc))
    if not positions:
        problems.append(f"fleet's hook is not installed in {path}")
    elif missing:
        problems.append(f"fleet's hook is missing for {', '.join(missing)}")
    if unknown and target.tool == "claude" and target.claude_version:
        problems.append(
            f"Claude Code {target.claude_version} does not know the hook events "
            f"{', '.join(unknown)} and stops at a warning on every interactive start; run "
            "`fleet hooks install` again"
        )
    if len(commands) > 1:
        problems.append("fleet's hook entries disagree on the command; reinstall")
    for command in commands:
        problems.extend(_command_problems(command))
        if not command.startswith(COMMAND_PREFIX):
            problems.append(
                "fleet's hook command was installed by an older fleet and can be stopped "
                "before it records an API error or usage limit; run `fleet hooks install` again"
            )
    if target.tool == "claude" and data.get("disableAllHooks") is True:
        problems.append(f"{path} sets disableAllHooks: no hook runs")
    untrusted: list[str] = []
    check: CodexCheck | None = None
    if target.tool == "codex" and positions:
        untrusted, trust_problems = codex_trust_problems(target.config_dir, hooks, positions)
        if codex is not None:
            check = codex_check(target.config_dir, codex, runner=runner)
            if check.error is None:
                hooks_file = codex_hooks_key_path(target.config_dir)
                by_key = {trust_key(hooks_file, p): p[0] for p in positions}
                untrusted = [by_key.get(k, k) for k in check.untrusted]
                trust_problems = [p for p in trust_problems if "disables hooks" in p]
                if untrusted:
                    trust_problems.append(
                        f"Codex ({check.codex}) does not trust fleet's hook for "
                        f"{', '.join(untrusted)} (run `fleet hooks install` again)"
                    )
                elif not check.trusted:
                    trust_problems.append(f"Codex ({check.codex}) does not list fleet's hook")
            else:
                trust_problems.append(f"could not ask Codex: {check.error}")
        problems.extend(trust_problems)
    current = bool(commands) and commands == [expected]
    return Status(
        target=target.label,
        tool=target.tool,
        file=str(path),
        installed=installed,
        missing=missing,
        will_run=bool(positions) and not problems,
        problems=tuple(problems),
        command=commands[0] if len(commands) == 1 else None,
        current=current,
        untrusted=tuple(untrusted),
        codex_check=check,
    )


def _command_problems(command: str) -> list[str]:
    argv = command_argv(command)
    if len(argv) < 2:
        return [f"cannot parse the installed hook command {command!r}"]
    launchers = [w for w in argv[1:] if Path(w).name == LAUNCHER]
    if launchers:
        return _launcher_problems(Path(launchers[0]))
    problems = []
    python = argv[0]
    if not os.path.isabs(python) or not os.access(python, os.X_OK):
        problems.append(
            f"the hook's interpreter {python} is gone (fleet was moved or removed): every tool "
            "call prints an error; run `fleet hooks install` from the fleet you use now"
        )
    scripts = [w for w in argv[1:] if Path(w).name == HOOK_SCRIPT]
    if not scripts or not Path(scripts[0]).is_file():
        problems.append(f"the hook program {scripts[0] if scripts else HOOK_SCRIPT} is missing")
    return problems


def _launcher_problems(launcher: Path) -> list[str]:
    """Why the launcher at ``launcher`` would not reach a fleet (it then records nothing)."""
    fix = "run `fleet hooks install` from the fleet you use now (it repoints every profile)"
    names = launcher_names(launcher)
    if names is None:
        return [f"the hook launcher {launcher} is missing or unreadable: {fix}"]
    python, script = names
    if not os.access(python, os.X_OK) or not Path(script).is_file():
        gone = python if not os.access(python, os.X_OK) else script
        return [f"the hook launcher names {gone}, which is gone (fleet was moved or removed), "
                f"so the hook records nothing: {fix}"]
    return []


def iter_fleet_commands(target: Target) -> Iterator[str]:
    """The commands of fleet's installed handlers in ``target`` (for ``fleet doctor``)."""
    try:
        data, _ = read_json_object(target.hooks_file)
        hooks = _hooks_table(data, target.hooks_file)
    except SettingsError:
        return
    for event, gi, hi in fleet_positions(hooks):
        yield hooks[event][gi]["hooks"][hi]["command"]
