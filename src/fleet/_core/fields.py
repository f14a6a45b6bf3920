"""Typed reads of values that came from outside: a journal line's fields, an agent's output.

Every field the fold, the classifier or the result parser reads from raw JSON is read through
one of these, so a value of another type than expected (an object where a string was, a
boolean where a count was, a number no clock can hold) reads as absent instead of reaching code
that assumes its type. None of them raises, whatever ``data`` holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

#: Whole numbers a field may carry: what a 64-bit field holds.
INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**64 - 1
#: Timestamps fleet can show: from the epoch to well before year 9999 (where datetime stops).
TS_MIN: Final = 0.0
TS_MAX: Final = 1e11
#: Process ids a kernel hands out (Linux's pid_max is at most 2**22; any pid fits in 31 bits).
PID_MAX: Final = 2**31 - 1
#: Counts of things (background tasks, say).
COUNT_MAX: Final = 2**31 - 1


def is_str(value: object) -> bool:
    return type(value) is str


def is_int(value: object, low: int = INT_MIN, high: int = INT_MAX) -> bool:
    # bool is an int subclass: ``true`` is not a count.
    return type(value) is int and low <= value <= high


def is_pid(value: object) -> bool:
    return is_int(value, 1, PID_MAX)


def is_count(value: object) -> bool:
    return is_int(value, 0, COUNT_MAX)


def is_ts(value: object) -> bool:
    """A finite number of seconds since the epoch that a clock can show."""
    return type(value) in (int, float) and TS_MIN <= value <= TS_MAX  # type: ignore[operator]


def is_number(value: object) -> bool:
    return (type(value) is int and INT_MIN <= value <= INT_MAX) or (
        type(value) is float and math.isfinite(value)
    )


def str_field(data: Mapping[str, Any], key: str) -> str | None:
    """``data[key]`` when it is a string, else None."""
    value = data.get(key)
    return value if type(value) is str else None


def int_field(
    data: Mapping[str, Any], key: str, low: int = INT_MIN, high: int = INT_MAX
) -> int | None:
    """``data[key]`` when it is a whole number (not a boolean) in ``[low, high]``, else None."""
    value = data.get(key)
    return value if type(value) is int and low <= value <= high else None


def bool_field(data: Mapping[str, Any], key: str) -> bool | None:
    value = data.get(key)
    return value if type(value) is bool else None


def number_field(data: Mapping[str, Any], key: str) -> float | None:
    """``data[key]`` when it is a finite number (not a boolean), as a float, else None."""
    value: Any = data.get(key)
    return float(value) if is_number(value) else None


def ts_field(data: Mapping[str, Any], key: str) -> float | None:
    """``data[key]`` when it is a time fleet can show (:func:`is_ts`), as a float, else None."""
    value: Any = data.get(key)
    return float(value) if is_ts(value) else None


def dict_field(data: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = data.get(key)
    return value if type(value) is dict else None


def list_field(data: Mapping[str, Any], key: str) -> list[Any] | None:
    value = data.get(key)
    return value if type(value) is list else None
