"""Whether a profile has room for more work: its quota against the settings."""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from fleet._core.routing.profiles import (
    DEFAULT_STALE_AFTER,
    QUOTA_STATE_MEANING,
    Profile,
    QuotaWindow,
    SeenLimit,
)
from fleet._core.routing.settings import Settings


def scoped_limits_model(window: QuotaWindow, model: str) -> bool:
    """Whether a scoped window (label ``Opus``, ``GPT-5-Codex``) covers ``model`` (an id such as
    ``claude-opus-4-5`` or an alias such as ``opus``). Compared without case or punctuation."""
    label = _squash(window.label)
    wanted = _squash(model)
    return bool(label) and bool(wanted) and (label in wanted or wanted in label)


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def percent(value: float) -> str:
    return f"{value:.0f}%"


@attrs.frozen(kw_only=True)
class Assessment:
    """Whether a profile may be a worker now (for a model, if given), and why not."""

    profile: str
    eligible: bool
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def why(self) -> str:
        return "; ".join(self.reasons)


def _resets(w: QuotaWindow, now: float | None) -> str:
    if now is None or w.resets_at is None:
        return ""
    if w.resets_at <= now:
        # The reading predates the reset; only a refresh can say what is left now.
        return " (its reset time has passed: `clausona list --refresh`)"
    return f" (resets in {format_duration(w.resets_at - now)})"


def limit_problem(limit: SeenLimit, now: float | None) -> str:
    """Why a limit seen in the journals holds a profile back, and until when."""
    ago = "" if now is None else f" {format_duration(max(0.0, now - limit.hit_at))} ago"
    said = f"worker {limit.worker} hit a usage limit{ago}"
    if limit.resets_at is None:
        left = "" if now is None else f" for {format_duration(max(0.0, limit.until - now))} more"
        return f"{said}; its reset time is unknown, so it counts{left}"
    if now is None:
        return f"{said}; it resets at {limit.resets_at:.0f}"
    return f"{said}; it resets in {format_duration(max(0.0, limit.resets_at - now))}"


def quota_problems(
    profile: Profile, max_usage: float, model: str | None = None, now: float | None = None
) -> list[str]:
    """What the defaults hold against this profile's quota; empty when it is fine. With
    ``now``, each window over the limit says when it resets."""
    if profile.is_api:
        return []
    problems = []
    if profile.limit is not None and profile.limit.active(now):
        problems.append(limit_problem(profile.limit, now))
    q = profile.quota
    if q is None:
        return problems or ["no quota reading (clausona did not fetch one)"]
    if q.state != "ok":
        meaning = QUOTA_STATE_MEANING.get(q.state, "its quota is not readable")
        problems.append(f"quota state {q.state}: {meaning}")
    if q.session is not None and q.session.used_percent >= max_usage:
        problems.append(
            f"5H usage {percent(q.session.used_percent)} >= maxUsage {percent(max_usage)}"
            + _resets(q.session, now)
        )
    if q.weekly is not None and q.weekly.used_percent >= max_usage:
        problems.append(
            f"7D usage {percent(q.weekly.used_percent)} >= maxUsage {percent(max_usage)}"
            + _resets(q.weekly, now)
        )
    if (
        model
        and q.scoped is not None
        and q.scoped.used_percent >= max_usage
        and scoped_limits_model(q.scoped, model)
    ):
        problems.append(
            f"{q.scoped.label} limit {percent(q.scoped.used_percent)} >= maxUsage "
            f"{percent(max_usage)} (model {model})" + _resets(q.scoped, now)
        )
    return problems


def assess(
    profile: Profile,
    *,
    settings: Settings,
    coordinator: Profile | None,
    now: float,
    model: str | None = None,
    pool: Sequence[str] | None = None,
    stale_after: float = DEFAULT_STALE_AFTER,
    pool_label: str = "not among the profiles named",
) -> Assessment:
    """May ``profile`` take a worker now? ``pool`` overrides ``settings.workers``;
    ``pool_label`` is the reason given for a profile outside it."""
    reasons: list[str] = []
    notes: list[str] = []
    if coordinator is not None and profile.name == coordinator.name:
        reasons.append("the coordinator's own profile")
    names = pool if pool is not None else settings.workers
    if names is not None and not in_pool(profile, names):
        reasons.append(pool_label if pool is not None else "not in workers")
    reasons.extend(quota_problems(profile, settings.max_usage, model, now))
    q = profile.quota
    if q is not None and not profile.is_api:
        if q.is_stale(now, stale_after):
            notes.append(f"quota reading is {format_duration(q.age(now) or 0.0)} old")
        if q.scoped is not None and q.scoped.used_percent >= settings.max_usage and not model:
            notes.append(
                f"{q.scoped.label} limit at {percent(q.scoped.used_percent)}: "
                f"not for {q.scoped.label}"
            )
    return Assessment(
        profile=profile.name, eligible=not reasons, reasons=tuple(reasons), notes=tuple(notes)
    )


def in_pool(profile: Profile, names: Sequence[str]) -> bool:
    for n in names:
        wanted = n.strip().lower()
        if wanted == profile.name.lower() or (
            ":" not in wanted and wanted == profile.short.lower()
        ):
            return True
    return False


def format_duration(seconds: float) -> str:
    """A short duration for people: 45s, 12m, 5h, 3d."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"


