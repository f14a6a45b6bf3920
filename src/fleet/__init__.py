"""fleet: know at once which of your coding agents needs you, check their work, and retire them
without losing a line."""

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

__all__ = [
    "STATES",
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
    "RetireRefused",
    "Retired",
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
    "find_envelope",
    "fold",
    "parse_mark",
    "validate_worker_id",
]
