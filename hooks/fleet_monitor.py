"""fleet's session monitor: what a live Claude Code session waits for, from Claude Code itself.

``python -I -S fleet_monitor.py --home H --worker W --pid P --start T --sessions DIR
--session-id S``, started detached by fleet's hook at an interactive session's SessionStart.

Claude Code keeps one status file per live session, ``<config dir>/sessions/<pid>.json``, whose
``status`` is ``busy``, ``idle`` or ``waiting``, with ``waitingFor`` saying what for ("permission
prompt", "input needed", "dialog open"). Some screens that wait for a person fire no hook, or
fire one only seconds later: auto mode's "can't check actions in this session" screen gets a
Notification after about 6 s, the approval dialog behind it none at first. The monitor is the
second first-party source for those: it journals every change of status as an ``agent_status``
event, stamped with the time Claude Code wrote it, and the fold decides what it means.

It reads nothing else, never writes into the agent's files, and ends when the agent's process
does (a pidfd); changes are seen through inotify, or a 0.25 s stat poll where inotify is not
available. One monitor per agent process: it holds ``monitor-<pid>.lock`` in the worker's
directory, and a second one started for the same process exits at once.

Standard library only, like the hook: it reuses the hook program's journal append.
"""

import contextlib
import sys

sys.path.insert(0, __file__.rpartition("/")[0] or ".")

import fleet_hook_impl as hook  # the hook's own journal writer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

POLL_INTERVAL = 0.25
#: An agent that has written no status file this long after its SessionStart keeps none.
FILE_WAIT = 5.0
STATUS_LIMIT = 64
WAITING_LIMIT = 200
#: inotify flags (linux/inotify.h): a file in the directory was written, created, moved in or
#: removed.
_IN_MODIFY, _IN_CLOSE_WRITE, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x2, 0x8, 0x80, 0x100, 0x200
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000


def main(argv: "list[str]") -> int:
    args = _parse(argv)
    home, worker = args.get("--home", ""), args.get("--worker", "")
    if not home.startswith("/") or not hook.is_worker_id(worker):
        return 2
    try:
        pid = int(args.get("--pid", ""))
    except ValueError:
        return 2
    start = args.get("--start") or None
    ctx = hook._Context(home=home, src="monitor")
    ctx.worker, ctx.event = worker, "agent_status"
    try:
        return Monitor(
            home=home, worker=worker, pid=pid, start=start,
            sessions=args.get("--sessions", ""), session_id=args.get("--session-id") or None,
        ).run()
    except Exception as exc:  # report, never raise: nobody reads this process's stderr
        ctx.report(f"session monitor: {type(exc).__name__}: {exc}")
        return 1


def _parse(argv: "list[str]") -> "dict[str, str]":
    out: dict[str, str] = {}
    it = iter(argv)
    for arg in it:
        if arg.startswith("--"):
            out[arg] = next(it, "")
    return out


class Monitor:
    def __init__(
        self, *, home: str, worker: str, pid: int, start: "str | None", sessions: str,
        session_id: "str | None",
    ) -> None:
        self.home, self.worker, self.pid, self.start = home, worker, pid, start
        self.sessions = sessions
        self.file = f"{sessions}/{pid}.json"
        self.session_id = session_id
        self.last: tuple[str, str | None] | None = None

    def run(self) -> int:
        import fcntl
        import os
        import select
        import time

        lock_path = f"{self.home}/workers/{self.worker}/monitor-{self.pid}.lock"
        try:
            lock = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, hook.FILE_MODE)
        except OSError:
            return 1  # no worker directory: nothing to journal into
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            return 0  # this session already has its monitor
        try:
            pidfd = self._open_pidfd()
            if pidfd is None:
                return 0
            notify = _Inotify.open()
            give_up = time.monotonic() + FILE_WAIT
            try:
                watching = False
                while True:
                    if notify is not None and not watching:
                        watching = notify.watch(self.sessions)
                    self.check()
                    if self.last is None and time.monotonic() > give_up:
                        return 0
                    timeout = None if watching and self.last is not None else POLL_INTERVAL
                    fds = [pidfd] + ([notify.fd] if watching and notify is not None else [])
                    try:
                        ready, _, _ = select.select(fds, [], [], timeout)
                    except InterruptedError:
                        continue
                    if pidfd in ready:
                        return 0
                    if notify is not None and notify.fd in ready:
                        notify.drain()
            finally:
                os.close(pidfd)
                if notify is not None:
                    notify.close()
        finally:
            # Unlinked while held: the process it names is gone, so no monitor can want it.
            with contextlib.suppress(OSError):
                os.unlink(lock_path)
            os.close(lock)

    def _open_pidfd(self) -> "int | None":
        import os

        try:
            fd = os.pidfd_open(self.pid)
        except (OSError, AttributeError):
            return None  # the agent is gone already, or no pidfds here
        # Opened after the pid could have been reused: check it is still the agent.
        if self.start is not None:
            stat = hook._proc_stat(self.pid)
            rest = stat[stat.rfind(b")") + 2 :].split() if stat else []
            if len(rest) < 20 or rest[19].decode() != self.start:
                os.close(fd)
                return None
        return fd

    def check(self) -> None:
        """Read the status file; journal a change."""
        status = read_status(self.file)
        if status is None:
            return
        state, waiting_for, ts, session = status
        key = (state, waiting_for)
        if key == self.last:
            return
        self.last = key
        if session:
            self.session_id = session
        line = status_line(
            ts, state, waiting_for=waiting_for, pid=self.pid, session_id=self.session_id
        )
        hook.append_line(hook.journal_path(self.home, self.worker), line)


def read_status(path: str) -> "tuple[str, str | None, float, str | None] | None":
    """(status, waitingFor, when it was written, session id) from a session file, or None
    when there is none (yet) or it does not read."""
    import json
    import time

    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(1 << 16))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    status = data.get("status")
    if not isinstance(status, str) or not status:
        return None
    waiting = data.get("waitingFor") if status == "waiting" else None
    when = data.get("statusUpdatedAt", data.get("updatedAt"))
    ts = when / 1000.0 if isinstance(when, int | float) and not isinstance(when, bool) else None
    session = data.get("sessionId")
    return (
        status[:STATUS_LIMIT],
        waiting[:WAITING_LIMIT] if isinstance(waiting, str) else None,
        ts if ts is not None else time.time(),
        session if isinstance(session, str) else None,
    )


def status_line(
    ts: float, status: str, *, waiting_for: "str | None", pid: int, session_id: "str | None"
) -> bytes:
    fields: list[tuple[str, Any]] = [
        ("v", hook.SCHEMA_VERSION), ("ts", ts), ("src", "monitor"), ("type", "agent_status"),
        ("status", status), ("waiting_for", waiting_for), ("pid", pid),
        ("session_id", session_id),
    ]
    kept = [(k, v) for k, v in fields if v is not None]
    return hook._encode_object(kept).encode("ascii") + b"\n"


class _Inotify:
    """The few inotify calls the monitor needs, through ctypes (the standard library has no
    binding)."""

    def __init__(self, libc: "Any", fd: int) -> None:
        self._libc = libc
        self.fd = fd

    @classmethod
    def open(cls) -> "_Inotify | None":
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError):
            return None
        return cls(libc, fd) if fd >= 0 else None

    def watch(self, directory: str) -> bool:
        mask = _IN_MODIFY | _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
        return bool(self._libc.inotify_add_watch(self.fd, directory.encode(), mask) >= 0)

    def drain(self) -> None:
        import os

        with contextlib.suppress(OSError):  # EAGAIN: nothing left
            while os.read(self.fd, 1 << 16):
                pass

    def close(self) -> None:
        import os

        with contextlib.suppress(OSError):
            os.close(self.fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
