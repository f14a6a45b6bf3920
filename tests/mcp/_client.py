"""A plain JSON-RPC client for ``fleet mcp serve`` over stdio: every frame is visible to the test
(notifications included), nothing of an SDK sits in between."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

FLEET = [sys.executable, "-m", "fleet"]


class McpClient:
    def __init__(self, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [*FLEET, "mcp", "serve", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env={**os.environ, **dict(env or {})}, cwd=cwd,
        )
        self.frames: queue.Queue[dict[str, Any]] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []
        #: every frame the server wrote, in order
        self.received: list[dict[str, Any]] = []
        self._responses: dict[Any, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._ids = iter(range(1, 1_000_000))
        self._stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._errors = threading.Thread(target=self._read_stderr, daemon=True)
        self._errors.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            frame = json.loads(line)
            with self._cond:
                self.received.append(frame)
                if "id" in frame and "method" not in frame:
                    self._responses[frame["id"]] = frame
                else:
                    self.notifications.append(frame)
                self._cond.notify_all()

    def send(self, frame: Mapping[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **frame}) + "\n")
        self.proc.stdin.flush()

    def send_line(self, line: str) -> None:
        """One frame exactly as given (it need not be JSON)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def received_until(self, done: Any, timeout: float) -> list[dict[str, Any]]:
        """The frames received once ``done(frames)`` holds, or when ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not done(self.received) and time.monotonic() < deadline:
                self._cond.wait(min(deadline - time.monotonic(), 0.2))
            return list(self.received)

    def request(self, method: str, params: Mapping[str, Any] | None = None, *,
                timeout: float = 60.0, id: Any = None) -> dict[str, Any]:
        rid = next(self._ids) if id is None else id
        frame: dict[str, Any] = {"id": rid, "method": method}
        if params is not None:
            frame["params"] = dict(params)
        self.send(frame)
        deadline = time.monotonic() + timeout
        with self._cond:
            while rid not in self._responses:
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and rid not in self._responses):
                    raise TimeoutError(f"no answer to {method} ({self.stderr_tail()})")
                self._cond.wait(min(left, 0.2))
            return self._responses.pop(rid)

    def initialize(self, client: str = "claude-code") -> dict[str, Any]:
        answer = self.request("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": client, "version": "1.0"},
        })
        self.send({"method": "notifications/initialized"})
        return answer["result"]  # type: ignore[no-any-return]

    def call(self, name: str, arguments: Mapping[str, Any] | None = None, *,
             timeout: float = 90.0) -> tuple[bool, str]:
        """(is_error, text) of a tool call."""
        answer = self.request("tools/call", {"name": name, "arguments": dict(arguments or {})},
                              timeout=timeout)
        result = answer["result"]
        texts = [c["text"] for c in result["content"] if c["type"] == "text"]
        assert len(texts) == 1, result
        return bool(result.get("isError")), texts[0]

    def ok(self, name: str, arguments: Mapping[str, Any] | None = None, **kw: Any) -> Any:
        error, text = self.call(name, arguments, **kw)
        assert not error, text
        return json.loads(text)

    def channel(self, *, count: int = 1, timeout: float = 20.0) -> list[dict[str, Any]]:
        """The first ``count`` channel notifications (waiting for them)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [n for n in self.notifications
                         if n.get("method") == "notifications/claude/channel"]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    return found
                self._cond.wait(min(left, 0.2))

    def stderr_tail(self) -> str:
        return "".join(self._stderr)[-3000:]

    def close(self, timeout: float = 15.0) -> int:
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"the server outlived its stdin: {self.stderr_tail()}") from None
        finally:
            # the readers end at the server's end of file; then their pipes are closed
            self._reader.join(10)
            self._errors.join(10)
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()


@contextlib.contextmanager
def serving(args: Sequence[str] = (), *, client: str | None = "claude-code",
            env: Mapping[str, str] | None = None,
            cwd: str | os.PathLike[str] | None = None) -> Iterator[McpClient]:
    mcp = McpClient(args, env=env, cwd=cwd)
    try:
        if client is not None:
            mcp.initialize(client)
        yield mcp
    finally:
        code = mcp.close()
        assert code == 0, mcp.stderr_tail()


def fleet_json(*args: str, env: Mapping[str, str] | None = None) -> Any:
    """``fleet ARGS --json``, parsed (whatever its exit code)."""
    done = subprocess.run([*FLEET, *args, "--json"], capture_output=True, text=True,
                          env={**os.environ, **dict(env or {})}, timeout=120, check=False)
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)
