"""A client of ``codex app-server``, asking Codex itself which hooks it knows and trusts.

``codex app-server`` speaks JSON-RPC, one message a line, on stdin/stdout, and answers only while
its stdin is open, so this drives it: ``initialize``, ``initialized``, then ``hooks/list`` for one
directory. fleet runs it as its own process (``python -I <this file> CODEX CWD SECONDS``), since a
:class:`fleet._runner.Runner` runs commands to completion and a test can stand one in; it prints
the hooks as a JSON list, or exits non-zero with a one-line reason.

Only the standard library is used, so the file runs as it is under ``-I``, wherever fleet is
installed (``python -m fleet._codex_app_server`` works too).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import IO, Any, Final

USAGE: Final = "usage: _codex_app_server.py CODEX CWD SECONDS"
POLL: Final = 0.2


class AppServerError(RuntimeError):
    """``codex app-server`` did not answer, or answered with an error."""


def hooks_list(codex: str, cwd: str, limit: float) -> list[dict[str, Any]]:
    """The hooks Codex lists for ``cwd`` (each with its ``key``, ``command``, ``currentHash`` and
    ``trustStatus``), asked within ``limit`` seconds. Codex reads ``$CODEX_HOME`` from the
    environment this process was given."""
    try:
        proc = subprocess.Popen(
            [codex, "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        raise AppServerError(f"cannot run {codex} app-server: {exc.strerror or exc}") from None
    assert proc.stdin is not None and proc.stdout is not None
    deadline = time.monotonic() + limit
    lines = _Lines(proc.stdout)
    try:
        _send(proc.stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"clientInfo": {"name": "fleet", "version": "1"}}})
        if _reply(lines, 1, deadline) is None:
            raise AppServerError("codex app-server did not answer initialize")
        _send(proc.stdin, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        _send(proc.stdin, {"jsonrpc": "2.0", "id": 2, "method": "hooks/list",
                           "params": {"cwds": [cwd]}})
        answer = _reply(lines, 2, deadline)
        if answer is None:
            raise AppServerError("codex app-server did not answer hooks/list")
        if "error" in answer:
            raise AppServerError("codex app-server: " + json.dumps(answer["error"])[:300])
        return _hooks_of(answer)
    except BrokenPipeError:
        # Codex exited before reading what it was sent.
        raise AppServerError("codex app-server exited before it answered") from None
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()


def _send(stdin: IO[bytes], message: dict[str, Any]) -> None:
    stdin.write((json.dumps(message) + "\n").encode())
    stdin.flush()


class _Lines:
    """The lines of a pipe, read straight from its descriptor: a buffered reader would hold
    lines that ``select`` cannot see, and a reply that came in the same chunk as a notification
    before it would wait for the deadline."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._fd = stream.fileno()
        self._pending = b""
        self._ended = False

    def next(self, deadline: float) -> bytes | None:
        """The next line; None at the deadline or the end of the output."""
        while b"\n" not in self._pending:
            if self._ended:
                line, self._pending = self._pending, b""
                return line or None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._fd], [], [], min(POLL, left))
            if ready:
                chunk = os.read(self._fd, 1 << 16)
                self._ended = not chunk
                self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line


def _reply(lines: _Lines, want: int, deadline: float) -> dict[str, Any] | None:
    """The message answering request ``want``; None at the deadline or the end of the output.
    Notifications and lines that are not JSON are passed over."""
    while (line := lines.next(deadline)) is not None:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("id") == want:
            return message
    return None


def _hooks_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        entries = answer["result"]["data"]
        return [h for entry in entries for h in entry.get("hooks", [])]
    except (KeyError, TypeError, AttributeError):
        raise AppServerError("codex app-server: hooks/list gave no list of hooks") from None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3:
        print(USAGE, file=sys.stderr)
        return 2
    codex, cwd, limit = args
    try:
        hooks = hooks_list(codex, cwd, float(limit))
    except (AppServerError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps(hooks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
