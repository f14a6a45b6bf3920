"""Which profile runs each task, and why: profiles and their quota (:mod:`.profiles`), the
settings routing reads (:mod:`.settings`), whether a profile has room (:mod:`.assessment`), and
the plan itself (:mod:`.planning`, where the rules are written out). All pure: no file, process
or clock is touched here."""

from fleet._core.routing.assessment import (
    Assessment,
    assess,
    format_duration,
    in_pool,
    percent,
    quota_problems,
    scoped_limits_model,
)
from fleet._core.routing.planning import (
    WORK_KINDS,
    Choices,
    Plan,
    PlanRow,
    Task,
    clausona_run_prefix,
    plan,
)
from fleet._core.routing.profiles import (
    DEFAULT_STALE_AFTER,
    PROFILE_KINDS,
    QUOTA_STATE_MEANING,
    QUOTA_STATES,
    TOOLS,
    Kind,
    Profile,
    Quota,
    QuotaWindow,
    Tool,
    parse_time,
    profile_from_json,
    profiles_from_json,
    resolve,
)
from fleet._core.routing.settings import (
    DEFAULT_MAX_USAGE,
    RETIRE_MODES,
    Settings,
)

__all__ = [
    "DEFAULT_MAX_USAGE",
    "DEFAULT_STALE_AFTER",
    "PROFILE_KINDS",
    "QUOTA_STATES",
    "QUOTA_STATE_MEANING",
    "RETIRE_MODES",
    "TOOLS",
    "WORK_KINDS",
    "Assessment",
    "Choices",
    "Kind",
    "Plan",
    "PlanRow",
    "Profile",
    "Quota",
    "QuotaWindow",
    "Settings",
    "Task",
    "Tool",
    "assess",
    "clausona_run_prefix",
    "format_duration",
    "in_pool",
    "parse_time",
    "percent",
    "plan",
    "profile_from_json",
    "profiles_from_json",
    "quota_problems",
    "resolve",
    "scoped_limits_model",
]
