"""superset status, workspace show, workspace read: what the app hosting a worker sees."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from fleet._cli import hub as hub_cli
from fleet._cli._common import (
    Exit,
    add_examples,
    add_json,
    positive_count,
    print_json,
    progress,
    seconds,
)
from fleet._core.fold import WorkerState
from fleet._errors import FleetError, SettingsError
from fleet._fleet import Fleet
from fleet.adapters._base import Workspace


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "superset",
        help="how fleet reaches Superset (CLI or host service), and its agent configs",
        description="fleet drives Superset through the `superset` CLI when `superset auth "
        "whoami` succeeds, else through the local host service found in "
        "~/.superset/host/*/manifest.json ($SUPERSET_HOME_DIR). The host's token is never "
        "printed.",
    )
    ssub = p.add_subparsers(dest="superset_command", metavar="COMMAND", title="commands")
    s = ssub.add_parser(
        "status",
        help="the route in use and the projects it sees",
        description="Print the route (cli or host), the host endpoint on the host route, and "
        "how many projects Superset knows.",
    )
    _route_arg(s)
    add_json(s)
    add_examples(
        s,
        "fleet superset status --route host --json",
    )
    s.set_defaults(run=cmd_superset_status)
    s = ssub.add_parser(
        "configs",
        help="agent configs that run clausona profiles, and their profiles",
        description="List Superset's agent configs whose command is `clausona run <profile> "
        "-- ...`, the configs fleet starts workers with. Environment values are not shown.",
    )
    _route_arg(s)
    add_json(s)
    add_examples(
        s,
        "fleet superset configs --json",
    )
    s.set_defaults(run=cmd_superset_configs)

    s = ssub.add_parser(
        "add-config",
        help="show the agent config a profile needs; add or rewrite it with --yes (host route)",
        description="Workers run through Superset agent configs whose command is `clausona run "
        "<profile> -- <args>`, with the launch rules of `fleet start`: the permission mode "
        "(default: the settings' permissions.claude), the model and effort, and an API "
        "profile's short --tools list. Without --yes this prints the config fleet would use "
        "or add (label, command, args) and changes nothing; when one exists but states "
        "something else, it prints the change. With --yes, on the host route, it adds a "
        "missing config, and with --update --yes it rewrites the existing one; the CLI route "
        "cannot add or edit configs, so it says what to set under Superset → Settings → "
        "Agents.",
    )
    s.add_argument("profile", help="clausona profile, e.g. claude:work")
    s.add_argument("--tool", choices=["claude", "codex"], default="claude")
    s.add_argument("--model", metavar="M", help="model the config runs")
    s.add_argument("--effort", metavar="E", help="reasoning effort")
    s.add_argument("--permission-mode", metavar="MODE",
                   help="Claude permission mode (default: the settings' permissions.claude)")
    s.add_argument("--update", action="store_true",
                   help="rewrite an existing config that states something else (with --yes)")
    s.add_argument("--yes", action="store_true", help="add or rewrite it (the user agreed)")
    _route_arg(s)
    add_json(s)
    add_examples(
        s,
        "fleet superset add-config claude:work --model opus          # show it",
        "fleet superset add-config claude:work --model opus --yes    # add it",
        "fleet superset add-config claude:work --model opus --update --yes   # rewrite it",
    )
    s.set_defaults(run=cmd_superset_add_config)

    p = sub.add_parser(
        "workspace",
        help="what the app hosting a worker (Superset, herdr) reports, and its screen",
        description="Ask the worker's adapter (from its registration: adapter, handles, "
        "worktree) what its host sees. This is shown beside fleet's own state, never folded "
        "into it.",
    )
    wsub = p.add_subparsers(dest="workspace_command", metavar="COMMAND", title="commands")
    s = wsub.add_parser(
        "show",
        help="what the host reports about a worker",
        description="Print what the worker's host reports about it (for Superset: its "
        "workspace and terminal; for herdr: its pane; for headless: its supervisor), one "
        "`key: value` line each.",
        epilog="example:\n  fleet workspace show parser --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("worker")
    add_json(s)
    s.set_defaults(run=cmd_workspace_show)
    s = wsub.add_parser(
        "send",
        help="send a follow-up read from a file (same as `fleet send`)",
        description="Same as `fleet send WORKER FILE`: deliver FILE's text to the worker "
        "through its host.",
        epilog="example:\n  fleet workspace send parser followup.md",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _send_args(s)
    s = wsub.add_parser(
        "read",
        help="print the worker's screen or output",
        description="Print the last N lines of what the worker's host shows: the terminal "
        "(Superset), the pane (herdr), or the agent's output (headless).",
        epilog="example:\n  fleet workspace read parser --lines 50",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("worker")
    s.add_argument(
        "--lines", type=positive_count, default=200, metavar="N", help="lines (default 200)"
    )
    add_json(s)
    s.set_defaults(run=cmd_workspace_read)

    p = sub.add_parser(
        "send",
        help="send a worker a follow-up read from a file, through its adapter",
        description="Deliver the text of FILE to the worker the way its host takes input: a "
        "resumed session for headless workers, the terminal for Superset, the pane for herdr. "
        "Write follow-ups to a file; never paste them on a command line. The follow-up is "
        "journaled and the state it answers counts as seen.",
    )
    _send_args(p)
    add_examples(p, "fleet send parser followup.md")

    p = sub.add_parser(
        "hand-over",
        help="move a worker's task to another profile or model, in the same worktree",
        description="When a worker hit a usage limit or is stuck, start its task again on another "
        "profile (or model) in the same workspace and worktree, through the worker's adapter: "
        "the new agent is told where the brief is and what its predecessor did; the old "
        "terminal or pane is closed. The hand-over is journaled and the worker starts over in "
        "`starting`. With neither --profile nor --model, the next profile is chosen by the "
        "routing rules (`fleet plan`): never the worker's own, the coordinator's, or one at "
        "its limit; the choice and why are printed.",
    )
    p.add_argument("worker")
    p.add_argument("--profile", metavar="P", help="the profile to hand the task to")
    p.add_argument("--model", metavar="M", help="model to run")
    p.add_argument(
        "--brief",
        type=Path,
        metavar="FILE",
        help="the task's brief (default: the one the worker was started with)",
    )
    p.add_argument("--permission-mode", metavar="MODE")
    p.add_argument("--effort", metavar="LEVEL")
    p.add_argument(
        "--config-dir",
        type=Path,
        metavar="DIR",
        help="the profile's config dir (default: from `clausona list --json`)",
    )
    _receipt_arg(p)
    _queue_arg(p)
    add_json(p)
    add_examples(
        p,
        "fleet hand-over parser                    # the next profile by the routing rules",
        "fleet hand-over parser --profile claude:personal",
        "fleet hand-over parser --model sonnet --brief briefs/parser.md",
    )
    p.set_defaults(run=cmd_hand_over)


def _send_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("worker")
    p.add_argument("file", type=Path, metavar="FILE", help="the follow-up text")
    _receipt_arg(p)
    _queue_arg(p)
    hub_cli.add_hub_args(p)
    add_json(p)
    p.set_defaults(run=cmd_send)


def _queue_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-queue", dest="queue", action="store_false",
        help="a worker takes one follow-up or hand-over at a time: refuse (exit 4) instead of "
        "waiting for the one under way (a headless worker's run) to end",
    )


def _waiting(worker: str) -> Callable[[], None]:
    def say() -> None:
        progress(f"{worker} is taking another follow-up or hand-over; this one waits its "
                 "turn (Ctrl-C gives up; --no-queue refuses instead)")
    return say


def _receipt_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--receipt", type=seconds, default=0.0, metavar="S",
        help="wait up to S seconds for the agent to take it (a prompt, a session or a turn "
        "after it) and say whether it did: exit 0 taken, 3 not known yet, 4 not taken (its "
        "agent could not start, or it went quiet); default: do not wait",
    )


def _say_receipt(args: argparse.Namespace, before: WorkerState, out: dict[str, Any], *,
                 sent_line: bool = True) -> int:
    """Wait for the receipt ``--receipt`` asks for, add it to ``out`` and print (with the
    "sent" line unless ``sent_line`` is False: the caller printed its own); the exit code it
    means."""
    if args.receipt <= 0:
        _print_sent(args, out)
        return Exit.OK
    from fleet._orchestrate import wait_receipt

    receipt = wait_receipt(args.worker, before, home=args.home, timeout=args.receipt)
    out["receipt"] = {"taken": receipt.taken, "state": receipt.state,
                      "reason": receipt.reason, "why": receipt.why, "queued": receipt.queued}
    if sent_line or args.json:
        _print_sent(args, out)
    if not args.json:
        if receipt.taken:
            said = f"taken: {receipt.state}({receipt.reason})"
        elif receipt.taken is False:
            said = f"not taken: {receipt.why}"
        elif receipt.queued:
            said = (f"queued: the worker was busy and has not taken it after "
                    f"{args.receipt:g}s (it does after its turn)")
        else:
            said = f"not taken yet after {args.receipt:g}s: {receipt.state}({receipt.reason})"
        sys.stdout.write(f"{args.worker}: {said}\n")
    if receipt.taken is False:
        return Exit.REFUSED
    return Exit.OK if receipt.taken else Exit.TIMEOUT


def _print_sent(args: argparse.Namespace, out: dict[str, Any]) -> None:
    if args.json:
        print_json(out)
    else:
        sys.stdout.write(f"sent {out['sent']} to {args.worker} ({out['adapter']})\n")


def _route_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--route",
        choices=["auto", "cli", "host"],
        default="auto",
        help="auto (default): the CLI when logged in, else the host service",
    )


def _superset(args: argparse.Namespace) -> Any:
    from fleet.adapters.superset import SupersetAdapter

    return SupersetAdapter(route=args.route)


def cmd_superset_status(args: argparse.Namespace) -> int:
    info = _superset(args).status()
    if args.json:
        print_json(info)
    else:
        where = f" at {info['endpoint']}" if "endpoint" in info else ""
        sys.stdout.write(f"superset: {info['route']} route{where}, {info['projects']} projects\n")
    return Exit.OK


def cmd_superset_configs(args: argparse.Namespace) -> int:
    from fleet.adapters.superset import match_config

    adapter = _superset(args)
    rows = []
    for config in adapter.backend.configs():
        argv = config.get("args") or []
        if match_config([config], str(argv[1]) if len(argv) > 1 else "") is None:
            continue
        rows.append(
            {
                "id": config.get("id"),
                "label": config.get("label"),
                "profile": argv[1],
                "command": config.get("command"),
                "args": argv,
            }
        )
    if args.json:
        print_json(rows)
    else:
        for row in rows:
            sys.stdout.write(f"{row['profile']}\t{row['label']}\t{row['id']}\n")
    return Exit.OK


def cmd_superset_add_config(args: argparse.Namespace) -> int:
    from fleet._orchestrate._apps import app_launch_spec
    from fleet.adapters.superset import (
        MissingAgentConfig,
        add_config_command,
        config_args,
        config_mismatch,
        match_config,
    )

    adapter = _superset(args)
    # the launch rules of `fleet start`: the settings' mode, the profile's kind (API tools)
    spec = app_launch_spec(
        "config", brief=Path(os.devnull), profile=args.profile, tool=args.tool,
        model=args.model, effort=args.effort, permission_mode=args.permission_mode,
    )
    existing = match_config(adapter.backend.configs(), spec.profile or args.profile)
    result: dict[str, Any]
    if existing is not None:
        changes = config_mismatch(existing, spec)
        result = {"status": "exists", **_shown(existing)}
        if changes:
            result |= {"status": "differs", "changes": changes, "current": existing.get("args"),
                       "args": config_args(spec)}
            if args.update and args.yes:
                result |= {"status": "updated", **_shown(adapter.update_config(existing, spec))}
    else:
        adapter.add_missing_configs = args.yes
        try:
            result = {"status": "added", **_shown(adapter.config_for(spec))}
        except MissingAgentConfig as missing:
            if args.yes:
                raise
            result = {
                "status": "missing",
                "id": None,
                "label": missing.label,
                "command": missing.command,
                "args": missing.config_args,
            }
    if args.json:
        print_json(result)
        return Exit.OK
    command = " ".join([str(result["command"]), *map(str, result["args"] or [])])
    if result["status"] == "differs":
        current = " ".join([str(result["command"]), *map(str, result["current"] or [])])
        sys.stdout.write(
            f"differs: {result['label']}: {'; '.join(result['changes'])}\n"
            f"  now:   {current}\n  would: {command}\n"
        )
        sys.stdout.write(f"rewrite it with `{add_config_command(spec, update=True)} --yes` "
                         "(host route), or set those args under Superset → Settings → "
                         "Agents\n")
        return Exit.OK
    sys.stdout.write(f"{result['status']}: {result['label']}: {command}\n")
    if result["status"] == "missing":
        sys.stdout.write(
            "rerun with --yes to add it (host route), or add it under Superset → "
            "Settings → Agents\n"
        )
    return Exit.OK


def _shown(config: Any) -> dict[str, Any]:
    return {k: config.get(k) for k in ("id", "label", "command", "args")}


def _workspace(args: argparse.Namespace) -> tuple[Any, Workspace]:
    from fleet.adapters import get_adapter

    with Fleet(args.home) as fleet:
        state = fleet.state(args.worker)
    if not state.adapter or not state.worktree:
        raise SettingsError(f"worker {args.worker} was registered without an adapter")
    adapter = get_adapter(state.adapter)
    workspace = Workspace(
        worktree=Path(state.worktree),
        branch=state.branch or "",
        base=state.base,
        handle={**state.handle, "worker": args.worker},
    )
    return adapter, workspace


def cmd_workspace_show(args: argparse.Namespace) -> int:
    adapter, workspace = _workspace(args)
    info = dict(adapter.describe(workspace))
    if args.json:
        print_json(info)
    else:
        for key, value in info.items():
            sys.stdout.write(f"{key}: {value}\n")
    return Exit.OK


def cmd_workspace_read(args: argparse.Namespace) -> int:
    adapter, workspace = _workspace(args)
    text = adapter.read(workspace, lines=args.lines)
    if args.json:
        print_json({"worker": args.worker, "adapter": adapter.name, "text": text})
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return Exit.OK


def cmd_send(args: argparse.Namespace) -> int:
    hub = hub_cli.hub_of(args)
    if hub is not None:  # delivered on the worker's own host
        return hub_cli.cmd_send(args, hub, hub_cli.read_follow_up(args.file))
    from fleet._files import read_prompt

    # Checked here, before any adapter has typed half of it into a terminal.
    read_prompt(args.file, "follow-up file")
    from fleet._orchestrate import send_follow_up
    from fleet._port import FileJournal

    adapter, workspace = _workspace(args)
    done = send_follow_up(adapter, workspace, args.file, worker=args.worker,
                          journal=FileJournal(args.home), queue=args.queue,
                          waiting=_waiting(args.worker))
    return _say_receipt(
        args, done.before,
        {"worker": args.worker, "sent": str(args.file), "adapter": adapter.name})


def cmd_hand_over(args: argparse.Namespace) -> int:
    from fleet.adapters._base import LaunchSpec

    adapter, workspace = _workspace(args)
    with Fleet(args.home) as fleet:
        state = fleet.state(args.worker)
    why: str | None = None
    routed_dir: Path | None = None
    if args.profile is None and args.model is None:
        args.profile, routed_dir, why = next_profile(state)
    brief = args.brief or _started_brief(args)
    if brief is None:
        raise SettingsError(f"say which brief {args.worker} works on: --brief FILE")
    from fleet._files import read_prompt

    read_prompt(brief, "brief")
    from fleet._orchestrate import hand_over
    from fleet._orchestrate._apps import APP_ADAPTERS, app_launch_spec, check_app_hand_over
    from fleet._port import FileJournal

    if adapter.name in APP_ADAPTERS:
        # start's launch rules and checks: the settings' mode, the profile's kind (an API
        # profile's tools), a Superset config that runs what is asked, a herdr that answers
        spec = app_launch_spec(
            args.worker, brief=brief, profile=args.profile or state.profile,
            tool=state.tool or "claude", model=args.model, effort=args.effort,
            permission_mode=args.permission_mode, config_dir=args.config_dir,
        )
        check_app_hand_over(adapter, spec)
    else:
        config_dir = args.config_dir or routed_dir
        if config_dir is None and args.profile is not None:
            config_dir = _profile_config_dir(args.profile)
        spec = LaunchSpec(
            worker=args.worker,
            tool=state.tool or "claude",
            brief=brief,
            profile=args.profile or state.profile,
            model=args.model,
            permission_mode=args.permission_mode,
            effort=args.effort,
            config_dir=config_dir,
        )
    adapter.trust(workspace, spec)
    done = hand_over(adapter, workspace, spec, journal=FileJournal(args.home), queue=args.queue,
                     waiting=_waiting(args.worker))
    handle = dict(done.handle)
    out = {"worker": args.worker, "profile": spec.profile, "model": spec.model,
           "handle": handle, "adapter": adapter.name, "why": why}
    if not args.json:
        sys.stdout.write(
            f"handed {args.worker} over to {spec.profile or '-'}"
            f"{f' ({spec.model})' if spec.model else ''} via {adapter.name}"
            f"{f': {why}' if why else ''}\n"
        )
    if args.receipt <= 0:
        if args.json:
            print_json(out)
        return Exit.OK
    # The hand-over starts a new session: it is taken when that session's first hook runs.
    return _say_receipt(args, attrs.evolve(done.before, state="starting"), out, sent_line=False)


def _started_brief(args: argparse.Namespace) -> Path | None:
    """The brief a headless worker was started with, from its launch record."""
    from fleet._home import resolve_home, worker_dir

    record = worker_dir(resolve_home(args.home), args.worker) / "headless" / "launch.json"
    try:
        import json

        from fleet._files import read_input

        data = json.loads(read_input(record, "launch record", missing_ok=True) or b"{}")
        brief = data.get("brief") if isinstance(data, dict) else None
    except (FleetError, ValueError, RecursionError):
        return None
    return Path(brief) if isinstance(brief, str) else None


def next_profile(state: WorkerState, *, tool: str | None = None) -> tuple[str, Path | None, str]:
    """The profile a hand-over moves ``state``'s task to (or a blind reviewer of ``tool`` runs
    on), by the routing rules: never the worker's own, the coordinator's, or one at its limit.
    With its config dir and the reason; SettingsError saying why when none is eligible."""
    from fleet._core.routing import Choices, Task
    from fleet._plan import plan_tasks
    from fleet._profiles import load_profiles
    from fleet._settings import load_settings

    profiles = load_profiles()
    settings = load_settings()
    pool = settings.workers if settings.workers is not None else [p.name for p in profiles]
    others = tuple(name for name in pool if name != state.profile)
    task = Task(name=state.worker, tool=tool or state.tool)
    row = plan_tasks([task], profiles=profiles, settings=settings,
                     choices=Choices(use=others)).rows[0]
    if row.profile is None:
        raise SettingsError(
            f"no profile to hand {state.worker} over to: {row.reason} (name one with --profile)"
        )
    return row.profile, row.config_dir, row.reason


def _profile_config_dir(name: str) -> Path | None:
    from fleet._profiles import find_profile, load_profiles

    try:
        return find_profile(name, load_profiles()).config_dir
    except FleetError:
        # No clausona here, or it does not know the profile: the adapter answers the trust
        # prompt on screen where it can.
        return None
