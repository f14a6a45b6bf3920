"""The server's own stdio transport: every frame a client sends is screened before the SDK sees
it, so that each request with an id gets exactly one response, whatever the frame holds.

The SDK's stdio reader drops a line it cannot validate without a word, so a request it cannot
parse (``"method": 123``, ``"jsonrpc": "1.0"``, ``"params": "x"``, arguments nested 200 deep, an
integer of 4,301 digits) would leave a client without its own timeout waiting forever.
:func:`screen` answers each such frame itself, as JSON-RPC 2.0 says:

- not UTF-8, not JSON, or JSON no reader should take (NaN, nesting past Python's own limit):
  -32700 (parse error), id null;
- not a request, notification or response object (a batch, a wrong ``jsonrpc``, an id that
  is not a string or a whole number, a ``method`` that is not a string, ``params`` that are
  not structured): -32600 (invalid request), with the id when it could be read, else null;
- a well-formed request whose ``params`` fleet cannot take (an array: MCP names its params;
  nesting deeper than :data:`MAX_DEPTH`; a number past 64 bits; a string that is not
  Unicode): -32602 (invalid params), with its id.

Only frames that pass are handed on, as the SDK itself validates them (the same call), so the
SDK never drops one. A notification (no id) is never answered, except with id null when it is
not even a valid frame.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import sys
import threading
from collections.abc import AsyncIterator
from typing import IO, Any, Final

import anyio
import anyio.to_thread
import attrs

from mcp import types

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
INVALID_PARAMS: Final = -32602
#: Deepest nesting of a frame's values that is taken (fleet's tools take flat arguments).
MAX_DEPTH: Final = 32
#: Largest frame read, in bytes; a longer line is answered and skipped.
MAX_FRAME: Final = 16 << 20
#: Ids and numbers past 64 bits have no use in fleet and not every client can read them back.
_INT_LIMIT: Final = 2**63


class _Unusable:
    """A number parsed but not usable (past 64 bits, or not finite)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _parse_int(text: str) -> int | _Unusable:
    # Python refuses to convert more than 4,300 digits (and would spend time on fewer): any
    # number past 64 bits is marked, not converted.
    if len(text.lstrip("-")) > 19:
        return _Unusable(text)
    value = int(text)
    return value if -_INT_LIMIT <= value < _INT_LIMIT else _Unusable(text)


def _parse_float(text: str) -> float | _Unusable:
    value = float(text)
    return value if math.isfinite(value) else _Unusable(text)


def _parse_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


@attrs.frozen(kw_only=True)
class Screened:
    """What to do with one frame: hand ``forward`` (the frame's text) to the SDK, or write
    ``reply`` (an error response) back, or neither (a notification nobody answers)."""

    forward: str | None = None
    reply: dict[str, Any] | None = None


def error(rid: str | int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def _valid_id(value: object) -> bool:
    return type(value) is str or type(value) is int


def _problem(value: Any, depth: int = 0) -> str | None:
    """Why a value inside a frame cannot be taken, or None."""
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, _Unusable):
        return f"a number fleet cannot take: {value.text[:20]}{'…' if len(value.text) > 20 else ''}"
    if type(value) is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a string that is not valid Unicode (a lone surrogate)"
        return None
    if type(value) is list:
        for item in value:
            if (why := _problem(item, depth + 1)) is not None:
                return why
    elif type(value) is dict:
        for key, item in value.items():
            if (why := _problem(key, depth + 1) or _problem(item, depth + 1)) is not None:
                return why
    return None


def screen(line: bytes) -> Screened:
    """Decide what one frame (a line, newline excluded) gets; never raises."""
    try:
        obj = json.loads(
            line.decode("utf-8"), parse_int=_parse_int, parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        what = "nested too deep" if isinstance(exc, RecursionError) else "not valid JSON"
        return Screened(reply=error(None, PARSE_ERROR, f"Parse error: {what}"))
    if type(obj) is list:
        return Screened(reply=error(None, INVALID_REQUEST,
                                    "Invalid request: batches are not supported"))
    if type(obj) is not dict:
        return Screened(reply=error(None, INVALID_REQUEST, "Invalid request: not an object"))
    has_id = "id" in obj
    rid = obj.get("id")
    if has_id and not _valid_id(rid):
        return Screened(reply=error(None, INVALID_REQUEST,
                                    "Invalid request: an id is a string or a whole number"))
    answer_to = rid if has_id else None
    if obj.get("jsonrpc") != "2.0":
        return Screened(reply=error(answer_to, INVALID_REQUEST,
                                    'Invalid request: "jsonrpc" must be "2.0"'))
    if "method" not in obj:
        if has_id and (("result" in obj) != ("error" in obj)):
            return _handed_on(obj, line, answer_to)  # a response to one of ours
        return Screened(reply=error(answer_to, INVALID_REQUEST,
                                    'Invalid request: no "method"'))
    if type(obj["method"]) is not str:
        return Screened(reply=error(answer_to, INVALID_REQUEST,
                                    'Invalid request: "method" must be a string'))
    why: str | None = _problem(obj["method"])
    if why is not None:
        return Screened(reply=error(answer_to, INVALID_REQUEST, f"Invalid request: {why}"))
    params = obj.get("params")
    if "params" in obj and type(params) not in (dict, list):
        return Screened(reply=error(answer_to, INVALID_REQUEST,
                                    'Invalid request: "params" must be an object'))
    why = ("MCP takes its params by name, as an object" if type(params) is list
           else _problem(params) if params is not None else None)
    if why is not None:
        if not has_id:
            return Screened()  # a notification is never answered
        return Screened(reply=error(rid, INVALID_PARAMS, f"Invalid params: {why}"))
    return _handed_on(obj, line, answer_to)


def _handed_on(obj: dict[str, Any], line: bytes, rid: str | int | None) -> Screened:
    text = line.decode("utf-8")
    try:
        types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except Exception:  # pydantic's ValidationError and anything else it may raise
        if rid is None or "method" not in obj:
            return Screened()  # nobody waits for an answer to this one
        return Screened(reply=error(rid, INVALID_PARAMS, "Invalid params"))
    return Screened(forward=text)


class _Wire:
    """The client's end of stdout: whole lines, one writer at a time (the SDK's responses and
    the screen's replies share it)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()

    def _write(self, data: bytes) -> None:
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self._write, text.encode("utf-8", "replace"))

    async def flush(self) -> None:
        return None

    async def reply(self, frame: dict[str, Any]) -> None:
        await self.write(json.dumps(frame, separators=(",", ":")) + "\n")


class _Frames:
    """The lines of stdin that pass :func:`screen`; the others are answered on the way."""

    def __init__(self, source: IO[bytes], wire: _Wire) -> None:
        self._source = source
        self._wire = wire

    def _readline(self) -> tuple[bytes, bool]:
        line = self._source.readline(MAX_FRAME + 1)
        if len(line) <= MAX_FRAME or line.endswith(b"\n"):
            return line, False
        while line and not line.endswith(b"\n"):  # skip the rest of an oversized frame
            line = self._source.readline(MAX_FRAME)
        return b"x", True

    def __aiter__(self) -> _Frames:
        return self

    async def __anext__(self) -> str:
        while True:
            line, oversized = await anyio.to_thread.run_sync(self._readline)
            if not line:
                raise StopAsyncIteration
            if oversized:
                await self._wire.reply(error(None, INVALID_REQUEST,
                                             f"Invalid request: larger than {MAX_FRAME} bytes"))
                continue
            line = line.rstrip(b"\r\n")
            if not line.strip():
                continue
            screened = screen(line)
            if screened.reply is not None:
                await self._wire.reply(screened.reply)
            elif screened.forward is not None:
                return screened.forward


#: Wire readers kept to the process's end (see screened_stdio): held here so that no garbage
#: collection closes one under the thread that may still be reading it.
_LEFT_OPEN: list[Any] = []


@contextlib.asynccontextmanager
async def screened_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio streams over screened frames. While serving, fd 0 reads the null device
    and fd 1 writes to stderr, so tools and their children cannot read or write the wire."""
    from mcp.server.stdio import stdio_server

    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    source = os.fdopen(wire_in, "rb", buffering=1 << 16)
    wire = _Wire(wire_out)
    try:
        async with stdio_server(stdin=_Frames(source, wire), stdout=wire) as streams:  # type: ignore[arg-type]
            yield streams
    finally:
        with contextlib.suppress(OSError):
            os.dup2(wire_in, 0)
            os.dup2(wire_out, 1)
        with contextlib.suppress(OSError):
            os.close(wire_out)
        # The source may still be read by the thread stuck in readline: it is left to the
        # process's end rather than closed under that thread.
        _LEFT_OPEN.append(source)
