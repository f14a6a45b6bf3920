"""Test doubles for code that uses fleet, as ``httpx.MockTransport`` is for code that uses httpx.

- :class:`MockClock`: time that moves only when told to (``Fleet(clock=MockClock())``).
- :class:`MockRunner`: answers commands (git, clausona, an agent CLI) from a function instead of
  running them, and records every call (``Fleet(runner=...)``, ``get_adapter(..., runner=...)``).
- :class:`MemoryJournal`: a journal port that keeps events in memory and folds them, to hand an
  adapter instead of a fleet home (``get_adapter("herdr", journal=MemoryJournal(tmp))``).
"""

from __future__ import annotations

from fleet._clock import MockClock
from fleet._memory_journal import MemoryJournal
from fleet._runner import Completed, Handler, MockRunner

__all__ = ["Completed", "Handler", "MemoryJournal", "MockClock", "MockRunner"]
