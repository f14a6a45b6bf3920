"""Every subprocess fleet runs goes through a :class:`Runner`, so tests can swap in a
:class:`MockRunner` instead of real git, clausona, superset or herdr binaries (the way httpx
takes a ``MockTransport``)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import attrs

from fleet._errors import ToolError


@attrs.frozen(kw_only=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def check(self, what: str | None = None) -> Completed:
        """Raise ToolError with the command's last stderr line unless it succeeded."""
        if self.returncode != 0:
            lines = self.stderr.strip().splitlines() or self.stdout.strip().splitlines()
            detail = lines[-1] if lines else ""
            name = what or " ".join(self.argv[:2])
            raise ToolError(f"{name} failed (exit {self.returncode}): {detail.strip()}")
        return self


class Runner(Protocol):
    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float | None = 60.0,
    ) -> Completed:
        """Run a command to completion. ``env`` replaces the environment when given."""
        ...


class SubprocessRunner:
    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float | None = 60.0,
    ) -> Completed:
        try:
            proc = subprocess.run(
                list(argv),
                cwd=cwd,
                env=dict(env) if env is not None else None,
                input=input,
                capture_output=True,
                text=True,
                # A file name or an output that is not UTF-8 must not crash a guard: its bytes
                # survive the round trip (os.fsencode gives them back) and the caller decides
                # how to show them.
                errors="surrogateescape",
                timeout=timeout,
                stdin=None if input is not None else subprocess.DEVNULL,
                check=False,
            )
        except FileNotFoundError as exc:
            raise ToolError(f"{argv[0]} not found: is it installed and on PATH?") from exc
        except subprocess.TimeoutExpired as exc:
            raise ToolError(f"{Path(argv[0]).name} timed out after {timeout:g}s") from exc
        return Completed(
            argv=tuple(argv), returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr
        )


Handler = Callable[[tuple[str, ...], Mapping[str, object]], Completed | tuple[int, str, str]]


class MockRunner:
    """A runner that answers from a handler instead of running anything, and records calls.

    The handler gets ``(argv, options)`` and returns a :class:`Completed` or a
    ``(returncode, stdout, stderr)`` tuple."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.calls: list[tuple[tuple[str, ...], dict[str, object]]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float | None = 60.0,
    ) -> Completed:
        options: dict[str, object] = {"cwd": cwd, "env": env, "input": input, "timeout": timeout}
        call = tuple(argv)
        self.calls.append((call, options))
        result = self.handler(call, options)
        if isinstance(result, Completed):
            return result
        code, out, err = result
        return Completed(argv=call, returncode=code, stdout=out, stderr=err)
