"""Profiles fleet keeps itself, without clausona: the ``profiles`` key of fleet's settings.

Each is a plain Claude Code config dir or Codex home, perhaps with a model, or a Claude API
endpoint and where its key comes from::

    "profiles": {
      "claude:work": {"configDir": "/home/me/.claude-work"},
      "claude:glm": {"configDir": "/home/me/.claude-glm", "model": "glm-5",
                     "endpoint": "https://api.example/anthropic", "keyFrom": "env:GLM_KEY"}
    }

fleet starts a worker on one of them through ``fleet-profile-run``, which takes clausona's
``run PROFILE -- ARGS`` form: for a profile of fleet's it runs the tool with the profile's
config dir (``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME``), model and endpoint; for any other it hands
the same arguments to clausona. fleet has no quota reading for these profiles: their quota is
shown as unknown.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from fleet._core.routing import Profile, Quota
from fleet._errors import FleetError, SettingsError
from fleet._home import expand
from fleet._profile_entries import (
    SETTINGS_KEY,
    check_entry,
    check_profiles_value,
    full_name,
)

LAUNCHER: Final = "fleet-profile-run"

#: The quota of a profile fleet has no reading for. It holds nothing against the profile (so
#: it may be a worker), and every view says "unknown" for it: test with :func:`quota_unknown`.
UNKNOWN_QUOTA: Final = Quota(state="ok")

def quota_unknown(profile: Profile) -> bool:
    """Whether ``profile`` is one of fleet's own, whose quota fleet cannot read."""
    return profile.quota is UNKNOWN_QUOTA





def entries(settings_path: str | os.PathLike[str] | None = None) -> dict[str, dict[str, str]]:
    """fleet's own profiles as the settings hold them (checked), by ``tool:name``."""
    from fleet._settings import read_raw, source_path

    raw = read_raw(settings_path).get(SETTINGS_KEY)
    if raw is None:
        return {}
    try:
        return dict(check_profiles_value((), raw))
    except SettingsError as exc:
        raise SettingsError(f"{source_path(settings_path)}: {exc}") from None


def own_profiles(settings_path: str | os.PathLike[str] | None = None) -> list[Profile]:
    """fleet's own profiles as :class:`Profile` values (quota :data:`UNKNOWN_QUOTA`)."""
    out = []
    for name, entry in entries(settings_path).items():
        full = full_name(name)
        tool = full.split(":", 1)[0]
        out.append(Profile(
            name=full,
            tool=tool,
            kind="api" if "endpoint" in entry else "subscription",
            model=entry.get("model"),
            config_dir=expand(entry["configDir"]),
            label=entry.get("endpoint", ""),
            quota=None if "endpoint" in entry else UNKNOWN_QUOTA,
        ))
    return out


def add(
    name: str,
    *,
    config_dir: str,
    tool: str | None = None,
    model: str | None = None,
    endpoint: str | None = None,
    key_from: str | None = None,
    settings_path: str | os.PathLike[str] | None = None,
) -> tuple[str, dict[str, str], Path]:
    """Add or replace one of fleet's own profiles; returns its name, entry and the file."""
    from fleet import _settings

    full = full_name(name, tool)
    where = expand(config_dir).absolute()
    if where.exists() and not where.is_dir():
        # A dir not made yet is fine (the first login makes it); a file never becomes one.
        what = "Codex home" if full.startswith("codex:") else "Claude Code config dir"
        raise SettingsError(f"--config-dir {where} is a file, not a directory: name the {what} "
                            "itself; nothing was added")
    entry = {"configDir": str(where)}
    for key, value in (("model", model), ("endpoint", endpoint), ("keyFrom", key_from)):
        if value is not None:
            entry[key] = value
    entry = check_entry(full, entry)
    path = _settings.set(f"{SETTINGS_KEY}.{full}", entry, settings_path)
    return full, entry, path


def find_own(
    name: str, settings_path: str | os.PathLike[str] | None = None
) -> tuple[str, dict[str, str]] | None:
    """fleet's own profile called ``name`` (``tool:name``, or a name unique among them, any
    case), with its entry; None when fleet has none of that name."""
    known = entries(settings_path)
    wanted = name.strip().lower()
    exact = [n for n in known if n.lower() == wanted]
    short = [n for n in known if ":" not in wanted and n.split(":", 1)[1].lower() == wanted]
    matches = exact or short
    return (matches[0], known[matches[0]]) if len(matches) == 1 else None


def remove(name: str, settings_path: str | os.PathLike[str] | None = None) -> tuple[str, Path]:
    """Remove one of fleet's own profiles (``name`` or ``tool:name``); SettingsError when fleet
    has no such profile."""
    from fleet import _settings

    known = entries(settings_path)
    wanted = name.strip().lower()
    matches = [n for n in known if n.lower() == wanted or n.split(":", 1)[1].lower() == wanted]
    if len(matches) != 1:
        if matches:
            raise SettingsError(f"profile {name!r} is ambiguous: say {' or '.join(matches)}")
        have = ", ".join(known) or "none"
        raise SettingsError(f"fleet has no profile {name!r} (its own profiles: {have})")
    return matches[0], _settings.unset(f"{SETTINGS_KEY}.{matches[0]}", settings_path)


def launcher_path() -> str:
    """The ``fleet-profile-run`` program installed beside this interpreter (else on PATH)."""
    beside = Path(sys.executable).parent / LAUNCHER
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(LAUNCHER) or LAUNCHER


# -- fleet-profile-run ------------------------------------------------------------------------


def _tool_binary(tool: str) -> str:
    value = os.environ.get("FLEET_CLAUDE" if tool == "claude" else "FLEET_CODEX")
    return value if value and value != "none" else tool


def launch_argv(
    entry: Mapping[str, str], tool: str, args: Sequence[str], environ: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that run ``tool`` with ``args`` on a profile of fleet's."""
    env = dict(environ)
    config = str(expand(entry["configDir"]))
    argv = [_tool_binary(tool)]
    if tool == "claude":
        env["CLAUDE_CONFIG_DIR"] = config
        if entry.get("model"):
            env["ANTHROPIC_MODEL"] = entry["model"]
        if entry.get("endpoint"):
            from fleet._keys import resolve_key

            env["ANTHROPIC_BASE_URL"] = entry["endpoint"].rstrip("/")
            env["ANTHROPIC_AUTH_TOKEN"] = resolve_key(entry["keyFrom"], environ=environ)
            env.pop("ANTHROPIC_API_KEY", None)
    else:
        env["CODEX_HOME"] = config
        if entry.get("model") and "-m" not in args and "--model" not in args:
            # After the subcommand (`exec`), where Codex reads its options.
            head = list(args[:1]) if args and not args[0].startswith("-") else []
            args = [*head, "-m", entry["model"], *args[len(head):]]
    return [*argv, *args], env


CLAUSONA_ENV: Final = "FLEET_CLAUSONA"


def real_clausona(env: Mapping[str, str] | None = None) -> str:
    """The clausona binary: ``$FLEET_CLAUSONA``, else ``clausona`` on PATH."""
    env = os.environ if env is None else env
    return env.get(CLAUSONA_ENV) or "clausona"


def main(argv: Sequence[str] | None = None) -> int:
    """``fleet-profile-run run PROFILE -- ARGS...``: the tool on a profile of fleet's, or else
    clausona with the same arguments."""
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        if len(words) >= 3 and words[0] == "run" and words[2] == "--":
            found = find_own(words[1])
            if found is not None:
                name, entry = found
                cmd, env = launch_argv(entry, name.split(":", 1)[0], words[3:], os.environ)
                os.execvpe(cmd[0], cmd, env)
        clausona = real_clausona()
        os.execvp(clausona, [clausona, *words])
    except FleetError as exc:
        sys.stderr.write(f"{LAUNCHER}: {' '.join(str(exc).split())}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"{LAUNCHER}: cannot run {exc.filename or 'it'}: "
                         f"{exc.strerror or exc}\n")
        return 127


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
