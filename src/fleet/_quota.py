"""Where each profile's quota comes from, when clausona cannot say: fleet's own journals.

The sources, best first:

1. ``clausona`` -- clausona's reading (``clausona list --json``), for the profiles it reads;
2. ``stream`` -- the last rate-limit report (Claude Code's ``rate_limit_event``: utilization
   and reset of a window) a worker's agent on the profile made in its own stream, until the
   window resets;
3. ``journal`` -- the last usage limit a worker on the profile hit, as its journal recorded it,
   until its reset time (or, when the agent did not say one,
   :data:`fleet._core.routing.UNKNOWN_RESET_HOLD` after it was hit);
4. ``unknown`` -- none of them: said plainly, and routing treats the profile as having room.

API profiles have no plan quota (``none``). Reading the journals is this module's part; what a
limit is, and what it holds against a profile, stay in the pure core
(:mod:`fleet._core.seen_limits`, :mod:`fleet._core.routing`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any, Final, Literal

from fleet._core.fold import WorkerState
from fleet._core.routing import Profile, SeenLimit
from fleet._core.seen_limits import (
    limits_hit,
    may_have_hit_a_limit,
    with_limits,
    with_stream_quota,
)
from fleet._home import journal_path, resolve_home
from fleet._journal import JournalReader

QuotaSource = Literal["clausona", "stream", "journal", "unknown", "none"]

SOURCES_HELP: Final = (
    "quota comes from clausona's reading where clausona has one; else from the last "
    "rate-limit report a worker's agent on the profile made in its own stream, until its "
    "window resets; else from the last usage limit a worker on the profile hit (fleet's "
    "journals), until its reset time; else it is unknown"
)


def seen_limits(home: str | os.PathLike[str] | None = None) -> list[SeenLimit]:
    """Every usage limit a worker in fleet's home hit, in no particular order. Only journals
    whose folded state shows a trace of a limit are read again; a home that cannot be read
    gives none (the quota is then unknown, which is what it is)."""
    from fleet._fold_cache import load_states

    root = resolve_home(home)
    try:
        states = load_states(root, None, time.time())
        out: list[SeenLimit] = []
        for state in states:
            if not may_have_hit_a_limit(state):
                continue
            first, lines = JournalReader(journal_path(root, state.worker)).read_lines()
            out.extend(limits_hit(state.worker, lines, first))
    except OSError:
        return []
    return out


def with_seen_limits(
    profiles: Sequence[Profile], home: str | os.PathLike[str] | None = None
) -> list[Profile]:
    """``profiles`` with the last limit seen on each that clausona does not read, and the
    last rate-limit report a worker's agent made on it in its stream."""
    from fleet._profile_store import quota_unknown

    if not any(not p.is_api and (p.quota is None or quota_unknown(p)) for p in profiles):
        return list(profiles)  # every profile has a better source: no journal is read
    unread = frozenset(p.name for p in profiles if quota_unknown(p))
    limited = with_limits(profiles, seen_limits(home), unread=unread)
    return with_stream_quota(limited, _states(home), time.time(), unread=unread)


def _states(home: str | os.PathLike[str] | None) -> list[WorkerState]:
    from fleet._fold_cache import load_states

    try:
        return load_states(resolve_home(home), None, time.time())
    except OSError:
        return []


def quota_source(profile: Profile, now: float) -> QuotaSource:
    """Which source :data:`SOURCES_HELP` this profile's quota comes from at ``now``."""
    from fleet._profile_store import quota_unknown

    if profile.is_api:
        return "none"
    if profile.quota is not None and profile.quota.source == "stream":
        return "stream"
    if profile.quota is not None and not quota_unknown(profile):
        return "clausona"
    if profile.limit is not None and profile.limit.active(now):
        return "journal"
    return "unknown"


def limit_json(limit: SeenLimit | None, now: float) -> dict[str, Any] | None:
    """The last limit seen on a profile, for ``--json``."""
    if limit is None:
        return None
    return {
        "worker": limit.worker,
        "hitAt": limit.hit_at,
        "resetsAt": limit.resets_at,
        "resetKnown": limit.resets_at is not None,
        "until": limit.until,
        "active": limit.active(now),
    }
