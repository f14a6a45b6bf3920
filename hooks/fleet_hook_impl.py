"""The hook program Claude Code and Codex run on every hook event of a fleet worker.

It appends one line to the worker's journal, ``$FLEET_HOME/workers/<worker>/journal.jsonl``:
the envelope (``v``, ``ts``, ``src``, ``type``) and a bounded set of the payload's fields. It never
records tool inputs or outputs (unless ``FLEET_HOOK_DETAIL=summary`` asks for a short redacted
summary) and never the environment.

Rules it lives by, because it runs inside the agent on every tool call:

- standard library only, and only the cheap parts of it: ``json`` imports ``re``, which costs
  more than everything else here together, so payloads are read with the C scanner of ``_json``
  and lines are written with its C string encoder;
- prints nothing, always exits 0, reads a bounded amount of stdin, survives any input;
- a session that belongs to no worker writes nothing and returns as early as it can (before
  parsing the payload when ``CLAUDE_PROJECT_DIR`` already shows it);
- failures go, one bounded JSON line each, to ``$FLEET_HOME/hook-errors.log`` (``fleet doctor``);
  an event that could not be journaled also touches the worker's ``events-lost`` marker, an
  empty file that fits where that line may not (``fleet status`` shows it).

The journal append mirrors ``fleet._journal.append_line``: directories 0700, file 0600,
``O_APPEND``, an exclusive ``flock``, a newline first if the file ends in a torn line, and one
``write(2)`` of the whole line.
"""

import posix
import time

# With -S nothing has imported os yet, and importing it (with os.path and _collections_abc) costs
# more than the rest of this program: the hook uses the posix module beneath it and plain strings
# for paths. _json and fcntl are imported where they are used: a non-worker never needs them.

# typing and collections.abc are costly imports: they are for the type checker only, and the
# annotations that name them are strings (``from __future__ import annotations`` is an import too).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

#: Must equal ``fleet._core.events.HOOK_FIELDS`` (a test checks it); this program cannot import
#: fleet, so it keeps its own copy.
HOOK_FIELDS = (
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
#: Fields the hook derives itself rather than copying from the payload.
DERIVED_FIELDS = ("detail", "origin", "agent_pid", "agent_start", "request")
SCHEMA_VERSION = 1
SOURCES = ("claude", "codex")

#: Variables that carry an agent's credentials: their values never reach a journal, even when
#: the agent prints them (FLEET_SECRET_VARS may name more: a worker's own key variable).
SECRET_VARS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_REFRESH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "FLEET_ENDPOINT_API_KEY",
)
#: Shorter values are not redacted (fleet._redact.MIN_SECRET): no real key is that short.
MIN_SECRET = 8
REDACTED = b"[redacted]"
#: Bytes of stdin kept and parsed; anything beyond is drained (up to DRAIN_LIMIT) and dropped.
READ_LIMIT = 1 << 20
DRAIN_LIMIT = 64 << 20
#: Characters kept of the final message (its head and its tail: the DONE/BLOCKED envelope is on
#: its last line), of ``message``, and of any other string.
LAST_MESSAGE_LIMIT = 4096
LAST_MESSAGE_HEAD = 1024
MESSAGE_LIMIT = 500
STRING_LIMIT = 500
#: Nested values (``error_details``) are kept only while their encoding stays this small.
NESTED_LIMIT = 2000
TYPE_LIMIT = 100
ERROR_LINE_LIMIT = 1000
#: hook-errors.log stops growing at this size, so a hook failing on every call cannot fill a disk.
ERROR_LOG_LIMIT = 1 << 20

#: Every hook-errors.log message about an event that was not journaled starts with this
#: (``fleet._health.LOST_PREFIX`` must be equal: `fleet doctor` counts these).
LOST_PREFIX = "event not recorded: "
#: An empty file in the worker's directory, touched whenever one of its events is lost
#: (``fleet._health.LOST_MARKER`` must be equal: `fleet status` reports it).
LOST_MARKER = "events-lost"

DIR_MODE = 0o700
FILE_MODE = 0o600
#: Journals are opened for reading too: the last byte tells whether the file ends a line (and
#: a FIFO opened for writing only would block until someone reads it).
_JOURNAL_FLAGS = posix.O_RDWR | posix.O_APPEND | posix.O_CREAT | posix.O_CLOEXEC
_MARKER_FLAGS = (
    posix.O_RDONLY | posix.O_CREAT | posix.O_NONBLOCK | posix.O_NOFOLLOW | posix.O_CLOEXEC
)
_S_IFMT = 0o170000
_S_IFDIR = 0o040000
_S_IFIFO = 0o010000
_WORKER_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_WORKER_CHARS = _WORKER_FIRST | frozenset("._-")
_SECRET_WORDS = ("TOKEN", "SECRET", "PASS", "KEY", "AUTH", "CRED", "SESSION", "COOKIE")
_SECRET_PREFIXES = ("sk-", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "xox", "AKIA", "glpat-")
_SECRET_FLAGS = ("-p", "--password", "--token", "--api-key", "--key", "--secret", "bearer",
                 "authorization:", "-u", "--user")
#: A background task (subagent, background shell) in one of these states no longer runs.
_TASK_ENDED = frozenset({"completed", "failed", "killed", "stopped", "cancelled", "canceled",
                         "error", "done"})
#: The prompt Claude Code injects when a background task finishes (2.1.332 and later).
_NOTIFICATION_PROMPT = "<task-notification>"
_SHELLS = frozenset({b"sh", b"dash", b"bash", b"zsh"})
MONITOR_SCRIPT = "fleet_monitor.py"


class HookFailure(Exception):
    """Something worth a line in hook-errors.log."""


# -- the program -------------------------------------------------------------------------------


def main(argv: list[str]) -> None:
    """Run the hook; never raises, never prints."""
    _ignore_termination()
    ts = observed_at()
    src, home = _parse_args(argv)
    env = _Environ()
    home = env.get("FLEET_HOME") or home
    if not home.startswith("/"):
        return  # no usable home: nowhere to write, nowhere to report
    ctx = _Context(home=home, src=src)
    try:
        _run(ctx, ts, env)
    except HookFailure as exc:
        ctx.report(str(exc))
    except Exception as exc:  # any bug or surprise is reported, never raised into the agent
        ctx.report(f"{type(exc).__name__}: {exc}")


class _Context:
    __slots__ = ("event", "home", "src", "worker")

    def __init__(self, *, home: str, src: str) -> None:
        self.home = home
        self.src = src
        self.worker: str | None = None
        self.event: str | None = None

    def report(self, error: str) -> None:
        """Append one JSON line to hook-errors.log; silently give up if even that fails."""
        try:
            fields = [
                ("ts", time.time()),
                ("src", self.src),
                ("worker", self.worker),
                ("type", self.event),
                ("error", " ".join(error.split())[:ERROR_LINE_LIMIT]),
            ]
            line = _encode_object(fields).encode() + b"\n"
            path = self.home + "/hook-errors.log"
            try:
                fd = posix.open(path, _JOURNAL_FLAGS, FILE_MODE)
            except FileNotFoundError:
                _make_dirs(self.home)
                fd = posix.open(path, _JOURNAL_FLAGS, FILE_MODE)
            try:
                write_line(fd, line, ERROR_LOG_LIMIT)
            finally:
                posix.close(fd)
        except Exception:  # nowhere left to report to
            pass


def _ignore_termination() -> None:
    """Finish writing even when the agent signals the hook to stop: Claude Code 2.1.332 sends
    SIGTERM to a ``-p`` session's StopFailure hook a few milliseconds after spawning it, and an
    API error or usage limit would be lost. The installed command ignores SIGTERM before this
    interpreter starts (``trap '' TERM; exec ...``); this covers a command installed by an older
    fleet, from the moment the interpreter runs."""
    try:
        # The C module beneath signal, which would import enum (costly, like os and re).
        import _signal  # type: ignore[import-not-found]

        _signal.signal(_signal.SIGTERM, _signal.SIG_IGN)
    except Exception:  # no signals here: nothing to ignore
        pass


def observed_at() -> float:
    """When the agent fired this hook: the wall-clock time this process was started.

    Not the time now: an async hook, or any hook on a loaded machine, may get the CPU well after
    it was spawned, and a tool event stamped late could look newer than the Stop that followed
    it. The kernel's start time (clock ticks since boot) is turned into wall-clock time through
    the boot-time clock; it is floored to a tick, so ties go to the earlier event."""
    now = time.time()
    try:
        fd = posix.open("/proc/self/stat", posix.O_RDONLY | posix.O_CLOEXEC)
        try:
            stat = posix.read(fd, 4096)
        finally:
            posix.close(fd)
        # Fields after "pid (comm) ": state is the first, starttime the twentieth.
        start_ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / posix.sysconf("SC_CLK_TCK")
    except Exception:  # not Linux, or no /proc: the time now is the best there is
        return now
    return now - age if 0.0 <= age < 60.0 else now


def _parse_args(argv: list[str]) -> tuple[str, str]:
    # No argparse: it imports far more than this whole program.
    src, home = "claude", ""
    it = iter(argv)
    for arg in it:
        if arg == "--tool":
            src = next(it, src)
        elif arg == "--home":
            home = next(it, home)
        elif arg.startswith("--tool="):
            src = arg[7:]
        elif arg.startswith("--home="):
            home = arg[7:]
    if src not in SOURCES:
        src = "claude"
    return src, home


def _run(ctx: _Context, ts: float, env: "_Environ") -> None:
    worker = env.get("FLEET_WORKER")
    payload: dict[str, Any] | None = None
    complete = True
    if worker is not None:
        if not is_worker_id(worker):
            _drain_stdin()
            raise HookFailure(f"FLEET_WORKER {worker[:80]!r} is not a valid worker id")
    else:
        index = read_index(ctx.home)
        if not index:
            _drain_stdin()
            return
        project = env.get("CLAUDE_PROJECT_DIR")
        if project:
            worker = find_worker(index, realpath(project))
            if worker is None:
                _drain_stdin()
                return
        else:
            payload, complete = _read_payload()
            cwd = payload.get("cwd")
            if not isinstance(cwd, str) or not cwd:
                return
            worker = find_worker(index, realpath(cwd))
            if worker is None:
                return
        if not is_worker_id(worker):
            raise HookFailure(f"worktrees.tsv names an invalid worker id {worker[:80]!r}")
    ctx.worker = worker
    if payload is None:
        payload, complete = _read_payload()
    event = payload.get("hook_event_name")
    if isinstance(event, str) and event:
        ctx.event = event[:TYPE_LIMIT]
    if ctx.event is None:
        raise HookFailure(
            "payload has no hook_event_name" if payload else "payload is empty or not JSON"
        )
    detail = env.get("FLEET_HOOK_DETAIL") == "summary"
    agent: tuple[int, int | None] | None = None
    if ctx.event == "SessionStart":
        agent = agent_process(env)
    elif ctx.event == "SessionEnd" and ctx.src == "claude" and "error" not in payload:
        payload = {**payload, **transcript_failure(payload.get("transcript_path"))}
    if ctx.event == "PermissionRequest" and ctx.src == "claude":
        # The request waits for the coordinator's answer (fleet_answer journals it).
        import fleet_answer

        fleet_answer.handle(ctx, ts, payload, env, worker)
        return
    line = encode_line(ts, ctx.src, ctx.event, payload, detail=detail, agent=agent)
    path = journal_path(ctx.home, worker)
    archive = None
    if env.get("FLEET_WORKER") is not None and not _is_dir(path.rpartition("/")[0]):
        # A worker named by FLEET_WORKER that was forgotten: its session goes on, and its
        # events go to its archive, never to a fresh worker of that id.
        archive = forgotten_archive(ctx.home, worker)
        if archive is not None:
            path = archive + "/journal.jsonl"
    append_line(path, line)
    if archive is not None:
        return
    if ctx.src == "claude" and _is_dir(f"{ctx.home}/workers/{worker}/requests"):
        import fleet_answer

        fleet_answer.release(ctx.home, worker, ctx.event, payload)
    if agent is not None and ctx.src == "claude" and env.get("CLAUDE_CODE_ENTRYPOINT") != "sdk-cli":
        start_monitor(ctx.home, worker, agent, env, payload)
    if not complete:
        raise HookFailure(f"payload over {READ_LIMIT} bytes: recorded the fields read before it")


class _Environ:
    """``os.environ`` without os: the raw bytes environment, decoded as os would."""

    __slots__ = ("_raw",)

    def __init__(self) -> None:
        self._raw = posix.environ

    def get(self, name: str) -> str | None:
        value = self._raw.get(name.encode())
        return None if value is None else value.decode("utf-8", "surrogateescape")


def realpath(path: str) -> str:
    """The path with symlinks resolved, for a directory that exists (asking the kernel, by
    entering it: the hook's own working directory does not matter); otherwise normalized."""
    try:
        posix.chdir(path)
        return posix.getcwd()
    except (OSError, ValueError):
        return normpath(path)


def normpath(path: str) -> str:
    if not path.startswith("/"):
        try:
            path = posix.getcwd() + "/" + path
        except OSError:
            path = "/" + path
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
        else:
            parts.append(part)
    return "/" + "/".join(parts)


# -- the agent's process and its session monitor -----------------------------------------------


def agent_process(env: "_Environ") -> "tuple[int, int | None] | None":
    """The agent's own process, as (pid, start time in clock ticks): the pid Claude Code names
    (``CLAUDE_PID``, 2.1.332 and later), else this hook's parent, past any shell between them.
    Recorded at SessionStart so a session that dies without its SessionEnd hook (killed, out of
    memory) is found dead by fleet's liveness watch."""
    raw = env.get("CLAUDE_PID")
    pid = int(raw) if raw and raw.isdigit() else posix.getppid()
    for _ in range(4):
        stat = _proc_stat(pid)
        if stat is None:
            return None
        comm = stat[stat.find(b"(") + 1 : stat.rfind(b")")]
        if comm not in _SHELLS:
            break
        pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
    else:
        return None
    if pid <= 1:
        return None  # the agent already exited: this hook was handed to init
    try:
        start: int | None = int(stat[stat.rfind(b")") + 2 :].split()[19])
    except (IndexError, ValueError):
        start = None
    return pid, start


def _is_dir(path: str) -> bool:
    try:
        return posix.stat(path).st_mode & _S_IFMT == _S_IFDIR
    except OSError:
        return False


def _proc_stat(pid: int) -> bytes | None:
    try:
        fd = posix.open(f"/proc/{pid}/stat", posix.O_RDONLY | posix.O_CLOEXEC)
    except OSError:
        return None
    try:
        return posix.read(fd, 4096)
    except OSError:
        return None
    finally:
        posix.close(fd)


def start_monitor(
    home: str, worker: str, agent: "tuple[int, int | None]", env: "_Environ",
    payload: "dict[str, Any]",
) -> None:
    """Start fleet's session monitor (``fleet_monitor.py``) for an interactive Claude Code
    session, detached: its own session, stdio on /dev/null, nothing inherited. It journals what
    Claude Code's own status file says the session waits for, and ends with the agent. One per
    agent process: a second one (SessionStart fires again on /clear and /compact) finds the
    first one's lock and exits."""
    import sys

    config = env.get("CLAUDE_CONFIG_DIR") or (env.get("HOME") or "") + "/.claude"
    sessions = config.rstrip("/") + "/sessions"
    if not config.startswith("/") or not (_is_dir(sessions) or env.get("CLAUDE_PID")):
        return  # an agent that keeps no status files: nothing to watch
    session = payload.get("session_id")
    pid, start = agent
    argv = [
        sys.executable, "-I", "-S", __file__.rpartition("/")[0] + "/" + MONITOR_SCRIPT,
        "--home", home, "--worker", worker, "--pid", str(pid),
        "--start", "" if start is None else str(start),
        "--sessions", sessions,
        "--session-id", session if isinstance(session, str) else "",
    ]
    null = "/dev/null"
    try:
        posix.posix_spawn(
            sys.executable, argv, {},
            file_actions=[
                (posix.POSIX_SPAWN_OPEN, 0, null, posix.O_RDONLY, 0),
                (posix.POSIX_SPAWN_OPEN, 1, null, posix.O_WRONLY, 0),
                (posix.POSIX_SPAWN_OPEN, 2, null, posix.O_WRONLY, 0),
            ],
            setsid=True,
            # This hook ignores SIGTERM (see _ignore_termination); the monitor must not.
            setsigdef=(15,),
        )
    except OSError as exc:
        raise HookFailure(f"cannot start the session monitor: {exc.strerror or exc}") from exc


# -- the transcript's last word ----------------------------------------------------------------

#: Bytes of a transcript's end read at SessionEnd.
TRANSCRIPT_TAIL = 1 << 16


def transcript_failure(path: "Any") -> "dict[str, Any]":
    """``error`` and ``last_assistant_message`` when the session's transcript ends in an API
    error, else nothing: a second source for the failure its StopFailure hook reports. In
    ``claude -p`` 2.1.332 signals that hook to stop milliseconds after spawning it, and on a
    busy machine it can die before its shell ignores the signal (about once in forty runs
    with every core busy); the SessionEnd hook is not signalled. Reads at most the last 64 KiB
    of the file."""
    if not isinstance(path, str) or not path.startswith("/"):
        return {}
    try:
        fd = posix.open(path, posix.O_RDONLY | posix.O_CLOEXEC)
    except OSError:
        return {}
    try:
        size = posix.fstat(fd).st_size
        posix.lseek(fd, max(0, size - TRANSCRIPT_TAIL), 0)
        data = posix.read(fd, TRANSCRIPT_TAIL)
    except OSError:
        return {}
    finally:
        posix.close(fd)
    for raw in reversed(data.split(b"\n")):
        if b'"assistant"' not in raw:
            continue
        entry = parse_payload(raw)
        if entry.get("type") != "assistant":
            continue
        if entry.get("isApiErrorMessage") is not True:
            return {}
        found: dict[str, Any] = {"error": entry.get("error") or "unknown"}
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        texts = [b.get("text") for b in content if isinstance(b, dict)] if isinstance(
            content, list) else []
        text = "\n".join(t for t in texts if isinstance(t, str))
        if text:
            found["last_assistant_message"] = text
        return found
    return {}


# -- finding the worker ------------------------------------------------------------------------


def is_worker_id(worker: str) -> bool:
    """Same rule as ``fleet._core.ids``: ``[a-z0-9][a-z0-9._-]{0,63}`` (without importing re)."""
    return (
        0 < len(worker) <= 64
        and worker[0] in _WORKER_FIRST
        and all(c in _WORKER_CHARS for c in worker)
    )


def read_index(home: str) -> dict[str, str]:
    """``worktrees.tsv``: ``<realpath>\\t<worker>`` lines; the last line for a path wins."""
    try:
        fd = posix.open(home + "/worktrees.tsv", posix.O_RDONLY | posix.O_CLOEXEC)
    except OSError:
        return {}
    try:
        chunks = []
        while chunk := posix.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError:
        return {}
    finally:
        posix.close(fd)
    data = b"".join(chunks)
    index: dict[str, str] = {}
    # The last piece is empty, or a line still being written: only whole lines count.
    for raw in data.decode("utf-8", "replace").split("\n")[:-1]:
        path, sep, worker = raw.partition("\t")
        if sep and path:
            if worker:
                index[path] = worker
            else:  # a forgotten worker's worktree: its sessions reach nobody
                index.pop(path, None)
    return index


def forgotten_archive(home: str, worker: str) -> str | None:
    """The newest archive of ``worker`` in ``home/forgotten``: ``<worker>.<YYYYmmddTHHMMSSZ>``
    with an optional ``.<n>`` (as ``fleet._forget`` names them), or None."""
    try:
        names = posix.listdir(home + "/forgotten")
    except OSError:
        return None
    best: tuple[str, int, str] | None = None
    prefix = worker + "."
    for name in names:
        if not name.startswith(prefix):
            continue
        stamp, _, n = name[len(prefix):].partition(".")
        if not (len(stamp) == 16 and stamp[8] == "T" and stamp[15] == "Z"
                and _digits(stamp[:8] + stamp[9:15]) and (n == "" or _digits(n))):
            continue
        key = (stamp, int(n or 1), name)
        if best is None or key > best:
            best = key
    return f"{home}/forgotten/{best[2]}" if best is not None else None


def _digits(text: str) -> bool:
    return bool(text) and all(c in "0123456789" for c in text)


def find_worker(index: dict[str, str], project: str) -> str | None:
    """The worker of the longest indexed path equal to or containing ``project``."""
    worker = index.get(project)
    if worker is not None:
        return worker
    best = ""
    for path in index:
        if len(path) > len(best) and project.startswith(path if path.endswith("/") else path + "/"):
            best = path
    return index[best] if best else None


# -- reading the payload -----------------------------------------------------------------------


def _read_stdin(limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes of stdin and whether it ended within them."""
    chunks: list[bytes] = []
    size = 0
    try:
        if posix.isatty(0):
            return b"", True
        while size <= limit:
            chunk = posix.read(0, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        pass
    data = b"".join(chunks)
    if len(data) > limit:
        _drain_stdin()
        return data[:limit], False
    return data, True


def _drain_stdin() -> None:
    """Read and drop what the agent is still writing, so it never meets a closed pipe."""
    drained = 0
    try:
        if posix.isatty(0):
            return
        while drained < DRAIN_LIMIT:
            chunk = posix.read(0, 1 << 16)
            if not chunk:
                return
            drained += len(chunk)
    except OSError:
        pass


def _read_payload() -> "tuple[dict[str, Any], bool]":
    data, complete = _read_stdin(READ_LIMIT)
    return parse_payload(redact_secrets(data)), complete


def redact_secrets(data: bytes) -> bytes:
    """``data`` with the value of every credential variable in the environment (SECRET_VARS,
    and those FLEET_SECRET_VARS names) replaced, before anything is cut or recorded: an agent
    that prints its key (in its final message, say) does not put it in the journal. Costs a
    few dictionary lookups when no such variable is set."""
    env = posix.environ
    names = list(SECRET_VARS)
    extra = env.get(b"FLEET_SECRET_VARS")
    if extra:
        names += extra.decode("utf-8", "replace").split(",")
    values = {env.get(name.encode("utf-8", "replace")) for name in names}
    for value in sorted((v for v in values if v and len(v) >= MIN_SECRET), key=len, reverse=True):
        # As JSON writes it: only quotes and backslashes are escaped in a key-like value.
        for form in (value, value.replace(b"\\", b"\\\\").replace(b'"', b'\\"')):
            if form in data:
                data = data.replace(form, REDACTED)
    return data


class _ScanContext:
    """What ``_json.make_scanner`` reads from a decoder: the settings of ``json.loads``, lenient
    about control characters."""

    strict = False
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict[str, str]

    def __init__(self) -> None:
        self.memo = {}

    @staticmethod
    def parse_constant(name: str) -> None:
        return None  # NaN and Infinity are not JSON


_WHITESPACE = " \t\n\r"


def parse_payload(data: bytes) -> "dict[str, Any]":
    """The top-level members of a JSON object, as many as can be read.

    Members are read one at a time, so a payload cut short (or broken half-way) still yields every
    member before the damage. Anything that is not an object gives ``{}``."""
    import _json

    text = data.decode("utf-8", "replace")
    scan = _json.make_scanner(_ScanContext())  # type: ignore[arg-type]
    out: dict[str, Any] = {}
    n = len(text)
    i = _skip(text, 0, n)
    if i >= n or text[i] != "{":
        return out
    i += 1
    try:
        while True:
            i = _skip(text, i, n)
            if i >= n or text[i] != '"':
                return out
            key, i = _json.scanstring(text, i + 1, False)
            i = _skip(text, i, n)
            if i >= n or text[i] != ":":
                return out
            i = _skip(text, i + 1, n)
            value, i = scan(text, i)
            out[key] = value
            i = _skip(text, i, n)
            if i >= n or text[i] != ",":
                return out
            i += 1
    except Exception:
        # StopIteration, ValueError or RecursionError; and on a string cut short, the C scanner
        # of some builds fails to build its JSONDecodeError and raises SystemError instead.
        return out


def _skip(text: str, i: int, n: int) -> int:
    while i < n and text[i] in _WHITESPACE:
        i += 1
    return i


# -- the journal line --------------------------------------------------------------------------


def select_fields(
    payload: "dict[str, Any]",
    *,
    detail: bool = False,
    agent: "tuple[int, int | None] | None" = None,
) -> "list[tuple[str, Any]]":
    """The bounded fields of a payload that go into the journal, in HOOK_FIELDS order, and the
    few the hook derives: a tool call's redacted ``detail`` (opt-in), the ``origin`` of a
    prompt Claude Code injected itself, and the agent's process (``agent``: pid, start time)."""
    out: list[tuple[str, Any]] = []
    for key in HOOK_FIELDS:
        if key in DERIVED_FIELDS:
            value = _derived(key, payload, detail, agent)
            if value is not None:
                out.append((key, value))
            continue
        if key not in payload:
            continue
        value = payload[key]
        if key == "background_tasks":
            if isinstance(value, list):
                value = running_tasks(value)
            elif not isinstance(value, int) or isinstance(value, bool):
                continue
        elif key == "last_assistant_message":
            value = _cut_message(value)
        elif isinstance(value, str):
            value = value[: MESSAGE_LIMIT if key == "message" else STRING_LIMIT]
        elif isinstance(value, dict | list):
            encoded = _encode_value(value)
            if encoded is None or len(encoded) > NESTED_LIMIT:
                continue
            value = _Raw(encoded)
        out.append((key, value))
    return out


def _derived(
    key: str, payload: "dict[str, Any]", detail: bool, agent: "tuple[int, int | None] | None"
) -> "Any":
    if key == "detail":
        return summarize_tool_input(payload) if detail else None
    if key == "origin":
        prompt = payload.get("prompt")
        if isinstance(prompt, str) and prompt.lstrip().startswith(_NOTIFICATION_PROMPT):
            return "task-notification"
        return None
    if agent is None or key == "request":  # a request id is the hook's own (fleet_answer)
        return None
    return agent[0] if key == "agent_pid" else agent[1]


def running_tasks(tasks: "list[Any]") -> int:
    """How many background tasks still run: a Stop's ``background_tasks`` lists each one with
    its status (a SubagentStop's still lists the subagent that is stopping)."""
    count = 0
    for task in tasks:
        status = task.get("status") if isinstance(task, dict) else None
        if not (isinstance(status, str) and status.lower() in _TASK_ENDED):
            count += 1
    return count


def _cut_message(value: "Any") -> "Any":
    if not isinstance(value, str) or len(value) <= LAST_MESSAGE_LIMIT:
        return value
    gap = "\n…\n"
    tail = LAST_MESSAGE_LIMIT - LAST_MESSAGE_HEAD - len(gap)
    return value[:LAST_MESSAGE_HEAD] + gap + value[-tail:]


def encode_line(
    ts: float,
    src: str,
    event: str,
    payload: "dict[str, Any]",
    *,
    detail: bool = False,
    agent: "tuple[int, int | None] | None" = None,
    extra: "Iterable[tuple[str, Any]]" = (),
) -> bytes:
    """One journal line, newline included: the envelope, then the selected fields, then
    ``extra`` fields the hook made itself (a permission request's id)."""
    fields: list[tuple[str, Any]] = [
        ("v", SCHEMA_VERSION),
        ("ts", ts),
        ("src", src),
        ("type", event),
    ]
    fields.extend(select_fields(payload, detail=detail, agent=agent))
    fields.extend(extra)
    return _encode_object(fields).encode("ascii") + b"\n"


class _Raw(str):
    """Already-encoded JSON."""


def _encode_object(fields: "Iterable[tuple[str, Any]]") -> str:
    parts = []
    for key, value in fields:
        encoded = _encode_value(value)
        if encoded is not None:
            parts.append(_encode_text(key) + ":" + encoded)
    return "{" + ",".join(parts) + "}"


def _encode_text(text: str) -> str:
    import _json

    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from \\ud800-style escapes: not valid UTF-8
        text = text.encode("utf-8", "replace").decode("utf-8")
    return _json.encode_basestring_ascii(text)


def _encode_value(value: "Any", depth: int = 0) -> str | None:
    """Compact JSON for scalars and small nested values; None for what cannot be encoded."""
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, str):
        return _encode_text(value[:STRING_LIMIT] if depth else value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        finite = value - value == 0.0  # false for NaN and both infinities
        return repr(value) if finite else None
    if depth >= 4:
        return None
    if isinstance(value, list):
        items = [_encode_value(v, depth + 1) for v in value[:50]]
        return "[" + ",".join(v for v in items if v is not None) + "]"
    if isinstance(value, dict):
        members = []
        for k, v in list(value.items())[:50]:
            encoded = _encode_value(v, depth + 1)
            if encoded is not None:
                members.append(_encode_text(str(k)[:STRING_LIMIT]) + ":" + encoded)
        return "{" + ",".join(members) + "}"
    return None


# -- the opt-in detail summary -----------------------------------------------------------------


def summarize_tool_input(payload: "dict[str, Any]") -> "dict[str, Any] | None":
    """A short, redacted picture of a tool call: the input's keys and the start of a shell
    command with anything that looks like a secret replaced."""
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    summary: dict[str, Any] = {"input_keys": sorted(str(k)[:64] for k in tool_input)[:20]}
    tool = payload.get("tool_name")
    if isinstance(tool, str):
        summary["tool"] = tool[:100]
    command = tool_input.get("command", tool_input.get("cmd"))
    if isinstance(command, list):
        command = " ".join(str(part) for part in command[:40])
    if isinstance(command, str):
        summary["command"] = redact_command(command)
    return summary


def redact_command(command: str, limit: int = 120) -> str:
    words = command[: limit * 2].split()
    out: list[str] = []
    secret_next = False
    for word in words:
        if secret_next:
            out.append("[redacted]")
            secret_next = False
            continue
        lowered = word.lower()
        if lowered in _SECRET_FLAGS:
            secret_next = True
            out.append(word)
        elif _looks_secret(word):
            name, sep, _ = word.partition("=")
            out.append(f"{name}=[redacted]" if sep and _secret_name(name) else "[redacted]")
        else:
            out.append(word)
    text = " ".join(out)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _secret_name(name: str) -> bool:
    upper = name.upper()
    return any(w in upper for w in _SECRET_WORDS)


def _looks_secret(word: str) -> bool:
    name, sep, _ = word.partition("=")
    if sep and _secret_name(name.lstrip("-")):
        return True
    if "://" in word and "@" in word:
        return True  # credentials in a URL
    bare = word.strip("'\"")
    if bare.startswith(_SECRET_PREFIXES) or bare.lower().startswith("bearer"):
        return True
    if len(bare) >= 24 and "/" not in bare and "." not in bare:
        has_digit = any(c.isdigit() for c in bare)
        has_alpha = any(c.isalpha() for c in bare)
        return has_digit and has_alpha
    return False


# -- appending ---------------------------------------------------------------------------------


def journal_path(home: str, worker: str) -> str:
    return f"{home}/workers/{worker}/journal.jsonl"


def append_line(path: str, line: bytes) -> None:
    """Append one whole line to a journal (see ``write_line``). When that fails (a full disk,
    a read-only home, a journal that is not a file), the failure is raised as a HookFailure
    whose message starts with LOST_PREFIX, and the worker's LOST_MARKER is touched: the event
    is lost, and ``fleet status`` and ``fleet doctor`` say so even if hook-errors.log cannot be
    written either."""
    try:
        try:
            fd = posix.open(path, _JOURNAL_FLAGS, FILE_MODE)
        except FileNotFoundError:
            _make_dirs(path.rpartition("/")[0])
            fd = posix.open(path, _JOURNAL_FLAGS, FILE_MODE)
    except OSError as exc:
        _note_lost(path)
        why = exc.strerror or exc
        raise HookFailure(f"{LOST_PREFIX}cannot open journal {path}: {why}") from exc
    try:
        if not write_line(fd, line):
            raise OSError(f"{path} is not a regular file")
    except OSError as exc:
        _note_lost(path)
        why = exc.strerror or exc
        raise HookFailure(f"{LOST_PREFIX}cannot write journal {path}: {why}") from exc
    finally:
        posix.close(fd)


def write_line(fd: int, line: bytes, limit: int | None = None) -> bool:
    """Append ``line`` to the file open on ``fd`` as fleet's journals are written: under an
    exclusive flock, with a single write(2), starting on a line boundary (a newline first when
    the file ends in a torn line, so the fragment stays a line of its own). A short write (a
    full disk) is cut back, so no torn line stays, and raised. Returns False, writing nothing,
    for a FIFO (a write could block the agent) or a file already ``limit`` bytes long."""
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_EX)
    st = posix.fstat(fd)
    if st.st_mode & _S_IFMT == _S_IFIFO or (limit is not None and st.st_size >= limit):
        return False
    if not _ends_a_line(fd, st.st_size):
        line = b"\n" + line
    written = posix.write(fd, line)
    if written != len(line):
        posix.ftruncate(fd, st.st_size)
        raise OSError("short write: disk full?")
    return True


def _ends_a_line(fd: int, size: int) -> bool:
    """Same rule as ``fleet._journal.ends_a_line``: empty, or its last byte is a newline (one
    pread; a file that cannot be read back, like a device, counts as ended)."""
    if size <= 0:
        return True
    try:
        return posix.pread(fd, 1, size - 1) in (b"\n", b"")
    except OSError:
        return True


def _note_lost(journal: str) -> None:
    """Touch the worker's LOST_MARKER: an empty file, so it can be made where nothing else
    fits (a full disk, a file size limit); its mtime is when the last event was lost."""
    marker = journal.rpartition("/")[0] + "/" + LOST_MARKER
    try:
        # Non-blocking and not following links: whatever sits there, this never hangs.
        fd = posix.open(marker, _MARKER_FLAGS, FILE_MODE)
    except OSError:
        return
    try:
        posix.utime(fd)
    except OSError:
        pass
    finally:
        posix.close(fd)


def _make_dirs(path: str) -> None:
    """Create ``path`` and its missing parents, each 0700 (os.makedirs would leave the parents
    at the umask's mode)."""
    try:
        if posix.stat(path).st_mode & _S_IFMT == _S_IFDIR:
            return
    except OSError:
        pass
    parent = path.rpartition("/")[0]
    if parent and parent != path:
        _make_dirs(parent)
    try:
        posix.mkdir(path, DIR_MODE)
    except FileExistsError:
        return
    posix.chmod(path, DIR_MODE)  # exactly 0700, whatever bits the agent's umask took away
