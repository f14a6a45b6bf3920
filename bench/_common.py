"""Helpers shared by the benchmarks: percentiles, a clean temporary FLEET_HOME, and the checks
that keep a benchmark honest.

A benchmark must be able to fail. A measured process that ends before its measurement does
(refused arguments, a crash) would measure nothing and report a figure anyway; a command a
benchmark depends on that fails leaves it measuring something else. Both end the benchmark
with one line on stderr and exit status 1 (:func:`fail`). A figure that misses its target is
reported, and the benchmark exits 2 at the end (:func:`finish`).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, NoReturn

TICK = os.sysconf("SC_CLK_TCK")
#: Exit status of a benchmark that could not measure (its measured process ended, a command
#: failed), and of one whose figures missed a target.
FAILED = 1
MISSED = 2
_missed: list[str] = []


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


def verdict(ok: bool, what: str = "") -> str:
    """PASS or MISS; a miss is remembered, and :func:`finish` exits with :data:`MISSED`."""
    if not ok:
        _missed.append(what or "a target")
    return "PASS" if ok else "MISS"


def finish() -> None:
    """End a benchmark: status 0 when every target was met, :data:`MISSED` otherwise."""
    if _missed:
        print(f"{Path(sys.argv[0]).name}: missed {', '.join(_missed)}", file=sys.stderr)
        sys.exit(MISSED)


def fail(why: str) -> NoReturn:
    """The benchmark cannot measure what it claims: one line on stderr, exit :data:`FAILED`."""
    print(f"{Path(sys.argv[0]).name}: FAIL: {' '.join(why.split())}", file=sys.stderr)
    sys.exit(FAILED)


def _last_line(text: str | bytes | None) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def run_checked(
    argv: Sequence[str], what: str, **kwargs: object
) -> subprocess.CompletedProcess[bytes]:
    """Run a command the benchmark depends on; a non-zero exit fails the benchmark."""
    kwargs.setdefault("stdout", subprocess.DEVNULL)
    kwargs.setdefault("stderr", subprocess.PIPE)
    proc = subprocess.run(list(argv), check=False, **kwargs)  # type: ignore[call-overload]
    if proc.returncode != 0:
        fail(f"{what} failed (exit {proc.returncode}): {_last_line(proc.stderr)}")
    return proc  # type: ignore[no-any-return]


def cpu_seconds(pid: int) -> float:
    """User and system CPU a live process has used; fails the benchmark when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        fail(f"process {pid} is gone: its CPU cannot be measured")
    if fields[0] in (b"Z", b"X"):
        fail(f"process {pid} ended before its measurement did")
    return (int(fields[11]) + int(fields[12])) / TICK


class Measured:
    """A process that must run for as long as it is measured: :meth:`check` fails the
    benchmark, with its exit status and last line of stderr, once it has ended."""

    def __init__(
        self, argv: Sequence[str], what: str, *, env: Mapping[str, str] | None = None
    ) -> None:
        self.what = what
        # closed by stop(): the process's stderr, for the line that says why it ended
        self._err: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._err,
            env=None if env is None else dict(env),
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check(self, when: str) -> None:
        code = self.proc.poll()
        if code is not None:
            self._err.seek(0)
            fail(f"{self.what} ended {when} (exit {code}): {_last_line(self._err.read())}")

    def cpu(self, when: str) -> float:
        self.check(when)
        return cpu_seconds(self.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._err.close()

    def __enter__(self) -> Measured:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
