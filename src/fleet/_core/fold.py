"""The fold: a worker's state as a pure function of its journal, the time, and a policy.

``fold(worker, events, now, policy)`` replays events through :func:`step` into an accumulator and
takes a :class:`WorkerState` snapshot of it. The accumulator is mutable and private; everything
handed out is frozen. Feeding the same events in any number of pieces gives the same snapshot,
which is what lets the tailer fold incrementally and a cache resume from a saved accumulator.

Rules beyond the table in :mod:`fleet._core.machine`:

- The fold never raises on journal data. An event with no move from the current state changes
  nothing and is counted in ``ignored``; an unreadable line is counted in ``unreadable``.
- Activity observed (by its ``ts``) no later than the event that entered stopped, blocked, done or
  gone does not bring the worker back to working: hooks can arrive late, or out of order when run
  async.
- Tool hooks (async in Claude Code, so their ``ts`` can come after a later event's) never resume
  a turn that ended (stopped, done, gone, blocked by the worker or a limit): a new prompt or
  session does. A permission dialog is answered by the tool running (PostToolUse), not by a
  PreToolUse that ran late.
- An event that would enter the state and reason the worker is already in changes nothing, so a
  repeated notification does not produce a new mark.
- A session that ends after an interruption or an API error keeps that more telling state (with
  ``live`` false) rather than becoming a plain ``gone``.
- ``quiet`` is never stored: a starting or working worker with no activity for ``quiet_after``
  seconds reads as quiet, with the mark ``<worker>@<seq of last activity>q``.
- The coordinator's own verdict (``checked``) enters a new done reason whose mark counts as seen,
  and a follow-up marks the state it answered as seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

import attrs
import orjson

from fleet._core.events import (
    HOOK_SOURCES,
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
    Unreadable,
    Vanished,
    decode_line,
    decode_loaded,
    event_type,
)
from fleet._core.ids import format_mark
from fleet._core.machine import ATTENTION_STATES, State, move

DEFAULT_QUIET_AFTER: Final = 300.0
MESSAGE_LIMIT: Final = 4096

_ENVELOPE = re.compile(
    r"^[\s*_`>#-]*(?P<marker>(?:FLEET|SUPERSET)_WORKER_(?P<kind>DONE|BLOCKED))[*_`]*\s*:?[*_`]*\s*"
    r"(?P<text>.*?)[\s*_`]*$"
)

ACTIVITY_HOOKS: Final = frozenset(
    {
        "UserPromptSubmit",
        "UserPromptExpansion",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PostToolBatch",
        "PermissionDenied",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
        "TaskCreated",
        "TaskCompleted",
        "ElicitationResult",
        "CwdChanged",
        "FileChanged",
    }
)
_LIMIT_ERRORS: Final = ("rate_limit", "usage_limit", "limit", "quota", "billing")


@attrs.frozen(kw_only=True)
class Policy:
    """How journals are read: ``quiet_after`` seconds without activity make a running worker
    quiet."""

    quiet_after: float = DEFAULT_QUIET_AFTER


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


@attrs.frozen(kw_only=True)
class WorkerState:
    """A frozen snapshot of one worker, as of ``now``."""

    worker: str
    state: State
    reason: str
    since: float
    seq: int
    mark: str
    needs_attention: bool
    seen: bool
    quiet_at: float | None
    live: bool | None
    tool: str | None = None
    profile: str | None = None
    model: str | None = None
    adapter: str | None = None
    handle: Mapping[str, str] = attrs.field(factory=dict)
    worktree: str | None = None
    branch: str | None = None
    base: str | None = None
    task: str | None = None
    last_event: str | None = None
    last_event_ts: float | None = None
    last_activity: float | None = None
    events: int = 0
    unreadable: int = 0
    ignored: int = 0
    message: str | None = None
    envelope: Envelope | None = None
    permission_tool: str | None = None
    notification: str | None = None
    error: str | None = None
    limit_reset: float | None = None
    exit: ExitInfo | None = None
    verdict: str | None = None
    findings: tuple[str, ...] = ()
    pid: int | None = None
    start_time: int | None = None
    refused: str | None = None
    session_id: str | None = None


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


def _is_limit(error: str) -> bool:
    lowered = error.lower()
    return any(word in lowered for word in _LIMIT_ERRORS)


# The accumulator's fields, in the order they are saved by to_dict().
_ACC_FIELDS: Final = (
    "state",
    "reason",
    "since",
    "seq",
    "live",
    "events",
    "unreadable",
    "ignored",
    "last_seq",
    "last_event",
    "last_event_ts",
    "last_activity",
    "activity_seq",
    "seen",
    "tool",
    "profile",
    "model",
    "adapter",
    "handle",
    "worktree",
    "branch",
    "base",
    "task",
    "message",
    "envelope",
    "permission_tool",
    "notification",
    "error",
    "limit_reset",
    "exit",
    "verdict",
    "findings",
    "pid",
    "start_time",
    "refused",
    "session_id",
)


class Accumulator:
    """The mutable state of a fold in progress. Private to the fold and its callers' caches;
    never handed to users (they get :class:`WorkerState`)."""

    __slots__ = _ACC_FIELDS

    def __init__(self) -> None:
        self.state: State = "starting"
        self.reason = "new"
        self.since = 0.0
        self.seq = 0
        self.live: bool | None = None
        self.events = 0
        self.unreadable = 0
        self.ignored = 0
        self.last_seq = -1
        self.last_event: str | None = None
        self.last_event_ts: float | None = None
        self.last_activity: float | None = None
        self.activity_seq = 0
        self.seen: set[str] = set()
        self.tool: str | None = None
        self.profile: str | None = None
        self.model: str | None = None
        self.adapter: str | None = None
        self.handle: dict[str, str] = {}
        self.worktree: str | None = None
        self.branch: str | None = None
        self.base: str | None = None
        self.task: str | None = None
        self.message: str | None = None
        self.envelope: Envelope | None = None
        self.permission_tool: str | None = None
        self.notification: str | None = None
        self.error: str | None = None
        self.limit_reset: float | None = None
        self.exit: ExitInfo | None = None
        self.verdict: str | None = None
        self.findings: tuple[str, ...] = ()
        self.pid: int | None = None
        self.start_time: int | None = None
        self.refused: str | None = None
        self.session_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in _ACC_FIELDS}
        out["seen"] = sorted(self.seen)
        out["findings"] = list(self.findings)
        out["envelope"] = attrs.asdict(self.envelope) if self.envelope else None
        out["exit"] = attrs.asdict(self.exit) if self.exit else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Accumulator:
        acc = cls()
        for name in _ACC_FIELDS:
            if name in data:
                setattr(acc, name, data[name])
        acc.seen = set(data.get("seen", ()))
        acc.findings = tuple(data.get("findings", ()))
        acc.handle = dict(data.get("handle") or {})
        env = data.get("envelope")
        acc.envelope = Envelope(**env) if env else None
        ex = data.get("exit")
        acc.exit = ExitInfo(**ex) if ex else None
        return acc

    def copy(self) -> Accumulator:
        other = Accumulator()
        for name in _ACC_FIELDS:
            setattr(other, name, getattr(self, name))
        other.seen = set(self.seen)
        other.handle = dict(self.handle)
        return other


def _classify_hook(event: HookEvent, acc: Accumulator) -> tuple[str, str] | None:
    hook = event.hook
    if hook in ACTIVITY_HOOKS:
        return ("activity", "active")
    if hook == "SessionStart":
        return ("activity", "active") if event.get("source") == "compact" else ("start", "session")
    if hook == "Stop":
        envelope = find_envelope(event.text("last_assistant_message"))
        if envelope is None:
            return ("turn_end", "turn_end")
        return ("claim", "claimed") if envelope.kind == "done" else ("block", "worker")
    if hook == "PermissionRequest":
        return ("block", "permission")
    if hook == "Notification":
        kind = event.get("notification_type")
        if kind == "permission_prompt":
            return ("block", "permission")
        if kind == "elicitation_dialog":
            return ("block", "question")
        if kind == "idle_prompt":
            return ("idle", "turn_end")
        if kind == "elicitation_response":
            return ("activity", "active")
        return None
    if hook == "Elicitation":
        return ("block", "question")
    if hook == "StopFailure":
        error = event.text("error") or "unknown"
        if _is_limit(error):
            return ("limit", "limit")
        return ("api_error", f"api_error:{error}")
    if hook == "Interrupt":
        return ("interrupt", "interrupted")
    if hook == "SessionEnd":
        return ("end", "ended")
    return None


def _classify_exit(event: Exited, acc: Accumulator) -> tuple[str, str]:
    if event.reason in ("stopped", "timeout"):
        return ("terminate", event.reason)
    if event.reason == "limit" or event.api_error_status == 429:
        return ("limit", "limit")
    envelope = find_envelope(event.result)
    if envelope is not None and not event.is_error and event.exit_code in (0, None):
        return ("claim", "claimed") if envelope.kind == "done" else ("block", "worker")
    if event.is_error and event.api_error_status is not None:
        return ("api_error", f"api_error:{event.api_error_status}")
    return ("end", f"exited:{event.exit_code if event.exit_code is not None else 'unknown'}")


#: Claude Code runs these hooks async (fleet installs them so): under load one can start, and
#: take its timestamp, after the hook of a later event (the turn's Stop, a PermissionRequest, even
#: SessionEnd), so its ``ts`` cannot tell that it was observed earlier.
_ASYNC_TOOL_HOOKS: Final = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})


def _late_tool_hook(event: Event, acc: Accumulator) -> bool:
    """Whether a tool hook belongs to what came before the current state: a turn that ended
    (stopped, done, gone, the worker's own BLOCKED or a limit) resumes only with a new prompt or
    session, and a pending permission is answered by the tool running (PostToolUse), not by
    the PreToolUse that preceded its dialog."""
    if not isinstance(event, HookEvent) or event.hook not in _ASYNC_TOOL_HOOKS:
        return False
    if acc.state in ("stopped", "done", "gone"):
        return True
    if acc.state == "blocked":
        return acc.reason not in ("permission", "question") or event.hook == "PreToolUse"
    return False


#: A prompt starts a new turn: its hook runs synchronously, so journal order is the truth, and
#: its timestamp (the hook's start, floored to a clock tick) may read a few milliseconds earlier
#: than a coordinator event journaled just before it, such as the verdict it answers.
_NEW_TURN_HOOKS: Final = frozenset({"UserPromptSubmit", "UserPromptExpansion"})


def _new_turn(event: Event) -> bool:
    return isinstance(event, HookEvent) and event.hook in _NEW_TURN_HOOKS


def _touch(acc: Accumulator, ts: float) -> None:
    # A late hook (async, or delayed) must not move the clock of quiet backwards.
    if acc.last_activity is None or ts > acc.last_activity:
        acc.last_activity = ts
    acc.activity_seq = acc.last_seq


def _record(event: Event, acc: Accumulator) -> tuple[str, str] | None:
    """Record what the event tells, and say which move it asks for."""
    if isinstance(event, HookEvent):
        _touch(acc, event.ts)
        session = event.text("session_id")
        if session:
            acc.session_id = session
        hook = event.hook
        if hook in ("Stop", "StopFailure"):
            acc.message = _cut(event.get("last_assistant_message"))
            acc.envelope = find_envelope(acc.message) if hook == "Stop" else None
            if hook == "StopFailure":
                acc.error = event.text("error")
        elif hook == "PermissionRequest":
            acc.permission_tool = event.text("tool_name")
        elif hook == "Notification":
            acc.notification = _cut(event.get("message"), 500)
        elif hook == "SessionStart":
            acc.live = True
        elif hook == "SessionEnd":
            acc.live = False
        return _classify_hook(event, acc)
    if isinstance(event, Registered):
        _touch(acc, event.ts)
        for name in ("tool", "profile", "model", "adapter", "worktree", "branch", "base", "task"):
            value = getattr(event, name)
            if value is not None:
                setattr(acc, name, value)
        if event.handle:
            acc.handle = dict(event.handle)
        return ("register", "registered")
    if isinstance(event, Attached):
        acc.handle = {**acc.handle, **event.handle}
        return None
    if isinstance(event, Started):
        _touch(acc, event.ts)
        acc.pid, acc.start_time, acc.live = event.pid, event.start_time, True
        return ("start", "launched")
    if isinstance(event, Exited):
        _touch(acc, event.ts)
        acc.live = False
        acc.exit = ExitInfo(
            exit_code=event.exit_code,
            is_error=event.is_error,
            api_error_status=event.api_error_status,
            result=_cut(event.result),
            usage=dict(event.usage),
            session_id=event.session_id,
            reason=event.reason,
            reset_at=event.reset_at,
        )
        if event.result:
            acc.message = _cut(event.result)
            acc.envelope = find_envelope(acc.message)
        if event.reset_at is not None:
            acc.limit_reset = event.reset_at
        if event.session_id:
            acc.session_id = event.session_id
        return _classify_exit(event, acc)
    if isinstance(event, Vanished):
        acc.live = False
        return ("terminate", "vanished")
    if isinstance(event, HandedOver):
        _touch(acc, event.ts)
        if event.profile is not None:
            acc.profile = event.profile
        if event.model is not None:
            acc.model = event.model
        if event.handle:
            acc.handle = dict(event.handle)
        acc.verdict, acc.findings = None, ()
        return ("hand_over", "handed_over")
    if isinstance(event, Seen):
        acc.seen.add(event.mark)
        return None
    if isinstance(event, FollowUpSent):
        if event.seen:
            acc.seen.add(event.seen)
        return None
    if isinstance(event, Checked):
        acc.verdict, acc.findings = event.verdict, tuple(event.findings)
        return ("verdict", "checked" if event.verdict == "checked" else "failed")
    if isinstance(event, RetireRefused):
        acc.refused = event.reason
        return None
    if isinstance(event, Retired):
        return ("retire", "retired")
    return None


def step(acc: Accumulator, seq: int, event: Event, worker: str = "") -> Accumulator:
    """Apply one journal event (the ``seq``-th line) to the accumulator, in place; returns it."""
    acc.events += 1
    acc.last_seq = seq
    if (
        type(event) is HookEvent
        and acc.state == "working"
        and event.hook in ACTIVITY_HOOKS
        and acc.last_event is not None
    ):
        # The common case, by far: more activity from a working worker. It moves nothing but
        # the clocks, exactly as the general path below would.
        acc.last_event, acc.last_event_ts = event.hook, event.ts
        _touch(acc, event.ts)
        session = event.data.get("session_id")
        if session and type(session) is str:
            acc.session_id = session
        return acc
    if isinstance(event, Unreadable):
        acc.unreadable += 1
        return acc
    if acc.last_event is None:
        acc.since, acc.seq = event.ts, seq
    acc.last_event = event_type(event)
    acc.last_event_ts = event.ts
    if acc.state == "retired":
        acc.ignored += 1
        return acc
    wanted = _record(event, acc)
    if wanted is None:
        return acc
    trigger, reason = wanted
    dest = move(trigger, acc.state)
    if dest is None:
        acc.ignored += 1
        return acc
    if (
        trigger == "activity"
        and acc.state not in ("starting", "working")
        and event.ts <= acc.since
        and not _new_turn(event)
    ):
        acc.ignored += 1
        return acc
    if trigger == "activity" and _late_tool_hook(event, acc):
        acc.ignored += 1
        return acc
    if trigger == "end" and acc.state == "stopped" and acc.reason != "turn_end":
        return acc
    if dest == acc.state and (reason == acc.reason or trigger == "activity"):
        return acc
    acc.state, acc.reason, acc.since, acc.seq = dest, reason, event.ts, seq
    if trigger == "verdict" and worker:
        acc.seen.add(format_mark(worker, seq))
    return acc


def feed(acc: Accumulator, events: Iterable[tuple[int, Event]], worker: str = "") -> Accumulator:
    for seq, event in events:
        step(acc, seq, event, worker)
    return acc


def feed_lines(acc: Accumulator, lines: Iterable[bytes], seq: int, worker: str = "") -> Accumulator:
    """Fold raw journal lines (without newlines), the first being line ``seq``.

    Gives exactly what decoding each line and calling :func:`step` gives (a test compares them
    on random journals), but folds the common line, more activity from a working worker,
    straight from the parsed JSON: a cold ``fleet status`` reads a million of them."""
    loads = orjson.loads
    for line in lines:
        try:
            obj = loads(line)
        except orjson.JSONDecodeError:
            step(acc, seq, decode_line(line), worker)
            seq += 1
            continue
        if acc.state == "working" and acc.last_event is not None and type(obj) is dict:
            kind, src = obj.get("type"), obj.get("src")
            raw_ts: Any = obj.get("ts")
            if (
                type(kind) is str
                and kind in ACTIVITY_HOOKS
                and type(src) is str
                and src in HOOK_SOURCES
                and type(raw_ts) in _NUMBER
                and type(obj.get("v")) is int
            ):
                ts = float(raw_ts)
                acc.events += 1
                acc.last_seq = seq
                acc.last_event, acc.last_event_ts = kind, ts
                _touch(acc, ts)
                session = obj.get("session_id")
                if session and type(session) is str:
                    acc.session_id = session
                seq += 1
                continue
        step(acc, seq, decode_loaded(obj, line), worker)
        seq += 1
    return acc


_NUMBER: Final = (float, int)


def snapshot(
    worker: str,
    acc: Accumulator,
    now: float,
    policy: Policy = Policy(),
    seen: Iterable[str] = (),
) -> WorkerState:
    """The frozen state of a worker at ``now``; ``seen`` adds marks to the journaled ones."""
    state: State = acc.state
    reason, since, seq = acc.reason, acc.since, acc.seq
    mark = format_mark(worker, seq)
    quiet_at: float | None = None
    if move("silence", state) is not None and acc.last_activity is not None:
        quiet_at = acc.last_activity + policy.quiet_after
        if now >= quiet_at:
            state, reason, since, seq = "quiet", "no_events", quiet_at, acc.activity_seq
            mark = format_mark(worker, seq, quiet=True)
            quiet_at = None
    is_seen = mark in acc.seen or mark in set(seen)
    return WorkerState(
        worker=worker,
        state=state,
        reason=reason,
        since=since,
        seq=seq,
        mark=mark,
        needs_attention=needs_attention(state, is_seen),
        seen=is_seen,
        quiet_at=quiet_at,
        live=acc.live,
        tool=acc.tool,
        profile=acc.profile,
        model=acc.model,
        adapter=acc.adapter,
        handle=dict(acc.handle),
        worktree=acc.worktree,
        branch=acc.branch,
        base=acc.base,
        task=acc.task,
        last_event=acc.last_event,
        last_event_ts=acc.last_event_ts,
        last_activity=acc.last_activity,
        events=acc.events,
        unreadable=acc.unreadable,
        ignored=acc.ignored,
        message=acc.message,
        envelope=acc.envelope,
        permission_tool=acc.permission_tool,
        notification=acc.notification,
        error=acc.error,
        limit_reset=acc.limit_reset,
        exit=acc.exit,
        verdict=acc.verdict,
        findings=acc.findings,
        pid=acc.pid,
        start_time=acc.start_time,
        refused=acc.refused,
        session_id=acc.session_id,
    )


def needs_attention(state: str, seen: bool) -> bool:
    """A worker needs the coordinator when it is stopped, quiet, blocked, done or gone, and the
    mark of that state has not been seen."""
    return state in ATTENTION_STATES and not seen


def fold(
    worker: str,
    events: Iterable[Event],
    now: float,
    policy: Policy = Policy(),
    seen: Iterable[str] = (),
) -> WorkerState:
    """Replay a whole journal (events in journal order; seq is the index)."""
    acc = feed(Accumulator(), enumerate(events), worker)
    return snapshot(worker, acc, now, policy, seen)
