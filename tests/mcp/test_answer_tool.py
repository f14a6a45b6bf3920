"""The MCP ``answer`` tool: a coordinator agent answers a worker's waiting permission request
through the same library call as ``fleet answer``; the hook hands the decision to the agent."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._answer import open_requests
from fleet._core.events import Answered
from fleet._home import resolve_home
from fleet._hook_command import hook_argv
from tests.conftest import Repo

from ._client import serving
from .test_server import worktree

PAYLOAD = {"session_id": "s1", "hook_event_name": "PermissionRequest", "tool_name": "Bash",
           "permission_mode": "default",
           "tool_input": {"command": "make deploy", "description": "Deploy"}}


@pytest.fixture
def waiting(repo: Repo) -> Iterator[subprocess.Popen[bytes]]:
    path = worktree(repo, "w1")
    home = resolve_home(None)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FLEET_HOME": str(home),
           "CLAUDE_PROJECT_DIR": str(path), "FLEET_ANSWER_TIMEOUT": "60"}
    proc = subprocess.Popen(hook_argv("claude", home=home), env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({**PAYLOAD, "cwd": str(path)}).encode())
    proc.stdin.close()
    proc.stdin = None
    deadline = time.monotonic() + 30
    while not open_requests(home, "w1"):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def decision(proc: subprocess.Popen[bytes]) -> dict[str, object]:
    out, _ = proc.communicate(timeout=30)
    value: dict[str, object] = json.loads(out)["hookSpecificOutput"]["decision"]
    return value


def answers() -> list[Answered]:
    with Fleet() as fleet:
        return [e for e in fleet.log("w1") if isinstance(e, Answered)]


def test_the_answer_tool_denies_with_a_reason(repo: Repo,
                                              waiting: subprocess.Popen[bytes]) -> None:
    with serving(["--repo", str(repo.path)]) as mcp:
        status = mcp.ok("wait", {"workers": ["w1"], "timeout": 5})
        (row,) = status["attention"]
        assert (row["permission_tool"], row["permission_command"]) == ("Bash", "make deploy")

        got = mcp.ok("answer", {"worker": "w1", "decision": "deny",
                                "reason": "deploys wait for the release"})

        assert got["decision"] == "deny" and got["request"] == row["permission_request"]
        assert decision(waiting) == {"behavior": "deny",
                                     "message": "deploys wait for the release"}
        (given,) = answers()
        assert given.by.startswith("mcp:")
        error, text = mcp.call("answer", {"worker": "w1", "decision": "allow",
                                          "request": row["permission_request"]})
        assert error and "already answered" in text and "\n" not in text


def test_the_answer_tool_allows(repo: Repo, waiting: subprocess.Popen[bytes]) -> None:
    with serving(["--repo", str(repo.path)]) as mcp:
        assert mcp.ok("answer", {"worker": "w1", "decision": "allow"})["decision"] == "allow"
        assert decision(waiting) == {"behavior": "allow"}
        for bad, message in (({"worker": "w1", "decision": "maybe"}, "decision must be one of"),
                             ({"worker": "w1"}, "decision"),
                             ({"worker": "w1", "decision": "allow", "request": "x/../y"},
                              "not a request id")):
            error, text = mcp.call("answer", bad)
            assert error and message in text, text


def test_the_answer_tool_stays_in_scope(repo: Repo, tmp_path: Path,
                                        waiting: subprocess.Popen[bytes]) -> None:
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    with serving(["--repo", str(other)]) as mcp:
        error, text = mcp.call("answer", {"worker": "w1", "decision": "allow"})
    assert error, text
    assert answers() == []
