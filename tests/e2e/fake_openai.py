"""A fake OpenAI Responses API for Codex.

Codex calls ``POST /v1/responses`` and reads SSE: ``response.created``,
``response.output_item.added`` / ``response.output_item.done`` for each output item (an
assistant message, or a ``function_call`` such as ``exec_command`` with ``{"cmd": ...}``), then
``response.completed``. The reply is picked from the script by the number of model responses
already in the request's ``input`` (see :mod:`.script`).

    server = FakeOpenAI().start()
    server.script([shell("true"), say("done")])
    ... run codex with a provider whose base_url is server.url + "/v1" ...
    server.stop()
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

from ._server import FakeServer, Recorded, Responder, pick, texts
from .script import DEFAULT_TEXT, Reply

ERRORS: Final[Mapping[int, tuple[str, str]]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("invalid_api_key", "Incorrect API key provided"),
    403: ("permission_denied", "You are not allowed to use this model"),
    404: ("not_found", "Not found"),
    429: ("rate_limit_exceeded", "Rate limit reached"),
    500: ("server_error", "The server had an error while processing your request"),
    503: ("server_error", "The engine is currently overloaded"),
}

#: Input item types that the model produced (one or more of them make one earlier response).
_MODEL_ITEMS: Final = frozenset(
    {"function_call", "reasoning", "custom_tool_call", "local_shell_call", "web_search_call"}
)

_ids = itertools.count(1)
_ids_lock = threading.Lock()


def _next_id(prefix: str) -> str:
    with _ids_lock:
        return f"{prefix}_fake{next(_ids):06d}"


def _is_model_item(item: Any) -> bool:
    if not isinstance(item, Mapping):
        return False
    kind = item.get("type")
    if kind in _MODEL_ITEMS:
        return True
    return (kind == "message" or kind is None) and item.get("role") == "assistant"


def responses_so_far(items: Sequence[Any]) -> int:
    """How many model responses an ``input`` list already holds: runs of model items."""
    count, inside = 0, False
    for item in items:
        model = _is_model_item(item)
        if model and not inside:
            count += 1
        inside = model
    return count


class FakeOpenAI(FakeServer):
    name = "openai"

    def __init__(self) -> None:
        super().__init__()
        self._scripts: dict[str | None, Sequence[Reply]] = {}

    def script(self, replies: Sequence[Reply], *, key: str | None = None) -> None:
        with self._lock:
            self._scripts[key] = list(replies)

    def answer(self, req: Recorded, out: Responder) -> Recorded:
        if req.method in ("HEAD", "GET"):
            # Codex may list models; an empty list makes it use the configured one.
            out.json(200, {"object": "list", "data": []})
            return attrs.evolve(req, kind="probe")
        if not req.path.endswith("/responses"):
            self._error(out, 404)
            return attrs.evolve(req, kind="other")
        body = req.json if isinstance(req.json, Mapping) else {}
        items = body.get("input") or []
        if not isinstance(items, list):
            items = []
        user_text = "\n".join(
            t for item in items
            if isinstance(item, Mapping) and item.get("role") == "user"
            for t in texts(item.get("content"))
        )
        step = responses_so_far(items)
        with self._lock:
            key, replies = pick(self._scripts, user_text)
        reply = replies[step] if step < len(replies) else Reply(text=DEFAULT_TEXT)
        out.wait(reply.delay)
        if reply.is_error:
            self._error(out, reply.status, reply)
        else:
            out.sse(_events(reply, str(body.get("model") or "fake-model")))
        return attrs.evolve(req, kind="main", step=step, key=key)

    def _error(self, out: Responder, status: int, reply: Reply | None = None) -> None:
        code, message = ERRORS.get(status, ("server_error", f"HTTP {status}"))
        if reply is not None:
            code = reply.error_type or code
            message = reply.message or message
        out.json(status, {"error": {"message": message, "type": code, "param": None,
                                    "code": code}}, dict(reply.headers) if reply else None)


def _items(reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text or not reply.tools:
        items.append({
            "type": "message", "id": _next_id("msg"), "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text or DEFAULT_TEXT,
                         "annotations": []}],
        })
    for tool in reply.tools:
        items.append({
            "type": "function_call", "id": _next_id("fc"), "call_id": _next_id("call"),
            "name": tool.name, "arguments": json.dumps(dict(tool.input)),
            "status": "completed",
        })
    return items


def _events(reply: Reply, model: str) -> Iterator[tuple[str, Any]]:
    resp_id = _next_id("resp")
    created = int(time.time())
    base = {"id": resp_id, "object": "response", "created_at": created, "model": model,
            "status": "in_progress", "output": []}
    yield "response.created", {"type": "response.created", "response": base}
    items = _items(reply)
    for index, item in enumerate(items):
        opened = {**item, "status": "in_progress"}
        if item["type"] == "function_call":
            opened["arguments"] = ""
        else:
            opened["content"] = []
        yield "response.output_item.added", {"type": "response.output_item.added",
                                             "output_index": index, "item": opened}
        yield "response.output_item.done", {"type": "response.output_item.done",
                                            "output_index": index, "item": item}
    usage = {"input_tokens": 25, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 35}
    yield "response.completed", {
        "type": "response.completed",
        "response": {**base, "status": "completed", "output": items, "usage": usage},
    }
