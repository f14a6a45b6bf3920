"""The settings that routing and retiring read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from fleet._errors import SettingsError

DEFAULT_MAX_USAGE: Final = 90.0
RETIRE_MODES: Final = ("ask", "auto")


@attrs.frozen(kw_only=True)
class Settings:
    """The keys of ``~/.clausona/fleet.json`` that routing and retiring read.

    ``workers`` None means the key is absent (every profile may be a worker); an empty tuple
    means nobody may."""

    workers: tuple[str, ...] | None = None
    routing: tuple[str, ...] = ()
    max_usage: float = DEFAULT_MAX_USAGE
    retire: str = "ask"
    permissions: Mapping[str, str] = attrs.field(factory=dict)

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
        permissions: dict[str, str] = {}
        raw_perm = data.get("permissions")
        if raw_perm is not None:
            if not isinstance(raw_perm, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in raw_perm.items()
            ):
                errors.append("permissions must be an object of texts")
            else:
                permissions = dict(raw_perm)
        if errors:
            raise SettingsError("; ".join(errors))
        return cls(
            workers=workers,
            routing=routing,
            max_usage=max_usage,
            retire=str(retire),
            permissions=permissions,
        )


