"""Installing fleet's hook into Claude Code config dirs and Codex homes.

Claude Code reads hooks from ``<config dir>/settings.json``; Codex from ``$CODEX_HOME/hooks.json``,
and runs a hook only once ``config.toml`` holds a trust entry whose hash matches the hook's
definition (``[hooks.state."<hooks.json>:<event>:<group>:<handler>"] trusted_hash``).

Merging never loses the user's content: other hooks and keys survive, reinstalling leaves the file
byte-for-byte as it was, uninstalling removes only fleet's entries (recognized by the hook
program's file name in their command), a malformed file is refused and left untouched, and every
write goes to a temporary file renamed over the original (through a symlink to its target, so a
settings.json shared between profiles stays shared) after a backup copy of the original.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.resources
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import attrs
import tomlkit

from fleet._agent_config import dump_json, read_json_object, read_toml, write_file
from fleet._errors import SettingsError, ToolError
from fleet._home import expand, resolve_home
from fleet._runner import Runner, SubprocessRunner

Tool = Literal["claude", "codex"]
TOOLS: Final = ("claude", "codex")
HOOK_SCRIPT: Final = "fleet_hook.py"

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
#: Codex's default timeout for a command hook, part of the trusted hash when none is set.
CODEX_DEFAULT_TIMEOUT: Final = 600
#: Events that take no matcher in Codex: it ignores one if given and leaves it out of the hash,
#: so fleet writes none.
CODEX_UNMATCHED_EVENTS: Final = frozenset({"UserPromptSubmit", "Stop", "Interrupt"})
#: Events Codex runs on its way out: a handler's timeout defaults to 1 s there and is clamped to
#: 3 s, and the hash holds the effective value. fleet asks for the 3 s.
CODEX_SHORT_EVENTS: Final = frozenset({"SessionEnd", "Interrupt"})
CODEX_SHORT_DEFAULT_TIMEOUT: Final = 1
CODEX_SHORT_MAX_TIMEOUT: Final = 3
MATCH_ALL: Final = "*"


# -- the hook program and its command ----------------------------------------------------------


def hook_script_path() -> Path:
    """The installed hook program: inside the wheel (``fleet/_hook``), else the source tree's
    ``hooks/`` (an editable install)."""
    with contextlib.suppress(ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        packaged = importlib.resources.files("fleet") / "_hook" / HOOK_SCRIPT
        if packaged.is_file():
            return Path(str(packaged)).absolute()
    source = Path(__file__).resolve().parents[2] / "hooks" / HOOK_SCRIPT
    if source.is_file():
        return source
    raise SettingsError(
        f"fleet's hook program {HOOK_SCRIPT} is missing from this installation; reinstall fleet"
    )


def hook_python() -> str:
    """The interpreter the hook runs with: the one running fleet, by absolute path."""
    return str(Path(sys.executable).absolute())


def hook_argv(
    tool: str, *, home: str | os.PathLike[str] | None = None, python: str | None = None
) -> list[str]:
    """The hook's argv: an absolute interpreter with ``-I -S`` (no site, no environment, so
    nothing but the standard library loads), the script, the tool and the fleet home (which
    ``$FLEET_HOME`` in the hook's environment overrides)."""
    if tool not in TOOLS:
        raise SettingsError(f"unknown tool {tool!r}: use claude or codex")
    return [
        python or hook_python(),
        "-I",
        "-S",
        str(hook_script_path()),
        "--tool",
        tool,
        "--home",
        str(resolve_home(home)),
    ]


#: Both agents run a hook command through a shell. Ignoring SIGTERM before the interpreter starts
#: lets the hook finish its one write: Claude Code 2.1.332 sends SIGTERM to a ``-p`` session's
#: StopFailure hook 2-25 ms after spawning it, before Python could install a handler, and the API
#: error or usage limit it carries was lost in about one run in three on a loaded machine.
#: ``exec`` keeps the agent the hook's parent (no shell process left in between).
COMMAND_PREFIX: Final = "trap '' TERM; exec "


def hook_command(tool: str, *, home: str | os.PathLike[str] | None = None) -> str:
    """The shell command line installed for ``tool``."""
    return COMMAND_PREFIX + shlex.join(hook_argv(tool, home=home))


def is_fleet_command(command: object) -> bool:
    """Whether a hook command runs fleet's hook program (whatever its path or version)."""
    if not isinstance(command, str) or HOOK_SCRIPT not in command:
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return any(Path(w).name == HOOK_SCRIPT for w in words)


def command_argv(command: str) -> list[str]:
    """The argv a hook command runs (without the shell's ``trap ... exec`` prefix)."""
    command = command.removeprefix(COMMAND_PREFIX)
    try:
        return shlex.split(command)
    except ValueError:
        return []


# -- targets -----------------------------------------------------------------------------------


def claude_events(version: str | None) -> tuple[str, ...]:
    """The events fleet installs for a Claude Code release (None: not known, the events every
    release has)."""
    events: tuple[str, ...] = CLAUDE_EVENTS
    have = _version_tuple(version) if version else None
    if have is not None:
        for since, later in CLAUDE_LATER_EVENTS:
            if have >= since:
                events += later
    return events


def _version_tuple(version: str) -> tuple[int, ...] | None:
    parts = version.strip().split()[0].split(".") if version.strip() else []
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        return None


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


# -- merging hook entries ----------------------------------------------------------------------

Position = tuple[str, int, int]  # event, group index, handler index
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


def fleet_positions(hooks: Mapping[str, Any]) -> list[Position]:
    """Where fleet's handlers sit."""
    out: list[Position] = []
    for event, groups in hooks.items():
        for gi, group in enumerate(groups):
            for hi, handler in enumerate(group.get("hooks", [])):
                if is_fleet_command(handler.get("command")):
                    out.append((event, gi, hi))
    return out


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


# -- Codex trust -------------------------------------------------------------------------------


def snake_case(event: str) -> str:
    out = []
    for i, c in enumerate(event):
        if c.isupper() and i:
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def codex_trust_hash(event: str, group: Mapping[str, Any]) -> str:
    """Codex's hash of one matcher group (as it stands in hooks.json): sha256 over the compact,
    sorted-key JSON of the event's snake_case name, the matcher (for events that take one), and
    each handler with its effective settings (async, command, timeout, type).

    Observed in Codex 0.171.0 and checked against the ``currentHash`` its app-server reports
    (``hooks/list``). Internal to Codex and liable to change: ``status`` can ask Codex itself."""
    handlers = []
    for handler in group.get("hooks", []):
        handlers.append(
            {
                "async": bool(handler.get("async", False)),
                "command": handler.get("command"),
                "timeout": codex_timeout(event, handler.get("timeout")),
                "type": handler.get("type", "command"),
            }
        )
    identity: dict[str, Any] = {"event_name": snake_case(event), "hooks": handlers}
    if group.get("matcher") is not None and event not in CODEX_UNMATCHED_EVENTS:
        identity["matcher"] = group["matcher"]
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def codex_hooks_key_path(target: Target) -> Path:
    """hooks.json as Codex names it in trust keys: under the canonical CODEX_HOME (Codex 0.171.0
    resolves a symlinked home before keying, so an unresolved key would never match)."""
    return Path(os.path.realpath(target.config_dir)) / "hooks.json"


def codex_timeout(event: str, timeout: Any) -> Any:
    """The timeout Codex gives a handler of ``event`` that asks for ``timeout`` (None: unset)."""
    if event in CODEX_SHORT_EVENTS:
        if timeout is None:
            return CODEX_SHORT_DEFAULT_TIMEOUT
        if isinstance(timeout, int) and not isinstance(timeout, bool):
            return min(timeout, CODEX_SHORT_MAX_TIMEOUT)
        return timeout
    return CODEX_DEFAULT_TIMEOUT if timeout is None else timeout


def trust_key(hooks_file: Path, position: Position) -> str:
    event, gi, hi = position
    return f"{hooks_file}:{snake_case(event)}:{gi}:{hi}"


def _trust_state(doc: tomlkit.TOMLDocument, *, create: bool, path: Path | None = None) -> Any:
    where = path or "config.toml"
    hooks = doc.get("hooks")
    if hooks is None:
        if not create:
            return None
        hooks = tomlkit.table(is_super_table=True)
        doc["hooks"] = hooks
    if not isinstance(hooks, dict):
        raise SettingsError(f"{where}: 'hooks' is not a table; left it untouched")
    state = hooks.get("state")
    if state is None:
        if not create:
            return None
        state = tomlkit.table(is_super_table=True)
        hooks["state"] = state
    if not isinstance(state, dict):
        raise SettingsError(f"{where}: 'hooks.state' is not a table; left it untouched")
    return state


def _retrust(
    doc: tomlkit.TOMLDocument,
    hooks_file: Path,
    old_fleet: Sequence[Position],
    moves: Mapping[Position, Position],
    new_hooks: Mapping[str, Any],
    *,
    keep_existing: bool = False,
) -> None:
    """Rewrite the trust entries of one hooks.json after its groups moved: fleet's old entries
    go, the user's entries follow their handlers, fleet's new handlers are trusted (an entry
    already there is left as it is with ``keep_existing``)."""
    state = _trust_state(doc, create=True)
    prefix = f"{hooks_file}:"
    by_snake = {snake_case(e): e for e in new_hooks}
    by_snake.update({snake_case(e): e for e, _, _ in old_fleet})
    by_snake.update({snake_case(e): e for e, _, _ in moves})
    new_fleet = {
        trust_key(hooks_file, (e, gi, hi)): codex_trust_hash(e, new_hooks[e][gi])
        for e, gi, hi in fleet_positions(new_hooks)
    }
    old_fleet_set = set(old_fleet)
    carried: dict[str, Any] = {}
    for key in [k for k in state if isinstance(k, str) and k.startswith(prefix)]:
        parsed = _parse_trust_key(key[len(prefix) :], by_snake)
        if parsed is None or key in new_fleet:
            continue
        if parsed in old_fleet_set:
            del state[key]
        elif parsed in moves and moves[parsed] != parsed:
            carried[trust_key(hooks_file, moves[parsed])] = state[key]
            del state[key]
    for key, value in carried.items():
        state[key] = value
    for key, digest in new_fleet.items():
        entry = state.get(key)
        if isinstance(entry, dict):
            if entry.get("trusted_hash") != digest and not keep_existing:
                entry["trusted_hash"] = digest
            continue
        entry = tomlkit.table()
        entry["trusted_hash"] = digest
        state[key] = entry
    if not state:
        hooks = doc["hooks"]
        del hooks["state"]
        if not hooks:
            del doc["hooks"]


def _parse_trust_key(rest: str, by_snake: Mapping[str, str]) -> Position | None:
    parts = rest.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    event = by_snake.get(parts[0])
    if event is None:
        return None
    return (event, int(parts[1]), int(parts[2]))


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
    # With Codex to ask, a hash already in config.toml stays until Codex says it is wrong: it may
    # be one Codex reported earlier, which fleet's copy of the recipe would undo every time.
    merge: Merge = lambda hooks: desired_hooks(target, hooks, command)  # noqa: E731
    change = _apply(target, merge, keep_trust=codex is not None)
    if target.tool == "codex" and codex is not None:
        check = codex_check(target, codex, repair=True, runner=runner)
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
        _trust_state(doc, create=False, path=target.config_toml)
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
        hooks_file = codex_hooks_key_path(target)
        _retrust(doc, hooks_file, old_fleet, moves, new_hooks, keep_existing=keep_trust)
        content = tomlkit.dumps(doc).encode()
        if content != (toml_raw or b""):
            # Removing the last table leaves the blank line that separated it behind.
            content = content.rstrip(b"\n") + b"\n" if content.strip() else b""
            saved = write_file(target.config_toml, content)
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
        untrusted, trust_problems = _codex_trust_problems(target, hooks, positions)
        if codex is not None:
            check = codex_check(target, codex, runner=runner)
            if check.error is None:
                by_key = {trust_key(codex_hooks_key_path(target), p): p[0] for p in positions}
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
    problems = []
    python = argv[0]
    if not os.path.isabs(python) or not os.access(python, os.X_OK):
        problems.append(f"the hook's interpreter {python} does not exist or is not executable")
    scripts = [w for w in argv[1:] if Path(w).name == HOOK_SCRIPT]
    if not scripts or not Path(scripts[0]).is_file():
        problems.append(f"the hook program {scripts[0] if scripts else HOOK_SCRIPT} is missing")
    return problems


def _codex_trust_problems(
    target: Target, hooks: Mapping[str, Any], positions: Sequence[Position]
) -> tuple[list[str], list[str]]:
    try:
        doc, _ = read_toml(target.config_toml)
        state = _trust_state(doc, create=False, path=target.config_toml)
    except SettingsError as exc:
        return [p[0] for p in positions], [str(exc)]
    problems: list[str] = []
    features = doc.get("features")
    if isinstance(features, dict) and features.get("hooks") is False:
        problems.append(f"{target.config_toml} disables hooks ([features] hooks = false)")
    untrusted = []
    hooks_file = codex_hooks_key_path(target)
    for position in positions:
        event, gi, _ = position
        entry = state.get(trust_key(hooks_file, position)) if state is not None else None
        have = entry.get("trusted_hash") if isinstance(entry, dict) else None
        if have != codex_trust_hash(event, hooks[event][gi]):
            untrusted.append(event)
    if untrusted:
        problems.append(
            f"Codex will skip fleet's hook for {', '.join(untrusted)}: no matching trust entry "
            f"in {target.config_toml} (run `fleet hooks install` again)"
        )
    return untrusted, problems


# -- asking Codex itself ------------------------------------------------------------------------

#: Names the Codex binary ``install`` and ``status`` ask (else ``codex`` on PATH, if any).
CODEX_BIN_ENV: Final = "FLEET_CODEX"
CODEX_TRUSTED: Final = frozenset({"trusted", "managed"})

# `codex app-server` speaks JSON-RPC on stdin/stdout and answers only while its stdin is open, so
# a small program drives it (a Runner runs commands to completion): initialize, then hooks/list.
_APP_SERVER_DRIVER = r"""
import json, select, subprocess, sys, time
codex, cwd, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
proc = subprocess.Popen([codex, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL)
deadline = time.monotonic() + limit
def send(message):
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
def reply(want):
    pending = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if not ready:
            continue
        chunk = proc.stdout.readline()
        if not chunk:
            break
        try:
            message = json.loads(chunk)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("id") == want:
            return message
    return None
try:
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"clientInfo": {"name": "fleet", "version": "1"}}})
    if reply(1) is None:
        sys.exit("codex app-server did not answer initialize")
    send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    send({"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [cwd]}})
    answer = reply(2)
    if answer is None:
        sys.exit("codex app-server did not answer hooks/list")
    if "error" in answer:
        sys.exit("codex app-server: " + json.dumps(answer["error"])[:300])
    hooks = [h for entry in answer["result"]["data"] for h in entry.get("hooks", [])]
    print(json.dumps(hooks))
finally:
    proc.kill()
    proc.wait()
"""


def find_codex(explicit: str | None = None) -> str | None:
    """The Codex binary to ask: ``explicit``, else ``$FLEET_CODEX``, else ``codex`` on PATH;
    ``none`` asks no Codex."""
    name = explicit or os.environ.get(CODEX_BIN_ENV)
    if name == "none":
        return None
    if name:
        found = shutil.which(name)
        if found is None:
            raise SettingsError(f"Codex binary {name} not found")
        return found
    return shutil.which("codex")


#: Names the Claude Code binary whose version decides which events ``install`` writes.
CLAUDE_BIN_ENV: Final = "FLEET_CLAUDE"


def find_claude(explicit: str | None = None) -> str | None:
    """The Claude Code binary to ask its version: ``explicit``, else ``$FLEET_CLAUDE``, else
    ``claude`` on PATH; ``none`` asks none."""
    name = explicit or os.environ.get(CLAUDE_BIN_ENV)
    if name == "none":
        return None
    if name:
        found = shutil.which(name)
        if found is None:
            raise SettingsError(f"Claude Code binary {name} not found")
        return found
    return shutil.which("claude")


def claude_version(claude: str, *, runner: Runner | None = None) -> str | None:
    """``claude --version``'s release ("2.1.332"), asked in an empty config dir and home so
    that nothing of the user's is read or written; None when it does not say."""
    import tempfile

    runner = runner or SubprocessRunner()
    with tempfile.TemporaryDirectory(prefix="fleet-claude-version-") as scratch:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": scratch,
               "CLAUDE_CONFIG_DIR": scratch, "DISABLE_AUTOUPDATER": "1"}
        try:
            result = runner.run([claude, "--version"], env=env, timeout=30)
        except (OSError, ToolError):
            return None
    words = result.stdout.split() if result.ok else []
    return words[0] if words and _version_tuple(words[0]) else None


def codex_hooks_list(
    codex: str, codex_home: Path, *, runner: Runner | None = None, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """Codex's own view of the hooks of ``codex_home``: each with its ``key``, ``command``,
    ``currentHash`` and ``trustStatus`` (trusted, untrusted, modified, managed)."""
    runner = runner or SubprocessRunner()
    env = dict(os.environ)
    env["CODEX_HOME"] = str(codex_home)
    argv = [sys.executable, "-I", "-c", _APP_SERVER_DRIVER, codex, str(codex_home), str(timeout)]
    result = runner.run(argv, env=env, timeout=timeout + 10).check("codex app-server hooks/list")
    try:
        hooks = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise ToolError("codex app-server hooks/list gave no JSON list") from None
    if not isinstance(hooks, list) or not all(isinstance(h, dict) for h in hooks):
        raise ToolError("codex app-server hooks/list gave no JSON list")
    return hooks


def _codex_fleet_entries(target: Target, listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    prefix = f"{codex_hooks_key_path(target)}:"
    return [
        h for h in listed
        if isinstance(h.get("key"), str) and h["key"].startswith(prefix)
        and is_fleet_command(h.get("command"))
    ]


@attrs.frozen(kw_only=True)
class CodexCheck:
    """What Codex itself says of fleet's hook entries in one Codex home."""

    codex: str
    trusted: tuple[str, ...] = ()
    untrusted: tuple[str, ...] = ()
    repaired: tuple[str, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.trusted) and not self.untrusted


def codex_check(
    target: Target, codex: str, *, repair: bool = False, runner: Runner | None = None
) -> CodexCheck:
    """Ask Codex which of fleet's entries it trusts. With ``repair``, write the hash Codex
    reports for any it does not (the recipe is Codex's internal business and may change), then
    ask again."""
    try:
        entries = _codex_fleet_entries(target, codex_hooks_list(codex, target.config_dir,
                                                                runner=runner))
        repaired: list[str] = []
        if repair:
            wrong = {
                h["key"]: h["currentHash"] for h in entries
                if h.get("trustStatus") not in CODEX_TRUSTED
                and isinstance(h.get("currentHash"), str)
            }
            if wrong:
                doc, _ = read_toml(target.config_toml)
                state = _trust_state(doc, create=True, path=target.config_toml)
                for key, digest in wrong.items():
                    entry = tomlkit.table()
                    entry["trusted_hash"] = digest
                    if key in state:
                        del state[key]
                    state[key] = entry
                write_file(target.config_toml, tomlkit.dumps(doc).encode())
                repaired = sorted(wrong)
                entries = _codex_fleet_entries(
                    target, codex_hooks_list(codex, target.config_dir, runner=runner)
                )
    except (ToolError, SettingsError) as exc:
        return CodexCheck(codex=codex, error=str(exc))
    trusted = sorted(h["key"] for h in entries if h.get("trustStatus") in CODEX_TRUSTED)
    untrusted = sorted(h["key"] for h in entries if h.get("trustStatus") not in CODEX_TRUSTED)
    return CodexCheck(
        codex=codex, trusted=tuple(trusted), untrusted=tuple(untrusted), repaired=tuple(repaired)
    )


def iter_fleet_commands(target: Target) -> Iterator[str]:
    """The commands of fleet's installed handlers in ``target`` (for ``fleet doctor``)."""
    try:
        data, _ = read_json_object(target.hooks_file)
        hooks = _hooks_table(data, target.hooks_file)
    except SettingsError:
        return
    for event, gi, hi in fleet_positions(hooks):
        yield hooks[event][gi]["hooks"][hi]["command"]
