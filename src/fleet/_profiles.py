"""Where profiles come from: fleet's own (the ``profiles`` key of its settings, see
:mod:`fleet._profile_store`), and clausona's, from ``clausona list --json`` or from a JSON
snapshot file of the same output (for tests, and for people who keep one).

``$FLEET_CLAUSONA`` names the clausona binary (default ``clausona`` on PATH); ``$FLEET_PROFILES``
names a snapshot file to read instead of running it. clausona is optional: without it, fleet's
own profiles are the only ones.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from fleet._core.routing import Profile, profiles_from_json, resolve
from fleet._errors import SettingsError, ToolError
from fleet._files import decode_utf8, read_input
from fleet._home import expand
from fleet._runner import Runner, SubprocessRunner

PROFILES_ENV: Final = "FLEET_PROFILES"
COORDINATOR_DIRS: Final = {
    "claude": ("CLAUDE_CONFIG_DIR", ".claude"),
    "codex": ("CODEX_HOME", ".codex"),
}


NO_PROFILES_HELP: Final = (
    "add one with `fleet profiles add NAME --config-dir DIR` (a Claude Code config dir or "
    "Codex home), or install clausona and add it there (`clausona add NAME`)"
)


def clausona_binary(env: Mapping[str, str] | None = None) -> str:
    """The program that runs ``run PROFILE -- ARGS``: ``fleet-profile-run`` when fleet has
    profiles of its own (it hands every other profile to clausona), else clausona itself."""
    from fleet._profile_store import entries, launcher_path, real_clausona

    if entries():
        return launcher_path()
    return real_clausona(env)


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _error_line(stderr: str, stdout: str) -> str:
    """clausona reports errors on stderr as ``  ✖ <message>``; keep just the message (without
    colour codes, which a forced-colour terminal setting can leave in)."""
    text = _ANSI.sub("", stderr or stdout)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    marked = [ln for ln in lines if ln.startswith("✖")]
    line = (marked or lines or [""])[-1]
    return line.removeprefix("✖").strip()


def parse_list_output(text: str, where: str) -> list[Profile]:
    """Profiles from the text of ``clausona list --json``; ValueError names ``where``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{where} is not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number too long, nesting too deep
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise ValueError(f"{where} is JSON fleet cannot read ({why})") from None
    try:
        return profiles_from_json(data)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def load_profiles(
    *,
    runner: Runner | None = None,
    source: str | os.PathLike[str] | None = None,
    binary: str | None = None,
    settings_path: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> list[Profile]:
    """Every profile: fleet's own (from its settings), then clausona's with their last quota
    reading (a clausona profile of the same name as one of fleet's is left out). A profile
    clausona has no reading for carries the last usage limit a worker on it hit, from the
    journals in fleet's ``home`` (see :mod:`fleet._quota`).

    clausona's come from ``source`` (a file holding ``clausona list --json`` output) when given
    or when ``$FLEET_PROFILES`` is set; otherwise from running ``clausona list --json`` through
    ``runner``, when clausona is installed (or ``binary`` is given). A missing clausona is fine
    when fleet has profiles of its own; with none at all it is a ToolError saying how to add
    one. An error from clausona or output that is not its profile list is a ToolError; a
    snapshot file that cannot be read is a SettingsError."""
    from fleet._profile_store import own_profiles
    from fleet._quota import with_seen_limits

    own = own_profiles(settings_path)
    theirs = _clausona_profiles(runner=runner, source=source, binary=binary, need=not own)
    names = {p.name.lower() for p in own}
    return with_seen_limits(own + [p for p in theirs if p.name.lower() not in names], home)


def _clausona_profiles(
    *,
    runner: Runner | None,
    source: str | os.PathLike[str] | None,
    binary: str | None,
    need: bool,
) -> list[Profile]:
    if source is None and os.environ.get(PROFILES_ENV):
        source = os.environ[PROFILES_ENV]
    if source is not None:
        path = expand(source)
        try:
            raw = read_input(path, "profiles file")
            assert raw is not None
            text = decode_utf8(raw, str(path))
        except SettingsError as exc:
            raise SettingsError(f"cannot read profiles from {path}: {exc}") from None
        try:
            return parse_list_output(text, str(path))
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
    from fleet._profile_store import real_clausona

    program = binary or real_clausona()
    if runner is None and binary is None and shutil.which(program) is None:
        if not need:
            return []
        raise ToolError(f"no profiles: {NO_PROFILES_HELP}; {program} is not installed")
    runner = runner or SubprocessRunner()
    argv = [program, "list", "--json"]
    done = runner.run(argv, timeout=120.0)
    if done.returncode != 0:
        detail = _error_line(done.stderr, done.stdout) or "no message"
        raise ToolError(f"clausona list failed (exit {done.returncode}): {detail}")
    try:
        return parse_list_output(done.stdout, "the output of `clausona list --json`")
    except ValueError as exc:
        raise ToolError(str(exc)) from None


def closest_profile(name: str, profiles: Iterable[Profile]) -> str | None:
    """The name of the profile ``name`` most likely meant (a typo of its bare name, on the
    same tool when ``name`` says one), or None when nothing is close. The bare names are
    compared: every ``claude:`` name would otherwise look alike."""
    import difflib

    tool, _, short = name.strip().lower().rpartition(":")
    by_short: dict[str, str] = {}
    for p in profiles:
        if not tool or p.name.lower().startswith(tool + ":"):
            by_short.setdefault(p.short.lower(), p.name)
    close = difflib.get_close_matches(short, list(by_short), n=1, cutoff=0.6)
    return by_short[close[0]] if close else None


def find_profile(name: str, profiles: Iterable[Profile]) -> Profile:
    """The profile called ``name`` (``tool:name`` or a unique bare name, any case); a
    SettingsError naming the known profiles and the closest one otherwise."""
    pool = list(profiles)
    found = resolve(name, pool)
    if isinstance(found, str):
        if found.startswith("no profile"):
            have = ", ".join(p.name for p in pool) or "none"
            close = closest_profile(name, pool)
            hint = f"did you mean {close}?" if close else NO_PROFILES_HELP
            raise SettingsError(f"no profile {name!r} (there are: {have}): {hint}")
        raise SettingsError(found)
    return found


def require_profile(name: str, *, runner: Runner | None = None) -> Profile:
    """The known profile ``name`` names, checked before a worker is started on it: a worker on
    a profile nobody knows would get a worktree, a journal and an agent that dies at once."""
    return find_profile(name, load_profiles(runner=runner))


def coordinator_dir(tool: str, env: Mapping[str, str] | None = None) -> Path:
    """The config dir a coordinator of ``tool`` runs on: $CLAUDE_CONFIG_DIR or ~/.claude,
    $CODEX_HOME or ~/.codex."""
    env = os.environ if env is None else env
    if tool not in COORDINATOR_DIRS:
        raise SettingsError(f"unknown coordinator tool {tool!r}: use claude or codex")
    var, default = COORDINATOR_DIRS[tool]
    if env.get(var):
        return expand(env[var])
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / default


def _same_dir(a: Path, b: Path) -> bool:
    return os.path.realpath(os.path.expanduser(a)) == os.path.realpath(os.path.expanduser(b))


def coordinator_profile(
    profiles: Iterable[Profile], tool: str, env: Mapping[str, str] | None = None
) -> Profile | None:
    """The coordinator's own profile: the ``tool`` profile whose configDir is the coordinator's
    config dir (compared as resolved paths). ``isActive`` is something else: the profile
    ``clausona use`` selected."""
    wanted = coordinator_dir(tool, env)
    for p in profiles:
        if p.tool == tool and _same_dir(p.config_dir, wanted):
            return p
    return None


def detect_coordinator_tool(env: Mapping[str, str] | None = None) -> str:
    """The tool the coordinator runs in, guessed from its environment: Codex sets CODEX_*
    variables in the shells it runs (its sandbox, its thread id); Claude Code sets CLAUDECODE."""
    env = os.environ if env is None else env
    if env.get("CLAUDECODE"):
        return "claude"
    markers = ("CODEX_SANDBOX", "CODEX_SANDBOX_NETWORK_DISABLED", "CODEX_THREAD_ID", "CODEX_CI")
    if any(env.get(m) for m in markers):
        return "codex"
    return "claude"
