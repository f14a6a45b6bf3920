"""fleet: know at once which of your coding agents needs you, check their work, and retire them
without losing a line."""

from fleet._check import CheckResult, check_worker
from fleet._clock import Clock, MockClock, SystemClock
from fleet._core.events import (
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
from fleet._core.fold import Envelope, ExitInfo, Policy, WorkerState, find_envelope, fold
from fleet._core.ids import Mark, parse_mark, validate_worker_id
from fleet._core.machine import STATES, State
from fleet._errors import (
    FleetError,
    InvalidMark,
    InvalidWorkerId,
    JournalError,
    Refused,
    SettingsError,
    ToolError,
    UnknownWorker,
)
from fleet._fleet import Fleet
from fleet._report import ReportLine, build_report, format_report
from fleet._retire import Retirer

__all__ = [
    "STATES",
    "CheckResult",
    "Checked",
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
    "Mark",
    "MockClock",
    "Policy",
    "Refused",
    "Registered",
    "ReportLine",
    "RetireRefused",
    "Retired",
    "Retirer",
    "Seen",
    "SettingsError",
    "Started",
    "State",
    "SystemClock",
    "ToolError",
    "UnknownEvent",
    "UnknownWorker",
    "Unreadable",
    "Vanished",
    "WorkerState",
    "build_report",
    "check_worker",
    "find_envelope",
    "fold",
    "format_report",
    "parse_mark",
    "validate_worker_id",
]
