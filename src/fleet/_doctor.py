"""What `fleet doctor` checks of the set-up, beyond the journals: the agents it can find and
their releases, each config dir's and profile's hook, a launcher whose fleet is gone, the fleet
home's modes, and a `fleet` on PATH that is not this one. Each finding says what to do."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

import attrs

from fleet import _agents, _hook_install
from fleet._hook_command import LAUNCHER_MISSED
from fleet._runner import Runner, SubprocessRunner

#: How to get each agent, for a finding that it is missing.
AGENT_INSTALL: Final = {
    "claude": "npm install -g @anthropic-ai/claude-code",
    "codex": "npm install -g @openai/codex",
}


@attrs.frozen(kw_only=True)
class Finding:
    """Something wrong with the set-up, and the command or step that fixes it. Not ``serious``
    findings are warnings: they do not make `fleet doctor` fail."""

    problem: str
    fix: str
    serious: bool = True


@attrs.frozen(kw_only=True)
class Agent:
    tool: str
    path: str | None
    version: str | None


def codex_version(codex: str, *, runner: Runner | None = None) -> str | None:
    """``codex --version``'s release ("0.171.0" of "codex-cli 0.171.0"), or None."""
    runner = runner or SubprocessRunner()
    try:
        result = runner.run([codex, "--version"], timeout=30)
    except (OSError, RuntimeError):
        return None
    words = result.stdout.split() if result.ok else []
    found = [w for w in words if _agents.version_tuple(w)]
    return found[0] if found else None


def find_agents(*, runner: Runner | None = None) -> tuple[Agent, ...]:
    claude = _agents.find_claude()
    codex = _agents.find_codex()
    return (
        Agent(tool="claude", path=claude,
              version=_agents.claude_version(claude, runner=runner) if claude else None),
        Agent(tool="codex", path=codex,
              version=codex_version(codex, runner=runner) if codex else None),
    )


def agent_findings(agents: Sequence[Agent]) -> list[Finding]:
    missing = [a for a in agents if a.path is None]
    if len(missing) == len(agents):
        return [Finding(
            problem="no agent CLI found: neither claude nor codex is on PATH ($FLEET_CLAUDE and "
            "$FLEET_CODEX name others)",
            fix=f"install one: {AGENT_INSTALL['claude']} (or {AGENT_INSTALL['codex']})",
        )]
    out = [Finding(problem=f"{a.tool} is not on PATH: workers on {a.tool} profiles cannot start",
                   fix=AGENT_INSTALL[a.tool], serious=False) for a in missing]
    out += [Finding(problem=f"{a.tool} at {a.path} does not say its release (--version)",
                    fix=f"run `{a.path} --version` to see why", serious=False)
            for a in agents if a.path is not None and a.version is None]
    return out


def target_flag(target: _hook_install.Target) -> str:
    """The option that names ``target`` on fleet's command line."""
    if target.profile:
        return f"--profile {shlex.quote(target.profile)}"
    flag = "--config-dir" if target.tool == "claude" else "--codex-home"
    return f"{flag} {shlex.quote(str(target.config_dir))}"


def hook_findings(
    targets: Iterable[_hook_install.Target], statuses: Iterable[_hook_install.Status]
) -> list[Finding]:
    out = []
    for target, status in zip(targets, statuses, strict=True):
        for problem in status.problems:
            moved = "launcher" in problem or "is gone" in problem
            fix = ("fleet hooks install   # repoints every config dir at this fleet" if moved
                   else f"fleet hooks install {target_flag(target)}")
            out.append(Finding(problem=f"{status.target}: {problem}", fix=fix))
    return out


def nothing_set_up() -> Finding:
    return Finding(
        problem="nothing to check: no Claude Code config dir (~/.claude), no Codex home "
        "(~/.codex) and no profile",
        fix="run claude (or codex) once, then `fleet hooks install --config-dir ~/.claude`; "
        "or add a profile: `fleet profiles add NAME --config-dir DIR`",
    )


def launcher_findings(home: Path) -> list[Finding]:
    try:
        missed = (home / LAUNCHER_MISSED).stat().st_mtime
    except OSError:
        return []
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(missed))
    return [Finding(
        problem=f"the hook found no fleet to run (last at {when}): fleet was moved or removed "
        "after `fleet hooks install`, and hook events since were not recorded",
        fix="fleet hooks install   # from the fleet you use now: repoints every config dir",
    )]


def mode_findings(home: Path) -> list[Finding]:
    """A fleet home or journal others can read: journals hold prompts and the agents' words."""
    out = []
    loose: list[str] = []
    for path in (home, home / "workers"):
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            continue
        if mode & 0o077:
            loose.append(f"{path} ({mode:o})")
    if loose:
        out.append(Finding(
            problem=f"others may read the fleet home: {', '.join(loose)}",
            fix=f"chmod 700 {shlex.quote(str(home))} {shlex.quote(str(home / 'workers'))}",
            serious=False,
        ))
    return out


def path_findings() -> list[Finding]:
    """A `fleet` on PATH that runs another installation than this one (a moved or second
    venv): commands typed then act with another fleet's code and hook."""
    found = shutil.which("fleet")
    if found is None:
        return [Finding(
            problem="`fleet` is not on PATH: a bare `fleet` will not find this one (its "
            f"interpreter is {sys.executable})",
            fix="install it as a command: `pipx install /path/to/fleet` (or `uv tool install "
            "/path/to/fleet`)",
            serious=False,
        )]
    try:
        with open(found, "rb") as f:
            first = f.readline(4096)
    except OSError:
        return []
    if not first.startswith(b"#!"):
        return []
    interpreter = first[2:].decode("utf-8", "replace").strip().split()[0:1]
    if not interpreter:
        return []
    # Compared as written, not resolved: every venv's python links to the same base one.
    theirs = os.path.normpath(interpreter[0])
    if theirs != os.path.normpath(sys.executable) and Path(theirs).is_absolute():
        return [Finding(
            problem=f"`fleet` on PATH ({found}) runs another installation "
            f"({interpreter[0]}) than this one ({sys.executable})",
            fix="use one fleet: remove the other, or put this one first on PATH",
            serious=False,
        )]
    return []
