"""``fleet notify``: one message per new attention mark, never twice across restarts, the
coordinator's seen marks respected, failed deliveries retried and logged, keys kept out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fleet import Fleet, HookEvent
from fleet._notify import NotifyFailed, Target

FLEET = [sys.executable, "-m", "fleet"]
KEY = "sk-ant-notify-secret-0123456789abcdef"


class Endpoint:
    """A webhook on 127.0.0.1 that records each POST and answers ``status``."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.status = 200
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                endpoint.received.append((dict(self.headers), self.rfile.read(length)))
                self.send_response(endpoint.status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/fleet"

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in self.received]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    e = Endpoint()
    yield e
    e.close()


def notify(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FLEET, "notify", *args], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, **(env or {})})


def hook(worker: str, name: str, **data: Any) -> None:
    with Fleet() as fleet:
        fleet.record(worker, HookEvent(ts=time.time(), src="claude", hook=name, data=data))


@pytest.fixture
def workers(tmp_path: Path) -> None:
    with Fleet() as fleet:
        for name in ("w1", "w2", "w3"):
            (tmp_path / name).mkdir()
            fleet.register(name, worktree=tmp_path / name, tool="claude")
    hook("w1", "Stop", last_assistant_message=f"Done with {KEY}")
    hook("w2", "PermissionRequest", tool_name="Bash", request="0123456789abcdef",
         detail={"command": "make deploy"})


def test_one_message_per_new_mark_never_twice_across_restarts(
    endpoint: Endpoint, workers: None
) -> None:
    first = notify("--webhook", endpoint.url, "--timeout", "0.5", "--json",
                   env={"ANTHROPIC_API_KEY": KEY})
    assert first.returncode == 0, first.stderr
    got = {b["worker"]: b for b in endpoint.bodies()}
    assert sorted(got) == ["w1", "w2"]
    assert (got["w1"]["state"], got["w1"]["reason"]) == ("stopped", "turn_end")
    assert got["w2"]["answer"] == "fleet answer w2 allow|deny --reason TEXT"
    assert got["w2"]["permission_command"] == "make deploy"
    assert KEY not in json.dumps(endpoint.bodies())
    assert sorted(json.loads(line)["sent"] for line in first.stdout.splitlines()) == [
        got["w1"]["mark"], got["w2"]["mark"]]

    again = notify("--webhook", endpoint.url, "--timeout", "0.5")

    assert again.returncode == 0 and len(endpoint.received) == 2
    # A new state is a new mark; a mark the coordinator saw is not sent.
    hook("w1", "UserPromptSubmit")
    hook("w1", "Stop")
    with Fleet() as fleet:
        w3 = fleet.state("w3").mark
    hook("w3", "Stop")
    with Fleet() as fleet:
        w3 = fleet.state("w3").mark
        fleet.seen(w3)
    notify("--webhook", endpoint.url, "--timeout", "0.5")
    assert [b["worker"] for b in endpoint.bodies()[2:]] == ["w1"]


def test_a_failing_endpoint_is_retried_then_logged(endpoint: Endpoint, workers: None) -> None:
    endpoint.status = 500

    run = notify("--webhook", endpoint.url, "--timeout", "0.5", "--attempts", "3",
                 "--backoff", "0.01")

    assert run.returncode == 0, run.stderr
    assert len(endpoint.received) == 6  # two marks, three attempts each
    errors = (Path(os.environ["FLEET_HOME"]) / "notify" / "errors.log").read_text()
    assert errors.count(": attempt ") == 6 and errors.count("not delivered after 3 attempts") == 2
    endpoint.status = 200
    notify("--webhook", endpoint.url, "--timeout", "0.5")
    assert len(endpoint.received) == 6  # never twice, even a failed one


def test_styles_and_the_test_message(endpoint: Endpoint) -> None:
    assert notify("--webhook", endpoint.url, "--test").returncode == 0
    assert endpoint.bodies()[0]["test"] is True
    assert notify("--webhook", endpoint.url, "--test", "--style", "slack").returncode == 0
    assert "fleet: a test message" in json.loads(endpoint.received[1][1])["text"]
    assert notify("--webhook", endpoint.url, "--test", "--style", "ntfy").returncode == 0
    headers, body = endpoint.received[2]
    assert headers["Title"] == "fleet: a test message from fleet notify"
    assert b"fleet answer example allow|deny" in body
    endpoint.status = 404
    failed = notify("--webhook", endpoint.url, "--test", "--attempts", "1")
    assert failed.returncode == 1 and "NOT delivered" in failed.stdout


def test_a_command_gets_the_message_on_stdin(tmp_path: Path, workers: None) -> None:
    out = tmp_path / "got.jsonl"
    script = tmp_path / "take.py"
    script.write_text("import sys\nopen(sys.argv[1], 'a').write(sys.stdin.read() + '\\n')\n")

    run = notify("--command", f"{sys.executable} {script} {out}", "--timeout", "0.5")

    assert run.returncode == 0, run.stderr
    assert sorted(json.loads(line)["worker"] for line in out.read_text().splitlines()) == [
        "w1", "w2"]


def test_bad_targets_are_refused_in_one_line() -> None:
    for kwargs in ({"url": "file:///etc/passwd"}, {}, {"url": "http://x", "command": ("a",)},
                   {"url": "http://x", "style": "morse"}):
        with pytest.raises(NotifyFailed):
            Target(**kwargs)  # type: ignore[arg-type]
    run = notify("--webhook", "ftp://example.invalid/x", "--test")
    assert run.returncode == 1 and run.stderr.count("\n") == 1 and "http(s)" in run.stderr
