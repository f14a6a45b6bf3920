"""Routing rules, one table row per rule, and the properties every plan keeps."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet._core.routing import (
    Choices,
    Plan,
    Profile,
    Settings,
    Task,
    plan,
    quota_problems,
)
from fleet._errors import SettingsError

from .helpers import NOW, api, sub


@attrs.frozen(kw_only=True)
class Case:
    id: str
    profiles: tuple[Profile, ...]
    tasks: tuple[Task, ...]
    expect: dict[str, str | None]
    coordinator: str | None = "claude:main"
    settings: Settings = attrs.field(factory=Settings)
    choices: Choices = attrs.field(factory=Choices)
    coordinator_tool: str | None = None
    #: task -> text its reason or warnings must contain
    says: dict[str, str] = attrs.field(factory=dict)


MAIN = sub("claude:main", session=0, weekly=0)


def T(name: str, **kw: object) -> Task:
    return Task(name=name, **kw)  # type: ignore[arg-type]


CASES = [
    Case(
        id="never the coordinator, even with the most headroom",
        profiles=(MAIN, sub("claude:a", session=50)),
        tasks=(T("t1"),),
        expect={"t1": "claude:a"},
    ),
    *[
        Case(
            id=f"quota state {state} is skipped",
            profiles=(MAIN, sub("claude:a", state=state, session=0, weekly=0), sub("claude:b")),
            tasks=(T("t1"),),
            expect={"t1": "claude:b"},
        )
        for state in ("expired", "missing", "cooldown", "error", "something-new")
    ],
    Case(
        id="a subscription without a quota reading is skipped",
        profiles=(MAIN, attrs.evolve(sub("claude:a"), quota=None), sub("claude:b", session=80)),
        tasks=(T("t1"),),
        expect={"t1": "claude:b"},
    ),
    Case(
        id="5H usage at maxUsage is skipped, just under is not",
        profiles=(MAIN, sub("claude:a", session=90, weekly=0), sub("claude:b", session=89.9)),
        tasks=(T("t1"),),
        expect={"t1": "claude:b"},
    ),
    Case(
        id="7D usage over maxUsage is skipped",
        profiles=(MAIN, sub("claude:a", session=0, weekly=97), sub("claude:b", session=60)),
        tasks=(T("t1"),),
        expect={"t1": "claude:b"},
    ),
    Case(
        id="maxUsage comes from the settings",
        profiles=(MAIN, sub("claude:a", session=55, weekly=0), sub("claude:b", session=40)),
        tasks=(T("t1"), T("t2")),
        settings=Settings(max_usage=50),
        expect={"t1": "claude:b", "t2": "claude:b"},
    ),
    Case(
        id="a scoped limit excludes only that model on that profile",
        profiles=(
            MAIN,
            sub("claude:a", session=0, weekly=0, scoped=("Opus", 95)),
            sub("claude:b", session=50),
        ),
        tasks=(T("opus", model="claude-opus-4-5"), T("sonnet", model="sonnet")),
        expect={"opus": "claude:b", "sonnet": "claude:a"},
    ),
    Case(
        id="a scoped limit with no model given is a warning, not a skip",
        profiles=(MAIN, sub("claude:a", scoped=("Opus", 95))),
        tasks=(T("t1"),),
        expect={"t1": "claude:a"},
        says={"t1": "do not run Opus"},
    ),
    Case(
        id="most headroom first",
        profiles=(MAIN, sub("claude:a", session=50), sub("claude:b", session=10)),
        tasks=(T("t1"),),
        expect={"t1": "claude:b"},
        says={"t1": "80% headroom"},
    ),
    Case(
        id="spread before headroom: no profile carries most workers",
        profiles=(MAIN, sub("claude:a", session=70), sub("claude:b", session=10)),
        tasks=(T("t1"), T("t2"), T("t3"), T("t4")),
        expect={"t1": "claude:b", "t2": "claude:a", "t3": "claude:b", "t4": "claude:a"},
    ),
    Case(
        id="wide mechanical work goes to API profiles, default work to subscriptions",
        profiles=(MAIN, sub("claude:a", session=50), api("claude:glm")),
        tasks=(T("rename", kind="wide-mechanical"), T("feature")),
        expect={"rename": "claude:glm", "feature": "claude:a"},
        says={"rename": "API profile for wide mechanical work"},
    ),
    Case(
        id="other work spreads over API profiles too, subscriptions first at equal load",
        profiles=(MAIN, sub("claude:a", session=50), api("claude:glm")),
        tasks=(T("t1"), T("t2"), T("t3")),
        expect={"t1": "claude:a", "t2": "claude:glm", "t3": "claude:a"},
    ),
    Case(
        id="wide mechanical work falls back to a subscription",
        profiles=(MAIN, sub("claude:a")),
        tasks=(T("rename", kind="wide-mechanical"),),
        expect={"rename": "claude:a"},
        says={"rename": "no API profile is eligible"},
    ),
    Case(
        id="exploratory work on an API profile only when nothing else has room, with a warning",
        profiles=(MAIN, sub("claude:a", session=95), api("claude:glm")),
        tasks=(T("explore", kind="exploratory"),),
        expect={"explore": "claude:glm"},
        says={"explore": "may overflow its context"},
    ),
    Case(
        id="a checker runs on a third profile",
        profiles=(MAIN, sub("claude:a", session=0), sub("claude:b", session=40)),
        tasks=(T("work"), T("check", checker_of="work")),
        expect={"work": "claude:a", "check": "claude:b"},
        says={"check": "third profile"},
    ),
    Case(
        id="a checker listed before its task still avoids the worker's profile",
        profiles=(MAIN, sub("claude:a", session=0), sub("claude:b", session=40)),
        tasks=(T("check", checker_of="work"), T("work")),
        expect={"work": "claude:a", "check": "claude:b"},
    ),
    Case(
        id="no third profile: the checker is not routed",
        profiles=(MAIN, sub("claude:a")),
        tasks=(T("work"), T("check", checker_of="work")),
        expect={"work": "claude:a", "check": None},
        says={"check": "runs work, which this task checks"},
    ),
    Case(
        id="a checker of a checker in a cycle is not routed",
        profiles=(MAIN, sub("claude:a")),
        tasks=(T("c1", checker_of="c2"), T("c2", checker_of="c1")),
        expect={"c1": None, "c2": None},
        says={"c1": "cycle"},
    ),
    Case(
        id="a checker of an unknown task is not routed",
        profiles=(MAIN, sub("claude:a")),
        tasks=(T("c1", checker_of="nope"),),
        expect={"c1": None},
        says={"c1": "not a task"},
    ),
    Case(
        id="a Codex coordinator prefers Codex profiles",
        profiles=(sub("codex:main"), sub("claude:a", session=0), sub("codex:b", session=60)),
        tasks=(T("t1"),),
        coordinator="codex:main",
        expect={"t1": "codex:b"},
    ),
    Case(
        id="a Codex coordinator falls back to Claude when no Codex profile has room",
        profiles=(sub("codex:main"), sub("claude:a"), sub("codex:b", state="cooldown")),
        tasks=(T("t1"),),
        coordinator="codex:main",
        expect={"t1": "claude:a"},
        says={"t1": "no codex profile is eligible"},
    ),
    Case(
        id="a Codex coordinator with workers naming Claude profiles uses them by headroom",
        profiles=(sub("codex:main"), sub("claude:a", session=0), sub("codex:b", session=60)),
        tasks=(T("t1"),),
        coordinator="codex:main",
        settings=Settings(workers=("claude:a", "codex:b")),
        expect={"t1": "claude:a"},
    ),
    Case(
        id="the coordinator's tool is known without its profile",
        profiles=(sub("claude:a", session=0), sub("codex:b", session=60)),
        tasks=(T("t1"),),
        coordinator=None,
        coordinator_tool="codex",
        expect={"t1": "codex:b"},
    ),
    Case(
        id="a task's tool limits its profiles",
        profiles=(MAIN, sub("claude:a", session=0), sub("codex:b", session=60)),
        tasks=(T("t1", tool="codex"),),
        expect={"t1": "codex:b"},
    ),
    Case(
        id="settings workers is the only pool",
        profiles=(MAIN, sub("claude:a", session=0), sub("claude:b", session=60)),
        tasks=(T("t1"), T("t2")),
        settings=Settings(workers=("b",)),
        expect={"t1": "claude:b", "t2": "claude:b"},
    ),
    Case(
        id="an empty workers list lets nobody work",
        profiles=(MAIN, sub("claude:a")),
        tasks=(T("t1"),),
        settings=Settings(workers=()),
        expect={"t1": None},
        says={"t1": "not in workers"},
    ),
    Case(
        id="the profiles the user names replace workers",
        profiles=(MAIN, sub("claude:a", session=0), sub("claude:b", session=60)),
        tasks=(T("t1"),),
        settings=Settings(workers=("claude:a",)),
        choices=Choices(use=("claude:b",)),
        expect={"t1": "claude:b"},
    ),
    Case(
        id="a named profile over its limits is used, with what it risks",
        profiles=(MAIN, sub("claude:a", session=96), sub("claude:b")),
        tasks=(T("t1", profile="claude:a"),),
        expect={"t1": "claude:a"},
        says={"t1": "may stop at a usage limit"},
    ),
    Case(
        id="a named profile with a lapsed sign-in is used, with a warning",
        profiles=(MAIN, sub("claude:a", state="expired")),
        tasks=(T("t1", profile="A"),),
        expect={"t1": "claude:a"},
        says={"t1": "quota state expired: its sign-in lapsed, so the numbers are an old "
              "reading: its real usage is unknown"},
    ),
    Case(
        id="a named profile without credentials is used, with a warning",
        profiles=(MAIN, sub("claude:a", state="missing")),
        tasks=(T("t1", profile="claude:a"),),
        expect={"t1": "claude:a"},
        says={"t1": "may not be able to sign in"},
    ),
    Case(
        id="the coordinator's own profile, when named, is used with a warning",
        profiles=(MAIN, sub("claude:a")),
        tasks=(T("t1", profile="claude:main"),),
        expect={"t1": "claude:main"},
        says={"t1": "coordinator's own profile"},
    ),
    Case(
        id="a profile assigned in the request wins over the task file",
        profiles=(MAIN, sub("claude:a"), sub("claude:b")),
        tasks=(T("t1", profile="claude:a"),),
        choices=Choices(assign={"t1": "claude:b"}),
        expect={"t1": "claude:b"},
    ),
    Case(
        id="named profiles count toward the spread",
        profiles=(MAIN, sub("claude:a", session=0), sub("claude:b", session=50)),
        tasks=(T("auto"), T("named", profile="claude:a")),
        expect={"named": "claude:a", "auto": "claude:b"},
    ),
    Case(
        id="a named profile outside workers is used, with a warning",
        profiles=(MAIN, sub("claude:a"), sub("claude:b")),
        tasks=(T("t1", profile="claude:b"),),
        settings=Settings(workers=("claude:a",)),
        expect={"t1": "claude:b"},
        says={"t1": "not in workers"},
    ),
    Case(
        id="an unknown named profile is not guessed",
        profiles=(MAIN, sub("claude:a")),
        tasks=(T("t1", profile="claude:nope"),),
        expect={"t1": None},
        says={"t1": "no profile 'claude:nope'"},
    ),
    Case(
        id="an ambiguous bare name is not guessed",
        profiles=(MAIN, sub("claude:work"), sub("codex:work")),
        tasks=(T("t1", profile="work"),),
        expect={"t1": None},
        says={"t1": "ambiguous"},
    ),
    Case(
        id="a named profile of the other tool is refused for a tool-bound task",
        profiles=(MAIN, sub("codex:a")),
        tasks=(T("t1", tool="claude", profile="codex:a"),),
        expect={"t1": None},
        says={"t1": "a codex profile, for a claude task"},
    ),
    Case(
        id="no eligible profile: each task says why instead of guessing",
        profiles=(MAIN, sub("claude:a", session=99), sub("claude:b", state="cooldown")),
        tasks=(T("t1"), T("t2")),
        expect={"t1": None, "t2": None},
        says={"t1": "claude:a: 5H usage 99% >= maxUsage 90%", "t2": "claude:b: quota state"},
    ),
    Case(
        id="a stale reading is used and said",
        profiles=(MAIN, sub("claude:a", fetched_at=NOW - 7200)),
        tasks=(T("t1"),),
        expect={"t1": "claude:a"},
        says={"t1": "2h old"},
    ),
    Case(
        id="API profiles bring their model; a task's model wins",
        profiles=(MAIN, api("claude:glm", model="z-ai/glm-5.3")),
        tasks=(T("t1", kind="wide-mechanical"), T("t2", kind="wide-mechanical", model="x")),
        expect={"t1": "claude:glm", "t2": "claude:glm"},
    ),
]


def _run(case: Case) -> Plan:
    coordinator = next((p for p in case.profiles if p.name == case.coordinator), None)
    return plan(
        case.tasks,
        case.profiles,
        settings=case.settings,
        coordinator=coordinator,
        now=NOW,
        choices=case.choices,
        coordinator_tool=case.coordinator_tool,
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule(case: Case) -> None:
    result = _run(case)
    got = {r.task: r.profile for r in result.rows}
    assert got == case.expect
    for task, text in case.says.items():
        row = result.row(task)
        assert text in row.reason + " | " + " | ".join(row.warnings)
    for r in result.rows:
        assert r.reason
        if r.profile is None:
            assert r.launch == () and r.config_dir is None
        else:
            assert r.launch == ("clausona", "run", r.profile, "--")


def test_row_fields_for_an_api_profile() -> None:
    result = _run(CASES[-1])
    t1, t2 = result.rows
    assert t1.model == "z-ai/glm-5.3" and t2.model == "x"
    assert str(t1.config_dir) == "/profiles/claude-glm" and t1.tool == "claude"


@pytest.mark.parametrize(
    ("settings_", "tasks", "choices", "needs_ok"),
    [
        (Settings(), (T("t1"),), Choices(), True),
        (Settings(workers=("claude:a",)), (T("t1"),), Choices(), False),
        (Settings(), (T("t1", profile="claude:a"),), Choices(), False),
        (Settings(), (T("t1"),), Choices(use=("claude:a",)), False),
        (Settings(), (T("t1"),), Choices(assign={"t1": "claude:a"}), False),
        (Settings(), (T("t1"),), Choices(start_now=True), False),
        (Settings(routing=("keep GLM off src/",)), (T("t1"),), Choices(), False),
        (Settings(routing=("claude:a only for docs",)), (T("t1"),), Choices(), False),
        (Settings(routing=("small briefs for everyone",)), (T("t1"),), Choices(), True),
        (Settings(routing=("glmx is not any profile",)), (T("t1"),), Choices(), True),
        (Settings(routing=("by default, keep main work small",)), (T("t1"),), Choices(), True),
        (Settings(routing=("claude:main never edits",)), (T("t1"),), Choices(), False),
    ],
)
def test_needs_ok_unless_a_profile_was_named(
    settings_: Settings, tasks: tuple[Task, ...], choices: Choices, needs_ok: bool
) -> None:
    profiles = (MAIN, sub("claude:a"), api("claude:glm"))
    result = plan(
        tasks, profiles, settings=settings_, coordinator=MAIN, now=NOW, choices=choices
    )
    assert result.needs_ok is needs_ok
    assert result.routing == settings_.routing


def test_plan_warns_when_one_profile_carries_most_workers() -> None:
    profiles = (MAIN, sub("claude:a"), sub("claude:b", session=95))
    tasks = tuple(T(f"t{i}") for i in range(3))
    result = plan(tasks, profiles, settings=Settings(), coordinator=MAIN, now=NOW)
    assert any("claude:a carries 3 of 3 workers" in w for w in result.warnings)


def test_unknown_coordinator_and_unknown_workers_are_warned() -> None:
    result = plan(
        (T("t1"),),
        (sub("claude:a"),),
        settings=Settings(workers=("claude:a", "claude:gone")),
        coordinator=None,
        now=NOW,
    )
    assert result.row("t1").profile == "claude:a"
    assert any("coordinator's own profile is unknown" in w for w in result.warnings)
    assert any("settings workers: no profile 'claude:gone'" in w for w in result.warnings)


def test_repeated_task_names_are_refused() -> None:
    with pytest.raises(SettingsError, match="t1 repeats"):
        plan((T("t1"), T("t1")), (sub("claude:a"),), settings=Settings(), coordinator=None, now=NOW)


def test_quota_problems_name_each_limit() -> None:
    p = sub("claude:a", session=91, weekly=92, scoped=("Opus", 99), state="cooldown")
    problems = quota_problems(p, 90, model="opus")
    assert len(problems) == 4
    assert quota_problems(api("claude:glm"), 90) == []
    assert quota_problems(sub("claude:a"), 90, model="opus") == []


# --------------------------------------------------------------------------------------------
# Properties

NAMES = ["a", "b", "c", "d", "e", "f"]


@st.composite
def profiles_st(draw: st.DrawFn) -> list[Profile]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True))
    out: list[Profile] = []
    for n in names:
        tool = draw(st.sampled_from(["claude", "codex"]))
        if tool == "claude" and draw(st.booleans()) and draw(st.booleans()):
            out.append(api(f"claude:{n}", model=draw(st.sampled_from(["glm", "deepseek"]))))
            continue
        usage = st.one_of(st.none(), st.integers(0, 100).map(float))
        out.append(
            sub(
                f"{tool}:{n}",
                session=draw(usage),
                weekly=draw(usage),
                state=draw(st.sampled_from(["ok", "ok", "ok", "expired", "cooldown", "error"])),
                scoped=draw(st.one_of(st.none(), st.tuples(
                    st.sampled_from(["Opus", "Sonnet"]), st.integers(0, 100).map(float)
                ))),
                fetched_at=NOW - draw(st.integers(0, 100_000)),
            )
        )
    return out


@st.composite
def tasks_st(draw: st.DrawFn, profile_names: Sequence[str], named: bool) -> list[Task]:
    count = draw(st.integers(1, 8))
    tasks: list[Task] = []
    for i in range(count):
        checker_of = None
        if tasks and draw(st.integers(0, 4)) == 0:
            checker_of = draw(st.sampled_from([t.name for t in tasks]))
        tasks.append(
            Task(
                name=f"t{i}",
                tool=draw(st.sampled_from([None, None, "claude", "codex"])),
                model=draw(st.sampled_from([None, None, "opus", "claude-sonnet-5"])),
                kind=draw(st.sampled_from(["default", "wide-mechanical", "exploratory"])),
                checker_of=checker_of,
                profile=draw(st.one_of(st.none(), st.sampled_from(profile_names)))
                if named and profile_names
                else None,
            )
        )
    return tasks


@st.composite
def inputs(draw: st.DrawFn, named: bool = True) -> tuple[list[Task], list[Profile], Settings,
                                                           Profile | None]:
    profiles = draw(profiles_st())
    coordinator = draw(st.one_of(st.none(), st.sampled_from(profiles)))
    max_usage = float(draw(st.sampled_from([50, 80, 90, 100])))
    workers = draw(st.one_of(
        st.none(), st.lists(st.sampled_from([p.name for p in profiles]), unique=True)
    ))
    cfg = Settings(max_usage=max_usage, workers=None if workers is None else tuple(workers))
    tasks = draw(tasks_st([p.name for p in profiles], named))
    return tasks, profiles, cfg, coordinator


@settings(max_examples=200, deadline=None)
@given(inputs())
def test_never_the_coordinator_never_over_the_limit_unless_named(
    data: tuple[list[Task], list[Profile], Settings, Profile | None],
) -> None:
    tasks, profiles, cfg, coordinator = data
    result = plan(tasks, profiles, settings=cfg, coordinator=coordinator, now=NOW)
    by_name = {p.name: p for p in profiles}
    tasks_by_name = {t.name: t for t in tasks}
    assert [r.task for r in result.rows] == [t.name for t in tasks]
    for row in result.rows:
        task = tasks_by_name[row.task]
        named = by_name.get(task.profile or "")
        if named is not None and task.tool in (None, named.tool):
            # What the user named is used, whatever the defaults say.
            assert row.profile == named.name and row.named
        if row.profile is None or row.named:
            continue
        assert task.profile is None
        chosen = by_name[row.profile]
        assert coordinator is None or chosen.name != coordinator.name
        assert quota_problems(chosen, cfg.max_usage, task.model) == []
        if cfg.workers is not None:
            assert chosen.name in cfg.workers
        if task.tool is not None:
            assert chosen.tool == task.tool
        if task.checker_of is not None:
            assert result.row(task.checker_of).profile != chosen.name


@settings(max_examples=100, deadline=None)
@given(inputs(), st.randoms(use_true_random=False))
def test_same_input_same_plan_whatever_the_profile_order(
    data: tuple[list[Task], list[Profile], Settings, Profile | None], rnd: object
) -> None:
    tasks, profiles, cfg, coordinator = data
    first = plan(tasks, profiles, settings=cfg, coordinator=coordinator, now=NOW)
    assert plan(tasks, profiles, settings=cfg, coordinator=coordinator, now=NOW) == first
    shuffled = list(profiles)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert plan(tasks, shuffled, settings=cfg, coordinator=coordinator, now=NOW) == first


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 100), min_size=1, max_size=6),
    st.integers(1, 20),
    st.sampled_from([50.0, 90.0]),
)
def test_spread_is_as_even_as_headroom_allows(
    usages: list[int], count: int, max_usage: float
) -> None:
    profiles = [sub(f"claude:p{i}", session=u, weekly=0) for i, u in enumerate(usages)]
    tasks = [Task(name=f"t{i}") for i in range(count)]
    result = plan(tasks, profiles, settings=Settings(max_usage=max_usage), coordinator=None,
                  now=NOW)
    eligible = [p for p in profiles if not quota_problems(p, max_usage)]
    counts = Counter(r.profile for r in result.rows)
    if not eligible:
        assert all(r.profile is None for r in result.rows)
        return
    assert set(counts) <= {p.name for p in eligible}
    loads = [counts.get(p.name, 0) for p in eligible]
    assert max(loads) - min(loads) <= 1
    # Where the load is uneven, the extra workers sit on the profiles with more headroom.
    for p in eligible:
        for q in eligible:
            if (p.headroom or 0) > (q.headroom or 0):
                assert counts.get(p.name, 0) >= counts.get(q.name, 0)


def test_row_warnings_stay_on_rows_and_all_warnings_gathers_them() -> None:
    profiles = (sub("claude:a", session=96), sub("claude:b", session=92))
    tasks = (T("t1", profile="claude:a"), T("t2"))
    result = plan(tasks, profiles, settings=Settings(), coordinator=None, now=NOW)
    assert result.row("t2").profile is None
    assert len(result.warnings) == 1 and "coordinator" in result.warnings[0]
    (risk,) = result.row("t1").warnings
    assert result.all_warnings == (result.warnings[0], f"t1: {risk}")


def test_windows_over_the_limit_say_when_they_reset() -> None:
    p = sub("claude:a", session=95, weekly=99)
    assert p.quota is not None and p.quota.session is not None and p.quota.weekly is not None
    p = attrs.evolve(p, quota=attrs.evolve(
        p.quota,
        session=attrs.evolve(p.quota.session, resets_at=NOW + 3 * 3600),
        weekly=attrs.evolve(p.quota.weekly, resets_at=NOW - 10),
    ))
    five, seven = quota_problems(p, 90, now=NOW)
    assert five.endswith("(resets in 3h)")
    assert "reset time has passed" in seven
    assert quota_problems(p, 90) == ["5H usage 95% >= maxUsage 90%", "7D usage 99% >= maxUsage 90%"]
