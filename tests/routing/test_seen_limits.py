"""Quota without clausona: the last usage limit a worker on a profile hit, read from fleet's
journals, until it resets; clausona's reading wins where there is one; else "unknown", said
plainly. Routing skips a profile whose journaled limit has not reset."""

from __future__ import annotations

import json
import types
from pathlib import Path

import attrs
import pytest

from fleet import _profile_store
from fleet._cli import main
from fleet._cli import plan as plan_cli
from fleet._core import events as ev
from fleet._core.events import encode_line
from fleet._core.routing import (
    UNKNOWN_RESET_HOLD,
    Profile,
    SeenLimit,
    Settings,
    Task,
    assess,
    plan,
)
from fleet._core.seen_limits import limits_hit, with_limits
from fleet._journal import append
from fleet._plan import plan_tasks
from fleet._profiles import load_profiles
from fleet._quota import quota_source, seen_limits
from fleet.testing import MockClock

from .helpers import item, sub

NOW = 1_800_000_000.0
HOUR = 3600.0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> MockClock:
    """The time `fleet profiles` reads, moved only by the test."""
    c = MockClock(now=NOW)
    monkeypatch.setattr(plan_cli, "time", types.SimpleNamespace(time=c.now))
    return c


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No clausona, no settings file, no coordinator guessed from the environment."""
    monkeypatch.setenv("FLEET_SETTINGS", str(tmp_path / ".clausona" / "fleet.json"))
    monkeypatch.setenv("FLEET_CLAUSONA", str(tmp_path / "no-clausona"))
    monkeypatch.delenv("FLEET_PROFILES", raising=False)
    monkeypatch.delenv("CLAUDECODE", raising=False)
    return tmp_path


def registered(home: Path, worker: str, profile: str, ts: float) -> None:
    append(home, worker, ev.Registered(ts=ts, tool="claude", profile=profile, worktree="/w"))
    append(home, worker, ev.HookEvent(ts=ts + 1, src="claude", hook="UserPromptSubmit", data={}))


def headless_limit(home: Path, worker: str, ts: float, reset_at: float | None) -> None:
    """A headless run that ended on a usage limit, as the supervisor journals it."""
    append(home, worker, ev.Exited(
        ts=ts, exit_code=1, is_error=True, api_error_status=429, reason="limit",
        reset_at=reset_at, result="Claude AI usage limit reached",
    ))


def hook_limit(home: Path, worker: str, ts: float, message: str) -> None:
    """Claude Code's StopFailure hook on a usage limit."""
    append(home, worker, ev.HookEvent(ts=ts, src="claude", hook="StopFailure", data={
        "error": "rate_limit", "last_assistant_message": message,
    }))


def ev_line(event: ev.Event) -> bytes:
    return encode_line(event).rstrip(b"\n")


def attr_limit(p: Profile, lim: SeenLimit) -> Profile:
    return attrs.evolve(p, limit=lim)


def own(name: str) -> Profile:
    """One of fleet's own profiles: no clausona reading."""
    return Profile(name=name, tool="claude", config_dir=Path("/p"),
                   quota=_profile_store.UNKNOWN_QUOTA)


# -- the source of each profile's quota ------------------------------------------------------


def test_clausona_reading_wins_over_a_journaled_limit(home: Path) -> None:
    clock = MockClock(now=NOW)
    registered(home, "w1", "claude:work", NOW - HOUR)
    headless_limit(home, "w1", NOW - 60, NOW + 2 * HOUR)
    (p,) = with_limits([sub("claude:work")], seen_limits(home), unread=frozenset())
    assert p.limit is None and quota_source(p, clock.now()) == "clausona"
    assert assess(p, settings=Settings(), coordinator=None, now=clock.now()).eligible


def test_a_journaled_limit_with_its_reset_time_holds_until_then(home: Path) -> None:
    clock = MockClock(now=NOW)
    registered(home, "w1", "claude:work", NOW - HOUR)
    headless_limit(home, "w1", NOW - 600, NOW + 2 * HOUR)
    (p,) = with_limits([own("claude:work")], seen_limits(home), unread=frozenset({"claude:work"}))
    assert p.limit == SeenLimit(worker="w1", profile="claude:work", tool="claude",
                                hit_at=NOW - 600, resets_at=NOW + 2 * HOUR)
    assert quota_source(p, clock.now()) == "journal"
    a = assess(p, settings=Settings(), coordinator=None, now=clock.now())
    assert not a.eligible
    assert a.reasons == ("worker w1 hit a usage limit 10m ago; it resets in 2h",)
    clock.advance(2 * HOUR)  # the reset time: no longer limited
    assert quota_source(p, clock.now()) == "unknown"
    assert assess(p, settings=Settings(), coordinator=None, now=clock.now()).eligible


def test_a_limit_whose_reset_has_passed_no_longer_counts(home: Path) -> None:
    now = MockClock(now=NOW).now()
    registered(home, "w1", "claude:work", NOW - 10 * HOUR)
    headless_limit(home, "w1", NOW - 9 * HOUR, NOW - HOUR)
    (p,) = with_limits([own("claude:work")], seen_limits(home), unread=frozenset({"claude:work"}))
    assert p.limit is not None and not p.limit.active(now)
    assert quota_source(p, now) == "unknown"
    assert assess(p, settings=Settings(), coordinator=None, now=now).eligible


def test_no_reading_and_no_limit_is_unknown(home: Path) -> None:
    (p,) = with_limits([own("claude:work")], seen_limits(home), unread=frozenset({"claude:work"}))
    assert p.limit is None and quota_source(p, NOW) == "unknown"
    assert assess(p, settings=Settings(), coordinator=None, now=NOW).eligible


def test_a_limit_without_a_reset_time_counts_for_five_hours(home: Path) -> None:
    clock = MockClock(now=NOW)
    registered(home, "w1", "claude:work", NOW - HOUR)
    hook_limit(home, "w1", NOW - HOUR, "You've hit your limit")
    (p,) = with_limits([own("claude:work")], seen_limits(home), unread=frozenset({"claude:work"}))
    assert p.limit is not None and p.limit.resets_at is None
    a = assess(p, settings=Settings(), coordinator=None, now=clock.now())
    assert a.reasons == ("worker w1 hit a usage limit 60m ago; its reset time is unknown, so it "
                         "counts for 4h more",)
    clock.advance(UNKNOWN_RESET_HOLD - HOUR)
    assert quota_source(p, clock.now()) == "unknown"


def test_the_hooks_message_gives_the_reset_time(home: Path) -> None:
    registered(home, "w1", "work", NOW - HOUR)
    hook_limit(home, "w1", NOW - 60, "Claude AI usage limit reached|1800007200")
    (lim,) = seen_limits(home)
    assert (lim.profile, lim.hit_at, lim.resets_at) == ("work", NOW - 60, 1800007200.0)
    # A bare name, as a worker may be registered with, is the claude profile of that name.
    (p, other) = with_limits([own("claude:work"), own("claude:side")], [lim],
                             unread=frozenset({"claude:work", "claude:side"}))
    assert p.limit == lim and other.limit is None


def test_the_limit_stays_with_the_profile_it_was_hit_on_after_a_hand_over(home: Path) -> None:
    registered(home, "w1", "claude:work", NOW - HOUR)
    headless_limit(home, "w1", NOW - 120, NOW + HOUR)
    append(home, "w1", ev.HandedOver(ts=NOW - 60, profile="claude:side"))
    append(home, "w1", ev.Retired(ts=NOW - 30))
    work, side = with_limits([own("claude:work"), own("claude:side")], seen_limits(home),
                             unread=frozenset({"claude:work", "claude:side"}))
    assert work.limit is not None and work.limit.worker == "w1"
    assert side.limit is None


def test_the_last_limit_hit_is_the_one_shown(home: Path) -> None:
    registered(home, "w1", "claude:work", NOW - 3 * HOUR)
    headless_limit(home, "w1", NOW - 2 * HOUR, NOW - HOUR)
    registered(home, "w2", "claude:work", NOW - HOUR)
    headless_limit(home, "w2", NOW - 60, NOW + HOUR)
    (p,) = with_limits([own("claude:work")], seen_limits(home), unread=frozenset({"claude:work"}))
    assert p.limit is not None and p.limit.worker == "w2"


def test_one_limit_told_twice_is_one_limit_with_the_reset_time() -> None:
    lines = [ev_line(e) for e in (
        ev.Registered(ts=1.0, tool="claude", profile="claude:work"),
        ev.HookEvent(ts=2.0, src="claude", hook="StopFailure", data={"error": "rate_limit"}),
        ev.Exited(ts=3.0, exit_code=1, is_error=True, reason="limit", reset_at=500.0),
    )]
    assert limits_hit("w1", lines) == [
        SeenLimit(worker="w1", profile="claude:work", tool="claude", hit_at=2.0, resets_at=500.0)
    ]


def test_an_api_profile_and_clausonas_without_a_reading(home: Path) -> None:
    registered(home, "w1", "claude:glm", NOW - HOUR)
    headless_limit(home, "w1", NOW - 60, NOW + HOUR)
    registered(home, "w2", "claude:bare", NOW - HOUR)
    headless_limit(home, "w2", NOW - 60, NOW + HOUR)
    glm = Profile(name="claude:glm", tool="claude", kind="api", config_dir=Path("/g"))
    bare = Profile(name="claude:bare", tool="claude", config_dir=Path("/b"))  # never fetched
    glm2, bare2 = with_limits([glm, bare], seen_limits(home), unread=frozenset())
    assert glm2.limit is None and quota_source(glm2, NOW) == "none"
    assert bare2.limit is not None and quota_source(bare2, NOW) == "journal"


# -- fleet profiles ---------------------------------------------------------------------------


def _limited_world(home: Path) -> None:
    _profile_store.add("work", config_dir="/w")
    _profile_store.add("side", config_dir="/s")
    registered(home, "w1", "claude:work", NOW - HOUR)
    headless_limit(home, "w1", NOW - 600, NOW + 2 * HOUR)


def test_profiles_json_names_each_source(
    world: Path, home: Path, clock: MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    _limited_world(home)
    assert main(["profiles", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    work, side = rows["claude:work"], rows["claude:side"]
    assert (work["quotaSource"], work["quota"], work["worker"]) == ("journal", None, False)
    assert work["limit"] == {"worker": "w1", "hitAt": NOW - 600, "resetsAt": NOW + 2 * HOUR,
                             "resetKnown": True, "until": NOW + 2 * HOUR, "active": True}
    assert work["why"] == ["worker w1 hit a usage limit 10m ago; it resets in 2h"]
    assert (side["quotaSource"], side["quota"], side["limit"], side["worker"]) == (
        "unknown", None, None, True)
    clock.advance(2 * HOUR + 1)
    assert main(["profiles", "--json"]) == 0
    work = {r["name"]: r for r in json.loads(capsys.readouterr().out)}["claude:work"]
    assert (work["quotaSource"], work["limit"]["active"], work["worker"]) == (
        "unknown", False, True)


def test_profiles_json_keeps_clausonas_reading(
    world: Path, home: Path, clock: MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = world / "clausona.json"
    snapshot.write_text(json.dumps([item("claude:work", quota={
        "state": "ok", "fetchedAt": int(NOW * 1000), "session": {"usedPercent": 20}})]))
    registered(home, "w1", "claude:work", NOW - HOUR)
    headless_limit(home, "w1", NOW - 600, NOW + 2 * HOUR)
    assert main(["profiles", "--profiles", str(snapshot), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["quotaSource"], row["limit"], row["worker"]) == ("clausona", None, True)
    assert row["quota"]["session"]["usedPercent"] == 20


def test_profiles_table_says_where_quota_comes_from(
    world: Path, home: Path, clock: MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    _limited_world(home)
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    (work,) = [ln for ln in out.splitlines() if ln.startswith("  claude:work ")]
    assert work.split()[8:11] == ["limit", "no", "worker"]
    assert "  claude:work: limited, from fleet's journals: worker w1 hit a usage limit 10m ago; " \
        "it resets in 2h" in out
    assert "  claude:side: quota unknown (no clausona reading, no limit seen): used as if it " \
        "had room" in out
    clock.advance(3 * HOUR)
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    assert "  claude:work: quota unknown (no clausona reading; the last limit seen, by worker " \
        "w1, ended 60m ago): used as if it had room" in out


# -- routing ----------------------------------------------------------------------------------


def test_routing_skips_a_profile_limited_by_a_journaled_limit(world: Path, home: Path) -> None:
    _limited_world(home)
    result = plan_tasks([Task(name="paths")], coordinator_tool="claude", now=NOW)
    (row,) = result.rows
    assert row.profile == "claude:side" and "quota unknown" in row.reason
    # Once it has reset, the profile is a candidate again (ties break by name).
    later = plan_tasks([Task(name="a"), Task(name="b")], coordinator_tool="claude",
                       now=NOW + 2 * HOUR)
    assert {r.profile for r in later.rows} == {"claude:side", "claude:work"}


def test_a_named_limited_profile_is_used_with_a_warning(world: Path, home: Path) -> None:
    _limited_world(home)
    (row,) = plan_tasks([Task(name="paths", profile="claude:work")], coordinator_tool="claude",
                        now=NOW).rows
    assert row.profile == "claude:work"
    assert any("worker w1 hit a usage limit" in w and "may stop at a usage limit" in w
               for w in row.warnings)


def test_the_pure_plan_skips_a_limited_profile() -> None:
    lim = SeenLimit(worker="w1", profile="claude:work", hit_at=NOW - 60, resets_at=NOW + HOUR)
    profiles = [attr_limit(own("claude:work"), lim), own("claude:side")]
    result = plan([Task(name="t")], profiles, settings=Settings(), coordinator=None, now=NOW)
    (row,) = result.rows
    assert row.profile == "claude:side"
    only = plan([Task(name="t")], profiles[:1], settings=Settings(), coordinator=None, now=NOW)
    assert only.rows[0].profile is None and "hit a usage limit" in only.rows[0].reason


def test_load_profiles_reads_the_journals(world: Path, home: Path) -> None:
    _limited_world(home)
    work, side = load_profiles()
    assert work.limit is not None and work.limit.worker == "w1" and side.limit is None
