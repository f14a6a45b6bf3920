"""start, stop, run: headless workers (``claude -p`` / ``codex exec``) under a supervisor, or
interactive workers in an app (Superset, herdr) with ``--adapter``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from fleet._cli._common import (
    Exit,
    add_examples,
    add_json,
    count,
    positive_count,
    print_json,
    seconds,
)
from fleet._core.fold import WorkerState
from fleet._keys import KEY_SOURCE_HELP

if TYPE_CHECKING:
    from fleet._orchestrate import FanOutResult
    from fleet._permissions import PermissionPolicy
    from fleet.adapters.headless import HeadlessOptions

START_DESCRIPTION = f"""\
Create the worktree and branch fleet/WORKER from --base (default: the repository's HEAD),
register the worker, and start the agent there on the brief under a detached supervisor,
then return. The supervisor outlives this command: it journals `started` (pid, start time,
attempt) and `exited` (exit code, is_error, API status, result, token usage, session id),
retries overload and transient errors with jittered backoff, and ends a usage or rate limit
in blocked(limit). Follow with `fleet wait WORKER`.

Where the agent runs:
  --profile P     a profile `fleet profiles` lists: its config dir, model and login (fleet's
                  own through fleet-profile-run, clausona's through `clausona run P`)
  --endpoint URL  a fresh config dir for this worker only (under FLEET_HOME), seeded with
                  fleet's hooks, the effort level and the onboarding answers, so the host's
                  own login can never reach the endpoint; the key from --key-from
                  ({KEY_SOURCE_HELP}) goes to the agent in its environment only, never in
                  argv, a file or a log
  neither         the tool's default config, as your shell would run it

The worktree goes beside the repository, in <repo>.fleet/WORKER ($FLEET_WORKTREES/<repo
name>/WORKER when that is set). Success is judged on is_error and the exit code, never on
the result's subtype.

In an app (--adapter superset|herdr, or the settings' `adapter`): create the app's workspace
(a worktree on fleet/WORKER), named `WORKER · <profile> (<model>)` (under 26 characters for
Superset: the task part is cut, the profile label kept), trust the worktree for the profile,
and start the agent interactively on the brief (the agent is sent one line naming the brief's
file; Superset's host service is given the text itself). The worker is registered with the
adapter and its handles (workspace, terminal or pane); `--json` prints them. Claude gets
--permission-mode (default: settings `permissions.claude`, else `default`, where the person
watching the app approves each action), --strict-mcp-config, --model and --effort, and an
API profile the short tool list. Superset needs --profile and an agent config running it
(`fleet superset add-config P`). Workers on one profile start one at a time. A start that
fails takes its workspace back. The headless-only options (--endpoint, --key-from,
--small-model, --timeout, --retries, --allowed-tools, ...) are refused there.

Permissions: a headless worker has nobody to answer a prompt, so claude -p denies every tool
call that needs approval and still reports success. Use bypassPermissions (the default; the
worktree is the cage; as root it needs IS_SANDBOX=1 in the environment) or dontAsk with
--allowed-tools (the mode a coordinator in auto mode may start). default, acceptEdits and
plan are refused before anything is created unless you pass --insist. Settings
`permissions` (per profile and per kind of task) give the defaults; options win.
"""

RUN_DESCRIPTION = """\
Route every task of TASKS.toml to a profile (as `fleet plan` shows) and start each as a
headless worker, at most --max-parallel at a time; return once the last has started, and
follow with `fleet wait`. A task that no profile can take is reported and not started.
With --endpoint, routing is skipped and every task runs on that endpoint, each in its own
isolated config dir. Claude workers on one profile start one at a time (each until its
agent has journaled its first event), because a starting Claude Code rewrites its state
file. Exit code 4 when some task could not be started (each is listed with the reason).

Each task's permission policy is the settings' `permissions` (then its kind's and its
profile's tables), then the task's own `permissions` table, then these options. A task whose
mode would ask a person (default, acceptEdits, plan) refuses the whole run before anything
is created, unless you pass --insist; see `fleet start --help`.

With --adapter superset|herdr (or the settings' `adapter`), each routed task starts in that
app instead, as `fleet start --adapter` does, in the file's order. --max-parallel and the
other headless-only options are refused there: app workers run until they are retired.
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "start",
        help="start a worker in a new worktree: headless (claude -p / codex exec), or in "
        "Superset or herdr (--adapter)",
        description=START_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("worker", help="worker id: lowercase letters, digits, '.', '_', '-'")
    p.add_argument("--task", required=True, metavar="BRIEF_FILE", help="the brief: the prompt")
    p.add_argument("--repo", default=".", metavar="REPO", help="the repository (default: .)")
    _adapter_option(p)
    _launch_options(p)
    p.add_argument("--base", metavar="REF", help="where the branch starts (default: HEAD)")
    add_json(p)
    add_examples(
        p,
        "fleet start parser --task briefs/parser.md --profile claude:work",
        "fleet start docs --task briefs/docs.md --endpoint https://api.example.com "
        "--key-from env:API_KEY",
        "fleet start paths --task briefs/paths.md --adapter superset --profile claude:work "
        "--model opus",
        "fleet start paths --task briefs/paths.md --adapter herdr --profile claude:work --json",
    )
    p.set_defaults(run=cmd_start)

    p = sub.add_parser(
        "stop",
        help="stop a headless worker; its state becomes gone(stopped)",
        description="Signal the worker's supervisor, which terminates the agent's whole "
        "process group (SIGTERM, then SIGKILL after a grace period) and journals "
        "exited(reason=stopped). The worktree and branch stay. A worker that is not running "
        "is refused (exit 4).",
    )
    p.add_argument("worker")
    p.add_argument("--wait", type=seconds, default=30.0, metavar="S",
                   help="seconds to wait for the supervisor to finish (default 30)")
    add_json(p)
    add_examples(
        p,
        "fleet stop parser",
        "fleet stop parser --wait 60 --json",
    )
    p.set_defaults(run=cmd_stop)

    p = sub.add_parser(
        "run",
        help="plan TASKS.toml and start every task as a worker (headless, or --adapter)",
        description=RUN_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("tasks", metavar="TASKS.toml")
    _adapter_option(p)
    p.add_argument("--max-parallel", type=positive_count, default=None, metavar="N",
                   help="at most N workers running at once (default 4)")
    p.add_argument("--repo", metavar="REPO", help="the repository (default: the file's, or .)")
    p.add_argument("--base", metavar="REF", help="where branches start (default: the file's)")
    p.add_argument("--endpoint", metavar="URL", help="run every task on this API endpoint")
    p.add_argument("--key-from", metavar="SRC", help=f"the endpoint's key: {KEY_SOURCE_HELP}")
    p.add_argument("--key-var", metavar="NAME", help="the variable that carries the key")
    p.add_argument("--permission-mode", metavar="MODE",
                   help="Claude permission mode, or Codex sandbox (default: settings "
                   "`permissions`, else bypassPermissions: the worktree is the cage)")
    p.add_argument("--effort", metavar="LEVEL", help="effort level (low, medium, high, ...)")
    _permission_options(p)
    _retry_options(p)
    add_json(p)
    add_examples(
        p,
        "fleet run tasks.toml --max-parallel 2",
        "fleet run tasks.toml --permission-mode dontAsk --allowed-tools 'Read,Edit,Bash(git:*)'",
        "fleet run tasks.toml --json",
        "fleet run tasks.toml --adapter herdr",
    )
    p.set_defaults(run=cmd_run)


def _adapter_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adapter", choices=["headless", "superset", "herdr"], default=None,
                   help="where the worker runs: headless (claude -p / codex exec under a "
                   "supervisor), or interactively in a Superset workspace or herdr pane "
                   "(default: settings `adapter`, else headless)")


#: Options only a headless run takes, with the value that means "not given".
_HEADLESS_ONLY: tuple[tuple[str, object], ...] = (
    ("endpoint", None), ("key_from", None), ("key_var", None), ("small_model", None),
    ("timeout", None), ("retries", None), ("backoff", None), ("allowed_tools", []),
    ("disallowed_tools", []), ("add_dir", []), ("insist", False), ("max_parallel", None),
    ("answer", None), ("answer_timeout", None),
)


def _adapter_of(args: argparse.Namespace) -> str:
    """The adapter the command line names, else the settings', else headless; an app refuses
    the options only a headless run takes, before anything is created."""
    from fleet._errors import SettingsError
    from fleet._settings import load_settings

    name: str = args.adapter or load_settings().adapter
    if name != "headless":
        for dest, unset in _HEADLESS_ONLY:
            if hasattr(args, dest) and getattr(args, dest) != unset:
                flag = "--" + dest.replace("_", "-")
                raise SettingsError(f"{flag} is for headless workers; not with --adapter {name}")
    return name


def _launch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", metavar="P",
                   help="the profile to run on (`fleet profiles` lists them)")
    p.add_argument("--endpoint", metavar="URL", help="an API endpoint (isolated config dir)")
    p.add_argument("--key-from", metavar="SRC", help=f"the endpoint's key: {KEY_SOURCE_HELP}")
    p.add_argument("--key-var", metavar="NAME",
                   help="the variable that carries the key (default ANTHROPIC_AUTH_TOKEN, "
                   "ANTHROPIC_API_KEY for anthropic.com; Codex: FLEET_ENDPOINT_API_KEY)")
    p.add_argument("--model", metavar="M", help="the model")
    p.add_argument("--small-model", metavar="M",
                   help="the small model: background calls, and the fallback after overload")
    p.add_argument("--tool", choices=["claude", "codex"], default="claude",
                   help="the agent CLI (default claude; a profile's own tool wins)")
    p.add_argument("--permission-mode", metavar="MODE",
                   help="Claude permission mode, or Codex sandbox (default: settings "
                   "`permissions`, else bypassPermissions: the worktree is the cage)")
    p.add_argument("--effort", metavar="LEVEL", help="effort level (low, medium, high, ...)")
    _permission_options(p)
    _retry_options(p)


def _permission_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allowed-tools", action="append", default=[], metavar="RULES",
                   help="tools the worker may use without asking, Claude Code's rules "
                   "(comma-separated or repeated: 'Read,Edit,Bash(git status:*)'); the "
                   "allowlist dontAsk needs")
    p.add_argument("--disallowed-tools", action="append", default=[], metavar="RULES",
                   help="tools the worker may never use (same form)")
    p.add_argument("--add-dir", action="append", default=[], metavar="DIR",
                   help="another directory the worker may work in (repeatable; Codex: a "
                   "writable root)")
    p.add_argument("--sandboxed", action="store_true",
                   help="this machine is a sandbox: set IS_SANDBOX=1 for the worker, which "
                   "Claude Code needs to run bypassPermissions as root (never set unless told)")
    p.add_argument("--insist", action="store_true",
                   help="start even in a mode that asks a person (default, acceptEdits, "
                   "plan), which a headless worker cannot answer")
    p.add_argument("--answer", choices=["coordinator"], default=None,
                   help="who answers the worker's permission requests: coordinator (fleet "
                   "answer, the MCP answer tool); lets a headless worker run in default or "
                   "acceptEdits mode")
    p.add_argument("--answer-timeout", type=seconds, metavar="S",
                   help="seconds a permission request waits for the coordinator before the "
                   "worker is denied (headless) or shown its dialog (default 300; at most 590)")


def _retry_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=seconds, metavar="S", help="wall-clock limit per worker run")
    # None, not the default value, means "not given": an app refuses any value of these
    p.add_argument("--retries", type=count, default=None, metavar="N",
                   help="retries after overload or a transient error (default 3)")
    p.add_argument("--backoff", type=seconds, default=None, metavar="S",
                   help="first backoff delay in seconds, doubled each retry (default 2)")


def _options(args: argparse.Namespace) -> HeadlessOptions:
    from fleet.adapters.headless import HeadlessOptions

    return HeadlessOptions(
        endpoint=args.endpoint,
        key_from=args.key_from,
        key_var=args.key_var,
        timeout=args.timeout,
        max_attempts=max(0, 3 if args.retries is None else args.retries) + 1,
        backoff_base=2.0 if args.backoff is None else args.backoff,
        env={**(_SANDBOX if args.sandboxed else {}), **_answer_env(args)},
    )


def _answer_env(args: argparse.Namespace) -> dict[str, str]:
    timeout = getattr(args, "answer_timeout", None)
    return {} if timeout is None else {"FLEET_ANSWER_TIMEOUT": f"{timeout:g}"}


#: What ``--sandboxed`` gives the worker: Claude Code runs bypassPermissions as root only with it.
_SANDBOX: Final = {"IS_SANDBOX": "1"}


def _tool_of(profile: str | None, tool: str) -> str:
    # The headless adapter's rule: a profile's own tool (its name's prefix) wins over --tool.
    return profile.split(":", 1)[0] if profile and ":" in profile else tool


def _cli_policy(args: argparse.Namespace, tool: str, *, either: bool = False) -> PermissionPolicy:
    """What the options say; ``--permission-mode`` is Codex's sandbox for a Codex worker, as
    the headless adapter reads it. ``either``: the task may go to either tool, so a mode of
    the other tool's kind is not this tool's."""
    from fleet._permissions import CLAUDE_MODES, CODEX_SANDBOXES, PermissionPolicy, split_rules

    mode = args.permission_mode
    codex = tool == "codex"
    if either and mode in (CLAUDE_MODES if codex else CODEX_SANDBOXES):
        mode = None
    return PermissionPolicy(
        mode=None if codex else mode,
        codex_sandbox=mode if codex else None,
        allowed_tools=split_rules(args.allowed_tools),
        disallowed_tools=split_rules(args.disallowed_tools),
        add_dirs=tuple(args.add_dir),
    )


def _check_policy(policy: PermissionPolicy, tool: str, *, args: argparse.Namespace,
                  where: str = "") -> list[str]:
    from fleet._errors import Refused
    from fleet._permissions import check_headless, is_root

    env = {**os.environ, **(_SANDBOX if args.sandboxed else {})}
    try:
        return [where + w for w in check_headless(policy, tool=tool, is_root=is_root(),
                                                  force=args.insist, env=env,
                                                  answerer=getattr(args, "answer", None))]
    except Refused as exc:
        raise Refused(where + str(exc)) from None


def _warn(warnings: list[str]) -> None:
    for warning in dict.fromkeys(warnings):
        sys.stderr.write(f"fleet: warning: {warning}\n")


def _unchosen_mode(policy: PermissionPolicy, tool: str,
                   coordinator: Callable[[], str | None]) -> tuple[PermissionPolicy, list[str]]:
    """A Claude worker whose mode nobody chose (options, settings, the task) gets the one its
    coordinator may start: dontAsk under an auto-mode coordinator, whose safety check refuses
    to spawn a bypassPermissions agent; said in a note. ``coordinator`` reads the mode of the
    Claude Code session fleet runs in, if any (asked once, and only when needed)."""
    import attrs

    from fleet._permissions import default_policy

    if tool != "claude" or policy.mode is not None:
        return policy, []
    chosen, message = default_policy(coordinator(), policy.allowed_tools)
    return attrs.evolve(policy, mode=chosen.mode), [message] if message else []


def _coordinator_once() -> Callable[[], str | None]:
    """The coordinator's mode, read from its transcript at the first ask and then kept."""
    import functools

    from fleet._permissions import coordinator_mode

    return functools.cache(lambda: coordinator_mode(os.environ))


def start_policy(args: argparse.Namespace) -> tuple[PermissionPolicy, list[str]]:
    """The policy of `fleet start`'s worker, checked; Refused before anything is created."""
    from fleet._permissions import policy_from_settings
    from fleet._settings import load_settings

    rules = load_settings().permission_rules
    tool = _tool_of(args.profile, args.tool)
    policy = policy_from_settings(rules, profile=args.profile, cli=_cli_policy(args, tool))
    policy, notes = _unchosen_mode(policy, tool, _coordinator_once())
    return policy, [*notes, *_check_policy(policy, tool, args=args)]


def run_policies(args: argparse.Namespace) -> tuple[dict[str, PermissionPolicy], list[str]]:
    """Each task's policy for `fleet run`, checked for every tool the task may be routed to;
    Refused (naming the task) before anything is created."""
    from fleet._errors import SettingsError
    from fleet._permissions import policy_from_settings
    from fleet._plan import load_task_file
    from fleet._settings import load_settings

    rules = load_settings().permission_rules
    task_file = load_task_file(Path(args.tasks))
    policies: dict[str, PermissionPolicy] = {}
    warnings: list[str] = []
    coordinator = _coordinator_once()
    for task in task_file.tasks:
        known = task.tool or (_tool_of(task.profile, "") if task.profile else None)
        for tool in (known,) if known else ("claude", "codex"):
            where = f"task {task.name!r} ({tool}): "
            try:
                policy = policy_from_settings(
                    rules, profile=task.profile, kind=task.kind,
                    task=task_file.permissions.get(task.name),
                    cli=_cli_policy(args, tool, either=not known))
            except SettingsError as exc:
                raise SettingsError(where + str(exc)) from None
            policy, notes = _unchosen_mode(policy, tool, coordinator)
            warnings += [where + note for note in notes]
            warnings += _check_policy(policy, tool, args=args, where=where)
            policies.setdefault(task.name, policy)
    return policies, warnings


def _line(state: WorkerState) -> str:
    pid = state.handle.get("supervisor_pid", "-")
    return (
        f"{state.worker}: {state.state}({state.reason})  branch {state.branch}  "
        f"worktree {state.worktree}  supervisor {pid}"
    )


def _app_line(state: WorkerState) -> str:
    handle = "  ".join(f"{k} {v}" for k, v in state.handle.items() if k != "worker")
    return (
        f"{state.worker}: {state.state}({state.reason})  {state.adapter} {handle}  "
        f"branch {state.branch}  worktree {state.worktree}"
    )


def _check_app_mode(mode: str | None) -> None:
    """An app's Claude worker takes a Claude permission mode (a person can answer prompts)."""
    from fleet._errors import SettingsError
    from fleet._permissions import CLAUDE_MODES

    if mode is not None and mode not in CLAUDE_MODES:
        raise SettingsError(
            f"--permission-mode {mode!r} is not a Claude permission mode: use one of "
            f"{', '.join(CLAUDE_MODES)}"
        )


def cmd_start_app(args: argparse.Namespace, name: str) -> int:
    from fleet._errors import SettingsError
    from fleet._orchestrate import app_adapter, start_app_worker

    if name == "superset" and not args.profile:
        raise SettingsError(
            "a Superset worker runs on a clausona profile through its agent config: give "
            "--profile P (see `fleet superset configs`)"
        )
    _check_app_mode(args.permission_mode)
    state = start_app_worker(
        app_adapter(name, home=args.home),
        args.worker,
        task=Path(args.task),
        repo=Path(args.repo),
        profile=args.profile,
        model=args.model,
        effort=args.effort,
        permission_mode=args.permission_mode,
        base=args.base,
        tool=args.tool,
        home=args.home,
    )
    if args.json:
        print_json(state)
    else:
        sys.stdout.write(_app_line(state) + "\n")
    return Exit.OK


def cmd_start(args: argparse.Namespace) -> int:
    from fleet import _health
    from fleet._orchestrate import start_worker

    simple = _health.simple_in_environment(os.environ)
    if simple:
        sys.stderr.write(f"fleet: warning: {simple}\n")
    name = _adapter_of(args)
    if name != "headless":
        return cmd_start_app(args, name)
    if args.profile:
        # An unknown profile is refused before anything is made, naming the known ones; the
        # worker then runs on the profile's full name (`work` -> `claude:work`).
        from fleet._profiles import require_profile

        args.profile = require_profile(args.profile).name
    # Checked before the adapter creates a worktree or a journal. Its warnings wait for the
    # adapter's own checks, so a failing start says one thing.
    policy, warnings = start_policy(args)
    opts = _options(args)
    state = start_worker(
        args.worker,
        task=Path(args.task),
        repo=Path(args.repo),
        profile=args.profile,
        model=args.model,
        small_model=args.small_model,
        tool=args.tool,
        permission_mode=args.permission_mode,
        policy=policy,
        effort=args.effort,
        base=args.base,
        home=args.home,
        options=opts,
    )
    _warn(warnings)
    if args.json:
        print_json(state)
    else:
        sys.stdout.write(_line(state) + "\n")
    return Exit.OK


def cmd_stop(args: argparse.Namespace) -> int:
    from fleet._orchestrate import stop_worker

    state = stop_worker(args.worker, home=args.home, timeout=args.wait)
    if args.json:
        print_json(state)
    else:
        sys.stdout.write(f"{state.worker}: {state.state}({state.reason})  mark {state.mark}\n")
    return Exit.OK


def cmd_run_app(args: argparse.Namespace, name: str) -> int:
    from fleet._orchestrate import app_adapter, run_app_tasks

    _check_app_mode(args.permission_mode)

    def announce(state: WorkerState) -> None:
        if not args.json:
            sys.stdout.write(_app_line(state) + "\n")
            sys.stdout.flush()

    result = run_app_tasks(
        app_adapter(name, home=args.home),
        Path(args.tasks),
        repo=args.repo,
        base=args.base,
        permission_mode=args.permission_mode,
        effort=args.effort,
        home=args.home,
        on_start=announce,
    )
    return _report_run(args, result, [])


def cmd_run(args: argparse.Namespace) -> int:
    from fleet._orchestrate import run_tasks

    name = _adapter_of(args)
    if name != "headless":
        return cmd_run_app(args, name)
    policies, policy_warnings = run_policies(args)
    opts = _options(args)

    def announce(state: WorkerState) -> None:
        if not args.json:
            sys.stdout.write(_line(state) + "\n")
            sys.stdout.flush()

    result = run_tasks(
        Path(args.tasks),
        repo=args.repo,
        base=args.base,
        max_parallel=args.max_parallel or 4,
        options=opts,
        permission_mode=args.permission_mode,
        policies=policies,
        effort=args.effort,
        home=args.home,
        on_start=announce,
    )
    return _report_run(args, result, policy_warnings)


def _report_run(args: argparse.Namespace, result: FanOutResult, policy_warnings: list[str]) -> int:
    warnings = [*dict.fromkeys(policy_warnings), *result.warnings]
    if args.json:
        print_json(
            {
                "started": list(result.started),
                "skipped": [{"task": t, "reason": r} for t, r in result.skipped],
                "warnings": warnings,
            }
        )
    else:
        for task, reason in result.skipped:
            sys.stdout.write(f"{task}: not started: {reason}\n")
        _warn(warnings)
    return Exit.REFUSED if result.skipped else Exit.OK
