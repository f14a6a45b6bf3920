"""Reading what a headless agent run printed: its final result, its usage, and what kind of
end it came to (done, a transient or overload error worth retrying, a refused login, a usage
limit, another error). Pure functions of the output text and the exit code."""

from __future__ import annotations

import re
from typing import Any, Final, Literal

import attrs
import orjson

from fleet._core.accumulator import find_envelope
from fleet._core.fields import (
    INT_MAX,
    bool_field,
    dict_field,
    int_field,
    list_field,
    number_field,
    str_field,
)
from fleet._core.limits import find_reset

#: Kept from a result: the head, and the tail where the DONE/BLOCKED envelope lives.
RESULT_HEAD: Final = 1000
RESULT_TAIL: Final = 2900
#: Statuses worth another attempt: timeouts, conflicts, server errors, overload.
TRANSIENT_STATUSES: Final = frozenset({408, 409, 500, 502, 503, 504, 520, 522, 524, 529})
AUTH_STATUSES: Final = frozenset({401, 403})
_TRANSIENT_WORDS: Final = (
    "overloaded",
    "connection error",
    "connection refused",
    "connection reset",
    "econnreset",
    "econnrefused",
    "etimedout",
    "socket hang up",
    "fetch failed",
    "stream disconnected",
    "timed out",
    "internal server error",
    "service unavailable",
    "bad gateway",
)
_AUTH_WORDS: Final = (
    "authentication_error",
    "authentication failed",
    "invalid api key",
    "invalid x-api-key",
    "unauthorized",
    "token expired or incorrect",
)
_LIMIT_WORDS: Final = (
    "usage limit",
    "rate limit",
    "rate_limit",
    "too many requests",
    "quota",
    "limit reached",
    "hit your limit",
    "you've hit your",
)
#: Claude Code's result names the kind of API error (2.1.332): these are limits.
_LIMIT_API_ERRORS: Final = frozenset({"usage_limit_reached", "rate_limit", "rate_limit_error"})

_MESSAGE_ITEMS: Final = ("agent_message", "assistant_message")

Kind = Literal["ok", "transient", "auth", "limit", "error"]


@attrs.frozen(kw_only=True)
class Outcome:
    """What one attempt came to."""

    kind: Kind
    exit_code: int | None
    is_error: bool
    api_error_status: int | None = None
    result: str | None = None
    usage: dict[str, int] = attrs.field(factory=dict)
    session_id: str | None = None
    reset_at: float | None = None
    #: the last result with a DONE/BLOCKED envelope, when only automatic turns came after it
    claim: str | None = None
    #: tool calls the permission policy denied (Claude Code's ``permission_denials``), each as
    #: ``Tool(what)``: a run in dontAsk, or a prompting mode, denies instead of asking
    denials: tuple[str, ...] = ()


def cut_result(text: str | None) -> str | None:
    """A result cut to size, keeping its head and its tail (the envelope is the last line)."""
    if text is None or len(text) <= RESULT_HEAD + RESULT_TAIL:
        return text
    return text[:RESULT_HEAD] + "\n[…]\n" + text[-RESULT_TAIL:]


def _json_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects in ``text``: the whole text, else one per line."""
    stripped = text.strip()
    if not stripped:
        return []
    try:
        whole = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [whole]
    out: list[dict[str, Any]] = []
    for raw in stripped.splitlines():
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _int_usage(usage: dict[str, Any] | None) -> dict[str, int]:
    """The whole-number counts of a usage object (nested objects, strings and numbers no
    journal can hold are left out)."""
    out: dict[str, int] = {}
    for key in usage or {}:
        count = number_field(usage or {}, key)
        if count is not None and count.is_integer() and 0 <= count <= INT_MAX:
            out[key] = int(count)
    return out


_STATUS_RE: Final = re.compile(
    r"(?:status(?: code)?|http|api error)[^0-9]{0,12}\b([45]\d\d)\b", re.IGNORECASE
)
_BARE_STATUS_RE: Final = re.compile(r"\b(401|403|408|429|500|502|503|504|529)\b")


def find_status(text: str) -> int | None:
    """An HTTP status mentioned in an error message, if any."""
    m = _STATUS_RE.search(text) or _BARE_STATUS_RE.search(text)
    return int(m.group(1)) if m else None


def classify(
    *,
    exit_code: int | None,
    is_error: bool,
    status: int | None,
    text: str,
) -> Kind:
    """Which way an attempt went. ``text`` is the result or error message (and stderr)."""
    if exit_code == 0 and not is_error:
        return "ok"
    low = text.lower()
    if status in AUTH_STATUSES or (status is None and any(w in low for w in _AUTH_WORDS)):
        return "auth"
    if status == 429 or (
        status not in TRANSIENT_STATUSES and any(w in low for w in _LIMIT_WORDS)
    ):
        return "limit"
    if status in TRANSIENT_STATUSES or (
        status is None and any(w in low for w in _TRANSIENT_WORDS)
    ):
        return "transient"
    return "error"


def parse_claude(stdout: str, stderr: str, exit_code: int | None, now: float) -> Outcome:
    """An attempt of ``claude -p --output-format stream-json`` (or ``json``). The last
    ``result`` object decides how the run went. Claude Code 2.1.332 runs subagents in the
    background and answers each one's completion in an automatic turn with a result of its own
    (``origin.kind`` ``task-notification``): a worker's DONE/BLOCKED claim made in the main turn
    is then in an earlier result, kept as ``claim``."""
    objects = [o for o in _json_objects(stdout) if str_field(o, "type") in ("result", None)]
    result_obj = objects[-1] if objects else None
    if result_obj is None:
        text = (stderr.strip() or stdout.strip())[-2000:]
        status = find_status(text)
        kind = classify(exit_code=exit_code, is_error=True, status=status, text=text)
        return Outcome(
            kind=kind,
            exit_code=exit_code,
            is_error=True,
            api_error_status=status,
            result=cut_result(text) or None,
            reset_at=find_reset(text, now) if kind == "limit" else None,
        )
    is_error = bool_field(result_obj, "is_error") is True
    status = int_field(result_obj, "api_error_status", 100, 599)
    result_text = str_field(result_obj, "result")
    if is_error and status is None:
        status = find_status(result_text or "")
    errors = list_field(result_obj, "errors")
    detail = " ".join(e for e in errors if isinstance(e, str)) if errors else ""
    text = " ".join(filter(None, [result_text, detail, stderr.strip()[-1000:] if is_error else ""]))
    kind = classify(exit_code=exit_code, is_error=is_error, status=status, text=text)
    if kind not in ("ok", "auth") and str_field(result_obj, "api_error") in _LIMIT_API_ERRORS:
        kind = "limit"
    session = str_field(result_obj, "session_id")
    return Outcome(
        kind=kind,
        exit_code=exit_code,
        is_error=is_error or exit_code != 0,
        api_error_status=status,
        result=cut_result(result_text),
        usage=_int_usage(dict_field(result_obj, "usage")),
        session_id=session,
        reset_at=find_reset(text, now) if kind == "limit" else None,
        claim=cut_result(_claim(objects)),
        denials=denials_of(objects),
    )


#: The input field that says what a denied call was about, per tool (the first one present).
_DENIAL_SUBJECTS: Final = ("command", "file_path", "path", "notebook_path", "url", "pattern")
_DENIALS_KEPT: Final = 20


def denials_of(results: list[dict[str, Any]]) -> tuple[str, ...]:
    """Every distinct denied call in the run's results, as ``Bash(touch x)`` or ``Write``: one
    per call the permission policy refused, in order, at most 20."""
    out: dict[str, None] = {}
    for obj in results:
        for denial in list_field(obj, "permission_denials") or ():
            tool = str_field(denial, "tool_name") if type(denial) is dict else None
            if tool is not None:
                out[_denial_text(tool, dict_field(denial, "tool_input"))] = None
    return tuple(out)[:_DENIALS_KEPT]


def _denial_text(tool: str, tool_input: dict[str, Any] | None) -> str:
    if tool_input is not None:
        for key in _DENIAL_SUBJECTS:
            value = str_field(tool_input, key)
            if value is not None and value.strip():
                subject = " ".join(value.split())
                if len(subject) > 80:
                    subject = subject[:79] + "…"
                return f"{tool}({subject})"
    return tool


def _claim(results: list[dict[str, Any]]) -> str | None:
    """The last result carrying an envelope, when it is not the last one and every result
    after it answered a task notification (a turn the worker did not choose to take)."""
    for i in range(len(results) - 1, -1, -1):
        text = str_field(results[i], "result")
        if text is not None and find_envelope(text) is not None:
            return text if i < len(results) - 1 else None
        origin = dict_field(results[i], "origin")
        if origin is None or str_field(origin, "kind") != "task-notification":
            return None
    return None


def parse_codex(stdout: str, stderr: str, exit_code: int | None, now: float) -> Outcome:
    """An attempt of ``codex exec --json``: JSONL events (``thread.started``, ``item.completed``
    with the agent's messages, ``turn.completed`` with usage, ``turn.failed`` / ``error``)."""
    session: str | None = None
    message: str | None = None
    usage: dict[str, int] = {}
    errors: list[str] = []
    for obj in _json_objects(stdout):
        kind = str_field(obj, "type")
        if kind == "thread.started" and str_field(obj, "thread_id") is not None:
            session = str_field(obj, "thread_id")
        elif kind == "item.completed":
            item = dict_field(obj, "item")
            if item is not None and str_field(item, "type") in _MESSAGE_ITEMS:
                text = str_field(item, "text")
                if text is not None:
                    message = text
        elif kind == "turn.completed":
            for k, v in _int_usage(dict_field(obj, "usage")).items():
                usage[k] = min(usage.setdefault(k, 0) + v, INT_MAX)
        elif kind == "turn.failed":
            err = dict_field(obj, "error")
            said = str_field(err, "message") if err is not None else str_field(obj, "error")
            errors.append(said or "turn failed")
        elif kind == "error":
            errors.append(str_field(obj, "message") or "error")
    is_error = bool(errors) or exit_code != 0
    text = " ".join(errors) if errors else ""
    if is_error and not text:
        text = (stderr.strip() or stdout.strip())[-2000:]
    status = find_status(text) if is_error else None
    outcome = classify(exit_code=exit_code, is_error=is_error, status=status, text=text)
    result = message if outcome == "ok" or message else (text or None)
    return Outcome(
        kind=outcome,
        exit_code=exit_code,
        is_error=is_error,
        api_error_status=status,
        result=cut_result(result),
        usage=usage,
        session_id=session,
        reset_at=find_reset(text, now) if outcome == "limit" else None,
    )


def parse_output(tool: str, stdout: str, stderr: str, exit_code: int | None, now: float) -> Outcome:
    parse = parse_codex if tool == "codex" else parse_claude
    return parse(stdout, stderr, exit_code, now)
