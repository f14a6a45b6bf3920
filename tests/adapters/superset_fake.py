"""A fake Superset host service: the tRPC procedures fleet uses, over HTTP on 127.0.0.1, with
the manifest the desktop app writes, a bearer token, and the superjson envelope.

Two builds: ``"0822"`` (the 2026-08-22 host: no ``terminal.transcript``) and ``"1.28"``
(with it). Unknown procedures answer 404 "No procedure found on path …" like tRPC does.

Every procedure names its source in tests/fakes/sources/superset.json (the file and lines of
Superset's host service at a stated version, or the `unverified` entry that says where a later
build's procedure was read); a host with an uncited procedure refuses to start.

``spawn=True`` really runs an agent config's command (``command args… prompt``, the ``argv``
prompt transport) in the workspace's worktree, with the ``SUPERSET_*`` terminal environment,
and keeps its output as the terminal's screen. Otherwise a launch only records the argv.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import attrs

SOURCES = Path(__file__).resolve().parents[1] / "fakes" / "sources" / "superset.json"


def uncited(procedures: Iterable[str], sources: Path = SOURCES) -> list[str]:
    """The procedures the source table cites neither from the host's code nor as unverified."""
    table = json.loads(sources.read_text())
    known = {**table.get("host", {}), **table.get("unverified", {})}
    return [name for name in procedures if not known.get(name)]


class TRPCError(Exception):
    def __init__(self, status: int, message: str, code: str = "BAD_REQUEST") -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


@attrs.define
class Session:
    terminal_id: str
    workspace_id: str
    argv: list[str]
    text: str = ""
    exited: bool = False
    exit_code: int | None = None
    proc: subprocess.Popen[bytes] | None = None
    pump: threading.Thread | None = None
    sent: list[str] = attrs.field(factory=list)
    created_at: int = 0


class FakeSupersetHost:
    def __init__(
        self,
        root: Path,
        *,
        build: str = "1.28",
        spawn: bool = False,
        token: str | None = None,
        env: dict[str, str] | None = None,
        sources: Path = SOURCES,
    ) -> None:
        self.root = root
        self.sources = sources
        self.build = build
        self.spawn = spawn
        self.token = token or "psk-" + uuid.uuid4().hex
        self.org = "org-" + uuid.uuid4().hex[:8]
        self.env = env or {}
        self.projects: list[dict[str, Any]] = []
        self.workspaces: dict[str, dict[str, Any]] = {}
        self.configs: list[dict[str, Any]] = []
        self.sessions: dict[str, Session] = {}
        self.bindings: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.unauthorized = 0
        self.lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def manifest_path(self) -> Path:
        return self.root / "host" / self.org / "manifest.json"

    def start(self) -> FakeSupersetHost:
        missing = uncited(self.procedures(), self.sources)
        if missing:
            raise RuntimeError(f"fake Superset host: no source for {', '.join(missing)} in "
                               f"{self.sources}")
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.manifest_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.manifest_path.write_text(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "endpoint": self.endpoint,
                    "authToken": self.token,
                    "startedAt": int(time.time() * 1000),
                    "organizationId": self.org,
                }
            )
        )
        self.manifest_path.chmod(0o600)
        return self

    def stop(self) -> None:
        for session in list(self.sessions.values()):
            _kill(session)
            if session.pump is not None:
                session.pump.join(timeout=10)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    # -- test helpers -------------------------------------------------------------------------

    def add_project(self, repo: Path, name: str = "demo") -> str:
        pid = str(uuid.uuid4())
        self.projects.append({"id": pid, "name": name, "repoPath": str(repo)})
        return pid

    def add_config(self, label: str, command: str, args: list[str]) -> str:
        cid = str(uuid.uuid4())
        self.configs.append(
            {
                "id": cid,
                "presetId": "custom",
                "label": label,
                "command": command,
                "args": args,
                "promptTransport": "argv",
                "promptArgs": [],
                "env": {"SECRETISH": "x"},
                "order": len(self.configs),
            }
        )
        return cid

    def hook(self, terminal_id: str, event: str) -> None:
        """What notify.sh does after an agent's hook: move the binding's last event."""
        with self.lock:
            binding = self.bindings.get(terminal_id)
            if binding is not None:
                binding["lastEventType"] = event
                binding["lastEventAt"] = int(time.time() * 1000)

    def procedures(self) -> dict[str, tuple[str, Callable[[Any], Any]]]:
        procs: dict[str, tuple[str, Callable[[Any], Any]]] = {
            "health.check": ("query", lambda _i: {"ok": True}),
            "project.list": ("query", lambda _i: list(self.projects)),
            "workspace.list": ("query", self._workspace_list),
            "workspaces.create": ("mutation", self._workspaces_create),
            "workspace.delete": ("mutation", self._workspace_delete),
            "settings.agentConfigs.list": ("query", lambda _i: list(self.configs)),
            "settings.agentConfigs.add": ("mutation", self._config_add),
            "settings.agentConfigs.update": ("mutation", self._config_update),
            "settings.agentConfigs.remove": ("mutation", self._config_remove),
            "agents.run": ("mutation", self._agents_run),
            "terminal.list": ("query", self._terminal_list),
            "terminal.snapshot": ("query", self._terminal_snapshot),
            "terminal.send": ("mutation", self._terminal_send),
            "terminal.killSession": ("mutation", self._terminal_kill),
            "terminalAgents.list": ("query", lambda _i: list(self.bindings.values())),
        }
        if self.build != "0822":
            procs["terminal.transcript"] = ("query", self._terminal_transcript)
        return procs

    # -- procedures ---------------------------------------------------------------------------

    def _workspace_list(self, _input: Any) -> list[dict[str, Any]]:
        rows = []
        for ws in self.workspaces.values():
            path = Path(ws["worktreePath"])
            rows.append({**ws, "worktreeExists": path.is_dir()})
        return rows

    def _workspaces_create(self, data: dict[str, Any]) -> dict[str, Any]:
        project = next((p for p in self.projects if p["id"] == data.get("projectId")), None)
        if project is None:
            raise TRPCError(404, f"Project not found: {data.get('projectId')}", "NOT_FOUND")
        branch = str(data.get("branch") or "")
        for ws in self.workspaces.values():
            if ws["projectId"] == project["id"] and ws["branch"] == branch:
                return {"workspace": {k: ws[k] for k in ("id", "name", "branch", "projectId")},
                        "alreadyExists": True}
        slug = branch.replace("/", "-")
        path = self.root / "worktrees" / project["name"] / slug
        argv = ["git", "worktree", "add", "-b", branch, str(path)]
        if data.get("baseBranch"):
            argv.append(str(data["baseBranch"]))
        made = subprocess.run(
            argv, cwd=project["repoPath"], capture_output=True, text=True, check=False
        )
        if made.returncode:
            raise TRPCError(500, f"git worktree add failed: {made.stderr.strip()}",
                            "INTERNAL_SERVER_ERROR")
        wid = str(uuid.uuid4())
        ws = {
            "id": wid,
            "name": data.get("name") or slug,
            "branch": branch,
            "projectId": project["id"],
            "projectName": project["name"],
            "worktreePath": str(path),
            "type": "worktree",
            "archivedAt": None,
        }
        self.workspaces[wid] = ws
        return {"workspace": {k: ws[k] for k in ("id", "name", "branch", "projectId")},
                "alreadyExists": False}

    def _workspace_delete(self, data: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspaces.pop(str(data.get("id")), None)
        if ws is None:
            raise TRPCError(404, f"Workspace not found: {data.get('id')}", "NOT_FOUND")
        for tid, session in list(self.sessions.items()):
            if session.workspace_id == ws["id"]:
                _kill(session)
                self.bindings.pop(tid, None)
        project = next(p for p in self.projects if p["id"] == ws["projectId"])
        # destroyWorkspace({force: true, deleteBranch: false}): removes a dirty worktree too
        gone = subprocess.run(
            ["git", "worktree", "remove", "--force", ws["worktreePath"]],
            cwd=project["repoPath"], capture_output=True, text=True, check=False,
        )
        return {"success": True, "cloudDeleted": False, "worktreeRemoved": gone.returncode == 0,
                "branchDeleted": False, "warnings": []}

    def _config_add(self, data: dict[str, Any]) -> dict[str, Any]:
        cid = self.add_config(data["label"], data["command"], list(data["args"]))
        return next(c for c in self.configs if c["id"] == cid)

    def _config_update(self, data: dict[str, Any]) -> dict[str, Any]:
        """settings.agentConfigs.update {id, patch}: the fields the patch names, else 404."""
        config = next((c for c in self.configs if c["id"] == data.get("id")), None)
        if config is None:
            raise TRPCError(404, f"Host agent config not found: {data.get('id')}", "NOT_FOUND")
        patch = data.get("patch") or {}
        if not patch:
            raise TRPCError(400, "Patch must update at least one field")
        for key in ("label", "command", "args", "promptTransport", "promptArgs", "env"):
            if key in patch:
                config[key] = patch[key]
        return dict(config)

    def _config_remove(self, data: dict[str, Any]) -> dict[str, Any]:
        self.configs = [c for c in self.configs if c["id"] != data.get("id")]
        return {"success": True}

    def _agents_run(self, data: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspaces.get(str(data.get("workspaceId")))
        if ws is None:
            raise TRPCError(404, f"Workspace not found: {data.get('workspaceId')}", "NOT_FOUND")
        config = next(
            (c for c in self.configs if data.get("agent") in (c["id"], c["presetId"])), None
        )
        if config is None:
            raise TRPCError(400, f"Unknown agent: {data.get('agent')}")
        prompt = str(data.get("prompt") or "")
        argv = [config["command"], *config["args"], *config["promptArgs"]]
        if prompt:
            argv.append(prompt)
        tid = str(uuid.uuid4())
        now = int(time.time() * 1000)
        session = Session(terminal_id=tid, workspace_id=ws["id"], argv=argv, created_at=now)
        self.sessions[tid] = session
        self.bindings[tid] = {"terminalId": tid, "workspaceId": ws["id"], "agentId": "claude",
                              "startedAt": now, "lastEventAt": now, "lastEventType": "Attached",
                              "account": {"email": "someone@example.invalid"}}
        if self.spawn:
            self._spawn(session, ws, config)
        else:
            session.text = f"$ {shlex.join(argv)}\n"
        return {"kind": "terminal", "sessionId": tid, "label": config["label"]}

    def _spawn(self, session: Session, ws: dict[str, Any], config: dict[str, Any]) -> None:
        env = {**os.environ, **self.env, **config.get("env", {}),
               "SUPERSET_TERMINAL_ID": session.terminal_id,
               "SUPERSET_WORKSPACE_ID": ws["id"],
               "SUPERSET_WORKSPACE_PATH": ws["worktreePath"],
               "SUPERSET_HOME_DIR": str(self.root)}
        env.pop("SECRETISH", None)
        proc = subprocess.Popen(
            session.argv, cwd=ws["worktreePath"], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        session.proc = proc

        def pump() -> None:
            assert proc.stdout is not None
            with proc.stdout:
                for chunk in iter(lambda: proc.stdout.read1(4096), b""):  # type: ignore[union-attr]
                    with self.lock:
                        session.text += chunk.decode(errors="replace")
            code = proc.wait()
            with self.lock:
                session.exited, session.exit_code = True, code
                # the 08-22 host ends the binding when the terminal exits
                self.bindings.pop(session.terminal_id, None)

        session.pump = threading.Thread(target=pump, name="superset-fake-pump", daemon=True)
        session.pump.start()

    def _session(self, data: dict[str, Any]) -> Session:
        session = self.sessions.get(str(data.get("terminalId")))
        if session is None or session.workspace_id != data.get("workspaceId"):
            raise TRPCError(404, f"Terminal session not found: {data.get('terminalId')}",
                            "NOT_FOUND")
        return session

    def _terminal_list(self, data: dict[str, Any] | None) -> dict[str, Any]:
        wid = (data or {}).get("workspaceId")
        return {"sessions": [
            {"terminalId": s.terminal_id, "workspaceId": s.workspace_id,
             "createdAt": s.created_at, "exited": s.exited, "exitCode": s.exit_code,
             "attached": False, "title": s.argv[0]}
            for s in self.sessions.values() if wid in (None, s.workspace_id)]}

    def _terminal_snapshot(self, data: dict[str, Any]) -> dict[str, Any]:
        session = self._session(data)
        lines = session.text.splitlines()[-int(data.get("maxLines") or 1000):]
        return {"terminalId": session.terminal_id, "cols": 120, "rows": 40,
                "text": "\n".join(lines)}

    def _terminal_transcript(self, data: dict[str, Any]) -> dict[str, Any]:
        session = self._session(data)
        return {"text": session.text[-int(data.get("maxChars") or 36000):]}

    def _terminal_send(self, data: dict[str, Any]) -> dict[str, Any]:
        session = self._session(data)
        if session.exited:
            raise TRPCError(409, "Terminal has exited", "CONFLICT")
        session.sent.append(str(data.get("text")))
        session.text += f"{data.get('text')}\n"
        return {"terminalId": session.terminal_id, "submitted": bool(data.get("submit", True))}

    def _terminal_kill(self, data: dict[str, Any]) -> dict[str, Any]:
        session = self._session(data)
        _kill(session)
        session.exited = True
        self.bindings.pop(session.terminal_id, None)
        return {"success": True}


def _kill(session: Session) -> None:
    proc = session.proc
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, 9)
            proc.wait(timeout=10)


def _make_handler(host: FakeSupersetHost) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, payload: Any) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, err: TRPCError, path: str) -> None:
            self._answer(err.status, {"error": {"json": {
                "message": err.message, "code": -32000,
                "data": {"code": err.code, "httpStatus": err.status, "path": path}}}})

        def _handle(self, kind: str) -> None:
            url = urlparse(self.path)
            if not url.path.startswith("/trpc/"):
                self._answer(404, {"error": "not found"})
                return
            proc = url.path[len("/trpc/"):]
            procs = host.procedures()
            if proc not in procs:
                self._error(TRPCError(404, f'No procedure found on path "{proc}"', "NOT_FOUND"),
                            proc)
                return
            if proc != "health.check" and self.headers.get("Authorization") != (
                f"Bearer {host.token}"
            ):
                host.unauthorized += 1
                self._error(TRPCError(401, "Unauthorized", "UNAUTHORIZED"), proc)
                return
            want, fn = procs[proc]
            if want != kind:
                self._error(TRPCError(405, f"Unsupported {kind} on {want} procedure {proc}",
                                      "METHOD_NOT_SUPPORTED"), proc)
                return
            try:
                if kind == "query":
                    raw = parse_qs(url.query).get("input", [None])[0]
                    data = json.loads(raw)["json"] if raw else None
                else:
                    length = int(self.headers.get("Content-Length") or 0)
                    data = json.loads(self.rfile.read(length) or b"{}").get("json")
            except (ValueError, KeyError, TypeError):
                self._error(TRPCError(400, "bad input"), proc)
                return
            with host.lock:
                host.calls.append((proc, data))
                try:
                    result = fn(data)
                except TRPCError as err:
                    self._error(err, proc)
                    return
            self._answer(200, {"result": {"data": {"json": result}}})

        def do_GET(self) -> None:
            self._handle("query")

        def do_POST(self) -> None:
            self._handle("mutation")

    return Handler


@contextlib.contextmanager
def running_host(root: Path, **kwargs: Any) -> Iterator[FakeSupersetHost]:
    host = FakeSupersetHost(root, **kwargs).start()
    try:
        yield host
    finally:
        host.stop()
