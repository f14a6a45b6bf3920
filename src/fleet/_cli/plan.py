"""profiles, settings, plan."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from fleet import _profile_store, _settings
from fleet._cli._common import Exit, add_examples, add_json, print_json, table
from fleet._core.routing import (
    DEFAULT_STALE_AFTER,
    Choices,
    Plan,
    Profile,
    QuotaWindow,
    Settings,
    assess,
    format_duration,
    limit_problem,
)
from fleet._errors import SettingsError
from fleet._keys import KEY_SOURCE_HELP
from fleet._plan import load_task_file, plan_json, plan_tasks
from fleet._profiles import coordinator_profile, detect_coordinator_tool, load_profiles
from fleet._quota import SOURCES_HELP, limit_json, quota_source

PROFILES_HELP = """\
Profiles are fleet's own (`fleet profiles add`, kept in the settings' `profiles` key: plain
Claude Code config dirs and Codex homes) and, when clausona is installed, clausona's: from
`clausona list --json` ($FLEET_CLAUSONA names the binary), or from a file holding that output
(--profiles FILE or $FLEET_PROFILES). clausona is optional. Quota comes from clausona's
reading where it has one; else from the last usage limit a worker on the profile hit (fleet's
journals), until its reset time (5 hours after it was hit when the agent did not say); else
it is unknown, and the profile is used as if it had room."""

SETTINGS_HELP = """\
Settings live in ~/.clausona/fleet.json (or --settings FILE, or $FLEET_SETTINGS). When only
the older ~/.clausona/superset-fleet.json exists it is read, and the first change copies it to
fleet.json. Keys:
  workers      the only profiles that may be workers, e.g. ["claude:work","claude:glm"]
               (`set workers claude:work,claude:glm` also works)
  routing      your rules in words, shown beside every plan, e.g. "claude:glm never edits src/"
  maxUsage     skip profiles whose 5H or 7D usage is at or over this percent (default 90)
  retire       ask (default) or auto
  adapter      where `fleet start`/`fleet run` start workers without --adapter: headless
               (default), superset or herdr
  permissions  {"claude": "acceptEdits", "codex": "on-request", "codexSandbox": "workspace-write"}
               claude: default, acceptEdits, plan, auto, dontAsk, bypassPermissions
               codex: untrusted, on-failure, on-request, never
               codexSandbox: read-only, workspace-write, danger-full-access
  hub          where `fleet ship` and `--hub` connect: hub.url, hub.user, ... (see `ship --help`)
`set` refuses any other key and any value these keys do not take (exit 2), and then writes
nothing. A change keeps every other key already in the file, unknown ones too; a file that is
not a JSON object is refused and left untouched."""

PLAN_DESCRIPTION = """\
Decide which profile runs each task of TASKS.toml, and say why. Nothing is started.

Rules, in order: what you said (a task's `profile`, --assign, or --use / `use`, which replaces
settings `workers` for this plan); then the settings (`workers` is the only pool; `routing`
rules are printed beside the plan for the coordinator to apply); then the defaults: never the
coordinator's own profile; skip quota state not ok, or 5H/7D usage at or over maxUsage (a scoped
limit skips only that model there); same tool as the coordinator unless a profile is named;
wide-mechanical work to API profiles, exploratory work to subscriptions; fewest workers first,
then most headroom; a checker on a third profile (neither its worker's nor the coordinator's).
A named profile the defaults would skip is used, with a warning saying what it risks. A task no
profile can take is shown as such, never guessed.

When neither the request nor the settings named a profile, the plan is fleet's own choice
and says to ask the person you work for before starting it (`needsOk` in --json); `fleet
run` itself does not ask. Exit 0 when every task has a profile, 4 when some task has none (the
plan is still printed; `fleet run` would leave those tasks unstarted).

TASKS.toml:
  repo = "."                  # optional, used by `fleet run`
  base = "main"               # optional, used by `fleet run`
  use = ["claude:work"]       # optional: the profiles named for this request
  start = false               # optional: true = start without asking

  [[task]]
  name = "paths"              # worker id: lowercase letters, digits, . _ -
  brief = "briefs/paths.md"   # brief file, relative to TASKS.toml
  tool = "claude"             # optional: claude | codex
  profile = "claude:work"     # optional: your choice for this task
  model = "sonnet"            # optional
  kind = "wide-mechanical"    # optional: default | wide-mechanical | exploratory
  checker_of = "other"        # optional: this task checks that one

examples:
  fleet plan tasks.toml                          # a table, then whether to ask first
  fleet plan tasks.toml --json                   # rows with profile, model, configDir, launch
  fleet plan tasks.toml --assign docs=claude:glm --use claude:work --use claude:glm

"""


def _add_sources(p: argparse.ArgumentParser, *, settings: bool = True) -> None:
    p.add_argument(
        "--profiles", metavar="FILE", help="read profiles from FILE (clausona list --json output)"
    )
    if settings:
        p.add_argument("--settings", metavar="FILE", help="settings file (default: see `settings`)")
    p.add_argument(
        "--coordinator-tool",
        choices=["claude", "codex"],
        help="the tool the coordinator runs in (default: guessed from the environment); its "
        "profile is the one whose configDir is $CLAUDE_CONFIG_DIR or ~/.claude, "
        "$CODEX_HOME or ~/.codex",
    )


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "profiles",
        help="list profiles (quota, whether each may be a worker now), or add / remove one",
        description="One row per profile: tool, kind (subscription or api), model, "
        "5H / 7D / scoped usage, headroom, quota state (and how old the reading is), and "
        "whether it may be a worker now, or why not; --json says where each quota comes "
        "from (quotaSource: clausona, journal, unknown, none) and the last limit seen "
        "(limit).\n\n" + PROFILES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_sources(p)
    add_json(p)
    add_examples(
        p,
        "fleet profiles",
        "fleet profiles add work --config-dir ~/.claude-work",
        "fleet profiles --profiles clausona-list.json --json",
    )
    p.set_defaults(run=cmd_profiles)
    psub = p.add_subparsers(dest="profiles_command", metavar="ACTION", title="actions")
    a = psub.add_parser(
        "add", help="add (or replace) a profile of fleet's own: a plain config dir",
        description="Add NAME as a profile fleet runs workers on without clausona: a Claude "
        "Code config dir (CLAUDE_CONFIG_DIR) or a Codex home (CODEX_HOME), with an optional "
        "model, or a Claude API endpoint and where its key comes from. NAME is tool:name or a "
        "name (--tool says the tool, default claude). It is kept in the settings' `profiles` "
        "key; a profile of that name is replaced. Workers on it start through "
        "fleet-profile-run, which sets the config dir, model and endpoint. A config dir that "
        "does not exist yet is fine: log in there once (`CLAUDE_CONFIG_DIR=DIR claude`, "
        "`CODEX_HOME=DIR codex login`).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    a.add_argument("name", metavar="NAME")
    a.add_argument("--config-dir", required=True, metavar="DIR",
                   help="the Claude Code config dir or Codex home")
    a.add_argument("--tool", choices=["claude", "codex"],
                   help="the tool, when NAME has no claude: or codex: prefix (default claude)")
    a.add_argument("--model", metavar="M", help="the model workers on it use")
    a.add_argument("--endpoint", metavar="URL",
                   help="a Claude API endpoint (ANTHROPIC_BASE_URL); needs --key-from")
    a.add_argument("--key-from", metavar="SRC", help=f"the endpoint's key: {KEY_SOURCE_HELP}")
    a.add_argument("--settings", metavar="FILE", default=argparse.SUPPRESS,
                   help="settings file to use instead")
    add_json(a)
    add_examples(
        a,
        "fleet profiles add work --config-dir ~/.claude-work",
        "fleet profiles add codex:side --config-dir ~/.codex-side --model gpt-5-codex",
        "fleet profiles add glm --config-dir ~/.claude-glm --endpoint "
        "https://api.example/anthropic --key-from env:GLM_KEY --model glm-5",
    )
    a.set_defaults(run=cmd_profiles_add)
    r = psub.add_parser(
        "remove", help="remove a profile of fleet's own",
        description="Remove NAME (tool:name, or a name unique among fleet's own profiles) "
        "from the settings' `profiles` key. clausona's profiles are clausona's to remove.",
    )
    r.add_argument("name", metavar="NAME")
    r.add_argument("--settings", metavar="FILE", default=argparse.SUPPRESS,
                   help="settings file to use instead")
    add_json(r)
    add_examples(r, "fleet profiles remove work")
    r.set_defaults(run=cmd_profiles_remove)

    p = sub.add_parser(
        "settings",
        help="read or change fleet's settings (workers, routing, maxUsage, retire, permissions)",
        description=SETTINGS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--settings", metavar="FILE", help="settings file to use instead")
    add_json(p)
    add_examples(p, "fleet settings                    # every key set, or where they would go",
                 "fleet settings get retire", "fleet settings set retire auto")
    # `fleet settings` alone shows them all, as `fleet settings get` does.
    p.set_defaults(run=cmd_settings_get, key=None)
    ssub = p.add_subparsers(dest="settings_command", metavar="ACTION")
    g = ssub.add_parser(
        "get", help="print one key (or every key)",
        description="Print KEY's value (NAME or NAME.SUBKEY, e.g. permissions.claude), or the "
        "whole file without KEY (as `fleet settings` alone does). Text prints as is, anything "
        "else as JSON. A key that is not set says so and its default on stderr and exits 1; "
        "a key fleet does not know is a usage error (exit 2) naming the closest known one.",
    )
    g.add_argument("key", nargs="?", metavar="KEY")
    add_json(g)
    add_examples(
        g,
        "fleet settings get",
        "fleet settings get permissions.claude",
    )
    g.set_defaults(run=cmd_settings_get)
    s = ssub.add_parser(
        "set", help="change one key, keeping every other",
        description="Set KEY to VALUE. VALUE is read as JSON when it parses (80, true, "
        '["claude:work"]), else as text. An unknown KEY or a VALUE the key does not take is '
        "refused with the known keys or the allowed values (exit 2), and nothing is written.",
    )
    s.add_argument("key", metavar="KEY")
    s.add_argument("value", metavar="VALUE")
    add_json(s)
    add_examples(
        s,
        "fleet settings set workers claude:work,claude:glm",
        "fleet settings set maxUsage 80",
        "fleet settings set permissions.codex on-request",
    )
    s.set_defaults(run=cmd_settings_set)
    u = ssub.add_parser(
        "unset", help="remove one key, keeping every other",
        description="Remove KEY (NAME or NAME.SUBKEY), keeping every other key. A key that is "
        "not set is reported as such and the file is left as it is.",
        epilog="example:\n  fleet settings unset permissions.codex",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    u.add_argument("key", metavar="KEY")
    add_json(u)
    u.set_defaults(run=cmd_settings_unset)
    w = ssub.add_parser(
        "path", help="print the file settings are read from and written to",
        description="Print the settings file changes are written to, and the older file they "
        "are read from until the first change, if that is another one.",
    )
    add_json(w)
    add_examples(
        w,
        "fleet settings path --json",
    )
    w.set_defaults(run=cmd_settings_path)
    for action in (g, s, u, w):
        # Accepted after the action too; SUPPRESS keeps a value given before it.
        action.add_argument(
            "--settings", metavar="FILE", default=argparse.SUPPRESS,
            help="settings file to use instead",
        )

    p = sub.add_parser(
        "plan",
        help="route the tasks of a TASKS.toml to profiles, explaining each choice",
        description=PLAN_DESCRIPTION + PROFILES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("tasks", metavar="TASKS.toml")
    _add_sources(p)
    p.add_argument(
        "--use", action="append", default=[], metavar="PROFILE",
        help="only these profiles (repeatable); replaces settings workers and the file's `use`",
    )
    p.add_argument(
        "--assign", action="append", default=[], metavar="TASK=PROFILE",
        help="run TASK on PROFILE, whatever the defaults say (repeatable)",
    )
    p.add_argument("--start", action="store_true", help="the user said to start without asking")
    add_json(p)
    p.set_defaults(run=cmd_plan)


# --------------------------------------------------------------------------------------------
# profiles


def _pct(w: QuotaWindow | None) -> str:
    return "-" if w is None else f"{w.used_percent:.0f}%"


def _window_json(w: QuotaWindow | None) -> dict[str, Any] | None:
    if w is None:
        return None
    out: dict[str, Any] = {"usedPercent": w.used_percent, "resetsAt": w.resets_at}
    if w.label:
        out["label"] = w.label
    return out


def profile_json(
    p: Profile, *, settings: Settings, coordinator: Profile | None, now: float,
    own: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    a = assess(p, settings=settings, coordinator=coordinator, now=now)
    unknown = _profile_store.quota_unknown(p)
    q = None if unknown else p.quota
    return {
        "name": p.name,
        "source": "fleet" if unknown or p.name in own else "clausona",
        "tool": p.tool,
        "kind": p.kind,
        "model": p.model,
        "label": p.label,
        "configDir": str(p.config_dir),
        "isActive": p.is_active,
        "coordinator": coordinator is not None and p.name == coordinator.name,
        "headroom": None if unknown else p.headroom,
        # Where the quota below comes from: clausona, journal (a limit a worker hit, not yet
        # reset), unknown, or none (an API profile has no plan quota).
        "quotaSource": quota_source(p, now),
        "quotaKnown": not unknown and not p.is_api and q is not None,
        "quota": None
        if q is None
        else {
            "state": q.state,
            "fetchedAt": q.fetched_at,
            "age": q.age(now),
            "stale": q.is_stale(now, DEFAULT_STALE_AFTER),
            "session": _window_json(q.session),
            "weekly": _window_json(q.weekly),
            "scoped": _window_json(q.scoped),
        },
        "limit": limit_json(p.limit, now),
        "worker": a.eligible,
        "why": list(a.reasons),
        "notes": list(a.notes),
    }


def _quota_line(p: Profile, source: str, now: float) -> str | None:
    """What the footer says of a profile whose quota is not clausona's reading."""
    lim = p.limit
    if source == "stream" and p.quota is not None:
        read = format_duration(p.quota.age(now) or 0.0)
        return (f"  {p.name}: quota from a worker's own stream: {p.quota.used:.0f}% used "
                f"({p.quota.state}), read {read} ago")
    if source == "journal" and lim is not None:
        return f"  {p.name}: limited, from fleet's journals: {limit_problem(lim, now)}"
    if source != "unknown":
        return None
    if lim is None:
        return (f"  {p.name}: quota unknown (no clausona reading, no limit seen): used as if "
                "it had room")
    when = format_duration(max(0.0, now - lim.until))
    return (f"  {p.name}: quota unknown (no clausona reading; the last limit seen, by worker "
            f"{lim.worker}, ended {when} ago): used as if it had room")


def cmd_profiles_add(args: argparse.Namespace) -> int:
    if (args.endpoint is None) != (args.key_from is None):
        sys.stderr.write("fleet: profiles add: --endpoint and --key-from go together\n")
        return Exit.USAGE
    if args.endpoint is not None and (args.tool == "codex" or args.name.startswith("codex:")):
        sys.stderr.write("fleet: profiles add: --endpoint is for Claude Code profiles only\n")
        return Exit.USAGE
    name, entry, path = _profile_store.add(
        args.name, config_dir=args.config_dir, tool=args.tool, model=args.model,
        endpoint=args.endpoint, key_from=args.key_from, settings_path=args.settings,
    )
    exists = Path(entry["configDir"]).is_dir()
    if args.json:
        print_json({"name": name, **entry, "configDirExists": exists, "file": str(path)})
        return Exit.OK
    print(f"{name}: {entry['configDir']} in {path}")
    if not exists:
        tool = name.split(":", 1)[0]
        login = (f"CLAUDE_CONFIG_DIR={entry['configDir']} claude" if tool == "claude"
                 else f"CODEX_HOME={entry['configDir']} codex login")
        print(f"  it does not exist yet: log in there once ({login})")
    return Exit.OK


def cmd_profiles_remove(args: argparse.Namespace) -> int:
    name, path = _profile_store.remove(args.name, args.settings)
    if args.json:
        print_json({"name": name, "removed": True, "file": str(path)})
    else:
        print(f"{name} removed from {path}")
    return Exit.OK


def cmd_profiles(args: argparse.Namespace) -> int:
    profiles = load_profiles(source=args.profiles, settings_path=args.settings)
    own = frozenset(_profile_store.entries(args.settings))
    settings = _settings.load_settings(args.settings)
    tool = args.coordinator_tool or detect_coordinator_tool()
    coordinator = coordinator_profile(profiles, tool)
    now = time.time()
    items = [
        profile_json(p, settings=settings, coordinator=coordinator, now=now, own=own)
        for p in profiles
    ]
    if args.json:
        print_json(items)
        return Exit.OK
    rows = []
    for p, item in zip(profiles, items, strict=True):
        q = None if _profile_store.quota_unknown(p) else p.quota
        if p.is_api:
            state = "api"
        elif item["quotaSource"] == "journal":
            state = "limit"
        elif q is None:
            state = "unknown"
        else:
            stale = item["quota"]["stale"]
            state = q.state + (f" ({format_duration(q.age(now) or 0.0)} old)" if stale else "")
        scoped = "-" if q is None or q.scoped is None else f"{q.scoped.label} {_pct(q.scoped)}"
        head = p.headroom
        rows.append([
            ("* " if item["coordinator"] else "  ") + p.name,
            p.tool,
            p.kind,
            p.model or "-",
            _pct(q.session if q else None),
            _pct(q.weekly if q else None),
            scoped,
            "-" if head is None or q is None else f"{head:.0f}%",
            state,
            "yes" if item["worker"] else "no",
            "; ".join(item["why"] + item["notes"]) or "-",
        ])
    headers = [
        "profile", "tool", "kind", "model", "5h", "7d", "scoped", "headroom", "quota", "worker",
        "why",
    ]
    print(table(rows, headers))
    said = [line for p, item in zip(profiles, items, strict=True)
            if (line := _quota_line(p, item["quotaSource"], now)) is not None]
    if said:
        print(f"\n{SOURCES_HELP}:")
        print("\n".join(said))
    if coordinator is None:
        print(f"\nno profile's configDir is this {tool} coordinator's config dir")
    else:
        print(f"\n* {coordinator.name}: the coordinator's own profile (maxUsage "
              f"{settings.max_usage:g}%)")
    return Exit.OK


# --------------------------------------------------------------------------------------------
# settings


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
    except (ValueError, RecursionError):  # JSON, but a number too long or nesting too deep
        raise SettingsError(
            "VALUE is JSON fleet cannot read (nested too deeply, or a number too long)"
        ) from None


def cmd_settings_get(args: argparse.Namespace) -> int:
    if args.key is not None:
        try:
            _settings.check_key(args.key)
        except SettingsError as exc:  # a typo, not a key that is unset: a usage error
            sys.stderr.write(f"fleet: settings get: {exc}\n")
            return Exit.USAGE
    missing = object()
    value = (
        _settings.read_raw(args.settings)
        if args.key is None
        else _settings.get(args.key, args.settings, default=missing)
    )
    if value is missing:
        if args.json:
            print_json(None)
        else:
            default = _settings.DEFAULTS.get(args.key.split(".")[0])
            sys.stderr.write(f"fleet: settings get: {args.key} is not set"
                             + (f" (default: {default})" if default else "") + "\n")
        return Exit.ERROR
    if args.key is None and not value and not args.json:
        print(f"no settings in {_settings.settings_path(args.settings)}: every key has its "
              "default (`fleet settings --help` lists them)")
    elif args.json or not isinstance(value, str):
        print_json(value)
    else:
        print(value)
    return Exit.OK


def cmd_settings_set(args: argparse.Namespace) -> int:
    try:
        value = _settings.check_value(args.key, _parse_value(args.value))
    except SettingsError as exc:  # a key or value fleet does not take: a usage error
        sys.stderr.write(f"fleet: settings set: {exc}\n")
        return Exit.USAGE
    path = _settings.set(args.key, value, args.settings)
    if args.json:
        print_json({"file": str(path), "key": args.key, "value": value})
    else:
        print(f"{args.key} = {json.dumps(value, ensure_ascii=False)} in {path}")
    return Exit.OK


def cmd_settings_unset(args: argparse.Namespace) -> int:
    missing = object()
    removed = _settings.get(args.key, args.settings, default=missing) is not missing
    if removed:
        path = _settings.unset(args.key, args.settings)
    else:  # nothing to remove: leave the file (or its absence) as it is
        path = _settings.settings_path(args.settings)
    if args.json:
        print_json({"file": str(path), "key": args.key, "removed": removed})
    elif removed:
        print(f"{args.key} removed from {path}")
    else:
        print(f"{args.key} was not set in {path}")
    return Exit.OK


def cmd_settings_path(args: argparse.Namespace) -> int:
    target = _settings.settings_path(args.settings)
    source = _settings.source_path(args.settings)
    if args.json:
        print_json({"file": str(target), "readFrom": str(source) if source else None})
    else:
        print(target)
        if source is not None and source != target:
            print(f"(read from {source} until the first change)")
    return Exit.OK


# --------------------------------------------------------------------------------------------
# plan


def _assignments(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        task, sep, profile = item.partition("=")
        if not sep or not task.strip() or not profile.strip():
            raise SettingsError(f"--assign {item!r}: use TASK=PROFILE")
        out[task.strip()] = profile.strip()
    return out


def render_plan(p: Plan) -> str:
    rows = [
        [
            r.task,
            r.profile or "(none)",
            r.tool or "-",
            r.model or "-",
            r.kind + (f", checks {r.checker_of}" if r.checker_of else ""),
            r.reason,
        ]
        for r in p.rows
    ]
    lines = [table(rows, ["task", "profile", "tool", "model", "kind", "why"])]
    if p.all_warnings:
        lines.append("\nwarnings:")
        lines.extend(f"  ! {w}" for w in p.all_warnings)
    if p.routing:
        lines.append("\nyour routing rules (apply them to the plan above):")
        lines.extend(f"  - {r}" for r in p.routing)
    lines.append("")
    if not p.complete:
        lines.append("not ready: some tasks have no eligible profile: name one (--assign) or "
                     "free one up")
    elif p.needs_ok:
        lines.append("ready, on fleet's own choice of profiles (neither the request nor the "
                     "settings named one): ask before starting it; `fleet run` does not ask")
    else:
        lines.append("ready to start")
    return "\n".join(lines)


def cmd_plan(args: argparse.Namespace) -> int:
    spec = load_task_file(args.tasks)
    assign = _assignments(args.assign)
    known = {t.name for t in spec.tasks}
    for task in assign:
        if task not in known:
            raise SettingsError(f"--assign {task}=...: no task {task!r} in {args.tasks}")
    choices = Choices(
        use=tuple(args.use) or spec.use, assign=assign, start_now=args.start or spec.start
    )
    result = plan_tasks(
        spec.tasks,
        profiles_source=args.profiles,
        settings_path=args.settings,
        coordinator_tool=args.coordinator_tool,
        choices=choices,
    )
    if args.json:
        print_json(plan_json(result))
    else:
        print(render_plan(result))
    # A plan that cannot start every task is not a success, even with --start.
    return Exit.OK if result.complete else Exit.REFUSED
