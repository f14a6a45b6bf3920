"""Codex's trust in fleet's hook: the hash recipe, the trust entries in ``config.toml``, and
asking Codex itself.

Codex runs a hook from ``$CODEX_HOME/hooks.json`` only once ``config.toml`` holds a trust entry
whose hash matches the hook's definition (``[hooks.state."<hooks.json>:<event>:<group>:<handler>"]
trusted_hash``). The recipe is Codex's internal business: fleet keeps a copy of it (observed in
Codex 0.171.0) and, when a Codex binary is at hand, asks Codex instead (``hooks/list`` through
:mod:`fleet._codex_app_server`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import tomlkit

from fleet import _codex_app_server
from fleet._agent_config import read_toml, toml_table, write_toml
from fleet._errors import SettingsError, ToolError
from fleet._hook_command import Position, fleet_positions, is_fleet_command
from fleet._runner import Runner, SubprocessRunner

#: Codex's default timeout for a command hook, part of the trusted hash when none is set.
CODEX_DEFAULT_TIMEOUT: Final = 600
#: Events that take no matcher in Codex: it ignores one if given and leaves it out of the hash,
#: so fleet writes none.
CODEX_UNMATCHED_EVENTS: Final = frozenset({"UserPromptSubmit", "Stop", "Interrupt"})
#: Events Codex runs on its way out: a handler's timeout defaults to 1 s there and is clamped to
#: 3 s, and the hash holds the effective value. fleet asks for the 3 s.
CODEX_SHORT_EVENTS: Final = frozenset({"SessionEnd", "Interrupt"})
CODEX_SHORT_DEFAULT_TIMEOUT: Final = 1
CODEX_SHORT_MAX_TIMEOUT: Final = 3
CODEX_TRUSTED: Final = frozenset({"trusted", "managed"})


# -- the recipe ---------------------------------------------------------------------------------


def snake_case(event: str) -> str:
    out = []
    for i, c in enumerate(event):
        if c.isupper() and i:
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def codex_trust_hash(event: str, group: Mapping[str, Any]) -> str:
    """Codex's hash of one matcher group (as it stands in hooks.json): sha256 over the compact,
    sorted-key JSON of the event's snake_case name, the matcher (for events that take one), and
    each handler with its effective settings (async, command, timeout, type).

    Observed in Codex 0.171.0 and checked against the ``currentHash`` its app-server reports
    (``hooks/list``). Internal to Codex and liable to change: ``status`` can ask Codex itself."""
    handlers = []
    for handler in group.get("hooks", []):
        handlers.append(
            {
                "async": bool(handler.get("async", False)),
                "command": handler.get("command"),
                "timeout": codex_timeout(event, handler.get("timeout")),
                "type": handler.get("type", "command"),
            }
        )
    identity: dict[str, Any] = {"event_name": snake_case(event), "hooks": handlers}
    if group.get("matcher") is not None and event not in CODEX_UNMATCHED_EVENTS:
        identity["matcher"] = group["matcher"]
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def codex_hooks_key_path(codex_home: Path) -> Path:
    """hooks.json as Codex names it in trust keys: under the canonical CODEX_HOME (Codex 0.171.0
    resolves a symlinked home before keying, so an unresolved key would never match)."""
    return Path(os.path.realpath(codex_home)) / "hooks.json"


def codex_timeout(event: str, timeout: Any) -> Any:
    """The timeout Codex gives a handler of ``event`` that asks for ``timeout`` (None: unset)."""
    if event in CODEX_SHORT_EVENTS:
        if timeout is None:
            return CODEX_SHORT_DEFAULT_TIMEOUT
        if isinstance(timeout, int) and not isinstance(timeout, bool):
            return min(timeout, CODEX_SHORT_MAX_TIMEOUT)
        return timeout
    return CODEX_DEFAULT_TIMEOUT if timeout is None else timeout


def trust_key(hooks_file: Path, position: Position) -> str:
    event, gi, hi = position
    return f"{hooks_file}:{snake_case(event)}:{gi}:{hi}"


def trust_state(doc: tomlkit.TOMLDocument, *, create: bool, path: Path | None = None) -> Any:
    """The ``[hooks.state]`` table of a ``config.toml`` (None when it has none and not
    ``create``); refused when ``hooks`` or ``hooks.state`` is not a table."""
    where = path or Path("config.toml")
    hooks = toml_table(doc, "hooks", where, create=create, super_table=True)
    if hooks is None:
        return None
    return toml_table(
        hooks, "state", where, where="'hooks.state'", create=create, super_table=True
    )


def retrust(
    doc: tomlkit.TOMLDocument,
    hooks_file: Path,
    old_fleet: Sequence[Position],
    moves: Mapping[Position, Position],
    new_hooks: Mapping[str, Any],
    *,
    keep_existing: bool = False,
) -> None:
    """Rewrite the trust entries of one hooks.json after its groups moved: fleet's old entries
    go, the user's entries follow their handlers, fleet's new handlers are trusted (an entry
    already there is left as it is with ``keep_existing``)."""
    state = trust_state(doc, create=True)
    prefix = f"{hooks_file}:"
    by_snake = {snake_case(e): e for e in new_hooks}
    by_snake.update({snake_case(e): e for e, _, _ in old_fleet})
    by_snake.update({snake_case(e): e for e, _, _ in moves})
    new_fleet = {
        trust_key(hooks_file, (e, gi, hi)): codex_trust_hash(e, new_hooks[e][gi])
        for e, gi, hi in fleet_positions(new_hooks)
    }
    old_fleet_set = set(old_fleet)
    carried: dict[str, Any] = {}
    for key in [k for k in state if isinstance(k, str) and k.startswith(prefix)]:
        parsed = _parse_trust_key(key[len(prefix) :], by_snake)
        if parsed is None or key in new_fleet:
            continue
        if parsed in old_fleet_set:
            del state[key]
        elif parsed in moves and moves[parsed] != parsed:
            carried[trust_key(hooks_file, moves[parsed])] = state[key]
            del state[key]
    for key, value in carried.items():
        state[key] = value
    for key, digest in new_fleet.items():
        entry = state.get(key)
        if isinstance(entry, dict):
            if entry.get("trusted_hash") != digest and not keep_existing:
                entry["trusted_hash"] = digest
            continue
        entry = tomlkit.table()
        entry["trusted_hash"] = digest
        state[key] = entry
    if not state:
        hooks = doc["hooks"]
        del hooks["state"]
        if not hooks:
            del doc["hooks"]


def _parse_trust_key(rest: str, by_snake: Mapping[str, str]) -> Position | None:
    parts = rest.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    event = by_snake.get(parts[0])
    if event is None:
        return None
    return (event, int(parts[1]), int(parts[2]))


# -- what fleet's copy of the recipe says -------------------------------------------------------


def codex_trust_problems(
    codex_home: Path, hooks: Mapping[str, Any], positions: Sequence[Position]
) -> tuple[list[str], list[str]]:
    """By fleet's copy of the recipe: the events of fleet's handlers (at ``positions`` of the
    ``hooks`` table of ``codex_home``'s hooks.json) that Codex will not trust, and why."""
    config_toml = codex_home / "config.toml"
    try:
        doc, _ = read_toml(config_toml)
        state = trust_state(doc, create=False, path=config_toml)
    except SettingsError as exc:
        return [p[0] for p in positions], [str(exc)]
    problems: list[str] = []
    features = doc.get("features")
    if isinstance(features, dict) and features.get("hooks") is False:
        problems.append(f"{config_toml} disables hooks ([features] hooks = false)")
    untrusted = []
    hooks_file = codex_hooks_key_path(codex_home)
    for position in positions:
        event, gi, _ = position
        entry = state.get(trust_key(hooks_file, position)) if state is not None else None
        have = entry.get("trusted_hash") if isinstance(entry, dict) else None
        if have != codex_trust_hash(event, hooks[event][gi]):
            untrusted.append(event)
    if untrusted:
        problems.append(
            f"Codex will skip fleet's hook for {', '.join(untrusted)}: no matching trust entry "
            f"in {config_toml} (run `fleet hooks install` again)"
        )
    return untrusted, problems


# -- asking Codex itself ------------------------------------------------------------------------


def codex_hooks_list(
    codex: str, codex_home: Path, *, runner: Runner | None = None, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """Codex's own view of the hooks of ``codex_home``: each with its ``key``, ``command``,
    ``currentHash`` and ``trustStatus`` (trusted, untrusted, modified, managed)."""
    runner = runner or SubprocessRunner()
    env = dict(os.environ)
    env["CODEX_HOME"] = str(codex_home)
    client = Path(_codex_app_server.__file__).absolute()
    argv = [sys.executable, "-I", str(client), codex, str(codex_home), str(timeout)]
    result = runner.run(argv, env=env, timeout=timeout + 10).check("codex app-server hooks/list")
    try:
        hooks = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise ToolError("codex app-server hooks/list gave no JSON list") from None
    if not isinstance(hooks, list) or not all(isinstance(h, dict) for h in hooks):
        raise ToolError("codex app-server hooks/list gave no JSON list")
    return hooks


def _fleet_entries(codex_home: Path, listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    prefix = f"{codex_hooks_key_path(codex_home)}:"
    return [
        h for h in listed
        if isinstance(h.get("key"), str) and h["key"].startswith(prefix)
        and is_fleet_command(h.get("command"))
    ]


@attrs.frozen(kw_only=True)
class CodexCheck:
    """What Codex itself says of fleet's hook entries in one Codex home."""

    codex: str
    trusted: tuple[str, ...] = ()
    untrusted: tuple[str, ...] = ()
    repaired: tuple[str, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.trusted) and not self.untrusted


def codex_check(
    codex_home: Path, codex: str, *, repair: bool = False, runner: Runner | None = None
) -> CodexCheck:
    """Ask Codex which of fleet's entries in ``codex_home`` it trusts. With ``repair``, write
    the hash Codex reports for any it does not (the recipe is Codex's internal business and may
    change), then ask again."""
    try:
        entries = _fleet_entries(codex_home, codex_hooks_list(codex, codex_home, runner=runner))
        repaired: list[str] = []
        if repair:
            wrong = {
                h["key"]: h["currentHash"] for h in entries
                if h.get("trustStatus") not in CODEX_TRUSTED
                and isinstance(h.get("currentHash"), str)
            }
            if wrong:
                config_toml = codex_home / "config.toml"
                doc, _ = read_toml(config_toml)
                state = trust_state(doc, create=True, path=config_toml)
                for key, digest in wrong.items():
                    entry = tomlkit.table()
                    entry["trusted_hash"] = digest
                    if key in state:
                        del state[key]
                    state[key] = entry
                write_toml(config_toml, doc)
                repaired = sorted(wrong)
                entries = _fleet_entries(
                    codex_home, codex_hooks_list(codex, codex_home, runner=runner)
                )
    except (ToolError, SettingsError) as exc:
        return CodexCheck(codex=codex, error=str(exc))
    trusted = sorted(h["key"] for h in entries if h.get("trustStatus") in CODEX_TRUSTED)
    untrusted = sorted(h["key"] for h in entries if h.get("trustStatus") not in CODEX_TRUSTED)
    return CodexCheck(
        codex=codex, trusted=tuple(trusted), untrusted=tuple(untrusted), repaired=tuple(repaired)
    )
