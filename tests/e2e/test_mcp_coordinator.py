"""A real agent as the coordinator, calling `fleet mcp serve` (registered by `fleet mcp install`)
as its tools, with a real headless worker it starts: the fake model server scripts the
coordinator's tool calls (start a worker, wait, check, retire, report) and the worker's work, on
one server, keyed by conversation. Claude Code is the coordinator on every pinned release;
Codex too, through its MCP client. A last test records what Claude Code does with the
wake-ups the server pushes (its channel notifications)."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from fleet import Fleet, HookEvent

from ..conftest import Repo
from .binaries import Agents
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI
from .harness import (
    ClaudeSetup,
    CodexSetup,
    Tmux,
    fleet_cli,
)
from .script import Reply, bash, call, say, shell

pytestmark = pytest.mark.e2e

KEY = "sk-fleet-e2e-mcp-worker-5e0c1d2b3a4f"
PUSH = "git push -q -u origin HEAD"
WORK = f"echo hello > hello.txt && git add hello.txt && git commit -qm 'add hello' && {PUSH}"
DONE = "FLEET_WORKER_DONE: added hello.txt"


def coordinator_script(call_tool: Any, worker: str, brief: str, start: Mapping[str, Any],
                       cmds: Sequence[str]) -> list[Reply]:
    """start, wait, check, retire (confirmed: ask mode), report, in the coordinator's calls.
    The first call is harmless: a client that registers tools in the background may not have
    this server's yet."""
    return [
        call_tool("status", {}),
        call_tool("start", {"worker": worker, "brief": brief, **start}),
        call_tool("wait", {"workers": [worker], "timeout": 150}),
        call_tool("check", {"worker": worker, "cmds": list(cmds)}),
        call_tool("retire", {"workers": [worker], "confirm": True}),
        call_tool("report", {"workers": [worker]}),
        say("All workers are retired."),
    ]


def tool_results(requests: Sequence[Any]) -> list[str]:
    """The text of every tool result the coordinator's model was sent, in order (from the
    longest request: it holds the whole conversation)."""
    longest = max(requests, key=lambda r: len(json.dumps(r.json)))
    out: list[str] = []
    for item in longest.json.get("messages") or longest.json.get("input") or []:
        blocks = item.get("content") if isinstance(item, dict) else None
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            blocks = item.get("output")
            if isinstance(blocks, str):
                out.append(blocks)
                continue
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                inner = block.get("content")
                out.append(inner if isinstance(inner, str) else "".join(
                    b.get("text", "") for b in inner or [] if isinstance(b, dict)))
            elif block.get("type") == "input_text" and item.get("type") == "function_call_output":
                out.append(block.get("text", ""))
    return out


def json_in(text: str) -> Any:
    """The JSON value in a tool result (Codex puts a wall-time line before it)."""
    start = min(i for i in (text.find("{"), text.find("[")) if i >= 0)
    return json.loads(text[start:])


def assert_retired(repo: Repo, worker: str, results: Sequence[str]) -> None:
    """What the coordinator was told, and what happened: checked, retired, reported."""
    joined = "\n".join(results)
    assert KEY not in joined
    started = json_in(results[1])
    assert (started["worker"], started["adapter"]) == (worker, "headless"), results[1]
    woke = json_in(results[2])
    assert woke["result"] == "attention", results[2]
    assert [(a["worker"], a["state"]) for a in woke["attention"]] == [(worker, "done")]
    checked = json_in(results[3])
    assert checked["verdict"] == "checked", results[3]
    retired = json_in(results[4])
    assert [(o["worker"], o["retired"]) for o in retired["outcomes"]] == [(worker, True)]
    [line] = json_in(results[5])
    assert (line["worker"], line["verdict"], line["outcome"]) == (worker, "checked", "retired")
    # the report the coordinator got is the report fleet gives
    assert json_in(results[5]) == json.loads(fleet_cli("report", worker, "--json").stdout)
    assert not Path(started["worktree"]).exists()
    assert repo.git("ls-remote", "origin", f"fleet/{worker}")
    assert repo.git("show", f"origin/fleet/{worker}:hello.txt") == "hello"


def settings_file(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "fleet-settings.json"
    path.write_text('{"retire": "ask"}')
    return {"FLEET_SETTINGS": str(path)}


def test_claude_code_coordinates_a_worker_through_fleet_mcp(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, tmp_path: Path
) -> None:
    extra = settings_file(tmp_path)
    fleet_cli("mcp", "install", "--config-dir", str(claude.config_dir), "--repo",
              str(repo.path), "--max-wait", "150", env=extra)
    brief = "task-mcp-w1: add hello.txt saying hello, commit it and push the branch.\n"
    anthropic.script([bash(WORK), say(f"Pushed hello.txt.\n{DONE}")], key="task-mcp-w1")
    start = {"endpoint": anthropic.url, "key_from": "env:FLEET_TEST_KEY"}
    anthropic.script(
        coordinator_script(lambda n, a: call(f"mcp__fleet__{n}", a), "w1", brief, start,
                           ["test -f hello.txt"]),
        key="coordinator-e2e",
    )
    run = claude.headless("coordinator-e2e: run the fleet.", cwd=repo.path, timeout=300,
                          env={"FLEET_TEST_KEY": KEY, **extra})
    assert run.returncode == 0, run.describe()
    assert run.result["result"] == "All workers are retired.", run.describe()
    coordinator = [r for r in anthropic.recorded("main") if r.key == "coordinator-e2e"]
    results = tool_results(coordinator)
    assert len(results) == 6, results
    assert_retired(repo, "w1", results)
    # the worker ran on its endpoint with its own key; the coordinator with its own
    worker = [r for r in anthropic.recorded("main") if r.key == "task-mcp-w1"]
    assert worker and {r.api_key for r in worker} == {KEY}
    assert {r.api_key for r in coordinator} == {claude.api_key}


class NamespacedOpenAI(FakeOpenAI):
    """Codex offers an MCP server's tools as a namespace (``mcp__fleet``) and calls one with
    ``namespace`` and ``name``: a scripted call named ``mcp__fleet::wait`` is sent so."""

    def answer(self, req: Any, out: Any) -> Any:
        return super().answer(req, _Namespacing(out))


class _Namespacing:
    def __init__(self, out: Any) -> None:
        self._out = out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)

    def sse(self, events: Any, **kw: Any) -> None:
        def split(item: Any) -> Any:
            if isinstance(item, dict) and item.get("type") == "function_call" and "::" in str(
                item.get("name")
            ):
                namespace, name = str(item["name"]).split("::", 1)
                return {**item, "namespace": namespace, "name": name}
            return item

        def rewrite() -> Iterator[tuple[str, Any]]:
            for event, raw in events:
                data = raw
                if isinstance(data, dict) and "item" in data:
                    data = {**data, "item": split(data["item"])}
                if isinstance(data, dict) and isinstance(data.get("response"), dict):
                    response = data["response"]
                    data = {**data, "response": {
                        **response, "output": [split(i) for i in response.get("output", [])]}}
                yield event, data

        self._out.sse(rewrite(), **kw)


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    with NamespacedOpenAI() as server:
        yield server


def test_codex_coordinates_a_worker_through_fleet_mcp(
    codex: CodexSetup, openai: FakeOpenAI, repo: Repo, tmp_path: Path
) -> None:
    extra = settings_file(tmp_path)
    fleet_cli("mcp", "install", "--codex-home", str(codex.codex_home), "--repo",
              str(repo.path), "--max-wait", "100", "--env-var", "FLEET_TEST_KEY",
              # the suite's git identity (a user's is in HOME, which Codex passes on)
              "--env-var", "GIT_CONFIG_GLOBAL", "--env-var", "GIT_CONFIG_NOSYSTEM", env=extra)
    brief = "task-mcp-cx: add hello.txt saying hello, commit it and push the branch.\n"
    openai.script([shell(WORK), say(f"Pushed hello.txt.\n{DONE}")], key="task-mcp-cx")
    start = {"tool": "codex", "endpoint": openai.url, "key_from": "env:FLEET_TEST_KEY",
             "model": "fake-model"}
    script = coordinator_script(lambda n, a: call(f"mcp__fleet::{n}", a), "cx", brief, start,
                                ["test -f hello.txt"])
    openai.script(script, key="coordinator-e2e")
    run = codex.exec("coordinator-e2e: run the fleet.", cwd=repo.path, timeout=300,
                     env={"FLEET_TEST_KEY": KEY, **extra})
    assert run.returncode == 0, run.describe()
    calls = [e["item"] for e in run.events if e.get("type") == "item.completed"
             and e.get("item", {}).get("type") == "mcp_tool_call"]
    assert [(c["server"], c["tool"], c["status"]) for c in calls] == [
        ("fleet", n, "completed")
        for n in ("status", "start", "wait", "check", "retire", "report")
    ], run.describe()
    coordinator = [r for r in openai.recorded("main") if r.key == "coordinator-e2e"]
    results = tool_results(coordinator)
    assert len(results) >= 6, results
    assert_retired(repo, "cx", [r for r in results if "{" in r or "[" in r][-6:])
    assert {r.api_key for r in openai.recorded("main") if r.key == "task-mcp-cx"} == {KEY}


def test_what_claude_code_does_with_pushed_wake_ups(
    claude: ClaudeSetup, anthropic: FakeAnthropic, agents: Agents, repo: Repo, tmux: Tmux,
    tmp_path: Path,
) -> None:
    """fleet pushes a channel notification when a worker needs attention. The pinned releases
    connect to it in the handshake era, as channels need, take the notification, and deliver
    none into the session offline: Claude Code gates channels behind Anthropic's feature flag
    (tengu_harbor), which reads as off when nothing could fetch it. This records that, so a
    release that changes it is noticed."""
    printed = json.loads(fleet_cli("mcp", "install", "--print", "--json", "--repo",
                                   str(repo.path)).stdout)
    frames = tmp_path / "server-frames.jsonl"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"fleet": {
        "command": sys.executable,
        "args": [str(Path(__file__).with_name("mcp_tap.py")), str(frames), "--",
                 *printed["command"]],
    }}}))
    fleet_cli("register", "w9", "--worktree", str(repo.path), "--tool", "claude")
    debug = tmp_path / "claude-debug.log"
    anthropic.script([say("Waiting for fleet.")])
    pane = claude.interactive(
        tmux, cwd=repo.path, permission_mode="bypassPermissions",
        args=["--strict-mcp-config", "--mcp-config", str(config), "--debug-file", str(debug),
              "--dangerously-load-development-channels", "server:fleet"],
    )
    gate = wait_for_line(debug, r'MCP server "fleet": Channel notifications (\w+.*)', 60,
                         pane=pane)
    assert gate == "skipped: channels feature is not currently available", gate
    era = wait_for_line(debug, r'MCP server "fleet": Connection established with (.*)', 5)
    assert '"protocolEra":"modern"' not in era  # the handshake era: the one channels need
    # a worker needs attention: the wake-up is pushed to Claude Code, which drops it
    with Fleet() as fleet:
        fleet.record("w9", HookEvent(ts=time.time(), src="claude", hook="Stop",
                                     data={"last_assistant_message": DONE}))
    pushed = wait_for_line(frames, r'("method": ?"notifications/claude/channel".*)', 30)
    assert '"mark":"w9@1"' in pushed.replace(" ", ""), pushed
    pane.type("say hi")
    pane.send("Enter")
    pane.wait_for("Waiting for fleet.", timeout=60)
    sent = json.dumps([r.json for r in anthropic.recorded("main")])
    assert "worker w9 needs attention" not in sent  # the pushed text never reached the model
    assert agents.claude_version in ("2.1.197", "2.1.332"), (
        f"re-check channels on Claude Code {agents.claude_version}: {gate}"
    )


def wait_for_line(path: Path, pattern: str, timeout: float, pane: Any = None) -> str:
    """The first match of ``pattern`` in a file; with ``pane``, accepting the warning about
    development channels (its first choice) if the release shows one."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    accepted = False
    while time.monotonic() < deadline:
        if pane is not None and not accepted and "local channel development" in pane.screen():
            pane.send("Enter")
            accepted = True
        with contextlib.suppress(OSError):
            for line in path.read_text(errors="replace").splitlines():
                match = rx.search(line)
                if match:
                    return match.group(1)
        time.sleep(0.1)
    raise TimeoutError(f"{path} never logged {pattern!r}")
