"""Finding the agents' binaries and asking Claude Code its release.

The hook installer writes only the events the Claude Code that will run knows, and can ask Codex
itself whether it trusts fleet's hook: these find the binaries to ask.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Final, Literal

from fleet._errors import SettingsError, ToolError
from fleet._runner import Runner, SubprocessRunner

Tool = Literal["claude", "codex"]
TOOLS: Final = ("claude", "codex")
#: Names the Codex binary ``fleet hooks install`` and ``status`` ask (else ``codex`` on PATH).
CODEX_BIN_ENV: Final = "FLEET_CODEX"


def find_codex(explicit: str | None = None) -> str | None:
    """The Codex binary to ask: ``explicit``, else ``$FLEET_CODEX``, else ``codex`` on PATH;
    ``none`` asks no Codex."""
    return _find(explicit, CODEX_BIN_ENV, "codex", "Codex")


#: Names the Claude Code binary whose version decides which events ``install`` writes.
CLAUDE_BIN_ENV: Final = "FLEET_CLAUDE"


def find_claude(explicit: str | None = None) -> str | None:
    """The Claude Code binary to ask its version: ``explicit``, else ``$FLEET_CLAUDE``, else
    ``claude`` on PATH; ``none`` asks none."""
    return _find(explicit, CLAUDE_BIN_ENV, "claude", "Claude Code")


def _find(explicit: str | None, env: str, default: str, label: str) -> str | None:
    """``explicit``, else the binary ``$env`` names, else ``default`` on PATH; ``none`` is no
    binary. A binary that was named but is not found is an error (the user meant that one); a
    missing default only means the agent is not installed."""
    name = explicit or os.environ.get(env)
    if name == "none":
        return None
    if name:
        found = shutil.which(name)
        if found is None:
            raise SettingsError(f"{label} binary {name} not found")
        return found
    return shutil.which(default)


def claude_version(claude: str, *, runner: Runner | None = None) -> str | None:
    """``claude --version``'s release ("2.1.332"), asked in an empty config dir and home so
    that nothing of the user's is read or written; None when it does not say."""
    runner = runner or SubprocessRunner()
    with tempfile.TemporaryDirectory(prefix="fleet-claude-version-") as scratch:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": scratch,
               "CLAUDE_CONFIG_DIR": scratch, "DISABLE_AUTOUPDATER": "1"}
        try:
            result = runner.run([claude, "--version"], env=env, timeout=30)
        except (OSError, ToolError):
            return None
    words = result.stdout.split() if result.ok else []
    return words[0] if words and version_tuple(words[0]) else None


def version_tuple(version: str) -> tuple[int, ...] | None:
    parts = version.strip().split()[0].split(".") if version.strip() else []
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        return None
