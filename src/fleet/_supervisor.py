"""The supervisor of one headless worker run: ``python -m fleet._supervisor --spec FILE``.

The headless adapter starts it detached (its own session, stdin a pipe, output to a log), so it
outlives the coordinator's shell. It reads one JSON line from stdin: ``{"key": ...}``, the API key
when the run needs one (it reaches the agent through the agent's environment only). End of input
without that line means the coordinator gave up before releasing the run: nothing is started.

Then it runs the agent in the worktree (own process group, stdin ``/dev/null``, stdout and stderr
to files), journals ``started`` (pid, start time, attempt) and, when the run is over, one
``exited`` with the parsed final result. Success is gated on ``is_error`` and the exit code, never
on ``subtype`` (a failed Claude run still says ``"subtype": "success"``). Overload and transient
errors are retried with jittered exponential backoff up to a bound, optionally on the small model;
an authentication error is not retried; a usage or rate limit ends the run with
``reason="limit"`` and the reset time when the message tells it; a wall-clock timeout ends it with
``reason="timeout"``; SIGTERM (``fleet stop``) ends it with ``reason="stopped"``. Stopping or
timing out terminates the agent's whole process group (SIGTERM, then SIGKILL after a grace).

``exited.reason``: None (the run finished; its result may carry a DONE/BLOCKED envelope),
``auth`` (401/403, not retried), ``limit`` (429 or a usage limit; ``reset_at`` when known),
``retries`` (overload or transient errors past ``max_attempts``), ``error`` (any other failure),
``timeout``, ``stopped``. Between attempts nothing is journaled but the next ``started``
(``attempt`` > 1), so a retried run never reads as gone; the backoff runs inside the next
attempt's process before it execs the agent, so the journaled pid is alive throughout.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final, Protocol

import attrs
import cattrs
import orjson

from fleet import _health, _journal
from fleet._clock import Clock, SystemClock
from fleet._core.events import Event, Exited, HookEvent, HooksOff, Started
from fleet._core.results import (
    Outcome,
    parse_output,
)
from fleet._core.stream import StreamReader
from fleet._errors import JournalError
from fleet._home import FILE_MODE, ensure_dir
from fleet._redact import StreamRedactor, redact, redact_value, secrets_of
from fleet._stream_tail import StreamTail, hooks_off_reasons

SRC: Final = "headless"
#: Names the variables that carry the worker's key, for the hook (which redacts their values).
SECRET_VARS_ENV: Final = "FLEET_SECRET_VARS"


# -- the spec the adapter writes ------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RunSpec:
    """One run of a worker, as the adapter planned it. Holds no secret: the key arrives on
    stdin and goes to the variables named in ``key_vars``; ``env_set``/``env_unset`` change the
    supervisor's own environment into the agent's."""

    worker: str
    home: str
    tool: str
    run: int
    cwd: str
    argv: tuple[str, ...]
    prompt: str | None = None
    fallback_argv: tuple[str, ...] | None = None
    env_set: dict[str, str] = attrs.field(factory=dict)
    env_unset: tuple[str, ...] = ()
    key_vars: tuple[str, ...] = ()
    output_dir: str
    max_attempts: int = 4
    fallback_after: int = 1
    backoff_base: float = 2.0
    backoff_max: float = 60.0
    timeout: float | None = None
    grace: float = 5.0


_converter = cattrs.Converter()


def dump_spec(spec: RunSpec) -> bytes:
    return orjson.dumps(_converter.unstructure(spec), option=orjson.OPT_INDENT_2)


def load_spec(data: bytes) -> RunSpec:
    return _converter.structure(orjson.loads(data), RunSpec)


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Jittered exponential backoff before attempt ``attempt + 1``: a random point in the upper
    half of ``min(cap, base * 2**(attempt-1))``, so retrying workers spread out."""
    ceiling = min(cap, base * math.pow(2, max(0, attempt - 1)))
    return ceiling * (0.5 + rng.random() / 2)


# -- processes ------------------------------------------------------------------------------


class Proc(Protocol):
    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...


Spawner = Callable[[Sequence[str], str, Mapping[str, str], IO[bytes], IO[bytes]], Proc]


def spawn_agent(
    argv: Sequence[str], cwd: str, env: Mapping[str, str], out: IO[bytes], err: IO[bytes]
) -> Proc:
    """Start the agent as the leader of its own process group, stdin from /dev/null."""
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=err,
        start_new_session=True,
        close_fds=True,
    )


def exit_status(code: int | None) -> int | None:
    """Popen's negative "killed by signal N" as the shell's 128+N."""
    if code is not None and code < 0:
        return 128 - code
    return code


def start_time_of(pid: int) -> int | None:
    from fleet._proc import process_start_time

    return process_start_time(pid)


# -- the supervisor -------------------------------------------------------------------------


class Supervisor:
    """Runs the attempts of one :class:`RunSpec` and journals them.

    ``clock`` (deadlines and timestamps), ``spawn`` (the agent process) and ``rng`` (backoff
    jitter) are injectable; ``delays`` lists the backoffs chosen."""

    def __init__(
        self,
        spec: RunSpec,
        *,
        key: str | None = None,
        base_env: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        spawn: Spawner = spawn_agent,
        rng: random.Random | None = None,
    ) -> None:
        self.spec = spec
        self.home = Path(spec.home)
        self.clock = clock or SystemClock()
        self.spawn = spawn
        self.rng = rng or random.Random()
        self._key = key
        #: What is taken out, by value, of everything the supervisor writes: the key.
        self._secrets = secrets_of([key])
        self._base_env = dict(os.environ if base_env is None else base_env)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._stop = False
        self.delays: list[float] = []

    # stopping ---------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask the run to end (safe from a signal handler or another thread)."""
        self._stop = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def stopping(self) -> bool:
        """Whether a stop was requested (a method: it changes under the caller's feet)."""
        return self._stop

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: object) -> None:
            self.request_stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def close(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # the environment --------------------------------------------------------------------

    def child_env(self) -> dict[str, str]:
        env = {k: v for k, v in self._base_env.items() if k not in self.spec.env_unset}
        env.update(self.spec.env_set)
        if self._key is not None:
            for name in self.spec.key_vars:
                env[name] = self._key
            if self.spec.key_vars:
                # Names only: fleet's hook keeps these variables' values out of the journal.
                env[SECRET_VARS_ENV] = ",".join(self.spec.key_vars)
        return env

    # waiting ----------------------------------------------------------------------------

    def _wait(self, proc: Proc, timeout: float | None) -> int | None:
        """Wait for ``proc`` to exit, a stop request, or ``timeout``; returns its exit code
        or None. Blocks in select(2) on a pidfd where there is one (no polling)."""
        code = proc.poll()
        if code is not None or self.stopping():
            return code
        pidfd = -1
        with contextlib.suppress(OSError, AttributeError):
            pidfd = os.pidfd_open(proc.pid)
        try:
            end = None if timeout is None else self.clock.monotonic() + timeout
            while True:
                left = None if end is None else max(0.0, end - self.clock.monotonic())
                step = left if pidfd >= 0 else min(left if left is not None else 0.2, 0.2)
                fds = [self._wake_r] + ([pidfd] if pidfd >= 0 else [])
                with contextlib.suppress(InterruptedError):
                    select.select(fds, [], [], step)
                code = proc.poll()
                if code is not None or self.stopping():
                    return code
                if end is not None and self.clock.monotonic() >= end:
                    return None
        finally:
            if pidfd >= 0:
                os.close(pidfd)

    def _terminate(self, proc: Proc) -> int | None:
        """SIGTERM the agent's process group, then SIGKILL it after the grace period."""
        _killpg(proc.pid, signal.SIGTERM)
        end = self.clock.monotonic() + self.spec.grace
        while (code := proc.poll()) is None and self.clock.monotonic() < end:
            time.sleep(0.05)
        if code is None:
            _killpg(proc.pid, signal.SIGKILL)
            code = proc.wait() if isinstance(proc, subprocess.Popen) else proc.poll()
        return code

    def _linger(self, pgid: int, seconds: float) -> None:
        """Wait until the process group is empty, at most ``seconds``."""
        for _ in range(max(1, int(seconds / 0.05))):
            if self.stopping():
                return
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.05)

    # journaling -------------------------------------------------------------------------

    def _journal(self, event: Event) -> None:
        try:
            _journal.append(self.home, self.spec.worker, redact_value(event, self._secrets))
        except JournalError as exc:
            # The run goes on (the agent is working); the loss is marked where `fleet
            # status` and `fleet doctor` see it, and logged.
            _health.note_lost(self.home, self.spec.worker)
            self.log(f"{_health.LOST_PREFIX}{exc}")

    # the agent's own stream ----------------------------------------------------------

    def _tail(self, out: Path, pgid: int) -> StreamTail:
        """Follow the attempt's output live and journal what decides its state."""
        checked: list[bool] = []

        def emit(event: Event) -> None:
            self._journal(event)
            if (isinstance(event, HookEvent) and event.hook == "SessionStart" and not checked
                    and self.spec.tool == "claude"):
                checked.append(True)
                why = hooks_off_reasons(pgid)
                if why:
                    self._journal(HooksOff(ts=self.clock.now(), why=why))

        return StreamTail(out, StreamReader(self.spec.tool), emit, self.clock).start()

    def _untail(self, tail: StreamTail) -> None:
        tail.stop()
        if tail.error:
            self.log(f"reading the agent's stream failed: {tail.error}")

    def log(self, text: str) -> None:
        """A line in the supervisor's log (its stderr), without the key."""
        sys.stderr.write(f"supervisor: {redact(text, self._secrets)}\n")
        sys.stderr.flush()

    def _exited(self, outcome: Outcome | None, *, reason: str | None, code: int | None) -> Exited:
        event = Exited(
            ts=self.clock.now(),
            src=SRC,
            exit_code=code if outcome is None else outcome.exit_code,
            is_error=True if outcome is None else outcome.is_error,
            api_error_status=None if outcome is None else outcome.api_error_status,
            result=None if outcome is None else outcome.result,
            usage={} if outcome is None else dict(outcome.usage),
            session_id=None if outcome is None else outcome.session_id,
            reason=reason,
            reset_at=None if outcome is None else outcome.reset_at,
            claim=None if outcome is None else outcome.claim,
            denials=() if outcome is None else outcome.denials,
        )
        self._journal(event)
        return event

    def failed(self, why: str) -> Exited:
        """Journal that the run ended in an error of the supervisor's own."""
        outcome = Outcome(kind="error", exit_code=None, is_error=True, result=why[:2000])
        return self._exited(outcome, reason="error", code=None)

    # the run ----------------------------------------------------------------------------

    def run(self) -> Exited:
        spec = self.spec
        out_dir = Path(spec.output_dir)
        ensure_dir(out_dir)
        deadline = None if spec.timeout is None else self.clock.monotonic() + spec.timeout
        env = self.child_env()
        last: Outcome | None = None
        usage: dict[str, int] = {}
        delay = 0.0
        for attempt in range(1, max(1, spec.max_attempts) + 1):
            if self.stopping():
                return self._exited(last, reason="stopped", code=None)
            use_fallback = spec.fallback_argv is not None and attempt > spec.fallback_after
            argv = list(spec.fallback_argv if use_fallback and spec.fallback_argv else spec.argv)
            if spec.prompt is not None:
                argv.append(spec.prompt)
            if delay > 0:
                # The backoff runs inside the attempt's own process, which then becomes the
                # agent (exec keeps the pid): the journaled pid stays alive from one attempt
                # to the next, so nobody mistakes a retry's pause for a vanished worker.
                argv = ["/bin/sh", "-c", _BACKOFF_SH, "fleet-backoff", f"{delay:.3f}", *argv]
            stem = out_dir / f"run-{spec.run}-{attempt}"
            with _agent_output(stem, self._secrets) as (out, err):
                try:
                    proc = self.spawn(argv, spec.cwd, env, out, err)
                except (OSError, ValueError) as exc:  # ValueError: a NUL byte in argv or env
                    cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                    outcome = Outcome(
                        kind="error",
                        exit_code=127,
                        is_error=True,
                        result=f"cannot start {argv[0]}: {cause}",
                    )
                    return self._exited(outcome, reason="error", code=127)
                self._journal(
                    Started(
                        ts=self.clock.now(),
                        src=SRC,
                        pid=proc.pid,
                        start_time=start_time_of(proc.pid),
                        attempt=attempt,
                    )
                )
                tail = self._tail(stem.with_suffix(".out"), proc.pid)
                left = None if deadline is None else max(0.0, deadline - self.clock.monotonic())
                code = self._wait(proc, left)
            # Everything the attempt printed is in the file now: its facts go to the journal
            # before its end does.
            self._untail(tail)
            if code is None:
                # Journal the verdict before the agent hears of it: a terminated agent still
                # runs its last hooks, and the state must say why it ended (stopped, timeout).
                reason = "stopped" if self.stopping() else "timeout"
                partial = _partial(spec.tool, stem, None, self.clock.now())
                event = self._exited(
                    attrs.evolve(partial, usage=_add(usage, partial.usage)),
                    reason=reason,
                    code=None,
                )
                self._terminate(proc)
                _killpg(proc.pid, signal.SIGKILL)
                return event
            outcome = parse_output(
                spec.tool,
                _read_text(stem.with_suffix(".out")),
                _read_text(stem.with_suffix(".err")),
                exit_status(code),
                self.clock.now(),
            )
            usage = _add(usage, outcome.usage)
            outcome = attrs.evolve(outcome, usage=dict(usage))
            last = outcome
            why = _REASONS.get(outcome.kind, "retries")
            retry = outcome.kind == "transient" and attempt < spec.max_attempts
            if retry:
                delay = backoff_delay(attempt, spec.backoff_base, spec.backoff_max, self.rng)
                if deadline is not None and self.clock.monotonic() + delay >= deadline:
                    retry, why = False, "timeout"
            if not retry:
                event = self._exited(outcome, reason=why, code=outcome.exit_code)
                # Whatever the agent left running in its group (background shells) ends with
                # it, after a moment for its last hooks (some run async) to finish writing.
                self._linger(proc.pid, 2.0)
                _killpg(proc.pid, signal.SIGTERM)
                return event
            _killpg(proc.pid, signal.SIGTERM)
            self.delays.append(delay)
        return self._exited(last, reason="retries", code=None if last is None else last.exit_code)


_REASONS: Final[dict[str, str | None]] = {
    "ok": None,
    "auth": "auth",
    "limit": "limit",
    "error": "error",
    "transient": "retries",
}
_BACKOFF_SH: Final = 'sleep "$1"; shift; exec "$@"'


def _add(total: dict[str, int], more: Mapping[str, int]) -> dict[str, int]:
    out = dict(total)
    for k, v in more.items():
        out[k] = out.get(k, 0) + v
    return out


def _partial(tool: str, stem: Path, code: int | None, now: float) -> Outcome:
    """What a killed attempt had said so far (its session id, mostly)."""
    parsed = parse_output(
        tool,
        _read_text(stem.with_suffix(".out")),
        _read_text(stem.with_suffix(".err")),
        exit_status(code),
        now,
    )
    return attrs.evolve(parsed, is_error=True, exit_code=exit_status(code), kind="error")


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@contextlib.contextmanager
def _agent_output(stem: Path, secrets: Sequence[str]) -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """Where an attempt's stdout and stderr go: ``<stem>.out`` and ``<stem>.err``. With a key
    to keep out of them, the agent writes to pipes and a :class:`_Redacting` thread copies what
    arrives to the files with the key replaced, so it never reaches the disk even when the
    agent prints it; on leaving, what the agent wrote so far is in the files."""
    if not secrets:
        with _open_private(stem.with_suffix(".out")) as out, _open_private(
            stem.with_suffix(".err")
        ) as err:
            yield out, err
        return
    pump = _Redacting([stem.with_suffix(".out"), stem.with_suffix(".err")], secrets)
    try:
        out, err = pump.ends
        yield out, err
    finally:
        pump.settle()


class _Redacting:
    """Copies pipes to files with the secrets replaced (:class:`StreamRedactor`), on a daemon
    thread that lives until every writer of the pipes is gone: background processes the agent
    left behind may write after it exits, and are not cut off (a closed pipe would kill them
    with SIGPIPE before their last hooks ran)."""

    def __init__(self, paths: Sequence[Path], secrets: Sequence[str]) -> None:
        self._lock = threading.Lock()
        self._streams: list[tuple[int, int, StreamRedactor]] = []
        self.ends: list[IO[bytes]] = []
        for path in paths:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
            r, w = os.pipe()
            os.set_blocking(r, False)
            self._streams.append((r, fd, StreamRedactor(secrets)))
            self.ends.append(os.fdopen(w, "wb", buffering=0))
        self._thread = threading.Thread(target=self._run, name="fleet-redact", daemon=True)
        self._thread.start()

    def settle(self) -> None:
        """Close this process's ends of the pipes (the agent has its own), and put everything
        the agent wrote so far in the files."""
        for end in self.ends:
            with contextlib.suppress(OSError):
                end.close()
        with self._lock:
            for stream in list(self._streams):
                self._drain(stream)
                _write_all(stream[1], stream[2].flush())

    def _run(self) -> None:
        while True:
            with self._lock:
                fds = [r for r, _, _ in self._streams]
            if not fds:
                return
            try:
                ready, _, _ = select.select(fds, [], [])
            except InterruptedError:
                continue
            except (OSError, ValueError):
                return
            with self._lock:
                for stream in [s for s in self._streams if s[0] in ready]:
                    self._drain(stream)

    def _drain(self, stream: tuple[int, int, StreamRedactor]) -> None:
        """Copy what the pipe holds; at its end, flush and close both sides (under the lock)."""
        r, fd, redactor = stream
        while True:
            try:
                chunk = os.read(r, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                _write_all(fd, redactor.flush())
                os.close(r)
                os.close(fd)
                self._streams.remove(stream)
                return
            _write_all(fd, redactor.feed(chunk))


def _write_all(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError):  # a full disk loses output, not the run
        while data:
            data = data[os.write(fd, data) :]


@contextlib.contextmanager
def _open_private(path: Path) -> Any:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    with os.fdopen(fd, "wb") as f:
        yield f


def _read_text(path: Path, limit: int = 8 << 20) -> str:
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


# -- entry point ----------------------------------------------------------------------------


def read_release(stream: IO[bytes]) -> dict[str, Any] | None:
    """The coordinator's release line, or None when it closed the pipe without one."""
    line = stream.readline(1 << 16)
    if not line.strip():
        return None
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def detach(log: Path) -> None:
    """Become a daemon the coordinator need not wait for: fork; the parent prints the child's
    pid on stdout and exits (the coordinator reaps it at once, so no zombie and no child of
    its is left running); the child starts a session of its own, sends its output to ``log``,
    and carries on with stdin (the release pipe) as it was."""
    pid = os.fork()  # a fresh interpreter, no thread yet: safe to fork
    if pid:
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()
        os._exit(0)
    os.setsid()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, FILE_MODE)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fleet._supervisor")
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--detach", metavar="LOG", type=Path,
                        help="fork away from the coordinator, print the pid, log to LOG")
    parser.add_argument("--turn-fd", metavar="FD", type=int,
                        help="the worker's turn lock (fleet._turns), inherited: held until "
                        "the run has ended, so the next follow-up waits for it")
    args = parser.parse_args(argv)
    if args.turn_fd is not None:
        # Kept open to the end of this process, and never passed on: the agent, or what it
        # leaves running, must not hold the worker's turn.
        with contextlib.suppress(OSError):
            os.set_inheritable(args.turn_fd, False)
    spec = load_spec(args.spec.read_bytes())
    # Stop requests that arrive before the agent starts must still count.
    holder: list[Supervisor] = []
    early: list[int] = []

    def on_term(signum: int, frame: object) -> None:
        if holder:
            holder[0].request_stop()
        else:
            early.append(signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if args.detach is not None:
        detach(args.detach)
    release = read_release(sys.stdin.buffer)
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    if release is None:
        sys.stderr.write("supervisor: not released by the coordinator; nothing started\n")
        return 1
    key = release.get("key")
    sup = Supervisor(spec, key=key if isinstance(key, str) else None)
    del key, release
    holder.append(sup)
    sup.install_signal_handlers()
    if early:
        sup.request_stop()
    try:
        done = sup.run()
    except Exception as exc:
        # Whatever went wrong, the worker must not stay `starting` forever: journal the end.
        sup.log(f"failed: {type(exc).__name__}: {exc}")
        done = sup.failed(f"the supervisor failed: {type(exc).__name__}: {exc}")
    finally:
        sup.close()
    sys.stderr.write(
        f"supervisor: run {spec.run} of {spec.worker} ended: reason={done.reason} "
        f"exit={done.exit_code} is_error={done.is_error} status={done.api_error_status}\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
