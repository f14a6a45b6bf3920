"""Reading usage and rate limits out of what the agents say: when a limit resets.

Pure functions of a message and the time it was observed (``now``). Used by the fold, on a
StopFailure hook's message, and by the headless supervisor, on a run's result: both are the
agent's own words, so both sources give the same reset time.
"""

from __future__ import annotations

import contextlib
import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_IN_RE: Final = re.compile(
    r"(?:try again|retry|resets?|available again)\s+(?:in|after)\s+((?:\d+(?:\.\d+)?\s*"
    r"(?:seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)\b[\s,and]*)+)",
    re.IGNORECASE,
)
_PART_RE: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])", re.IGNORECASE)
#: Claude Code's older limit message: ``Claude AI usage limit reached|1767225600``.
_EPOCH_RE: Final = re.compile(r"\|\s*(\d{10})(?:\d{3})?\b")
_ISO_RE: Final = re.compile(
    r"(?:reset|again)[^0-9]{0,20}(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
    r"(?:Z|[+-]\d{2}:?\d{2})?)",
    re.IGNORECASE,
)
#: Claude Code 2.1.x: ``You've hit your 5-hour limit · resets 10:58am (UTC)``, also with a
#: date (``resets Dec 3, 5pm (Europe/Berlin)``) for weekly limits.
_CLOCK_RE: Final = re.compile(
    r"\bresets?\s+(?:at\s+)?"
    r"(?:(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+"
    r"(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?:at\s+)?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>am|pm)?"
    r"(?:\s*\((?P<zone>[^)]{1,64})\))?",
    re.IGNORECASE,
)
_MONTHS: Final = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                  "dec")
_OFFSET_RE: Final = re.compile(r"^(?:utc|gmt)?\s*([+-])(\d{1,2})(?::?(\d{2}))?$", re.IGNORECASE)

#: A clock time this far in the past is the current minute, not tomorrow.
_MINUTE_SLACK: Final = 120.0

#: The words that make an error a usage or rate limit rather than an API failure.
LIMIT_WORDS: Final = ("rate_limit", "usage_limit", "limit", "quota", "billing")


def is_limit_error(error: str) -> bool:
    """Whether a StopFailure ``error`` kind names a usage or rate limit."""
    lowered = error.lower()
    return any(word in lowered for word in LIMIT_WORDS)


def find_reset(text: str, now: float) -> float | None:
    """When a usage or rate limit resets (unix seconds), from the ways agents say it:
    ``...|1767225600``, an ISO time after "reset", "try again in 2h 5m", or a clock time
    ("resets 10:58am (UTC)", the next such time after ``now``). None when the text does not
    say."""
    m = _EPOCH_RE.search(text)
    if m:
        return float(m.group(1))
    m = _ISO_RE.search(text)
    if m:
        raw = m.group(1).replace(" ", "T").replace("Z", "+00:00")
        with contextlib.suppress(ValueError):
            stamp = datetime.fromisoformat(raw)
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            return stamp.timestamp()
    m = _IN_RE.search(text)
    if m:
        seconds = sum(
            float(n) * _UNITS[u.lower()] for n, u in _PART_RE.findall(m.group(1))
        )
        if seconds > 0:
            return now + seconds
    m = _CLOCK_RE.search(text)
    if m and (m["minute"] or m["ampm"] or m["zone"]):
        return _next_clock_time(m, now)
    return None


def _zone(name: str | None) -> tzinfo:
    """The time zone a message names: UTC, a fixed offset, or an IANA name (looked up in the
    system's time zone database); UTC when it names none or one that is unknown."""
    if not name:
        return UTC
    name = name.strip()
    if name.upper() in ("UTC", "GMT", "Z"):
        return UTC
    m = _OFFSET_RE.match(name)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        minutes = int(m.group(2)) * 60 + int(m.group(3) or 0)
        if minutes < 24 * 60:
            return timezone(sign * timedelta(minutes=minutes))
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return UTC


def _next_clock_time(m: re.Match[str], now: float) -> float | None:
    hour = int(m["hour"])
    minute = int(m["minute"] or 0)
    ampm = (m["ampm"] or "").lower()
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    zone = _zone(m["zone"])
    here = datetime.fromtimestamp(now, zone)
    if m["month"]:
        month = _MONTHS.index(m["month"][:3].lower()) + 1
        for year in (here.year, here.year + 1):
            with contextlib.suppress(ValueError):
                stamp = datetime(year, month, int(m["day"]), hour, minute, tzinfo=zone)
                if stamp.timestamp() > now - 86400:
                    return stamp.timestamp()
        return None
    stamp = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if now - _MINUTE_SLACK < stamp.timestamp() <= now:
        # Said to the minute and read within it: the limit resets by the end of that minute.
        return stamp.timestamp() + 60
    if stamp.timestamp() <= now:
        stamp += timedelta(days=1)
    return stamp.timestamp()
