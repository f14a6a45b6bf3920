"""check, retire, report, demo."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fleet._blind import DEFAULT_REVIEW_TIMEOUT, Reviewer
from fleet._check import DEFAULT_CMD_TIMEOUT, CheckResult, check_worker
from fleet._cli import hub as hub_cli
from fleet._cli._common import (
    Exit,
    add_examples,
    add_json,
    one_line,
    print_json,
    progress,
    say,
    seconds,
    to_jsonable,
)
from fleet._errors import Refused, SettingsError
from fleet._fleet import Fleet
from fleet._report import build_report, format_report
from fleet._retire import (
    MODES,
    Candidate,
    Mode,
    Outcome,
    Retirer,
    confirm_on_tty,
    mode_from_settings,
)

CHECK_HELP = """\
Check a worker's DONE claim in its registered worktree:
  - commits exist in BASE..HEAD;
  - the worktree is clean: modified, staged and untracked files count (ignored files do not),
    and so does an edit that skip-worktree, assume-unchanged or a stale stat cache hides from
    git status (every file is hashed against HEAD);
  - HEAD is on a branch with an upstream, nothing is ahead of it, and the remote itself
    (asked with git ls-remote) has HEAD on that branch;
  - each --cmd passes, run with `sh -c` in the worktree (the tail of its output is kept).
The verdict, checked or failed with one finding per problem, is journaled; status, wait and
report show it. Exit 0 when checked, 4 when failed."""

RETIRE_HELP = """\
Retire workers whose work is safely on the remote, and only those:
  1. the worker claimed done and the claim was checked (a claim never checked is checked
     here first, as `fleet check` would; a failed check refuses until it is checked again);
  2. HEAD is still the commit that was checked, the worktree is clean (untracked files
     count, and so does an edit an index flag hides: every file is hashed against HEAD), and
     HEAD is on the remote branch its upstream names;
  3. nothing git ignores holds work: no ignored nested repository has commits found nowhere
     else, no worktree-private ref (refs/worktree/*, refs/bisect/*, a per-worktree stash, a
     merge in progress) reaches a commit no branch, tag or remote does; ignored plain files
     (build output, caches) may go, and ask mode lists how many and the largest first;
  4. the worktree's state is saved to refs/fleet/WORKER/TIME in the repository;
  5. every guard runs again, then the worker's adapter deletes the workspace, never forced
     (`git worktree remove` for a plain worktree); the branch is kept;
  6. the directory is confirmed gone and `retired` is journaled.
A refusal says exactly why ("2 commits not pushed to origin/x", "untracked file notes.txt")
and is journaled. In ask mode (the default, or the `retire` setting) the workers that would
be retired are listed and need --yes, or a y on the terminal.
Exit 0 when every worker asked for was retired, 4 when any was refused or kept."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="check a worker's DONE claim and journal the verdict",
        description=CHECK_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  fleet check w1-docs --cmd 'pytest -q' --cmd 'ruff check .'",
    )
    p.add_argument("worker")
    p.add_argument("--base", metavar="REF", help="compare with REF (default: registered base)")
    p.add_argument(
        "--cmd", action="append", default=[], metavar="CMD", dest="cmds",
        help="a check command from the brief; repeat for more",
    )
    p.add_argument(
        "--timeout", type=seconds, default=DEFAULT_CMD_TIMEOUT, metavar="S",
        help=f"seconds each check command may run (default {DEFAULT_CMD_TIMEOUT:g})",
    )
    b = p.add_argument_group(
        "blind review", "for risky work: once git and the commands pass, a headless Claude Code "
        "reviewer on a third profile (neither the worker's nor yours) judges the work against "
        "written criteria, with read-only tools, in the worktree; each criterion must pass")
    b.add_argument("--blind", action="store_true", help="add the blind review")
    b.add_argument("--criteria", type=Path, metavar="FILE",
                   help="the criteria, one per line (needed with --blind)")
    b.add_argument("--reviewer", metavar="P",
                   help="the reviewer's profile (default: the next one by the routing rules)")
    b.add_argument("--endpoint", metavar="URL", help="review on an API endpoint instead")
    b.add_argument("--key-from", metavar="SRC", help="the endpoint's key (env:NAME, ...)")
    b.add_argument("--model", metavar="M", help="the reviewer's model")
    b.add_argument("--review-timeout", type=seconds, default=DEFAULT_REVIEW_TIMEOUT,
                   metavar="S", help=f"how long the review may run (default "
                   f"{DEFAULT_REVIEW_TIMEOUT:g})")
    hub_cli.add_hub_args(p)
    add_json(p)
    p.set_defaults(run=cmd_check)

    p = sub.add_parser(
        "retire",
        help="remove a checked, clean, pushed worker's worktree (never forced)",
        description=RETIRE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  fleet retire w1-docs --yes\n  fleet retire --all-done --mode auto",
    )
    p.add_argument("workers", nargs="*", metavar="WORKER")
    p.add_argument(
        "--all-done", action="store_true",
        help="every worker that claimed done; the others are reported, not touched",
    )
    p.add_argument("--mode", choices=MODES, help="ask (confirm first) or auto (default: setting)")
    p.add_argument("--yes", "-y", action="store_true", help="confirm in ask mode")
    p.add_argument("--base", metavar="REF", help="base for a claim checked here")
    p.add_argument(
        "--cmd", action="append", default=[], metavar="CMD", dest="cmds",
        help="check command for a claim checked here; repeat for more",
    )
    hub_cli.add_hub_args(p)
    add_json(p)
    p.set_defaults(run=cmd_retire)

    p = sub.add_parser(
        "report",
        help="one line per worker: who, where, verdict, retired or kept and why",
        description="The final report, from the journals: profile and model; workspace and "
        "branch; the verdict (checked or failed by fleet, or only claimed by the worker); "
        "retired (with its snapshot ref) or kept, and why.",
    )
    p.add_argument("workers", nargs="*", metavar="WORKER")
    hub_cli.add_hub_args(p)
    add_json(p)
    add_examples(
        p,
        "fleet report",
        "fleet report parser docs --json",
        "fleet report --hub nats://hub.example:4222",
    )
    p.set_defaults(run=cmd_report)

    p = sub.add_parser(
        "demo",
        help="watch fleet run a simulated fleet end to end (no account, no network)",
        description="In a temporary directory: a repo with a local bare origin, a plan of a "
        "few tasks, and simulated workers that go through fleet's real hook program with "
        "payloads shaped like Claude Code's: they edit, commit and push; one asks for a "
        "permission; one claims done without pushing. The coordinator loop then waits, "
        "follows up, checks, retires and reports with fleet's own API. The workers are "
        "simulated: no model runs. It says where it works, and removes that directory at the "
        "end. Lines fit 100 columns; colour on a terminal only (never with NO_COLOR).",
    )
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary directory (repository, origin, worktrees, fleet "
                   "home) to look around in")
    p.add_argument("--fast", action="store_true", help="no pauses between steps")
    add_json(p)
    add_examples(
        p,
        "fleet demo --fast",
    )
    p.set_defaults(run=cmd_demo)


# -- check ---------------------------------------------------------------------------------


def check_json(result: CheckResult) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(result)
    return data


def print_check(result: CheckResult) -> None:
    head = result.head[:7] if result.head else "?"
    print(f"{result.worker}: {result.verdict} ({result.base or '?'}..{head} on "
          f"{result.branch or '?'}, upstream {result.upstream or '-'})")
    for line in result.commits[:10]:
        print(f"  commit {line}")
    if len(result.commits) > 10:
        print(f"  ... {len(result.commits) - 10} more commits")
    for cmd in result.commands:
        print(f"  {'ok  ' if cmd.ok else 'FAIL'} {cmd.cmd} ({cmd.seconds:.1f}s)")
        if not cmd.ok and cmd.tail:
            for line in cmd.tail.splitlines()[-5:]:
                print(f"       | {line}")
    for verdict in result.criteria:
        mark = {True: "pass", False: "FAIL", None: "none"}[verdict.passed]
        print(f"  {mark:4} criterion {verdict.number}: {verdict.criterion} — {verdict.reason}")
    if result.reviewer:
        print(f"  (judged by a blind reviewer on {result.reviewer})")
    for finding in result.findings:
        print(f"  - {finding}")


def cmd_check(args: argparse.Namespace) -> int:
    hub = hub_cli.hub_of(args)
    if hub is not None:
        if args.blind:
            raise SettingsError("a blind review runs on the worker's own host: run `fleet "
                                "check --blind` there")
        return hub_cli.cmd_check(args, hub)  # on the worker's own host
    if args.cmds:
        progress(
            f"checking {args.worker}: git, then {len(args.cmds)} check "
            f"command{'s' if len(args.cmds) != 1 else ''} (up to {args.timeout:g}s each)..."
        )
    blind = _blind_review(args)
    with Fleet(args.home) as fleet:
        if blind is not None:
            progress(f"checking {args.worker}, then a blind review on {blind[0].name} (up to "
                     f"{args.review_timeout:g}s)...")
        result = check_worker(
            fleet, args.worker, base=args.base, commands=args.cmds, timeout=args.timeout,
            blind=blind,
        )
    if args.json:
        print_json(check_json(result))
    else:
        print_check(result)
    return Exit.OK if result.ok else Exit.REFUSED


def _blind_review(args: argparse.Namespace) -> tuple[Reviewer, list[str]] | None:
    """The reviewer and the criteria ``--blind`` asks for, checked before anything runs."""
    from fleet._blind import read_criteria

    if not args.blind:
        if args.criteria or args.reviewer or args.endpoint:
            raise SettingsError("--criteria, --reviewer and --endpoint go with --blind")
        return None
    if args.criteria is None:
        raise SettingsError("--blind needs --criteria FILE: what the reviewer judges")
    criteria = read_criteria(args.criteria)
    profile = args.reviewer
    if profile is None and args.endpoint is None:
        profile = _third_profile(args)
    return Reviewer(profile=profile, endpoint=args.endpoint, key_from=args.key_from,
                    model=args.model, timeout=args.review_timeout), criteria


def _third_profile(args: argparse.Namespace) -> str:
    """A Claude profile that is neither the worker's nor the coordinator's, by the routing
    rules; SettingsError naming what to pass when there is none."""
    from fleet._cli.adapters import next_profile

    with Fleet(args.home) as fleet:
        state = fleet.state(args.worker)
    try:
        profile, _, _ = next_profile(state, tool="claude")
    except SettingsError as exc:
        raise SettingsError(f"no profile for a blind reviewer: {exc}; pass --reviewer P or "
                            "--endpoint URL --key-from SRC") from None
    return profile


# -- retire --------------------------------------------------------------------------------


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(outcome)
    return data


def describe_candidate(c: Candidate) -> str:
    return (f"{c.worker}: {c.worktree} (branch {c.branch} at {c.head[:7]}, pushed to "
            f"{c.upstream}){' [checked now]' if c.checked_now else ''}")


def print_outcome(o: Outcome) -> None:
    if o.retired and o.reason == "already retired":
        say(f"{o.worker}: already retired" + (f" (snapshot {o.ref})" if o.ref else ""))
    elif o.retired:
        took = ""
        if o.ignored is not None and (o.ignored.files or o.ignored.dirs):
            took = f" with {o.ignored.describe()}"
        but = "".join(f"; but {w}" for w in o.warnings)
        say(f"{o.worker}: retired; {o.worktree} removed{took}, branch {o.branch} kept, "
              f"snapshot {o.ref}{but}")
    else:
        say(f"{o.worker}: kept: {o.reason}")


def cmd_retire(args: argparse.Namespace) -> int:
    hub = hub_cli.hub_of(args)
    if hub is not None:
        return hub_cli.cmd_retire(args, hub)  # on each worker's own host
    if not args.workers and not args.all_done:
        raise Refused("name the workers to retire, or pass --all-done")
    if args.workers and args.all_done:
        raise Refused("pass worker names or --all-done, not both")
    mode: Mode = args.mode or mode_from_settings()
    outcomes: list[Outcome] = []
    untouched: list[Outcome] = []
    with Fleet(args.home) as fleet:
        retirer = Retirer(fleet, base=args.base, commands=args.cmds)
        if args.all_done:
            names = []
            for state in fleet.status():
                if state.state == "done":
                    names.append(state.worker)
                elif state.state != "retired":
                    untouched.append(Outcome(
                        worker=state.worker, retired=False,
                        reason=f"not done: {state.state} ({state.reason})",
                        worktree=state.worktree, branch=state.branch,
                    ))
        else:
            names = list(dict.fromkeys(args.workers))
            for name in names:
                fleet.state(name)  # unknown or invalid worker: one line, before any work
        candidates: list[Candidate] = []
        for name in names:
            judged = retirer.assess(name)
            if isinstance(judged, Candidate):
                candidates.append(judged)
            else:
                outcomes.append(judged)
        confirmed: bool | None = True
        if candidates and mode == "ask" and not args.yes:
            confirmed = _ask(candidates, args.json)
        for candidate in candidates:
            if confirmed:
                outcomes.append(retirer.retire(candidate))
            else:
                why = "not confirmed" if confirmed is False else NO_TERMINAL
                outcomes.append(Outcome(
                    worker=candidate.worker, retired=False, reason=why,
                    worktree=str(candidate.worktree), branch=candidate.branch,
                    head=candidate.head, upstream=candidate.upstream,
                    ignored=candidate.ignored,
                ))
    order = {name: i for i, name in enumerate(names)}
    outcomes.sort(key=lambda o: order.get(o.worker, len(order)))
    if args.json:
        print_json({
            "mode": mode,
            "outcomes": [outcome_json(o) for o in outcomes],
            "untouched": [outcome_json(o) for o in untouched],
        })
    else:
        if args.all_done and not names:
            print("no worker has claimed done")
        for o in outcomes + untouched:
            print_outcome(o)
    return Exit.OK if all(o.retired for o in outcomes) else Exit.REFUSED


NO_TERMINAL = (
    "not confirmed: retire mode is ask and there is no terminal to confirm on "
    "(pass --yes to confirm, or --mode auto)"
)


def _ask(candidates: list[Candidate], as_json: bool) -> bool | None:
    """y/N on the terminal; None when there is none to ask on."""
    out = sys.stderr if as_json else sys.stdout
    out.write("retire mode is ask; these would be retired (worktree removed, branch kept):\n")
    for c in candidates:
        out.write(f"  {describe_candidate(c)}\n")
        if c.ignored is not None and (c.ignored.files or c.ignored.dirs):
            # Ignored files go with the worktree: say how many and which are largest first.
            out.write(f"    also deletes {c.ignored.describe()}\n")
    out.flush()
    return confirm_on_tty(f"retire {len(candidates)} worker(s)? [y/N] ", stdout=out)


# -- report --------------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    hub = hub_cli.hub_of(args)
    if hub is not None:
        return hub_cli.cmd_report(args, hub)
    with Fleet(args.home) as fleet:
        for name in args.workers:
            fleet.state(name)
        lines = build_report(fleet, args.workers or None)
    if args.json:
        print_json([to_jsonable(line) for line in lines])
    else:
        from fleet._text import terminal_width

        print(format_report(lines, width=terminal_width()))
    return Exit.OK


# -- demo ----------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    from fleet._demo import run_demo

    result = run_demo(keep=args.keep, fast=args.fast, narrate=not args.json)
    if args.json:
        print_json(result)
    if result.ok:
        return Exit.OK
    why = "; ".join(result.problems) or "not every worker was checked and retired"
    sys.stderr.write(f"fleet: the demo did not run to the end: {one_line(why, 300)}\n")
    return Exit.ERROR
