"""The agents' config files, read strictly and written atomically with a backup.

Claude Code: ``<config dir>/settings.json`` (hooks, settings) and its state file ``.claude.json``
(folder trust, MCP servers, onboarding). Codex: ``$CODEX_HOME/hooks.json`` and ``config.toml``
(hook trust, folder trust, MCP servers, providers). Every part of fleet that changes one of them
goes through here, so each rule holds everywhere:

- A file that cannot be understood (not JSON, not TOML, not an object, a key of the wrong type)
  is refused with a one-line :class:`SettingsError` naming it, and is left untouched.
- Merging keeps the user's content: other keys survive, and ``config.toml`` goes through tomlkit,
  which keeps the user's comments, order and formatting.
- A write goes to a temporary file renamed over the original (through a symlink to its target,
  so a file shared between profiles stays shared), after a copy of the original is kept beside
  it as ``<file>.fleet-backup``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any, Final

import tomlkit
import tomlkit.exceptions

from fleet._errors import SettingsError
from fleet._files import atomic_write, read_input

BACKUP_SUFFIX: Final = ".fleet-backup"
CLAUDE_TRUSTED: Final = "hasTrustDialogAccepted"
CODEX_TRUST_LEVEL: Final = "trust_level"

#: A tomlkit document or one of its tables: both are mutable mappings of TOML items.
TomlTable = MutableMapping[str, Any]


# -- where the files are ------------------------------------------------------------------------


def claude_state_file(config_dir: Path) -> Path:
    """Where Claude Code keeps per-project state for ``config_dir``."""
    default = Path.home() / ".claude"
    if os.path.realpath(config_dir) == os.path.realpath(default) and not os.environ.get(
        "CLAUDE_CONFIG_DIR"
    ):
        return Path.home() / ".claude.json"
    return config_dir / ".claude.json"


# -- reading strictly ---------------------------------------------------------------------------


def read_json_object(path: Path) -> tuple[dict[str, Any], bytes | None]:
    """A JSON object file and its raw bytes (None when the file does not exist). Anything else
    is refused, so the caller never writes over a file it could not understand."""
    raw = read_input(path, "config file", missing_ok=True)
    if raw is None:
        return {}, None
    if not raw.strip():
        return {}, raw
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # also a number too long, nesting too deep
        where = (
            f" (line {exc.lineno} column {exc.colno}: {exc.msg})"
            if isinstance(exc, json.JSONDecodeError)
            else " (nested too deeply)" if isinstance(exc, RecursionError) else ""
        )
        raise SettingsError(f"{path} is not valid JSON{where}; left it untouched") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path} does not hold a JSON object; left it untouched")
    return data, raw


def read_toml(path: Path) -> tuple[tomlkit.TOMLDocument, bytes | None]:
    """A TOML file as a tomlkit document (which writes back what it read, comments and all) and
    its raw bytes (None when the file does not exist)."""
    raw = read_input(path, "config file", missing_ok=True)
    if raw is None:
        return tomlkit.document(), None
    try:
        return tomlkit.parse(raw.decode("utf-8")), raw
    except (tomlkit.exceptions.TOMLKitError, ValueError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else " ".join(
            str(exc).split()
        )[:200]
        raise SettingsError(f"{path} is not valid TOML ({detail}); left it untouched") from None


# -- merging ------------------------------------------------------------------------------------


def json_object(parent: dict[str, Any], key: str, path: Path, where: str | None = None) -> Any:
    """``parent[key]``, a JSON object, created empty when missing; refused when it is anything
    else. ``where`` names the key in the error (default: the key itself)."""
    value = parent.setdefault(key, {})
    if not isinstance(value, dict):
        raise SettingsError(f"{path}: {where or repr(key)} is not an object; left it untouched")
    return value


def toml_table(
    parent: TomlTable, key: str, path: Path, *, where: str | None = None, create: bool = True,
    super_table: bool = False,
) -> Any:
    """``parent[key]``, a TOML table, created when missing (unless ``create`` is false: None);
    refused when it is anything else. A super table holds only tables and writes no header of
    its own (``[projects."/path"]`` rather than ``[projects]`` then ``["/path"]``)."""
    value = parent.get(key)
    if value is None:
        if not create:
            return None
        value = tomlkit.table(is_super_table=super_table or None)
        parent[key] = value
    if not isinstance(value, dict):
        raise SettingsError(f"{path}: {where or repr(key)} is not a table; left it untouched")
    return value


def claude_trust(data: dict[str, Any], project: str, path: Path) -> bool:
    """Mark ``project`` trusted in a Claude Code state file's data; whether that changed it."""
    projects = json_object(data, "projects", path)
    entry = json_object(projects, project, path, f"projects[{project!r}]")
    if entry.get(CLAUDE_TRUSTED) is True:
        return False
    entry[CLAUDE_TRUSTED] = True
    return True


def codex_trust(doc: TomlTable, project: str, path: Path) -> bool:
    """Mark ``project`` trusted in a Codex ``config.toml`` document; whether that changed it."""
    projects = toml_table(doc, "projects", path, super_table=True)
    entry = toml_table(projects, project, path, where=f"projects.{project!r}")
    if entry.get(CODEX_TRUST_LEVEL) == "trusted":
        return False
    entry[CODEX_TRUST_LEVEL] = "trusted"
    return True


def is_claude_trusted(data: Mapping[str, Any], project: str) -> bool:
    projects = data.get("projects")
    entry = projects.get(project) if isinstance(projects, dict) else None
    return isinstance(entry, dict) and entry.get(CLAUDE_TRUSTED) is True


def is_codex_trusted(doc: Mapping[str, Any], project: str) -> bool:
    projects = doc.get("projects")
    entry = projects.get(project) if isinstance(projects, Mapping) else None
    return isinstance(entry, Mapping) and entry.get(CODEX_TRUST_LEVEL) == "trusted"


# -- writing atomically with a backup -----------------------------------------------------------


def dump_json(data: Mapping[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


def dump_toml(doc: TomlTable, *, trim: bool = False) -> bytes:
    """The document as it will be written. Removing the last table leaves the blank line that
    separated it behind: ``trim`` takes trailing blank lines down to one newline."""
    text = tomlkit.dumps(doc)
    if trim:
        text = text.rstrip("\n") + "\n" if text.strip() else ""
    return text.encode()


def write_file(
    path: Path, content: bytes, *, backup: bool = True, fsync: bool = True
) -> Path | None:
    """Replace ``path``'s content atomically: a temporary file in the same directory, fsynced,
    renamed over it. A symlink is written through to its target and stays a symlink. The old
    content is first copied to ``<file>.fleet-backup`` beside the real file; returns that path.
    ``backup`` and ``fsync`` are off only for the files of a worker's own config dir, which
    fleet has just created and nobody else has edited."""
    real = Path(os.path.realpath(path))
    real.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    saved: Path | None = None
    try:
        mode = real.stat().st_mode & 0o7777
        exists = True
    except FileNotFoundError:
        mode, exists = 0o600, False
    if exists and backup:
        saved = real.with_name(real.name + BACKUP_SUFFIX)
        atomic_write(saved, real.read_bytes(), mode, fsync=fsync)
    atomic_write(real, content, mode, fsync=fsync)
    return saved


def write_json(
    path: Path, data: Mapping[str, Any], *, backup: bool = True, fsync: bool = True
) -> Path | None:
    return write_file(path, dump_json(data), backup=backup, fsync=fsync)


def write_toml(
    path: Path, doc: TomlTable, *, trim: bool = False, backup: bool = True, fsync: bool = True
) -> Path | None:
    return write_file(path, dump_toml(doc, trim=trim), backup=backup, fsync=fsync)


# -- folder trust, read, merged and written ------------------------------------------------------


def trust_claude_project(
    state_file: Path, project: str, *, backup: bool = True, fsync: bool = True
) -> bool:
    """Mark ``project`` trusted in a Claude Code state file (``.claude.json``); whether it was
    written (an entry already trusted leaves the file as it was)."""
    data, _ = read_json_object(state_file)
    if not claude_trust(data, project, state_file):
        return False
    write_json(state_file, data, backup=backup, fsync=fsync)
    return True


def trust_codex_project(
    config_toml: Path, project: str, *, backup: bool = True, fsync: bool = True
) -> bool:
    """Mark ``project`` trusted in a Codex ``config.toml``; whether it was written."""
    doc, _ = read_toml(config_toml)
    if not codex_trust(doc, project, config_toml):
        return False
    write_toml(config_toml, doc, backup=backup, fsync=fsync)
    return True
