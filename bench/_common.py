"""Helpers shared by the benchmarks: percentiles and a clean temporary FLEET_HOME."""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


def pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


@contextmanager
def temp_home() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    old = os.environ.get("FLEET_HOME")
    os.environ["FLEET_HOME"] = str(root / "home")
    try:
        yield root / "home"
    finally:
        if old is None:
            os.environ.pop("FLEET_HOME", None)
        else:
            os.environ["FLEET_HOME"] = old
        shutil.rmtree(root, ignore_errors=True)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"
