"""Tables that fit a terminal, and colour only where a person reads them.

On a terminal, a table wider than the window gives up width from its least important columns
first (each keeps at least its header's width; a cut cell ends in "…"), and states are
coloured. Piped, redirected, with ``NO_COLOR`` set or ``TERM=dumb``, output is plain and whole,
so programs and tests read the same text every time. ``--json`` never comes here.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TextIO

#: ANSI colours of each state (as `fleet watch` shows them).
STATE_COLOURS: Final[Mapping[str, str]] = {
    "starting": "36",
    "working": "32",
    "stopped": "33",
    "quiet": "33",
    "blocked": "1;31",
    "done": "1;35",
    "gone": "31",
    "retired": "2",
    "offline": "2",
}
ELLIPSIS: Final = "…"


def terminal_width(stream: TextIO | None = None) -> int | None:
    """The width of the terminal ``stream`` (stdout) writes to, or None when it is not one."""
    stream = sys.stdout if stream is None else stream
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size().columns


def colour_on(stream: TextIO | None = None) -> bool:
    """Whether to colour output to ``stream``: a terminal, and neither NO_COLOR nor TERM=dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return terminal_width(stream) is not None


def paint(text: str, code: str | None) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if code else text


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, ending in "…" when cut."""
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + ELLIPSIS if width > 0 else ""


def fit_widths(
    widths: Sequence[int], minimums: Sequence[int], width: int, shrink: Sequence[int],
    gap: int = 2,
) -> list[int]:
    """Column widths whose total (with ``gap`` between columns) is at most ``width`` if it can
    be: columns in ``shrink`` (least important first) give up width down to their minimum, the
    first one first."""
    out = list(widths)
    over = sum(out) + gap * (len(out) - 1) - width
    for i in shrink:
        if over <= 0:
            break
        give = min(over, out[i] - minimums[i])
        if give > 0:
            out[i] -= give
            over -= give
    return out


def render_table(
    rows: Sequence[Sequence[str]],
    headers: Sequence[str],
    *,
    width: int | None = None,
    shrink: Sequence[int] = (),
    colour: Callable[[int, int], str | None] | None = None,
) -> str:
    """A plain table: upper-case headers, columns two spaces apart, trailing spaces trimmed.
    With ``width``, the ``shrink`` columns (least important first) give up width to fit it,
    down to their header's width, and then, if it still does not fit, are left out in that
    order; ``colour(row, column)`` names the ANSI colour of a cell (applied after padding, so
    widths stay right)."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    shown = list(range(len(headers)))
    if width is not None:
        minimums = [max(len(h), min(w, 6)) for h, w in zip(headers, widths, strict=True)]
        widths = fit_widths(widths, minimums, width, shrink)
        # Still too wide at their narrowest: the least important columns go, in order.
        for i in shrink:
            if sum(widths[j] for j in shown) + 2 * (len(shown) - 1) <= width:
                break
            shown.remove(i)
        if len(shown) < len(headers):  # what a dropped column gave up goes back to the rest
            spare = width - sum(widths[j] for j in shown) - 2 * (len(shown) - 1)
            full = [len(h) for h in headers]
            for row in rows:
                for i, cell in enumerate(row):
                    full[i] = max(full[i], len(cell))
            for i in reversed(shrink):
                if i in shown and spare > 0:
                    grow = min(spare, full[i] - widths[i])
                    widths[i] += grow
                    spare -= grow
    last = shown[-1]
    lines = ["  ".join(headers[i].upper().ljust(widths[i]) for i in shown).rstrip()]
    for r, row in enumerate(rows):
        cells = []
        for i in shown:
            text = cut(row[i], widths[i])
            padded = text if i == last else text.ljust(widths[i])
            code = colour(r, i) if colour is not None else None
            cells.append(paint(padded, code) if code and text else padded)
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def wrap(text: str, width: int | None, indent: str = "  ") -> str:
    """``text`` folded at word boundaries to ``width`` (continuation lines indented), or as it
    is when ``width`` is None (not a terminal: one line per item, for programs)."""
    if width is None or len(text) <= width:
        return text
    import textwrap

    return "\n".join(textwrap.wrap(text, width=width, subsequent_indent=indent,
                                   break_on_hyphens=False, break_long_words=True))
