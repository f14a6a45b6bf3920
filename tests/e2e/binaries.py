"""Where the Claude Code and Codex CLIs of the end-to-end tests are installed.

Each pin set under ``tests/e2e/agents/`` (``known-good``: the release fleet was first proven on;
``current``: the newest release) is installed by ``scripts/install-agents`` into
``${FLEET_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fleet/agents}/<hash>/node_modules/.bin``
where ``<hash>`` is the first 16 hex digits of the sha256 of the set's ``package.json``
followed by its ``package-lock.json``. This module computes the same paths, so the tests run
exactly the versions pinned in the repository, and says clearly what to do when they are
missing.

``FLEET_E2E_AGENTS`` picks the sets to test (comma-separated; default: every pinned set).
``latest`` is what ``scripts/install-agents --latest`` installed from the registry today.
Tests run once per distinct version of each CLI: two sets that pin the same Codex test it once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from functools import cache
from pathlib import Path

import attrs

PINS = Path(__file__).resolve().parent / "agents"
ROOT = PINS.parents[2]
INSTALL_SCRIPT = ROOT / "scripts" / "install-agents"
SETS_ENV = "FLEET_E2E_AGENTS"
LATEST = "latest"
CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
CODEX_PACKAGE = "@openai/codex"


class AgentsMissing(FileNotFoundError):
    """The CLIs are not installed where ``scripts/install-agents`` puts them."""


@attrs.frozen(kw_only=True)
class Agents:
    """One installed pin set. ``bin_dir`` holds ``claude`` and ``codex``; ``node`` is the Node.js
    that runs Codex's launcher script."""

    name: str
    root: Path
    claude: Path
    codex: Path
    bin_dir: Path
    node: Path
    claude_version: str
    codex_version: str

    def path_env(self) -> str:
        """A minimal PATH: the agents, node, and the system's usual directories."""
        dirs = [str(self.bin_dir), str(self.node.parent), "/usr/local/bin", "/usr/bin", "/bin"]
        return os.pathsep.join(dict.fromkeys(dirs))


def pin_sets() -> list[str]:
    """The pinned sets in the repository: known-good, current, then any other."""
    names = [
        d.name for d in PINS.iterdir()
        if (d / "package.json").is_file() and (d / "package-lock.json").is_file()
    ]
    return sorted(names, key=lambda n: (n != "known-good", n != "current", n))


def selected_sets() -> list[str]:
    raw = os.environ.get(SETS_ENV, "").strip()
    if not raw:
        return pin_sets()
    return [name.strip() for name in raw.split(",") if name.strip()]


def lock_hash(pin_dir: Path) -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        path = pin_dir / name
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    env = os.environ.get("FLEET_AGENTS_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "fleet" / "agents"


def install_dir(name: str) -> Path:
    if name == LATEST:
        pointer = cache_root() / LATEST
        try:
            return Path(pointer.read_text().strip())
        except OSError:
            raise AgentsMissing(
                f"no latest agents in {cache_root()}: run {_script()} --latest"
            ) from None
    pin_dir = PINS / name
    if not (pin_dir / "package.json").is_file():
        raise AgentsMissing(f"no pin set {name!r} in {PINS} (known: {', '.join(pin_sets())})")
    return cache_root() / lock_hash(pin_dir)


def _script() -> Path:
    return INSTALL_SCRIPT.relative_to(ROOT)


def _versions(root: Path) -> tuple[str, str]:
    """The installed versions, read from the packages themselves."""
    out = []
    for package in (CLAUDE_PACKAGE, CODEX_PACKAGE):
        manifest = root / "node_modules" / package / "package.json"
        out.append(str(json.loads(manifest.read_text())["version"]))
    return out[0], out[1]


@cache
def find_agents(name: str) -> Agents:
    """The installed CLIs of one pin set, or :class:`AgentsMissing` saying how to install
    them."""
    root = install_dir(name)
    bin_dir = root / "node_modules" / ".bin"
    claude, codex = bin_dir / "claude", bin_dir / "codex"
    missing = [
        p.name for p in (claude, codex) if not (p.exists() and os.access(p, os.X_OK))
    ]
    if missing or not (root / ".complete").is_file():
        raise AgentsMissing(
            f"the {name} agent CLIs ({', '.join(missing) or 'claude, codex'}) are not installed "
            f"in {root}: run {_script()} (scripts/test runs it), or set FLEET_AGENTS_DIR to "
            "where it installed them"
        )
    node = shutil.which("node")
    if node is None:
        raise AgentsMissing("node is not on PATH: Codex's launcher needs Node.js 18 or newer")
    claude_version, codex_version = _versions(root)
    return Agents(
        name=name, root=root, claude=claude, codex=codex, bin_dir=bin_dir, node=Path(node),
        claude_version=claude_version, codex_version=codex_version,
    )


def pinned_version(name: str, package: str) -> str:
    """The version a pin set pins for ``package`` (read from the repository, so test ids exist
    before anything is installed)."""
    deps = json.loads((PINS / name / "package.json").read_text())["dependencies"]
    return str(deps[package])


def _distinct(package: str) -> list[tuple[str, str]]:
    """(pin set, version) for each distinct version of ``package`` among the selected sets,
    in set order."""
    seen: dict[str, str] = {}
    for name in selected_sets():
        try:
            version = (
                pinned_version(name, package) if name != LATEST
                else _latest_version(package)
            )
        except (OSError, KeyError, ValueError, AgentsMissing):
            version = name  # not installed: the fixture fails with how to install it
        seen.setdefault(version, name)
    return [(name, version) for version, name in seen.items()]


def _latest_version(package: str) -> str:
    claude, codex = _versions(install_dir(LATEST))
    return claude if package == CLAUDE_PACKAGE else codex


def claude_sets() -> list[tuple[str, str]]:
    """The pin sets whose Claude Code the suite runs: one per distinct version."""
    return _distinct(CLAUDE_PACKAGE)


def codex_sets() -> list[tuple[str, str]]:
    """The pin sets whose Codex the suite runs: one per distinct version."""
    return _distinct(CODEX_PACKAGE)


def version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)
