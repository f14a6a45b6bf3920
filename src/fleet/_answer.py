"""Answering a worker's permission request from where the coordinator is.

Claude Code's PermissionRequest hook (``hooks/fleet_answer.py``) journals each request with an
id and a redacted summary of the tool's input, then waits on a FIFO,
``<worker dir>/requests/<id>``, for one JSON line. :func:`answer` is the one place that writes
that line: the CLI (``fleet answer``), the MCP ``answer`` tool and remote actions call it.

The rules it keeps:

- Only an open request is answered: one the journal holds and no ``answered`` event closed, whose
  hook is still waiting (its FIFO still has a reader: the non-blocking open for writing fails with
  ENXIO, or ENOENT, once the hook has gone). Anything else is a stale answer, refused in one line.
- The check, the write and the journal entry happen under the request's lock, the same lock the
  hook takes before it gives up at its timeout: an answer is delivered and journaled, or refused.
- Every answer is journaled (:class:`~fleet._core.events.Answered`) with who gave it.
- ``always`` asks the hook to keep the answer as a rule for the rest of the worker's session: the
  hook writes it (it alone has the exact input) and answers matching requests itself.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import getpass
import os
import re
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import attrs
import orjson

from fleet import _journal
from fleet._clock import Clock, SystemClock
from fleet._core.events import Answered, Event, HookEvent
from fleet._core.ids import validate_worker_id
from fleet._errors import FleetError, Refused
from fleet._home import journal_path

DECISIONS: Final = ("allow", "deny")
REQUESTS_DIR: Final = "requests"
#: The hook's request ids: 16 lowercase hex digits.
_REQUEST_ID: Final = re.compile(r"[0-9a-f]{16}")
REASON_LIMIT: Final = 1000


class InvalidAnswer(FleetError, ValueError):
    """An answer that cannot be given: not allow/deny, a malformed request id, a bad reason."""


class StaleAnswer(Refused):
    """The request is no longer waiting: answered already, timed out, or its session is gone."""


class NoRequest(Refused, LookupError):
    """The worker has no such (or no open) permission request."""


@attrs.frozen(kw_only=True)
class PermissionAsk:
    """One permission request a worker journaled."""

    worker: str
    request: str
    seq: int
    ts: float
    tool: str | None
    command: str | None
    session_id: str | None


@attrs.frozen(kw_only=True)
class AnswerResult:
    """What :func:`answer` did."""

    worker: str
    request: str
    decision: str
    by: str
    tool: str | None
    command: str | None
    reason: str | None
    #: the rule added for the rest of the session (``--always``), as Claude Code writes rules
    always: str | None

    def describe(self) -> str:
        what = f"{self.tool} ({self.command})" if self.command else (self.tool or "a tool")
        verb = "allowed" if self.decision == "allow" else "denied"
        line = f"{self.worker}: {verb} {what} (request {self.request})"
        if self.always:
            line += f"; {self.always} is now {verb} for the rest of this session"
        return line


def local_identity(client: str) -> str:
    """Who answers from this process: the client and the local user and host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{client}:{user}@{socket.gethostname()}"


def requests_of(
    events: Sequence[Event], worker: str
) -> tuple[list[PermissionAsk], dict[str, Answered]]:
    """The requests a journal holds, oldest first, and the answers that closed some of them."""
    asks: list[PermissionAsk] = []
    answered: dict[str, Answered] = {}
    for seq, event in enumerate(events):
        if isinstance(event, HookEvent) and event.hook == "PermissionRequest":
            request = event.text("request")
            if request is None or not _REQUEST_ID.fullmatch(request):
                continue
            detail = event.get("detail")
            command = detail.get("command") if isinstance(detail, dict) else None
            asks.append(PermissionAsk(
                worker=worker, request=request, seq=seq, ts=event.ts,
                tool=event.text("tool_name"),
                command=command if isinstance(command, str) else None,
                session_id=event.text("session_id"),
            ))
        elif isinstance(event, Answered) and event.request is not None:
            answered.setdefault(event.request, event)
    return asks, answered


def open_requests(home: Path, worker: str) -> list[PermissionAsk]:
    """The worker's requests whose hook still waits for an answer, oldest first."""
    validate_worker_id(worker)
    _journal.require(home, worker)
    asks, answered = requests_of(_journal.read_events(home, worker), worker)
    return [a for a in asks if a.request not in answered and _waiting(_fifo(home, a))]


def answer(
    home: Path,
    worker: str,
    decision: str,
    *,
    by: str,
    reason: str | None = None,
    always: bool = False,
    request: str | None = None,
    clock: Clock | None = None,
) -> AnswerResult:
    """Answer ``worker``'s permission request (its latest open one unless ``request`` names
    one) with ``allow`` or ``deny``; ``reason`` is what the model reads on a deny. Raises
    :class:`StaleAnswer` or :class:`NoRequest` (both :class:`~fleet._errors.Refused`) with a
    one-line message when there is nothing to answer."""
    validate_worker_id(worker)
    if decision not in DECISIONS:
        raise InvalidAnswer(f"the answer must be allow or deny, not {decision[:40]!r}")
    reason = _clean_reason(reason)
    if request is not None and not _REQUEST_ID.fullmatch(request):
        raise InvalidAnswer(f"not a request id: {request[:40]!r} (16 hex digits)")
    _journal.require(home, worker)
    clock = clock or SystemClock()
    asks, answered = requests_of(_journal.read_events(home, worker), worker)
    if request is None:
        waiting = [a for a in asks if a.request not in answered and _waiting(_fifo(home, a))]
        if not waiting:
            raise NoRequest(f"{worker} has no open permission request")
        ask = waiting[-1]
    else:
        found = [a for a in asks if a.request == request]
        if not found:
            raise NoRequest(f"{worker} has no permission request {request}")
        ask = found[0]
    fifo = _fifo(home, ask)
    lock_fd = _open_lock(fifo)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        # Again under the lock: another answerer may have closed it meanwhile.
        _, answered = requests_of(_journal.read_events(home, worker), worker)
        if ask.request in answered:
            raise StaleAnswer(f"{worker}: request {ask.request} was already answered "
                              f"({_told(answered[ask.request])})")
        message: dict[str, object] = {"behavior": decision}
        if reason:
            message["message"] = reason
        if always:
            message["always"] = True
        _deliver(fifo, orjson.dumps(message) + b"\n", worker, ask.request)
        rule = _rule_text(ask) if always else None
        result = AnswerResult(worker=worker, request=ask.request, decision=decision, by=by,
                              tool=ask.tool, command=ask.command, reason=reason, always=rule)
        _journal.append(home, worker, Answered(
            ts=clock.now(), request=ask.request, decision=decision, by=by, tool=ask.tool,
            reason=reason, always=rule))
        return result
    finally:
        os.close(lock_fd)
        if not os.path.lexists(fifo):
            # Nobody waits on this request any more: its lock is litter (the hook removes
            # its own when it ends; a stale answer made this one).
            with contextlib.suppress(OSError):
                os.unlink(f"{fifo}.lock")


def _fifo(home: Path, ask: PermissionAsk) -> Path:
    return journal_path(home, ask.worker).parent / REQUESTS_DIR / ask.request


def _waiting(fifo: Path) -> bool:
    """Whether a hook still reads this request's FIFO (opening it writes nothing)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    os.close(fd)
    return True


def _open_lock(fifo: Path) -> int:
    try:
        return os.open(f"{fifo}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                       0o600)
    except FileNotFoundError:
        raise StaleAnswer(f"{fifo.parent.parent.name}: request {fifo.name} is no longer waiting "
                          "(its session ended)") from None


def _deliver(fifo: Path, line: bytes, worker: str, request: str) -> None:
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            # Its hook died without cleaning up (it opens the FIFO before it journals the
            # request, so no reader means none will come): the FIFO and its note are litter.
            for path in (str(fifo), f"{fifo}.ask"):
                with contextlib.suppress(OSError):
                    os.unlink(path)
        if exc.errno in (errno.ENXIO, errno.ENOENT, errno.ELOOP):
            raise StaleAnswer(f"{worker}: request {request} is no longer waiting (it timed out "
                              "or its session ended)") from None
        raise Refused(f"{worker}: cannot answer request {request}: {exc.strerror}") from None
    try:
        if os.fstat(fd).st_mode & 0o170000 != 0o010000:
            raise Refused(f"{worker}: request {request} is not a FIFO: not answered")
        written = os.write(fd, line)
        if written != len(line):
            raise Refused(f"{worker}: request {request}: the answer was cut short")
    except BlockingIOError:
        raise Refused(f"{worker}: request {request} is not reading its answers") from None
    finally:
        os.close(fd)


def _rule_text(ask: PermissionAsk) -> str:
    tool = ask.tool or "tool"
    return f"{tool}({ask.command})" if tool == "Bash" and ask.command else tool


def _told(event: Answered) -> str:
    if event.by == "timeout":
        return f"timed out: {event.decision}"
    return f"{event.decision} by {event.by}"


def _clean_reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    text = " ".join("".join(c if c.isprintable() else " " for c in reason).split())
    if len(text) > REASON_LIMIT:
        raise InvalidAnswer(f"the reason is over {REASON_LIMIT} characters")
    return text or None
