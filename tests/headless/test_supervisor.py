"""The supervisor, run in-process against the scripted fake agent: attempts, retries, limits,
timeouts, stops, and what it journals."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from fleet import Fleet
from fleet._core.events import Exited, Started, TurnEnded
from fleet._proc import is_alive
from fleet._supervisor import RunSpec, Supervisor, dump_spec, load_spec

from .conftest import FakeAgent, wait_for


def spec(home: Path, fake: FakeAgent, tmp_path: Path, **kw: Any) -> RunSpec:
    base: dict[str, Any] = {
        "worker": "w1",
        "home": str(home),
        "tool": "claude",
        "run": 1,
        "cwd": str(tmp_path),
        "argv": (str(fake.bin / "claude"), "-p", "--output-format", "json"),
        "prompt": "do the thing",
        "env_set": {"FAKE_AGENT_DIR": str(fake.dir), "FLEET_WORKER": "w1"},
        "output_dir": str(home / "workers" / "w1" / "headless"),
        "backoff_base": 0.01,
        "backoff_max": 0.02,
        "grace": 2.0,
    }
    base.update(kw)
    return RunSpec(**base)


def events(home: Path) -> list[Any]:
    with Fleet(home) as fleet:
        return list(fleet.log("w1"))


def run(sup: Supervisor) -> Exited:
    try:
        return sup.run()
    finally:
        sup.close()


def test_spec_round_trips() -> None:
    s = RunSpec(worker="a", home="/h", tool="codex", run=2, cwd="/w", argv=("codex", "exec"),
                output_dir="/o", env_set={"A": "1"}, env_unset=("B",), key_vars=("K",),
                fallback_argv=("codex", "exec", "-m", "small"), timeout=5.0)
    assert load_spec(dump_spec(s)) == s


def test_success_with_done_envelope(home: Path, fake: FakeAgent, tmp_path: Path) -> None:
    fake.plan([{"result": "did it\nFLEET_WORKER_DONE: all tests pass"}])
    done = run(Supervisor(spec(home, fake, tmp_path)))
    assert (done.exit_code, done.is_error, done.reason) == (0, False, None)
    evs = events(home)
    # the turn's result, read live from the agent's stream, comes before the run's exit
    assert [type(e) for e in evs] == [Started, TurnEnded, Exited]
    started = evs[0]
    assert started.pid == fake.calls()[0]["pid"] and started.start_time is not None
    assert started.attempt == 1
    state = Fleet(home).state("w1")
    assert (state.state, state.reason) == ("done", "claimed")
    assert state.exit is not None and state.exit.usage["input_tokens"] == 100
    assert fake.calls()[0]["argv"][-1] == "do the thing"
    assert fake.calls()[0]["stdin_devnull"] is True


def test_overload_is_retried_with_backoff_then_succeeds(
    home: Path, fake: FakeAgent, tmp_path: Path
) -> None:
    fake.plan([{"error": 529}, {"error": 529}, {"result": "FLEET_WORKER_DONE: third time"}])
    sup = Supervisor(spec(home, fake, tmp_path, max_attempts=4))
    done = run(sup)
    assert done.is_error is False
    assert len(sup.delays) == 2
    assert all(0.005 <= d <= 0.02 for d in sup.delays)
    starts = [e for e in events(home) if isinstance(e, Started)]
    assert [s.attempt for s in starts] == [1, 2, 3]
    # The pid journaled for a retry is the agent itself: the backoff ran in that process
    # before it became the agent, so the pid never looked dead between attempts.
    assert [s.pid for s in starts] == [c["pid"] for c in fake.calls()]
    assert done.usage["input_tokens"] == 300  # every attempt's tokens count
    assert Fleet(home).state("w1").state == "done"


def test_retries_are_bounded(home: Path, fake: FakeAgent, tmp_path: Path) -> None:
    fake.plan([{"error": 529, "result": "API Error: Overloaded"}])
    done = run(Supervisor(spec(home, fake, tmp_path, max_attempts=3)))
    assert len(fake.calls()) == 3
    assert (done.reason, done.api_error_status, done.is_error) == ("retries", 529, True)
    state = Fleet(home).state("w1")
    assert (state.state, state.reason) == ("stopped", "api_error:529")


def test_fallback_to_the_small_model(home: Path, fake: FakeAgent, tmp_path: Path) -> None:
    fake.plan([{"error": 529}, {"result": "FLEET_WORKER_DONE: small did it"}])
    main = (str(fake.bin / "claude"), "-p", "--model", "big")
    small = (str(fake.bin / "claude"), "-p", "--model", "small")
    run(Supervisor(spec(home, fake, tmp_path, argv=main, fallback_argv=small, fallback_after=1)))
    argvs = [c["argv"] for c in fake.calls()]
    assert argvs[0][3] == "big" and argvs[1][3] == "small"


def test_auth_error_is_not_retried(home: Path, fake: FakeAgent, tmp_path: Path) -> None:
    fake.plan([{"error": 401, "result": "Failed to authenticate. API Error: 401"}])
    done = run(Supervisor(spec(home, fake, tmp_path)))
    assert len(fake.calls()) == 1
    assert (done.reason, done.api_error_status) == ("auth", 401)
    state = Fleet(home).state("w1")
    assert (state.state, state.reason) == ("stopped", "api_error:401")
    assert state.needs_attention


def test_usage_limit_blocks_with_reset_time(home: Path, fake: FakeAgent, tmp_path: Path) -> None:
    fake.plan([{"error": 429, "result": "Claude AI usage limit reached|1900000000"}])
    done = run(Supervisor(spec(home, fake, tmp_path)))
    assert len(fake.calls()) == 1
    assert (done.reason, done.reset_at) == ("limit", 1900000000.0)
    state = Fleet(home).state("w1")
    assert (state.state, state.reason, state.limit_reset) == ("blocked", "limit", 1900000000.0)


def test_blocked_envelope(home: Path, fake: FakeAgent, tmp_path: Path) -> None:
    fake.plan([{"result": "I stopped.\nFLEET_WORKER_BLOCKED: which database?"}])
    run(Supervisor(spec(home, fake, tmp_path)))
    state = Fleet(home).state("w1")
    assert (state.state, state.reason) == ("blocked", "worker")
    assert state.envelope is not None and state.envelope.text == "which database?"


def test_wall_clock_timeout_kills_the_process_group(
    home: Path, fake: FakeAgent, tmp_path: Path
) -> None:
    fake.plan([{"sleep": 60}])
    done = run(Supervisor(spec(home, fake, tmp_path, timeout=0.5)))
    assert done.reason == "timeout"
    pid = fake.calls()[0]["pid"]
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    state = Fleet(home).state("w1")
    assert (state.state, state.reason) == ("gone", "timeout")


def test_stop_request_ends_the_run(home: Path, fake: FakeAgent, tmp_path: Path) -> None:
    fake.plan([{"sleep": 60}])
    sup = Supervisor(spec(home, fake, tmp_path))
    result: list[Exited] = []
    thread = threading.Thread(target=lambda: result.append(sup.run()))
    thread.start()
    fake.wait_running(1)
    sup.request_stop()
    thread.join(30)
    sup.close()
    assert not thread.is_alive()
    assert result[0].reason == "stopped"
    assert result[0].exit_code is None  # journaled before the agent was signalled
    state = Fleet(home).state("w1")
    assert (state.state, state.reason) == ("gone", "stopped")


def test_stop_during_backoff(home: Path, fake: FakeAgent, tmp_path: Path) -> None:
    fake.plan([{"error": 529}])
    sup = Supervisor(spec(home, fake, tmp_path, backoff_base=30.0, backoff_max=30.0))
    result: list[Exited] = []
    thread = threading.Thread(target=lambda: result.append(sup.run()))
    thread.start()
    wait_for(fake.calls, what="first attempt")
    wait_for(lambda: sup.delays, what="backoff")
    sup.request_stop()
    thread.join(10)
    sup.close()
    assert result and result[0].reason == "stopped"
    assert len(fake.calls()) == 1


def test_key_goes_only_to_the_named_variables(home: Path, fake: FakeAgent, tmp_path: Path) -> None:
    import hashlib

    key = "sk-abc-123"
    s = spec(home, fake, tmp_path, key_vars=("ANTHROPIC_AUTH_TOKEN",),
             env_unset=("FLEET_TEST_KEY", "ANTHROPIC_API_KEY"))
    base = {"PATH": "/usr/bin:/bin", "FLEET_TEST_KEY": key, "ANTHROPIC_API_KEY": "host-key",
            "KEEP": "1"}
    sup = Supervisor(s, key=key, base_env=base)
    env = sup.child_env()
    assert env["ANTHROPIC_AUTH_TOKEN"] == key
    assert "FLEET_TEST_KEY" not in env and "ANTHROPIC_API_KEY" not in env
    assert env["KEEP"] == "1"
    run(sup)
    seen = fake.calls()[0]["key_sha"]
    assert seen == {"ANTHROPIC_AUTH_TOKEN": hashlib.sha256(key.encode()).hexdigest()}


def test_missing_executable_is_a_clear_exit(home: Path, fake: FakeAgent, tmp_path: Path) -> None:
    done = run(Supervisor(spec(home, fake, tmp_path, argv=(str(tmp_path / "nope"), "-p"))))
    assert (done.exit_code, done.reason) == (127, "error")
    assert done.result is not None and "cannot start" in done.result


def test_what_the_agent_left_running_ends_with_it(
    home: Path, fake: FakeAgent, tmp_path: Path
) -> None:
    fake.plan([{"background": 60, "result": "FLEET_WORKER_DONE: left a server up"}])
    done = run(Supervisor(spec(home, fake, tmp_path)))
    assert done.is_error is False
    orphan = int((fake.dir / "background-1").read_text())
    assert wait_for(lambda: not is_alive(orphan, None), 10, "the orphan to end")
