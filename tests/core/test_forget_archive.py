"""Forgetting a worker that may still be in use: refused while its journal moves, unless
forced; a session that goes on journals into the archive, never into a new worker, and
`fleet doctor` says so; archives of ids with dots (`a`, `a.b`) stay apart."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._cli import main
from fleet._core.events import HookEvent
from fleet._forget import archive_owner, archived_journals, late_events
from fleet._hook_command import hook_argv

from ..conftest import git_worktree


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _hook(home: Path, payload: dict[str, object], *, worker: str | None = None,
          cwd: Path | None = None) -> None:
    env = {"PATH": os.environ["PATH"], "FLEET_HOME": str(home)}
    if worker is not None:
        env["FLEET_WORKER"] = worker
    body = {**payload, "session_id": "s", "cwd": str(cwd or home)}
    subprocess.run(hook_argv("claude", home=home), input=json.dumps(body).encode(), env=env,
                   capture_output=True, timeout=60, check=True)


def test_a_worker_heard_of_lately_is_not_forgotten_without_force(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    wt = git_worktree(tmp_path / "wt")
    assert run(capsys, "register", "w1", "--worktree", str(wt))[0] == 0
    # An interactive session fleet knows no process of: only its hooks show it works.
    _hook(home, {"hook_event_name": "UserPromptSubmit", "prompt": "go"}, cwd=wt)
    code, out, err = run(capsys, "forget", "w1")
    assert (code, out) == (4, "") and err.count("\n") == 1
    assert "journal moved" in err and "--force" in err
    assert (home / "workers" / "w1" / "journal.jsonl").is_file()
    # Forced, it goes.
    assert run(capsys, "forget", "w1", "--force")[0] == 0
    # Heard of ten seconds ago: within a bound of 600 s it stays, past one of 5 s it goes.
    assert run(capsys, "register", "w3", "--worktree", str(wt))[0] == 0
    with Fleet(home) as fleet:
        fleet.record("w3", HookEvent(ts=fleet.clock.now() - 10, src="claude", hook="Stop",
                                     data={}))
    assert run(capsys, "forget", "w3", "--quiet-after", "600")[0] == 4
    assert run(capsys, "forget", "w3", "--quiet-after", "5")[0] == 0
    # A worker only registered (no agent heard of yet) goes at once.
    assert run(capsys, "register", "w2", "--worktree", str(wt))[0] == 0
    assert run(capsys, "forget", "w2")[0] == 0


def test_a_forgotten_workers_session_journals_into_its_archive(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    wt = git_worktree(tmp_path / "wt")
    assert run(capsys, "register", "w1", "--worktree", str(wt))[0] == 0
    _hook(home, {"hook_event_name": "UserPromptSubmit", "prompt": "go"}, worker="w1")
    assert run(capsys, "forget", "w1", "--force")[0] == 0
    _, out, _ = run(capsys, "doctor", "--json")
    assert "was forgotten" not in out

    _hook(home, {"hook_event_name": "Stop", "last_assistant_message":
                 "FLEET_WORKER_DONE: it went on"}, worker="w1")
    _hook(home, {"hook_event_name": "SessionEnd", "reason": "other"}, worker="w1")

    assert not (home / "workers" / "w1").exists()  # no new worker of that id
    assert run(capsys, "status", "--json")[1] == "[]\n"
    (journal,) = archived_journals(home, "w1")
    types = [json.loads(line)["type"] for line in journal.read_text().splitlines()]
    assert types == ["registered", "UserPromptSubmit", "Stop", "SessionEnd"]
    (late,) = late_events(home)
    assert (late.worker, late.count, late.archive) == ("w1", 2, journal.parent)
    _, out, _ = run(capsys, "doctor", "--json")
    report = json.loads(out)
    assert any("w1 was forgotten, but 2 events came for it" in p for p in report["problems"])
    # A worker of that id registered again journals afresh, in its own journal.
    assert run(capsys, "register", "w1", "--worktree", str(wt))[0] == 0
    _hook(home, {"hook_event_name": "Stop"}, worker="w1")
    assert json.loads(run(capsys, "status", "w1", "--json")[1])[0]["state"] == "stopped"
    assert journal.read_text().count("\n") == 4


def test_archives_of_ids_with_dots_stay_apart(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    for name in ("a", "a.b", "a.b.c"):
        wt = git_worktree(tmp_path / name)
        assert run(capsys, "register", name, "--worktree", str(wt), "--task", f"task {name}"
                   )[0] == 0
        assert run(capsys, "forget", name)[0] == 0
    for name in ("a", "a.b", "a.b.c"):
        code, out, err = run(capsys, "log", name, "--archived", "--json")
        assert code == 0, err
        (registered,) = json.loads(out)
        assert registered["task"] == f"task {name}"
    code, _, err = run(capsys, "log", "a.c", "--archived")
    assert code == 1 and "no forgotten journal of a.c" in err
    assert archive_owner("a.b.20261207T101010Z") == "a.b"
    assert archive_owner("a.b.20261207T101010Z.3") == "a.b"
    assert archive_owner("a.b") is None and archive_owner("x.20261207T1010Z") is None
