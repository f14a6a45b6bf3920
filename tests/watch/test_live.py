"""`fleet watch` on a terminal: a live table, attention first, states in colour, q to quit;
piped, plain lines as before."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from fleet import Fleet
from fleet._live import STATE_STYLES, ordered, render


def _states(home: Path, tmp_path: Path) -> Fleet:
    fleet = Fleet(home)
    for name in ("beta", "alpha"):
        (tmp_path / name).mkdir()
        fleet.register(name, worktree=tmp_path / name, tool="claude")
    return fleet


def test_the_table_puts_attention_first_and_colours_each_state(
    home: Path, tmp_path: Path
) -> None:
    with _states(home, tmp_path) as fleet:
        states = list(fleet.poll().workers)
        assert [s.worker for s in ordered(states)] == ["alpha", "beta"]
        console = Console(record=True, width=100, force_terminal=True, color_system="standard")
        console.print(render(states, fleet.clock.now()))
        text = console.export_text(clear=False)
        styled = console.export_text(styles=True)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["WORKER", "STATE", "REASON"]
    assert [ln.split()[0] for ln in lines[1:3]] == ["alpha", "beta"]
    assert "2 workers, 0 need attention" in text and "q to quit" in text
    assert "\x1b[36mstarting" in styled  # starting is cyan
    assert set(STATE_STYLES) >= {"starting", "working", "stopped", "quiet", "blocked", "done",
                                 "gone", "retired"}
    empty = Console(record=True, width=100)
    empty.print(render([], 0.0))
    assert "no workers yet" in empty.export_text()


def _read_until(fd: int, wanted: bytes, timeout: float) -> bytes:
    buf = b""
    end = time.monotonic() + timeout
    while wanted not in buf and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                buf += os.read(fd, 65536)
            except OSError:
                break
    return buf


def test_on_a_terminal_it_draws_in_place_and_q_quits(home: Path, tmp_path: Path) -> None:
    with _states(home, tmp_path):
        pass
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "fleet", "watch"], stdin=follower,
                            stdout=follower, stderr=follower, env=env)
    os.close(follower)
    try:
        out = _read_until(leader, b"2 workers", 30)
        out += _read_until(leader, b"q to quit", 5)
        assert b"alpha" in out and b"beta" in out and b"\x1b[" in out
        assert out.index(b"alpha") < out.index(b"beta")
        os.write(leader, b"q")
        assert proc.wait(timeout=30) == 0
        out += _read_until(leader, b"\x00never", 0.5)
        assert b"Traceback" not in out and b"interrupted" not in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)


def test_piped_it_prints_plain_lines(home: Path, tmp_path: Path) -> None:
    with _states(home, tmp_path):
        pass
    done = subprocess.run([sys.executable, "-m", "fleet", "watch", "--timeout", "1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sorted(ln.split(None, 1)[1] for ln in lines) == [
        "alpha: - -> starting (registered)", "beta: - -> starting (registered)"]
    assert "\x1b" not in done.stdout


@pytest.mark.parametrize("key", [b"x"])
def test_other_keys_do_not_quit(home: Path, tmp_path: Path, key: bytes) -> None:
    with _states(home, tmp_path):
        pass
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "fleet", "watch", "--timeout", "2"],
                            stdin=follower, stdout=follower, stderr=follower,
                            env={**os.environ, "TERM": "xterm-256color"})
    os.close(follower)
    try:
        _read_until(leader, b"q to quit", 30)
        os.write(leader, key)
        time.sleep(0.5)
        assert proc.poll() is None  # still watching
        assert proc.wait(timeout=30) == 0  # until --timeout passes with no transition
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
