"""Which profile runs each task, and why.

Profiles are clausona profiles (one Claude or Codex account, or one API endpoint) with their last
quota reading. Routing is a pure function of the tasks, the profiles, the settings, the
coordinator's own profile and what the user said, so the same input always gives the same plan.

The rules, in order:

1. What the user said: a task's own ``profile``, or a profile the user assigned to it. It is used
   even when the defaults would skip it; the row then carries a warning saying what it risks.
2. The settings: ``workers`` is the only pool (the user's ``use`` list replaces it for one
   request); the ``routing`` rules, in words, are shown beside the plan for the coordinator to
   apply.
3. The defaults, for everything left open:
   - never the coordinator's own profile;
   - skip a subscription whose quota state is not ``ok`` (or is unknown), or whose 5H or 7D usage
     is at or over ``maxUsage``; a scoped (per-model) limit at or over ``maxUsage`` excludes only
     that model on that profile; skip one whose last usage limit seen in fleet's journals (where
     clausona has no reading) has not reset;
   - same tool as the coordinator when the task does not say and nobody named the pool (a
     preference: another tool's profile is used when none of the coordinator's has room);
   - wide mechanical work to API profiles, exploratory work to subscriptions (API profiles have
     small context windows), other work to either; each a preference, not a limit;
   - spread: the profile carrying the fewest workers first, then a subscription before an API
     endpoint, then the most headroom, then the name (so ties break the same way every time);
   - a stale reading is used and said (``stale_after`` seconds, default 15 minutes);
   - a checker runs on a third profile, neither the checked worker's nor the coordinator's.
4. When no profile is eligible, the row says so (with each profile's reason) instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from fleet._core.routing.assessment import assess, format_duration, in_pool, percent, quota_problems
from fleet._core.routing.profiles import DEFAULT_STALE_AFTER, Profile, resolve
from fleet._core.routing.settings import Settings
from fleet._errors import SettingsError

#: Kinds of work a task may declare. Anything else is refused when tasks are read.
WORK_KINDS: Final = ("default", "wide-mechanical", "exploratory")


@attrs.frozen(kw_only=True)
class Task:
    """One task to route. ``tool`` None lets routing choose; ``profile`` is the user's choice;
    ``checker_of`` names the task this one checks."""

    name: str
    tool: str | None = None
    profile: str | None = None
    model: str | None = None
    kind: str = "default"
    checker_of: str | None = None
    brief: Path | None = None

    @property
    def is_checker(self) -> bool:
        return self.checker_of is not None


@attrs.frozen(kw_only=True)
class Choices:
    """What the user said in this request: the profiles to use (replacing ``workers`` for
    this plan), a profile per task, and whether to start without asking."""

    use: tuple[str, ...] = ()
    assign: Mapping[str, str] = attrs.field(factory=dict)
    start_now: bool = False


def clausona_run_prefix(profile: str) -> tuple[str, ...]:
    """``clausona run <profile> --``: the tool's own arguments follow. Only ``clausona run``
    puts a worker on the profile chosen, whatever CLAUDE_CONFIG_DIR/CODEX_HOME it inherits."""
    return ("clausona", "run", profile, "--")


@attrs.frozen(kw_only=True)
class PlanRow:
    task: str
    tool: str | None
    profile: str | None
    model: str | None
    config_dir: Path | None
    launch: tuple[str, ...]
    reason: str
    warnings: tuple[str, ...] = ()
    kind: str = "default"
    checker_of: str | None = None
    named: bool = False

    @property
    def routed(self) -> bool:
        return self.profile is not None


@attrs.frozen(kw_only=True)
class Plan:
    """A routing decision: one row per task (in the tasks' order), the plan's own warnings
    (each row carries its own too), the user's routing rules to show beside it, and whether
    it needs the user's OK before starting."""

    rows: tuple[PlanRow, ...]
    warnings: tuple[str, ...]
    routing: tuple[str, ...]
    needs_ok: bool
    max_usage: float
    coordinator: str | None

    @property
    def all_warnings(self) -> tuple[str, ...]:
        """The plan's own warnings, then each row's, prefixed with its task."""
        return self.warnings + tuple(f"{r.task}: {w}" for r in self.rows for w in r.warnings)

    @property
    def complete(self) -> bool:
        return all(r.routed for r in self.rows)

    def row(self, task: str) -> PlanRow:
        for r in self.rows:
            if r.task == task:
                return r
        raise KeyError(task)


#: Bare profile names that are also everyday words: rules text must use the full name
#: (``claude:work``) for them to count as naming a profile, so "by default ..." names nothing.
_COMMON_WORDS: Final = frozenset(
    {"default", "main", "work", "personal", "primary", "home", "api", "test", "new", "old"}
)


def _mentions(text: str, profile: Profile) -> bool:
    """Whether the user's rules text names ``profile``: its full name, or its bare name as a
    whole word unless that is an everyday word (``keep GLM off src/`` names ``claude:glm``)."""
    low = text.lower()
    if profile.name.lower() in low:
        return True
    short = profile.short.lower()
    if short in _COMMON_WORDS:
        return False
    return re.search(rf"(?<![\w:-]){re.escape(short)}(?![\w-])", low) is not None


def plan(
    tasks: Sequence[Task],
    profiles: Sequence[Profile],
    *,
    settings: Settings,
    coordinator: Profile | None,
    now: float,
    choices: Choices | None = None,
    coordinator_tool: str | None = None,
    stale_after: float = DEFAULT_STALE_AFTER,
) -> Plan:
    """Route every task to a profile, explaining each choice. Pure and deterministic."""
    choices = choices or Choices()
    coord_tool = coordinator_tool or (coordinator.tool if coordinator else None)
    by_name = {t.name: t for t in tasks}
    if len(by_name) != len(tasks):
        names = [t.name for t in tasks]
        twice = sorted({n for n in names if names.count(n) > 1})
        raise SettingsError(f"task names must be unique: {', '.join(twice)} repeats")
    warnings: list[str] = []
    if coordinator is None:
        warnings.append(
            "the coordinator's own profile is unknown (no profile's configDir matches): "
            "nothing is excluded as the coordinator's"
        )
    pool: tuple[str, ...] | None = choices.use or None
    if pool is None and settings.workers is not None:
        pool = settings.workers
    for n in pool or ():
        found = resolve(n, profiles)
        if isinstance(found, str):
            source = "the profiles named" if choices.use else "settings workers"
            warnings.append(f"{source}: {found}")
    named_pool = bool(choices.use) or settings.workers is not None

    ctx = _Context(
        profiles=profiles,
        settings=settings,
        coordinator=coordinator,
        coord_tool=coord_tool,
        now=now,
        pool=pool,
        named_pool=named_pool,
        stale_after=stale_after,
        pool_label="not among the profiles named" if choices.use else "not in workers",
    )
    counts: dict[str, int] = {p.name: 0 for p in profiles}
    rows: dict[str, PlanRow] = {}

    def finish(row: PlanRow) -> None:
        rows[row.task] = row
        if row.profile is not None:
            counts[row.profile] = counts.get(row.profile, 0) + 1

    # Named tasks first, so automatic choices spread around them; checkers after the tasks
    # they check, since the checked worker's profile must be known.
    order, cyclic = _order(tasks, set(choices.assign))
    for task in order:
        if task.name in rows:
            continue
        explicit = choices.assign.get(task.name) or task.profile
        checked = rows.get(task.checker_of) if task.checker_of else None
        if task.checker_of is not None and task.checker_of not in by_name:
            finish(_unrouted(task, f"checks {task.checker_of!r}, which is not a task"))
            continue
        if task.name in cyclic:
            finish(_unrouted(task, f"checks {task.checker_of!r} in a cycle of checkers"))
            continue
        if explicit:
            finish(_named(ctx, task, explicit, checked))
            continue
        finish(_choose(ctx, task, checked, counts))

    ordered = tuple(rows[t.name] for t in tasks)
    routed = [r for r in ordered if r.profile is not None]
    if len(routed) >= 3:
        for name in sorted({r.profile for r in routed if r.profile}):
            carried = sum(1 for r in routed if r.profile == name)
            if carried * 2 > len(routed):
                warnings.append(
                    f"{name} carries {carried} of {len(routed)} workers: its limits can stall "
                    "most of the fan-out"
                )

    request_named = bool(choices.use) or bool(choices.assign) or any(t.profile for t in tasks)
    settings_named = bool(settings.workers) or any(
        _mentions(text, p) for text in settings.routing for p in profiles
    )
    return Plan(
        rows=ordered,
        warnings=tuple(warnings),
        routing=settings.routing,
        needs_ok=not (request_named or settings_named or choices.start_now),
        max_usage=settings.max_usage,
        coordinator=coordinator.name if coordinator else None,
    )


def _order(tasks: Sequence[Task], assigned: set[str]) -> tuple[list[Task], set[str]]:
    """Named non-checkers, then other non-checkers, then checkers in dependency order; a
    checker in a cycle (or of an unknown task) comes last and is reported unrouted."""
    plain = [t for t in tasks if not t.is_checker]
    named = [t for t in plain if t.profile or t.name in assigned]
    order = named + [t for t in plain if t not in named]
    placed = {t.name for t in order}
    names = {t.name for t in tasks}
    pending = [t for t in tasks if t.is_checker]
    progress = True
    while pending and progress:
        progress = False
        for t in list(pending):
            if t.checker_of in placed or t.checker_of not in names:
                order.append(t)
                placed.add(t.name)
                pending.remove(t)
                progress = True
    return order + pending, {t.name for t in pending}


def _unrouted(task: Task, reason: str) -> PlanRow:
    return PlanRow(
        task=task.name,
        tool=task.tool,
        profile=None,
        model=task.model,
        config_dir=None,
        launch=(),
        reason=reason,
        kind=task.kind,
        checker_of=task.checker_of,
    )


def _row(task: Task, p: Profile, reason: str, warnings: list[str], named: bool) -> PlanRow:
    return PlanRow(
        task=task.name,
        tool=p.tool,
        profile=p.name,
        model=task.model or p.model,
        config_dir=p.config_dir,
        launch=clausona_run_prefix(p.name),
        reason=reason,
        warnings=tuple(warnings),
        kind=task.kind,
        checker_of=task.checker_of,
        named=named,
    )


@attrs.frozen(kw_only=True)
class _Context:
    profiles: Sequence[Profile]
    settings: Settings
    coordinator: Profile | None
    coord_tool: str | None
    now: float
    pool: tuple[str, ...] | None
    named_pool: bool
    stale_after: float
    pool_label: str


def _named(ctx: _Context, task: Task, name: str, checked: PlanRow | None) -> PlanRow:
    profiles, settings, coordinator = ctx.profiles, ctx.settings, ctx.coordinator
    now, pool, stale_after = ctx.now, ctx.pool, ctx.stale_after
    found = resolve(name, profiles)
    if isinstance(found, str):
        return _unrouted(task, f"named {name!r}, but {found}")
    p = found
    if task.tool is not None and task.tool != p.tool:
        return _unrouted(task, f"named {p.name}, a {p.tool} profile, for a {task.tool} task")
    warnings: list[str] = []
    model = task.model or p.model
    if coordinator is not None and p.name == coordinator.name:
        warnings.append(
            f"{p.name} is the coordinator's own profile: the worker spends the coordinator's "
            "limits and can stall it"
        )
    for problem in quota_problems(p, settings.max_usage, model, now):
        warnings.append(f"{p.name}: {problem}: {_risk(problem)}")
    if pool is not None and not in_pool(p, pool):
        warnings.append(f"{p.name}: {ctx.pool_label}")
    if checked is not None and checked.profile == p.name:
        warnings.append(f"{p.name} also runs {checked.task}: the check is not independent")
    warnings.extend(_notes(p, settings, now, model, stale_after))
    warnings.extend(_kind_warnings(task, p))
    return _row(task, p, "named by the user", warnings, named=True)


def _risk(problem: str) -> str:
    """What running on a profile anyway risks, for one of :func:`quota_problems`' findings."""
    if problem.startswith("quota state missing"):
        return "the worker may not be able to sign in"
    if problem.startswith(("quota state", "no quota")):
        return "its real usage is unknown, so the worker may stop at a usage limit"
    return "the worker may stop at a usage limit"


def _notes(
    p: Profile, settings: Settings, now: float, model: str | None, stale_after: float
) -> list[str]:
    notes: list[str] = []
    q = p.quota
    if q is None or p.is_api:
        return notes
    if q.is_stale(now, stale_after):
        notes.append(
            f"{p.name}'s quota reading is {format_duration(q.age(now) or 0.0)} old "
            "(`clausona list --refresh` updates it)"
        )
    if q.scoped is not None and q.scoped.used_percent >= settings.max_usage and not model:
        notes.append(
            f"{p.name}'s {q.scoped.label} limit is at {percent(q.scoped.used_percent)}: "
            f"do not run {q.scoped.label} there (no model was given)"
        )
    return notes


def _kind_warnings(task: Task, p: Profile) -> list[str]:
    if task.kind == "exploratory" and p.is_api:
        return [f"exploratory work on API profile {p.name}: a long brief may overflow its context"]
    return []


def _tier(task: Task, p: Profile, coord_tool: str | None, named_pool: bool) -> int:
    """Lower is preferred: the coordinator's tool first, then the kind of work (wide mechanical
    work wants API profiles, exploratory work wants subscriptions, other work takes either)."""
    if task.kind == "wide-mechanical":
        kind_rank = 0 if p.is_api else 1
    elif task.kind == "exploratory":
        kind_rank = 1 if p.is_api else 0
    else:
        kind_rank = 0
    tool_rank = 0
    if task.tool is None and not named_pool and coord_tool is not None and p.tool != coord_tool:
        tool_rank = 1
    return tool_rank * 2 + kind_rank


def _choose(
    ctx: _Context, task: Task, checked: PlanRow | None, counts: Mapping[str, int]
) -> PlanRow:
    profiles, settings, coordinator = ctx.profiles, ctx.settings, ctx.coordinator
    now, pool, stale_after = ctx.now, ctx.pool, ctx.stale_after
    coord_tool, named_pool = ctx.coord_tool, ctx.named_pool
    candidates: list[Profile] = []
    skipped: list[str] = []
    outside = 0
    for p in sorted(profiles, key=lambda p: p.name):
        if task.tool is not None and p.tool != task.tool:
            continue
        if pool is not None and not in_pool(p, pool):
            # Listing every profile outside the pool would bury the reasons that matter.
            outside += 1
            continue
        a = assess(
            p,
            settings=settings,
            coordinator=coordinator,
            now=now,
            model=task.model,
            pool=pool,
            stale_after=stale_after,
            pool_label=ctx.pool_label,
        )
        reasons = list(a.reasons)
        if checked is not None and checked.profile == p.name:
            reasons.append(f"runs {checked.task}, which this task checks")
        if reasons:
            skipped.append(f"{p.name}: {'; '.join(reasons)}")
        else:
            candidates.append(p)
    if not candidates:
        tool = f" {task.tool}" if task.tool else ""
        if outside:
            skipped.append(f"{outside} other{tool} profile{'s' * (outside != 1)}: {ctx.pool_label}")
        detail = " | ".join(skipped) if skipped else f"clausona lists no{tool} profiles"
        return _unrouted(task, f"no eligible profile ({detail})")

    def key(p: Profile) -> tuple[int, int, bool, float, str]:
        # Among equally loaded profiles a subscription comes before a paid API endpoint, then
        # the most headroom, then the name, so ties always break the same way.
        headroom = p.headroom if p.headroom is not None else 100.0
        tier = _tier(task, p, coord_tool, named_pool)
        return (tier, counts.get(p.name, 0), p.is_api, -headroom, p.name)

    best = min(candidates, key=key)
    why: list[str] = []
    tier = _tier(task, best, coord_tool, named_pool)
    if task.kind == "wide-mechanical":
        why.append(
            "API profile for wide mechanical work"
            if best.is_api
            else "wide mechanical work, but no API profile is eligible"
        )
    elif task.kind == "exploratory" and best.is_api:
        why.append("no subscription is eligible")
    if tier >= 2:
        why.append(f"no {coord_tool} profile is eligible")
    head = best.headroom
    why.append(f"{percent(head)} headroom" if head is not None else "no quota limits (API)")
    load = counts.get(best.name, 0)
    why.append(f"{load} other worker{'s' if load != 1 else ''} on it")
    if checked is not None:
        why.append(f"third profile: not {checked.profile or checked.task}'s, not the coordinator's")
    warnings = _notes(best, settings, now, task.model or best.model, stale_after)
    warnings.extend(_kind_warnings(task, best))
    if checked is not None and checked.profile is None:
        warnings.append(f"{checked.task} has no profile, so the check may share it")
    return _row(task, best, ", ".join(why), warnings, named=False)
