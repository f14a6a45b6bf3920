"""Random appends, torn writes and waits against a watcher, checked against a plain replay."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from fleet._clock import MockClock
from fleet._core import events as ev
from fleet._core.events import encode_line
from fleet._core.fold import Policy, fold
from fleet._home import journal_path
from fleet._journal import JournalReader, append_line
from fleet._watch import Watcher

from ..core.strategies import events

WORKERS = ("a", "b", "c")
POLICY = Policy(quiet_after=50)


class WatcherMatchesReplay(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.home = Path(tempfile.mkdtemp(prefix="fleet-stateful-"))
        self.clock = MockClock(now=1050.0)
        for worker in WORKERS:
            append_line(journal_path(self.home, worker), encode_line(ev.Registered(ts=1000.0)))
        self.watcher = Watcher(
            self.home, clock=self.clock, policy=POLICY, liveness=False, sweep_interval=0.05
        )
        self.torn: dict[str, bytes] = {}
        self.seen: set[str] = set()

    def teardown(self) -> None:
        self.watcher.close()
        shutil.rmtree(self.home, ignore_errors=True)

    def _write(self, worker: str, data: bytes) -> None:
        fd = os.open(journal_path(self.home, worker), os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    @rule(worker=st.sampled_from(WORKERS), event=events())
    def append(self, worker: str, event: ev.Event) -> None:
        if worker in self.torn:
            self._write(worker, self.torn.pop(worker))
        append_line(journal_path(self.home, worker), encode_line(event))

    @rule(worker=st.sampled_from(WORKERS), event=events(), cut=st.integers(1, 30))
    def torn_write(self, worker: str, event: ev.Event, cut: int) -> None:
        if worker in self.torn:
            return
        line = encode_line(event)
        cut = min(cut, len(line) - 1)
        self._write(worker, line[:cut])
        self.torn[worker] = line[cut:]

    @rule(worker=st.sampled_from(WORKERS))
    def garbage(self, worker: str) -> None:
        if worker not in self.torn:
            self._write(worker, b"\x00not json at all\n")

    @rule(seconds=st.floats(0, 40))
    def time_passes(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def wait_briefly(self) -> None:
        expected = {s.mark for s in self._replay() if s.needs_attention}
        result = self._settled(
            lambda: self.watcher.wait(seen=self.seen, timeout=0), lambda r: set(r.marks) == expected
        )
        assert set(result.marks) == expected
        self.seen |= set(result.marks)

    def _settled(self, get, ok):  # type: ignore[no-untyped-def]
        # File events arrive on another thread: give them a moment, bounded, to land.
        for _ in range(300):
            value = get()
            if ok(value):
                return value
            time.sleep(0.01)
        return get()

    def _replay(self) -> list:  # type: ignore[type-arg]
        out = []
        for worker in WORKERS:
            events_ = [e for _, e in JournalReader(journal_path(self.home, worker)).read()]
            state = fold(worker, events_, self.clock.now(), POLICY, self.seen)
            if state.state != "retired":
                out.append(state)
        return out

    @invariant()
    def states_match_a_full_replay(self) -> None:
        replay = {s.worker: s for s in self._replay()}
        got = self._settled(
            lambda: {s.worker: s for s in self.watcher.states(self.seen)},
            lambda g: all(g.get(w) == s for w, s in replay.items()),
        )
        for worker, expected in replay.items():
            assert got[worker] == expected


TestWatcherMatchesReplay = WatcherMatchesReplay.TestCase
TestWatcherMatchesReplay.settings = settings(max_examples=25, stateful_step_count=25, deadline=None)
