"""fleet's settings file: ``~/.clausona/fleet.json``.

The file is shared with clausona's fleet plugins, so fleet reads and writes it the way they do:

- When ``fleet.json`` does not exist, the older ``superset-fleet.json`` beside it is read
  instead, and the first change copies it to ``fleet.json`` (the old file is left as it was).
- A change writes one key and keeps every other key, unknown ones included, in their order.
- Writes are atomic (a temporary file in the same directory, fsynced, then renamed over the old
  one, through a symlink to its target) and serialized with a lock on the directory.
- A file that is not a JSON object is refused with a one-line error and never rewritten.

Keys: ``workers`` (the only profiles that may be workers), ``routing`` (the user's rules in
words), ``maxUsage`` (percent, default 90), ``retire`` (``ask`` or ``auto``), ``adapter``
(where ``fleet start``/``fleet run`` start workers: ``headless``, ``superset`` or ``herdr``;
default headless), ``permissions``
(``{"claude": mode, "codex": policy, "codexSandbox": sandbox, "allowedTools": [...],
"disallowedTools": [...], "addDirs": [...], "profiles": {P: {...}}, "kinds": {K: {...}}}``,
read by :func:`fleet._permissions.policy_from_settings`), ``hub`` (see ``fleet ship --help``),
``profiles`` (fleet's own profiles: plain config dirs, see :mod:`fleet._profile_store`).
``fleet settings set`` refuses any other key, and values these keys do not take.

Where: ``settings_path`` argument, else ``$FLEET_SETTINGS``, else ``~/.clausona/fleet.json``.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from fleet._core.routing import Settings
from fleet._core.routing.settings import PERMISSION_LISTS, PERMISSION_TABLES
from fleet._errors import SettingsError
from fleet._files import atomic_write, read_input
from fleet._home import expand
from fleet._permissions import CLAUDE_MODES, CODEX_APPROVALS, CODEX_SANDBOXES

FILE_NAME: Final = "fleet.json"
LEGACY_NAME: Final = "superset-fleet.json"
ENV_VAR: Final = "FLEET_SETTINGS"

#: Keys fleet knows, with the shape `fleet settings set` checks before writing.
KNOWN_KEYS: Final = (
    "workers", "routing", "maxUsage", "retire", "adapter", "permissions", "hub", "profiles",
)

#: The values each ``permissions`` subkey takes: Claude Code's permission modes, Codex's
#: approval policies and its sandbox modes.
PERMISSION_VALUES: Final[dict[str, tuple[str, ...]]] = {
    "claude": CLAUDE_MODES,
    "mode": CLAUDE_MODES,
    "codex": CODEX_APPROVALS,
    "codexSandbox": CODEX_SANDBOXES,
}

#: The subkeys of ``hub`` (see ``fleet ship --help``): text, except these.
HUB_KEYS: Final = (
    "url", "user", "passwordFrom", "tokenFrom", "nkey", "creds", "tlsCa", "tlsCert", "tlsKey",
    "host", "coordinator", "offlineAfter", "heartbeat", "view", "insecure", "trust",
)
_HUB_NUMBERS: Final = ("offlineAfter", "heartbeat")

_MISSING: Final = object()


def settings_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The settings file fleet writes: ``path``, ``$FLEET_SETTINGS`` or the default."""
    if path is not None:
        return expand(path)
    env = os.environ.get(ENV_VAR)
    if env:
        return expand(env)
    return Path.home() / ".clausona" / FILE_NAME


def legacy_path(path: Path) -> Path | None:
    """The older file read in place of ``path`` when ``path`` is a ``fleet.json``."""
    return path.with_name(LEGACY_NAME) if path.name == FILE_NAME else None


def source_path(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The file settings are read from now: ``fleet.json``, else the legacy one, else None."""
    target = settings_path(path)
    if target.exists():
        return target
    old = legacy_path(target)
    if old is not None and old.exists():
        return old
    return None


def _read_object(path: Path) -> dict[str, Any]:
    raw = read_input(path, "settings file")
    assert raw is not None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SettingsError(f"{path} is not UTF-8 text: fix or remove it") from None
    if not text.strip():
        # An empty file is what `touch` leaves; treat it as no settings rather than an error.
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"{path} is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); "
            "fix or remove it, fleet left it untouched"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number too long, nesting too deep
        raise SettingsError(
            f"{path} is JSON fleet cannot read ({_why(exc)}); fix or remove it, fleet left it "
            "untouched"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(
            f"{path} holds a JSON {type(data).__name__}, not an object; "
            "fix or remove it, fleet left it untouched"
        )
    return data


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return " ".join(str(exc).split())[:200]


def read_raw(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Every key of the settings file (empty when there is none)."""
    source = source_path(path)
    return {} if source is None else _read_object(source)


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """The settings routing reads; a value of the wrong shape is a SettingsError naming the
    file."""
    source = source_path(path)
    data = {} if source is None else _read_object(source)
    try:
        return Settings.from_mapping(data)
    except SettingsError as exc:
        raise SettingsError(f"{source}: {exc}") from None


def _split(key: str) -> list[str]:
    parts = key.split(".")
    if not key or any(not p for p in parts):
        raise SettingsError(f"invalid settings key {key!r}: use NAME or NAME.SUBKEY")
    return parts


def get(key: str, path: str | os.PathLike[str] | None = None, default: Any = None) -> Any:
    """The value at ``key`` (``permissions.claude`` reaches into objects), or ``default``."""
    node: Any = read_raw(path)
    for part in _split(key):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


#: What an unset key means, for `fleet settings get` to say (keys absent here mean "none").
DEFAULTS: Final[dict[str, str]] = {
    "workers": "every profile may be a worker",
    "routing": "the default order",
    "maxUsage": f"{Settings().max_usage:g}",
    "retire": Settings().retire,
    "adapter": Settings().adapter,
    "permissions": "bypassPermissions headless, default in an app",
    "hub": "no hub",
    "profiles": "none of fleet's own",
}


def check_key(key: str) -> str:
    """``key`` when fleet knows it (its first part, and a ``hub`` subkey); a SettingsError
    naming the closest known key otherwise, so a typo is told apart from a key not set."""
    parts = _split(key)
    if parts[0] not in KNOWN_KEYS:
        raise _unknown("settings key", parts[0], KNOWN_KEYS)
    if parts[0] == "hub" and len(parts) > 1 and parts[1] not in HUB_KEYS:
        raise _unknown("settings key", f"hub.{parts[1]}", tuple(f"hub.{k}" for k in HUB_KEYS))
    return key


def _unknown(what: str, name: str, known: tuple[str, ...]) -> SettingsError:
    close = difflib.get_close_matches(name, known, n=1) or [
        k for k in known if k.lower() == name.lower()
    ]
    hint = f" (did you mean {close[0]}?)" if close else ""
    return SettingsError(f"unknown {what} {name!r}{hint}: known ones are {', '.join(known)}")


def _check_permissions(value: Any) -> None:
    """Every layer of a ``permissions`` object (the top, and each of ``profiles`` and
    ``kinds``) names only keys fleet knows, with values they take."""
    layers = [("permissions", {k: v for k, v in value.items() if k not in PERMISSION_TABLES})]
    for section in PERMISSION_TABLES:
        for name, layer in (value.get(section) or {}).items():
            layers.append((f"permissions.{section}.{name}", layer))
    known = (*PERMISSION_VALUES, *PERMISSION_LISTS)
    for where, layer in layers:
        for sub, item in layer.items():
            if sub in PERMISSION_LISTS:
                continue
            if sub not in PERMISSION_VALUES:
                raise _unknown("settings key", f"{where}.{sub}", tuple(
                    f"{where}.{k}" for k in (*known, *(PERMISSION_TABLES if where ==
                                                       "permissions" else ()))
                ))
            allowed = PERMISSION_VALUES[sub]
            if item not in allowed:
                raise SettingsError(
                    f"{where}.{sub} cannot be {_show(item)}: use one of {', '.join(allowed)}"
                )


def _check_hub(sub: str, value: Any) -> None:
    if sub not in HUB_KEYS:
        raise _unknown("settings key", f"hub.{sub}", tuple(f"hub.{k}" for k in HUB_KEYS))
    if sub in ("view", "insecure"):
        if not isinstance(value, bool):
            raise SettingsError(f"hub.{sub} must be true or false")
    elif sub in _HUB_NUMBERS:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise SettingsError(f"hub.{sub} must be a number of seconds above 0")
    elif not isinstance(value, str) or not value:
        raise SettingsError(f"hub.{sub} must be text")


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_value(key: str, value: Any) -> Any:
    """``value`` as it will be stored under ``key``, or SettingsError when the key is not one
    fleet knows or the value is not one it takes. ``workers`` also takes comma-separated
    text."""
    parts = _split(key)
    top = parts[0]
    if top not in KNOWN_KEYS:
        raise _unknown("settings key", top, KNOWN_KEYS)
    if top == "profiles":
        from fleet._profile_entries import check_profiles_value

        return check_profiles_value(parts[1:], value)
    if len(parts) == 1:
        if top == "workers" and isinstance(value, str):
            value = [w.strip() for w in value.split(",") if w.strip()]
        if top == "hub":
            if not isinstance(value, dict):
                raise SettingsError("hub must be an object (url, user, ...)")
            for sub, item in value.items():
                _check_hub(str(sub), item)
            return value
        Settings.from_mapping({top: value})
        if top == "permissions":
            _check_permissions(value)
        return value
    if top == "hub":
        if len(parts) > 2:
            raise SettingsError(f"{key}: hub's subkeys have no subkeys")
        _check_hub(parts[1], value)
        return value
    if top != "permissions":
        raise SettingsError(f"{top} has no subkeys: set {top} itself")
    # The whole object is checked as it will be stored, so a subkey set alone (e.g.
    # permissions.profiles.claude:work.allowedTools) gets the same errors.
    nested: Any = value
    for part in reversed(parts[1:]):
        nested = {part: nested}
    Settings.from_mapping({"permissions": nested})
    _check_permissions(nested)
    return value


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    # A lock on the directory itself leaves no lock file behind in ~/.clausona.
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: Mapping[str, Any]) -> None:
    # os.path.realpath, not Path.resolve: a symlink loop must fail the write, not raise
    # RuntimeError.
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o600
    atomic_write(target, text.encode("utf-8"), mode)


def _update(path: str | os.PathLike[str] | None, key: str, value: Any) -> Path:
    target = settings_path(path)
    parts = _split(key)
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise SettingsError(f"cannot create {target.parent}: {exc.strerror or exc}") from None
    with _locked(target.parent):
        data = read_raw(target)
        node = data
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise SettingsError(f"cannot set {key}: {part} is not an object in {target}")
            node = child
        if value is _MISSING:
            if parts[-1] not in node:
                return target
            del node[parts[-1]]
        else:
            node[parts[-1]] = value
        try:
            _write_atomic(target, data)
        except OSError as exc:
            raise SettingsError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


def set(key: str, value: Any, path: str | os.PathLike[str] | None = None) -> Path:
    """Set one key (checked when fleet knows it), keep every other key; returns the file."""
    return _update(path, key, check_value(key, value))


def unset(key: str, path: str | os.PathLike[str] | None = None) -> Path:
    """Remove one key, keeping the others; returns the file."""
    return _update(path, key, _MISSING)
