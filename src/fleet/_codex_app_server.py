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
    try:
        _send(proc.stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"clientInfo": {"name": "fleet", "version": "1"}}})
        if _reply(proc.stdout, 1, deadline) is None:
            raise AppServerError("codex app-server did not answer initialize")
        _send(proc.stdin, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        _send(proc.stdin, {"jsonrpc": "2.0", "id": 2, "method": "hooks/list",
                           "params": {"cwds": [cwd]}})
        answer = _reply(proc.stdout, 2, deadline)
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


def _reply(stdout: IO[bytes], want: int, deadline: float) -> dict[str, Any] | None:
    """The message answering request ``want``; None at the deadline or the end of the output.
    Notifications and lines that are not JSON are passed over."""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stdout], [], [], POLL)
        if not ready:
            continue
        line = stdout.readline()
        if not line:
            return None
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
