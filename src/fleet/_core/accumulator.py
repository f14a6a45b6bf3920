"""What a fold in progress holds: the :class:`Accumulator`, and the small frozen records it
keeps (the worker's :class:`Envelope`, the :class:`ExitInfo` of a headless run).

Kept apart from the rules that fill it (:mod:`fleet._core.fold`): the fold cache and the hub
save and resume accumulators by this shape alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs
import cattrs

from fleet._core.machine import State

MESSAGE_LIMIT: Final = 4096

_ENVELOPE = re.compile(
    r"^[\s*_`>#-]*(?P<marker>(?:FLEET|SUPERSET)_WORKER_(?P<kind>DONE|BLOCKED))[*_`]*\s*:?[*_`]*\s*"
    r"(?P<text>.*?)[\s*_`]*$"
)


@attrs.frozen(kw_only=True)
class Envelope:
    """The worker's own verdict on its turn: the last line of its final message."""

    kind: Literal["done", "blocked"]
    text: str
    marker: str


@attrs.frozen(kw_only=True)
class ExitInfo:
    exit_code: int | None
    is_error: bool
    api_error_status: int | None
    result: str | None
    usage: Mapping[str, int]
    session_id: str | None
    reason: str | None
    reset_at: float | None


def find_envelope(message: str | None) -> Envelope | None:
    """The DONE/BLOCKED envelope on the last non-empty line of ``message``, if any."""
    if not message:
        return None
    for raw in reversed(message.splitlines()):
        line = raw.strip()
        if not line:
            continue
        m = _ENVELOPE.match(line)
        if m is None:
            return None
        kind: Literal["done", "blocked"] = "done" if m["kind"] == "DONE" else "blocked"
        return Envelope(kind=kind, text=m["text"].strip(), marker=m["marker"])
    return None


def _cut(text: Any, limit: int = MESSAGE_LIMIT) -> str | None:
    if not isinstance(text, str):
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


@attrs.define(slots=True, kw_only=True, eq=True)
class Accumulator:
    """The mutable state of a fold in progress. Private to the fold and its callers' caches;
    never handed to users (they get :class:`WorkerState`)."""

    # the state and the event that entered it
    state: State = "starting"
    reason: str = "new"
    since: float = 0.0
    seq: int = 0
    live: bool | None = None
    # counts and clocks
    events: int = 0
    unreadable: int = 0
    ignored: int = 0
    unknown: int = 0
    malformed: int = 0
    last_seq: int = -1
    last_event: str | None = None
    last_event_ts: float | None = None
    last_activity: float | None = None
    activity_seq: int = 0
    seen: set[str] = attrs.field(factory=set)
    # what the registration and the host said
    tool: str | None = None
    profile: str | None = None
    model: str | None = None
    adapter: str | None = None
    handle: dict[str, str] = attrs.field(factory=dict)
    worktree: str | None = None
    branch: str | None = None
    base: str | None = None
    task: str | None = None
    permissions: dict[str, Any] = attrs.field(factory=dict)
    # what the agent said
    message: str | None = None
    envelope: Envelope | None = None
    permission_tool: str | None = None
    permission_request: str | None = None
    permission_command: str | None = None
    permission_fallback: str | None = None
    permission_mode: str | None = None
    notification: str | None = None
    waiting_for: str | None = None
    error: str | None = None
    limit_reset: float | None = None
    exit: ExitInfo | None = None
    session_id: str | None = None
    denials: tuple[str, ...] = ()
    delivery: str | None = None
    #: background tasks still running when the main turn last ended (Stop's count)
    background: int = 0
    #: the last envelope the worker wrote, with its message, while its work goes on in the
    #: background or in automatic turns that answer background tasks' notifications
    pending: Envelope | None = None
    pending_message: str | None = None
    #: the current turn was started by Claude Code itself (a task notification), not a person
    auto_turn: bool = False
    #: the wait the worker is blocked in was entered by an event that names it (a permission
    #: request for a tool, an elicitation), not only by a screen or notification saying "waiting"
    wait_named: bool = False
    # what the coordinator did
    verdict: str | None = None
    findings: tuple[str, ...] = ()
    refused: str | None = None
    checked_head: str | None = None
    reviewer: str | None = None
    follow_ups: int = 0
    retired_ref: str | None = None
    retired_note: str | None = None
    # the process
    pid: int | None = None
    start_time: int | None = None
    # the sources: whether a hook ever journaled, whether the agent's own stream did, and
    # why the supervisor thinks the hooks are off (CLAUDE_CODE_SIMPLE, --bare)
    hooks_seen: bool = False
    stream_seen: bool = False
    hooks_off: tuple[str, ...] = ()
    # the account's rate limit, as the agent last reported it in its stream
    rate_status: str | None = None
    rate_utilization: float | None = None
    rate_resets_at: float | None = None
    rate_type: str | None = None
    rate_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (for the fold cache); :meth:`from_dict` reads it back."""
        return attrs.asdict(self, value_serializer=_serialize)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Accumulator:
        """The accumulator :meth:`to_dict` saved. Raises on anything else (a cache then
        replays)."""
        return _acc_converter.structure(dict(data), cls)

    def copy(self) -> Accumulator:
        return attrs.evolve(self, seen=set(self.seen), handle=dict(self.handle))


def _serialize(_: Any, field: Any, value: Any) -> Any:
    if isinstance(value, set):
        return sorted(value)
    return value


_acc_converter = cattrs.Converter(forbid_extra_keys=True)
