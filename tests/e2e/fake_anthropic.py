"""A fake Anthropic Messages API for Claude Code.

Claude Code calls ``HEAD /`` (a connectivity check) and ``POST /v1/messages?beta=true``. Main-loop
calls carry the tool list and stream SSE; the reply is picked from the script by the number of
assistant messages already in the request (see :mod:`.script`). Calls without tools (titles and
other small-model calls) are "side" calls and get a short text, streamed or not as asked.

    server = FakeAnthropic().start()
    server.script([bash("true"), say("done")])
    ... run claude with ANTHROPIC_BASE_URL=server.url ...
    assert server.api_keys() == ["sk-test-..."] * 2
    server.stop()
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

from ._server import FakeServer, Recorded, Responder, pick, texts
from .script import DEFAULT_TEXT, Reply

#: status -> (error type, message), as the real API words them.
ERRORS: Final[Mapping[int, tuple[str, str]]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use this resource."),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}

_ids = itertools.count(1)
_ids_lock = threading.Lock()


def _next_id(prefix: str) -> str:
    with _ids_lock:
        return f"{prefix}_fake{next(_ids):06d}"


class FakeAnthropic(FakeServer):
    name = "anthropic"

    def __init__(self, *, side_text: str = "Fleet task") -> None:
        super().__init__()
        self._scripts: dict[str | None, Sequence[Reply]] = {}
        self.side_text = side_text

    def script(self, replies: Sequence[Reply], *, key: str | None = None) -> None:
        """Set the replies for conversations whose user text contains ``key`` (or all others
        when ``key`` is None)."""
        with self._lock:
            self._scripts[key] = list(replies)

    # -- answering ------------------------------------------------------------------------

    def answer(self, req: Recorded, out: Responder) -> Recorded:
        if req.method in ("HEAD", "GET"):
            out.empty(200) if req.method == "HEAD" else out.json(200, {})
            return attrs.evolve(req, kind="probe")
        body = req.json if isinstance(req.json, Mapping) else {}
        if req.path.endswith("/count_tokens"):
            out.json(200, {"input_tokens": 10})
            return attrs.evolve(req, kind="side")
        if not req.path.endswith("/messages"):
            self._error(out, 404)
            return attrs.evolve(req, kind="other")
        model = str(body.get("model") or "claude-fake")
        stream = bool(body.get("stream"))
        messages = body.get("messages") or []
        if not body.get("tools"):
            self._send(out, Reply(text=self.side_text), model, stream)
            return attrs.evolve(req, kind="side")
        user_text = "\n".join(
            t for m in messages if isinstance(m, Mapping) and m.get("role") == "user"
            for t in texts(m.get("content"))
        )
        step = sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")
        with self._lock:
            key, replies = pick(self._scripts, user_text)
        reply = replies[step] if step < len(replies) else Reply(text=DEFAULT_TEXT)
        out.wait(reply.delay)
        if reply.is_error:
            self._error(out, reply.status, reply)
        else:
            self._send(out, reply, model, stream)
        return attrs.evolve(req, kind="main", step=step, key=key)

    def _error(self, out: Responder, status: int, reply: Reply | None = None) -> None:
        kind, message = ERRORS.get(status, ("api_error", f"HTTP {status}"))
        if reply is not None:
            kind = reply.error_type or kind
            message = reply.message or message
        headers = dict(reply.headers) if reply else {}
        headers.setdefault("x-should-retry", "true" if status in (429, 500, 529) else "false")
        out.json(status, {"type": "error", "error": {"type": kind, "message": message}}, headers)

    def _send(self, out: Responder, reply: Reply, model: str, stream: bool) -> None:
        blocks = _blocks(reply)
        stop_reason = "tool_use" if reply.tools else "end_turn"
        usage = {"input_tokens": 25, "output_tokens": 5 + 10 * len(blocks),
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        msg_id = _next_id("msg")
        if not stream:
            out.json(200, {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                           "content": blocks, "stop_reason": stop_reason,
                           "stop_sequence": None, "usage": usage}, reply.headers)
            return
        out.sse(_events(msg_id, model, blocks, stop_reason, usage), headers=reply.headers)


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text or not reply.tools:
        blocks.append({"type": "text", "text": reply.text or DEFAULT_TEXT})
    for tool in reply.tools:
        blocks.append({"type": "tool_use", "id": _next_id("toolu"), "name": tool.name,
                       "input": dict(tool.input)})
    return blocks


def _events(msg_id: str, model: str, blocks: list[dict[str, Any]], stop_reason: str,
            usage: Mapping[str, int]) -> Iterator[tuple[str, Any]]:
    yield "message_start", {
        "type": "message_start",
        "message": {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                    "content": [], "stop_reason": None, "stop_sequence": None,
                    "usage": {**usage, "output_tokens": 1}},
    }
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "text_delta", "text": block["text"]}}
        else:
            yield "content_block_start", {
                "type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"],
                                  "input": {}},
            }
            yield "content_block_delta", {
                "type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
            }
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                            "usage": {"output_tokens": usage["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}
