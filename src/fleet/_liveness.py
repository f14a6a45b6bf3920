"""Finding workers whose process died without saying goodbye.

Where the kernel offers pidfds (Linux 5.3+), one thread waits on all of them at once and learns
of a death the moment it happens; elsewhere the watcher's slow sweep checks the known pids.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
from collections.abc import Callable

from fleet._proc import is_alive


class DeathWatch:
    """Calls ``on_death(worker)`` once when a watched process ends (or is found already dead,
    or found to be another process under a reused pid)."""

    def __init__(self, on_death: Callable[[str], None]) -> None:
        self._on_death = on_death
        self._lock = threading.Lock()
        self._watched: dict[str, tuple[int, int | None]] = {}
        self._fds: dict[int, str] = {}
        self._selector: selectors.BaseSelector | None = None
        self._wake_r, self._wake_w = -1, -1
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.native = hasattr(os, "pidfd_open")

    def start(self) -> None:
        if not self.native:
            return
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name="fleet-deathwatch", daemon=True)
        self._thread.start()

    def watch(self, worker: str, pid: int, start_time: int | None) -> None:
        with self._lock:
            if self._watched.get(worker) == (pid, start_time):
                return
            self._forget_locked(worker)
            self._watched[worker] = (pid, start_time)
        if not is_alive(pid, start_time):
            self._died(worker, pid)
            return
        if self._selector is None:
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            self._died(worker, pid)
            return
        # The pid could have been reused between the check above and pidfd_open.
        if not is_alive(pid, start_time):
            os.close(fd)
            self._died(worker, pid)
            return
        with self._lock:
            self._fds[fd] = worker
            self._selector.register(fd, selectors.EVENT_READ)
        self._poke()

    def forget(self, worker: str) -> None:
        with self._lock:
            self._forget_locked(worker)

    def _forget_locked(self, worker: str) -> None:
        self._watched.pop(worker, None)
        for fd, name in list(self._fds.items()):
            if name == worker:
                del self._fds[fd]
                if self._selector is not None:
                    with contextlib.suppress(KeyError, ValueError):
                        self._selector.unregister(fd)
                os.close(fd)

    def sweep(self) -> None:
        """Check every watched pid the slow way (for systems without pidfds)."""
        with self._lock:
            items = list(self._watched.items())
        for worker, (pid, start_time) in items:
            if not is_alive(pid, start_time):
                self._died(worker, pid)

    def _died(self, worker: str, pid: int) -> None:
        with self._lock:
            if self._watched.get(worker, (None,))[0] != pid:
                return
            self._forget_locked(worker)
        self._on_death(worker)

    def _poke(self) -> None:
        if self._wake_w >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")

    def _run(self) -> None:
        assert self._selector is not None
        while not self._stopping:
            try:
                ready = self._selector.select()
            except OSError:
                continue
            for key, _ in ready:
                if key.fd == self._wake_r:
                    with contextlib.suppress(OSError):
                        os.read(self._wake_r, 4096)
                    continue
                with self._lock:
                    worker = self._fds.get(key.fd)
                    pid = self._watched.get(worker, (0, None))[0] if worker else 0
                if worker is not None:
                    # a callback failure must not stop the watch
                    with contextlib.suppress(Exception):
                        self._died(worker, pid)

    def close(self) -> None:
        self._stopping = True
        self._poke()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        with self._lock:
            for worker in list(self._watched):
                self._forget_locked(worker)
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._wake_r = self._wake_w = -1
