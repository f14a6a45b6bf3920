"""hooks install|uninstall|status|command, trust, doctor."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import attrs

from fleet import _agents, _doctor, _health, _hook_command, _hook_install, _trust
from fleet._cli._common import Exit, add_examples, add_json, count, print_json, table, to_jsonable
from fleet._core.fold import Policy
from fleet._errors import FleetError, SettingsError
from fleet._fold_cache import open_folded
from fleet._home import hook_errors_path, resolve_home, workers_dir
from fleet._journal import list_workers

TARGETS_HELP = """\
targets (at least one; each may be repeated):
  --config-dir DIR   a Claude Code config dir (settings.json; CLAUDE_CONFIG_DIR, ~/.claude)
  --codex-home DIR   a Codex home (hooks.json and the trust entries in config.toml)
  --profile NAME     a profile of `fleet profiles` (tool:name, or a name unique across tools)
  --all-profiles     every profile `fleet profiles` lists
"""


def add_targets(p: argparse.ArgumentParser, *, many: bool = True) -> None:
    action = "append" if many else "store"
    p.add_argument("--config-dir", action=action, metavar="DIR", help="a Claude Code config dir")
    p.add_argument("--codex-home", action=action, metavar="DIR", help="a Codex home")
    p.add_argument("--profile", action=action, metavar="NAME",
                   help="a profile `fleet profiles` lists")
    if many:
        p.add_argument("--all-profiles", action="store_true", help="every profile")
        p.add_argument(
            "--claude-bin", metavar="PATH",
            help="the Claude Code binary whose release decides which hook events are "
            "installed (default: $FLEET_CLAUDE, else claude on PATH; 'none' asks none, and "
            "then only the events every release has are installed)",
        )
        p.add_argument(
            "--codex-bin", metavar="PATH",
            help="the Codex binary to ask whether it trusts fleet's hook (default: "
            "$FLEET_CODEX, else codex on PATH; 'none' asks no Codex, and then fleet's copy "
            "of Codex's hash recipe decides)",
        )


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hooks = sub.add_parser(
        "hooks",
        help="install fleet's hook into Claude Code and Codex, or check it",
        description="fleet's hook records every hook event of a worker's agent session in the "
        "worker's journal. Install it once per Claude Code config dir, Codex home or profile "
        "(`fleet profiles`); sessions that are not fleet workers are left alone (the hook "
        "writes nothing for them).",
        epilog=TARGETS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    hsub = hooks.add_subparsers(dest="hooks_command", metavar="ACTION", title="actions")
    hooks.set_defaults(run=lambda args: _help(hooks))

    p = hsub.add_parser(
        "install",
        help="merge fleet's hook into settings.json / hooks.json",
        description="Merge fleet's hook into each target. Other hooks and keys are kept, "
        "running it again changes nothing, a malformed file is refused and left untouched, "
        "and the old file is kept as <file>.fleet-backup. For Codex it also writes the trust "
        "entries config.toml needs for the hook to run. A named config dir must exist "
        "(--create makes it).\n\n"
        "The installed command runs a launcher in the fleet home (bin/fleet-hook) that names "
        "this fleet's interpreter and hook program. With no target, it repoints every config "
        "dir that has fleet's hook (the default ones and every profile's) at this fleet: run "
        "it after moving or reinstalling fleet. A launcher whose fleet is gone exits 0 "
        "silently (the agent goes on); `fleet doctor` and `fleet hooks status` say so.",
        epilog=TARGETS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_targets(p)
    add_create(p)
    add_json(p)
    add_examples(
        p,
        "fleet hooks install --all-profiles",
        "fleet hooks install --config-dir ~/.claude --codex-home ~/.codex",
        "fleet hooks install                # after moving fleet: repoint every one",
    )
    p.set_defaults(run=cmd_install)

    p = hsub.add_parser(
        "uninstall",
        help="remove fleet's hook entries (only fleet's)",
        description="Remove fleet's hook entries (and their Codex trust entries) from each "
        "target, leaving everything else as it was.",
        epilog=TARGETS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_targets(p)
    add_json(p)
    add_examples(
        p,
        "fleet hooks uninstall --profile claude:work",
    )
    p.set_defaults(run=cmd_uninstall)

    p = hsub.add_parser(
        "status",
        help="is fleet's hook installed, and will it run?",
        description="For each target: the events fleet's hook is installed for, whether the "
        "installed command is the current one, and whether it will run (its interpreter and "
        "program exist; for Codex, a trust entry with a matching hash). With no target: the "
        "default Claude Code config dir ($CLAUDE_CONFIG_DIR, else ~/.claude) and Codex home "
        "($CODEX_HOME, else ~/.codex), those that exist. Exits 0 when every hook will run, 1 "
        "when one would not or there is nothing to check.",
        epilog=TARGETS_HELP.replace("at least one; each", "none: the defaults; each"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_targets(p)
    add_json(p)
    add_examples(
        p,
        "fleet hooks status                       # ~/.claude and ~/.codex",
        "fleet hooks status --all-profiles --json",
    )
    p.set_defaults(run=cmd_status)

    p = hsub.add_parser(
        "command",
        help="print the exact hook command that gets installed",
        description="Print the command line `fleet hooks install` writes for TOOL: /bin/sh "
        "running the launcher in the fleet home (bin/fleet-hook, written by `fleet hooks "
        "install`) with the tool and the fleet home; the launcher runs this fleet's "
        "interpreter with -I -S on the hook program (`argv` in --json). $FLEET_HOME in the "
        "agent's environment overrides the home baked in.",
    )
    p.add_argument("--tool", choices=_agents.TOOLS, required=True)
    add_json(p)
    add_examples(
        p,
        "fleet hooks command --tool codex",
    )
    p.set_defaults(run=cmd_command)

    p = sub.add_parser(
        "trust",
        help="pre-answer an agent's folder-trust prompt for a worktree",
        description="Mark PATH trusted for the target (Claude Code: .claude.json "
        "projects[PATH].hasTrustDialogAccepted; Codex: config.toml [projects.\"PATH\"] "
        "trust_level), then read it back, writing again if a starting agent rewrote the "
        "file. With --check, only report: exit 0 when trusted, 4 when not.",
        epilog=TARGETS_HELP.replace(
            "  --all-profiles     every profile `fleet profiles` lists\n", ""
        ).replace("at least one; each may be repeated", "exactly one"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_targets(p, many=False)
    add_create(p)
    p.add_argument("--path", required=True, metavar="WORKTREE", help="the folder to trust")
    p.add_argument("--check", action="store_true", help="only verify; exit 4 if not trusted")
    add_json(p)
    add_examples(
        p,
        "fleet trust --profile claude:work --path ../repo.fleet/parser",
        "fleet trust --codex-home ~/.codex --path ../repo.fleet/docs --check",
    )
    p.set_defaults(run=cmd_trust)

    p = sub.add_parser(
        "doctor",
        help="check the set-up (agents, hooks, profiles) and the journals; say what to do",
        description="Check what fleet depends on: the agent CLIs it finds (claude, codex) "
        "and their releases; fleet's hook in each config dir (the targets named, else the "
        "default ones that exist and every profile's), and whether it will run (a fleet that "
        "was moved or removed is named); failures the hook recorded in hook-errors.log, "
        "events that could not be journaled (per worker) and a home that cannot be written or "
        "is full, journal lines that do not decode (per worker); the home's modes and the "
        "`fleet` on PATH. Each finding says what to do. Exits 1 when something is wrong "
        "(warnings do not count).",
        epilog=TARGETS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_targets(p)
    p.add_argument("--errors", type=count, default=5, metavar="N",
                   help="show the last N hook errors (default 5)")
    p.add_argument("--clear-errors", action="store_true",
                   help="after reporting them, move the hook errors aside (to "
                   "hook-errors.log.old) and forget lost events, so the next run reports "
                   "only new ones")
    add_json(p)
    add_examples(
        p,
        "fleet doctor",
        "fleet doctor --all-profiles --clear-errors",
    )
    p.set_defaults(run=cmd_doctor)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return Exit.USAGE


# -- targets -----------------------------------------------------------------------------------


def add_create(p: argparse.ArgumentParser) -> None:
    p.add_argument("--create", action="store_true",
                   help="make a --config-dir / --codex-home that does not exist yet (else "
                   "refused: most often a typo)")


def resolve_targets(
    args: argparse.Namespace, *, required: bool = True, writes: bool = False
) -> list[_hook_install.Target]:
    """The targets named; with ``writes``, a --config-dir or --codex-home that does not exist
    is refused (or made, with --create) before anything is written."""
    def many(value: Any) -> list[str]:
        if value is None:
            return []
        return list(value) if isinstance(value, list) else [value]

    targets = [_hook_install.claude_target(d) for d in many(args.config_dir)]
    targets += [_hook_install.codex_target(d) for d in many(args.codex_home)]
    if writes:
        # Every named dir is checked before any is made or written to.
        create = bool(getattr(args, "create", False))
        for target in targets:
            if not create or target.config_dir.exists():
                _hook_install.require_dir(target)
        for target in targets:
            _hook_install.require_dir(target, create=create)
    names = many(args.profile)
    if names or getattr(args, "all_profiles", False):
        from fleet._profiles import find_profile, load_profiles

        profiles = load_profiles()
        chosen = profiles if getattr(args, "all_profiles", False) else [
            find_profile(n, profiles) for n in names
        ]
        for profile in chosen:
            if profile.tool == "claude":
                targets.append(_hook_install.claude_target(profile.config_dir, profile.name))
            elif profile.tool == "codex":
                targets.append(_hook_install.codex_target(profile.config_dir, profile.name))
    if required and not targets:
        raise SettingsError(
            "name a target: --config-dir DIR, --codex-home DIR, --profile NAME or --all-profiles"
        )
    return _unique(targets)


# -- commands ----------------------------------------------------------------------------------


def _codex_bin(args: argparse.Namespace, targets: list[_hook_install.Target]) -> str | None:
    if not any(t.tool == "codex" for t in targets):
        return None
    return _agents.find_codex(getattr(args, "codex_bin", None))


def _with_claude_version(
    args: argparse.Namespace, targets: list[_hook_install.Target]
) -> list[_hook_install.Target]:
    """The targets, Claude Code ones knowing the release that will run there."""
    if not any(t.tool == "claude" for t in targets):
        return targets
    claude = _agents.find_claude(getattr(args, "claude_bin", None))
    version = _agents.claude_version(claude) if claude else None
    return [attrs.evolve(t, claude_version=version) if t.tool == "claude" else t
            for t in targets]


def installed_targets() -> list[_hook_install.Target]:
    """Every config dir fleet's hook is installed in, among the default ones and every
    profile's: what `fleet hooks install` with no target repoints."""
    return [t for t in setup_targets()
            if next(_hook_install.iter_fleet_commands(t), None) is not None]


def cmd_install(args: argparse.Namespace) -> int:
    targets = resolve_targets(args, writes=True, required=False)
    if not targets:
        # No target: repoint every config dir that has fleet's hook at this fleet (after fleet
        # was moved or reinstalled), in one command.
        targets = installed_targets()
        if not targets:
            raise SettingsError(
                "fleet's hook is installed nowhere yet: name a target: --config-dir DIR, "
                "--codex-home DIR, --profile NAME or --all-profiles"
            )
    targets = _with_claude_version(args, targets)
    codex = _codex_bin(args, targets)
    repointed = _hook_command.write_launcher(args.home)
    changes = [_hook_install.install(t, home=args.home, codex=codex) for t in targets]
    if repointed and not args.json:
        print(f"hook launcher {_hook_command.launcher_path(args.home)} now runs this fleet "
              f"({_hook_command.hook_python()})")
    return _print_changes(args, changes, "installed")


def cmd_uninstall(args: argparse.Namespace) -> int:
    changes = [_hook_install.uninstall(t) for t in resolve_targets(args)]
    return _print_changes(args, changes, "removed")


def _print_changes(args: argparse.Namespace, changes: list[_hook_install.Change], verb: str) -> int:
    if args.json:
        print_json(changes)
        return Exit.OK
    for c in changes:
        if not c.changed:
            print(f"{c.target}: unchanged ({c.file})")
            continue
        what = f"{len(c.events)} events" if verb == "installed" else f"{c.removed} entries"
        print(f"{c.target}: {verb} {what}; wrote {', '.join(c.files_written)}")
        if c.backups:
            print(f"  backup: {', '.join(c.backups)}")
    for c in changes:
        check = c.codex_check
        if check is None:
            continue
        if check.error:
            print(f"{c.target}: could not ask Codex ({check.error})")
        elif check.repaired:
            print(f"{c.target}: Codex reported other trust hashes for {len(check.repaired)} "
                  "entries; wrote them")
        if check.error is None:
            verdict = "trusts every entry" if check.ok else "does NOT trust every entry"
            print(f"{c.target}: Codex ({check.codex}) {verdict}")
    return Exit.OK


def default_targets() -> list[_hook_install.Target]:
    """The config dirs an agent uses when told none: $CLAUDE_CONFIG_DIR or ~/.claude,
    $CODEX_HOME or ~/.codex; those that exist."""
    from fleet._profiles import coordinator_dir

    targets = []
    claude, codex = coordinator_dir("claude"), coordinator_dir("codex")
    if claude.is_dir():
        targets.append(_hook_install.claude_target(claude))
    if codex.is_dir():
        targets.append(_hook_install.codex_target(codex))
    return targets


def cmd_status(args: argparse.Namespace) -> int:
    targets = resolve_targets(args, required=False)
    if not targets:
        from fleet._profiles import coordinator_dir

        targets = default_targets()
        if not targets:
            raise SettingsError(
                f"no Claude Code config dir ({coordinator_dir('claude')}) or Codex home "
                f"({coordinator_dir('codex')}) here: name a target with --config-dir DIR, "
                "--codex-home DIR, --profile NAME or --all-profiles"
            )
    targets = _with_claude_version(args, targets)
    codex = _codex_bin(args, targets)
    statuses = [_hook_install.status(t, home=args.home, codex=codex) for t in targets]
    if args.json:
        print_json(statuses)
    else:
        rows = []
        for s in statuses:
            installed = f"{len(s.installed)}/{len(s.installed) + len(s.missing)}"
            judge = "-" if s.tool != "codex" else (
                "codex" if s.codex_check and s.codex_check.error is None else "recipe"
            )
            rows.append([s.target, s.tool, installed, "yes" if s.will_run else "NO",
                         "yes" if s.current else "no", judge])
        print(table(rows, ["target", "tool", "events", "will run", "current", "trust by"]))
        for s in statuses:
            for problem in s.problems:
                print(f"  {s.target}: {problem}")
    return Exit.OK if all(s.will_run for s in statuses) else Exit.ERROR


def cmd_command(args: argparse.Namespace) -> int:
    argv = _hook_command.hook_argv(args.tool, home=args.home)
    command = _hook_command.hook_command(args.tool, home=args.home)
    if args.json:
        print_json({"tool": args.tool, "command": command, "argv": argv,
                    "launcher": str(_hook_command.launcher_path(args.home))})
    else:
        print(command)
    return Exit.OK


def cmd_trust(args: argparse.Namespace) -> int:
    targets = resolve_targets(args)
    if len(targets) != 1:
        raise SettingsError("name exactly one of --config-dir, --codex-home or --profile")
    target = targets[0]
    if not args.check and not Path(args.path).is_dir():
        # A typo would otherwise leave a trust entry for a folder no agent will run in.
        raise SettingsError(f"{args.path} is not a directory; nothing was trusted")
    if not args.check and (args.config_dir or args.codex_home):
        _hook_install.require_dir(target, create=args.create)
    check = _trust.check if args.check else _trust.trust
    result = check(target, args.path)
    if args.json:
        print_json(result)
    else:
        state = "trusted" if result.trusted else "NOT trusted"
        print(f"{result.path}: {state} for {result.target} ({result.file})")
    return Exit.OK if result.trusted else Exit.REFUSED


@attrs.frozen(kw_only=True)
class Report:
    ok: bool
    home: str
    hook_program: str | None
    interpreter: str
    problems: tuple[str, ...]
    hook_errors: int
    last_hook_errors: tuple[str, ...]
    unreadable: dict[str, int]
    #: hook lines per worker with a field the fold reads holding a value of another type
    malformed: dict[str, int] = attrs.field(factory=dict)
    hooks: tuple[_hook_install.Status, ...] = ()
    #: Events the hook (or a supervisor) could not journal: how many hook-errors.log records,
    #: and when each worker last lost one (its marker).
    lost_events: int = 0
    events_lost_at: dict[str, float] = attrs.field(factory=dict)
    #: The set-up's findings (serious ones are in ``problems`` too), each with what to do.
    findings: tuple[_doctor.Finding, ...] = ()
    agents: tuple[_doctor.Agent, ...] = ()


def setup_targets() -> list[_hook_install.Target]:
    """What `fleet doctor` checks with no target named: the default config dirs that exist and
    every profile's."""
    from fleet._profiles import load_profiles

    found = default_targets()
    with contextlib.suppress(FleetError):
        for profile in load_profiles():
            if profile.tool == "claude":
                found.append(_hook_install.claude_target(profile.config_dir, profile.name))
            elif profile.tool == "codex":
                found.append(_hook_install.codex_target(profile.config_dir, profile.name))
    return _unique(found)


def _unique(targets: list[_hook_install.Target]) -> list[_hook_install.Target]:
    """``targets`` without repeats: one per tool and config dir, however it was spelled."""
    seen: set[tuple[str, str]] = set()
    unique = []
    for t in targets:
        key = (t.tool, os.path.realpath(t.config_dir))
        if key not in seen:
            seen.add(key)
            unique.append(t)
    return unique


def doctor(
    home: Path, targets: list[_hook_install.Target], *, last: int = 5, codex_bin: str | None = None,
    setup: bool = False,
) -> Report:
    """The report of `fleet doctor`: the journals and the hook program, and with ``setup``,
    the set-up too (the agents, the hook of each of ``targets``, the launcher, the home's
    modes, the `fleet` on PATH)."""
    problems: list[str] = []
    try:
        script: str | None = str(_hook_command.hook_script_path())
    except SettingsError as exc:
        script = None
        problems.append(str(exc))
    interpreter = _hook_command.hook_python()
    if not os.access(interpreter, os.X_OK):
        problems.append(f"the interpreter {interpreter} is not executable")
    errors = _read_hook_errors(hook_errors_path(home))
    if errors:
        problems.append(f"the hook recorded {len(errors)} failures in {hook_errors_path(home)}")
    lost = sum(_health.LOST_PREFIX in line for line in errors)
    if lost:
        problems.append(f"{lost} hook events were not recorded: a journal could not be written")
    problems.extend(_health.home_problems(home))
    simple = _health.simple_in_environment(os.environ)
    if simple:
        problems.append(simple)
    problems.extend(_odd_journals(home))
    from fleet._forget import late_events

    problems.extend(
        f"worker {late.worker} was forgotten, but {late.count} events came for it afterwards "
        f"(a session still runs with FLEET_WORKER={late.worker}); they are kept in "
        f"{late.archive}, not in a new worker" for late in late_events(home))
    unreadable: dict[str, int] = {}
    malformed: dict[str, int] = {}
    lost_at: dict[str, float] = {}
    for worker in list_workers(home):
        # One fold per journal gives the lines it could not use (unreadable: they do not
        # decode; malformed: a field of a type it cannot read; both kept) and the state.
        folded = open_folded(home, worker)
        count, odd = folded.acc.unreadable, folded.acc.malformed
        if count:
            unreadable[worker] = count
            problems.append(f"worker {worker}: {count} unreadable journal lines")
        if odd:
            malformed[worker] = odd
            problems.append(f"worker {worker}: {odd} journal lines with a field of a type "
                            "fleet cannot read (kept; the field is ignored)")
        silent = _health.hooks_not_running(folded.state(time.time(), Policy()))
        if silent:
            problems.append(f"worker {silent}")
        when = _health.events_lost_at(home, worker)
        if when is not None:
            lost_at[worker] = when
            problems.append(f"worker {worker}: events were lost, the last at {_when(when)}")
    codex = _agents.find_codex(codex_bin) if any(t.tool == "codex" for t in targets) else None
    targets = _with_claude_version(argparse.Namespace(claude_bin=None), targets)
    statuses = tuple(_hook_install.status(t, home=home, codex=codex) for t in targets)
    findings = _doctor.hook_findings(targets, statuses)
    agents: tuple[_doctor.Agent, ...] = ()
    if setup:
        agents = _doctor.find_agents()
        findings = [*_doctor.agent_findings(agents), *findings]
        if not targets:
            findings.append(_doctor.nothing_set_up())
        findings += _doctor.launcher_findings(home)
        findings += _doctor.mode_findings(home)
        findings += _doctor.path_findings()
    problems.extend(f.problem for f in findings if f.serious)
    return Report(
        findings=tuple(findings),
        agents=agents,
        ok=not problems,
        home=str(home),
        hook_program=script,
        interpreter=interpreter,
        problems=tuple(problems),
        hook_errors=len(errors),
        last_hook_errors=tuple(errors[-last:]) if last > 0 else (),
        unreadable=unreadable,
        malformed=malformed,
        hooks=statuses,
        lost_events=lost,
        events_lost_at=lost_at,
    )


def _when(ts: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _odd_journals(home: Path) -> list[str]:
    """Worker directories whose journal is something other than a file (nothing can be
    journaled there, and the worker is not listed anywhere else)."""
    out = []
    with contextlib.suppress(OSError):
        for entry in sorted(os.scandir(workers_dir(home)), key=lambda e: e.name):
            path = Path(entry.path) / "journal.jsonl"
            if entry.is_dir() and (path.is_symlink() or path.exists()) and not path.is_file():
                out.append(f"{path} is not a regular file: nothing can be journaled there")
    return out


def _read_hook_errors(path: Path) -> list[str]:
    from fleet._files import read_input

    try:
        data = read_input(path, "hook error log", limit=64 << 20, missing_ok=True)
    except SettingsError as exc:
        return [str(exc)]
    if data is None:
        return []
    return [ln.decode("utf-8", "replace") for ln in data.splitlines() if ln.strip()]


def cmd_doctor(args: argparse.Namespace) -> int:
    home = resolve_home(args.home)
    named = resolve_targets(args, required=False)
    report = doctor(
        home, named or setup_targets(), last=args.errors, codex_bin=args.codex_bin, setup=True
    )
    if args.json:
        print_json(to_jsonable(report))
    else:
        print(f"fleet home: {report.home}")
        program = report.hook_program or "MISSING"
        print(f"hook program: {program} (interpreter {report.interpreter})")
        for agent in report.agents:
            where = (f"{agent.path} ({agent.version or 'release unknown'})" if agent.path
                     else "not found")
            print(f"{agent.tool}: {where}")
        for hook_status in report.hooks:
            print(f"hook in {hook_status.target}: "
                  f"{'will run' if hook_status.will_run else 'will NOT run'}")
        if report.ok:
            print("ok: the set-up is complete, no hook failures, every journal line readable"
                  " and usable")
        fixes = {f.problem: f for f in report.findings}
        for problem in report.problems:
            print(f"problem: {problem}")
            if problem in fixes:
                print(f"  do: {fixes[problem].fix}")
        for finding in report.findings:
            if not finding.serious:
                print(f"warning: {finding.problem}\n  do: {finding.fix}")
        for line in report.last_hook_errors:
            print(f"  {line}")
    sys.stdout.flush()
    if args.clear_errors and report.hook_errors:
        log = hook_errors_path(home)
        log.replace(log.with_name(log.name + ".old"))
        if not args.json:
            print(f"moved the hook errors to {log.name}.old")
    if args.clear_errors and report.events_lost_at:
        _health.clear_lost(home)
    return Exit.OK if report.ok else Exit.ERROR
