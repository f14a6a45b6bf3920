"""`fleet wait` when inotify runs out (its watch limit: ENOSPC; its instance limit: EMFILE):
it falls back to polling and says so once on stderr, never exits with an error, and misses no
event. The native observer is made to fail the way watchdog fails when the kernel refuses it
(an OSError from schedule or start); changing the real limits would affect the whole machine."""

from __future__ import annotations

import errno
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from watchdog.observers.polling import PollingObserver

from fleet import Fleet, HookEvent
from fleet import _watch as watch_module
from fleet._cli import main


def exhausted(code: int, where: str) -> type[PollingObserver]:
    message = {errno.ENOSPC: "inotify watch limit reached",
               errno.EMFILE: "inotify instance limit reached"}[code]

    class Exhausted(PollingObserver):
        def schedule(self, *args: Any, **kwargs: Any) -> Any:
            if where == "schedule":
                raise OSError(code, message)
            return super().schedule(*args, **kwargs)

        def start(self) -> None:
            raise OSError(code, message)

    return Exhausted


def stop_later(home: Path, worker: str, delay: float = 0.3) -> threading.Thread:
    def stop() -> None:
        time.sleep(delay)
        with Fleet(home) as fleet:
            fleet.record(worker, HookEvent(ts=time.time(), src="claude", hook="Stop"))

    thread = threading.Thread(target=stop)
    thread.start()
    return thread


CASES = [(errno.ENOSPC, "start"), (errno.EMFILE, "schedule"), (errno.ENOSPC, "schedule")]


@pytest.mark.parametrize(("code", "where"), CASES, ids=["watches-start", "instances", "watches"])
def test_wait_falls_back_to_polling_says_so_once_and_misses_nothing(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], code: int, where: str,
) -> None:
    monkeypatch.setattr(watch_module, "Observer", exhausted(code, where))
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
        fleet.register("w2", worktree=tmp_path)
    capsys.readouterr()
    thread = stop_later(home, "w2")
    assert main(["wait", "--timeout", "60", "--json"]) == 0
    thread.join()
    out, err = capsys.readouterr()
    assert '"mark": "w2@1"' in out
    assert err.count("\n") == 1 and err.startswith("fleet: note: file events are unavailable (")
    assert "limit reached" in err and "polling every 1s" in err


def test_the_note_is_given_once_however_often_one_fleet_waits(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch_module, "Observer", exhausted(errno.ENOSPC, "start"))
    notes: list[str] = []
    with Fleet(home, on_note=notes.append) as fleet:
        fleet.register("w1", worktree=tmp_path)
        for n in range(3):
            thread = stop_later(home, "w1", 0.1)
            result = fleet.wait(seen=[f"w1@{2 * k + 1}" for k in range(n)], timeout=60)
            thread.join()
            assert not result.timed_out and result.marks == (f"w1@{2 * n + 1}",)
            fleet.record("w1", HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
        assert fleet._watcher is not None and fleet._watcher.backend == "polling"
    assert len(notes) == 1


def test_watch_falls_back_too(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(watch_module, "Observer", exhausted(errno.EMFILE, "start"))
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
    capsys.readouterr()
    assert main(["watch", "--json", "--timeout", "0"]) == 0
    out, err = capsys.readouterr()
    assert '"worker":"w1"' in out
    assert err.count("fleet: note: file events are unavailable") == 1


def test_without_a_listener_the_note_is_logged(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(watch_module, "Observer", exhausted(errno.ENOSPC, "start"))
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
        assert fleet.poll().workers
    assert [r.getMessage() for r in caplog.records if r.name == "fleet"] == [
        f"file events are unavailable (inotify watch limit reached); watching {home}/workers "
        "by polling every 1s instead"
    ]


def test_native_on_request_still_fails_loudly(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(watch_module, "Observer", exhausted(errno.ENOSPC, "start"))
    monkeypatch.setenv("FLEET_WATCH_BACKEND", "native")
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
    capsys.readouterr()
    assert main(["wait", "--timeout", "0"]) == 1
    assert capsys.readouterr().err == "fleet: inotify watch limit reached\n"
