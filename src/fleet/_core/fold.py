"""The fold: a worker's state as a pure function of its journal, the time, and a policy.

``fold(worker, events, now, policy)`` replays events through :func:`step` into an accumulator and
takes a :class:`WorkerState` snapshot of it. The accumulator is mutable and private; everything
handed out is frozen. Feeding the same events in any number of pieces gives the same snapshot,
which is what lets the tailer fold incrementally and a cache resume from a saved accumulator.
The accumulator's shape is :mod:`fleet._core.accumulator`; which move each hook or status file
asks for is :mod:`fleet._core.classify`.

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
- The coordinator's own verdict enters a new done reason: ``checked``, whose mark counts as seen,
  or ``failed``, which needs attention until the coordinator acts on it; a follow-up marks the
  state it answered as seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs
import orjson

from fleet._core.accumulator import Accumulator, Envelope, ExitInfo, _cut, find_envelope
from fleet._core.classify import (
    ACTIVITY_HOOKS,
    KNOWN_STATUSES,
    Move,
    _classify_hook,
    _classify_status,
    _knows_hook,
    _verdict_of,
)
from fleet._core.events import (
    STREAM_SRC,
    AgentStatus,
    Answered,
    Attached,
    Checked,
    Event,
    Exited,
    FollowUpSent,
    HandedOver,
    HookEvent,
    HooksOff,
    RateLimited,
    Registered,
    Retired,
    RetireRefused,
    Seen,
    Started,
    TurnEnded,
    UnknownEvent,
    Unreadable,
    Vanished,
    decode_line,
    decode_loaded,
    event_type,
    misfits,
    plain_envelope,
    unusable_in,
)
from fleet._core.fields import COUNT_MAX, PID_MAX, str_field
from fleet._core.ids import format_mark
from fleet._core.limits import find_reset, is_limit_error
from fleet._core.machine import ATTENTION_STATES, State, move

DEFAULT_QUIET_AFTER: Final = 300.0


@attrs.frozen(kw_only=True)
class Policy:
    """How journals are read: ``quiet_after`` seconds without activity make a running worker
    quiet."""

    quiet_after: float = DEFAULT_QUIET_AFTER


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
    #: events (or hook names, notification kinds, statuses) this version does not know: kept
    #: in the journal, counted, folded as nothing
    unknown: int = 0
    #: hook lines with a field the fold reads holding a value it cannot use (an object where
    #: a string belongs, say): the field is ignored, the line kept and counted
    malformed: int = 0
    message: str | None = None
    envelope: Envelope | None = None
    permission_tool: str | None = None
    #: the open permission request's id (``fleet answer --request``) and its redacted command,
    #: when the hook waits for the coordinator's answer
    permission_request: str | None = None
    permission_command: str | None = None
    #: ``dialog`` when nobody answered the request in time and the agent's own dialog took
    #: over (the request is closed; a person at the terminal can still answer)
    permission_fallback: str | None = None
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
    #: the permission mode the agent last reported (Claude Code: default, auto, acceptEdits,
    #: bypassPermissions, dontAsk, plan)
    permission_mode: str | None = None
    #: what the agent says it waits for, while blocked by a screen ("permission prompt", ...)
    waiting_for: str | None = None
    #: background tasks (subagents, background shells) still running after the main turn
    background: int = 0
    #: the commit the last check passed on (None when the last check failed, or none ran)
    checked_head: str | None = None
    #: who besides the check commands judged the work in the last check: the blind
    #: reviewer's profile or endpoint (None: the commands alone)
    reviewer: str | None = None
    #: follow-ups sent to the worker
    follow_ups: int = 0
    #: the snapshot ref of the last retire, and what changed between its check and the delete
    retired_ref: str | None = None
    retired_note: str | None = None
    #: tool calls the last run's permission policy denied, as ``Tool(what)``
    denials: tuple[str, ...] = ()
    #: the last follow-up or hand-over: ``sent`` until the agent's next hook shows it ran on
    #: it, then ``taken``; None when there was none
    delivery: str | None = None
    #: the permission policy fleet started it with (``mode``, ``allowed_tools`` ... for
    #: Claude; ``sandbox``, ``approval`` for Codex); empty for a worker fleet did not start
    permissions: Mapping[str, Any] = attrs.field(factory=dict)
    #: a hook of the agent journaled at least once
    hooks_seen: bool = False
    #: the agent's own event stream (read live by fleet's supervisor) journaled at least once
    stream_seen: bool = False
    #: why the supervisor thinks the agent runs with its hooks off (``CLAUDE_CODE_SIMPLE``,
    #: ``--bare``)
    hooks_off: tuple[str, ...] = ()
    #: the account's rate limit as the agent last reported it in its stream (Claude Code's
    #: ``rate_limit_event``): allowed, allowed_warning or rejected; utilization 0..1; the
    #: window's reset and kind (five_hour, seven_day ...); when it was read
    rate_status: str | None = None
    rate_utilization: float | None = None
    rate_resets_at: float | None = None
    rate_type: str | None = None
    rate_at: float | None = None

    @property
    def hooks_not_running(self) -> bool:
        """The agent shows activity in its own stream but no hook ever journaled."""
        return self.stream_seen and not self.hooks_seen


#: WorkerState fields copied as they are from the accumulator.
_SNAPSHOT_FIELDS: Final = tuple(
    f.name
    for f in attrs.fields(WorkerState)
    if f.name in attrs.fields_dict(Accumulator)
    and f.name not in ("state", "reason", "since", "seq", "seen", "handle", "permissions")
)


#: Blocked because the run's permission policy denied a tool it needed (Claude Code denies,
#: never asks, in ``-p``): the worker's own BLOCKED, if any, names the same stop.
DENIED: Final = "permission_denied"


def _classify_exit(event: Exited, acc: Accumulator) -> Move:
    if event.reason in ("stopped", "timeout"):
        return ("terminate", event.reason)
    if event.reason == "limit" or event.api_error_status == 429:
        return ("limit", "limit")
    envelope = find_envelope(event.result) or find_envelope(event.claim)
    if envelope is not None and not event.is_error and event.exit_code in (0, None):
        verdict = _verdict_of(envelope)
        # A worker that says it is blocked after its policy denied a tool is blocked by that
        # policy: the denial, not its wording, tells the coordinator what to change.
        return ("block", DENIED) if event.denials and verdict[0] == "block" else verdict
    if event.denials and not event.is_error:
        # Observed on the real CLIs: a denied call still ends in a successful run (exit 0,
        # is_error false), so only the result's denials tell it from finished work.
        return ("block", DENIED)
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


#: Activity that records nothing but the clocks, the session and the permission mode (a
#: prompt also says whether the turn is automatic).
_PLAIN_ACTIVITY: Final = ACTIVITY_HOOKS - _NEW_TURN_HOOKS


def _new_turn(event: Event) -> bool:
    return isinstance(event, HookEvent) and event.hook in _NEW_TURN_HOOKS


def _touch(acc: Accumulator, ts: float) -> None:
    # A late hook (async, or delayed) must not move the clock of quiet backwards.
    if acc.last_activity is None or ts > acc.last_activity:
        acc.last_activity = ts
    acc.activity_seq = acc.last_seq


def _record(event: Event, acc: Accumulator) -> Move | None:
    """Record what the event tells, and say which move it asks for."""
    if isinstance(event, HookEvent):
        if not _knows_hook(event):
            acc.unknown += 1
        if misfits(event.hook, event.data):
            acc.malformed += 1
        _record_hook(event, acc)
        if event.src == STREAM_SRC:
            acc.stream_seen = True
            if event.hook == "SessionStart" and acc.state != "starting":
                # The stream's init is read a moment after the hooks' SessionStart and
                # first prompt: it starts nothing they have not.
                return None
        else:
            acc.hooks_seen = True
        return _classify_hook(event, acc)
    if isinstance(event, TurnEnded):
        _record_turn(event, acc)
        return _classify_turn(event, acc)
    if isinstance(event, RateLimited):
        acc.stream_seen = True
        acc.rate_status, acc.rate_utilization = event.status, event.utilization
        acc.rate_resets_at, acc.rate_type, acc.rate_at = event.resets_at, event.limit_type, event.ts
        if event.status != "rejected":
            return None
        _touch(acc, event.ts)
        if event.resets_at is not None:
            acc.limit_reset = event.resets_at
        return ("limit", "limit")
    if isinstance(event, HooksOff):
        acc.hooks_off = tuple(event.why)
        return None
    if isinstance(event, UnknownEvent):
        acc.unknown += 1
        return None
    if isinstance(event, AgentStatus):
        if event.status not in KNOWN_STATUSES:
            acc.unknown += 1
        if event.session_id:
            acc.session_id = event.session_id
        if event.status == "waiting":
            acc.waiting_for = event.waiting_for
        return _classify_status(event, acc)
    if isinstance(event, Registered):
        _touch(acc, event.ts)
        for name in ("tool", "profile", "model", "adapter", "worktree", "branch", "base", "task"):
            value = getattr(event, name)
            if value is not None:
                setattr(acc, name, value)
        if event.handle:
            acc.handle = dict(event.handle)
        if event.permissions:
            acc.permissions = dict(event.permissions)
        _new_task(acc)
        return ("register", "registered")
    if isinstance(event, Attached):
        acc.handle = {**acc.handle, **event.handle}
        return None
    if isinstance(event, Started):
        _touch(acc, event.ts)
        acc.pid, acc.start_time, acc.live = event.pid, event.start_time, True
        if event.attempt <= 1:
            _new_task(acc)
        return ("start", "launched")
    if isinstance(event, Exited):
        _record_exit(event, acc)
        return _classify_exit(event, acc)
    if isinstance(event, Vanished):
        acc.live = False
        return ("terminate", "vanished")
    if isinstance(event, HandedOver):
        _touch(acc, event.ts)
        acc.delivery = "sent"
        if event.profile is not None:
            acc.profile = event.profile
        if event.model is not None:
            acc.model = event.model
        if event.handle:
            acc.handle = dict(event.handle)
        acc.verdict, acc.findings = None, ()
        _new_task(acc)
        return ("hand_over", "handed_over")
    if isinstance(event, Seen):
        acc.seen.add(event.mark)
        return None
    if isinstance(event, FollowUpSent):
        acc.follow_ups += 1
        acc.delivery = "sent"
        if event.seen:
            acc.seen.add(event.seen)
        if acc.state != "working":
            _touch(acc, event.ts)  # quiet counts from the delivery
        return ("deliver", "follow_up")
    if isinstance(event, Checked):
        acc.verdict, acc.findings = event.verdict, tuple(event.findings)
        acc.checked_head = event.head if event.verdict == "checked" else None
        acc.reviewer = event.reviewer
        return ("verdict", "checked" if event.verdict == "checked" else "failed")
    if isinstance(event, RetireRefused):
        acc.refused = event.reason
        return None
    if isinstance(event, Retired):
        acc.retired_ref, acc.retired_note = event.ref, event.note
        return ("retire", "retired")
    if isinstance(event, Answered):
        # The answer closes the request; the next hook tells whether the tool ran.
        if event.request is not None and event.request == acc.permission_request:
            acc.permission_request = None
            if event.decision == "dialog":
                acc.permission_fallback = "dialog"
        return None
    return None


_WAITS: Final = frozenset({"permission", "question"})


def _names_the_wait(event: Event) -> bool:
    return isinstance(event, HookEvent) and event.hook in ("PermissionRequest", "Elicitation")


def _refines_the_wait(event: Event, reason: str, acc: Accumulator) -> bool:
    return (acc.reason in _WAITS and reason in _WAITS and not acc.wait_named
            and _names_the_wait(event))


#: The hooks that show a follow-up or a hand-over was taken: the prompt it became (typed into
#: a busy turn, it is queued and submitted after it), or the session a resumed run opened.
_TAKES_DELIVERY: Final = frozenset({"UserPromptSubmit", "UserPromptExpansion", "SessionStart"})


def _record_hook(event: HookEvent, acc: Accumulator) -> None:
    _touch(acc, event.ts)
    _note_session(acc, event.data)  # (misfits counted the line already)
    if acc.delivery == "sent" and event.hook in _TAKES_DELIVERY:
        acc.delivery = "taken"
    hook = event.hook
    if hook == "Stop":
        _record_stop(event, acc)
    elif hook == "StopFailure" or (hook == "SessionEnd" and event.text("error")):
        acc.message = _cut(event.text("last_assistant_message"))
        acc.envelope = None
        acc.error = event.text("error")
        if acc.error and is_limit_error(acc.error):
            reset = find_reset(acc.message or "", event.ts)
            if reset is not None:
                acc.limit_reset = reset
        if hook == "SessionEnd":
            acc.live = False
    elif hook in _NEW_TURN_HOOKS:
        # A prompt Claude Code injected itself (a background task finished) continues the
        # task; any other prompt is new work, and the last claim no longer answers it.
        acc.auto_turn = event.text("origin") == "task-notification"
        if not acc.auto_turn:
            acc.pending = acc.pending_message = None
    elif hook == "PermissionRequest":
        acc.permission_tool = event.text("tool_name")
        acc.permission_request = event.text("request")
        acc.permission_fallback = None
        acc.permission_command = event.detail_text("command")
    elif hook == "Notification":
        acc.notification = _cut(event.text("message"), 500)
    elif hook == "SessionStart":
        acc.live = True
        if event.text("source") != "compact":
            # A new process or conversation: background tasks of an earlier one are gone.
            acc.background, acc.auto_turn = 0, False
        pid = event.whole("agent_pid", 2, PID_MAX)
        if pid is not None:
            acc.pid, acc.start_time = pid, event.whole("agent_start")
    elif hook == "SessionEnd":
        acc.live = False
    elif hook == "PostModelSwitch":
        model = event.text("to_model")
        if model:
            acc.model = model


def _record_stop(event: HookEvent, acc: Accumulator) -> None:
    """A turn ended: its final message, its envelope, and how much work still runs. The last
    envelope is kept as ``pending`` until a new task begins: when all the work has finished,
    the state is that envelope, even if an automatic turn after it (answering a background
    task's notification) wrote none."""
    message = _cut(event.text("last_assistant_message"))
    acc.message, acc.envelope = message, find_envelope(message)
    acc.background = event.whole("background_tasks", 0, COUNT_MAX) or 0
    if acc.envelope is not None:
        acc.pending, acc.pending_message = acc.envelope, message
    elif acc.auto_turn and acc.pending is not None:
        acc.envelope, acc.message = acc.pending, acc.pending_message


def _record_turn(event: TurnEnded, acc: Accumulator) -> None:
    """A turn's result read from the agent's stream: what a Stop hook records, with the
    automatic turn told by the result's origin (no prompt hook says so without hooks)."""
    _touch(acc, event.ts)
    acc.stream_seen = True
    if event.session_id:
        acc.session_id = event.session_id
    if event.origin == "task-notification":
        acc.auto_turn = True
    message = _cut(event.result)
    acc.message, acc.envelope = message, find_envelope(message)
    if acc.envelope is not None:
        acc.pending, acc.pending_message = acc.envelope, message
    elif acc.auto_turn and acc.pending is not None:
        acc.envelope, acc.message = acc.pending, acc.pending_message
    if event.denials:
        acc.denials = tuple(event.denials)
    acc.background = max(0, event.background)


def _classify_turn(event: TurnEnded, acc: Accumulator) -> Move:
    """As the run's exit reads its result (:func:`_classify_exit`): the envelope, a BLOCKED
    after a denial or a turn that only ended with denials is the policy's block. While
    background tasks run, the end of the main turn is not the end of the work (as a Stop)."""
    if acc.background:
        return ("activity", "active")
    if acc.envelope is not None:
        verdict = _verdict_of(acc.envelope)
        return ("block", DENIED) if event.denials and verdict[0] == "block" else verdict
    if event.denials:
        return ("block", DENIED)
    return ("turn_end", "turn_end")


def _record_exit(event: Exited, acc: Accumulator) -> None:
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
    acc.denials = tuple(event.denials)
    # The run's verdict: its result's envelope, else the claim it made before automatic turns.
    said = event.claim if find_envelope(event.result) is None and event.claim else event.result
    if said:
        acc.message = _cut(said)
        acc.envelope = find_envelope(acc.message)
    if event.reset_at is not None:
        acc.limit_reset = event.reset_at
    if event.session_id:
        acc.session_id = event.session_id


def _new_task(acc: Accumulator) -> None:
    """A registration, launch or hand-over: nothing the worker said before answers it."""
    acc.pending = acc.pending_message = None
    acc.background, acc.auto_turn = 0, False


def step(acc: Accumulator, seq: int, event: Event, worker: str = "") -> Accumulator:
    """Apply one journal event (the ``seq``-th line) to the accumulator, in place; returns it."""
    acc.events += 1
    acc.last_seq = seq
    if (
        type(event) is HookEvent
        and acc.state == "working"
        and event.hook in _PLAIN_ACTIVITY
        and acc.last_event is not None
    ):
        # The common case, by far: more activity from a working worker. It moves nothing but
        # the clocks, exactly as the general path below would.
        acc.last_event, acc.last_event_ts = event.hook, event.ts
        _touch(acc, event.ts)
        if _note_session(acc, event.data):
            acc.malformed += 1
        if event.src == STREAM_SRC:
            acc.stream_seen = True
        else:
            acc.hooks_seen = True
        if acc.delivery == "sent" and event.hook in _TAKES_DELIVERY:
            acc.delivery = "taken"
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
    if trigger == "block" and acc.state == "blocked" and _refines_the_wait(event, reason, acc):
        # The same wait, now named (the status file said "waiting" a moment before the hook
        # said for what): the reason becomes exact and the mark stays, so nobody wakes twice.
        acc.reason, acc.wait_named = reason, True
        return acc
    if trigger == "block" and acc.state == "blocked" and (reason, acc.reason) == (DENIED, "worker"):
        # The run's end names the cause of the BLOCKED its last turn wrote: same stop, same mark.
        acc.reason = reason
        return acc
    if acc.state == "blocked" and acc.reason == DENIED and (
        trigger == "turn_end" or (trigger, reason) == ("block", "worker")
    ):
        # The turn's Stop hook, read after its stream's result named the denial: one stop.
        return acc
    if (
        (trigger, reason) == ("block", DENIED)
        and (acc.state, acc.reason) == ("stopped", "turn_end")
        and isinstance(event, TurnEnded)
    ):
        # The stream's result of the turn a Stop hook just ended says why it stopped: the
        # policy denied a tool. Same stop, same mark, so nobody wakes twice for it.
        acc.state, acc.reason = "blocked", reason
        return acc
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
    acc.wait_named = dest == "blocked" and _names_the_wait(event)
    if dest != "blocked":
        acc.waiting_for = None
    if trigger == "verdict" and worker and reason == "checked":
        # A passed check is the coordinator's own finding: nothing more to wake it for. A
        # failed one still needs it to act (a follow-up, a hand-over, `fleet seen`).
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
            plain = plain_envelope(obj, _PLAIN_ACTIVITY)
            if plain is not None:
                kind, ts = plain
                acc.events += 1
                acc.last_seq = seq
                acc.last_event, acc.last_event_ts = kind, ts
                _touch(acc, ts)
                if _note_session(acc, obj):
                    acc.malformed += 1
                # plain_envelope took only a hook source: the stream's, or a hook's.
                if str_field(obj, "src") == STREAM_SRC:
                    acc.stream_seen = True
                else:
                    acc.hooks_seen = True
                seq += 1
                continue
        step(acc, seq, decode_loaded(obj, line), worker)
        seq += 1
    return acc


def _note_session(acc: Accumulator, data: Mapping[str, Any]) -> bool:
    """Record the session and permission mode a hook line reports (every hook's, read by
    :data:`EVERY_HOOK_READS`); True when either holds a value of another type."""
    session = str_field(data, "session_id")
    if session:
        acc.session_id = session
    mode = str_field(data, "permission_mode")
    if mode:
        acc.permission_mode = mode
    return (session is None and unusable_in(data, "session_id")) or (
        mode is None and unusable_in(data, "permission_mode")
    )


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
            reason = "follow_up_not_taken" if acc.reason == "follow_up" else "no_events"
            state, since, seq = "quiet", quiet_at, acc.activity_seq
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
        handle=dict(acc.handle),
        permissions=dict(acc.permissions),
        **{name: getattr(acc, name) for name in _SNAPSHOT_FIELDS},
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
