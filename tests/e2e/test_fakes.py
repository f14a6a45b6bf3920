"""The fake model servers themselves, spoken to over HTTP (no agent CLI needed)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI, responses_so_far
from .script import ToolCall, bash, calls, error, say, shell


def sse(text: str) -> list[tuple[str, Any]]:
    out = []
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant() -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": "x"}]}


TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}}]


def test_anthropic_streams_the_scripted_step(anthropic: FakeAnthropic) -> None:
    anthropic.script([bash("true"), say("Finished.\nFLEET_WORKER_DONE: ok")])
    with httpx.Client(base_url=anthropic.url) as client:
        assert client.head("/").status_code == 200
        first = client.post("/v1/messages?beta=true", headers={"x-api-key": "k1"},
                            json={"model": "m", "stream": True, "tools": TOOLS,
                                  "messages": [user("go")]})
        second = client.post("/v1/messages", headers={"authorization": "Bearer k2"},
                             json={"model": "m", "stream": True, "tools": TOOLS,
                                   "messages": [user("go"), assistant(), user("result")]})
    events = sse(first.text)
    assert [name for name, _ in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]
    block = events[1][1]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "Bash"
    assert json.loads(events[2][1]["delta"]["partial_json"])["command"] == "true"
    assert events[4][1]["delta"]["stop_reason"] == "tool_use"
    final = sse(second.text)
    assert final[2][1]["delta"]["text"] == "Finished.\nFLEET_WORKER_DONE: ok"
    assert final[4][1]["delta"]["stop_reason"] == "end_turn"
    assert [r.step for r in anthropic.recorded("main")] == [0, 1]
    assert anthropic.api_keys() == ["k1", "k2"]
    assert [r.kind for r in anthropic.recorded()] == ["probe", "main", "main"]


def test_anthropic_errors_side_calls_and_keys(anthropic: FakeAnthropic) -> None:
    anthropic.script([error(529)])
    anthropic.script([say("for task b")], key="task-b")
    with httpx.Client(base_url=anthropic.url) as client:
        overloaded = client.post("/v1/messages", json={"model": "m", "stream": True,
                                                       "tools": TOOLS, "messages": [user("a")]})
        keyed = client.post("/v1/messages", json={"model": "m", "stream": True, "tools": TOOLS,
                                                  "messages": [user("do task-b now")]})
        side = client.post("/v1/messages", json={"model": "small", "messages": [user("title")]})
        past_end = client.post("/v1/messages", json={
            "model": "m", "stream": True, "tools": TOOLS,
            "messages": [user("task-b"), assistant(), user("more")]})
    assert overloaded.status_code == 529
    assert overloaded.json() == {"type": "error", "error": {"type": "overloaded_error",
                                                            "message": "Overloaded"}}
    assert sse(keyed.text)[2][1]["delta"]["text"] == "for task b"
    assert side.json()["content"] == [{"type": "text", "text": "Fleet task"}]
    assert sse(past_end.text)[2][1]["delta"]["text"] == "OK."
    assert [(r.kind, r.key) for r in anthropic.recorded()] == [
        ("main", None), ("main", "task-b"), ("side", None), ("main", "task-b")]


def test_anthropic_auth_error_body() -> None:
    with FakeAnthropic() as server:
        server.script([error(401)])
        reply = httpx.post(f"{server.url}/v1/messages", json={
            "model": "m", "stream": True, "tools": TOOLS, "messages": [user("x")]})
    assert reply.status_code == 401
    assert reply.json()["error"]["type"] == "authentication_error"


def test_openai_function_calls_then_message(openai: FakeOpenAI) -> None:
    openai.script([calls(ToolCall(name="exec_command", input={"cmd": "true"}),
                         ToolCall(name="exec_command", input={"cmd": "ls"})),
                   say("done")])
    prompt = [{"type": "message", "role": "user", "content": [{"type": "input_text",
                                                               "text": "go"}]}]
    with httpx.Client(base_url=openai.url) as client:
        first = sse(client.post("/v1/responses", json={"model": "fm", "input": prompt}).text)
        done = [e["item"] for name, e in first if name == "response.output_item.done"]
        assert [(i["name"], json.loads(i["arguments"])) for i in done] == [
            ("exec_command", {"cmd": "true"}), ("exec_command", {"cmd": "ls"})]
        outputs = [{"type": "function_call_output", "call_id": i["call_id"], "output": ""}
                   for i in done]
        second = sse(client.post("/v1/responses", json={
            "model": "fm", "input": [*prompt, *done, *outputs]}).text)
    names = [n for n, _ in first]
    assert (names[0], names[-1]) == ("response.created", "response.completed")
    message = second[-1][1]["response"]["output"][0]
    assert message["content"][0]["text"] == "done"
    assert [r.step for r in openai.recorded("main")] == [0, 1]


def test_openai_counts_model_responses() -> None:
    fc = {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "c"}
    out = {"type": "function_call_output", "call_id": "c", "output": ""}
    msg = {"type": "message", "role": "assistant", "content": []}
    usr = {"type": "message", "role": "user", "content": []}
    assert responses_so_far([usr]) == 0
    assert responses_so_far([usr, fc, fc, out, out]) == 1
    assert responses_so_far([usr, fc, out, fc, out, msg, usr]) == 3


def test_openai_error_and_a_delayed_reply_that_stop_cuts_short() -> None:
    server = FakeOpenAI().start()
    server.script([error(500)])
    reply = httpx.post(f"{server.url}/v1/responses", json={"input": []})
    assert reply.status_code == 500
    assert reply.json()["error"]["code"] == "server_error"
    server.script([shell("true", delay=60)])
    results: list[object] = []

    def post() -> None:
        try:
            results.append(httpx.post(f"{server.url}/v1/responses", json={"input": []},
                                      timeout=30))
        except httpx.HTTPError as exc:
            results.append(exc)

    thread = threading.Thread(target=post)
    started = time.monotonic()
    thread.start()
    time.sleep(0.3)
    server.stop()  # wakes the delayed reply instead of waiting the 60 s out
    thread.join(15)
    assert not thread.is_alive()
    assert time.monotonic() - started < 15
    assert len(results) == 1


@pytest.mark.parametrize("status", [401, 429, 529])
def test_anthropic_error_types(status: int) -> None:
    with FakeAnthropic() as server:
        server.script([error(status)])
        reply = httpx.post(f"{server.url}/v1/messages", json={
            "model": "m", "tools": TOOLS, "messages": [user("x")]})
    assert reply.status_code == status
    assert reply.json()["type"] == "error"
    assert reply.json()["error"]["type"] in (
        "authentication_error", "rate_limit_error", "overloaded_error")
