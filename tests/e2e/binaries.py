"""Where the pinned Claude Code and Codex CLIs are installed.

``scripts/install-agents`` installs them into
``${FLEET_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fleet/agents}/<hash>/node_modules/.bin``
where ``<hash>`` is the first 16 hex digits of the sha256 of ``tests/e2e/agents/package.json``
followed by ``package-lock.json``. This module computes the same path, so the tests run exactly
the versions pinned in the repository, and says clearly what to do when they are missing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import attrs

PINS = Path(__file__).resolve().parent / "agents"
ROOT = PINS.parents[2]
INSTALL_SCRIPT = ROOT / "scripts" / "install-agents"


class AgentsMissing(FileNotFoundError):
    """The pinned CLIs are not installed where ``scripts/install-agents`` puts them."""


@attrs.frozen(kw_only=True)
class Agents:
    """The installed CLIs. ``bin_dir`` holds ``claude`` and ``codex``; ``node`` is the Node.js
    that runs Codex's launcher script."""

    root: Path
    claude: Path
    codex: Path
    bin_dir: Path
    node: Path

    def path_env(self) -> str:
        """A minimal PATH: the agents, node, and the system's usual directories."""
        dirs = [str(self.bin_dir), str(self.node.parent), "/usr/local/bin", "/usr/bin", "/bin"]
        return os.pathsep.join(dict.fromkeys(dirs))


def lock_hash() -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((PINS / name).read_bytes())
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    env = os.environ.get("FLEET_AGENTS_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "fleet" / "agents"


def install_dir() -> Path:
    return cache_root() / lock_hash()


def find_agents() -> Agents:
    """The installed CLIs, or :class:`AgentsMissing` saying how to install them."""
    root = install_dir()
    bin_dir = root / "node_modules" / ".bin"
    claude, codex = bin_dir / "claude", bin_dir / "codex"
    missing = [
        p.name for p in (claude, codex) if not (p.exists() and os.access(p, os.X_OK))
    ]
    if missing or not (root / ".complete").is_file():
        raise AgentsMissing(
            f"the pinned agent CLIs ({', '.join(missing) or 'claude, codex'}) are not installed "
            f"in {root}: run {INSTALL_SCRIPT.relative_to(ROOT)} (scripts/test runs it), or set "
            "FLEET_AGENTS_DIR to where it installed them"
        )
    node = shutil.which("node")
    if node is None:
        raise AgentsMissing("node is not on PATH: Codex's launcher needs Node.js 18 or newer")
    return Agents(root=root, claude=claude, codex=codex, bin_dir=bin_dir, node=Path(node))
