"""The entries of the ``profiles`` key of fleet's settings, checked (see
:mod:`fleet._profile_store`). Pure: the settings module checks a value with these before it
writes anything."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from fleet._core.routing import TOOLS
from fleet._errors import SettingsError

SETTINGS_KEY: Final = "profiles"
ENTRY_KEYS: Final = ("configDir", "model", "endpoint", "keyFrom")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def full_name(name: str, tool: str | None = None) -> str:
    """``tool:name`` from ``name`` or ``tool:name``; SettingsError for anything else."""
    text = name.strip()
    prefix, sep, short = text.partition(":")
    if sep:
        if prefix not in TOOLS:
            raise SettingsError(f"profile {name!r}: the part before ':' must be claude or codex")
        if tool is not None and tool != prefix:
            raise SettingsError(f"profile {name!r} is a {prefix} profile, not a {tool} one")
        tool = prefix
    else:
        short = text
    if not _NAME.fullmatch(short):
        raise SettingsError(
            f"profile name {short!r}: use letters, digits, '.', '_' or '-' (up to 64, "
            "starting with a letter or digit), optionally after claude: or codex:"
        )
    return f"{tool or 'claude'}:{short}"


def check_entry(name: str, entry: Any) -> dict[str, str]:
    """One profile's settings, checked: SettingsError names what is wrong."""
    where = f"profiles.{name}"
    tool = full_name(name).split(":", 1)[0]
    if not isinstance(entry, Mapping):
        raise SettingsError(f"{where} must be an object with configDir (and model, endpoint, "
                            "keyFrom)")
    unknown = [k for k in entry if k not in ENTRY_KEYS]
    if unknown:
        raise SettingsError(
            f"{where}: unknown key {unknown[0]!r}: known ones are {', '.join(ENTRY_KEYS)}"
        )
    for key, value in entry.items():
        if not isinstance(value, str) or not value.strip():
            raise SettingsError(f"{where}.{key} must be text")
    if "configDir" not in entry:
        raise SettingsError(f"{where} has no configDir")
    if ("endpoint" in entry) != ("keyFrom" in entry):
        raise SettingsError(f"{where}: an endpoint needs keyFrom, and keyFrom an endpoint")
    if "endpoint" in entry:
        if tool != "claude":
            raise SettingsError(f"{where}: an endpoint is for Claude Code profiles only")
        if not re.match(r"https?://[^\s/]+", entry["endpoint"]):
            raise SettingsError(f"{where}.endpoint must be an http(s) URL")
        from fleet._keys import parse_key_source

        parse_key_source(entry["keyFrom"])
    return dict(entry)


def check_profiles_value(subkeys: Sequence[str], value: Any) -> Any:
    """``value`` for ``profiles`` or ``profiles.NAME`` in ``fleet settings set``."""
    if not subkeys:
        if not isinstance(value, Mapping):
            raise SettingsError("profiles must be an object: {\"claude:work\": {\"configDir\": "
                                "DIR}, ...}")
        return {name: check_entry(name, entry) for name, entry in value.items()}
    if len(subkeys) > 1:
        raise SettingsError(
            "set a whole profile (profiles.NAME), or use `fleet profiles add NAME --config-dir "
            "DIR ...`"
        )
    if full_name(subkeys[0]) != subkeys[0]:
        raise SettingsError(f"profiles.{subkeys[0]}: name it {full_name(subkeys[0])}")
    return check_entry(subkeys[0], value)
