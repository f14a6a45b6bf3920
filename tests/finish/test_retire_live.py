"""A live worker: retire refuses while any process but fleet runs in the worktree (its working
directory, an open file or its executable there), unless the worker's own agent can be stopped
through its adapter first. Every process a test starts is stopped before it ends."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet import Fleet
from fleet.adapters import WorktreeDeleter
from fleet.adapters._base import Workspace
from tests.conftest import Repo
from tests.finish._helpers import finished_worker, retire


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def sleeper(cwd: Path, procs: list[subprocess.Popen[bytes]], label: str = "agent") -> int:
    """A process that waits in ``cwd``, its command line ending in ``label``."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", label],
                            cwd=cwd)
    procs.append(proc)
    return proc.pid


def test_a_process_running_in_the_worktree_refuses(
    repo: Repo, home: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        pid = sleeper(wt, procs)
        first = retire(fleet, "w")
        procs[0].kill()
        procs[0].wait()
        second = retire(fleet, "w")
    assert not first.retired
    assert f"pid {pid} (" in (first.reason or "") and "agent): working directory" in (
        first.reason or "")
    assert second.retired, second.reason


def test_a_process_holding_a_file_open_in_the_worktree_refuses(
    repo: Repo, home: Path, procs: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        code = "import sys, time\nf = open(sys.argv[1])\nprint('open', flush=True)\ntime.sleep(600)"
        proc = subprocess.Popen([sys.executable, "-c", code, str(wt / "feature.txt")],
                                cwd=tmp_path, stdout=subprocess.PIPE)
        procs.append(proc)  # type: ignore[arg-type]
        assert proc.stdout is not None and proc.stdout.readline() == b"open\n"
        outcome = retire(fleet, "w")
    assert not outcome.retired
    assert f"pid {proc.pid}" in (outcome.reason or "")
    assert "feature.txt" in (outcome.reason or "")


class StoppingDeleter(WorktreeDeleter):
    """A plain worktree deleter whose adapter can stop the worker's agent."""

    def __init__(self, agent: subprocess.Popen[bytes]) -> None:
        super().__init__()
        self.agent = agent
        self.stopped: list[str] = []

    def stop(self, worker: str) -> bool:
        self.stopped.append(worker)
        self.agent.send_signal(signal.SIGTERM)
        self.agent.wait()
        return True


def test_the_workers_own_agent_is_stopped_through_its_adapter_first(
    repo: Repo, home: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        sleeper(wt, procs)
        deleter = StoppingDeleter(procs[0])
        outcome = retire(fleet, "w", deleter_factory=lambda *a, **k: deleter)
    assert deleter.stopped == ["w"]
    assert outcome.retired, outcome.reason


def test_a_process_the_adapter_cannot_stop_still_refuses(
    repo: Repo, home: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        sleeper(wt, procs)
        other = sleeper(wt, procs, "dev-server")
        assert other != procs[0].pid
        deleter = StoppingDeleter(procs[0])
        outcome = retire(fleet, "w", deleter_factory=lambda *a, **k: deleter, stop_grace=0.2)
    assert deleter.stopped == ["w"]
    assert not outcome.retired
    assert f"pid {other}" in (outcome.reason or "") and "dev-server" in (outcome.reason or "")
    assert wt.exists()


class ClosingDeleter(WorktreeDeleter):
    """An app's adapter: it has no ``stop``, but ``close`` ends the agent's terminal."""

    def __init__(self, agent: subprocess.Popen[bytes]) -> None:
        super().__init__()
        self.agent = agent
        self.closed: list[Path] = []

    def close(self, workspace: Workspace) -> None:
        self.closed.append(workspace.worktree)
        self.agent.kill()
        self.agent.wait()


def test_an_apps_agent_is_closed_through_its_adapter_first(
    repo: Repo, home: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        sleeper(wt, procs)
        deleter = ClosingDeleter(procs[0])
        outcome = retire(fleet, "w", deleter_factory=lambda *a, **k: deleter)
    assert deleter.closed == [wt]
    assert outcome.retired, outcome.reason


class IdleDeleter(WorktreeDeleter):
    """A headless adapter with nothing of the worker's own running."""

    def stop(self, worker: str) -> bool:
        return False


def test_a_process_that_is_not_the_agents_is_not_waited_for(
    repo: Repo, home: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        pid = sleeper(wt, procs, "dev-server")
        outcome = retire(fleet, "w", deleter_factory=lambda *a, **k: IdleDeleter(),
                         stop_grace=600)
    reason = outcome.reason or ""
    assert not outcome.retired
    assert f"pid {pid}" in reason and "after its agent" not in reason
