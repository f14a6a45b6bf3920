"""What every command shares: exit codes, output in text or JSON, one-line errors."""

from __future__ import annotations

import argparse
import enum
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs
import orjson

from fleet import _install

#: The name fleet is built and installed under; the import name and the command are `fleet`.
DISTRIBUTION: Final = _install.DISTRIBUTION


class Exit(enum.IntEnum):
    """fleet's exit codes. Documented in ``fleet --help``."""

    OK = 0
    ERROR = 1
    USAGE = 2
    TIMEOUT = 3
    REFUSED = 4
    INTERRUPTED = 130


EXIT_CODES_HELP = """exit codes:
  0  success (for `wait`: at least one worker needs attention)
  1  error (a one-line message on stderr)
  2  usage error
  3  `wait` timed out with no worker needing attention
  4  refused: a check failed, or a retire/delete could not prove the work is safe
130  interrupted
"""

Handler = Callable[[argparse.Namespace], int]


def to_jsonable(value: Any) -> Any:
    if attrs.has(type(value)):
        return {k: to_jsonable(v) for k, v in attrs.asdict(value, recurse=False).items()}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


def dumps(value: Any, *, pretty: bool = True) -> str:
    option = orjson.OPT_INDENT_2 if pretty else 0
    return orjson.dumps(to_jsonable(value), option=option | orjson.OPT_NON_STR_KEYS).decode()


def print_json(value: Any, *, pretty: bool = True) -> None:
    sys.stdout.write(dumps(value, pretty=pretty) + "\n")
    sys.stdout.flush()


#: The longest duration any option takes: a year. Longer ones are typos, and would overflow
#: the clocks and timers they reach (``threading`` refuses waits past about 292 years).
MAX_SECONDS: Final = 365 * 86400
#: The largest count any option takes (retries, lines, parallel workers, errors shown).
MAX_COUNT: Final = 1_000_000


def _quoted(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= 40 else shown[:36] + "…" + shown[-3:]


def seconds(text: str) -> float:
    """An argparse type: a duration in seconds, 0 to MAX_SECONDS (a usage error otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {_quoted(text)}") from None
    if not value >= 0:  # `not >=` also refuses nan
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, not {_quoted(text)}")
    if value > MAX_SECONDS:  # inf too
        raise argparse.ArgumentTypeError(
            f"must be at most {MAX_SECONDS} seconds (a year), not {_quoted(text)}"
        )
    return value


def count(text: str, minimum: int = 0) -> int:
    """An argparse type: a whole number, ``minimum`` to MAX_COUNT (a usage error otherwise)."""
    try:
        value = int(text) if len(text) <= 20 else None
    except ValueError:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"not a whole number: {_quoted(text)}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be {minimum} or more, not {_quoted(text)}")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_COUNT}, not {_quoted(text)}")
    return value


def positive_count(text: str) -> int:
    """An argparse type: a whole number, 1 or more."""
    return count(text, 1)


class _Formatter(argparse.HelpFormatter):
    """Wraps prose to the terminal but keeps text laid out in lines (examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text.strip("\n"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def add_examples(parser: argparse.ArgumentParser, *examples: str) -> None:
    """Show ``examples`` (command lines, with an optional `  # why` comment) under --help."""
    block = "examples:\n" + "\n".join(f"  {line}" for line in examples)
    parser.epilog = f"{parser.epilog.rstrip()}\n\n{block}" if parser.epilog else block
    if parser.formatter_class is argparse.HelpFormatter:
        parser.formatter_class = _Formatter


def progress(text: str) -> None:
    """Say on stderr what a slow step is doing, for a person watching a terminal; programs
    reading the output (or tests) see nothing."""
    if sys.stderr.isatty():
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for programs")


def age(ts: float | None, now: float | None = None) -> str:
    """A short human duration since ``ts``: 4s, 3m, 2h05m, 3d."""
    if ts is None:
        return "-"
    seconds = max(0.0, (now if now is not None else time.time()) - ts)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m"
    if seconds < 86400:
        return f"{seconds // 3600:.0f}h{(seconds % 3600) // 60:02.0f}m"
    return f"{seconds // 86400:.0f}d"


def table(
    rows: list[list[str]],
    headers: list[str],
    *,
    shrink: Sequence[int] | None = None,
    colour: Callable[[int, int], str | None] | None = None,
) -> str:
    """A plain table. On a terminal it fits the window (the ``shrink`` columns give up width,
    least important first; by default every column but the first, from the last) and cells
    take ``colour``; piped, it is whole and plain (see :mod:`fleet._text`)."""
    from fleet._text import colour_on, render_table, terminal_width

    width = terminal_width()
    order = shrink if shrink is not None else range(len(headers) - 1, 0, -1)
    return render_table(rows, headers, width=width, shrink=list(order),
                        colour=colour if colour is not None and colour_on() else None)


def say(text: str) -> None:
    """Print a sentence: folded to the terminal's width on one, whole when piped."""
    from fleet._text import terminal_width, wrap

    print(wrap(text, terminal_width()))


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 worker``, ``2 workers`` (``many`` when the plural is not ``word`` + s)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def attention_summary(total: int, waiting: int) -> str:
    """``3 workers, 1 needs attention``: the line under every table of workers."""
    return f"{plural(total, 'worker')}, {waiting} {'needs' if waiting == 1 else 'need'} attention"


def one_line(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
