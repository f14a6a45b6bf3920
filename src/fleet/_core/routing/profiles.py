"""Profiles (one Claude or Codex account, or one API endpoint) and their last quota reading,
as clausona or a profiles file describes them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Final, Literal

import attrs

Tool = Literal["claude", "codex"]
Kind = Literal["subscription", "api"]

TOOLS: Final = ("claude", "codex")
PROFILE_KINDS: Final = ("subscription", "api")
QUOTA_STATES: Final = ("ok", "expired", "missing", "cooldown", "error")


#: A quota reading older than this (seconds) is shown as stale. clausona caches readings for
#: five minutes, so anything much older means nobody refreshed it.
DEFAULT_STALE_AFTER: Final = 900.0

QUOTA_STATE_MEANING: Final = {
    "expired": "its sign-in lapsed, so the numbers are an old reading",
    "missing": "clausona has no usable credentials for it",
    "cooldown": "the usage API is rate-limiting this host, so the numbers are an old reading",
    "error": "the last quota fetch failed",
}


@attrs.frozen(kw_only=True)
class QuotaWindow:
    """One usage window: percent used (0-100) and when it resets (unix seconds, if known).
    ``label`` names the model a scoped window limits (``Opus``); empty for the 5H/7D windows."""

    used_percent: float
    resets_at: float | None = None
    label: str = ""


@attrs.frozen(kw_only=True)
class Quota:
    """clausona's QuotaSnapshot. Any state other than ``ok`` means the numbers, if present, are
    the last known reading. ``fetched_at`` is unix seconds (clausona writes milliseconds)."""

    state: str
    fetched_at: float | None = None
    session: QuotaWindow | None = None
    weekly: QuotaWindow | None = None
    scoped: QuotaWindow | None = None
    #: where the reading comes from: clausona, or ``stream`` (the rate-limit report a worker's
    #: agent made in its own stream, on this profile)
    source: str = "clausona"

    @property
    def used(self) -> float:
        """The fuller of the 5H and 7D windows (0 when neither was reported)."""
        return max(
            (w.used_percent for w in (self.session, self.weekly) if w is not None), default=0.0
        )

    def age(self, now: float) -> float | None:
        return None if self.fetched_at is None else max(0.0, now - self.fetched_at)

    def is_stale(self, now: float, stale_after: float = DEFAULT_STALE_AFTER) -> bool:
        age = self.age(now)
        return age is not None and age > stale_after


#: How long a limit whose reset time nobody said counts against its profile, from when it was
#: hit (seconds): five hours, the shortest usage window a subscription has, after which at
#: least that window has rolled over. Longer limits say when they reset.
UNKNOWN_RESET_HOLD: Final = 5 * 3600.0


@attrs.frozen(kw_only=True)
class SeenLimit:
    """A usage or rate limit a worker hit, as fleet's own journals recorded it: the quota
    reading of a profile clausona does not read. ``profile`` is the name the worker was
    registered (or handed over) with; ``resets_at`` is None when the agent did not say."""

    worker: str
    profile: str
    tool: str | None = None
    hit_at: float
    resets_at: float | None = None

    @property
    def until(self) -> float:
        """When it stops counting: its reset time, else :data:`UNKNOWN_RESET_HOLD` after it
        was hit."""
        return self.resets_at if self.resets_at is not None else self.hit_at + UNKNOWN_RESET_HOLD

    def active(self, now: float | None) -> bool:
        """Whether the profile is still limited at ``now`` (without a time: yes, to be safe)."""
        return now is None or now < self.until


@attrs.frozen(kw_only=True)
class Profile:
    """One clausona profile, as ``clausona list --json`` reports it.

    ``is_active`` is the profile ``clausona use`` selected for its tool; it says nothing about
    which profile the coordinator runs on (see :func:`coordinator_of`)."""

    name: str
    tool: str
    kind: str = "subscription"
    model: str | None = None
    config_dir: Path
    label: str = ""
    email: str = ""
    is_active: bool = False
    is_primary: bool = False
    quota: Quota | None = None
    #: the last limit a worker on it hit, from fleet's journals; set only where clausona has
    #: no reading (its reading is the better source)
    limit: SeenLimit | None = None

    @property
    def short(self) -> str:
        return self.name.split(":", 1)[-1]

    @property
    def is_api(self) -> bool:
        return self.kind == "api"

    @property
    def headroom(self) -> float | None:
        """Percent left in the fuller of the 5H/7D windows; None for API profiles (no quota)
        and for subscriptions without a reading."""
        if self.is_api or self.quota is None:
            return None
        return max(0.0, 100.0 - self.quota.used)


def names_profile(name: str, profile: Profile, tool: str | None = None) -> bool:
    """Whether ``name`` (as a worker was registered with: ``tool:name`` or a bare name, any
    case) is ``profile``; a bare name counts only for a profile of the worker's ``tool``, when
    that is known."""
    wanted = name.strip().lower()
    if wanted == profile.name.lower():
        return True
    return (":" not in wanted and wanted == profile.short.lower()
            and (tool is None or tool == profile.tool))


def parse_time(value: object) -> float | None:
    """An ISO 8601 timestamp (``2026-09-20T14:00:00.000Z``) or epoch number as unix seconds."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a time: {value!r}")
    if isinstance(value, int | float):
        # clausona's fetchedAt is milliseconds; anything this large cannot be seconds.
        return float(value) / 1000.0 if value > 1e11 else float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise ValueError(f"not an ISO 8601 time: {value!r}") from None
    raise ValueError(f"not a time: {value!r}")


def _window(data: object, where: str, *, scoped: bool = False) -> QuotaWindow | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} is not an object")
    used = data.get("usedPercent")
    if isinstance(used, bool) or not isinstance(used, int | float):
        raise ValueError(f"{where}.usedPercent is not a number")
    label = data.get("label", "")
    if scoped and not isinstance(label, str):
        raise ValueError(f"{where}.label is not a string")
    return QuotaWindow(
        used_percent=min(100.0, max(0.0, float(used))),
        resets_at=parse_time(data.get("resetsAt")),
        label=label if scoped and isinstance(label, str) else "",
    )


def profile_from_json(data: object, index: int = 0) -> Profile:
    """One ``ProfileListItem`` of ``clausona list --json``. Raises ValueError naming the field.

    A missing ``kind`` is a subscription (older registries have none); a bare name gets its
    tool as prefix so names are always ``tool:name``."""
    where = f"profile {index}"
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} is not an object")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where} has no name")
    where = f"profile {name!r}"
    tool = data.get("tool")
    if tool not in TOOLS:
        raise ValueError(f"{where}: tool {tool!r} is not claude or codex")
    assert isinstance(tool, str)
    if ":" not in name:
        name = f"{tool}:{name}"
    kind = data.get("kind") or "subscription"
    if kind not in PROFILE_KINDS:
        raise ValueError(f"{where}: kind {kind!r} is not subscription or api")
    config_dir = data.get("configDir")
    if not isinstance(config_dir, str) or not config_dir:
        raise ValueError(f"{where} has no configDir")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError(f"{where}: model is not a string")
    quota = None
    raw_quota = data.get("quota")
    if raw_quota is not None:
        if not isinstance(raw_quota, Mapping):
            raise ValueError(f"{where}: quota is not an object")
        state = raw_quota.get("state")
        if not isinstance(state, str) or not state:
            raise ValueError(f"{where}: quota.state is missing")
        quota = Quota(
            # An unknown future state is kept as it is: anything but "ok" is skipped anyway.
            state=state,
            fetched_at=parse_time(raw_quota.get("fetchedAt")),
            session=_window(raw_quota.get("session"), f"{where}: quota.session"),
            weekly=_window(raw_quota.get("weekly"), f"{where}: quota.weekly"),
            scoped=_window(raw_quota.get("scoped"), f"{where}: quota.scoped", scoped=True),
        )
    label = data.get("label")
    email = data.get("email")
    return Profile(
        name=name,
        tool=tool,
        kind=kind,
        model=model or None,
        config_dir=Path(config_dir),
        label=label if isinstance(label, str) else "",
        email=email if isinstance(email, str) else "",
        is_active=data.get("isActive") is True,
        is_primary=data.get("isPrimary") is True,
        quota=quota,
    )


def profiles_from_json(data: object) -> list[Profile]:
    """The whole ``clausona list --json`` output: a top-level array of profiles."""
    if not isinstance(data, list):
        raise ValueError("expected a JSON array of profiles")
    profiles = [profile_from_json(item, i) for i, item in enumerate(data)]
    seen: set[str] = set()
    for p in profiles:
        if p.name.lower() in seen:
            raise ValueError(f"profile {p.name!r} is listed twice")
        seen.add(p.name.lower())
    return profiles


def resolve(name: str, profiles: Iterable[Profile]) -> Profile | str:
    """The profile called ``name`` (``tool:name``, or a bare name unique across tools; case
    does not matter, as in clausona), or a one-line reason why there is none."""
    wanted = name.strip().lower()
    pool = list(profiles)
    for p in pool:
        if p.name.lower() == wanted:
            return p
    if ":" not in wanted:
        matches = [p for p in pool if p.short.lower() == wanted]
        if len(matches) == 1:
            return matches[0]
        if matches:
            return f"profile {name!r} is ambiguous: say {' or '.join(p.name for p in matches)}"
    return f"no profile {name!r} in clausona's list"


