"""fleet's hook program, the command line that runs it, and finding its entries in a hooks table.

Both agents run a hook command through a shell; fleet's entries are recognized by the hook
program's file name in their command, whatever its path or version.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from fleet._agents import TOOLS
from fleet._errors import SettingsError
from fleet._home import resolve_home

HOOK_SCRIPT: Final = "fleet_hook.py"
#: The launcher every installed hook command runs (under the fleet home's ``bin/``): it names
#: the interpreter and hook program of the fleet that installed it, so reinstalling fleet
#: elsewhere repoints every config dir's hooks by rewriting this one file, and a fleet that was
#: moved or removed leaves hooks that exit 0 silently instead of failing every tool call.
LAUNCHER: Final = "fleet-hook"
#: Touched by the launcher when the fleet it names is gone (for ``fleet doctor``).
LAUNCHER_MISSED: Final = "hook-fleet-missing"
Position = tuple[str, int, int]  # event, group index, handler index


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


def launcher_path(home: str | os.PathLike[str] | None = None) -> Path:
    return resolve_home(home) / "bin" / LAUNCHER


def launcher_text(home: str | os.PathLike[str] | None = None) -> str:
    """The launcher's text for the running fleet: POSIX sh, so it runs with no fleet at all."""
    missed = resolve_home(home) / LAUNCHER_MISSED
    return (
        "# fleet's hook launcher, written by `fleet hooks install`. Every installed hook runs\n"
        "# this file, so installing fleet again (from wherever it now is) repoints them all.\n"
        f"py={shlex.quote(hook_python())}\n"
        f"hook={shlex.quote(str(hook_script_path()))}\n"
        'if [ -x "$py" ] && [ -f "$hook" ]; then exec "$py" -I -S "$hook" "$@"; fi\n'
        "# That fleet was moved or removed: say nothing to the agent (its session goes on),\n"
        "# leave a mark for `fleet doctor`, and take the payload so the agent's write succeeds.\n"
        f": > {shlex.quote(str(missed))} 2>/dev/null\n"
        "cat > /dev/null 2>&1\n"
        "exit 0\n"
    )


def write_launcher(home: str | os.PathLike[str] | None = None) -> bool:
    """Write (or repoint) the launcher for the running fleet, and clear the missed mark;
    whether the file changed."""
    from fleet._files import atomic_write
    from fleet._home import FILE_MODE, ensure_dir

    path = launcher_path(home)
    ensure_dir(path.parent)
    text = launcher_text(home)
    try:
        same = path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        same = False
    if not same:
        atomic_write(path, text.encode(), mode=FILE_MODE)
    with contextlib.suppress(FileNotFoundError):
        (resolve_home(home) / LAUNCHER_MISSED).unlink()
    return not same


def launcher_names(path: Path) -> tuple[str, str] | None:
    """The interpreter and hook program a launcher file names, or None when it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, eq, value = line.partition("=")
        if eq and name in ("py", "hook") and name not in found:
            words = shlex.split(value) if value else []
            if len(words) == 1:
                found[name] = words[0]
    if set(found) != {"py", "hook"}:
        return None
    return found["py"], found["hook"]


def hook_command(tool: str, *, home: str | os.PathLike[str] | None = None) -> str:
    """The shell command line installed for ``tool``: the launcher, run by /bin/sh (no
    executable bit or shebang to lose), with the tool and the fleet home."""
    if tool not in TOOLS:
        raise SettingsError(f"unknown tool {tool!r}: use claude or codex")
    return COMMAND_PREFIX + shlex.join(
        ["/bin/sh", str(launcher_path(home)), "--tool", tool, "--home", str(resolve_home(home))]
    )


def is_fleet_command(command: object) -> bool:
    """Whether a hook command runs fleet's hook program (whatever its path or version),
    directly or through its launcher."""
    if not isinstance(command, str) or (HOOK_SCRIPT not in command and LAUNCHER not in command):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return any(Path(w).name in (HOOK_SCRIPT, LAUNCHER) for w in words)


def command_argv(command: str) -> list[str]:
    """The argv a hook command runs (without the shell's ``trap ... exec`` prefix)."""
    command = command.removeprefix(COMMAND_PREFIX)
    try:
        return shlex.split(command)
    except ValueError:
        return []


def fleet_positions(hooks: Mapping[str, Any]) -> list[Position]:
    """Where fleet's handlers sit."""
    out: list[Position] = []
    for event, groups in hooks.items():
        for gi, group in enumerate(groups):
            for hi, handler in enumerate(group.get("hooks", [])):
                if is_fleet_command(handler.get("command")):
                    out.append((event, gi, hi))
    return out
