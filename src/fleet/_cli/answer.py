"""``fleet answer``: answer a worker's permission request from here."""

from __future__ import annotations

import argparse
from typing import Any

from fleet._answer import answer, local_identity
from fleet._cli._common import Exit, add_examples, add_json, print_json
from fleet._cli.core import open_fleet


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "answer",
        help="allow or deny a worker's waiting permission request",
        description="Answer the permission request a Claude Code worker waits on (its latest "
        "open one, or --request ID as `fleet status --json` shows it as permission_request). "
        "The worker's hook returns the decision to Claude Code at once: the tool runs, or the "
        "model reads the reason it was denied. A request already answered, timed out or whose "
        "session ended is refused (exit 4). Every answer is journaled with who gave it.",
    )
    p.add_argument("worker", metavar="WORKER")
    p.add_argument("decision", choices=("allow", "deny"), metavar="allow|deny")
    p.add_argument("--reason", metavar="TEXT",
                   help="why (on a deny, the model reads it); one line, at most 1000 characters")
    p.add_argument("--always", action="store_true",
                   help="keep this answer for the rest of the worker's session (the same Bash "
                   "command, or the same tool), answered by its hook without asking again")
    p.add_argument("--request", metavar="ID", help="the request to answer (default: the "
                   "latest open one)")
    p.add_argument("--client", default="cli", metavar="NAME", type=_client,
                   help="the client to name in the journal with the local user (default cli; "
                   "the MCP server says mcp)")
    add_json(p)
    add_examples(
        p,
        "fleet answer parser allow",
        "fleet answer parser deny --reason 'use the fixture instead of the network'",
        "fleet answer parser allow --always      # same command: no more questions this session",
        "fleet answer parser allow --request 3f9a0c1d2b4e5f60 --json",
    )
    p.set_defaults(run=cmd_answer)


def _client(text: str) -> str:
    if not (0 < len(text) <= 32 and text.replace("-", "").replace("_", "").isalnum()
            and text.isascii()):
        raise argparse.ArgumentTypeError(f"not a client name: {text[:40]!r}")
    return text


def cmd_answer(args: argparse.Namespace) -> int:
    with open_fleet(args) as fleet:
        result = answer(fleet.home, args.worker, args.decision, by=local_identity(args.client),
                        reason=args.reason, always=args.always, request=args.request,
                        clock=fleet.clock)
    if args.json:
        print_json(result)
    else:
        print(result.describe())
    return Exit.OK
