"""One delivery at a time per worker: the worker's turn lock.

Two follow-ups sent to one headless worker at once would both resume its session (two agents in
one worktree, on one session), both take the same run number, and each one's receipt would
read the other's delivery as its own. So every delivery to a worker, a follow-up or a
hand-over, and every start of a headless run, holds the worker's turn lock: an exclusive
``flock`` on ``$FLEET_HOME/workers/<worker>/turn.lock``, taken here and nowhere else.

For a headless run the lock is handed to the run's supervisor (an inherited descriptor), which
holds it until the run has ended and its end is journaled: the next follow-up waits for its
turn, then resumes the session the previous run left. For a worker in an app (Superset,
herdr), the lock covers the typing of the text (the agent itself queues what it is given
while busy). The lock is released by the kernel when its last holder exits, so a crashed
sender or supervisor never leaves a worker locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from fleet._errors import Refused, UnknownWorker
from fleet._home import FILE_MODE, worker_dir

LOCK_NAME: Final = "turn.lock"


class Busy(Refused):
    """The worker is taking another delivery, and the caller would not wait its turn."""


@contextlib.contextmanager
def worker_turn(
    home: Path,
    worker: str,
    *,
    queue: bool = True,
    waiting: Callable[[], None] | None = None,
) -> Iterator[int]:
    """Hold ``worker``'s turn lock; yields its descriptor (close-on-exec: a process it should
    pass to gets it explicitly). ``queue``: wait for the current holder (``waiting`` is called
    once first, to say so), else :class:`Busy`. ``worker`` is an id its caller checked."""
    folder = worker_dir(home, worker)
    if not folder.is_dir():
        # Never made here: a lock must not bring back a worker that was just forgotten.
        raise UnknownWorker(f"no worker {worker!r}")
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                     FILE_MODE)
    except OSError as exc:
        raise Refused(f"cannot take {worker}'s turn lock {folder / LOCK_NAME}: "
                      f"{exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not queue:
                raise Busy(
                    f"{worker} is taking another follow-up or hand-over (one at a time); "
                    "nothing was sent: send it again once that run has ended, or without "
                    "--no-queue to wait its turn") from None
            if waiting is not None:
                waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)
