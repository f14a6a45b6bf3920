"""register, status, log, seen."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleet import _health
from fleet._cli._common import (
    Exit,
    add_examples,
    add_json,
    age,
    attention_summary,
    one_line,
    print_json,
    seconds,
    table,
    to_jsonable,
)
from fleet._cli.hub import add_hub_args, hub_of
from fleet._core.attention import mode_text, reason_text
from fleet._core.events import Event, encode_obj, event_type
from fleet._core.fold import WorkerState
from fleet._core.ids import parse_mark, validate_worker_id
from fleet._errors import SettingsError
from fleet._fleet import Fleet

#: The names fleet.adapters.ADAPTERS knows (a test keeps them in step), spelled out so that
#: `fleet status` does not import the adapters to build its parser.
ADAPTER_NAMES = ("headless", "superset", "herdr")


def open_fleet(args: argparse.Namespace, **kwargs: Any) -> Fleet:
    return Fleet(args.home, hub=hub_of(args), **kwargs)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "register",
        help="register a worker and the worktree its sessions run in",
        description="Journal a `registered` event: from now on, hook events from sessions "
        "whose project dir is inside WORKTREE (or that run with FLEET_WORKER=WORKER) are "
        "recorded in this worker's journal.",
    )
    p.add_argument("worker", help="worker id: lowercase letters, digits, '.', '_', '-'")
    p.add_argument("--worktree", required=True, metavar="PATH", help="the worker's worktree")
    p.add_argument("--tool", choices=["claude", "codex"], help="the agent CLI it runs")
    p.add_argument("--profile", metavar="P", help="the profile it runs on")
    p.add_argument("--model", metavar="M", help="model it runs")
    p.add_argument(
        "--adapter",
        choices=ADAPTER_NAMES,
        metavar="A",
        help=f"what hosts it: {', '.join(ADAPTER_NAMES)}",
    )
    p.add_argument("--branch", metavar="B", help="its branch")
    p.add_argument("--base", metavar="REF", help="the ref its work starts from")
    p.add_argument("--task", metavar="TEXT", help="a short description of its task")
    p.add_argument("--any-dir", action="store_true",
                   help="register a directory that is not the top of a git worktree (every "
                   "session under it then reaches this worker; check and retire need git); "
                   "never the filesystem root, the home directory or a directory holding "
                   "other workers' worktrees")
    add_json(p)
    add_examples(
        p,
        "fleet register parser --worktree ../repo.fleet/parser --tool claude --profile claude:work",
    )
    p.set_defaults(run=cmd_register)

    p = sub.add_parser(
        "forget",
        help="stop following a worker, keeping its journal aside",
        description="Forget workers registered by mistake or that failed before doing "
        "anything: each one's directory (journal, launch record, logs) moves to "
        "FLEET_HOME/forgotten/, and sessions in its worktree no longer reach any worker. The "
        "worktree, its branch and its commits are left as they are (`fleet retire` is what "
        "deletes work, with its guards). Refused while the worker's agent still runs or was "
        "heard of within the quiet bound; hook events that still come for a forgotten worker "
        "go to its archive (`fleet doctor` says so).",
    )
    p.add_argument("workers", nargs="*", metavar="WORKER")
    p.add_argument("--all-gone", action="store_true",
                   help="every worker whose state is gone (its agent ended with no DONE claim)")
    p.add_argument("--force", action="store_true",
                   help="forget a worker even while its agent still runs, or while its "
                   "journal moved within the quiet bound")
    p.add_argument("--quiet-after", type=seconds, default=300.0, metavar="S",
                   help="how long since its agent was last heard of before a worker that is "
                   "not gone may be forgotten (default 300, as for `fleet status`)")
    add_json(p)
    add_examples(
        p,
        "fleet forget typo-worker",
        "fleet forget --all-gone",
        "fleet forget w3 --json",
    )
    p.set_defaults(run=cmd_forget)

    p = sub.add_parser(
        "status",
        help="one row per worker: state, reason, since, mark, attention",
        description="Show every worker (or the named ones) as of now. A row marked `!` needs "
        "attention: its state is stopped, quiet, blocked, done or gone and its mark is not "
        "seen.",
    )
    p.add_argument("workers", nargs="*", metavar="WORKER")
    p.add_argument("--seen", nargs="+", default=[], metavar="MARK", help="treat as seen")
    p.add_argument(
        "--quiet-after",
        type=seconds,
        default=300.0,
        metavar="S",
        help="seconds without events before a running worker reads as quiet (default 300)",
    )
    p.add_argument("--no-cache", action="store_true", help="replay every journal in full")
    add_hub_args(p)
    add_json(p)
    add_examples(
        p,
        "fleet status                     # every worker; `!` marks those that need you",
        "fleet status parser docs --json",
        "fleet status --seen parser@6 --quiet-after 120",
        "fleet status --hub nats://hub.example:4222   # every host's workers: HOST/WORKER",
    )
    p.set_defaults(run=cmd_status)

    p = sub.add_parser(
        "log",
        help="a worker's journal, decoded",
        description="Print each event of a worker's journal with its seq (the line index used "
        "in marks). Unreadable lines are shown, not skipped.",
    )
    p.add_argument("worker")
    p.add_argument("--archived", action="store_true",
                   help="the journal `fleet forget` set aside (the latest, if forgotten twice)")
    add_hub_args(p)
    add_json(p)
    add_examples(
        p,
        "fleet log parser",
        "fleet log parser --json",
        "fleet log typo-worker --archived",
    )
    p.set_defaults(run=cmd_log)

    p = sub.add_parser(
        "seen",
        help="record marks as handled so they no longer wake `fleet wait`",
        description="Journal a `seen` event for each MARK (WORKER@SEQ or WORKER@SEQq, as "
        "printed by `fleet wait` and `fleet status`). A coordinator that restarts is then not "
        "woken again for states it already handled.",
    )
    p.add_argument("marks", nargs="+", metavar="MARK")
    add_hub_args(p)
    add_json(p)
    add_examples(
        p,
        "fleet seen parser@6 docs@9q",
        "fleet seen laptop/parser@6 --hub     # kept in the hub, for this coordinator",
    )
    p.set_defaults(run=cmd_seen)


def cmd_register(args: argparse.Namespace) -> int:
    validate_worker_id(args.worker)
    with open_fleet(args) as fleet:
        state = fleet.register(
            args.worker,
            worktree=args.worktree,
            tool=args.tool,
            profile=args.profile,
            model=args.model,
            adapter=args.adapter,
            branch=args.branch,
            base=args.base,
            task=args.task,
            require_top=not args.any_dir,
            exclusive=True,
        )
    if args.json:
        print_json(state_json(state))
    else:
        print(f"registered {state.worker} at {state.worktree} ({state.mark})")
    return Exit.OK


def cmd_forget(args: argparse.Namespace) -> int:
    from fleet._forget import forget

    done = []
    if bool(args.workers) == args.all_gone:
        raise SettingsError("name the workers to forget, or pass --all-gone (not both)")
    with open_fleet(args) as fleet:
        if args.all_gone:
            states = [s for s in fleet.status() if s.state == "gone"]
        else:
            states = [fleet.state(worker) for worker in args.workers]
        for state in states:
            gone = forget(fleet.home, state, force=args.force, quiet_after=args.quiet_after)
            done.append(gone)
            if not args.json:
                print(f"forgot {gone.worker}; its journal is kept at {gone.kept_at}")
    if args.json:
        print_json([{"worker": g.worker, "kept_at": str(g.kept_at),
                     "worktrees": list(g.worktrees)} for g in done])
    elif not done:
        print("no worker is gone; nothing forgotten")
    return Exit.OK


def state_json(state: WorkerState, *, home: Path | None = None) -> dict[str, Any]:
    """A worker's state as every command prints it; with ``home``, also when its hook last
    failed to journal an event (``events_lost_at``, None when never)."""
    data: dict[str, Any] = to_jsonable(state)
    if home is not None:
        data["events_lost_at"] = _health.events_lost_at(home, state.worker)
    return data


def status_row(state: WorkerState, now: float) -> list[str]:
    return [
        ("! " if state.needs_attention else "  ") + state.worker,
        state.state,
        reason_text(state),
        age(state.since, now),
        state.mark,
        state.profile or "-",
        mode_text(state) or "-",
        state.branch or "-",
        f"{state.last_event or '-'} {age(state.last_event_ts, now)} ago"
        if state.last_event
        else "-",
    ]


STATUS_HEADERS = [
    "worker", "state", "reason", "for", "mark", "profile", "mode", "branch", "last event"]
#: The columns that give up width on a narrow terminal, least important first.
STATUS_SHRINK = (8, 7, 6, 5, 4, 2)


def status_table(states: list[WorkerState], now: float) -> str:
    """The status table: fits the terminal, states in colour (plain when piped)."""
    from fleet._text import STATE_COLOURS

    def colour(row: int, column: int) -> str | None:
        return STATE_COLOURS.get(states[row].state) if column == 1 else None

    return table([status_row(s, now) for s in states], STATUS_HEADERS, shrink=STATUS_SHRINK,
                 colour=colour)


def cmd_status(args: argparse.Namespace) -> int:
    hub = hub_of(args)
    if hub is not None:
        from fleet._cli import hub as hub_cli

        return hub_cli.cmd_status(args, hub)
    with open_fleet(args, quiet_after=args.quiet_after) as fleet:
        from fleet._fold_cache import load_states

        for mark in args.seen:
            parse_mark(mark)  # a one-line error for a malformed mark, as `fleet wait` gives
        names = args.workers or None
        if names:
            for name in names:
                fleet.state(name)  # a one-line error for an unknown or invalid worker
        now = fleet.clock.now()
        states = load_states(
            fleet.home, names, now, fleet.policy, args.seen, use_cache=not args.no_cache
        )
        lost = {s.worker: _health.events_lost_at(fleet.home, s.worker) for s in states}
        notes = _health.home_problems(fleet.home) if states else []
    notes[:0] = [
        f"{worker} lost events, the last {age(when, now)} ago: its journal could not be "
        "written (`fleet doctor` says why)"
        for worker, when in lost.items()
        if when is not None
    ]
    notes.extend(note for s in states if (note := _health.hooks_not_running(s)))
    if args.json:
        print_json([{**state_json(s), "events_lost_at": lost[s.worker]} for s in states])
        for note in notes:
            sys.stderr.write(f"fleet: note: {note}\n")
        return Exit.OK
    if not states:
        print("no workers (register one with `fleet register WORKER --worktree PATH`)")
        return Exit.OK
    print(status_table(states, now))
    waiting = sum(s.needs_attention for s in states)
    print(f"\n{attention_summary(len(states), waiting)}")
    for note in notes:
        print(f"note: {note}")
    return Exit.OK


def cmd_log(args: argparse.Namespace) -> int:
    if args.archived:
        events = _archived_log(args)
    else:
        with open_fleet(args) as fleet:
            events = fleet.log(args.worker)
    if args.json:
        out = []
        for seq, event in enumerate(events):
            try:
                obj = encode_obj(event)
            except ValueError:
                obj = {"type": "unreadable", "line": event.line, "error": event.error}  # type: ignore[union-attr]
            out.append({"seq": seq, **obj})
        print_json(out)
        return Exit.OK
    for seq, event in enumerate(events):
        kind = event_type(event)
        when = _clock_time(event.ts)
        try:
            fields = {k: v for k, v in encode_obj(event).items() if k not in ("v", "ts", "type")}
        except ValueError:
            fields = {"error": getattr(event, "error", "")}
        detail = " ".join(f"{k}={one_line(str(v), 60)}" for k, v in fields.items())
        print(f"{seq:>5}  {when}  {kind:<18} {detail}")
    return Exit.OK


def _archived_log(args: argparse.Namespace) -> Sequence[Event]:
    from fleet._core.events import decode_line
    from fleet._forget import archived_journals
    from fleet._home import resolve_home

    validate_worker_id(args.worker)
    if hub_of(args) is not None:
        raise SettingsError("--archived reads this host's forgotten journals: drop --hub")
    journals = archived_journals(resolve_home(args.home), args.worker)
    if not journals:
        raise SettingsError(f"no forgotten journal of {args.worker}")
    data = journals[-1].read_bytes()
    return [decode_line(line) for line in data.split(b"\n")[:-1]]


def _clock_time(ts: float | None) -> str:
    """HH:MM:SS of ``ts``; dashes when there is none, or it is no time a clock can show."""
    try:
        return time.strftime("%H:%M:%S", time.localtime(ts)) if ts else "--:--:--"
    except (OverflowError, OSError, ValueError):
        return "--:--:--"


def cmd_seen(args: argparse.Namespace) -> int:
    with open_fleet(args) as fleet:
        fleet.seen(*args.marks)
    if args.json:
        print_json({"seen": args.marks})
    else:
        print("seen: " + " ".join(args.marks))
    return Exit.OK
