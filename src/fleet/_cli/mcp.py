"""mcp serve|install|uninstall|status: fleet as the tools of a coordinator agent."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from fleet._cli._common import DISTRIBUTION, Exit, add_examples, add_json, print_json, seconds
from fleet._errors import SettingsError
from fleet._keys import KEY_SOURCE_HELP

SERVE_HELP = """\
Serve fleet's verbs as MCP tools on stdin/stdout, for a coordinator agent (Claude Code, Codex):
plan, profiles, start, status, wait, seen, send, hand_over, check, retire, stop, report and
log. Each tool takes the verb's options as arguments and returns exactly what `fleet VERB
--json` prints; an error is a tool error with the verb's one-line message. wait blocks at most
--max-wait seconds per call. Resources: fleet://skill (the guidance for coordinators),
fleet://status and fleet://workers/WORKER/journal; prompt: coordinate.

The server acts only within the fleet home and the repositories given with --repo (default:
the git repository it is started in), their worktrees included. No tool runs a shell command
taken from its arguments, except check's explicit check commands; a key source a tool names
may be env:NAME or keyring:SERVICE/USER. Keys never appear in results.

Wake-ups: for every worker that comes to need attention, the server pushes "worker X needs
attention (state, reason, mark)" as a Claude Code channel notification (--push auto: when the
client is Claude Code). Claude Code shows them in an interactive session started with
`--dangerously-load-development-channels server:fleet` (or --channels for an approved one),
where Anthropic's channel feature is on for the account; otherwise it drops them. Calling wait
works with every client.

Needs the MCP SDK, an optional extra: install fleet with it (`pipx install 'CHECKOUT[mcp]'`).
"""

INSTALL_HELP = """\
Register `fleet mcp serve` as the MCP server NAME (default fleet): in a Claude Code config dir
(user scope: mcpServers in its .claude.json, as `claude mcp add --scope user` writes) or a
Codex home ([mcp_servers.NAME] in config.toml, with a tool timeout that leaves wait room).
Other servers and keys are kept, running it again changes nothing, a malformed file is refused
and left untouched, and the old file is kept as <file>.fleet-backup. The command is this
Python and fleet home by absolute path, so the server runs what this fleet would. With
--print, nothing is written: it prints the `claude mcp add` line and the Codex table instead.
"""

TARGETS = """\
targets (each may be repeated):
  --config-dir DIR   a Claude Code config dir (CLAUDE_CONFIG_DIR, ~/.claude)
  --codex-home DIR   a Codex home (CODEX_HOME, ~/.codex)
  --profile NAME     a profile of `fleet profiles`
  --all-profiles     every profile `fleet profiles` lists
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="fleet as MCP tools for a coordinator agent (serve, install)",
        description="Run fleet's verbs as the tools of an MCP server that a coordinator agent "
        "calls (`fleet mcp serve`), and register that server with Claude Code or Codex "
        "(`fleet mcp install`).",
    )
    msub = mcp.add_subparsers(dest="mcp_command", metavar="ACTION", title="actions")
    mcp.set_defaults(run=lambda args: _help(mcp))

    p = msub.add_parser(
        "serve",
        help="serve fleet's verbs as MCP tools on stdin/stdout",
        description=SERVE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _serve_options(p, name=False)
    add_examples(
        p,
        "fleet mcp serve --repo ~/src/app",
        "fleet mcp serve --repo . --max-wait 45 --push never",
    )
    p.set_defaults(run=cmd_serve)

    p = msub.add_parser(
        "install",
        help="register fleet's MCP server with Claude Code or Codex (or print how)",
        description=INSTALL_HELP,
        epilog=TARGETS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _targets(p)
    from fleet._cli.hooks import add_create

    add_create(p)
    p.add_argument("--print", action="store_true", dest="print_only",
                   help="write nothing: print the `claude mcp add` line and the Codex table")
    p.add_argument("--env-var", action="append", default=[], metavar="NAME",
                   help="Codex: a variable to pass on to the server (repeatable; fleet's own "
                   "FLEET_* settings and the --key-from variable always are); Claude Code "
                   "passes on its whole environment")
    _serve_options(p)
    add_json(p)
    add_examples(
        p,
        "fleet mcp install --config-dir ~/.claude",
        "fleet mcp install --codex-home ~/.codex --repo ~/src/app",
        "fleet mcp install --print",
    )
    p.set_defaults(run=cmd_install)

    p = msub.add_parser(
        "uninstall",
        help="remove fleet's MCP server entry (only fleet's)",
        description="Remove the MCP server NAME from each target when it runs `fleet mcp "
        "serve`; another server of that name, and everything else, is left as it was.",
        epilog=TARGETS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _targets(p)
    p.add_argument("--name", default="fleet", metavar="NAME", help="the server's name")
    add_json(p)
    add_examples(p, "fleet mcp uninstall --config-dir ~/.claude")
    p.set_defaults(run=cmd_uninstall)

    p = msub.add_parser(
        "status",
        help="is fleet's MCP server registered, with the current command?",
        description="For each target: whether the MCP server NAME is registered and runs "
        "`fleet mcp serve` with the command this fleet would install (installed), another "
        "one (different), another program (other), or is missing. Exits 1 unless every "
        "target has it installed.",
        epilog=TARGETS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _targets(p)
    _serve_options(p)
    add_json(p)
    add_examples(p, "fleet mcp status --config-dir ~/.claude --json")
    p.set_defaults(run=cmd_status)


def _targets(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config-dir", action="append", metavar="DIR",
                   help="a Claude Code config dir")
    p.add_argument("--codex-home", action="append", metavar="DIR", help="a Codex home")
    p.add_argument("--profile", action="append", metavar="NAME",
                   help="a profile `fleet profiles` lists")
    p.add_argument("--all-profiles", action="store_true", help="every profile")


def _serve_options(p: argparse.ArgumentParser, *, name: bool = True) -> None:
    if name:
        p.add_argument("--name", default="fleet", metavar="NAME",
                       help="the server's name in the client (default fleet)")
    p.add_argument("--repo", action="append", default=[], metavar="PATH",
                   help="a repository the server may act on (repeatable; default: the git "
                   "repository it is started in)")
    p.add_argument("--push", choices=("auto", "always", "never"), default="auto",
                   help="push wake-ups as Claude Code channel notifications: auto (default) "
                   "when the client is Claude Code")
    p.add_argument("--max-wait", type=seconds, default=None, metavar="S",
                   help="the longest a wait call blocks (default 50: under Codex's tool "
                   "timeout)")
    p.add_argument("--quiet-after", type=seconds, default=None, metavar="S",
                   help="seconds without events before a running worker reads as quiet, for "
                   "status, wait and wake-ups (default 300)")
    p.add_argument("--endpoint", metavar="URL",
                   help="the endpoint a start call uses when it names none")
    p.add_argument("--key-from", metavar="SRC",
                   help=f"the default endpoint's key: {KEY_SOURCE_HELP}")
    p.add_argument("--key-var", metavar="NAME", help="the variable that carries that key")


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return Exit.USAGE


def _serve_args(args: argparse.Namespace) -> list[str]:
    """The options of `fleet mcp serve` that install writes into the client's config."""
    out: list[str] = []
    if args.push != "auto":
        out += ["--push", args.push]
    if args.max_wait is not None:
        out += ["--max-wait", f"{args.max_wait:g}"]
    if args.quiet_after is not None:
        out += ["--quiet-after", f"{args.quiet_after:g}"]
    for name in ("endpoint", "key_from", "key_var"):
        value = getattr(args, name)
        if value is not None:
            out += [f"--{name.replace('_', '-')}", value]
    return out


def cmd_serve(args: argparse.Namespace) -> int:
    from fleet._mcp import sdk_available, sdk_missing

    if not sdk_available():
        raise SettingsError(sdk_missing())
    if args.key_from is not None:
        from fleet._keys import parse_key_source

        parse_key_source(args.key_from)
    _check_endpoint(args.endpoint, args.key_var)
    from fleet._home import resolve_home
    from fleet._mcp.scope import Scope
    from fleet._mcp.server import FleetServer, run
    from fleet._mcp.specs import DEFAULT_MAX_WAIT
    from fleet._mcp.tools import Tools

    scope = Scope.build(resolve_home(args.home), args.repo, cwd=os.getcwd())
    tools = Tools(
        scope,
        max_wait=DEFAULT_MAX_WAIT if args.max_wait is None else args.max_wait,
        quiet_after=args.quiet_after,
        endpoint=args.endpoint,
        key_from=args.key_from,
        key_var=args.key_var,
    )
    if sys.stdin.isatty():
        sys.stderr.write(
            f"fleet mcp: serving MCP on stdin/stdout for {scope.describe()} (Ctrl-C to stop; "
            "an agent starts this itself, see `fleet mcp install --help`)\n"
        )
    run(FleetServer(tools, push=args.push, version=_version()))
    return Exit.OK


def _check_endpoint(endpoint: str | None, key_var: str | None) -> None:
    """Refuse, before serving, what every start through this server would refuse."""
    if endpoint is not None:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(endpoint)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise SettingsError(f"--endpoint {endpoint!r} is not an http(s) URL")
    if key_var is not None and not (key_var.isascii() and key_var.replace("_", "a").isalnum()
                                    and not key_var[0].isdigit()):
        raise SettingsError(f"--key-var {key_var!r} is not an environment variable name")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return ""


def _resolved_targets(args: argparse.Namespace, *, writes: bool = False) -> list[Any]:
    from fleet._cli.hooks import resolve_targets

    return resolve_targets(args, writes=writes)


def _argv(args: argparse.Namespace) -> list[str]:
    from fleet._mcp.install import server_argv

    return server_argv(home=args.home, repos=args.repo, extra=_serve_args(args))


def cmd_install(args: argparse.Namespace) -> int:
    from fleet._mcp import install as mcp_install
    from fleet._mcp import sdk_available, sdk_missing

    argv = _argv(args)
    if not args.print_only and not sdk_available():
        # A server that cannot start is worse than none: the agent shows it failing at every
        # session. Nothing is written until this fleet has the SDK.
        raise SettingsError(f"{sdk_missing()} (nothing was installed)")
    if args.print_only:
        line = mcp_install.claude_add_line(argv, args.name)
        snippet = mcp_install.codex_snippet(argv, args.name, args.env_var)
        if args.json:
            print_json({"claude": line, "codex": snippet, "command": argv})
        else:
            print(f"Claude Code:\n  {line}\n\nCodex (config.toml):\n{snippet}", end="")
        return Exit.OK
    changes = [mcp_install.install(t, argv, args.name, args.env_var)
               for t in _resolved_targets(args, writes=True)]
    if args.json:
        print_json(changes)
    else:
        for change in changes:
            what = "installed" if change.changed else "unchanged"
            print(f"{change.tool}: {what} MCP server {change.name!r} in {change.file}")
            if change.backup:
                print(f"  backup: {change.backup}")
    return Exit.OK


def cmd_uninstall(args: argparse.Namespace) -> int:
    from fleet._mcp import install as mcp_install

    changes = [mcp_install.uninstall(t, args.name) for t in _resolved_targets(args)]
    if args.json:
        print_json(changes)
    else:
        for change in changes:
            what = "removed" if change.changed else "not installed"
            print(f"{change.tool}: {what}: MCP server {change.name!r} in {change.file}")
    return Exit.OK


def cmd_status(args: argparse.Namespace) -> int:
    from fleet._mcp import install as mcp_install

    argv = _argv(args)
    rows = [mcp_install.status(t, argv, args.name) for t in _resolved_targets(args)]
    if args.json:
        print_json(rows)
    else:
        for row in rows:
            print(f"{row['tool']}: {row['state']}: MCP server {row['name']!r} in {row['file']}")
    return Exit.OK if all(r["state"] == "installed" for r in rows) else Exit.ERROR
