"""``fleet notify``: a message per new attention mark, to a webhook or a command."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from typing import Any

from fleet._cli._common import Exit, add_examples, add_json, count, print_json, seconds
from fleet._cli.core import open_fleet


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "notify",
        help="send a message (webhook or command) for each worker that needs attention",
        description="Run until stopped (or --timeout): for each new attention mark (a worker "
        "stopped, quiet, blocked, done or gone, its mark not seen by the coordinator) send one "
        "message: host/worker, state, reason, mark, the next step and, for a permission "
        "request, the `fleet answer` command. Marks already sent are kept in "
        "$FLEET_HOME/notify/sent, so a restart never sends one twice. A failed delivery is "
        "retried with backoff and logged in $FLEET_HOME/notify/errors.log. Styles: json (the "
        "message as a JSON object), ntfy (text with a Title header: --webhook "
        "https://ntfy.sh/TOPIC), slack ({\"text\": ...}: a Slack incoming webhook). A command "
        "gets the JSON object on stdin.",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--webhook", metavar="URL", help="POST each message to this URL")
    where.add_argument("--command", metavar="CMD",
                       help="run CMD (split like a shell line, not run by one) per message, "
                       "the JSON message on its stdin")
    p.add_argument("--style", choices=("json", "ntfy", "slack"), default="json",
                   help="the webhook body (default json)")
    p.add_argument("--test", action="store_true", help="send one sample message and exit")
    p.add_argument("--timeout", type=seconds, metavar="S", help="stop after S seconds")
    p.add_argument("--attempts", type=count, default=5, metavar="N",
                   help="tries per message (default 5)")
    p.add_argument("--backoff", type=seconds, default=1.0, metavar="S",
                   help="first retry delay, doubled each retry (default 1)")
    add_json(p)
    add_examples(
        p,
        "fleet notify --webhook https://ntfy.sh/my-fleet --style ntfy",
        "fleet notify --webhook https://hooks.slack.com/services/T/B/X --style slack",
        "fleet notify --command 'notify-send fleet'",
        "fleet notify --webhook http://127.0.0.1:8080/fleet --test",
    )
    p.set_defaults(run=cmd_notify)


def cmd_notify(args: argparse.Namespace) -> int:
    from fleet._notify import NotifyFailed, Sender, SentMarks, Target, notify_new, sample

    try:
        command = tuple(shlex.split(args.command)) if args.command is not None else ()
    except ValueError as exc:
        raise NotifyFailed(f"--command cannot be split like a shell line: {exc}") from None
    target = Target(url=args.webhook, command=command, style=args.style)
    with open_fleet(args) as fleet:
        sent = SentMarks(fleet.home)
        sender = Sender(target, attempts=max(1, args.attempts), backoff=args.backoff,
                        on_error=sent.error)
        if args.test:
            ok = sender.send(sample())
            _say(args, {"test": True, "delivered": ok})
            return Exit.OK if ok else Exit.ERROR
        done = sent.load()
        deadline = None if args.timeout is None else time.monotonic() + args.timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            result = fleet.wait(seen=sorted(done), timeout=left)
            if result.timed_out:
                return Exit.OK
            for mark in notify_new(result.attention, sent, sender, done):
                _say(args, {"sent": mark})


def _say(args: argparse.Namespace, value: dict[str, Any]) -> None:
    if args.json:
        print_json(value, pretty=False)
    elif "sent" in value:
        print(f"sent: {value['sent']}")
    else:
        print("test message " + ("delivered" if value["delivered"] else "NOT delivered"))
    sys.stdout.flush()
