"""The settings that routing and retiring read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from fleet._errors import SettingsError

DEFAULT_MAX_USAGE: Final = 90.0
RETIRE_MODES: Final = ("ask", "auto")
#: Where `fleet start` and `fleet run` start workers when no --adapter is given.
ADAPTER_NAMES: Final = ("headless", "superset", "herdr")


@attrs.frozen(kw_only=True)
class Settings:
    """The keys of ``~/.clausona/fleet.json`` that routing and retiring read.

    ``workers`` None means the key is absent (every profile may be a worker); an empty tuple
    means nobody may."""

    workers: tuple[str, ...] | None = None
    routing: tuple[str, ...] = ()
    max_usage: float = DEFAULT_MAX_USAGE
    retire: str = "ask"
    #: where workers start when the command line names no adapter
    adapter: str = "headless"
    permissions: Mapping[str, str] = attrs.field(factory=dict)
    #: The whole ``permissions`` object, lists and per-profile / per-kind tables included
    #: (``fleet._permissions.policy_from_settings`` reads it); ``permissions`` keeps its texts.
    permission_rules: Mapping[str, Any] = attrs.field(factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Settings:
        """Read the known keys, refusing values of the wrong shape; unknown keys are ignored
        here (and kept in the file)."""
        errors: list[str] = []
        workers: tuple[str, ...] | None = None
        if data.get("workers") is not None:
            raw = data["workers"]
            if isinstance(raw, str):
                raw = [w for w in re.split(r"[,\s]+", raw) if w]
            if not isinstance(raw, list) or not all(isinstance(w, str) for w in raw):
                errors.append("workers must be a list of profile names")
            else:
                workers = tuple(raw)
        routing: tuple[str, ...] = ()
        raw_routing = data.get("routing")
        if isinstance(raw_routing, str):
            routing = (raw_routing,) if raw_routing.strip() else ()
        elif isinstance(raw_routing, list) and all(isinstance(r, str) for r in raw_routing):
            routing = tuple(raw_routing)
        elif raw_routing is not None:
            errors.append("routing must be text or a list of texts")
        max_usage = DEFAULT_MAX_USAGE
        raw_max = data.get("maxUsage")
        if raw_max is not None:
            if (
                isinstance(raw_max, bool)
                or not isinstance(raw_max, int | float)
                or not 0 < raw_max <= 100
            ):
                errors.append("maxUsage must be a number above 0 and at most 100")
            else:
                max_usage = float(raw_max)
        retire = data.get("retire") or "ask"
        if retire not in RETIRE_MODES:
            errors.append("retire must be ask or auto")
            retire = "ask"
        adapter = data.get("adapter") or "headless"
        if adapter not in ADAPTER_NAMES:
            errors.append(f"adapter must be one of {', '.join(ADAPTER_NAMES)}")
            adapter = "headless"
        permissions: dict[str, str] = {}
        rules: dict[str, Any] = {}
        raw_perm = data.get("permissions")
        if raw_perm is not None:
            problem = _permissions_problem(raw_perm)
            if problem:
                errors.append(problem)
            else:
                rules = dict(raw_perm)
                permissions = {k: v for k, v in rules.items() if isinstance(v, str)}
        if errors:
            raise SettingsError("; ".join(errors))
        return cls(
            workers=workers,
            routing=routing,
            max_usage=max_usage,
            retire=str(retire),
            adapter=str(adapter),
            permissions=permissions,
            permission_rules=rules,
        )


#: Keys of ``permissions`` that hold tool rules or directories rather than one text.
PERMISSION_LISTS: Final = ("allowedTools", "disallowedTools", "addDirs")
#: Keys of ``permissions`` that hold a table per profile or per kind of task.
PERMISSION_TABLES: Final = ("profiles", "kinds")


def _is_texts(value: object) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(v, str) for v in value))


def _layer_problem(raw: object, where: str) -> str | None:
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
        return f"{where} must be an object"
    for key, value in raw.items():
        if key in PERMISSION_LISTS:
            if not _is_texts(value):
                return f"{where}.{key} must be text or a list of texts"
        elif not isinstance(value, str):
            return f"{where}.{key} must be text"
    return None


def _permissions_problem(raw: object) -> str | None:
    if not isinstance(raw, Mapping):
        return "permissions must be an object"
    top = {k: v for k, v in raw.items() if k not in PERMISSION_TABLES}
    problem = _layer_problem(top, "permissions")
    if problem:
        return problem
    for section in PERMISSION_TABLES:
        table = raw.get(section)
        if table is None:
            continue
        if not isinstance(table, Mapping):
            return f"permissions.{section} must be an object of objects"
        for name, layer in table.items():
            problem = _layer_problem(layer, f"permissions.{section}.{name}")
            if problem:
                return problem
    return None


