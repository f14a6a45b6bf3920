"""The shapes of Claude Code's ``stream-json`` output and of ``codex exec --json``, measured on
every pinned release and kept in ``tests/e2e/stream/<agent>-<version>-stream.json``: a new
release that adds, drops or retypes a line or a field fleet's stream reader looks at fails
here, visibly, before it misleads a fold. ``FLEET_RECORD_STREAM=1`` rewrites the file of
the release under test.

Each run also goes through :class:`fleet._core.stream.StreamReader`: the facts it takes from
the real output are the ones the hooks would give."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from fleet._core.events import Event, HookEvent, RateLimited, TurnEnded
from fleet._core.stream import StreamReader

from ..conftest import Repo
from .binaries import Agents
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI
from .harness import ClaudeSetup, CodexSetup
from .script import Reply, bash, error, say, shell
from .test_claude_failures import usage_limit

pytestmark = pytest.mark.e2e

REFERENCE = Path(__file__).parent / "stream"
RESET_IN = 7200


def warning_headers(reset: int) -> dict[str, str]:
    return {"anthropic-ratelimit-unified-status": "allowed_warning",
            "anthropic-ratelimit-unified-reset": str(reset),
            "anthropic-ratelimit-unified-5h-status": "allowed_warning",
            "anthropic-ratelimit-unified-5h-reset": str(reset),
            "anthropic-ratelimit-unified-5h-utilization": "0.85",
            "anthropic-ratelimit-unified-representative-claim": "five_hour"}


def cases(reset: int) -> dict[str, tuple[list[Reply], bool, str, dict[str, str]]]:
    """name: the model's replies, a subscriber's login, the permission mode, extra env."""
    simple = {"CLAUDE_CODE_SIMPLE": "1"}
    return {
        "tool-done": ([bash("echo hi > x.txt"), say("ok\nFLEET_WORKER_DONE: wrote x")],
                      False, "bypassPermissions", simple),
        "denied": ([bash("touch /etc/fleet-e2e-nope"), say("FLEET_WORKER_BLOCKED: need it")],
                   False, "dontAsk", simple),
        "overloaded": ([error(529)], False, "bypassPermissions", simple),
        "api-rate-limit": ([error(429, "Rate limited", error_type="rate_limit_error")], False,
                           "bypassPermissions", simple),
        # a subscriber's runs (bare mode takes no OAuth login: measured "Not logged in")
        "subscriber-warning": ([Reply(text="ok\nFLEET_WORKER_DONE: fine",
                                      headers=warning_headers(reset))],
                               True, "bypassPermissions", {}),
        "subscriber-limit": ([usage_limit(reset)], True, "bypassPermissions", {}),
    }


def kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return type(value).__name__.replace("str", "string").replace("dict", "object")


#: Nested objects whose keys fleet's reader looks at.
NESTED = ("message", "rate_limit_info", "origin")


def shape(obj: dict[str, Any]) -> dict[str, Any]:
    """The keys of a stream line and the kinds of their values, and those of the nested
    objects the reader uses (list items of a message's content by their own type)."""
    out: dict[str, Any] = {k: kind(v) for k, v in sorted(obj.items())}
    for name in NESTED:
        inner = obj.get(name)
        if isinstance(inner, dict):
            out[name] = {k: kind(v) for k, v in sorted(inner.items())}
            content = inner.get("content")
            if isinstance(content, list):
                out[f"{name}.content"] = sorted({
                    f"{b.get('type')}:{','.join(sorted(b))}" for b in content
                    if isinstance(b, dict)})
    denials = obj.get("permission_denials")
    if isinstance(denials, list) and denials:
        out["permission_denials[]"] = sorted({",".join(sorted(d)) for d in denials
                                              if isinstance(d, dict)})
    return out


def label(obj: dict[str, Any]) -> str:
    return "/".join(str(p) for p in (obj.get("type"), obj.get("subtype")) if p)


def measure(stdout: str) -> tuple[list[str], dict[str, Any]]:
    lines = [json.loads(raw) for raw in stdout.splitlines() if raw.strip().startswith("{")]
    order = [label(o) for o in lines]
    shapes: dict[str, Any] = {}
    for obj in lines:
        # one shape per kind of line: every line of a kind must have it
        shapes.setdefault(label(obj), shape(obj))
    return order, shapes


def facts(stdout: str) -> list[Event]:
    reader = StreamReader("claude")
    out: list[Event] = []
    for raw in stdout.encode().splitlines():
        out += reader.feed(raw, time.time())
    return out


def names(events: list[Event]) -> list[str]:
    return [e.hook if isinstance(e, HookEvent) else type(e).__name__ for e in events]


#: What the reader must take from each case, on every release.
EXPECTED_FACTS = {
    "tool-done": ["SessionStart", "PreToolUse", "TurnEnded"],
    "denied": ["SessionStart", "PreToolUse", "TurnEnded"],
    "overloaded": ["SessionStart"],
    "api-rate-limit": ["SessionStart", "StopFailure"],
    "subscriber-warning": ["SessionStart", "RateLimited", "TurnEnded"],
    "subscriber-limit": ["SessionStart", "RateLimited", "StopFailure"],
}


def test_stream_shapes_match_the_recorded_release(
    claude: ClaudeSetup, anthropic: FakeAnthropic, repo: Repo, agents: Agents
) -> None:
    reset = int(time.time()) + RESET_IN
    measured: dict[str, Any] = {}
    for name, (replies, subscription, mode, env) in cases(reset).items():
        anthropic.script(replies, key=f"case-{name}")
        run = claude.headless(f"case-{name}: go", cwd=repo.path, subscription=subscription,
                              permission_mode=mode, env=env,
                              args=["--output-format", "stream-json", "--verbose"])
        order, shapes = measure(run.stdout)
        measured[name] = {"order": order, "shapes": shapes}
        got = facts(run.stdout)
        assert names(got) == EXPECTED_FACTS[name], (name, got, run.describe())
        if name == "denied":
            [turn] = [e for e in got if isinstance(e, TurnEnded)]
            assert turn.denials == ("Bash(touch /etc/fleet-e2e-nope)",)
        if name.startswith("subscriber"):
            [rate] = [e for e in got if isinstance(e, RateLimited)]
            assert rate.status == ("rejected" if name.endswith("limit") else "allowed")
            assert rate.resets_at == reset and rate.limit_type == "five_hour"
    path = REFERENCE / f"claude-code-{agents.claude_version}-stream.json"
    if os.environ.get("FLEET_RECORD_STREAM") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(measured, indent=2, sort_keys=True) + "\n")
    recorded = json.loads(path.read_text())
    for name in measured:
        assert measured[name]["order"] == recorded[name]["order"], name
        for line, fields in recorded[name]["shapes"].items():
            assert measured[name]["shapes"].get(line) == fields, (name, line)
        assert measured[name]["shapes"].keys() == recorded[name]["shapes"].keys(), name


CODEX_EXPECTED = {
    "tool-done": ["SessionStart", "PreToolUse", "TurnEnded"],
    "usage-limit": ["SessionStart", "StopFailure"],
}


def codex_label(obj: dict[str, Any]) -> str:
    item = obj.get("item")
    kind = str(obj.get("type"))
    return f"{kind}/{item.get('type')}" if isinstance(item, dict) else kind


def codex_shape(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: kind(v) for k, v in sorted(obj.items())}
    for name in ("item", "error", "usage"):
        inner = obj.get(name)
        if isinstance(inner, dict):
            out[name] = {k: kind(v) for k, v in sorted(inner.items())}
    return out


def test_codex_stream_shapes_match_the_recorded_release(
    codex: CodexSetup, openai: FakeOpenAI, repo: Repo, agents: Agents
) -> None:
    codex.prepare()
    codex.trust(repo.path)
    runs = {
        "tool-done": [shell("echo hi > x.txt"), say("ok\nFLEET_WORKER_DONE: wrote x")],
        "usage-limit": [error(429, "You exceeded your current quota",
                              error_type="usage_limit_reached")],
    }
    measured: dict[str, Any] = {}
    for name, replies in runs.items():
        openai.script(replies, key=f"case-{name}")
        run = codex.exec(f"case-{name}: go", cwd=repo.path, args=["--disable", "hooks"])
        lines = [json.loads(raw) for raw in run.stdout.splitlines()
                 if raw.strip().startswith("{")]
        shapes: dict[str, Any] = {}
        for obj in lines:
            shapes.setdefault(codex_label(obj), codex_shape(obj))
        measured[name] = {"order": [codex_label(o) for o in lines], "shapes": shapes}
        reader = StreamReader("codex")
        got = [e for raw in run.stdout.encode().splitlines() for e in reader.feed(raw, 1.0)]
        assert names(got) == CODEX_EXPECTED[name], (name, got, run.describe())
    path = REFERENCE / f"codex-{agents.codex_version}-stream.json"
    if os.environ.get("FLEET_RECORD_STREAM") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(measured, indent=2, sort_keys=True) + "\n")
    assert measured == json.loads(path.read_text())
