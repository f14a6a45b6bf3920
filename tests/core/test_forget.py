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
    # Its session was heard of a moment ago: forgetting it takes --force.
    code, out, err = run(capsys, "forget", "w1", "--json", "--force")
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


def test_the_archived_journal_is_read_back_with_log(
    capsys: pytest.CaptureFixture[str], home: Path, worktree: Path
) -> None:
    assert run(capsys, "register", "w1", "--worktree", str(worktree))[0] == 0
    _hook(home, worktree, {"hook_event_name": "Stop", "session_id": "s"})
    assert run(capsys, "forget", "w1", "--force")[0] == 0
    code, out, _ = run(capsys, "log", "w1", "--archived", "--json")
    assert code == 0 and [e["type"] for e in json.loads(out)] == ["registered", "Stop"]
    code, out, err = run(capsys, "log", "w1")
    assert code != 0 and err.count("\n") == 1
    code, _, err = run(capsys, "log", "ghost", "--archived")
    assert code == 1 and "no forgotten journal of ghost" in err and err.count("\n") == 1


def test_forget_all_gone_takes_only_the_gone(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    from tests.conftest import git_worktree

    for name in ("gone1", "alive"):
        assert run(capsys, "register", name, "--worktree",
                   str(git_worktree(tmp_path / name)))[0] == 0
    _hook(home, tmp_path / "gone1", {"hook_event_name": "SessionEnd", "session_id": "s",
                                     "reason": "other"})
    code, out, _ = run(capsys, "forget", "--all-gone", "--json")
    assert code == 0 and [g["worker"] for g in json.loads(out)] == ["gone1"]
    assert [s["worker"] for s in json.loads(run(capsys, "status", "--json")[1])] == ["alive"]
    code, out, _ = run(capsys, "forget", "--all-gone")
    assert code == 0 and out == "no worker is gone; nothing forgotten\n"
    code, _, err = run(capsys, "forget", "alive", "--all-gone")
    assert code == 1 and "not both" in err
    assert run(capsys, "forget")[0] == 1


def test_register_refuses_a_worktree_of_another_worker_and_any_dir_opts_in(
    capsys: pytest.CaptureFixture[str], home: Path, worktree: Path, tmp_path: Path
) -> None:
    assert run(capsys, "register", "w1", "--worktree", str(worktree))[0] == 0
    code, _, err = run(capsys, "register", "w2", "--worktree", str(worktree))
    assert code == 4 and "registered to worker w1" in err and err.count("\n") == 1
    assert run(capsys, "register", "w1", "--worktree", str(worktree))[0] == 0  # its own again
    plain = tmp_path / "plain"
    plain.mkdir()
    code, _, err = run(capsys, "register", "w3", "--worktree", str(plain))
    assert code == 1 and "--any-dir" in err
    assert run(capsys, "register", "w3", "--worktree", str(plain), "--any-dir")[0] == 0
