"""The supervisor's tail of its agent's output: lines are read as they are written (a fact
reaches the journal while the agent still runs), a partial line waits for its end, a huge line
is skipped, and stopping reads what is left; status and doctor say when hooks are not running."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from fleet._clock import SystemClock
from fleet._core.events import Event, HookEvent, HooksOff, Registered, Started, TurnEnded
from fleet._core.stream import MAX_LINE, StreamReader
from fleet._health import hooks_not_running, simple_in_environment
from fleet._journal import append
from fleet._stream_tail import StreamTail, hooks_off_reasons, simple_set
from tests.cli.test_cli_surface import run

INIT = b'{"type":"system","subtype":"init","session_id":"s1"}\n'
TOOL = (b'{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1",'
        b'"name":"Bash"}]}}\n')
DONE = b'{"type":"result","is_error":false,"result":"FLEET_WORKER_DONE: x"}\n'


class Collect:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.cond = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def wait_for(self, count: int) -> list[Event]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.events) >= count, timeout=10)
            return list(self.events)


def test_lines_are_read_while_they_are_written(tmp_path: Path) -> None:
    out = tmp_path / "run.out"
    got = Collect()
    tail = StreamTail(out, StreamReader("claude"), got, SystemClock()).start()
    try:
        with out.open("wb", buffering=0) as f:
            f.write(INIT)
            assert [getattr(e, "hook", "") for e in got.wait_for(1)] == ["SessionStart"]
            f.write(TOOL[:20])  # half a line: nothing yet
            f.write(TOOL[20:])
            assert [getattr(e, "hook", "") for e in got.wait_for(2)][1] == "PreToolUse"
            f.write(b'{"type":"x","pad":"' + b"a" * (MAX_LINE + 10) + b'"}\n')
            f.write(DONE[:-1])  # the last line, without its newline: read at the stop
    finally:
        tail.stop()
    assert tail.error is None
    assert [type(e) for e in got.events] == [HookEvent, HookEvent, TurnEnded]


def test_a_tail_of_a_file_that_never_appears_stops(tmp_path: Path) -> None:
    got = Collect()
    tail = StreamTail(tmp_path / "never.out", StreamReader("claude"), got, SystemClock())
    tail.start().stop()
    assert got.events == [] and tail.error is None


def test_hooks_off_is_read_from_the_process(tmp_path: Path) -> None:
    script = "import os, time; os.setpgid(0, 0); print('ready', flush=True); time.sleep(30)"
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", script, "--bare"], stdout=subprocess.PIPE,
                            env={**os.environ, "CLAUDE_CODE_SIMPLE": "1"})
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        assert hooks_off_reasons(proc.pid) == (
            "--bare on its command line", "CLAUDE_CODE_SIMPLE=1 in its environment")
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert hooks_off_reasons(proc.pid) == ()  # gone: nothing to say


@pytest.mark.parametrize(("value", "on"), [("1", True), ("true", True), ("0", False),
                                           ("", False), ("false", False), (None, False)])
def test_simple_values(value: str | None, on: bool) -> None:
    assert simple_set(value) is on
    env = {} if value is None else {"CLAUDE_CODE_SIMPLE": value}
    assert (simple_in_environment(env) is not None) is on


def test_status_and_doctor_say_the_hooks_are_not_running(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = Path(os.environ["FLEET_HOME"])
    append(home, "w1", Registered(ts=1.0, tool="claude", worktree=str(tmp_path)))
    append(home, "w1", Started(ts=2.0, src="headless", pid=1))
    append(home, "w1", HookEvent(ts=3.0, src="stream", hook="SessionStart", data={}))
    code, out, _ = run(capsys, "status")
    assert code == 0 and "hooks are not running" in out  # a stream, and never a hook
    append(home, "w1", HooksOff(ts=3.1, why=("--bare on its command line",)))
    append(home, "w1", HookEvent(ts=4.0, src="stream", hook="PreToolUse", data={}))
    code, out, _ = run(capsys, "status")
    assert code == 0
    assert ("w1: its hooks are not running (--bare on its command line); fleet follows it "
            "from the agent's own stream only. Fix: unset CLAUDE_CODE_SIMPLE") in out
    code, out, _ = run(capsys, "doctor", "--json")
    problems = json.loads(out)["problems"]
    assert any("w1: its hooks are not running" in p for p in problems), problems
    monkeypatch.setenv("CLAUDE_CODE_SIMPLE", "1")
    code, out, _ = run(capsys, "doctor", "--json")
    assert any(p.startswith("CLAUDE_CODE_SIMPLE=1 is set in this environment")
               for p in json.loads(out)["problems"])
    # a hook that ran, even once, means hooks run
    append(home, "w1", HookEvent(ts=5.0, src="claude", hook="PostToolUse", data={}))
    code, out, _ = run(capsys, "status")
    assert "hooks are not running" not in out


def test_the_note_without_a_known_cause_points_at_the_hook_checks() -> None:
    from fleet._core.fold import fold

    state = fold("w1", [Registered(ts=1.0), HookEvent(ts=2.0, src="stream", hook="PreToolUse")],
                 now=3.0)
    note = hooks_not_running(state)
    assert note is not None and "no hook event ever arrived" in note
    assert "`fleet hooks status`" in note
