"""The ``fleet`` command line. Each command group lives in its own module with an
``add_parser(subparsers)`` function; this module only assembles them and turns errors into
one-line messages and meaningful exit codes."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from fleet._cli._common import EXIT_CODES_HELP, Exit
from fleet._errors import FleetError

#: Command modules, in the order their commands appear in ``fleet --help``.
COMMAND_MODULES: tuple[str, ...] = (
    "fleet._cli.core",
    "fleet._cli.hooks",
    "fleet._cli.watch",
    "fleet._cli.finish",
    "fleet._cli.plan",
    "fleet._cli.run",
    "fleet._cli.adapters",
)

DESCRIPTION = """\
Know at once which of your coding agents needs you, check their work, and retire them
without losing a line.

Claude Code and Codex hooks append events to one journal per worker; fleet folds them
into worker states (starting, working, stopped, quiet, gone, blocked, done, retired).
A coordinator registers workers, blocks in `fleet wait` until one needs attention,
handles it, and passes the printed mark back with --seen (or `fleet seen`).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    parser.add_argument("--version", action="version", version=f"fleet {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fleet")
    except PackageNotFoundError:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help()
        return Exit.USAGE if args.command is None else Exit.OK
    try:
        return int(run(args))
    except KeyboardInterrupt:
        sys.stderr.write("fleet: interrupted\n")
        return Exit.INTERRUPTED
    except FleetError as exc:
        sys.stderr.write(f"fleet: {_one_line(exc)}\n")
        return Exit.REFUSED if isinstance(exc, PermissionError) else Exit.ERROR
    except BrokenPipeError:
        return Exit.OK


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
