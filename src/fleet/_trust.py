"""Pre-answering the folder-trust prompt of Claude Code and Codex for a worktree.

Claude Code keeps trust in ``.claude.json`` (``projects[<path>].hasTrustDialogAccepted``) inside
its config dir, or at ``~/.claude.json`` for the default ``~/.claude``; Codex in ``config.toml``
(``[projects."<path>"] trust_level = "trusted"``). A starting agent may rewrite its file and drop
an entry written a moment before, so trusting verifies after writing and tries again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import attrs

from fleet._agent_config import (
    claude_state_file,
    is_claude_trusted,
    is_codex_trusted,
    read_json_object,
    read_toml,
    trust_claude_project,
    trust_codex_project,
)
from fleet._errors import SettingsError
from fleet._hook_install import Target

ATTEMPTS: Final = 5
RETRY_DELAY: Final = 0.2


def trust_file(target: Target) -> Path:
    return claude_state_file(target.config_dir) if target.tool == "claude" else target.config_toml


def project_key(path: str | os.PathLike[str]) -> str:
    """The path as the agents key it: absolute, symlinks resolved (they use the process cwd)."""
    return os.path.realpath(os.path.expanduser(path))


@attrs.frozen(kw_only=True)
class TrustResult:
    target: str
    tool: str
    file: str
    path: str
    trusted: bool
    written: bool = False
    attempts: int = 0


def is_trusted(target: Target, path: str | os.PathLike[str]) -> bool:
    key = project_key(path)
    file = trust_file(target)
    if target.tool == "claude":
        return is_claude_trusted(read_json_object(file)[0], key)
    return is_codex_trusted(read_toml(file)[0], key)


def check(target: Target, path: str | os.PathLike[str]) -> TrustResult:
    return TrustResult(
        target=target.label,
        tool=target.tool,
        file=str(trust_file(target)),
        path=project_key(path),
        trusted=is_trusted(target, path),
    )


def trust(
    target: Target,
    path: str | os.PathLike[str],
    *,
    attempts: int = ATTEMPTS,
    delay: float = RETRY_DELAY,
    sleep: Callable[[float], None] = time.sleep,
) -> TrustResult:
    """Mark ``path`` trusted for ``target`` and verify it stuck, writing again (up to
    ``attempts`` times) when something rewrote the file in between."""
    key = project_key(path)
    file = trust_file(target)
    written = False
    for attempt in range(1, attempts + 1):
        if is_trusted(target, key):
            return TrustResult(
                target=target.label, tool=target.tool, file=str(file), path=key,
                trusted=True, written=written, attempts=attempt - 1,
            )
        _write_trust(target, file, key)
        written = True
        sleep(delay if attempt > 1 else delay / 4)
    trusted = is_trusted(target, key)
    if not trusted:
        raise SettingsError(
            f"could not make {key} trusted in {file}: something keeps rewriting it "
            f"({attempts} attempts)"
        )
    return TrustResult(
        target=target.label, tool=target.tool, file=str(file), path=key,
        trusted=True, written=written, attempts=attempts,
    )


def _write_trust(target: Target, file: Path, key: str) -> None:
    if target.tool == "claude":
        trust_claude_project(file, key)
    else:
        trust_codex_project(file, key)
