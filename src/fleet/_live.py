"""``fleet watch`` on a terminal: a live table (rich), attention first, states in colour, redrawn
in place as transitions arrive and every second for the ages; ``q`` quits.

Piped, ``fleet watch`` prints plain lines instead (see :mod:`fleet._cli.watch`)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from fleet._cli._common import attention_summary
from fleet._cli.core import STATUS_HEADERS, status_row
from fleet._core.fold import WorkerState

#: The colour of each state (rich style names).
STATE_STYLES: Final[Mapping[str, str]] = {
    "starting": "cyan",
    "working": "green",
    "stopped": "yellow",
    "quiet": "yellow",
    "blocked": "bold red",
    "done": "bold magenta",
    "gone": "red",
    "retired": "dim",
    "offline": "dim",
}
QUIT_KEYS: Final = ("q", "Q")


def ordered(states: Iterable[WorkerState]) -> list[WorkerState]:
    """Attention first, then by worker id."""
    return sorted(states, key=lambda s: (not s.needs_attention, s.worker))


def render(states: Iterable[WorkerState], now: float, *, quit_key: bool = True) -> Any:
    """The table of ``states`` (a rich renderable), with a caption that counts them."""
    from rich.table import Table
    from rich.text import Text

    rows = ordered(states)
    waiting = sum(s.needs_attention for s in rows)
    hint = "q to quit" if quit_key else "Ctrl-C to stop"
    caption = f"{attention_summary(len(rows), waiting)} · {time.strftime('%H:%M:%S')} · {hint}"
    table = Table(caption=caption, caption_justify="left", header_style="bold", box=None,
                  pad_edge=False, padding=(0, 2, 0, 0))
    cells_of = [status_row(s, now) for s in rows]
    for i, header in enumerate(STATUS_HEADERS):
        # One line per worker on any width: a narrow terminal cuts the least important cells
        # ("…") rather than wrapping a reason one word per line; ids and states stay whole.
        whole = header in ("worker", "state")
        widest = max([len(header), *(len(c[i]) for c in cells_of)])
        table.add_column(header.upper(), no_wrap=True, overflow="ellipsis",
                         min_width=widest if whole else min(widest, len(header)))
    for s in rows:
        cells = status_row(s, now)
        style = STATE_STYLES.get(s.state, "")
        row: list[Any] = [Text(c) for c in cells]
        row[0] = Text(cells[0], style="bold" if s.needs_attention else "")
        row[1] = Text(cells[1], style=style)
        table.add_row(*row)
    if not rows:
        table.caption = f"no workers yet · {time.strftime('%H:%M:%S')} · {hint}"
    return table


@contextlib.contextmanager
def quit_on_key(stream: Any = None) -> Iterator[threading.Event]:
    """While inside: a keypress of ``q`` on the terminal ``stream`` (stdin) sets the event
    and interrupts the main thread. The terminal is in cbreak mode meanwhile (keys arrive
    one by one, not echoed) and is restored on the way out. Not a terminal: the event is never
    set."""
    stream = sys.stdin if stream is None else stream
    pressed = threading.Event()
    try:
        fd = stream.fileno()
        is_tty = os.isatty(fd)
    except (AttributeError, OSError, ValueError):
        is_tty = False
    if not is_tty:
        yield pressed
        return
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                ready, _, _ = select.select([fd], [], [], 0.1)
                key = os.read(fd, 1) if ready else b""
            except OSError:
                return
            if ready and not key:  # the terminal went away
                return
            if key.decode(errors="replace") in QUIT_KEYS:
                pressed.set()
                os.kill(os.getpid(), signal.SIGINT)
                return

    tty.setcbreak(fd)
    reader = threading.Thread(target=read, name="fleet-watch-keys", daemon=True)
    reader.start()
    try:
        yield pressed
    finally:
        done.set()
        reader.join(timeout=2)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def live(transitions: Iterable[Any], now: Any) -> None:
    """Draw the table until ``transitions`` ends or ``q`` is pressed."""
    from rich.console import Console
    from rich.live import Live

    current: dict[str, WorkerState] = {}
    console = Console()
    with quit_on_key() as pressed, Live(
        get_renderable=lambda: render(current.values(), now()), console=console,
        refresh_per_second=1, transient=False, redirect_stdout=False, redirect_stderr=False,
    ) as view:
        try:
            for t in transitions:
                current[t.worker] = t.after
                view.refresh()
        except KeyboardInterrupt:
            if not pressed.is_set():
                raise
