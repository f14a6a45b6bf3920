"""Clocks. Everything in fleet that needs the time takes a :class:`Clock`, so tests can inject a
:class:`MockClock` and move time by hand instead of sleeping."""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Unix time in seconds (comparable with journal ``ts``)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards, for timeouts."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class MockClock:
    """A clock that only moves when told to. Thread-safe."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self._now = now
        self._mono = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a MockClock only moves forward")
        with self._lock:
            self._now += seconds
            self._mono += seconds
