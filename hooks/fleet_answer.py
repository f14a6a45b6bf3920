"""The PermissionRequest side of fleet's hook: a Claude Code permission request becomes a journal
fact, and the hook waits for the coordinator's answer to it.

Claude Code's PermissionRequest hook is synchronous: what the hook prints is the decision
(``hookSpecificOutput.decision.behavior`` allow or deny, with a ``message`` the model reads on a
deny); a hook that prints nothing leaves the request to Claude Code's own dialog. So:

1. A rule the worker was given for this session (``fleet answer --always``) answers at once,
   journaled as an ``answered`` event by ``rule``; nobody is woken.
2. Otherwise the hook makes a FIFO for the request, ``<worker dir>/requests/<id>``, journals the
   PermissionRequest with its ``request`` id and a redacted summary of the tool's input, and
   blocks in poll(2) on the FIFO: no polling loop. ``fleet answer`` writes one JSON line into
   it. The FIFO is opened read-write, so it always has a writer (poll never sees an end of
   file) and an answerer's non-blocking open fails with ENXIO once the hook is gone: a stale
   answer cannot be taken for a live one.
3. Nobody answers within the timeout (``FLEET_ANSWER_TIMEOUT`` seconds, default 300, under Claude
   Code's own 600 s hook timeout): an interactive session falls back to its dialog (the hook
   prints nothing) and a headless one is denied with a reason the model can read. The outcome is
   journaled as an ``answered`` event by ``timeout``.
4. The person answers the agent's own dialog first (it is up while the hook waits, and a
   keypress answers it at once): Claude Code neither signals the hook nor closes its pipes, so
   the session's next hook (the tool's PostToolUse, or the end of the turn) tells the waiting
   hook through its FIFO (:func:`release`), and the request is journaled as withdrawn.

Timeout and answer race for the request's lock file (``<id>.lock``): the hook takes it, removes
the FIFO and reads once more before giving up, and ``fleet answer`` writes only while holding it,
so an answer is either delivered or refused, never journaled as given and then lost.

Standard library only, imported by ``fleet_hook_impl`` for PermissionRequest only.
"""

import posix
import time

import fleet_hook_impl as impl

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_TIMEOUT = 300.0
#: Bounds of FLEET_ANSWER_TIMEOUT: Claude Code cancels a hook after 600 s unless told otherwise.
MAX_TIMEOUT = 590.0
REQUESTS_DIR = "requests"
RULES_FILE = "answer-rules.jsonl"
#: Beside each request's FIFO: its session and what it asks (a digest), so the session's later
#: hooks can tell the waiting hook that the agent no longer waits for it (see ``release``).
ASK_SUFFIX = ".ask"
#: Hook events after which a session no longer waits for any of its open requests.
_TURN_OVER = frozenset({"Stop", "StopFailure", "UserPromptSubmit", "SessionEnd", "SessionStart"})
#: Hook events after which the session no longer waits for a request for the same tool call.
_TOOL_DONE = frozenset({"PostToolUse", "PostToolUseFailure"})
#: One answer is one line of at most this many bytes: a single write(2) to a FIFO of up to
#: PIPE_BUF bytes is atomic, so two answerers never interleave.
ANSWER_LIMIT = 4096
RULES_LIMIT = 1 << 18
BEHAVIORS = ("allow", "deny")
#: Tools whose "permission" is a question for the person (its answers are the point): their
#: requests are journaled and left to the agent's own screen, never answered from afar.
PERSON_TOOLS = frozenset({"AskUserQuestion", "ExitPlanMode"})
#: The hook's own name for itself in ``by``.
BY_RULE = "rule"
BY_TIMEOUT = "timeout"


def handle(ctx: "impl._Context", ts: float, payload: "dict[str, Any]", env: "impl._Environ",
           worker: str) -> None:
    """Journal the request, wait for its answer and print Claude Code's decision."""
    worker_dir = f"{ctx.home}/workers/{worker}"
    journal = impl.journal_path(ctx.home, worker)
    interactive = env.get("CLAUDE_CODE_ENTRYPOINT") != "sdk-cli"
    if payload.get("tool_name") in PERSON_TOOLS:
        impl.append_line(journal, impl.encode_line(ts, ctx.src, "PermissionRequest", payload))
        return
    rule = _matching_rule(worker_dir, payload)
    if rule is not None:
        behavior, text = rule
        _decide(behavior, f"denied by the worker's rule {text}" if behavior == "deny" else None)
        _journal_answer(journal, request=None, behavior=behavior, by=BY_RULE, rule=text,
                        tool=payload.get("tool_name"))
        return
    request = posix.urandom(8).hex()
    requests = worker_dir + "/" + REQUESTS_DIR
    fifo = requests + "/" + request
    try:
        impl._make_dirs(requests)
        posix.mkfifo(fifo, impl.FILE_MODE)
        fd = posix.open(fifo, posix.O_RDWR | posix.O_NONBLOCK | posix.O_CLOEXEC)
    except OSError as exc:
        # No way to wait: the request is still a fact, and the agent's own dialog answers it.
        _unlink(fifo)
        impl.append_line(journal, impl.encode_line(ts, ctx.src, "PermissionRequest", payload,
                                                   detail=True))
        raise impl.HookFailure(f"cannot wait for an answer: {exc.strerror or exc}") from exc
    try:
        _write_ask(fifo, payload)
        line = impl.encode_line(ts, ctx.src, "PermissionRequest", payload, detail=True,
                                extra=(("request", request),))
        impl.append_line(journal, line)
        timeout = answer_timeout(env)
        answer = _wait(fd, timeout)
        if answer is None:
            answer = _close(fifo, fd)
        elif answer is WITHDRAWN:
            _close(fifo, fd)  # under the lock: a later answer is refused, not lost
        else:
            _unlink(fifo)
    finally:
        posix.close(fd)
        _unlink(fifo + ASK_SUFFIX)
        _unlink(fifo + ".lock")
    if answer is WITHDRAWN:
        _journal_answer(journal, request=request, behavior="withdrawn", by="agent",
                        reason="the agent stopped waiting for the answer",
                        tool=payload.get("tool_name"))
        return
    if answer is not None:
        behavior, message, always = answer
        _decide(behavior, message)
        if always:
            _add_rule(worker_dir, payload, behavior)
        return
    # Nobody answered: the dialog (interactive) or a deny the model can read (headless).
    seconds = int(timeout) if timeout == int(timeout) else round(timeout, 1)
    reason = f"no answer from the coordinator within {seconds} s"
    if not interactive:
        _decide("deny", reason)
        _journal_answer(journal, request=request, behavior="deny", by=BY_TIMEOUT, reason=reason,
                        tool=payload.get("tool_name"))
        return
    _journal_answer(journal, request=request, behavior="dialog", by=BY_TIMEOUT, reason=reason,
                    tool=payload.get("tool_name"))


def answer_timeout(env: "impl._Environ") -> float:
    raw = env.get("FLEET_ANSWER_TIMEOUT")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT
    if value - value != 0.0:  # NaN or infinite
        return DEFAULT_TIMEOUT
    return min(max(value, 0.0), MAX_TIMEOUT)


#: _wait's result when the agent stopped waiting for this hook: the read end of the hook's
#: stdout closed (the session ended, or the agent took the answer from its own dialog).
WITHDRAWN = ("withdrawn", None, False)


def _wait(fd: int, timeout: float) -> "tuple[str, str | None, bool] | None":
    """Block until an answer arrives on the FIFO, the agent stops listening on stdout, or
    ``timeout`` passes: one poll(2), no polling loop. A pipe's write end reports POLLERR once
    its reader is gone, even with no events asked for."""
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.register(1, 0)
    deadline = time.monotonic() + timeout
    _withdraw_on_termination()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            ready = poller.poll(left * 1000.0)
        except InterruptedError:
            continue
        except _Withdrawn:
            return WITHDRAWN
        if not ready:
            return None
        for got_fd, events in ready:
            if got_fd == fd and events & select.POLLIN:
                answer = _read_answer(fd)
                if answer is not None:
                    return answer
            elif got_fd == 1 and events & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                return WITHDRAWN


class _Withdrawn(Exception):
    """The agent signalled the hook to stop while it waited."""


def _withdraw(signum: int, frame: "Any") -> None:
    raise _Withdrawn


def _withdraw_on_termination() -> None:
    """While it waits, SIGTERM ends the wait (the agent cancelling the hook: the person answered
    its dialog, or the session is ending); the hook ignored it until now so that its journal
    line is written whatever happens, and the request is still closed in the journal."""
    try:
        import _signal  # type: ignore[import-not-found]

        _signal.signal(_signal.SIGTERM, _withdraw)
    except Exception:  # no signals here: the wait ends at its timeout
        pass


def _read_answer(fd: int) -> "tuple[str, str | None, bool] | None":
    try:
        data = posix.read(fd, ANSWER_LIMIT)
    except (BlockingIOError, InterruptedError):
        return None
    for raw in data.split(b"\n"):
        parsed = impl.parse_payload(raw) if raw.strip() else {}
        behavior = parsed.get("behavior")
        if behavior == WITHDRAWN[0]:
            return WITHDRAWN
        if behavior in BEHAVIORS:
            message = parsed.get("message")
            return (behavior, message[:1000] if isinstance(message, str) else None,
                    parsed.get("always") is True)
    return None


def _close(fifo: str, fd: int) -> "tuple[str, str | None, bool] | None":
    """Give up on the request: under its lock, remove the FIFO (a later answer is refused) and
    take an answer that arrived in the meantime."""
    import fcntl

    lock = posix.open(fifo + ".lock", posix.O_RDWR | posix.O_CREAT | posix.O_CLOEXEC,
                      impl.FILE_MODE)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _unlink(fifo)
        return _read_answer(fd)
    finally:
        posix.close(lock)


def _decide(behavior: str, message: "str | None") -> None:
    decision: list[tuple[str, Any]] = [("behavior", behavior)]
    if behavior == "deny":
        decision.append(("message", message or "denied by the coordinator"))
    out = impl._encode_object([("hookSpecificOutput", impl._Raw(impl._encode_object([
        ("hookEventName", "PermissionRequest"),
        ("decision", impl._Raw(impl._encode_object(decision))),
    ])))])
    data = out.encode() + b"\n"
    while data:
        data = data[posix.write(1, data):]


def _journal_answer(journal: str, *, request: "str | None", behavior: str, by: str,
                    tool: "Any" = None, reason: "str | None" = None,
                    rule: "str | None" = None) -> None:
    fields: list[tuple[str, Any]] = [
        ("v", impl.SCHEMA_VERSION), ("ts", time.time()), ("src", "fleet"), ("type", "answered"),
        ("request", request), ("decision", behavior), ("by", by),
    ]
    if isinstance(tool, str):
        fields.append(("tool", tool[:100]))
    if reason:
        fields.append(("reason", reason))
    if rule:
        fields.append(("rule", rule))
    impl.append_line(journal, impl._encode_object(
        (k, v) for k, v in fields if v is not None).encode("ascii") + b"\n")


def _unlink(path: str) -> None:
    try:  # noqa: SIM105 (contextlib is a costly import in the hook)
        posix.unlink(path)
    except OSError:
        pass


# -- the session's rules -----------------------------------------------------------------------


def _matching_rule(worker_dir: str, payload: "dict[str, Any]") -> "tuple[str, str] | None":
    """The behavior and text of the last ``--always`` rule of this session that matches the
    request, if any. A rule names a tool, and for Bash one exact command."""
    session = payload.get("session_id")
    tool = payload.get("tool_name")
    if not isinstance(session, str) or not isinstance(tool, str):
        return None
    try:
        fd = posix.open(worker_dir + "/" + RULES_FILE, posix.O_RDONLY | posix.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = posix.read(fd, RULES_LIMIT)
    except OSError:
        return None
    finally:
        posix.close(fd)
    digest = _command_digest(payload)
    found = None
    for raw in data.split(b"\n")[:-1]:
        rule = impl.parse_payload(raw)
        if rule.get("session_id") != session or rule.get("tool") != tool:
            continue
        behavior, wanted = rule.get("behavior"), rule.get("command_sha256")
        if behavior not in BEHAVIORS or (wanted is not None and wanted != digest):
            continue
        text = rule.get("text")
        found = (behavior, text if isinstance(text, str) else tool)
    return found


def _command_digest(payload: "dict[str, Any]") -> "str | None":
    """The sha256 of a Bash request's exact command: a rule matches the command it was given
    for, and the rules file never holds the command itself (it may hold a secret)."""
    tool_input = payload.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if payload.get("tool_name") != "Bash" or not isinstance(command, str):
        return None
    import hashlib

    return hashlib.sha256(command.encode("utf-8", "surrogatepass")).hexdigest()


def _add_rule(worker_dir: str, payload: "dict[str, Any]", behavior: str) -> None:
    """Keep an ``--always`` answer for the rest of this session: the tool, and for Bash the
    exact command (by its digest)."""
    session = payload.get("session_id")
    tool = payload.get("tool_name")
    if not isinstance(session, str) or not isinstance(tool, str):
        return
    digest = _command_digest(payload)
    detail = impl.summarize_tool_input(payload) or {}
    command = detail.get("command")
    text = f"{tool}({command})" if digest is not None and command else tool
    fields: list[tuple[str, Any]] = [("session_id", session[:100]), ("tool", tool[:100]),
                                     ("behavior", behavior), ("text", text)]
    if digest is not None:
        fields.append(("command_sha256", digest))
    impl.append_line(worker_dir + "/" + RULES_FILE,
                     impl._encode_object(fields).encode("ascii") + b"\n")


# -- closing requests the agent answered itself ------------------------------------------------


def _ask_digest(payload: "dict[str, Any]") -> str:
    """What a tool call asks, as a digest: its tool and its command or file path."""
    import hashlib

    tool_input = payload.get("tool_input")
    what: Any = None
    if isinstance(tool_input, dict):
        what = tool_input.get("command", tool_input.get("file_path"))
    key = f"{payload.get('tool_name')}\0{what if isinstance(what, str) else ''}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _write_ask(fifo: str, payload: "dict[str, Any]") -> None:
    session = payload.get("session_id")
    fields: list[tuple[str, Any]] = [
        ("session_id", session[:100] if isinstance(session, str) else None),
        ("ask", _ask_digest(payload)),
    ]
    impl.append_line(fifo + ASK_SUFFIX, impl._encode_object(fields).encode("ascii") + b"\n")


def release(home: str, worker: str, event: str, payload: "dict[str, Any]") -> None:
    """Tell this session's waiting requests that the agent no longer waits for them: the
    person answered the agent's own dialog (the tool ran: its PostToolUse names the same call),
    or the turn or session is over. Claude Code neither signals nor closes the pipes of a
    PermissionRequest hook whose dialog was answered by hand; without this the hook would hold
    its request open until its timeout."""
    if event not in _TURN_OVER and event not in _TOOL_DONE:
        return
    requests = f"{home}/workers/{worker}/{REQUESTS_DIR}"
    try:
        names = posix.listdir(requests)
    except OSError:
        return
    session = payload.get("session_id")
    digest = _ask_digest(payload) if event in _TOOL_DONE else None
    for name in names:
        if not name.endswith(ASK_SUFFIX):
            continue
        fifo = requests + "/" + name[: -len(ASK_SUFFIX)]
        try:
            fd = posix.open(fifo + ASK_SUFFIX, posix.O_RDONLY | posix.O_CLOEXEC)
            try:
                ask = impl.parse_payload(posix.read(fd, 4096))
            finally:
                posix.close(fd)
        except OSError:
            continue
        if ask.get("session_id") != session or (digest is not None and ask.get("ask") != digest):
            continue
        try:
            fd = posix.open(fifo, posix.O_WRONLY | posix.O_NONBLOCK | posix.O_CLOEXEC)
        except OSError:
            continue  # its hook is gone already
        try:
            posix.write(fd, b'{"behavior":"withdrawn"}\n')
        except OSError:
            pass
        finally:
            posix.close(fd)
