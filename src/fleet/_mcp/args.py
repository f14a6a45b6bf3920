"""A tool call's arguments, checked as they are read: worker ids and marks by fleet's own
parsers, every other value by its type, and an argument the tool's schema does not name is
refused. What a value becomes on the ``fleet`` command line is here too (``--name=value``, one
word, never read as an option).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fleet._core.ids import parse_mark, validate_worker_id
from fleet._errors import SettingsError
from fleet._mcp.specs import ToolSpec


class Args:
    """A tool call's arguments, checked as they are read; unknown ones are refused."""

    def __init__(self, spec: ToolSpec, raw: Mapping[str, Any] | None) -> None:
        self.raw = dict(raw or {})
        unknown = sorted(set(self.raw) - set(spec.properties))
        if unknown:
            raise SettingsError(
                f"{spec.name}: unknown argument {', '.join(unknown)} (known: "
                f"{', '.join(spec.properties) or 'none'})"
            )
        for name in spec.required:
            if self.raw.get(name) in (None, "", []):
                raise SettingsError(f"{spec.name}: {name} is required")

    def text(self, name: str) -> str | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise SettingsError(f"{name} must be a string")
        if "\0" in value:
            raise SettingsError(f"{name} must not contain NUL")
        return value if value.strip() else None

    def one_line(self, name: str) -> str | None:
        value = self.text(name)
        if value is not None and ("\n" in value or "\r" in value):
            raise SettingsError(f"{name} must be one line")
        return value

    def texts(self, name: str) -> list[str]:
        value = self.raw.get(name)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SettingsError(f"{name} must be a list of strings")
        if any("\0" in v for v in value):
            raise SettingsError(f"{name} must not contain NUL")
        return list(value)

    def number(self, name: str) -> float | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SettingsError(f"{name} must be a number")
        if not 0 <= value < float("inf"):
            raise SettingsError(f"{name} must be 0 or more, not {value!r}")
        return float(value)

    def integer(self, name: str, minimum: int = 0) -> int | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"{name} must be a whole number")
        if value < minimum:
            raise SettingsError(f"{name} must be {minimum} or more, not {value}")
        return value

    def flag(self, name: str) -> bool:
        value = self.raw.get(name, False)
        if not isinstance(value, bool):
            raise SettingsError(f"{name} must be true or false")
        return value

    def choice(self, name: str, choices: Sequence[str]) -> str | None:
        value = self.one_line(name)
        if value is not None and value not in choices:
            raise SettingsError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
        return value

    def worker(self, name: str = "worker") -> str:
        value = self.one_line(name)
        if value is None:
            raise SettingsError(f"{name} is required")
        return validate_worker_id(value)

    def workers(self, name: str = "workers") -> list[str]:
        return [validate_worker_id(w) for w in self.texts(name)]

    def marks(self, name: str) -> list[str]:
        return [str(parse_mark(m)) for m in self.texts(name)]


def _opt(name: str, value: str | float | int | None) -> list[str]:
    """``--name=value`` (one word, never read as an option), or nothing."""
    if value is None:
        return []
    if isinstance(value, float):
        value = f"{value:g}"
    return [f"--{name}={value}"]


def _num(value: float) -> str:
    return f"{value:g}"
