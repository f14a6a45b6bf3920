"""A tiny stdio MCP server whose one tool asks the user a question (``elicitation/create``), as
MCP servers do when they need input. Claude Code shows a form and waits for a person.

Written by hand on purpose: it speaks the JSON-RPC protocol revision that lets a server send
requests to the client (the official SDK's current revision does not), which is what the
elicitation dialog needs. Run by Claude Code with ``--mcp-config``; stdin/stdout are the
transport. With ``ASKER_LOG`` set, each method received is appended to that file (a test waits
for ``tools/list`` before it prompts: Claude Code connects to MCP servers in the background).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

QUESTION = "What name should the report use?"


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    pending: Any = None
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        log = os.environ.get("ASKER_LOG")
        if log and method:
            with open(log, "a") as f:
                f.write(method + "\n")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "asker", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [{
                "name": "ask_name", "description": "Ask the user for a name",
                "inputSchema": {"type": "object", "properties": {}}}]}})
        elif method == "tools/call":
            pending = message["id"]
            send({"jsonrpc": "2.0", "id": "ask-1", "method": "elicitation/create", "params": {
                "message": QUESTION,
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                                    "required": ["name"]}}})
        elif message.get("id") == "ask-1" and pending is not None:
            answer = json.dumps(message.get("result"))
            send({"jsonrpc": "2.0", "id": pending,
                  "result": {"content": [{"type": "text", "text": f"answer: {answer}"}]}})
            pending = None
        elif "id" in message and method:
            send({"jsonrpc": "2.0", "id": message["id"], "result": {}})


if __name__ == "__main__":
    main()
