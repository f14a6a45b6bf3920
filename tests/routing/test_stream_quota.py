"""Quota from the agent's own stream: the rate-limit report a worker's agent made (Claude
Code's ``rate_limit_event``) is a reading of its profile's quota, with its source and age,
until its window resets; routing uses it; a rejected report is a limit until its reset."""

from __future__ import annotations

from pathlib import Path

from fleet._core import events as ev
from fleet._core.fold import fold
from fleet._core.routing import Profile, QuotaWindow, Settings, assess
from fleet._core.seen_limits import limits_hit, stream_quota, with_stream_quota
from fleet._fold_cache import load_states
from fleet._home import journal_path
from fleet._journal import JournalReader, append
from fleet._quota import quota_source

from .helpers import sub
from .test_seen_limits import HOUR, NOW, own, registered


def report(home: Path, worker: str, status: str, utilization: float | None,
           resets_at: float, ts: float = NOW - 60, kind: str = "five_hour") -> None:
    append(home, worker, ev.RateLimited(ts=ts, status=status, utilization=utilization,
                                        resets_at=resets_at, limit_type=kind))


def profiles(home: Path, *ps: Profile, unread: frozenset[str]) -> list[Profile]:
    return with_stream_quota(ps, load_states(home, None, NOW), NOW, unread=unread)


def window(p: Profile) -> QuotaWindow:
    assert p.quota is not None
    found = p.quota.session or p.quota.weekly
    assert found is not None
    return found


def test_a_warning_report_is_the_profiles_reading(home: Path) -> None:
    registered(home, "w1", "claude:work", NOW - HOUR)
    report(home, "w1", "allowed_warning", 0.85, NOW + 2 * HOUR)
    (p,) = profiles(home, own("claude:work"), unread=frozenset({"claude:work"}))
    assert p.quota is not None and p.quota.source == "stream"
    assert window(p).used_percent == 85.0 and p.quota.session is not None
    assert p.quota.age(NOW) == 60.0
    assert quota_source(p, NOW) == "stream"
    a = assess(p, settings=Settings(), coordinator=None, now=NOW)
    assert a.eligible
    report(home, "w1", "allowed_warning", 0.95, NOW + 2 * HOUR, ts=NOW - 30)
    (p,) = profiles(home, own("claude:work"), unread=frozenset({"claude:work"}))
    a = assess(p, settings=Settings(), coordinator=None, now=NOW)
    assert not a.eligible  # over maxUsage (90)


def test_clausonas_reading_and_api_profiles_are_left_alone(home: Path) -> None:
    registered(home, "w1", "claude:work", NOW - HOUR)
    report(home, "w1", "allowed", 0.5, NOW + 2 * HOUR)
    clausona = sub("claude:work")
    (p,) = profiles(home, clausona, unread=frozenset())
    assert p is clausona


def test_a_rejected_report_is_a_limit_until_its_reset(home: Path) -> None:
    registered(home, "w1", "claude:work", NOW - HOUR)
    report(home, "w1", "rejected", None, NOW + 2 * HOUR, kind="seven_day")
    (p,) = profiles(home, own("claude:work"), unread=frozenset({"claude:work"}))
    assert p.quota is not None and p.quota.weekly is not None
    assert p.quota.state == "limited" and window(p).used_percent == 100.0
    first, lines = JournalReader(journal_path(home, "w1")).read_lines()
    [limit] = limits_hit("w1", lines, first)
    assert (limit.hit_at, limit.resets_at) == (NOW - 60, NOW + 2 * HOUR)
    assert not assess(p, settings=Settings(), coordinator=None, now=NOW).eligible


def test_a_report_whose_window_reset_or_without_numbers_says_nothing(home: Path) -> None:
    registered(home, "w1", "claude:work", NOW - 10 * HOUR)
    report(home, "w1", "allowed", 0.5, NOW - HOUR, ts=NOW - 9 * HOUR)
    state = fold("w1", [e for _, e in JournalReader(journal_path(home, "w1")).read()], now=NOW)
    assert state.rate_status == "allowed" and stream_quota(state, NOW) is None
    report(home, "w1", "allowed", None, NOW + HOUR)  # 2.1.197 gives no utilization
    state = fold("w1", [e for _, e in JournalReader(journal_path(home, "w1")).read()], now=NOW)
    assert stream_quota(state, NOW) is None
