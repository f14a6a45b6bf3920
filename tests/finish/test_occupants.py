"""Which processes use a directory, from /proc; every process a test starts is stopped."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet._occupants import Occupant, describe_occupants, occupants


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def wait_line(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"


def test_fleet_itself_is_no_occupant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # this process stands for fleet
    assert all(o.pid != os.getpid() for o in occupants(tmp_path))


def test_a_working_directory_an_open_file_and_a_deleted_file_are_found(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    inside = tmp_path / "wt"
    (inside / "sub").mkdir(parents=True)
    (inside / "gone.txt").write_text("x")
    code = ("import sys, os\nf = open(sys.argv[1])\nos.unlink(sys.argv[1])\n"
            "print('ready', flush=True)\nsys.stdin.read()")
    cwd_proc = subprocess.Popen([sys.executable, "-c", "import sys; print('ready', flush=True);"
                                 " sys.stdin.read()"], cwd=inside / "sub",
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    spawned.append(cwd_proc)
    file_proc = subprocess.Popen([sys.executable, "-c", code, str(inside / "gone.txt")],
                                 cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    spawned.append(file_proc)
    wait_line(cwd_proc)
    wait_line(file_proc)
    found = {o.pid: o.uses for o in occupants(inside)}
    assert found[cwd_proc.pid] == "working directory"
    assert found[file_proc.pid] == "open file gone.txt"
    assert occupants(tmp_path / "elsewhere") == []
    # a sibling whose name starts the same is not inside
    assert all(o.pid not in found for o in occupants(tmp_path / "w"))


def test_many_occupants_are_summarised_on_one_line() -> None:
    found = [Occupant(pid=n, command=f"cmd {n}", uses="working directory") for n in range(8)]
    line = describe_occupants(found)
    assert line.startswith("8 processes still run in the worktree: pid 0 (cmd 0)")
    assert line.endswith("; and 3 more") and "\n" not in line
