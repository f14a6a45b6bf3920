"""``fleet mcp install``: register ``fleet mcp serve`` with Claude Code or Codex.

Claude Code keeps user-scope MCP servers in ``mcpServers`` of its ``.claude.json`` (in the config
dir, or ``~/.claude.json`` for the default ``~/.claude``), which is what
``claude mcp add --scope user`` writes; Codex in ``[mcp_servers.NAME]`` of
``$CODEX_HOME/config.toml``. Merging is that of ``fleet hooks install``: every other server and
key survives, reinstalling changes nothing, a malformed file is refused and left untouched, and
the write is atomic with a backup beside the file. A starting Claude Code may rewrite its
``.claude.json`` and drop an entry written a moment before, so the entry is verified after the
write and written again if it went missing.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import tomlkit

from fleet._agent_config import (
    claude_state_file,
    dump_json,
    dump_toml,
    read_json_object,
    read_toml,
    write_file,
)
from fleet._errors import SettingsError
from fleet._home import expand, resolve_home
from fleet._hook_install import Target

DEFAULT_NAME: Final = "fleet"
#: Codex gives up on a tool call after ``tool_timeout_sec`` (60 by default): room for a wait of
#: the server's longest plus starting the child that runs it.
CODEX_TOOL_TIMEOUT: Final = 120
#: and on a server that has not answered ``initialize`` within ``startup_timeout_sec``.
CODEX_STARTUP_TIMEOUT: Final = 30
#: Variables a Codex passes on to the server when set (it passes only a few of its own by
#: default): fleet's own settings, and whatever --env-var and an env: key source name.
FORWARDED_VARS: Final = (
    "FLEET_SETTINGS",
    "FLEET_PROFILES",
    "FLEET_CLAUSONA",
    "FLEET_WORKTREES",
    "FLEET_CLAUDE",
    "FLEET_CODEX",
)
ATTEMPTS: Final = 5
RETRY_DELAY: Final = 0.2


def server_argv(
    *,
    home: str | os.PathLike[str] | None = None,
    repos: Sequence[str] = (),
    extra: Sequence[str] = (),
    python: str | None = None,
) -> list[str]:
    """The command line of the server: this interpreter (by absolute path), fleet's home, and
    the options of ``fleet mcp serve``."""
    argv = [python or str(Path(sys.executable).absolute()), "-m", "fleet"]
    argv += ["--home", str(resolve_home(home)), "mcp", "serve"]
    for repo in repos:
        argv += ["--repo", os.path.realpath(expand(repo))]
    return [*argv, *extra]


def is_fleet_server(entry: object) -> bool:
    """Whether an MCP server entry runs ``fleet mcp serve`` (whatever its paths)."""
    if not isinstance(entry, Mapping):
        return False
    words = [str(entry.get("command") or "")]
    args = entry.get("args")
    if isinstance(args, list):
        words += [str(a) for a in args]
    try:
        at = words.index("mcp")
    except ValueError:
        return False
    return words[at + 1 : at + 2] == ["serve"] and any(
        w == "fleet" or Path(w).name == "fleet" for w in words[:at]
    )


def claude_entry(argv: Sequence[str]) -> dict[str, Any]:
    return {"type": "stdio", "command": argv[0], "args": list(argv[1:]), "env": {}}


def claude_add_line(argv: Sequence[str], name: str = DEFAULT_NAME) -> str:
    """The ``claude mcp add`` command that registers the same server."""
    return shlex.join(["claude", "mcp", "add", "--scope", "user", name, "--", *argv])


def forwarded_vars(argv: Sequence[str], extra: Sequence[str] = ()) -> list[str]:
    """The variables a Codex should pass on to the server: fleet's own, the variable of the
    server's ``--key-from env:NAME``, and ``extra``."""
    names = list(FORWARDED_VARS)
    for i, word in enumerate(argv[:-1]):
        if word == "--key-from" and argv[i + 1].startswith("env:"):
            names.append(argv[i + 1][len("env:") :])
    names += list(extra)
    for name in names:
        if not name or not (name.replace("_", "a").isalnum() and not name[0].isdigit()):
            raise SettingsError(f"--env-var {name!r} is not an environment variable name")
    return list(dict.fromkeys(names))


def codex_table(argv: Sequence[str], env_vars: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "command": argv[0],
        "args": list(argv[1:]),
        "env_vars": forwarded_vars(argv, env_vars),
        # a coordinator's session needs these tools: Codex waits for a required server
        # before the first turn (an optional one that starts slower is left out of it)
        "required": True,
        "startup_timeout_sec": CODEX_STARTUP_TIMEOUT,
        "tool_timeout_sec": CODEX_TOOL_TIMEOUT,
    }


def codex_snippet(argv: Sequence[str], name: str = DEFAULT_NAME,
                  env_vars: Sequence[str] = ()) -> str:
    doc = tomlkit.document()
    servers = tomlkit.table(is_super_table=True)
    servers[name] = codex_table(argv, env_vars)
    doc["mcp_servers"] = servers
    return tomlkit.dumps(doc)


@attrs.frozen(kw_only=True)
class McpChange:
    """What one install or uninstall did to one Claude Code config dir or Codex home."""

    tool: str
    file: str
    name: str
    changed: bool
    installed: bool
    command: tuple[str, ...] = ()
    backup: str | None = None


def target_file(target: Target) -> Path:
    return claude_state_file(target.config_dir) if target.tool == "claude" else target.config_toml


def current(target: Target, name: str = DEFAULT_NAME) -> Mapping[str, Any] | None:
    """The entry called ``name`` in the target's file, if any."""
    path = target_file(target)
    if target.tool == "claude":
        data, _ = read_json_object(path)
        servers = data.get("mcpServers")
        entry = servers.get(name) if isinstance(servers, dict) else None
    else:
        doc, _ = read_toml(path)
        servers = doc.get("mcp_servers")
        entry = servers.get(name) if isinstance(servers, Mapping) else None
    return entry if isinstance(entry, Mapping) else None


def install(target: Target, argv: Sequence[str], name: str = DEFAULT_NAME,
            env_vars: Sequence[str] = ()) -> McpChange:
    """Add (or refresh) the server entry ``name``; refuse to replace another server's."""
    existing = current(target, name)
    if existing is not None and not is_fleet_server(existing):
        raise SettingsError(
            f"{target_file(target)} already has an MCP server {name!r} that is not fleet's; "
            "left it untouched (pick another --name)"
        )
    if target.tool == "claude":
        return _install_claude(target, argv, name)
    return _install_codex(target, argv, name, env_vars)


def _install_claude(target: Target, argv: Sequence[str], name: str) -> McpChange:
    path = target_file(target)
    entry = claude_entry(argv)
    backup: str | None = None
    changed = False
    for _ in range(ATTEMPTS):
        data, _raw = read_json_object(path)
        servers = data.get("mcpServers", {})
        if not isinstance(servers, dict):
            raise SettingsError(f"{path}: 'mcpServers' is not an object; left it untouched")
        if servers.get(name) == entry:
            break
        new = {**data, "mcpServers": {**servers, name: entry}}
        saved = write_file(path, dump_json(new))
        backup = backup or (str(saved) if saved else None)
        changed = True
        time.sleep(RETRY_DELAY)  # a Claude Code writing its own copy shows up by then
    else:
        raise SettingsError(
            f"{path} kept losing the {name!r} entry (a running Claude Code rewrites it); "
            "close the sessions of this config dir and install again"
        )
    return McpChange(tool="claude", file=str(path), name=name, changed=changed, installed=True,
                     command=tuple(argv), backup=backup)


def _install_codex(
    target: Target, argv: Sequence[str], name: str, env_vars: Sequence[str]
) -> McpChange:
    path = target_file(target)
    doc, raw = read_toml(path)
    found = doc.get("mcp_servers")
    if found is None:
        found = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = found
    if not isinstance(found, MutableMapping):
        raise SettingsError(f"{path}: 'mcp_servers' is not a table; left it untouched")
    servers: MutableMapping[str, Any] = found
    wanted = codex_table(argv, env_vars)
    old = servers.get(name)
    if isinstance(old, Mapping) and {k: _plain(v) for k, v in old.items()} == wanted:
        return McpChange(tool="codex", file=str(path), name=name, changed=False,
                         installed=True, command=tuple(argv))
    table = tomlkit.table()
    for key, value in wanted.items():
        table[key] = value
    servers[name] = table
    content = dump_toml(doc)
    saved = write_file(path, content) if content != (raw or b"") else None
    return McpChange(tool="codex", file=str(path), name=name, changed=True, installed=True,
                     command=tuple(argv), backup=str(saved) if saved else None)


def uninstall(target: Target, name: str = DEFAULT_NAME) -> McpChange:
    """Remove the entry ``name`` if it is fleet's; anything else stays."""
    path = target_file(target)
    existing = current(target, name)
    if existing is None:
        return McpChange(tool=target.tool, file=str(path), name=name, changed=False,
                         installed=False)
    if not is_fleet_server(existing):
        raise SettingsError(
            f"{path}: the MCP server {name!r} is not fleet's; left it untouched"
        )
    if target.tool == "claude":
        data, _ = read_json_object(path)
        servers = {k: v for k, v in data["mcpServers"].items() if k != name}
        new = {**data, "mcpServers": servers}
        if not servers:
            new.pop("mcpServers")
        saved = write_file(path, dump_json(new))
    else:
        doc, _ = read_toml(path)
        tables = doc["mcp_servers"]
        assert isinstance(tables, MutableMapping)
        del tables[name]
        if not tables:
            del doc["mcp_servers"]
        saved = write_file(path, dump_toml(doc, trim=True))
    return McpChange(tool=target.tool, file=str(path), name=name, changed=True,
                     installed=False, backup=str(saved) if saved else None)


def status(target: Target, argv: Sequence[str], name: str = DEFAULT_NAME) -> dict[str, Any]:
    """Whether ``name`` is installed, is fleet's, and runs the command ``argv`` would."""
    entry = current(target, name)
    if entry is None:
        state = "missing"
    elif not is_fleet_server(entry):
        state = "other"
    else:
        command = [str(entry.get("command") or ""), *[str(a) for a in entry.get("args") or []]]
        state = "installed" if command == list(argv) else "different"
    return {"tool": target.tool, "file": str(target_file(target)), "name": name, "state": state}


def _plain(value: Any) -> Any:
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value
