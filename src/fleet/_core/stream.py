"""The facts that decide a worker's state, read from the agent's own event stream as it is
written: ``claude -p --output-format stream-json --verbose`` and ``codex exec --json``.

A second first-party source beside the hooks: with ``--bare`` or ``CLAUDE_CODE_SIMPLE`` set no
hook runs at all (measured on Claude Code 2.1.332), and a headless worker would read
``starting`` until it exits. The supervisor feeds each line of its agent's output to a
:class:`StreamReader` and journals the events it returns, with ``src`` :data:`STREAM_SRC`.

The events are the ones the fold already reads from the hooks, named as the hooks name them
(``SessionStart``, ``PreToolUse``, ``StopFailure``), plus :class:`TurnEnded` for a turn's result
and :class:`RateLimited` for the agent's own rate-limit report. Each says what the matching hook
says, so with hooks on both sources agree and the fold gives one mark per fact.

Pure: no I/O, no clock reads (the caller passes ``ts``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from fleet._core.accumulator import _cut
from fleet._core.events import STREAM_SRC, Event, HookEvent, RateLimited, TurnEnded
from fleet._core.limits import is_limit_error
from fleet._core.results import cut_result, denials_of

#: A busy worker journals a tool use at most this often (seconds): enough to keep it from
#: reading quiet, without a line per tool call.
ACTIVITY_EVERY: Final = 30.0
#: A stream line longer than this is not parsed (a tool result can be megabytes; nothing that
#: decides a state is that long).
MAX_LINE: Final = 4 << 20
#: Claude Code's ``rate_limit_event`` statuses.
RATE_STATUSES: Final = frozenset({"allowed", "allowed_warning", "rejected"})


class StreamReader:
    """Turns one agent run's output lines into journal events. Holds what it needs to keep the
    journal small: whether the current turn's activity was already journaled, and when."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self._session: str | None = None
        self._active_at: float | None = None
        self._message: str | None = None
        self._failure: str | None = None
        self._tasks = 0
        #: lines read, and lines that were not a JSON object (kept count of, never fatal)
        self.lines = 0
        self.unreadable = 0

    def feed(self, line: bytes, ts: float) -> list[Event]:
        """The events one output line tells (usually none)."""
        self.lines += 1
        if len(line) > MAX_LINE or not line.strip():
            return []
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            self.unreadable += 1
            return []
        if not isinstance(obj, dict):
            self.unreadable += 1
            return []
        if self.tool == "codex":
            return self._codex(obj, ts)
        return self._claude(obj, ts)

    # Claude Code ----------------------------------------------------------------------

    def _claude(self, obj: Mapping[str, Any], ts: float) -> list[Event]:
        kind = obj.get("type")
        session = _text(obj.get("session_id"))
        if session:
            self._session = session
        if kind == "system" and obj.get("subtype") == "init":
            self._active_at = None
            return [self._hook("SessionStart", ts, source="startup", model=_text(obj.get("model")),
                               permission_mode=_text(obj.get("permissionMode")),
                               cwd=_text(obj.get("cwd")))]
        if kind == "assistant":
            return self._assistant(obj, ts)
        if kind == "result":
            self._active_at = None
            if obj.get("is_error") is True:
                # A failed turn: its kind came in the assistant message before (a limit), or
                # the run's exit says it (the supervisor retries overload first).
                return []
            origin = obj.get("origin")
            return [TurnEnded(
                ts=ts,
                src=STREAM_SRC,
                result=cut_result(_text(obj.get("result"))),
                denials=denials_of([dict(obj)]),
                origin=_text(origin.get("kind")) if isinstance(origin, dict) else None,
                session_id=self._session,
                background=self._tasks,
            )]
        if kind == "rate_limit_event":
            return self._rate_limit(obj.get("rate_limit_info"), ts)
        if kind == "system" and obj.get("subtype") == "background_tasks_changed":
            # 2.1.332 lists the tasks still running whenever the list changes.
            tasks = obj.get("tasks")
            self._tasks = len(tasks) if isinstance(tasks, list) else self._tasks
        return []

    def _assistant(self, obj: Mapping[str, Any], ts: float) -> list[Event]:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        error = _text(obj.get("error"))
        if error:
            # A synthetic message (model "<synthetic>") that reports the API error the turn
            # ended in, named as the StopFailure hook names it. Only a limit is journaled
            # here: fleet's supervisor retries overload and transient errors, and an
            # authentication error ends the run at once, so the run's exit says those.
            if not is_limit_error(error):
                return []
            text = " ".join(b["text"] for b in blocks
                            if b.get("type") == "text" and isinstance(b.get("text"), str))
            return [self._hook("StopFailure", ts, error=error,
                               last_assistant_message=_cut(text) or None)]
        tools = [b for b in blocks if b.get("type") == "tool_use"]
        if not tools:
            return []
        if self._active_at is not None and ts - self._active_at < ACTIVITY_EVERY:
            return []
        self._active_at = ts
        first = tools[0]
        return [self._hook("PreToolUse", ts, tool_name=_text(first.get("name")),
                           tool_use_id=_text(first.get("id")))]

    def _rate_limit(self, info: Any, ts: float) -> list[Event]:
        if not isinstance(info, dict):
            return []
        status = _text(info.get("status"))
        if status not in RATE_STATUSES:
            return []
        limit_type = _text(info.get("rateLimitType"))
        utilization = _number(info.get("utilization"))
        windows = info.get("unifiedWindows")
        window = windows.get(limit_type) if isinstance(windows, dict) and limit_type else None
        if utilization is None and isinstance(window, dict):
            # 2.1.332 gives the window's utilization there (0..1); 2.1.197 gives none.
            utilization = _number(window.get("utilization"))
        return [RateLimited(
            ts=ts,
            src=STREAM_SRC,
            status=status,
            resets_at=_number(info.get("resetsAt")),
            utilization=utilization,
            limit_type=limit_type,
        )]

    # Codex -----------------------------------------------------------------------------

    def _codex(self, obj: Mapping[str, Any], ts: float) -> list[Event]:
        kind = obj.get("type")
        if kind == "thread.started":
            self._session = _text(obj.get("thread_id")) or self._session
            self._active_at = None
            return [self._hook("SessionStart", ts, source="startup")]
        if kind in ("item.started", "item.completed"):
            item = obj.get("item")
            if not isinstance(item, dict):
                return []
            item_type = _text(item.get("type"))
            if kind == "item.completed" and item_type in ("agent_message", "assistant_message"):
                self._message = _text(item.get("text"))
                return []
            if item_type in _CODEX_TOOL_ITEMS:
                if self._active_at is not None and ts - self._active_at < ACTIVITY_EVERY:
                    return []
                self._active_at = ts
                return [self._hook("PreToolUse", ts, tool_name=item_type,
                                   tool_use_id=_text(item.get("id")))]
            return []
        if kind == "turn.completed":
            self._active_at = None
            message, self._message = self._message, None
            return [TurnEnded(ts=ts, src=STREAM_SRC, result=cut_result(message),
                              session_id=self._session)]
        if kind in ("turn.failed", "error"):
            # Codex says a failure twice: an ``error`` event, then ``turn.failed`` with the
            # same message (measured on 0.171.0). Only a limit is journaled: the supervisor
            # retries the rest, and the exit says how the run ended.
            err = obj.get("error")
            text = _text(err.get("message")) if isinstance(err, dict) else _text(obj.get("message"))
            said, self._failure = self._failure, text
            if text and text != said and is_limit_error(text):
                return [self._hook("StopFailure", ts, error="rate_limit",
                                   last_assistant_message=_cut(text))]
        return []

    # ------------------------------------------------------------------------------------

    def _hook(self, hook: str, ts: float, **fields: Any) -> HookEvent:
        data = {k: v for k, v in fields.items() if v is not None}
        if self._session:
            data["session_id"] = self._session
        return HookEvent(ts=ts, src=STREAM_SRC, hook=hook, data=data)


#: Codex items that are the agent acting (not only talking).
_CODEX_TOOL_ITEMS: Final = frozenset(
    {"command_execution", "file_change", "mcp_tool_call", "web_search", "patch_apply"}
)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
