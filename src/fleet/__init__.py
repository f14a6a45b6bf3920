"""fleet: know at once which of your coding agents needs you, check their work, and retire them
without losing a line.

Claude Code and Codex hooks append facts to one journal per worker; fleet folds each journal
into a state (starting, working, stopped, quiet, blocked, done, gone, retired) with a reason
and a mark (``worker@seq``). A coordinator waits until a worker needs it, acts, and passes the
mark back so it is not woken for it again.

    import fleet

    with fleet.Fleet() as f:                      # $FLEET_HOME, or the user state dir
        result = f.wait(timeout=600)              # blocks until someone needs you
        for w in result.attention:
            print(w.worker, w.state, w.reason, w.mark)
            if w.state == "done":
                check = fleet.check_worker(f, w.worker, commands=["pytest -q"])
                if check.ok:
                    fleet.Retirer(f).retire_worker(w.worker)
            f.seen(w.mark)

The names to start with:

    Fleet                 register, status, wait, poll, watch, seen, log
    WorkerState           one worker's state (state, reason, since, mark, ...)
    WaitResult, Transition  what wait/poll and watch return
    check_worker          verify a DONE claim (commits, clean, pushed, commands)
    Retirer               remove a checked, clean, pushed worktree (never forces)
    load_profiles, plan_tasks   profiles and routing; build_report, format_report
    FleetError            every error fleet raises on purpose (each also a builtin)
    fleet.testing         MockClock, MockRunner for tests

The command line is ``fleet`` (``fleet --help``); the README has the whole story.
"""

from typing import TYPE_CHECKING, Any

from fleet._clock import Clock, SystemClock
from fleet._core.accumulator import Envelope, ExitInfo, find_envelope
from fleet._core.events import (
    Attached,
    Checked,
    Event,
    Exited,
    FollowUpSent,
    HandedOver,
    HookEvent,
    Registered,
    Retired,
    RetireRefused,
    Seen,
    Started,
    UnknownEvent,
    Unreadable,
    Vanished,
)
from fleet._core.fold import Policy, WorkerState, fold
from fleet._core.ids import Mark, parse_mark, validate_worker_id
from fleet._core.machine import STATES, State
from fleet._errors import (
    FleetError,
    InvalidMark,
    InvalidWorkerId,
    JournalError,
    JournalGone,
    NoWorkers,
    Refused,
    SettingsError,
    ToolError,
    UnknownWorker,
)

if TYPE_CHECKING:
    from fleet._check import CheckResult, check_worker
    from fleet._core.routing import (
        Choices,
        Plan,
        PlanRow,
        Profile,
        Quota,
        QuotaWindow,
        SeenLimit,
        Settings,
        Task,
    )
    from fleet._fleet import Fleet
    from fleet._plan import TaskFile, load_task_file, load_tasks, plan_tasks
    from fleet._profiles import coordinator_profile, find_profile, load_profiles
    from fleet._report import ReportLine, build_report, format_report
    from fleet._retire import Candidate, Outcome, Retirer
    from fleet._settings import load_settings
    from fleet._watch import Transition, WaitResult

#: fleet's version (as installed), looked up on first use.
__version__: str

# Imported on first use: every `fleet` command and every hook-adjacent script imports this
# package, and most of them never need git checks, routing or reports; and importing the pure
# core (fleet._core) must not start the journal, watchdog and the adapters behind Fleet.
_LAZY = {
    "Fleet": "fleet._fleet",
    "Transition": "fleet._watch",
    "WaitResult": "fleet._watch",
    "CheckResult": "fleet._check",
    "check_worker": "fleet._check",
    "Choices": "fleet._core.routing",
    "Plan": "fleet._core.routing",
    "PlanRow": "fleet._core.routing",
    "Profile": "fleet._core.routing",
    "Quota": "fleet._core.routing",
    "QuotaWindow": "fleet._core.routing",
    "SeenLimit": "fleet._core.routing",
    "Settings": "fleet._core.routing",
    "Task": "fleet._core.routing",
    "TaskFile": "fleet._plan",
    "load_task_file": "fleet._plan",
    "load_tasks": "fleet._plan",
    "plan_tasks": "fleet._plan",
    "coordinator_profile": "fleet._profiles",
    "find_profile": "fleet._profiles",
    "load_profiles": "fleet._profiles",
    "ReportLine": "fleet._report",
    "build_report": "fleet._report",
    "format_report": "fleet._report",
    "Candidate": "fleet._retire",
    "Outcome": "fleet._retire",
    "Retirer": "fleet._retire",
    "load_settings": "fleet._settings",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        # Looked up on first use: importlib.metadata costs every hook call otherwise.
        from fleet._install import version

        globals()["__version__"] = version()
        return globals()["__version__"]
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fleet' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "STATES",
    "Attached",
    "Candidate",
    "CheckResult",
    "Checked",
    "Choices",
    "Clock",
    "Envelope",
    "Event",
    "ExitInfo",
    "Exited",
    "Fleet",
    "FleetError",
    "FollowUpSent",
    "HandedOver",
    "HookEvent",
    "InvalidMark",
    "InvalidWorkerId",
    "JournalError",
    "JournalGone",
    "Mark",
    "NoWorkers",
    "Outcome",
    "Plan",
    "PlanRow",
    "Policy",
    "Profile",
    "Quota",
    "QuotaWindow",
    "Refused",
    "Registered",
    "ReportLine",
    "RetireRefused",
    "Retired",
    "Retirer",
    "Seen",
    "SeenLimit",
    "Settings",
    "SettingsError",
    "Started",
    "State",
    "SystemClock",
    "Task",
    "TaskFile",
    "ToolError",
    "Transition",
    "UnknownEvent",
    "UnknownWorker",
    "Unreadable",
    "Vanished",
    "WaitResult",
    "WorkerState",
    "build_report",
    "check_worker",
    "coordinator_profile",
    "find_envelope",
    "find_profile",
    "fold",
    "format_report",
    "load_profiles",
    "load_settings",
    "load_task_file",
    "load_tasks",
    "parse_mark",
    "plan_tasks",
    "validate_worker_id",
]
