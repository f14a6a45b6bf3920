"""clausona: profiles and quota (``clausona list --json``) and launching on a profile
(``clausona run <profile> -- <tool args>``).

clausona is not a host (it has no workspaces), so this is not an :class:`Adapter`: the host
adapters put the argv built here in front of the agent's own arguments. Facts this relies on
(clausona 0.4): results on stdout, errors on stderr as ``  ✖ <message>`` with exit 1; ``run``
drops only the first ``--`` and exits with the tool's own code; a named profile always runs
whatever its quota; routed forms (``--route``, tool only) exit 75 when no account is available,
having launched nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from fleet._core.routing import Profile
from fleet._errors import ToolError
from fleet._profiles import clausona_binary, load_profiles
from fleet._runner import Completed, Runner, SubprocessRunner

#: ``clausona run`` in a routed form exits with this when no profile has capacity.
NO_CAPACITY_EXIT: Final = 75

class NoCapacity(ToolError):
    """A routed ``clausona run`` found no profile with capacity (exit 75); nothing started."""


class Clausona:
    """clausona through a :class:`Runner` (the binary from ``$FLEET_CLAUSONA`` by default)."""

    name = "clausona"

    def __init__(self, runner: Runner | None = None, *, binary: str | None = None) -> None:
        self.runner = runner or SubprocessRunner()
        self.binary = binary or clausona_binary()

    def profiles(self) -> list[Profile]:
        """Every profile with its quota reading (``clausona list --json``)."""
        return load_profiles(runner=self.runner, binary=self.binary)

    def run_argv(self, profile: str, args: Sequence[str] = ()) -> list[str]:
        """``clausona run <profile> -- <args>``. The ``--`` is always written, so an argument
        starting with ``-`` (or a literal ``--``) reaches the tool unchanged."""
        if not profile or profile.startswith("-"):
            raise ValueError(f"invalid profile name {profile!r}")
        return [self.binary, "run", profile, "--", *args]

    def routed_argv(
        self,
        tool: str,
        args: Sequence[str] = (),
        *,
        route: str | None = None,
        exclude: Sequence[str] = (),
        strategy: str | None = None,
        max_usage: float | None = None,
        fallback: str | None = None,
    ) -> list[str]:
        """``clausona run <tool> [--route R] [--exclude P]... [--strategy S] [--max-usage N]
        [--fallback P] -- <args>``: clausona picks the profile (exit 75 when none has room)."""
        if tool not in ("claude", "codex"):
            raise ValueError(f"tool must be claude or codex, not {tool!r}")
        argv = [self.binary, "run", tool]
        if route:
            argv += ["--route", route]
        for p in exclude:
            argv += ["--exclude", p]
        if strategy:
            argv += ["--strategy", strategy]
        if max_usage is not None:
            argv += ["--max-usage", f"{max_usage:g}"]
        if fallback:
            argv += ["--fallback", fallback]
        return [*argv, "--", *args]

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Completed:
        """Run a ``clausona run`` argv to completion. Exit 75 is :class:`NoCapacity`; exit 1
        with clausona's ``✖`` line is a ToolError; any other code is the tool's and is
        returned for the caller to judge."""
        done = self.runner.run(argv, cwd=cwd, env=env, timeout=timeout)
        return check_run(done)


def check_run(done: Completed) -> Completed:
    """Interpret the exit of a ``clausona run``: 75 means no capacity; 1 with a ``✖`` line on
    stderr is clausona's own error; anything else belongs to the tool."""
    if done.returncode == NO_CAPACITY_EXIT:
        picked = _last_marked(done.stderr, "▸")
        raise NoCapacity(
            "clausona found no profile with capacity (exit 75)"
            + (f": {picked}" if picked else "")
        )
    if done.returncode == 1:
        message = _last_marked(done.stderr, "✖")
        if message:
            raise ToolError(f"clausona run failed: {message}")
    return done


def _last_marked(text: str, mark: str) -> str:
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(mark)]
    return lines[-1].removeprefix(mark).strip() if lines else ""
