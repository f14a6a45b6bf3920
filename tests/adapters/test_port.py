"""The journal port: adapters journal through what they are handed, and the file-backed port
waits on the watcher."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet._core.events import HookEvent
from fleet._core.fold import WorkerState
from fleet._home import journal_path
from fleet._port import FileJournal, JournalPort
from fleet.adapters.herdr import HerdrAdapter
from fleet.testing import MemoryJournal
from tests.adapters.conftest import CLAUSONA, HERDR, RecordingRunner, Rig, make_rig
from tests.conftest import Repo


class SpyJournal(MemoryJournal):
    """The in-memory port, noting which of its verbs an adapter called."""

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.calls: list[tuple[str, str]] = []

    def register(self, worker: str, **fields: Any) -> WorkerState:
        self.calls.append(("register", worker))
        return super().register(worker, **fields)

    def note_follow_up(
        self, worker: str, *, text: str | None = None, file: str | None = None
    ) -> None:
        self.calls.append(("follow_up", worker))
        super().note_follow_up(worker, text=text, file=file)


@pytest.fixture
def herdr(tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from make_rig("herdr", tmp_path, repo, monkeypatch)


def test_an_adapter_journals_through_the_port_it_is_handed(
    herdr: Rig, home: Path, tmp_path: Path
) -> None:
    port = SpyJournal(home)
    assert isinstance(port, JournalPort)
    adapter = HerdrAdapter(runner=RecordingRunner(), journal=port, herdr=HERDR,
                           clausona=CLAUSONA, poll=0.05)
    ws = adapter.create_workspace("w1", repo=herdr.repo.path, base="main", label="Docs")
    spec = herdr.spec("w1", herdr.brief("Write the docs.\n"))
    adapter.start(ws, spec)
    follow = tmp_path / "follow.md"
    follow.write_text("And the changelog.\n")
    adapter.send(ws, follow)
    assert port.calls == [("register", "w1"), ("follow_up", "w1")]
    assert not journal_path(home, "w1").exists()


def test_the_file_port_waits_for_a_change_without_polling(home: Path, tmp_path: Path) -> None:
    port = FileJournal(home)
    port.register("w1", worktree=tmp_path)
    asked: list[int] = []

    def ready() -> bool:
        asked.append(1)
        return port.state("w1").last_event == "Stop"

    def later() -> None:
        time.sleep(0.3)
        port.append("w1", HookEvent(ts=time.time(), src="claude", hook="Stop", data={}))

    thread = threading.Thread(target=later)
    thread.start()
    try:
        started = time.monotonic()
        assert port.wait_until("w1", ready, timeout=10)
        took = time.monotonic() - started
    finally:
        thread.join()
    assert 0.25 < took < 5
    # asked once at the start and again on the change, not on a timer
    assert len(asked) <= 4


def test_the_file_port_gives_up_at_its_clocks_deadline(home: Path, tmp_path: Path) -> None:
    port = FileJournal(home)
    port.register("w1", worktree=tmp_path)
    started = time.monotonic()
    assert not port.wait_until("w1", lambda: False, timeout=0.2)
    assert time.monotonic() - started < 5
    assert os.path.isfile(journal_path(home, "w1"))


def test_a_follow_up_answered_at_once_still_wakes_the_coordinator(
    herdr: Rig, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent answers before send() returns (a fast model): the follow-up must have marked
    # only the state the coordinator saw, never the answer.
    from fleet._core.events import FollowUpSent

    port = MemoryJournal(tmp_path / "memory-home")
    assert isinstance(port, JournalPort)
    adapter = HerdrAdapter(runner=RecordingRunner(), journal=port, herdr=HERDR,
                           clausona=CLAUSONA, poll=0.05)
    ws = adapter.create_workspace("w1", repo=herdr.repo.path, base="main", label="Docs")
    adapter.start(ws, herdr.spec("w1", herdr.brief("Write the docs.\n")))
    port.append("w1", HookEvent(ts=port.clock.now(), src="claude", hook="Stop", data={}))
    seen_mark = port.state("w1").mark

    def answer_at_once(agent: str, text: str) -> None:
        port.append("w1", HookEvent(ts=port.clock.now(), src="claude", hook="UserPromptSubmit",
                                    data={}))
        port.append("w1", HookEvent(ts=port.clock.now(), src="claude", hook="Stop", data={}))

    monkeypatch.setattr(adapter, "prompt", answer_at_once)
    follow = tmp_path / "follow.md"
    follow.write_text("And the changelog.\n")
    adapter.send(ws, follow)
    (sent,) = [e for e in port.events("w1") if isinstance(e, FollowUpSent)]
    assert sent.seen == seen_mark
    after = port.state("w1")
    assert (after.state, after.needs_attention) == ("stopped", True) and after.mark != seen_mark
