"""Pre-answering the folder-trust prompt of Claude Code and Codex for a worktree.

Claude Code keeps trust in ``.claude.json`` (``projects[<path>].hasTrustDialogAccepted``) inside
its config dir, or at ``~/.claude.json`` for the default ``~/.claude``; Codex in ``config.toml``
(``[projects."<path>"] trust_level = "trusted"``). A starting agent may rewrite its file and drop
an entry written a moment before, so trusting verifies after writing and tries again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import attrs
import tomlkit

from fleet._errors import SettingsError
from fleet._hooks import Target, dump_json, read_json_object, read_toml, write_file

ATTEMPTS: Final = 5
RETRY_DELAY: Final = 0.2


def claude_state_file(config_dir: Path) -> Path:
    """Where Claude Code keeps per-project state for ``config_dir``."""
    default = Path.home() / ".claude"
    if os.path.realpath(config_dir) == os.path.realpath(default) and not os.environ.get(
        "CLAUDE_CONFIG_DIR"
    ):
        return Path.home() / ".claude.json"
    return config_dir / ".claude.json"


def trust_file(target: Target) -> Path:
    return claude_state_file(target.config_dir) if target.tool == "claude" else target.config_toml


def project_key(path: str | os.PathLike[str]) -> str:
    """The path as the agents key it: absolute, symlinks resolved (they use the process cwd)."""
    return os.path.realpath(os.path.expanduser(path))


@attrs.frozen(kw_only=True)
class TrustResult:
    target: str
    tool: str
    file: str
    path: str
    trusted: bool
    written: bool = False
    attempts: int = 0


def is_trusted(target: Target, path: str | os.PathLike[str]) -> bool:
    key = project_key(path)
    file = trust_file(target)
    if target.tool == "claude":
        data, _ = read_json_object(file)
        projects = data.get("projects")
        entry = projects.get(key) if isinstance(projects, dict) else None
        return isinstance(entry, dict) and entry.get("hasTrustDialogAccepted") is True
    doc, _ = read_toml(file)
    projects = doc.get("projects")
    entry = projects.get(key) if isinstance(projects, dict) else None
    return isinstance(entry, dict) and entry.get("trust_level") == "trusted"


def check(target: Target, path: str | os.PathLike[str]) -> TrustResult:
    return TrustResult(
        target=target.label,
        tool=target.tool,
        file=str(trust_file(target)),
        path=project_key(path),
        trusted=is_trusted(target, path),
    )


def trust(
    target: Target,
    path: str | os.PathLike[str],
    *,
    attempts: int = ATTEMPTS,
    delay: float = RETRY_DELAY,
    sleep: Callable[[float], None] = time.sleep,
) -> TrustResult:
    """Mark ``path`` trusted for ``target`` and verify it stuck, writing again (up to
    ``attempts`` times) when something rewrote the file in between."""
    key = project_key(path)
    file = trust_file(target)
    written = False
    for attempt in range(1, attempts + 1):
        if is_trusted(target, key):
            return TrustResult(
                target=target.label, tool=target.tool, file=str(file), path=key,
                trusted=True, written=written, attempts=attempt - 1,
            )
        _write_trust(target, file, key)
        written = True
        sleep(delay if attempt > 1 else delay / 4)
    trusted = is_trusted(target, key)
    if not trusted:
        raise SettingsError(
            f"could not make {key} trusted in {file}: something keeps rewriting it "
            f"({attempts} attempts)"
        )
    return TrustResult(
        target=target.label, tool=target.tool, file=str(file), path=key,
        trusted=True, written=written, attempts=attempts,
    )


def _write_trust(target: Target, file: Path, key: str) -> None:
    if target.tool == "claude":
        data, _ = read_json_object(file)
        projects = data.setdefault("projects", {})
        if not isinstance(projects, dict):
            raise SettingsError(f"{file}: 'projects' is not an object; left it untouched")
        entry: Any = projects.setdefault(key, {})
        if not isinstance(entry, dict):
            raise SettingsError(f"{file}: projects[{key!r}] is not an object; left it untouched")
        entry["hasTrustDialogAccepted"] = True
        write_file(file, dump_json(data))
        return
    doc, _ = read_toml(file)
    projects = doc.get("projects")
    if projects is None:
        projects = tomlkit.table(is_super_table=True)
        doc["projects"] = projects
    if not isinstance(projects, dict):
        raise SettingsError(f"{file}: 'projects' is not a table; left it untouched")
    entry = projects.get(key)
    if entry is None:
        entry = tomlkit.table()
        projects[key] = entry
    if not isinstance(entry, dict):
        raise SettingsError(f"{file}: projects.{key!r} is not a table; left it untouched")
    entry["trust_level"] = "trusted"
    write_file(file, tomlkit.dumps(doc).encode())
