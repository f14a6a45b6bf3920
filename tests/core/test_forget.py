"""`fleet forget`: a worker registered by mistake, or that failed, can be removed; its journal
is kept aside, its worktree untouched, and its worktree's sessions reach nobody afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet import Fleet, Started
from fleet._cli import main
from fleet._hook_command import hook_argv
from fleet._proc import process_start_time


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _hook(home: Path, cwd: Path, payload: dict[str, object]) -> None:
    env = {"PATH": os.environ["PATH"], "FLEET_HOME": str(home)}
    subprocess.run(hook_argv("claude", home=home), input=json.dumps({**payload, "cwd": str(cwd)})
                   .encode(), env=env, capture_output=True, timeout=60, check=True)


def test_a_forgotten_worker_is_kept_aside_and_its_sessions_reach_nobody(
    capsys: pytest.CaptureFixture[str], home: Path, worktree: Path
) -> None:
    assert run(capsys, "register", "w1", "--worktree", str(worktree))[0] == 0
    _hook(home, worktree, {"hook_event_name": "Stop", "session_id": "s"})
    (worktree / "work.txt").write_text("not committed\n")
    code, out, err = run(capsys, "forget", "w1", "--json")
    assert (code, err) == (0, "")
    (gone,) = json.loads(out)
    kept = Path(gone["kept_at"])
    assert kept.parent == home / "forgotten" and gone["worktrees"] == [os.path.realpath(worktree)]
    assert [json.loads(line)["type"] for line in (kept / "journal.jsonl").read_text()
            .splitlines()] == ["registered", "Stop"]
    assert (worktree / "work.txt").read_text() == "not committed\n"  # the work is untouched
    assert run(capsys, "status", "--json")[1] == "[]\n"
    _hook(home, worktree, {"hook_event_name": "Stop", "session_id": "s"})
    assert not (home / "workers" / "w1").exists()  # the session's hook found no worker
    # The same name can be registered again, afresh.
    assert run(capsys, "register", "w1", "--worktree", str(worktree))[0] == 0
    _hook(home, worktree, {"hook_event_name": "Stop", "session_id": "s"})
    assert json.loads(run(capsys, "status", "w1", "--json")[1])[0]["state"] == "stopped"


def test_forget_refuses_while_the_agent_still_runs_unless_forced(
    capsys: pytest.CaptureFixture[str], home: Path, worktree: Path
) -> None:
    assert run(capsys, "register", "w1", "--worktree", str(worktree))[0] == 0
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Fleet() as fleet:
            fleet.record("w1", Started(ts=time.time(), pid=agent.pid,
                                       start_time=process_start_time(agent.pid)))
        code, out, err = run(capsys, "forget", "w1")
        assert (code, out) == (4, "") and f"pid {agent.pid}" in err and "--force" in err
        assert (home / "workers" / "w1" / "journal.jsonl").is_file()  # nothing moved
        code, out, _ = run(capsys, "forget", "w1", "--force")
        assert code == 0 and "forgot w1" in out
    finally:
        agent.kill()
        agent.wait()


def test_forget_of_an_unknown_worker_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "forget", "ghost")
    assert (code, out) == (1, "") and err.count("\n") == 1 and "no worker 'ghost'" in err
