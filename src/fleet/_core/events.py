"""Journal events and their codec.

A journal line is one JSON object: the envelope ``v`` (schema version), ``ts`` (unix seconds, when
the event was observed), ``src`` (``claude``, ``codex``, ``fleet`` or an adapter name) and ``type``
(the event name), then the event's own fields.

Hook events keep the agent's hook name as their type and carry a bounded set of fields; the hook
records facts and every interpretation happens here and in the fold, so a change in an agent's
payloads is a change in the reader, never a journal migration.

Decoding never raises: a line that is not a JSON object with a valid envelope becomes
:class:`Unreadable`, and a type this version does not know becomes :class:`UnknownEvent` with its
raw data kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

import attrs
import cattrs
import orjson

from fleet._core.fields import (
    COUNT_MAX,
    INT_MAX,
    INT_MIN,
    PID_MAX,
    TS_MAX,
    TS_MIN,
    dict_field,
    int_field,
    is_pid,
    is_ts,
    str_field,
)
from fleet._errors import one_line

SCHEMA_VERSION: Final = 1
#: The agent's own event stream, read live by fleet's supervisor (:mod:`fleet._core.stream`):
#: its facts are journaled as the hooks name them, so the fold reads both alike.
STREAM_SRC: Final = "stream"
HOOK_SOURCES: Final = frozenset({"claude", "codex", STREAM_SRC})

JSON: TypeAlias = Any

#: The fields a hook may record, beyond the envelope. Everything else in a payload is dropped by
#: the hook program; a reader also drops anything else it finds, so a journal written by a newer
#: hook cannot smuggle large values into memory.
HOOK_FIELDS: Final = (
    "session_id",
    "turn_id",
    "tool_name",
    "tool_use_id",
    "notification_type",
    "message",
    "error",
    "error_details",
    "reason",
    "source",
    "trigger",
    "agent_id",
    "agent_type",
    "stop_hook_active",
    "permission_mode",
    "model",
    "cwd",
    "background_tasks",
    "last_assistant_message",
    "detail",
    "origin",
    "agent_pid",
    "agent_start",
    "to_model",
    "request",
)


@attrs.frozen(kw_only=True)
class HookEvent:
    """An agent hook firing (``src`` claude or codex); ``hook`` is the agent's hook name."""

    ts: float
    src: str
    hook: str
    data: Mapping[str, JSON] = attrs.field(factory=dict)

    @property
    def type(self) -> str:
        return self.hook

    def get(self, key: str) -> JSON:
        """The raw value of ``key``, of whatever type the line held (for display; the fold
        reads every field through :meth:`text` and :meth:`whole`)."""
        return self.data.get(key)

    def text(self, key: str) -> str | None:
        """The field when it is a string, else None."""
        return str_field(self.data, key)

    def whole(self, key: str, low: int = INT_MIN, high: int = INT_MAX) -> int | None:
        """The field when it is a whole number in ``[low, high]``, else None."""
        return int_field(self.data, key, low, high)

    def detail_text(self, key: str) -> str | None:
        """A string in the line's ``detail`` summary (the redacted tool input), else None."""
        detail = dict_field(self.data, "detail")
        return str_field(detail, key) if detail is not None else None


#: The hook fields the fold reads, and what each must be to be used: a string, or a whole
#: number in a range. A test checks that this lists every field the fold and the classifier
#: read, and no other.
HOOK_READS: Final[Mapping[str, tuple[type, int, int]]] = {
    "session_id": (str, 0, 0),
    "permission_mode": (str, 0, 0),
    "notification_type": (str, 0, 0),
    "tool_name": (str, 0, 0),
    "error": (str, 0, 0),
    "source": (str, 0, 0),
    "origin": (str, 0, 0),
    "message": (str, 0, 0),
    "last_assistant_message": (str, 0, 0),
    "to_model": (str, 0, 0),
    "request": (str, 0, 0),
    "background_tasks": (int, 0, COUNT_MAX),
    "agent_pid": (int, 1, PID_MAX),
    "agent_start": (int, INT_MIN, INT_MAX),
}
#: Read from every hook line (the session and the permission mode it reports).
EVERY_HOOK_READS: Final = ("session_id", "permission_mode")
#: Read beyond those, by hook: a line whose field read here holds a value the fold cannot
#: use is counted (``malformed``), the field ignored. A field the fold does not read for that
#: hook is not its business, whatever it holds.
HOOK_READS_BY_HOOK: Final[Mapping[str, tuple[str, ...]]] = {
    "SessionStart": ("source", "agent_pid", "agent_start"),
    "Stop": ("last_assistant_message", "background_tasks"),
    "StopFailure": ("error", "last_assistant_message"),
    "SessionEnd": ("error", "last_assistant_message"),
    "UserPromptSubmit": ("origin",),
    "UserPromptExpansion": ("origin",),
    "PermissionRequest": ("tool_name", "request"),
    "Notification": ("notification_type", "message"),
    "PostModelSwitch": ("to_model",),
}


def unusable(value: JSON, key: str) -> bool:
    """Whether ``value`` of the hook field ``key`` (one of :data:`HOOK_READS`) is present and
    of a type or range the fold cannot use."""
    if value is None:
        return False
    kind, low, high = HOOK_READS[key]
    number: Any = value
    return type(value) is not kind or (kind is int and not low <= number <= high)


def unusable_in(data: Mapping[str, JSON], key: str) -> bool:
    return unusable(data.get(key), key)


def misfits(hook: str, data: Mapping[str, JSON]) -> bool:
    """Whether a hook line holds, in a field the fold reads for that hook, a value it cannot
    use (JSON null is the field's absence)."""
    return any(unusable(data.get(key), key)
               for key in (*EVERY_HOOK_READS, *HOOK_READS_BY_HOOK.get(hook, ())))


def plain_envelope(obj: Mapping[str, JSON], kinds: frozenset[str]) -> tuple[str, float] | None:
    """The type and time of a raw hook line whose type is one of ``kinds`` and whose envelope
    is valid (what :func:`decode_obj` would take), else None: the fold's fast path, which
    reads such lines without building an event. Each member is type-checked as it is read."""
    kind, src, version = obj.get("type"), obj.get("src"), obj.get("v")
    ts: Any = obj.get("ts")
    if (
        type(kind) is str
        and kind in kinds
        and type(src) is str
        and src in HOOK_SOURCES
        and type(version) is int
        and type(ts) in _NUMBER
        and TS_MIN <= ts <= TS_MAX
    ):
        return kind, float(ts)
    return None


def _pid(_: Any, attribute: Any, value: Any) -> None:
    if value is not None and not is_pid(value):
        raise ValueError(f"{attribute.name}: not a process id: {value}")


@attrs.frozen(kw_only=True)
class Registered:
    """The coordinator (or an adapter) registered a worker and where it works."""

    ts: float
    src: str = "fleet"
    tool: str | None = None
    profile: str | None = None
    model: str | None = None
    adapter: str | None = None
    handle: dict[str, str] = attrs.field(factory=dict)
    worktree: str | None = None
    branch: str | None = None
    base: str | None = None
    task: str | None = None
    #: the permission policy it was started with, in its tool's terms (``mode`` and
    #: ``allowed_tools`` for Claude, ``sandbox`` and ``approval`` for Codex)
    permissions: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Attached:
    """The host reported more handles for a worker after its registration (the terminal a
    launch opened, say). Merged into the registered handles; the state does not change."""

    ts: float
    src: str = "fleet"
    handle: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Started:
    """A worker process was launched; ``start_time`` tells a reused pid apart."""

    ts: float
    src: str = "fleet"
    pid: int = attrs.field(validator=_pid)
    start_time: int | None = None
    attempt: int = 1


@attrs.frozen(kw_only=True)
class Exited:
    """A supervised worker process ended, with its parsed final result."""

    ts: float
    src: str = "fleet"
    exit_code: int | None = None
    is_error: bool = False
    api_error_status: int | None = None
    result: str | None = None
    usage: dict[str, int] = attrs.field(factory=dict)
    session_id: str | None = None
    reason: str | None = None
    reset_at: float | None = None
    #: The run's last final message that carried a DONE/BLOCKED envelope, when the run went on
    #: after it only in automatic turns (Claude Code answering its own background tasks'
    #: notifications), so ``result``, the last turn's, no longer shows the worker's verdict.
    claim: str | None = None
    #: tool calls the run's permission policy denied, as ``Tool(what)`` (Claude Code reports
    #: them only in its result: no hook fires for a denial in dontAsk or ``-p``)
    denials: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class TurnEnded:
    """A turn's result, read live from the agent's own stream (``src`` stream): what its Stop
    hook says, plus the tool calls the permission policy denied (which no hook reports)."""

    ts: float
    src: str = "stream"
    result: str | None = None
    denials: tuple[str, ...] = ()
    #: ``task-notification`` for a turn Claude Code started itself (a background task ended)
    origin: str | None = None
    session_id: str | None = None
    #: background tasks (subagents, shells) the stream last said were running
    background: int = 0


@attrs.frozen(kw_only=True)
class RateLimited:
    """The agent's own report of its account's rate limit (Claude Code's ``rate_limit_event``):
    ``allowed``, ``allowed_warning`` or ``rejected``, with the reset and utilization when
    given. A rejected one blocks the worker until the reset; every one is a quota reading."""

    ts: float
    src: str = "stream"
    status: str
    resets_at: float | None = None
    utilization: float | None = None
    limit_type: str | None = None


@attrs.frozen(kw_only=True)
class HooksOff:
    """The supervisor saw the agent run in a mode where no hook runs (``why``: the
    ``CLAUDE_CODE_SIMPLE`` variable, ``--bare`` on its command line)."""

    ts: float
    src: str = "stream"
    why: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class AgentStatus:
    """What the agent itself says of a live session in its own status file (Claude Code's
    ``<config dir>/sessions/<pid>.json``): ``busy``, ``idle``, or ``waiting`` for a person, and
    for what (``waiting_for``: "permission prompt", "input needed", "dialog open" ...).

    Journaled by fleet's session monitor, a second first-party source beside the hooks: some
    screens that wait for a person (auto mode's) fire no hook at all. ``ts`` is the time the
    agent wrote the status."""

    ts: float
    src: str = "monitor"
    status: str
    waiting_for: str | None = None
    pid: int | None = None
    session_id: str | None = None


@attrs.frozen(kw_only=True)
class Vanished:
    """The worker's known process is dead and it never said goodbye."""

    ts: float
    src: str = "fleet"
    pid: int | None = attrs.field(default=None, validator=_pid)


@attrs.frozen(kw_only=True)
class FollowUpSent:
    """The coordinator sent the worker more to do; ``seen`` is the mark it was answering."""

    ts: float
    src: str = "fleet"
    text: str | None = None
    file: str | None = None
    seen: str | None = None


@attrs.frozen(kw_only=True)
class HandedOver:
    """The task moved to another profile or model, in the same worktree."""

    ts: float
    src: str = "fleet"
    profile: str | None = None
    model: str | None = None
    handle: dict[str, str] = attrs.field(factory=dict)
    reason: str | None = None


@attrs.frozen(kw_only=True)
class Seen:
    """The coordinator handled a state: its mark no longer needs attention."""

    ts: float
    src: str = "fleet"
    mark: str


@attrs.frozen(kw_only=True)
class Checked:
    """The verdict of checking a worker's claim."""

    ts: float
    src: str = "fleet"
    verdict: str
    findings: tuple[str, ...] = ()
    base: str | None = None
    head: str | None = None
    #: the blind reviewer that judged the work besides the commands (its profile or
    #: endpoint), and its verdict on each criterion (``criterion``, ``verdict``, ``reason``)
    reviewer: str | None = None
    criteria: tuple[dict[str, str], ...] = ()


@attrs.frozen(kw_only=True)
class RetireRefused:
    ts: float
    src: str = "fleet"
    reason: str


@attrs.frozen(kw_only=True)
class Retired:
    ts: float
    src: str = "fleet"
    ref: str | None = None
    #: what changed between retire's last check and the delete (a branch that moved), if
    #: anything did: the report says so instead of "clean and pushed"
    note: str | None = None


@attrs.frozen(kw_only=True)
class Answered:
    """A permission request was answered: by the coordinator (``by`` names who), by one of the
    worker's rules (``rule``), or by nobody within the timeout (``by`` ``timeout``; ``decision``
    ``dialog`` when the agent's own dialog took over, ``deny`` for a headless run). ``request``
    is the id the hook journaled with its PermissionRequest (none for a rule's answer: no
    request was opened). ``always`` is the rule an answer added for the rest of the session."""

    ts: float
    src: str = "fleet"
    request: str | None = None
    decision: str
    by: str
    tool: str | None = None
    reason: str | None = None
    rule: str | None = None
    always: str | None = None


@attrs.frozen(kw_only=True)
class UnknownEvent:
    """A well-formed line whose type this version does not know, kept with its raw data."""

    ts: float
    src: str
    type: str
    raw: Mapping[str, JSON] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Unreadable:
    """A line that does not decode. It is kept (and counted), never fatal."""

    ts: float | None = None
    src: str = ""
    line: str
    error: str

    @property
    def type(self) -> str:
        return "unreadable"


CoordinatorEvent: TypeAlias = (
    Registered
    | Attached
    | Started
    | Exited
    | AgentStatus
    | TurnEnded
    | RateLimited
    | HooksOff
    | Vanished
    | FollowUpSent
    | HandedOver
    | Seen
    | Checked
    | RetireRefused
    | Retired
    | Answered
)
Event: TypeAlias = HookEvent | CoordinatorEvent | UnknownEvent | Unreadable

#: The explicit tagged union of coordinator events: the journal ``type`` of each class.
TAGS: Final[Mapping[str, type[CoordinatorEvent]]] = {
    "registered": Registered,
    "attached": Attached,
    "started": Started,
    "exited": Exited,
    "agent_status": AgentStatus,
    "turn_ended": TurnEnded,
    "rate_limited": RateLimited,
    "hooks_off": HooksOff,
    "vanished": Vanished,
    "follow_up_sent": FollowUpSent,
    "handed_over": HandedOver,
    "seen": Seen,
    "checked": Checked,
    "retire_refused": RetireRefused,
    "retired": Retired,
    "answered": Answered,
}
_TAG_OF: Final = {cls: tag for tag, cls in TAGS.items()}
_ENVELOPE: Final = frozenset({"v", "ts", "src", "type"})
_MAX_KEPT_LINE: Final = 64 * 1024

converter = cattrs.Converter(forbid_extra_keys=False)

#: Whole numbers an event may carry (pids, exit codes, counts): what a 64-bit field holds, so
#: every event read back can be written again (orjson, like most JSON tools, stops there).
_INT_RANGE: Final = range(-(2**63), 2**64)


def _structure_int(value: Any, _: Any) -> int:
    # cattrs would take int(value) of anything: "12", true, and 1e20 (parsed as a float) alike.
    if type(value) is int and value in _INT_RANGE:
        return value
    if type(value) is float and value.is_integer() and -(2.0**63) <= value < 2.0**64:
        return int(value)
    raise ValueError(f"not a whole number fleet can keep: {str(value)[:40]}")


def _structure_str(value: Any, _: Any) -> str:
    # cattrs would take str(value) of anything: an object would become its repr.
    if type(value) is str:
        return value
    raise ValueError(f"not a string: {_short(value)[:40]}")


def _structure_float(value: Any, _: Any) -> float:
    # Every float of an event is a time: one a clock can show, or the line is unreadable.
    if is_ts(value):
        return float(value)
    raise ValueError(f"not a time fleet can keep: {_short(value)[:40]}")


def _structure_bool(value: Any, _: Any) -> bool:
    if type(value) is bool:
        return value
    raise ValueError(f"not true or false: {_short(value)[:40]}")


def _structure_strings(value: Any, _: Any) -> tuple[str, ...]:
    # A string is iterable too: cattrs would keep its characters.
    if type(value) is not list:
        raise ValueError("not a list")
    return tuple(_structure_str(item, str) for item in value)


def _structure_criteria(value: Any, _: Any) -> tuple[dict[str, str], ...]:
    if type(value) is not list:
        raise ValueError("not a list")
    return tuple(converter.structure(item, dict[str, str]) for item in value)


def _structure_mapping(value: Any, cls: Any) -> Any:
    if type(value) is not dict:
        raise ValueError("not an object")
    return _dict_converter.structure(value, cls)


converter.register_structure_hook(int, _structure_int)
converter.register_structure_hook(str, _structure_str)
converter.register_structure_hook(float, _structure_float)
converter.register_structure_hook(bool, _structure_bool)

#: The mappings' own structuring, behind the check that the value is an object at all.
_dict_converter = converter.copy()
converter.register_structure_hook_func(lambda t: t == tuple[str, ...], _structure_strings)
converter.register_structure_hook_func(
    lambda t: t == tuple[dict[str, str], ...], _structure_criteria
)
_MAPPINGS: Final = (dict[str, str], dict[str, int], dict[str, Any])
converter.register_structure_hook_func(lambda t: t in _MAPPINGS, _structure_mapping)


def event_type(event: Event) -> str:
    """The journal ``type`` of an event."""
    if isinstance(event, HookEvent):
        return event.hook
    if isinstance(event, UnknownEvent | Unreadable):
        return event.type
    return _TAG_OF[type(event)]


def _structure_event(obj: Any, _: Any) -> Event:
    return decode_obj(obj)


converter.register_structure_hook(Event, _structure_event)


def decode_obj(obj: Any, line: str = "") -> Event:
    """Turn one decoded JSON value into an event; never raises."""
    return _decode(dict(obj) if isinstance(obj, dict) else obj, line)


def _decode(obj: Any, line: str) -> Event:
    # The hot path of every reader (a cold status folds a million lines): exact type checks
    # and key-set tests in C, and the decoded dict reused in place. ``obj`` must be ours.
    if type(obj) is not dict:
        return Unreadable(line=line or _short(obj), error="not a JSON object")
    raw_ts: Any = obj.get("ts")
    src, kind, version = obj.get("src"), obj.get("type"), obj.get("v")
    if (
        not is_ts(raw_ts)
        or type(src) is not str
        or type(kind) is not str
        or type(version) is not int
    ):
        return Unreadable(line=line or _short(obj), error="missing or invalid envelope")
    ts = float(raw_ts)
    if src in HOOK_SOURCES and (src != STREAM_SRC or kind not in TAGS):
        del obj["v"], obj["ts"], obj["src"], obj["type"]
        if not obj.keys() <= _HOOK_FIELD_SET:
            obj = {k: v for k, v in obj.items() if k in _HOOK_FIELD_SET}
        return _new_hook_event(ts, src, kind, obj)
    cls = TAGS.get(kind)
    if cls is None or version > SCHEMA_VERSION:
        raw = {k: v for k, v in obj.items() if k not in _ENVELOPE}
        return UnknownEvent(ts=ts, src=src, type=kind, raw=raw)
    fields = {k: v for k, v in obj.items() if k not in _ENVELOPE}
    fields["ts"] = ts
    fields["src"] = src
    try:
        return converter.structure(fields, cls)
    except Exception as exc:  # cattrs raises several types; any of them means "unreadable"
        return Unreadable(ts=ts, src=src, line=line or _short(obj), error=_why(exc))


_HOOK_FIELD_SET: Final = frozenset(HOOK_FIELDS)
_NUMBER: Final = (float, int)


def _why(exc: Exception) -> str:
    """One line naming each field that did not fit (cattrs groups them)."""
    if isinstance(exc, cattrs.ClassValidationError):
        with contextlib.suppress(Exception):
            return " ".join("; ".join(cattrs.transform_error(exc)).split())[:300]
    return one_line(exc, limit=300)
_new = object.__new__
_set = object.__setattr__


def _new_hook_event(ts: float, src: str, hook: str, data: dict[str, JSON]) -> HookEvent:
    # Same result as HookEvent(...), without attrs' per-field frozen-setattr checks: the values
    # were validated just above.
    event: HookEvent = _new(HookEvent)
    _set(event, "ts", ts)
    _set(event, "src", src)
    _set(event, "hook", hook)
    _set(event, "data", data)
    return event


def decode_line(line: bytes) -> Event:
    """Decode one journal line (without its newline); never raises."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return Unreadable(line=_text(line), error=f"invalid JSON: {exc}")
    return decode_loaded(obj, line)


def decode_loaded(obj: Any, line: bytes) -> Event:
    """The event of a line already parsed into ``obj`` (which this may reuse); never raises."""
    return _decode(obj, "" if type(obj) is dict else _text(line))


def encode_obj(event: Event) -> dict[str, JSON]:
    """The JSON object of an event, envelope first."""
    if isinstance(event, Unreadable):
        raise ValueError("an unreadable line cannot be written back")
    head: dict[str, JSON] = {"v": SCHEMA_VERSION, "ts": event.ts, "src": event.src}
    if isinstance(event, HookEvent):
        head["type"] = event.hook
        head.update(event.data)
        return head
    if isinstance(event, UnknownEvent):
        head["type"] = event.type
        head.update(event.raw)
        return head
    head["type"] = _TAG_OF[type(event)]
    body = converter.unstructure(event)
    for key, value in body.items():
        if key in ("ts", "src") or value is None or value in ({}, [], ()):
            continue
        head[key] = value
    return head


def encode_line(event: Event) -> bytes:
    """One journal line, newline included."""
    return orjson.dumps(encode_obj(event)) + b"\n"


def _text(line: bytes) -> str:
    return line[:_MAX_KEPT_LINE].decode("utf-8", errors="replace")


def _short(obj: Any) -> str:
    try:
        return orjson.dumps(obj)[:_MAX_KEPT_LINE].decode("utf-8", errors="replace")
    except TypeError:
        return repr(obj)[:_MAX_KEPT_LINE]

