"""``fleet notify``: one message per new attention mark, to a webhook or a command.

A resident loop over :meth:`fleet.Fleet.wait`: every worker that needs attention with a mark
not yet notified gets one message (worker, state, reason, mark, what to do next and, for a
waiting permission request, the exact ``fleet answer`` command). Marks the coordinator has
seen never wake it (they are the coordinator's seen marks, journaled), and marks already
notified are kept in ``$FLEET_HOME/notify/sent`` (one line each, appended before the message
is sent), so a restarted ``fleet notify`` never sends one twice: at most once, by design.

A delivery that fails is retried with exponential backoff; each failure is a line in
``$FLEET_HOME/notify/errors.log``; after the last attempt the mark counts as handled (a dead
endpoint must not make the loop send the same message forever). It runs in its own process:
nothing here is on the path of a hook.

Message forms (``style``):

- ``json`` (default): the message as a JSON object, POSTed as ``application/json``;
- ``ntfy``: a plain-text body with a ``Title`` header, as ntfy's publish endpoint
  (``https://ntfy.sh/<topic>``) takes it;
- ``slack``: ``{"text": ...}``, as a Slack incoming webhook takes it.

A command gets the JSON object on its stdin (exit 0 is a delivery).
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import httpx
import orjson

from fleet._core.attention import attention_details
from fleet._core.fold import WorkerState
from fleet._errors import SettingsError, one_line
from fleet._redact import redact_value, secrets_of

STYLES: Final = ("json", "ntfy", "slack")
#: Environment variables whose values never leave in a message.
SECRET_VARS: Final = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
                      "OPENAI_API_KEY", "CODEX_API_KEY", "FLEET_ENDPOINT_API_KEY")
DEFAULT_ATTEMPTS: Final = 5
DEFAULT_BACKOFF: Final = 1.0
SEND_TIMEOUT: Final = 10.0


class NotifyFailed(SettingsError):
    """A target that cannot be used (a URL that is not http(s), an empty command)."""


@attrs.frozen(kw_only=True)
class Target:
    """Where messages go: ``url`` (POST) or ``command`` (argv; the message on stdin)."""

    url: str | None = None
    command: tuple[str, ...] = ()
    style: str = "json"

    def __attrs_post_init__(self) -> None:
        if (self.url is None) == (not self.command):
            raise NotifyFailed("give a webhook URL or a command, not both")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise NotifyFailed(f"not an http(s) URL: {self.url[:80]!r}")
        if self.style not in STYLES:
            raise NotifyFailed(f"unknown style {self.style!r} (known: {', '.join(STYLES)})")


def message(state: WorkerState, host: str | None = None) -> dict[str, Any]:
    """The message for one worker's state (no free text beyond fleet's own next step)."""
    details = attention_details(state)
    out: dict[str, Any] = {
        "host": host or socket.gethostname(),
        "worker": state.worker,
        "state": state.state,
        "reason": state.reason,
        "mark": state.mark,
        "next": details.get("next"),
    }
    if state.permission_request:
        out["permission_tool"] = state.permission_tool
        out["permission_command"] = state.permission_command
        out["answer"] = f"fleet answer {state.worker} allow|deny --reason TEXT"
    out["title"] = f"fleet: {state.worker} is {state.state} ({state.reason})"
    return out


def sample() -> dict[str, Any]:
    """What ``--test`` sends."""
    return {"host": socket.gethostname(), "worker": "example", "state": "blocked",
            "reason": "permission", "mark": "example@3", "test": True,
            "next": "waiting for permission to use Bash (make deploy): answer it",
            "answer": "fleet answer example allow|deny --reason TEXT",
            "title": "fleet: a test message from fleet notify"}


def _text(msg: Mapping[str, Any]) -> str:
    lines = [str(msg.get("title", "")), f"{msg.get('host')}/{msg.get('worker')} "
             f"{msg.get('mark')}: {msg.get('next') or ''}"]
    if msg.get("answer"):
        lines.append(str(msg["answer"]))
    return "\n".join(lines)


class Sender:
    """Delivers messages to one target, retrying with backoff."""

    def __init__(self, target: Target, *, attempts: int = DEFAULT_ATTEMPTS,
                 backoff: float = DEFAULT_BACKOFF, client: httpx.Client | None = None,
                 stop: threading.Event | None = None,
                 on_error: Callable[[str], None] | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        self.target = target
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.client = client
        self.stop = stop or threading.Event()
        self.on_error = on_error or (lambda _: None)
        env = os.environ if environ is None else environ
        names = [*SECRET_VARS, *env.get("FLEET_SECRET_VARS", "").split(",")]
        self.secrets = secrets_of(env.get(n.strip()) for n in names if n.strip())

    def send(self, msg: Mapping[str, Any]) -> bool:
        """Deliver ``msg``; True once delivered, False after the last failed attempt."""
        msg = redact_value(dict(msg), self.secrets)
        delay = self.backoff
        for attempt in range(1, self.attempts + 1):
            try:
                self._once(msg)
                return True
            except Exception as exc:  # any failure of the endpoint or command is retried
                self.on_error(f"{msg.get('mark')}: attempt {attempt}/{self.attempts}: "
                              f"{one_line(exc, limit=300)}")
            if attempt < self.attempts and self.stop.wait(delay):
                return False
            delay *= 2
        return False

    def _once(self, msg: Mapping[str, Any]) -> None:
        body = orjson.dumps(msg)
        if self.target.command:
            done = subprocess.run(list(self.target.command), input=body, capture_output=True,
                                  timeout=SEND_TIMEOUT, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{self.target.command[0]} exited {done.returncode}")
            return
        assert self.target.url is not None
        client = self.client or httpx.Client(timeout=SEND_TIMEOUT)
        try:
            if self.target.style == "ntfy":
                title = str(msg.get("title", "fleet"))
                response = client.post(self.target.url, content=_text(msg).encode(),
                                       headers={"Title": title.encode("ascii", "replace")
                                                .decode()})
            elif self.target.style == "slack":
                response = client.post(self.target.url, json={"text": _text(msg)})
            else:
                response = client.post(self.target.url, content=body,
                                       headers={"Content-Type": "application/json"})
            response.raise_for_status()
        finally:
            if self.client is None:
                client.close()


class SentMarks:
    """The marks already notified: ``$FLEET_HOME/notify/sent``, one per line."""

    def __init__(self, home: Path) -> None:
        self.dir = home / "notify"
        self.path = self.dir / "sent"
        self.errors = self.dir / "errors.log"

    def load(self) -> set[str]:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return set()
        return {line for line in text.split("\n")[:-1] if line}

    def add(self, mark: str) -> None:
        self._append(self.path, mark)

    def error(self, line: str) -> None:
        self._append(self.errors, " ".join(line.split())[:1000])

    def _append(self, path: Path, line: str) -> None:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def notify_new(states: Sequence[WorkerState], sent: SentMarks, sender: Sender,
               done: set[str]) -> list[str]:
    """Send one message per state whose mark is not in ``done``; returns the marks sent."""
    out: list[str] = []
    for state in states:
        if state.mark in done:
            continue
        # Recorded first: a restart between the two must not send it again.
        sent.add(state.mark)
        done.add(state.mark)
        delivered = sender.send(message(state))
        if delivered:
            out.append(state.mark)
        else:
            sent.error(f"{state.mark}: not delivered after {sender.attempts} attempts")
    return out
