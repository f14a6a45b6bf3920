"""wait and watch."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from fleet._cli._common import (
    Exit,
    add_examples,
    add_json,
    age,
    attention_summary,
    one_line,
    print_json,
    seconds,
)
from fleet._cli.core import status_table
from fleet._cli.hub import add_hub_args, hub_of
from fleet._core.attention import attention_details, next_step, reason_text
from fleet._core.fold import WorkerState
from fleet._errors import NoWorkers
from fleet._fleet import Fleet
from fleet._watch import Transition, WaitResult

WAIT_HELP = """\
Block until at least one worker needs attention, then print every worker that does and exit 0.

A worker needs attention when it is stopped, quiet, blocked, done or gone and the mark of that
state (WORKER@SEQ, or WORKER@SEQq for quiet) has not been seen. Pass every mark you have handled
back with --seen (or record it once with `fleet seen`): a state already handled never wakes
`wait` again, while any new state of that worker does.

Run it as a background task while workers work. It wakes within milliseconds of the hook event
that matters (file events, not polling), and fires `quiet` at the --quiet-after deadline without
any new event.

exit codes: 0 attention, 3 timeout (nothing needed attention), 1 error (also at once when
the journal of a worker named here disappears while waiting), 2 at once when there is no
worker to wait for (none, or every one retired) and --for-new was not given.
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "wait",
        help="block until a worker needs attention (stopped, quiet, blocked, done, gone)",
        description=WAIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("workers", nargs="*", metavar="WORKER", help="default: every worker not retired")
    p.add_argument("--seen", nargs="+", action="extend", default=[], metavar="MARK")
    p.add_argument(
        "--quiet-after",
        type=seconds,
        default=300.0,
        metavar="S",
        help="seconds without events before a running worker is quiet (300)",
    )
    p.add_argument("--timeout", type=seconds, metavar="S", help="give up after S seconds")
    p.add_argument("--for-new", action="store_true",
                   help="with no worker to wait for yet, wait for new ones (else exit 2 at once)")
    add_hub_args(p)
    add_json(p)
    add_examples(
        p,
        "fleet wait --timeout 600          # any worker",
        "fleet wait --for-new              # before the first worker is started",
        "fleet wait parser docs --seen parser@6 --json",
        "fleet wait --hub --seen laptop/parser@6   # every host; marks kept in the hub",
    )
    p.set_defaults(run=cmd_wait)

    p = sub.add_parser(
        "watch",
        help="a live view of every worker; --json streams one line per transition",
        description="On a terminal: a live table of every worker (state in colour, reason, "
        "for how long, mark, profile, branch, last activity), those that need attention "
        "first, updated in place as events arrive and every second; press q to quit (exit "
        "0). Piped: one plain line per transition (TIME  WORKER: FROM -> TO (REASON)). With "
        "--json, one JSON object per line (NDJSON) for each worker as first seen and for each "
        "transition, for other programs.",
    )
    p.add_argument("workers", nargs="*", metavar="WORKER")
    p.add_argument("--quiet-after", type=seconds, default=300.0, metavar="S")
    p.add_argument(
        "--timeout", type=seconds, metavar="S", help="stop after S seconds without a transition"
    )
    add_hub_args(p)
    add_json(p)
    add_examples(
        p,
        "fleet watch",
        "fleet watch --json --timeout 60  # one JSON line per transition",
        "fleet watch --hub nats://hub.example:4222",
    )
    p.set_defaults(run=cmd_watch)


def attention_json(state: WorkerState) -> dict[str, Any]:
    return {
        "worker": state.worker,
        "state": state.state,
        "reason": state.reason,
        "since": state.since,
        "mark": state.mark,
        "profile": state.profile,
        "branch": state.branch,
        "worktree": state.worktree,
        **attention_details(state),
        # a hub view: the worker's host, and what its journal last said
        **(state.hub_fields() if hasattr(state, "hub_fields") else {}),
    }


def wait_json(result: WaitResult) -> dict[str, Any]:
    return {
        "result": "timeout" if result.timed_out else "attention",
        "attention": [attention_json(s) for s in result.attention],
        "seen_hint": [s.mark for s in result.attention],
    }


def note(text: str) -> None:
    """Tell the person at the terminal (stderr: the output is for programs)."""
    sys.stderr.write(f"fleet: note: {text}\n")
    sys.stderr.flush()


def cmd_wait(args: argparse.Namespace) -> int:
    with Fleet(args.home, quiet_after=args.quiet_after, on_note=note,
               hub=hub_of(args)) as fleet:
        try:
            result = fleet.wait(args.workers or None, seen=args.seen, timeout=args.timeout,
                                require_workers=not args.for_new)
        except NoWorkers as exc:
            sys.stderr.write(f"fleet: wait: {exc}\n")
            return Exit.USAGE
        # Print before the watcher threads are stopped and joined: the coordinator reads the
        # output, not the exit.
        _print_wait(args, result, fleet.clock.now())
    return Exit.TIMEOUT if result.timed_out else Exit.OK


def _print_wait(args: argparse.Namespace, result: WaitResult, now: float) -> None:
    if args.json:
        print_json(wait_json(result))
    elif result.timed_out:
        print(f"timeout: no worker needed attention within {args.timeout:g}s")
    else:
        for state in result.attention:
            print(
                f"{state.worker}  {state.state} ({reason_text(state)}) for "
                f"{age(state.since, now)}  mark {state.mark}"
            )
            print(f"  next: {next_step(state)}")
            if state.message and state.state in ("stopped", "done", "blocked"):
                print(f"  last message: {one_line(state.message, 200)}")
        marks = " ".join(s.mark for s in result.attention)
        print(f"when handled, pass: --seen {marks}")
    sys.stdout.flush()


def transition_json(t: Transition) -> dict[str, Any]:
    after = t.after
    return {
        "ts": after.last_event_ts if after.last_event_ts is not None else after.since,
        "worker": t.worker,
        "from": t.before.state if t.before else None,
        "to": after.state,
        "reason": after.reason,
        "since": after.since,
        "mark": after.mark,
        "needs_attention": after.needs_attention,
        "profile": after.profile,
        "branch": after.branch,
        "next": next_step(after) if after.needs_attention else None,
    }


def cmd_watch(args: argparse.Namespace) -> int:
    with Fleet(args.home, quiet_after=args.quiet_after, on_note=note,
               hub=hub_of(args)) as fleet:
        names = args.workers or None
        if args.json:
            for t in fleet.watch(names, timeout=args.timeout):
                print_json(transition_json(t), pretty=False)
            return Exit.OK
        current: dict[str, WorkerState] = {}
        tty = sys.stdout.isatty()
        if tty and _live_available():
            from fleet._live import live

            live(fleet.watch(names, timeout=args.timeout), fleet.clock.now)
            return Exit.OK
        for t in fleet.watch(names, timeout=args.timeout):
            current[t.worker] = t.after
            _draw(current, fleet.clock.now(), tty, t)
    return Exit.OK


def _live_available() -> bool:
    """Whether the live table can be drawn (rich is installed)."""
    import importlib.util

    return importlib.util.find_spec("rich") is not None


def _draw(current: dict[str, WorkerState], now: float, tty: bool, t: Transition) -> None:
    if not tty:
        before = t.before.state if t.before else "-"
        print(
            f"{time.strftime('%H:%M:%S')}  {t.worker}: {before} -> {t.after.state} "
            f"({t.after.reason})",
            flush=True,
        )
        return
    states = sorted(current.values(), key=lambda s: (not s.needs_attention, s.worker))
    waiting = sum(s.needs_attention for s in states)
    sys.stdout.write("\x1b[H\x1b[2J")
    sys.stdout.write(status_table(states, now) + "\n")
    sys.stdout.write(
        f"\n{attention_summary(len(states), waiting)} — "
        f"{time.strftime('%H:%M:%S')} (Ctrl-C to stop)\n"
    )
    sys.stdout.flush()
