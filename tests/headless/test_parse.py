"""Parsing what agents print, and judging it: success is is_error plus the exit code."""

from __future__ import annotations

import json
import random

import pytest

from fleet._core.limits import find_reset
from fleet._core.results import (
    RESULT_HEAD,
    RESULT_TAIL,
    classify,
    cut_result,
    find_status,
    parse_claude,
    parse_codex,
)
from fleet._supervisor import backoff_delay

NOW = 1_800_000_000.0


def claude_result(**kw: object) -> str:
    base: dict[str, object] = {
        "type": "result", "subtype": "success", "is_error": False, "result": "done",
        "session_id": "s-1", "usage": {"input_tokens": 7, "output_tokens": 3,
                                        "server_tool_use": {"web_search_requests": 0}},
    }
    base.update(kw)
    return json.dumps(base)


def test_claude_success() -> None:
    out = parse_claude(claude_result(result="all good\nFLEET_WORKER_DONE: x"), "", 0, NOW)
    assert out.kind == "ok"
    assert out.is_error is False
    assert out.session_id == "s-1"
    assert out.usage == {"input_tokens": 7, "output_tokens": 3}
    assert out.result is not None and out.result.endswith("FLEET_WORKER_DONE: x")


def test_claude_overload_says_success_in_subtype_but_is_an_error() -> None:
    text = claude_result(is_error=True, api_error_status=529, result="API Error: Overloaded")
    out = parse_claude(text, "", 1, NOW)
    assert out.kind == "transient"
    assert out.is_error is True
    assert out.api_error_status == 529


def test_claude_is_error_with_exit_zero_is_not_success() -> None:
    out = parse_claude(claude_result(is_error=True, result="boom"), "", 0, NOW)
    assert out.kind == "error"
    assert out.is_error is True


def test_claude_exit_code_alone_fails_a_run() -> None:
    out = parse_claude(claude_result(), "", 2, NOW)
    assert out.kind == "error"
    assert out.is_error is True


def test_claude_auth_is_not_transient() -> None:
    text = claude_result(is_error=True, api_error_status=401,
                         result="API Error: 401 token expired or incorrect")
    assert parse_claude(text, "", 1, NOW).kind == "auth"


def test_claude_usage_limit_with_reset_epoch() -> None:
    text = claude_result(is_error=True, api_error_status=429,
                         result="Claude AI usage limit reached|1800003600")
    out = parse_claude(text, "", 1, NOW)
    assert out.kind == "limit"
    assert out.reset_at == 1800003600.0


def test_claude_no_output_reads_stderr() -> None:
    out = parse_claude("", "Error: Connection error.\n", 1, NOW)
    assert out.kind == "transient"
    assert out.is_error is True
    out = parse_claude("", "Error: something else entirely\n", 1, NOW)
    assert out.kind == "error"


def test_claude_stream_json_takes_the_last_result() -> None:
    lines = [
        json.dumps({"type": "system", "subtype": "init", "session_id": "s-2"}),
        json.dumps({"type": "assistant", "message": {"content": []}}),
        claude_result(session_id="s-2", result="FLEET_WORKER_BLOCKED: need a key"),
    ]
    out = parse_claude("\n".join(lines) + "\n", "", 0, NOW)
    assert out.kind == "ok"
    assert out.session_id == "s-2"
    assert out.result == "FLEET_WORKER_BLOCKED: need a key"


def codex_events(*events: dict[str, object]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def test_codex_success_sums_usage_and_keeps_last_message() -> None:
    text = codex_events(
        {"type": "thread.started", "thread_id": "t-1"},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "first"}},
        {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 1}},
        {"type": "item.completed",
         "item": {"type": "agent_message", "text": "FLEET_WORKER_DONE: y"}},
        {"type": "turn.completed", "usage": {"input_tokens": 6, "output_tokens": 2}},
    )
    out = parse_codex(text, "", 0, NOW)
    assert out.kind == "ok"
    assert out.session_id == "t-1"
    assert out.result == "FLEET_WORKER_DONE: y"
    assert out.usage == {"input_tokens": 11, "output_tokens": 3}


@pytest.mark.parametrize(
    ("message", "kind", "status"),
    [
        ("unexpected status 529 Overloaded: server busy", "transient", 529),
        ("exceeded retry limit, last status: 429 Too Many Requests", "limit", 429),
        ("unexpected status 401 Unauthorized: bad key", "auth", 401),
        ("You've hit your usage limit. Try again in 2 hours", "limit", None),
        ("stream disconnected before completion", "transient", None),
    ],
)
def test_codex_failures(message: str, kind: str, status: int | None) -> None:
    text = codex_events(
        {"type": "thread.started", "thread_id": "t-2"},
        {"type": "turn.failed", "error": {"message": message}},
    )
    out = parse_codex(text, "", 1, NOW)
    assert (out.kind, out.api_error_status) == (kind, status)
    assert out.is_error is True
    assert out.session_id == "t-2"


def test_find_reset_forms() -> None:
    assert find_reset("limit reached|1800000900", NOW) == 1800000900.0
    assert find_reset("try again in 2 hours 30 minutes", NOW) == NOW + 9000
    assert find_reset("Rate limited; retry after 45s", NOW) == NOW + 45
    assert find_reset("usage limit resets at 2027-01-15T09:00:00Z", NOW) == NOW + 3600
    assert find_reset("usage limit reached", NOW) is None


def test_find_status() -> None:
    assert find_status("API Error: 529 {\"type\":\"overloaded_error\"}") == 529
    assert find_status("status code 503 from upstream") == 503
    assert find_status("no number here") is None


def test_classify_never_trusts_subtype_alone() -> None:
    assert classify(exit_code=0, is_error=False, status=None, text="") == "ok"
    assert classify(exit_code=1, is_error=False, status=None, text="") == "error"
    assert classify(exit_code=0, is_error=True, status=529, text="") == "transient"


def test_cut_result_keeps_the_envelope() -> None:
    text = "x" * 20000 + "\nFLEET_WORKER_DONE: kept"
    cut = cut_result(text)
    assert cut is not None
    assert len(cut) < RESULT_HEAD + RESULT_TAIL + 10
    assert cut.endswith("FLEET_WORKER_DONE: kept")
    assert cut_result("short") == "short"


def test_backoff_is_jittered_exponential_and_capped() -> None:
    rng = random.Random(7)
    for attempt, ceiling in [(1, 2.0), (2, 4.0), (3, 8.0), (6, 30.0)]:
        delays = [backoff_delay(attempt, 2.0, 30.0, rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1
