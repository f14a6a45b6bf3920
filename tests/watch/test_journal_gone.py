"""`fleet wait W` when W's journal disappears while it waits (the file deleted, the worker's
directory removed or moved away): it returns at once with one clear line and exit code 1, the
code of an unknown worker, which is what W has become."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fleet import Fleet, HookEvent, JournalGone, UnknownWorker
from fleet._cli import main
from fleet._home import journal_path, worker_dir


def later(delay: float, fn: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        fn()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


REMOVALS: dict[str, Callable[[Path], None]] = {
    "journal deleted": lambda home: journal_path(home, "w1").unlink(),
    "worker dir removed": lambda home: shutil.rmtree(worker_dir(home, "w1")),
    "worker dir moved away": lambda home: worker_dir(home, "w1").rename(home / "elsewhere"),
}


@pytest.mark.parametrize("backend", ["native", "polling"])
@pytest.mark.parametrize("how", sorted(REMOVALS))
def test_wait_on_a_worker_whose_journal_disappears_returns_at_once(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], how: str, backend: str,
) -> None:
    monkeypatch.setenv("FLEET_WATCH_BACKEND", backend)
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
        fleet.register("w2", worktree=tmp_path)
    capsys.readouterr()
    thread = later(0.3, lambda: REMOVALS[how](home))
    # Without the removal this would time out after an hour (exit 3).
    code = main(["wait", "w1", "w2", "--timeout", "3600", "--json"])
    thread.join()
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err == (
        f"fleet: the journal of worker w1 disappeared ({journal_path(home, 'w1')} is gone): "
        "nothing left to wait for\n"
    )


def test_the_api_raises_journal_gone_an_unknown_worker(home: Path, tmp_path: Path) -> None:
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
        thread = later(0.2, lambda: journal_path(home, "w1").unlink())
        with pytest.raises(JournalGone) as info:
            fleet.wait(["w1"], timeout=3600)
        thread.join()
        assert isinstance(info.value, UnknownWorker)
        with pytest.raises(UnknownWorker):  # and now it is simply unknown
            fleet.poll(["w1"])


def test_waiting_on_every_worker_lets_a_removed_one_go(home: Path, tmp_path: Path) -> None:
    """Not named, a removed worker simply stops being one; the others are still waited on."""
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
        fleet.register("w2", worktree=tmp_path)
        assert fleet.poll().workers
        gone = later(0.2, lambda: shutil.rmtree(worker_dir(home, "w1")))
        stop = later(0.6, lambda: fleet.record(
            "w2", HookEvent(ts=time.time(), src="claude", hook="Stop")
        ))
        result = fleet.wait(timeout=3600)
        gone.join()
        stop.join()
    assert result.marks == ("w2@1",)
    assert [s.worker for s in result.workers] == ["w2"]


def test_a_journal_replaced_before_the_wait_looks_is_not_gone(
    home: Path, tmp_path: Path
) -> None:
    with Fleet(home) as fleet:
        fleet.register("w1", worktree=tmp_path)
        path = journal_path(home, "w1")
        data = path.read_bytes()
        path.unlink()
        path.write_bytes(data + b'{"v":1,"ts":5.0,"src":"claude","type":"Stop"}\n')
        assert fleet.wait(["w1"], timeout=3600).marks == ("w1@1",)
