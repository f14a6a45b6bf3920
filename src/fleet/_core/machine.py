"""The worker state machine as data.

The table below is the single source of truth for which moves exist. It is validated once, at
import, by building one shared, model-less ``transitions`` machine (unknown states or malformed
entries fail loudly there); the fold then looks moves up in a plain dict, so folding a journal
costs a dictionary lookup per event rather than a state-machine call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, TypeAlias

from transitions import Machine

State: TypeAlias = Literal[
    "starting", "working", "stopped", "quiet", "gone", "blocked", "done", "retired"
]
STATES: Final[tuple[State, ...]] = (
    "starting",
    "working",
    "stopped",
    "quiet",
    "gone",
    "blocked",
    "done",
    "retired",
)
#: States in which a worker needs the coordinator (unless its mark was seen).
ATTENTION_STATES: Final = frozenset({"stopped", "quiet", "blocked", "done", "gone"})
#: States a journal can hold; ``quiet`` is only ever derived at read time.
_LIVE: Final = ["starting", "working", "stopped", "quiet", "gone", "blocked", "done"]
_RUNNING: Final = ["starting", "working", "quiet"]

#: trigger, sources, destination. Triggers are what the fold makes of an event (see fold.classify).
TRANSITIONS: Final[list[dict[str, object]]] = [
    # a worker is (re)registered, launched, resumed or handed to another profile
    {"trigger": "register", "source": _LIVE, "dest": "starting"},
    {"trigger": "start", "source": _LIVE, "dest": "starting"},
    {"trigger": "hand_over", "source": _LIVE, "dest": "starting"},
    # a follow-up was delivered to a worker that is not busy: it is expected to start again
    # (its prompt then reads as activity; silence as quiet, so a follow-up that never ran wakes
    # the coordinator instead of leaving it at a mark it has seen)
    {"trigger": "deliver", "source": ["starting", "stopped", "gone", "blocked", "done"],
     "dest": "starting"},
    # prompts, tool and subagent activity, compaction, a follow-up picked up
    {"trigger": "activity", "source": _LIVE, "dest": "working"},
    # time passes with no event while running (derived at read time)
    {"trigger": "silence", "source": ["starting", "working"], "dest": "quiet"},
    # a turn ends, is interrupted, or fails on an API error
    {"trigger": "turn_end", "source": [*_RUNNING, "blocked"], "dest": "stopped"},
    {"trigger": "idle", "source": _RUNNING, "dest": "stopped"},
    {"trigger": "interrupt", "source": [*_RUNNING, "blocked"], "dest": "stopped"},
    # (also from gone: Claude Code runs StopFailure and SessionEnd hooks concurrently, so the
    # failure can land after the session's end)
    {
        "trigger": "api_error",
        "source": [*_RUNNING, "blocked", "stopped", "gone"],
        "dest": "stopped",
    },
    # a permission, a question, a usage limit, or the worker's own BLOCKED envelope
    {"trigger": "block", "source": [*_RUNNING, "stopped"], "dest": "blocked"},
    {"trigger": "limit", "source": [*_RUNNING, "stopped", "blocked", "gone"], "dest": "blocked"},
    # a DONE claim, then the coordinator's verdict on it
    {"trigger": "claim", "source": [*_RUNNING, "stopped", "blocked", "gone"], "dest": "done"},
    {"trigger": "verdict", "source": ["done"], "dest": "done"},
    # the session or process ended with no claim; or it was stopped, timed out or vanished
    {"trigger": "end", "source": [*_RUNNING, "stopped"], "dest": "gone"},
    {"trigger": "terminate", "source": [*_RUNNING, "stopped", "blocked"], "dest": "gone"},
    # retired is terminal: later events are kept and ignored
    {"trigger": "retire", "source": _LIVE, "dest": "retired"},
]

Trigger: TypeAlias = str


def _validate() -> Mapping[tuple[Trigger, str], State]:
    machine = Machine(
        model=None,
        states=list(STATES),
        transitions=TRANSITIONS,
        initial="starting",
        auto_transitions=False,
        send_event=False,
    )
    moves: dict[tuple[Trigger, str], State] = {}
    for trigger, event in machine.events.items():
        for source, transitions in event.transitions.items():
            if len(transitions) != 1:
                raise ValueError(f"ambiguous move {trigger!r} from {source!r}")
            dest = transitions[0].dest
            if dest not in STATES:
                raise ValueError(f"unknown destination {dest!r}")
            moves[(trigger, source)] = dest
    return moves


MOVES: Final[Mapping[tuple[Trigger, str], State]] = _validate()
TRIGGERS: Final = frozenset(trigger for trigger, _ in MOVES)


def move(trigger: Trigger, source: str) -> State | None:
    """Where ``trigger`` takes a worker in ``source``, or None when there is no such move."""
    return MOVES.get((trigger, source))
