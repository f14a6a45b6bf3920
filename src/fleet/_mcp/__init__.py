"""``fleet mcp``: fleet's verbs as tools of a stdio MCP server, for a coordinator agent.

- :mod:`fleet._mcp.scope`: what the server may act on (FLEET_HOME and the repositories it was
  told to use), which key sources a tool may name, and keeping keys out of results.
- :mod:`fleet._mcp.tools`: one tool per CLI verb, each a call of the ``fleet`` command itself
  with ``--json``, so a tool's result is exactly what the CLI prints.
- :mod:`fleet._mcp.specs`: the tools as a client sees them (descriptions, input schemas,
  hints), and :mod:`fleet._mcp.args`: a call's arguments, checked against them.
- :mod:`fleet._mcp.server`: the server (the official MCP SDK, an optional extra), its
  resources and prompt, and the wake-ups it pushes into a Claude Code session.
- :mod:`fleet._mcp.install`: ``fleet mcp install`` for a Claude Code config dir or a Codex
  home.

Only :mod:`fleet._mcp.server` imports the SDK; ``import fleet`` imports none of this.
"""

from __future__ import annotations

#: What ``fleet mcp serve`` says when the SDK is missing (:func:`sdk_missing` adds the command
#: that installs it for this fleet).
SDK_MISSING = "fleet mcp needs the MCP SDK, an optional extra"


def sdk_missing() -> str:
    """Why the server cannot start, with the command that gives this fleet the SDK."""
    from fleet._install import extra_hint

    return f"{SDK_MISSING}: {extra_hint('mcp')}"


def sdk_available() -> bool:
    """Whether the MCP SDK can be imported (without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec("mcp.server.lowlevel") is not None
    except (ImportError, ValueError):
        return False
