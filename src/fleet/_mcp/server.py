"""The ``fleet mcp serve`` server: the tools of :mod:`fleet._mcp.tools`, a worker's journal and
fleet's guidance as resources, a ``coordinate`` prompt, and wake-ups pushed into the session.

Built on the official MCP SDK's low-level server. It serves the handshake protocol era
(``initialize``, 2025-11-25 and earlier): Claude Code 2.1.332 opens with ``server/discover``
(the 2026-07-28 revision), gets "method not found" and falls back to ``initialize``, as it does
with any server that predates that revision. The handshake era is what pushing needs: Claude
Code registers no channel listener on a 2026-07-28 connection ("no unsolicited notification
path").

Pushed wake-ups follow Claude Code's channel contract: the server declares the experimental
``claude/channel`` capability and sends ``notifications/claude/channel`` (``content`` and
string ``meta``) for every worker that comes to need attention, as soon as fleet's watcher sees
it, each mark once. Claude Code delivers them into the live session only when it was started
with the server in ``--channels`` (approved channels) or
``--dangerously-load-development-channels server:NAME``, is interactive, and Anthropic's
channel feature is on for it; otherwise it drops them (its debug log says why). By default
(``--push auto``) only a client that says it is Claude Code is sent them; ``wait`` works
everywhere.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import math
import os
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import unquote

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_connection
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from fleet._core.attention import next_step
from fleet._core.fold import WorkerState
from fleet._core.ids import is_worker_id
from fleet._errors import ToolError
from fleet._mcp.frames import screened_stdio
from fleet._mcp.tools import ToolFailure, Tools
from mcp import types

Push = Literal["auto", "always", "never"]
PUSH_MODES: Final = ("auto", "always", "never")
CHANNEL_CAPABILITY: Final = "claude/channel"
CHANNEL_METHOD: Final = "notifications/claude/channel"
#: ``clientInfo.name`` of Claude Code, the one client known to take channel notifications.
CLAUDE_CODE_CLIENT: Final = "claude-code"
SKILL_URI: Final = "fleet://skill"
STATUS_URI: Final = "fleet://status"
JOURNAL_TEMPLATE: Final = "fleet://workers/{worker}/journal"
#: Seconds a signalled server gives its calls to end before it leaves.
SHUTDOWN_GRACE: Final = 0.05
#: Resources listed at most (every worker's journal stays readable through the template).
LISTED_JOURNALS: Final = 100

INSTRUCTIONS = """\
fleet coordinates coding agents (Claude Code, Codex) that work in parallel, each in its own
git worktree. The tools are fleet's CLI verbs and return the CLI's --json output.
Flow: plan (optional) -> start each worker on a brief -> wait -> handle what wait returns
(check a DONE claim, send a follow-up, hand over after a limit) -> seen the marks you handled
-> retire checked workers (in ask mode only with the user's confirm) -> report.
wait blocks at most its timeout; when it times out, call it again with the marks you have.
Messages from this server in the session ("worker X needs attention ...") are pushed wake-ups:
handle them like a wait result, then record the mark with seen."""

PROMPT = """\
You coordinate workers with the fleet tools (mcp server "fleet"). Each tool is the fleet CLI
verb of the same name and returns that verb's --json output; the guidance below is written
for the CLI: read `fleet VERB --json` as "call the VERB tool" (`fleet hand-over` is the
hand_over tool), its options as the tool's arguments. Instead of running `fleet wait` in the
background, call the wait tool (it returns after its timeout; call it again), or act on the
wake-ups this server pushes into the session. Give briefs as text to start (brief) and
follow-ups as text to send (text)."""


def skill_text() -> str:
    """fleet's guidance for coordinators (the skill), from the wheel or the source tree."""
    with contextlib.suppress(ModuleNotFoundError, FileNotFoundError, NotADirectoryError, OSError):
        packaged = importlib.resources.files("fleet") / "_skill" / "SKILL.md"
        if packaged.is_file():
            return packaged.read_text(encoding="utf-8")
    source = Path(__file__).resolve().parents[3] / "skill" / "skills" / "fleet" / "SKILL.md"
    try:
        return source.read_text(encoding="utf-8")
    except OSError:
        return "(fleet's skill is not part of this installation; see `fleet --help`)\n"


def channel_message(state: WorkerState) -> tuple[str, dict[str, str]]:
    """The text and meta of the wake-up pushed for a worker that needs attention."""
    content = (
        f"fleet: worker {state.worker} needs attention: {state.state} ({state.reason}), "
        f"mark {state.mark}. Next: {next_step(state)}. When handled, record the mark with "
        "the seen tool."
    )
    meta = {
        "worker": state.worker,
        "state": state.state,
        "reason": state.reason,
        "mark": state.mark,
    }
    return content, meta


class FleetServer:
    """One stdio MCP server over one fleet home."""

    def __init__(
        self,
        tools: Tools,
        *,
        push: Push = "auto",
        version: str = "",
    ) -> None:
        self.tools = tools
        self.push: Push = push
        #: marks pushed so far (each once per server)
        self.pushed: list[str] = []
        self.server: Server[Any] = Server(
            "fleet",
            version=version,
            title="fleet",
            description="Coordinate parallel coding agents: start, wait, check, retire.",
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
        )
        experimental: dict[str, dict[str, Any]] | None = (
            {CHANNEL_CAPABILITY: {}} if push != "never" else None
        )
        self.init_options = self.server.create_initialization_options(
            experimental_capabilities=experimental
        )

    # -- tools ------------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=spec.name,
                    title=spec.title,
                    description=spec.description,
                    input_schema=spec.input_schema,
                    annotations=types.ToolAnnotations(
                        title=spec.title,
                        read_only_hint=spec.read_only,
                        destructive_hint=spec.destructive,
                        idempotent_hint=spec.idempotent or spec.read_only,
                        open_world_hint=False,
                    ),
                )
                for spec in self.tools.specs.values()
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            text = await self.tools.call(params.name, params.arguments)
        except ToolFailure as exc:
            return _error(str(exc))
        except Exception as exc:  # a bug in one call must never end the server
            sys.stderr.write(f"fleet mcp: {params.name} failed: {type(exc).__name__}: {exc}\n")
            return _error(f"internal error in {params.name}: {type(exc).__name__}: "
                          f"{' '.join(str(exc).split())}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    # -- resources and the prompt -----------------------------------------------------------

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        from fleet import _journal

        resources = [
            types.Resource(
                name="skill", title="fleet's guidance for coordinators", uri=SKILL_URI,
                mime_type="text/markdown",
            ),
            types.Resource(
                name="status", title="every worker's state (fleet status --json)",
                uri=STATUS_URI, mime_type="application/json",
            ),
        ]
        workers = await anyio.to_thread.run_sync(_journal.list_workers, self.tools.scope.home)
        for worker in workers[:LISTED_JOURNALS]:
            resources.append(
                types.Resource(
                    name=f"{worker} journal", title=f"journal of {worker} (fleet log --json)",
                    uri=JOURNAL_TEMPLATE.format(worker=worker), mime_type="application/json",
                )
            )
        return types.ListResourcesResult(resources=resources)

    async def _list_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    name="journal", title="a worker's journal (fleet log WORKER --json)",
                    uri_template=JOURNAL_TEMPLATE, mime_type="application/json",
                )
            ]
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == SKILL_URI:
            text, mime = skill_text(), "text/markdown"
        elif uri == STATUS_URI:
            text, mime = await self._resource_call("status", {}), "application/json"
        else:
            worker = _journal_worker(uri)
            if worker is None:
                raise MCPError(code=types.INVALID_PARAMS, message=f"no resource {uri}")
            text = await self._resource_call("log", {"worker": worker})
            mime = "application/json"
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    async def _resource_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        try:
            return await self.tools.call(name, arguments)
        except ToolFailure as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name="coordinate",
                    title="Coordinate workers with fleet",
                    description="How to plan, start, wait for, check, retire and report on "
                    "workers with these tools (fleet's skill, for MCP)",
                    arguments=[
                        types.PromptArgument(
                            name="goal", description="what the workers should achieve",
                            required=False,
                        )
                    ],
                )
            ]
        )

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name != "coordinate":
            raise MCPError(code=types.INVALID_PARAMS, message=f"no prompt {params.name!r}")
        goal = (params.arguments or {}).get("goal")
        text = f"{PROMPT}\n\n{skill_text()}"
        if goal:
            text += f"\n\nThe goal: {goal}"
        return types.GetPromptResult(
            description="Coordinate workers with fleet",
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=text)
                )
            ],
        )

    # -- pushing ----------------------------------------------------------------------------

    def wants_push(self, connection: Connection) -> bool:
        if self.push == "never":
            return False
        if self.push == "always":
            return True
        params = connection.client_params
        return params is not None and params.client_info.name == CLAUDE_CODE_CLIENT

    async def _push_wakeups(self, connection: Connection) -> None:
        """Push a wake-up for each worker that comes to need attention, each mark once."""
        await connection.initialized.wait()
        if not self.wants_push(connection):
            return
        from fleet._core.fold import Policy
        from fleet._watch import Watcher

        quiet = self.tools.quiet_after if self.tools.quiet_after is not None else 300.0
        watcher = await anyio.to_thread.run_sync(
            lambda: Watcher(self.tools.scope.home, policy=Policy(quiet_after=quiet))
        )
        send, receive = anyio.create_memory_object_stream[WorkerState](math.inf)
        token = anyio.lowlevel.current_token()
        done = set(self.pushed)

        def follow() -> None:
            # A daemon thread: it never holds the process up, and the watcher's close (below)
            # wakes it and ends its loop.
            with contextlib.suppress(RuntimeError, anyio.BrokenResourceError,
                                     anyio.ClosedResourceError):
                for transition in watcher.transitions():
                    state = transition.after
                    if state.needs_attention and state.mark not in done:
                        done.add(state.mark)
                        anyio.from_thread.run(send.send, state, token=token)

        thread = threading.Thread(target=follow, name="fleet-mcp-push", daemon=True)
        thread.start()
        try:
            async with receive:
                async for state in receive:
                    content, meta = channel_message(state)
                    self.pushed.append(state.mark)
                    await connection.notify(CHANNEL_METHOD, {"content": content, "meta": meta})
                    sys.stderr.write(f"fleet mcp: pushed {state.mark}: {state.worker} needs "
                                     f"attention ({state.state}, {state.reason})\n")
                    sys.stderr.flush()
        finally:
            send.close()
            watcher.close()

    # -- serving ----------------------------------------------------------------------------

    async def serve(self, read_stream: Any, write_stream: Any) -> None:
        """Serve one connection over a stream pair until the client leaves."""
        dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(
            read_stream, write_stream, inline_methods=frozenset({"initialize"})
        )
        connection = Connection.for_loop(dispatcher)
        async with self.server.lifespan(self.server) as state, anyio.create_task_group() as tg:
            tg.start_soon(self._push_wakeups, connection)
            await serve_connection(
                self.server, dispatcher, connection=connection, lifespan_state=state,
                init_options=self.init_options,
            )
            tg.cancel_scope.cancel()

    async def serve_stdio(self) -> None:
        """Serve on stdin/stdout until the client closes them or sends SIGINT/SIGTERM."""
        async with anyio.create_task_group() as tg:

            async def on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        # Cancelling ends the running calls (and the children they run) at
                        # once; only the read of stdin cannot be interrupted, so the process
                        # leaves without it (Claude Code escalates after 100 ms).
                        tg.cancel_scope.cancel()
                        timer = threading.Timer(SHUTDOWN_GRACE, os._exit, args=(0,))
                        timer.daemon = True
                        timer.start()
                        return

            tg.start_soon(on_signal)
            # fleet's own screen before the SDK's reader: every request gets an answer.
            async with screened_stdio() as (read_stream, write_stream):
                await self.serve(read_stream, write_stream)
            tg.cancel_scope.cancel()


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def _journal_worker(uri: str) -> str | None:
    prefix, suffix = "fleet://workers/", "/journal"
    if not (uri.startswith(prefix) and uri.endswith(suffix)):
        return None
    worker = unquote(uri[len(prefix) : -len(suffix)])
    return worker if is_worker_id(worker) else None


def run(server: FleetServer) -> None:
    """Serve until the client closes stdin. A stdin or stdout that cannot be used (not a
    pipe the client holds) ends the server with one line, not a traceback."""
    try:
        anyio.run(server.serve_stdio)
    except BaseExceptionGroup as group:
        io_errors, rest = group.split((OSError, ValueError))
        if rest is not None or io_errors is None:
            raise
        first = io_errors.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise ToolError(f"fleet mcp: cannot talk MCP on stdin/stdout: {first}") from None
