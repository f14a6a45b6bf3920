"""The usage limits workers hit, read back out of their journals: the quota fleet knows for a
profile clausona does not read.

Each limit is found by the fold itself (:func:`fleet._core.fold.feed_lines`), one line at a
time: a limit is the moment the worker enters ``blocked`` for the reason ``limit``, so fleet
calls a limit exactly what ``fleet status`` calls one. The profile is the one the worker was on
at that moment (a worker handed over after a limit moves to another profile; the limit stays
with the first). Pure: lines in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from fleet._core.accumulator import Accumulator
from fleet._core.fold import WorkerState, feed_lines
from fleet._core.limits import is_limit_error
from fleet._core.routing.profiles import (
    Profile,
    Quota,
    QuotaWindow,
    SeenLimit,
    names_profile,
)


def limits_hit(worker: str, lines: Iterable[bytes], first_seq: int = 0) -> list[SeenLimit]:
    """Every limit ``worker`` hit in these journal lines (the first being line ``first_seq``),
    in journal order."""
    acc = Accumulator()
    found: list[SeenLimit] = []
    entered = -1
    seq = first_seq
    for line in lines:
        feed_lines(acc, (line,), seq, worker)
        seq += 1
        if acc.state != "blocked" or acc.reason != "limit" or acc.profile is None:
            continue
        # The fold keeps the last reset time it read; one from before this limit was hit
        # belongs to an earlier limit.
        reset = acc.limit_reset if acc.limit_reset is not None and acc.limit_reset > acc.since \
            else None
        limit = SeenLimit(worker=worker, profile=acc.profile, tool=acc.tool, hit_at=acc.since,
                          resets_at=reset)
        if acc.seq != entered:
            found.append(limit)
            entered = acc.seq
        elif found[-1] != limit:
            # The same limit, told more (a headless result after the hook): keep the fuller.
            found[-1] = attrs.evolve(limit, resets_at=reset if reset is not None
                                     else found[-1].resets_at)
    return found


def may_have_hit_a_limit(state: WorkerState) -> bool:
    """Whether a worker's folded state shows any trace of a limit, so that its journal is worth
    reading again for :func:`limits_hit` (most journals never hit one)."""
    if state.limit_reset is not None or (state.state == "blocked" and state.reason == "limit"):
        return True
    if state.error is not None and is_limit_error(state.error):
        return True
    ex = state.exit
    return ex is not None and (ex.reason == "limit" or ex.api_error_status == 429)


def last_limit(profile: Profile, limits: Iterable[SeenLimit]) -> SeenLimit | None:
    """The limit on ``profile`` hit last, or None."""
    mine = [lim for lim in limits if names_profile(lim.profile, profile, lim.tool)]
    return max(mine, key=lambda lim: (lim.hit_at, lim.until), default=None)


def with_limits(
    profiles: Sequence[Profile], limits: Iterable[SeenLimit], *, unread: frozenset[str]
) -> list[Profile]:
    """``profiles`` with the last limit seen on each that has no clausona reading: those named
    in ``unread`` (fleet's own), and clausona's without a reading. API profiles are left as
    they are (an endpoint's rate limit is not a plan's quota)."""
    pool = list(limits)
    out = []
    for p in profiles:
        if p.is_api or (p.quota is not None and p.name not in unread):
            out.append(p)
            continue
        out.append(attrs.evolve(p, limit=last_limit(p, pool)))
    return out


#: Claude Code's rate-limit kinds, by the window of clausona's reading they are.
_WINDOWS: Final = {
    "five_hour": ("session", ""),
    "seven_day": ("weekly", ""),
    "seven_day_opus": ("scoped", "Opus"),
    "seven_day_sonnet": ("scoped", "Sonnet"),
}


def stream_quota(state: WorkerState, now: float) -> Quota | None:
    """The quota a worker's agent last reported in its stream, as a reading of its profile:
    None when it reported none, or nothing with a number (a rejected report is 100 %), or
    when its window has reset since."""
    if state.rate_at is None or state.rate_status is None:
        return None
    if state.rate_resets_at is not None and state.rate_resets_at <= now:
        return None
    rejected = state.rate_status == "rejected"
    if state.rate_utilization is None and not rejected:
        return None
    used = 100.0 if rejected else max(0.0, min(100.0, (state.rate_utilization or 0.0) * 100))
    slot, label = _WINDOWS.get(state.rate_type or "", ("session", ""))
    window = QuotaWindow(used_percent=used, resets_at=state.rate_resets_at, label=label)
    return Quota(state="limited" if rejected else "ok", fetched_at=state.rate_at,
                 source="stream", **{slot: window})


def with_stream_quota(
    profiles: Sequence[Profile], states: Iterable[WorkerState], now: float, *,
    unread: frozenset[str],
) -> list[Profile]:
    """``profiles`` whose quota nobody reads (fleet's own, named in ``unread``, and clausona's
    without a reading) with the last rate-limit report a worker on it made in its stream.
    clausona's reading, where there is one, stays first; API profiles have no plan quota."""
    readings = [(s, q) for s in states if s.profile and (q := stream_quota(s, now)) is not None]
    out = []
    for p in profiles:
        if p.is_api or (p.quota is not None and p.name not in unread):
            out.append(p)
            continue
        mine = [(q.fetched_at or 0.0, q) for s, q in readings
                if names_profile(s.profile or "", p, s.tool)]
        out.append(attrs.evolve(p, quota=max(mine, key=lambda m: m[0])[1]) if mine else p)
    return out
