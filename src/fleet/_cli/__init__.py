"""The ``fleet`` command line. Each command group lives in its own module with an
``add_parser(subparsers)`` function; this module only assembles them and turns errors into
one-line messages and meaningful exit codes."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from fleet._cli._common import DISTRIBUTION, EXIT_CODES_HELP, Exit
from fleet._errors import FleetError, one_line

#: Command modules, in the order their commands appear in ``fleet --help``.
COMMAND_MODULES: tuple[str, ...] = (
    "fleet._cli.core",
    "fleet._cli.watch",
    "fleet._cli.run",
    "fleet._cli.finish",
    "fleet._cli.plan",
    "fleet._cli.hooks",
    "fleet._cli.adapters",
    "fleet._cli.mcp",
    "fleet._cli.hub",
    "fleet._cli.completion",
    "fleet._cli.answer",
    "fleet._cli.notify",
)

#: Which module defines each command, so a command imports only its own module (a test keeps
#: this in step with the modules). `fleet wait` in a coordinator's loop should not pay for
#: importing the code of `fleet plan` or the Superset client.
COMMANDS: dict[str, str] = {
    "register": "fleet._cli.core",
    "forget": "fleet._cli.core",
    "status": "fleet._cli.core",
    "log": "fleet._cli.core",
    "seen": "fleet._cli.core",
    "wait": "fleet._cli.watch",
    "watch": "fleet._cli.watch",
    "start": "fleet._cli.run",
    "stop": "fleet._cli.run",
    "run": "fleet._cli.run",
    "check": "fleet._cli.finish",
    "retire": "fleet._cli.finish",
    "report": "fleet._cli.finish",
    "demo": "fleet._cli.finish",
    "profiles": "fleet._cli.plan",
    "settings": "fleet._cli.plan",
    "plan": "fleet._cli.plan",
    "hooks": "fleet._cli.hooks",
    "trust": "fleet._cli.hooks",
    "doctor": "fleet._cli.hooks",
    "superset": "fleet._cli.adapters",
    "workspace": "fleet._cli.adapters",
    "send": "fleet._cli.adapters",
    "hand-over": "fleet._cli.adapters",
    "mcp": "fleet._cli.mcp",
    "ship": "fleet._cli.hub",
    "hosts": "fleet._cli.hub",
    "completion": "fleet._cli.completion",
    "answer": "fleet._cli.answer",
    "notify": "fleet._cli.notify",
    "hub": "fleet._cli.hub",
}

DESCRIPTION = """\
Know at once which of your coding agents needs you, check their work, and retire them
without losing a line.

Claude Code and Codex hooks append events to one journal per worker; fleet folds them
into worker states (starting, working, stopped, quiet, gone, blocked, done, retired).
A coordinator registers workers, blocks in `fleet wait` until one needs attention,
handles it, and passes the printed mark back with --seen (or `fleet seen`).
"""


class _Version(argparse.Action):
    """--version, looking the version up only when asked (importlib.metadata is slow)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show fleet's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        # The distribution's name too: `fleet` on PyPI is an unrelated package, and this line
        # is how a user tells which one is on PATH.
        from fleet._install import installation

        found = installation()
        where = f", from {found.source}" if found.source else ""
        sys.stdout.write(f"fleet {found.version} ({DISTRIBUTION}{where})\n")
        parser.exit()


class _Help(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs folded to the terminal, paragraph by paragraph: prose is
    refilled (however its source lines were cut), while laid-out blocks (a heading ending in
    ':', indented lines: option lists, examples, file samples) are kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        def fill(prose: list[str]) -> list[str]:
            return textwrap.wrap(" ".join(" ".join(prose).split()), width,
                                 initial_indent=indent, subsequent_indent=indent,
                                 break_on_hyphens=False) if prose else []

        out: list[str] = []
        prose: list[str] = []
        for line in text.strip("\n").splitlines():
            heading = line.rstrip().endswith(":") and len(line) < width
            if line.strip() and not line[:1].isspace() and (not heading or prose):
                prose.append(line)
                if heading:  # "... Keys:": the prose ends, the laid-out block follows
                    out += fill(prose)
                    prose = []
                continue
            out += fill(prose)
            prose = []
            out.append(indent + line if line.strip() else "")
        out += fill(prose)
        return "\n".join(out) + "\n"


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error, pointing at the help that explains
    (argparse would print the whole usage block first). Subcommands inherit the class."""

    #: The command typed, when this is the whole parser: argparse reports options no
    #: subcommand took (`fleet status --bogus`) here, and the help to read is the command's.
    command: str | None = None

    def _get_formatter(self) -> argparse.HelpFormatter:
        # One formatter for every command, whatever formatter_class it was given.
        return _Help(prog=self.prog)

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("fleet").strip() or self.command or ""
        message = _suggest(message)
        self.exit(Exit.USAGE, f"fleet: {where + ': ' if where else ''}{message} "
                  f"(see `{' '.join(['fleet', where]).strip()} --help`)\n")


_INVALID_CHOICE = re.compile(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$")


def _suggest(message: str) -> str:
    """argparse's "invalid choice" with the closest choice named, and the list kept short: a
    typed command or action is most often a typo of one."""
    found = _INVALID_CHOICE.match(message)
    if found is None:
        return message
    what, typed, listed = found.groups()
    # Quoted up to Python 3.12, bare from 3.13 on.
    choices = re.findall(r"'([^']*)'", listed) or [c.strip() for c in listed.split(",")]
    close = difflib.get_close_matches(typed, choices, n=1, cutoff=0.6)
    if close:
        return f"argument {what}: invalid choice: {typed!r}: did you mean {close[0]!r}?"
    return message


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (``only``) one with just the module that defines that command."""
    parser = _Parser(
        prog="fleet",
        description=DESCRIPTION,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--home",
        metavar="DIR",
        help="fleet's state directory (default: $FLEET_HOME, else the user state dir)",
    )
    parser.add_argument("--version", action=_Version)
    parser.command = only if only in COMMANDS else None
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name in [COMMANDS[only]] if only in COMMANDS else COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


def _parser_of(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    """The parser of ``command`` (the whole parser when there is none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            found: argparse.ArgumentParser = action.choices[command]
            return found
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The command word in ``argv``, skipping the global options."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--home":
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    unusable = _unusable_argument(words)
    if unusable is not None:
        sys.stderr.write(f"fleet: {unusable} (see `fleet --help`)\n")
        return Exit.USAGE
    parser = build_parser(_command_of(words))
    args = parser.parse_args(words)
    run = getattr(args, "run", None)
    if run is None:
        # `fleet` alone, or a command group without its subcommand (`fleet superset`): the
        # help of what was typed, and a usage error, as `fleet hooks` does.
        _parser_of(parser, args.command).print_help()
        return Exit.USAGE
    try:
        return int(run(args))
    except KeyboardInterrupt:
        sys.stderr.write("fleet: interrupted\n")
        return Exit.INTERRUPTED
    except FleetError as exc:
        sys.stderr.write(f"fleet: {one_line(exc)}\n")
        return Exit.REFUSED if isinstance(exc, PermissionError) else Exit.ERROR
    except BrokenPipeError:
        return Exit.OK
    except OSError as exc:  # a missing or unreadable file named on the command line, say
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"fleet: {exc.strerror or one_line(exc)}{where}\n")
        return Exit.ERROR
    except RecursionError:
        sys.stderr.write("fleet: an input is nested too deeply to read\n")
        return Exit.ERROR
    except MemoryError:
        sys.stderr.write("fleet: out of memory (an input too large?)\n")
        return Exit.ERROR
    except Exception as exc:
        # A bug: still one line and a documented code. FLEET_TRACEBACK=1 shows where it was.
        if os.environ.get("FLEET_TRACEBACK"):
            raise
        sys.stderr.write(
            f"fleet: internal error: {type(exc).__name__}: {one_line(exc)[:300]} "
            "(a bug: please report it; FLEET_TRACEBACK=1 shows where)\n"
        )
        return Exit.ERROR


def _unusable_argument(words: Sequence[str]) -> str | None:
    """Why an argument cannot be used, checked before anything else: a NUL byte (no file name
    or process argument can hold one), or text that is not valid Unicode (a lone surrogate:
    what a non-UTF-8 argument becomes), which no journal, file or terminal can carry."""
    for n, word in enumerate(words, 1):
        if "\x00" in word:
            return f"argument {n} contains a NUL byte"
        try:
            word.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"argument {n} is not valid UTF-8 text (character {exc.start + 1})"
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
