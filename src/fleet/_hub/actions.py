"""Acting on a remote worker: check, send and retire run on the worker's own host.

The coordinator sends a request to ``fleet.rpc.<host>.act``; the host's ``fleet ship`` answers
it by running the very command a person would run there (``fleet check``, ``fleet send``,
``fleet retire``, with every guard they have) and replies with its exit code and what it
printed, the same text or JSON. Nothing is ever done from the coordinator's copy of a journal.
A host that is offline is refused at once, without a request.

The host decides what it accepts: only these three verbs, a worker id of its own, bounded text;
check commands (``--cmd``, shell commands from the brief) only when its ``fleet ship`` was
started with ``--allow-commands``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from fleet._core.ids import is_worker_id
from fleet._home import FILE_MODE, ensure_dir
from fleet._hub.cursor import ship_dir
from fleet._hub.redact import redact_text

VERBS: Final = ("check", "send", "retire")
#: The most follow-up text a request may carry.
MAX_TEXT: Final = 256 * 1024
#: The most output a reply carries (NATS messages are bounded, 1 MiB by default).
MAX_OUTPUT: Final = 768 * 1024
DEFAULT_CMD_TIMEOUT: Final = 900.0
#: The inbox holds the follow-ups delivered through the hub (an agent in a terminal app is
#: pointed at the file and reads it when it comes to it): at most this many files and bytes;
#: one older than INBOX_KEEP seconds is removed to make room, and a refused one at once.
MAX_INBOX_FILES: Final = 64
MAX_INBOX_BYTES: Final = 16 * 1024 * 1024
INBOX_KEEP: Final = 24 * 3600.0
#: Lines of ``hub/actions.jsonl`` kept: who asked for what, and what came of it.
MAX_AUDIT: Final = 10_000
#: Exit codes, as the CLI's (fleet._cli._common.Exit), without importing the CLI.
ERROR, USAGE, REFUSED = 1, 2, 4


@attrs.frozen(kw_only=True)
class RemoteResult:
    """What the host's command did: its exit code and what it printed."""

    host: str
    verb: str
    exit: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit == 0

    def json(self) -> Any:
        """The command's JSON output (when it was asked for JSON), else None."""
        try:
            return orjson.loads(self.stdout)
        except orjson.JSONDecodeError:
            return None


def request(verb: str, *, as_json: bool, **args: Any) -> dict[str, Any]:
    """The body of a remote action request."""
    return {"v": 1, "verb": verb, "json": as_json, "ts": time.time(), "args": args}


def budget(req: dict[str, Any]) -> float:
    """How long the host may take to answer a request."""
    args = req.get("args") or {}
    cmds = args.get("cmds") or []
    per = float(args.get("timeout") or DEFAULT_CMD_TIMEOUT)
    return 120.0 + per * len(cmds)


def refuse(verb: str, worker: Any, code: int, text: str, host: str) -> dict[str, Any]:
    return {"v": 1, "host": host, "verb": verb, "worker": worker, "exit": code, "stdout": "",
            "stderr": f"fleet: {text}\n"}


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of text")
    return value


def _argv(req: dict[str, Any], home: Path, allow_commands: bool) -> list[str]:
    """The fleet command line a request stands for. ValueError: malformed; PermissionError:
    refused by this host."""
    verb = req.get("verb")
    args = req.get("args")
    if verb not in VERBS or not isinstance(args, dict):
        raise ValueError(f"unknown action {verb!r}")
    out: list[str] = [str(verb)]
    if verb == "retire":
        workers = _strings(args.get("workers"), "workers")
        if not all(is_worker_id(w) for w in workers):
            raise ValueError("a worker id is not valid")
        out += workers
        if args.get("all_done") is True:
            out.append("--all-done")
        mode = args.get("mode")
        if mode is not None:
            if mode not in ("ask", "auto"):
                raise ValueError("mode must be ask or auto")
            out += ["--mode", mode]
        if args.get("yes") is True:
            out.append("--yes")
    else:
        worker = args.get("worker")
        if not isinstance(worker, str) or not is_worker_id(worker):
            raise ValueError("a worker id is not valid")
        out.append(worker)
    if verb in ("check", "retire"):
        base = args.get("base")
        if base is not None:
            if not isinstance(base, str) or base.startswith("-") or not base:
                raise ValueError("base must be a ref")
            out += ["--base", base]
        cmds = _strings(args.get("cmds"), "cmds")
        if cmds and not allow_commands:
            raise PermissionError(
                "this host does not run check commands sent through the hub (start its "
                "`fleet ship` with --allow-commands, or check there)"
            )
        for cmd in cmds:
            out += ["--cmd", cmd]
        timeout = args.get("timeout")
        if verb == "check" and timeout is not None:
            if type(timeout) not in (int, float) or not 0 <= timeout < 1e6:
                raise ValueError("timeout must be a number of seconds")
            out += ["--timeout", str(timeout)]
    if verb == "send":
        text = args.get("text")
        if not isinstance(text, str) or len(text.encode()) > MAX_TEXT:
            raise ValueError(f"the follow-up must be text of at most {MAX_TEXT} bytes")
        out.append(str(_inbox_file(home, str(args["worker"]), text)))
    if req.get("json") is True:
        out.append("--json")
    return out


def _inbox_file(home: Path, worker: str, text: str) -> Path:
    """A follow-up received from the hub, as the file ``fleet send`` reads (0600). Refused
    (OSError) when the inbox already holds its bound of files or bytes."""
    inbox = ensure_dir(ensure_dir(ship_dir(home)) / "inbox")
    now = time.time()
    held: list[Path] = []
    size = 0
    for path in inbox.iterdir():
        try:
            st = path.lstat()
            if now - st.st_mtime > INBOX_KEEP:
                path.unlink()
                continue
        except OSError:
            continue
        held.append(path)
        size += st.st_size
    if len(held) >= MAX_INBOX_FILES or size + len(text.encode()) > MAX_INBOX_BYTES:
        raise OSError(f"its inbox is full ({len(held)} follow-ups waiting)")
    name = f"{worker}-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}.md"
    path = inbox / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _cut(text: str) -> str:
    """What a command printed, as it may leave the host: credential shapes redacted (a check
    command's output may have printed one), at most MAX_OUTPUT characters."""
    text = redact_text(text.encode("utf-8", "surrogateescape")).decode("utf-8", "replace")
    return text if len(text) <= MAX_OUTPUT else text[: MAX_OUTPUT - 40] + "\n[output cut]\n"


async def run_on_host(
    home: Path, host: str, data: bytes, *, allow_commands: bool, fleet_argv: Sequence[str] = ()
) -> dict[str, Any]:
    """Answer one request: run the fleet command it stands for in this fleet home."""
    try:
        req = orjson.loads(data)
        if not isinstance(req, dict):
            raise ValueError("not an object")
    except (orjson.JSONDecodeError, ValueError):
        return refuse("?", None, USAGE, "a malformed request reached the host", host)
    verb = str(req.get("verb"))
    raw = req.get("args")
    args: dict[str, Any] = raw if isinstance(raw, dict) else {}
    worker = args.get("worker", args.get("workers"))
    try:
        argv = _argv(req, home, allow_commands)
    except PermissionError as exc:
        return refuse(verb, worker, REFUSED, f"host {host}: {exc}", host)
    except (ValueError, KeyError, OSError) as exc:
        return refuse(verb, worker, USAGE, f"host {host} refused the request: {exc}", host)
    command = [*(fleet_argv or [sys.executable, "-m", "fleet"]), "--home", str(home), *argv]
    inbox = Path(argv[-2] if argv[-1] == "--json" else argv[-1]) if verb == "send" else None
    proc = None
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), budget(req))
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            return refuse(verb, worker, ERROR, f"host {host}: {verb} took too long", host)
    finally:
        if inbox is not None and (proc is None or proc.returncode != 0):
            # A follow-up that was not sent is not kept.
            with contextlib.suppress(OSError):
                inbox.unlink()
    return {
        "v": 1,
        "host": host,
        "verb": verb,
        "worker": worker,
        "exit": proc.returncode if proc.returncode is not None else ERROR,
        "stdout": _cut(out.decode("utf-8", "replace")),
        "stderr": _cut(err.decode("utf-8", "replace")),
    }


def record_action(home: Path, host: str, by: str, reply: dict[str, Any]) -> None:
    """Append who asked for what, and its exit code, to ``hub/actions.jsonl`` (bounded)."""
    path = ensure_dir(ship_dir(home)) / "actions.jsonl"
    line = orjson.dumps({"ts": time.time(), "host": host, "by": by, "verb": reply.get("verb"),
                         "worker": reply.get("worker"), "exit": reply.get("exit")}) + b"\n"
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, FILE_MODE)
        with os.fdopen(fd, "ab") as f:
            f.write(line)
            big = f.tell() > MAX_AUDIT * 200
        if big:
            kept = path.read_bytes().splitlines(keepends=True)[-MAX_AUDIT // 2:]
            from fleet._files import atomic_write

            atomic_write(path, b"".join(kept), FILE_MODE, fsync=False)


def result_of(host: str, verb: str, data: bytes) -> RemoteResult:
    try:
        reply = orjson.loads(data)
        return RemoteResult(
            host=host,
            verb=verb,
            exit=int(reply["exit"]),
            stdout=str(reply.get("stdout", "")),
            stderr=str(reply.get("stderr", "")),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return RemoteResult(
            host=host, verb=verb, exit=ERROR, stdout="",
            stderr=f"fleet: host {host} sent a reply fleet cannot read\n",
        )
