"""One follow-up at a time per worker: two `fleet send` at once to one headless worker each run
exactly once, one after the other, in runs of their own; each receipt is about its own text;
`--no-queue` refuses instead of waiting; a hand-over racing a send waits its turn too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from fleet import Fleet
from fleet._core import events as ev
from fleet._core.fold import fold
from fleet._errors import Refused, UnknownWorker
from fleet._orchestrate import own_receipt, receipt_of, start_worker
from fleet._turns import Busy, worker_turn
from fleet.adapters._base import Workspace
from fleet.adapters.headless import HeadlessAdapter
from tests.conftest import Repo

from .conftest import FakeAgent, wait_for
from .test_start import brief, exited

SESSION = "sess-1"


def _fleet(home: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "fleet", "--home", str(home), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})


def _started_and_idle(home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path,
                       *steps: dict[str, Any]) -> Workspace:
    fake.plan([{"result": "first", "session": SESSION}, *steps])
    state = start_worker("race", task=brief(tmp_path), repo=repo.path, options=fake.options())
    exited(home, "race")
    return Workspace(worktree=Path(state.worktree or ""), branch="fleet/race",
                     handle={"worker": "race"})


def _runs(home: Path) -> list[tuple[str, int]]:
    """The run starts and ends in journal order: ("started", attempt) / ("exited", code)."""
    out: list[tuple[str, int]] = []
    for e in Fleet(home).log("race"):
        if isinstance(e, ev.Started):
            out.append(("started", e.attempt))
        elif isinstance(e, ev.Exited):
            out.append(("exited", e.exit_code if e.exit_code is not None else -1))
    return out


def test_two_sends_at_once_run_one_after_the_other_each_with_its_own_receipt(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    _started_and_idle(
        home, repo, fake, tmp_path,
        # The first follow-up to get its turn runs (its prompt is taken: SessionStart and
        # UserPromptSubmit through fleet's hook); the second one's agent cannot start.
        {"echo": True, "sleep": 1.0, "session": SESSION,
         "hooks": ["SessionStart", "UserPromptSubmit"]},
        {"exit": 127, "result": "claude: not found"},
    )
    texts = {"alpha": "ALPHA: write the docs.", "bravo": "BRAVO: add a test."}
    for name, text in texts.items():
        (tmp_path / f"{name}.md").write_text(text)
    env = {"FLEET_HOME": str(home)}
    procs = {name: _fleet(home, "send", "race", str(tmp_path / f"{name}.md"), "--receipt",
                          "60", "--json", env=env) for name in texts}
    outs = {name: p.communicate(timeout=120) for name, p in procs.items()}

    # Each follow-up reached an agent exactly once, in a run of its own.
    prompts = [c["argv"][-1] for c in fake.calls()[1:]]
    assert sorted(prompts) == sorted(texts.values()), prompts
    state_dir = home / "workers" / "race" / "headless"
    specs = {n: json.loads((state_dir / f"run-{n}.json").read_text())["prompt"] for n in (2, 3)}
    assert sorted(specs.values()) == sorted(texts.values())
    # One after the other: the second run started after the first had ended.
    assert _runs(home) == [("started", 1), ("exited", 0), ("started", 1), ("exited", 0),
                           ("started", 1), ("exited", 127)]
    assert [c["argv"][-1] for c in fake.calls()[1:]] == [specs[2], specs[3]]
    # Each receipt speaks of its own text: the one that ran was taken, the other was not.
    receipts = {}
    for name, (out, err) in outs.items():
        receipts[name] = json.loads(out)["receipt"]
        code = procs[name].returncode
        ran = texts[name] == specs[2]
        assert (code, receipts[name]["taken"]) == ((0, True) if ran else (4, False)), (
            name, out, err)
    assert sorted(r["taken"] for r in receipts.values()) == [False, True]


def test_no_queue_refuses_while_a_run_goes_on_and_sends_nothing(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    ws = _started_and_idle(home, repo, fake, tmp_path,
                           {"hold": str(tmp_path), "session": SESSION, "echo": True},
                           {"echo": True, "session": SESSION})
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    first.write_text("FIRST")
    second.write_text("SECOND")
    adapter = HeadlessAdapter(options=fake.options())
    adapter.send(ws, first)
    fake.wait_running(2)
    follow_ups = Fleet(home).state("race").follow_ups
    with pytest.raises(Busy, match="one at a time") as refused:
        adapter.send(ws, second, queue=False)
    assert isinstance(refused.value, Refused) and "\n" not in str(refused.value)
    out = subprocess.run([sys.executable, "-m", "fleet", "--home", str(home), "send", "race",
                          str(second), "--no-queue"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 4 and out.stderr.count("\n") == 1 and "one at a time" in out.stderr
    assert Fleet(home).state("race").follow_ups == follow_ups  # nothing journaled
    assert len(fake.calls()) == 2
    # Queued instead, it waits for the run to end, then runs once.
    sent = threading.Thread(target=adapter.send, args=(ws, second))
    sent.start()
    try:
        (tmp_path / "go-2").write_text("")
    finally:
        sent.join(60)
    assert not sent.is_alive()
    exited(home, "race", 3)
    assert [c["argv"][-1] for c in fake.calls()][1:] == ["FIRST", "SECOND"]
    assert _runs(home)[2:] == [("started", 1), ("exited", 0), ("started", 1), ("exited", 0)]


def test_a_hand_over_racing_a_send_waits_for_its_run(
    home: Path, repo: Repo, fake: FakeAgent, tmp_path: Path
) -> None:
    from fleet.adapters._base import LaunchSpec

    ws = _started_and_idle(home, repo, fake, tmp_path,
                           {"hold": str(tmp_path), "session": SESSION, "echo": True},
                           {"echo": True, "session": "sess-2"})
    follow = tmp_path / "follow.md"
    follow.write_text("FOLLOW")
    adapter = HeadlessAdapter(options=fake.options())
    adapter.send(ws, follow)
    fake.wait_running(2)
    spec = LaunchSpec(worker="race", brief=brief(tmp_path, "HANDED OVER\n"), tool="claude",
                      model="other")
    handed = threading.Thread(target=adapter.hand_over, args=(ws, spec))
    handed.start()
    try:
        # It holds back while the follow-up's run goes on.
        assert not wait_for_or_none(lambda: len(fake.calls()) > 2, 1.0)
        (tmp_path / "go-2").write_text("")
    finally:
        handed.join(60)
    assert not handed.is_alive()
    exited(home, "race", 3)
    assert [c["argv"][-1] for c in fake.calls()][1:] == ["FOLLOW", "HANDED OVER\n"]
    assert _runs(home)[2:] == [("started", 1), ("exited", 0), ("started", 1), ("exited", 0)]


def wait_for_or_none(predicate: Any, seconds: float) -> Any:
    try:
        return wait_for(predicate, seconds)
    except TimeoutError:
        return None


def test_the_lock_is_the_kernels_a_dead_holder_frees_it(home: Path, tmp_path: Path) -> None:
    (home / "workers" / "w").mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"fd = os.open({str(home / 'workers' / 'w' / 'turn.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(Busy), worker_turn(home, "w", queue=False):
            pass
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    with worker_turn(home, "w", queue=False):
        pass
    # No worker directory is ever made by the lock (a forgotten worker stays forgotten).
    with pytest.raises(UnknownWorker), worker_turn(home, "gone-worker"):
        pass
    assert not (home / "workers" / "gone-worker").exists()


def _state(events: list[ev.Event], upto: int) -> Any:
    return fold("w", events[:upto], 100.0)


def test_a_receipt_reads_its_own_delivery_not_a_later_or_earlier_one() -> None:
    reg = ev.Registered(ts=1.0, worktree="/w")
    def hook(name: str, ts: float) -> ev.HookEvent:
        return ev.HookEvent(ts=ts, src="claude", hook=name, data={"session_id": "s"})

    # A is sent and its run fails before any prompt; B is sent next and is taken.
    events: list[ev.Event] = [
        reg, ev.FollowUpSent(ts=2.0, text="A"), ev.Exited(ts=3.0, exit_code=127, is_error=True),
        ev.FollowUpSent(ts=4.0, text="B"), hook("SessionStart", 5.0),
        hook("UserPromptSubmit", 5.1)]
    before_a, before_b = _state(events, 1), _state(events, 3)
    # What a receipt read from the whole journal used to say of A: B's prompt, taken.
    assert receipt_of(before_a, fold("w", events, 100.0)).taken is True
    a = own_receipt(before_a, events, 100.0)
    assert a.taken is False and a.why
    assert own_receipt(before_b, events, 100.0).taken is True
    # A delivery not journaled yet is not known either way.
    assert own_receipt(_state(events, 6), events, 100.0).taken is None
