"""Events the hook cannot journal (a full disk, a journal that is not a file) are lost, but the
loss is visible: the hook still exits 0 and prints nothing, while `fleet status` and `fleet
doctor` say that the worker's events are being lost, even when hook-errors.log cannot be
written either.

How each failure is made (tests run as root, which ignores file modes): a file size limit
(RLIMIT_FSIZE: write(2) fails with EFBIG, as on a full disk), /dev/full (ENOSPC), a FIFO where
the journal belongs, and injected errors (EROFS) where nothing else can make them. A read-only
home for real is in tests/core/test_readonly_home.py."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from fleet import Fleet, HookEvent, _health
from fleet._cli import main
from fleet._supervisor import RunSpec, Supervisor
from tests.hooks.conftest import Hook, claude_payloads
from tests.hooks.test_hook_program import load_impl

STOP = claude_payloads()["Stop"]

#: Runs its arguments under a file size limit of argv[1] bytes.
_UNDER_LIMIT = """
import os, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
os.execv(sys.argv[2], sys.argv[2:])
"""


def run_limited(hook: Hook, limit: int) -> tuple[int, bytes, bytes]:
    import subprocess

    from fleet._hook_command import hook_argv

    argv = [sys.executable, "-c", _UNDER_LIMIT, str(limit), *hook_argv("claude", home=hook.home)]
    env = {"PATH": os.environ["PATH"], "FLEET_HOME": str(hook.home), "FLEET_WORKER": "w1"}
    done = subprocess.run(argv, input=json.dumps(STOP).encode(), env=env, capture_output=True,
                          timeout=60, check=False)
    return done.returncode, done.stdout, done.stderr


def registered(hook: Hook, events: int = 30) -> Path:
    with Fleet(hook.home) as fleet:
        fleet.register("w1", worktree=hook.worktree)
        for n in range(events):
            fleet.record("w1", HookEvent(ts=float(n), src="claude", hook="UserPromptSubmit",
                                         data={"session_id": f"s{n:040d}"}))
    return hook.journal


def status_json(capsys: pytest.CaptureFixture[str]) -> tuple[list[dict[str, Any]], str]:
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def doctor_json(capsys: pytest.CaptureFixture[str], *more: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["doctor", "--json", *more]) == 1
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def test_the_hook_and_fleet_agree_on_how_losses_are_recorded() -> None:
    impl = load_impl()
    assert impl.LOST_PREFIX == _health.LOST_PREFIX
    assert impl.LOST_MARKER == _health.LOST_MARKER


def test_a_full_disk_is_logged_marked_and_shown(
    hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = registered(hook)
    size = journal.stat().st_size
    assert size > 2000
    assert run_limited(hook, 2000) == (0, b"", b"")
    assert journal.stat().st_size == size  # nothing torn, nothing appended
    errors = hook.error_lines()
    assert len(errors) == 1 and errors[0]["worker"] == "w1"
    assert errors[0]["error"].startswith(_health.LOST_PREFIX)
    assert "File too large" in errors[0]["error"]
    (state,), err = status_json(capsys)
    assert state["events_lost_at"] is not None and err.startswith("fleet: note: w1 lost events")
    capsys.readouterr()
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "note: w1 lost events, the last" in out and "`fleet doctor`" in out
    report = doctor_json(capsys)
    assert report["lost_events"] == 1 and set(report["events_lost_at"]) == {"w1"}
    assert any(p.startswith("worker w1: events were lost") for p in report["problems"])
    # Cleared once reported: the next status is quiet again.
    doctor_json(capsys, "--clear-errors")
    (state,), err = status_json(capsys)
    assert state["events_lost_at"] is None and err == ""


def test_when_the_error_log_cannot_be_written_either_the_marker_still_shows_it(
    hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    registered(hook)
    hook.errors.write_bytes(b'{"old": "line"}\n' * 200)  # beyond the limit the hook runs under
    log = hook.errors.read_bytes()
    assert run_limited(hook, 2000) == (0, b"", b"")
    assert hook.errors.read_bytes() == log  # its line did not fit, and left no fragment
    (state,), _ = status_json(capsys)
    assert state["events_lost_at"] is not None
    assert _health.lost_marker(hook.home, "w1").stat().st_size == 0


def test_a_fifo_where_the_journal_belongs_never_blocks_the_hook(
    hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = registered(hook)
    journal.unlink()
    os.mkfifo(journal, 0o600)
    run = hook.run(STOP, env={"FLEET_WORKER": "w1"}, timeout=30)
    assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")
    (error,) = hook.error_lines()
    assert error["error"].startswith(_health.LOST_PREFIX) and "not a regular file" in error["error"]
    report = doctor_json(capsys)
    assert any("is not a regular file" in p for p in report["problems"])
    assert any("1 hook events were not recorded" in p for p in report["problems"])


def test_dev_full_is_a_lost_event(hook: Hook, capsys: pytest.CaptureFixture[str]) -> None:
    journal = registered(hook)
    journal.unlink()
    journal.symlink_to("/dev/full")
    run = hook.run(STOP, env={"FLEET_WORKER": "w1"})
    assert (run.returncode, run.stdout, run.stderr) == (0, b"", b"")
    (error,) = hook.error_lines()
    assert error["error"].startswith(_health.LOST_PREFIX) and "No space left" in error["error"]
    assert _health.lost_marker(hook.home, "w1").exists()


def test_a_read_only_file_system_is_a_lost_event(
    hook: Hook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EROFS cannot be made without mounting; inject it into the hook's own open()."""
    impl = load_impl()
    real_open = impl.posix.open

    def read_only(path: str, flags: int, mode: int = 0o777) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        return int(real_open(path, flags, mode))

    monkeypatch.setattr(impl.posix, "open", read_only)
    with pytest.raises(impl.HookFailure) as info:
        impl.append_line(str(hook.journal), b'{"v":1}\n')
    assert str(info.value).startswith(_health.LOST_PREFIX)
    assert "Read-only file system" in str(info.value)


def test_home_problems_name_a_read_only_or_full_file_system(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "workers").mkdir(parents=True)
    assert _health.home_problems(home) == []
    real = os.statvfs(home)

    def fake(flag: int, bavail: int) -> os.statvfs_result:
        values = list(real)
        values[8], values[4] = flag, bavail  # f_flag, f_bavail
        return os.statvfs_result(values)

    monkeypatch.setattr(os, "statvfs", lambda _: fake(os.ST_RDONLY, 10))
    assert _health.home_problems(home) == [
        f"{home} is on a read-only file system: hook events cannot be recorded"
    ]
    monkeypatch.setattr(os, "statvfs", lambda _: fake(0, 0))
    assert _health.home_problems(home) == [
        f"the file system of {home} is full: hook events may be lost"
    ]


def test_a_supervisor_that_cannot_journal_carries_on_and_marks_the_loss(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
    journal = home / "workers" / "w1" / "journal.jsonl"
    journal.unlink()
    journal.mkdir()  # nothing can be appended now
    spec = RunSpec(worker="w1", home=str(home), tool="claude", run=1, cwd=str(tmp_path),
                   argv=("/bin/sh", "-c", 'echo \'{"type":"result","result":"ok"}\''),
                   output_dir=str(home / "workers" / "w1" / "headless"))
    sup = Supervisor(spec)
    try:
        done = sup.run()
    finally:
        sup.close()
    assert done.exit_code == 0
    assert _health.events_lost_at(home, "w1") is not None
    err = capsys.readouterr().err
    assert err.count(f"supervisor: {_health.LOST_PREFIX}cannot") >= 2  # started, exited, ...
