from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fleet import Fleet, HookEvent, Started
from fleet._proc import process_start_time
from fleet._watch import Watcher
from fleet.testing import MockClock

FLEET = [sys.executable, "-m", "fleet"]


def stop(fleet: Fleet, worker: str, message: str = "") -> None:
    data = {"last_assistant_message": message} if message else {}
    fleet.record(worker, HookEvent(ts=time.time(), src="claude", hook="Stop", data=data))


def later(seconds: float, fn: object) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        fn()  # type: ignore[operator]

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_wait_wakes_on_the_event_that_matters(tmp_path: Path) -> None:
    with Fleet() as fleet:
        fleet.register("a", worktree=tmp_path)
        fleet.register("b", worktree=tmp_path)
        t = later(0.3, lambda: stop(fleet, "b", "FLEET_WORKER_DONE: fixed"))
        started = time.monotonic()
        result = fleet.wait(timeout=10)
        took = time.monotonic() - started
        t.join()
    assert not result.timed_out
    assert [(s.worker, s.state, s.reason, s.mark) for s in result.attention] == [
        ("b", "done", "claimed", "b@1")
    ]
    assert 0.25 < took < 5


@pytest.mark.parametrize("backend", ["native", "polling"])
def test_backends(tmp_path: Path, backend: str) -> None:
    with Fleet(backend=backend) as fleet:  # type: ignore[arg-type]
        fleet.register("a", worktree=tmp_path)
        t = later(0.2, lambda: stop(fleet, "a"))
        result = fleet.wait(timeout=10)
        t.join()
        assert fleet._watcher is not None and fleet._watcher.backend == backend
    assert result.marks == ("a@1",)


def test_a_wait_answers_with_what_was_written_before_it_began(tmp_path: Path) -> None:
    """The line this process wrote a moment ago is in the answer even though no file event
    told the watcher yet (polling sees it a second later): a wait never returns the state of
    before, here the stopped turn that a new prompt already ended."""
    with Fleet(backend="polling") as fleet:
        fleet.register("a", worktree=tmp_path)
        stop(fleet, "a")
        assert fleet.wait(timeout=5).marks == ("a@1",)
        for turn in range(3):
            fleet.record("a", HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
            result = fleet.wait(timeout=0)
            assert result.timed_out and result.attention == (), (turn, result.attention)
            assert [s.state for s in result.workers] == ["working"]
            stop(fleet, "a")
            assert fleet.wait(timeout=0).marks == (f"a@{3 + 2 * turn}",)


def test_seen_marks_never_wake_but_new_events_do(tmp_path: Path) -> None:
    with Fleet() as fleet:
        fleet.register("a", worktree=tmp_path)
        stop(fleet, "a")
        assert fleet.wait(timeout=5).marks == ("a@1",)
        assert fleet.wait(seen=["a@1"], timeout=0.3).timed_out

        def new_turn() -> None:
            fleet.record("a", HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
            stop(fleet, "a")

        t = later(0.2, new_turn)
        assert fleet.wait(seen=["a@1"], timeout=10).marks == ("a@3",)
        t.join()


def test_named_workers_only(tmp_path: Path) -> None:
    with Fleet() as fleet:
        fleet.register("a", worktree=tmp_path)
        fleet.register("b", worktree=tmp_path)
        stop(fleet, "a")
        assert fleet.wait(["b"], timeout=0.3).timed_out
        assert fleet.wait(["a", "b"], timeout=1).marks == ("a@1",)


def test_workers_registered_after_wait_starts_are_followed(tmp_path: Path) -> None:
    with Fleet() as fleet:
        fleet.register("a", worktree=tmp_path)

        def newcomer() -> None:
            fleet.register("late", worktree=tmp_path)
            stop(fleet, "late")

        t = later(0.3, newcomer)
        assert fleet.wait(timeout=10).marks == ("late@1",)
        t.join()


def test_quiet_fires_at_the_deadline_without_any_event(tmp_path: Path) -> None:
    with Fleet(quiet_after=0.6) as fleet:
        fleet.register("a", worktree=tmp_path)
        fleet.record("a", HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
        started = time.monotonic()
        result = fleet.wait(timeout=10)
        took = time.monotonic() - started
    (state,) = result.attention
    assert (state.state, state.mark) == ("quiet", "a@1q")
    assert 0.4 < took < 3


def test_mock_clock_drives_quiet(tmp_path: Path) -> None:
    clock = MockClock(now=1000.0)
    with Fleet(clock=clock, quiet_after=60) as fleet:
        fleet.register("a", worktree=tmp_path)
        assert fleet.poll().attention == ()
        clock.advance(59)
        assert fleet.poll().attention == ()
        clock.advance(1)
        assert fleet.poll().marks == ("a@0q",)
        assert fleet.poll(seen=["a@0q"]).attention == ()


def test_retired_workers_are_not_waited_on(tmp_path: Path) -> None:
    from fleet import Retired

    with Fleet() as fleet:
        fleet.register("a", worktree=tmp_path)
        stop(fleet, "a")
        fleet.record("a", Retired(ts=time.time()))
        assert fleet.wait(timeout=0.3).timed_out


def test_watch_yields_transitions(tmp_path: Path) -> None:
    with Fleet() as fleet:
        fleet.register("a", worktree=tmp_path)

        def work() -> None:
            fleet.record("a", HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
            time.sleep(0.1)
            stop(fleet, "a")

        t = later(0.2, work)
        seen = [
            (x.before.state if x.before else None, x.after.state) for x in fleet.watch(timeout=1.5)
        ]
        t.join()
    assert seen[0] == (None, "starting")
    assert seen[-1][1] == "stopped"
    assert ("starting", "working") in seen or ("working", "stopped") in seen


def test_handler_errors_do_not_kill_the_watcher(tmp_path: Path, home: Path) -> None:
    with Fleet() as fleet:
        fleet.register("a", worktree=tmp_path)
        with Watcher(home) as watcher:
            calls = {"n": 0}
            real = watcher._handler._notify

            def flaky(worker: str) -> None:
                calls["n"] += 1
                if calls["n"] == 1:
                    raise RuntimeError("boom")
                real(worker)

            watcher._handler._notify = flaky
            stop(fleet, "a")  # the first notification raises
            time.sleep(0.3)
            fleet.record("a", HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
            stop(fleet, "a")
            result = watcher.wait(seen=["a@1"], timeout=10)
            assert watcher.handler_errors == 1
    assert result.marks == ("a@3",)


def test_threads_stop_and_are_joined(tmp_path: Path) -> None:
    before = threading.active_count()
    with Fleet() as fleet:
        fleet.register("a", worktree=tmp_path)
        fleet.wait(timeout=0.1)
        assert threading.active_count() > before
    time.sleep(0.1)
    assert threading.active_count() == before


# -- liveness --------------------------------------------------------------------------------


def test_a_dead_process_is_journaled_as_vanished(tmp_path: Path) -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        with Fleet() as fleet:
            fleet.register("a", worktree=tmp_path)
            start = process_start_time(proc.pid)
            fleet.record("a", Started(ts=time.time(), pid=proc.pid, start_time=start))
            fleet.record("a", HookEvent(ts=time.time(), src="claude", hook="UserPromptSubmit"))
            assert fleet.wait(timeout=0.5).timed_out
            t = later(0.2, proc.kill)
            began = time.monotonic()
            result = fleet.wait(timeout=15)
            took = time.monotonic() - began
            t.join()
            (state,) = result.attention
            assert (state.state, state.reason, state.live) == ("gone", "vanished", False)
            assert took < 6
            assert [type(e).__name__ for e in fleet.log("a")][-1] == "Vanished"
    finally:
        proc.kill()
        proc.wait()


def test_a_reused_pid_is_not_mistaken_for_the_worker(tmp_path: Path) -> None:
    with Fleet() as fleet:
        fleet.register("a", worktree=tmp_path)
        me = os.getpid()
        wrong = (process_start_time(me) or 0) + 12345  # same pid, another process's start
        fleet.record("a", Started(ts=time.time(), pid=me, start_time=wrong))
        result = fleet.wait(timeout=15)
    (state,) = result.attention
    assert (state.state, state.reason) == ("gone", "vanished")


def test_a_process_that_exits_cleanly_is_not_vanished(tmp_path: Path) -> None:
    from fleet import Exited

    proc = subprocess.Popen(["sleep", "0.3"])
    with Fleet() as fleet:
        fleet.register("a", worktree=tmp_path)
        fleet.record(
            "a", Started(ts=time.time(), pid=proc.pid, start_time=process_start_time(proc.pid))
        )

        def finish() -> None:
            proc.wait()
            fleet.record("a", Exited(ts=time.time(), exit_code=0, result="FLEET_WORKER_DONE: ok"))

        t = later(0.0, finish)
        result = fleet.wait(timeout=15)
        t.join()
    (state,) = result.attention
    assert (state.state, state.reason) == ("done", "claimed")


# -- the command line ------------------------------------------------------------------------


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLEET, *args], check=False, capture_output=True, text=True, timeout=timeout
    )


def test_cli_wait_exit_codes_and_json(worktree: Path) -> None:
    assert cli("register", "a", "--worktree", str(worktree)).returncode == 0
    timed_out = cli("wait", "--timeout", "0.2", "--json")
    assert timed_out.returncode == 3
    assert json.loads(timed_out.stdout)["result"] == "timeout"
    with Fleet() as fleet:
        fleet.record(
            "a",
            HookEvent(
                ts=time.time(), src="claude", hook="PermissionRequest", data={"tool_name": "Bash"}
            ),
        )
    woke = cli("wait", "--timeout", "5", "--json")
    assert woke.returncode == 0
    (item,) = json.loads(woke.stdout)["attention"]
    assert (item["state"], item["reason"], item["mark"]) == ("blocked", "permission", "a@1")
    assert item["permission_tool"] == "Bash" and "permission" in item["next"]
    assert cli("wait", "ghost", "--timeout", "1").returncode == 1


def test_a_restarted_coordinator_is_not_woken_for_what_it_marked_seen(
    worktree: Path, tmp_path: Path
) -> None:
    from tests.conftest import git_worktree

    cli("register", "a", "--worktree", str(worktree))
    cli("register", "b", "--worktree", str(git_worktree(tmp_path / "wt-b")))
    with Fleet() as fleet:
        stop(fleet, "a")
    first = json.loads(cli("wait", "--json", "--timeout", "5").stdout)
    assert [x["mark"] for x in first["attention"]] == ["a@1"]
    assert cli("seen", "a@1").returncode == 0
    # the coordinator "restarts": a fresh process with no memory of the marks
    waiter = subprocess.Popen(
        [*FLEET, "wait", "--json", "--timeout", "20"], stdout=subprocess.PIPE, text=True
    )
    try:
        time.sleep(0.8)
        assert waiter.poll() is None, "woken again for a state already marked seen"
        with Fleet() as fleet:
            stop(fleet, "b")
        out, _ = waiter.communicate(timeout=20)
    finally:
        waiter.kill()
    assert waiter.returncode == 0
    assert [x["mark"] for x in json.loads(out)["attention"]] == ["b@1"]


def test_cli_watch_json_streams_transitions(worktree: Path) -> None:
    cli("register", "a", "--worktree", str(worktree))
    proc = subprocess.Popen(
        [*FLEET, "watch", "--json", "--timeout", "3"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the watcher is up once it has shown the worker
        with Fleet() as fleet:
            stop(fleet, "a")
        out, _ = proc.communicate(timeout=20)
    finally:
        proc.kill()
    lines = [json.loads(line) for line in [first, *out.splitlines()]]
    assert lines[0]["to"] == "starting" and lines[0]["from"] is None
    assert lines[-1]["from"] == "starting" and lines[-1]["to"] == "stopped"
    assert lines[-1]["needs_attention"] is True
