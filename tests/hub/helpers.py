"""Journals that look like real ones, and the comparisons the hub's tests make."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from fleet._core.events import (
    Checked,
    Event,
    Exited,
    FollowUpSent,
    HookEvent,
    Registered,
    Seen,
    encode_line,
)
from fleet._core.fold import Policy, WorkerState
from fleet._fold_cache import load_states
from fleet._home import journal_path
from fleet._journal import append, append_line
from fleet._watch import Transition

_TOOLS = ("Bash", "Edit", "Read", "Write", "Grep")


def event_stream(worker: str, rng: random.Random, n: int, t0: float) -> list[Event]:
    """``n`` events of a worker's life: registration, turns of tool activity that end with or
    without an envelope, permission prompts, marks seen, follow-ups, checks, an exit."""
    out: list[Event] = [
        Registered(ts=t0, tool="claude", profile="claude:work", worktree=f"/w/{worker}",
                   branch=f"fleet/{worker}", base="origin/main", task=f"task of {worker}")
    ]
    ts = t0
    session = f"s-{worker}"
    while len(out) < n:
        ts += rng.random() * 0.5
        roll = rng.random()
        if roll < 0.55:
            hook = rng.choice(("PreToolUse", "PostToolUse"))
            out.append(HookEvent(ts=ts, src="claude", hook=hook,
                                 data={"session_id": session, "tool_name": rng.choice(_TOOLS),
                                       "permission_mode": "default"}))
        elif roll < 0.65:
            out.append(HookEvent(ts=ts, src="claude", hook="UserPromptSubmit",
                                 data={"session_id": session}))
        elif roll < 0.75:
            text = rng.choice((
                "All done.\nFLEET_WORKER_DONE: fixed the parser",
                "I need the staging password.\nFLEET_WORKER_BLOCKED: access to staging",
                "Still thinking about it.",
            ))
            out.append(HookEvent(ts=ts, src="claude", hook="Stop",
                                 data={"session_id": session, "last_assistant_message": text}))
        elif roll < 0.8:
            out.append(HookEvent(ts=ts, src="claude", hook="Notification",
                                 data={"notification_type": "permission_prompt",
                                       "message": "Claude needs your permission to use Bash"}))
        elif roll < 0.85:
            out.append(Seen(ts=ts, mark=f"{worker}@{rng.randrange(len(out))}"))
        elif roll < 0.9:
            out.append(FollowUpSent(ts=ts, text="please also run the tests",
                                    seen=f"{worker}@{len(out) - 1}"))
        elif roll < 0.95:
            verdict = rng.choice(("checked", "failed"))
            out.append(Checked(ts=ts, verdict=verdict,
                               findings=() if verdict == "checked" else ("1 commit not pushed",)))
        else:
            out.append(Exited(ts=ts, exit_code=rng.choice((0, 1)), result="ok"))
    return out[:n]


def write_journal(home: Path, worker: str, events: list[Event]) -> None:
    for event in events:
        append(home, worker, event)


class Writers:
    """Append each worker's events, a few at a time, the way hooks append (one whole line per
    write, under the journal's lock): one writer thread per host, all at once."""

    def __init__(self, plans: dict[tuple[Path, str], list[Event]], pause: float = 0.004):
        self.pause = pause
        by_home: dict[Path, dict[str, list[Event]]] = {}
        for (home, worker), events in plans.items():
            by_home.setdefault(home, {})[worker] = list(events)
        self.threads = [
            threading.Thread(target=self._run, args=(home, queues), daemon=True)
            for home, queues in by_home.items()
        ]
        self._lock = threading.Lock()
        self.written = 0

    def start(self) -> Writers:
        for thread in self.threads:
            thread.start()
        return self

    def _run(self, home: Path, queues: dict[str, list[Event]]) -> None:
        while any(queues.values()):
            for worker, events in queues.items():
                if events:
                    append_line(journal_path(home, worker), encode_line(events.pop(0)))
                    with self._lock:
                        self.written += 1
            time.sleep(self.pause)

    def join(self, timeout: float = 120.0) -> None:
        for thread in self.threads:
            thread.join(timeout)
            assert not thread.is_alive(), "the writers did not finish"


def journal_lines(home: Path, worker: str) -> list[bytes]:
    data = journal_path(home, worker).read_bytes()
    return data.split(b"\n")[:-1]


def qualified(state: WorkerState, host: str) -> WorkerState:
    """A host's own state of a worker, as the hub should show it."""
    return attrs.evolve(state, worker=f"{host}/{state.worker}", mark=f"{host}/{state.mark}")


def core_fields(state: WorkerState) -> dict[str, Any]:
    """Every field of WorkerState (what a remote state adds is left out)."""
    names = [f.name for f in attrs.fields(WorkerState)]
    return {name: getattr(state, name) for name in names}


def local_states(home: Path, now: float, policy: Policy | None = None) -> dict[str, WorkerState]:
    return {s.worker: s for s in load_states(home, None, now, policy, use_cache=False)}


def first(items: list[Transition], predicate: Callable[[Transition], bool]) -> Transition:
    return next(t for t in items if predicate(t))


def audit_stream(cfg: Any) -> dict[tuple[str, str, int, int], int]:
    """How many messages the stream holds for each (host, worker, generation, seq): every
    count 1 means JetStream stored no line twice."""
    import asyncio

    from fleet._hub import client as hc
    from fleet._hub.names import STREAM, journal_filter

    counts: dict[tuple[str, str, int, int], int] = {}

    def handle(msg: Any, sseq: int, ts: float) -> None:
        from fleet._hub.names import parse_line_header, worker_of_subject

        h = msg.headers or {}
        if "Fleet-Reset" in h:
            return
        host, worker = worker_of_subject(msg.subject) or ("?", "?")
        gen, seq = parse_line_header(h["Fleet-Line"])[:2]
        key = (host, worker, gen, seq)
        counts[key] = counts.get(key, 0) + 1

    async def main() -> None:
        nc = await hc.connect_once(cfg, name="audit", timeout=10)
        try:
            tail = hc.Tail(nc, nc.jetstream(), STREAM, journal_filter(), handle)
            tail.start()
            await asyncio.wait_for(tail.caught_up.wait(), 30)
            await tail.close()
        finally:
            await nc.close()

    asyncio.run(main())
    return counts
