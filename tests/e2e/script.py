"""What a fake model says: a script of replies, one per model call in a conversation.

A script is a list of :class:`Reply`. The fake servers pick the reply from the request itself, not
from a counter: reply ``i`` answers the request that already holds ``i`` earlier model responses
(Anthropic: assistant messages; OpenAI Responses: runs of function calls / assistant messages).
A retried request therefore gets the same reply again, and several conversations can share one
server. Past the end of the script the server ends the turn with :data:`DEFAULT_TEXT`.

Scripts can be keyed: ``server.script(replies, key="task-17")`` answers only conversations whose
user messages contain ``"task-17"``; an unkeyed script answers the rest.

>>> script = [bash("true"), bash("true"), say("All done.\\nFLEET_WORKER_DONE: ran true twice")]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

DEFAULT_TEXT = "OK."


@attrs.frozen(kw_only=True)
class ToolCall:
    """One tool call. ``name``/``input`` are the model's; which names exist depends on the
    client: Claude Code has ``Bash`` (``{"command": ...}``), ``Write``, ``Read`` ...; Codex has
    ``exec_command`` (``{"cmd": ...}``)."""

    name: str
    input: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Reply:
    """One model response: optional text, then tool calls (none: the turn ends). ``delay`` is
    seconds to wait before answering (interrupt a turn while the model "thinks"). ``status``
    other than 200 answers with that HTTP error instead, with ``error_type`` and ``message``
    in the provider's error body (defaults per status)."""

    text: str = ""
    tools: tuple[ToolCall, ...] = ()
    delay: float = 0.0
    status: int = 200
    error_type: str | None = None
    message: str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def is_error(self) -> bool:
        return self.status != 200


def say(text: str, *, delay: float = 0.0) -> Reply:
    """A final message: the turn ends (Anthropic ``end_turn``; Responses ``completed``)."""
    return Reply(text=text, delay=delay)


def call(name: str, tool_input: Mapping[str, Any] | None = None, *, text: str = "",
         delay: float = 0.0) -> Reply:
    """A reply that calls one tool."""
    return Reply(text=text, tools=(ToolCall(name=name, input=dict(tool_input or {})),),
                 delay=delay)


def calls(*tools: ToolCall, text: str = "", delay: float = 0.0) -> Reply:
    """A reply that calls several tools at once."""
    return Reply(text=text, tools=tools, delay=delay)


def bash(command: str, *, text: str = "", delay: float = 0.0) -> Reply:
    """Claude Code's Bash tool."""
    return call("Bash", {"command": command, "description": "Run a command"}, text=text,
                delay=delay)


def shell(cmd: str, *, text: str = "", delay: float = 0.0) -> Reply:
    """Codex's shell tool (``exec_command``)."""
    return call("exec_command", {"cmd": cmd}, text=text, delay=delay)


def error(status: int, message: str | None = None, *, error_type: str | None = None,
          headers: Mapping[str, str] | None = None) -> Reply:
    """An HTTP error answer, e.g. ``error(529)`` (overloaded) or ``error(401)``."""
    return Reply(status=status, message=message, error_type=error_type,
                 headers=dict(headers or {}))
