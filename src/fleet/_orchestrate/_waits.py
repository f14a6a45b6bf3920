"""Waiting for a worker to start, and for a profile's starting workers to settle: on the
watcher, never on a timer."""


from __future__ import annotations

import os
from typing import Final

from fleet import _journal
from fleet._clock import Clock
from fleet._core.events import Event, Exited, HandedOver, Registered, Started
from fleet._core.fold import WorkerState
from fleet._fold_cache import load_states
from fleet._port import FileJournal
from fleet.adapters.headless import (
    NAME,
    HeadlessAdapter,
)

#: Where the agents' own events come from (their hooks and their own stream), as opposed to
#: fleet's and the hosts'.
AGENT_SOURCES: Final = ("claude", "codex", "stream")


def _agent_spoke(event: Event) -> bool:
    """An event only a running agent (or its end) can cause: a hook, or a run's exit."""
    return isinstance(event, Exited) or event.src in AGENT_SOURCES


def wait_started(
    worker: str,
    *,
    home: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    timeout: float = 30.0,
) -> bool:
    """Wait until a freshly started worker's agent has journaled its first event after its
    latest launch (a headless ``started``, or an app worker's registration or hand-over):
    SessionStart or any hook, or its run ended. False on timeout."""
    journal = FileJournal(home, clock=clock)
    reader = _journal.JournalReader(_journal.require(journal.home, worker))
    followed: bool | None = None  # did the agent speak after the latest launch?

    def ready() -> bool:
        nonlocal followed
        for _, event in reader.read():
            if isinstance(event, Started | Registered | HandedOver):
                # a headless run is registered before its supervisor journals `started`
                followed = False
            elif followed is not None and (followed or _agent_spoke(event)):
                followed = True
        return bool(followed)

    return journal.wait_until(worker, ready, timeout=timeout)


def wait_for_profile(
    profile: str,
    *,
    home: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    timeout: float = 60.0,
) -> list[str]:
    """Wait until no worker on ``profile`` is starting up (launched, no event from its agent
    yet); returns the workers waited for. A worker that takes longer than ``timeout`` is no
    longer waited for."""
    journal = FileJournal(home, clock=clock)
    now = journal.clock.now()
    states = load_states(journal.home, None, now, journal.policy, ())
    adapter = HeadlessAdapter(journal=journal)

    def starting(s: WorkerState) -> bool:
        if s.profile != profile:
            return False
        if s.adapter == NAME:
            return s.last_event in ("registered", "started", "handed_over") and (
                adapter.supervisor_alive(s.worker)
            )
        # An app worker has no supervisor to ask: one whose agent stayed silent for longer
        # than a start may take (no hooks installed, a closed pane) is not waited for again.
        return (
            s.state == "starting"
            and s.last_event in ("registered", "attached", "handed_over")
            and now - s.since < timeout
        )

    busy = [s.worker for s in states if starting(s)]
    end = journal.clock.monotonic() + timeout
    for worker in busy:
        wait_started(
            worker, home=journal.home, clock=journal.clock,
            timeout=max(0.0, end - journal.clock.monotonic()),
        )
    return busy
