"""A benchmark must be able to fail: one whose measured process ends early, or whose command
fails, exits non-zero with one line saying why instead of reporting a figure."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def common() -> Iterator[object]:
    sys.path.insert(0, str(BENCH))
    try:
        import _common

        yield _common
    finally:
        sys.path.remove(str(BENCH))


def _bench(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / name), *args], capture_output=True, text=True, timeout=300,
        check=False,
    )


def test_idle_cpu_fails_when_fleet_wait_refuses_its_arguments() -> None:
    run = _bench("idle_cpu.py", "--workers", "3", "--seconds", "1", "--warmup", "0.5",
                 "--quiet-after", "1e9")
    assert run.returncode == 1, run.stdout + run.stderr
    (line,) = run.stderr.splitlines()
    assert line.startswith("idle_cpu.py: FAIL: fleet wait ended ")
    assert "--quiet-after" in line and "PASS" not in run.stdout


def test_idle_cpu_measures_a_wait_that_runs_throughout() -> None:
    run = _bench("idle_cpu.py", "--workers", "3", "--seconds", "1", "--warmup", "0.5")
    assert run.returncode in (0, 2), run.stderr  # 2: the figure missed its target
    assert "FAIL" not in run.stderr
    assert "fleet wait over 3 idle workers" in run.stdout


def test_a_measured_process_that_ends_fails_the_benchmark(
    common: object, capsys: pytest.CaptureFixture[str]
) -> None:
    measured = common.Measured(  # type: ignore[attr-defined]
        [sys.executable, "-c", "import sys; sys.exit('refused: bad argument')"], "the agent"
    )
    measured.proc.wait()
    with pytest.raises(SystemExit) as exit_info:
        measured.cpu("during its warm-up")
    measured.stop()
    assert exit_info.value.code == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("FAIL: the agent ended during its warm-up (exit 1): refused: bad argument")


def test_a_failing_command_fails_the_benchmark(
    common: object, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        common.run_checked(  # type: ignore[attr-defined]
            [sys.executable, "-c", "import sys; print('no such worker', file=sys.stderr); "
             "sys.exit(3)"], "fleet status"
        )
    assert exit_info.value.code == 1
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "FAIL: fleet status failed (exit 3): no such worker"
    )


def test_a_process_gone_before_its_cpu_is_read_fails_the_benchmark(common: object) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(SystemExit) as exit_info:
        common.cpu_seconds(proc.pid)  # type: ignore[attr-defined]
    assert exit_info.value.code == 1


def test_a_missed_target_fails_the_benchmark_at_its_end(common: object) -> None:
    assert common.verdict(True) == "PASS"  # type: ignore[attr-defined]
    common.finish()  # type: ignore[attr-defined]
    assert common.verdict(False, "p99 < 50 ms") == "MISS"  # type: ignore[attr-defined]
    with pytest.raises(SystemExit) as exit_info:
        common.finish()  # type: ignore[attr-defined]
    assert exit_info.value.code == 2
    common._missed.clear()  # type: ignore[attr-defined]
