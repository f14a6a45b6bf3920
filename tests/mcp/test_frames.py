"""Every frame a client can send gets what JSON-RPC 2.0 promises: each request with an id
exactly one response, an invalid frame an error with the spec's code (-32700 parse error,
-32600 invalid request, -32602 invalid params), a notification none; and the server goes on.

Driven over stdio against the real server (built on the official MCP SDK), over the product of
every shape of each member of a frame, with a bounded wait for the answers."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet._mcp.frames import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, screen
from mcp import types
from tests.conftest import Repo

from ._client import serving

ABSENT = object()
HUGE = "1" * 4301


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


JSONRPC: list[Any] = ["2.0", "1.0", ABSENT, 2.0]
IDS: list[str] = ["int", "str", "absent", "null", "true", "float", "object", "huge"]
METHODS: list[Any] = ["ping", "tools/call", 123, None, ABSENT]
#: (params, what JSON-RPC says of them): ok, request (not structured: -32600), params (-32602)
PARAMS: list[tuple[Any, str]] = [
    (ABSENT, "ok"), ({}, "ok"), ({"name": "status"}, "ok"), ("x", "request"), (None, "request"),
    (7, "request"), ([1], "params"), ({"name": "status", "arguments": _deep(200)}, "params"),
    ({"name": "status", "arguments": {"n": "@HUGE@"}}, "params"),
    ({"name": "status", "arguments": {"n": "@INF@"}}, "params"),
    ({"name": "\ud800"}, "params"),
]
NOT_JSON = ["not json", '{"jsonrpc":"2.0","id":5,"method":"ping"', "NaN", '{"id": Infinity}',
            "[" * 5000 + "]" * 5000, '{"a":1}{"b":2}']


def _frame(n: int, jsonrpc: Any, id_kind: str, method: Any, params: Any) -> tuple[str, Any]:
    rid: Any = {"int": 1000 + n, "str": f"s-{n}", "null": None, "true": True, "float": 1.5,
                "object": {"id": n}, "huge": "@HUGE@"}.get(id_kind, ABSENT)
    obj = {k: v for k, v in (("jsonrpc", jsonrpc), ("id", rid), ("method", method),
                             ("params", params)) if v is not ABSENT}
    text = json.dumps(obj).replace('"@HUGE@"', HUGE).replace('"@INF@"', "1e400")
    return text, rid


def _expected(jsonrpc: Any, id_kind: str, method: Any, params: tuple[Any, str]) -> Any:
    """The response the spec asks for: None (no response), ("any",) (a result or an error from
    the method), or ("error", code); the id is checked apart."""
    if id_kind not in ("int", "str", "absent"):
        return ("error", INVALID_REQUEST)
    if jsonrpc != "2.0" or method is ABSENT or not isinstance(method, str):
        return ("error", INVALID_REQUEST)
    if params[1] == "request":
        return ("error", INVALID_REQUEST)
    if id_kind == "absent":
        return None
    return ("error", INVALID_PARAMS) if params[1] == "params" else ("any",)


def test_every_frame_shape_gets_exactly_the_responses_the_spec_asks_for(repo: Repo) -> None:
    cases = []
    for n, (jsonrpc, id_kind, method, params) in enumerate(
        itertools.product(JSONRPC, IDS, METHODS, PARAMS)
    ):
        text, rid = _frame(n, jsonrpc, id_kind, method, params[0])
        want = _expected(jsonrpc, id_kind, method, params)
        answered_by_id = want is not None and id_kind in ("int", "str")
        cases.append((text, rid if answered_by_id else None, want))
    by_id = {rid: want for _, rid, want in cases if rid is not None}
    nulls = sum(1 for _, rid, want in cases if want is not None and rid is None)
    nulls += len(NOT_JSON)
    with serving(["--repo", str(repo.path)]) as mcp:
        start = len(mcp.received)
        for text, _, _ in cases:
            mcp.send_line(text)
        for text in NOT_JSON:
            mcp.send_line(text)
        mcp.send_line('{"jsonrpc":"2.0","id":"last","method":"ping"}')

        def complete(frames: list[dict[str, Any]]) -> bool:
            ids = {f.get("id") for f in frames[start:]}
            return ids >= {*by_id, "last"} and sum(
                1 for f in frames[start:] if f.get("id") is None and "error" in f) >= nulls

        frames = mcp.received_until(complete, timeout=120)[start:]
        # one more round trip: anything still on its way (a second answer) lands before it
        assert mcp.request("ping", {}, id="after")["result"] == {}
        frames = [f for f in mcp.received[start:] if f.get("id") != "after"]
        assert mcp.proc.poll() is None, mcp.stderr_tail()
    responses = [f for f in frames if "method" not in f]
    counts: dict[Any, int] = {}
    for frame in responses:
        key = json.dumps(frame.get("id"))
        counts[key] = counts.get(key, 0) + 1
    assert counts.pop(json.dumps(None), 0) == nulls
    assert counts.pop(json.dumps("last")) == 1
    assert counts == {json.dumps(rid): 1 for rid in by_id}
    for frame in responses:
        want = by_id.get(frame.get("id"))
        if want is not None and want[0] == "error":
            assert frame["error"]["code"] == want[1], frame
    parse_errors = [f for f in responses if f.get("id") is None
                    and f["error"]["code"] == PARSE_ERROR]
    assert len(parse_errors) == len(NOT_JSON)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                  max_size=3),
    max_leaves=10,
)
members = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | json_values,
    "id": st.integers() | st.text(max_size=5) | json_values,
    "method": st.sampled_from(["ping", "tools/call", "initialize", "notifications/cancelled"])
    | json_values,
    "params": st.dictionaries(st.text(max_size=6), json_values, max_size=3) | json_values,
    "result": json_values, "error": json_values,
})


def _not_json(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


@settings(max_examples=500, deadline=None)
@given(st.one_of(members.map(lambda o: json.dumps(o).encode()), st.binary(max_size=40)))
def test_the_screen_answers_or_hands_on_every_frame(line: bytes) -> None:
    """Whatever a frame holds, the screen never raises; a frame it hands on is one the SDK
    reads (so the SDK never drops it unanswered); a reply answers the frame's own id."""
    out = screen(line)
    assert (out.forward is None) or (out.reply is None)
    if out.forward is not None:
        types.jsonrpc_message_adapter.validate_json(out.forward, by_name=False)
        return
    try:
        obj = json.loads(line, parse_constant=_not_json)
    except (ValueError, RecursionError):
        assert out.reply is not None and out.reply["error"]["code"] == PARSE_ERROR
        return
    if out.reply is None:  # only a notification, or a response to the server, goes unanswered
        assert isinstance(obj, dict)
        notification = "id" not in obj and isinstance(obj.get("method"), str)
        response = "method" not in obj and ("result" in obj or "error" in obj)
        assert notification or response
        return
    rid = obj.get("id") if isinstance(obj, dict) else None
    valid = type(rid) in (str, int) and -(2**63) <= (rid if type(rid) is int else 0) < 2**63
    assert out.reply["id"] == (rid if valid else None)
    json.dumps(out.reply)
