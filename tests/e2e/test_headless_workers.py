"""Headless workers with the real Claude Code and Codex CLIs against fake model servers on
127.0.0.1: fleet starts them in worktrees, supervises them, retries overload, and keeps the key
out of argv, files and journals."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from fleet import Fleet
from fleet._core.events import Exited, HookEvent, Started, Vanished

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI
from .harness import (
    KEY,
    OAUTH,
    brief,
    exits,
    fleet_cli,
    hooks_of,
    journal,
    state_sequence,
    wait_for_journal,
)
from .script import bash, error, say

pytestmark = pytest.mark.e2e


class FlakyAnthropic(FakeAnthropic):
    """The fake Anthropic API, plus: the first ``n`` main-loop requests of a keyed conversation
    fail with ``status``, whatever their step (so a retried run sees the error again)."""

    def __init__(self) -> None:
        super().__init__()
        self._failures: dict[str, list[int]] = {}

    def fail_first(self, key: str, n: int, status: int = 529) -> None:
        self._failures[key] = [n, status]

    def answer(self, req: Any, out: Any) -> Any:
        body = req.json if isinstance(req.json, dict) else {}
        if req.method == "POST" and body.get("tools"):
            text = json.dumps(body.get("messages"))
            for key, left in self._failures.items():
                if key in text and left[0] > 0:
                    with self._lock:
                        left[0] -= 1
                    self._error(out, left[1])
                    return attrs.evolve(req, kind="main", key=key, step=-1)
        return super().answer(req, out)


@pytest.fixture
def flaky() -> Iterator[FlakyAnthropic]:
    with FlakyAnthropic() as server:
        yield server


def group_cmdlines(pgid: int) -> list[bytes]:
    """The argv of every live process in a process group."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_bytes().rsplit(b")", 1)[1].split()
            if int(fields[2]) == pgid:
                out.append((stat.parent / "cmdline").read_bytes())
        except (OSError, IndexError, ValueError):
            continue
    return out


def all_bytes(root: Path) -> Iterator[tuple[Path, bytes]]:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            yield path, path.read_bytes()


def test_three_workers_at_once(
    flaky: FlakyAnthropic, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path
) -> None:
    flaky.script([
        bash("echo fixed > fix.txt && git add fix.txt && git commit -qm 'fix the thing'",
             delay=4.0),
        say("Committed the fix.\nFLEET_WORKER_DONE: fixed the thing in fix.txt"),
    ], key="task-alpha")
    flaky.script([say("I cannot go on.\nFLEET_WORKER_BLOCKED: need the API spec")],
                 key="task-beta")
    flaky.script([say("Retried fine.\nFLEET_WORKER_DONE: gamma done")], key="task-gamma")
    flaky.fail_first("task-gamma", 2, 529)
    home = Path(os.environ["FLEET_HOME"])
    common = ["--repo", str(repo.path), "--endpoint", flaky.url, "--key-from",
              "env:FLEET_TEST_KEY", "--model", "glm-test", "--backoff", "0.2", "--json"]
    for name in ("alpha", "beta", "gamma"):
        task = brief(tmp_path, name, f"task-{name}: do the {name} work.\n")
        # gamma's backoffs outlast the grace after which `fleet wait` calls a dead pid vanished
        slow = ["--backoff", "2.5"] if name == "gamma" else []
        fleet_cli("start", name, "--task", str(task), *common, *slow, env=coordinator_env)
    # The coordinator (each `fleet start`) has exited while alpha's agent still works; the
    # supervisors carry on and journal the outcome.
    assert not any(isinstance(e, Exited) for e in journal("alpha"))
    started = wait_for_journal("alpha", lambda evs: any(isinstance(e, Started) for e in evs))
    agent = next(e for e in started if isinstance(e, Started))
    supervisor = json.loads((home / "workers/alpha/headless/supervisor.json").read_text())
    cmdlines = group_cmdlines(agent.pid) + group_cmdlines(supervisor["pid"])
    assert len(cmdlines) >= 2
    assert all(KEY.encode() not in c for c in cmdlines)
    agent_env = Path(f"/proc/{agent.pid}/environ").read_bytes()
    assert b"ANTHROPIC_AUTH_TOKEN=" + KEY.encode() in agent_env.split(b"\0")

    # A coordinator waiting on gamma (with fleet's liveness watch) is woken once: when it is
    # done, not by the failed attempts fleet retried.
    woke = json.loads(fleet_cli("wait", "gamma", "--timeout", "120", "--json",
                                env=coordinator_env).stdout)
    assert [(a["worker"], a["state"]) for a in woke["attention"]] == [("gamma", "done")]
    for name in ("alpha", "beta", "gamma"):
        exits(name)
    assert not any(isinstance(e, Vanished) for e in journal("gamma"))
    with Fleet(home) as fleet:
        alpha, beta, gamma = (fleet.state(n) for n in ("alpha", "beta", "gamma"))
    assert (alpha.state, alpha.reason) == ("done", "claimed")
    assert alpha.envelope is not None and "fix.txt" in alpha.envelope.text
    assert (beta.state, beta.reason) == ("blocked", "worker")
    assert beta.envelope is not None and beta.envelope.text == "need the API spec"
    assert (gamma.state, gamma.reason) == ("done", "claimed")
    assert gamma.exit is not None and gamma.exit.is_error is False
    gamma_starts = [e for e in journal("gamma") if isinstance(e, Started)]
    assert [s.attempt for s in gamma_starts] == [1, 2, 3]
    # A failure fleet retries never reads as needing attention.
    states = [state for state, _ in state_sequence("gamma", journal("gamma"))]
    assert states[-1] == "done" and set(states[:-1]) <= {"starting", "working"}
    # Branches: alpha committed on its own branch; the others left theirs at the base.
    assert repo.git("log", "--format=%s", "main..fleet/alpha") == "fix the thing"
    assert repo.git("rev-list", "--count", "main..fleet/beta") == "0"
    assert repo.git("rev-list", "--count", "main..fleet/gamma") == "0"
    assert repo.git("status", "--porcelain") == ""
    # Every model request carried the worker's key and nothing else.
    keys = flaky.api_keys("main") + flaky.api_keys("side")
    assert keys and set(keys) == {KEY}
    for req in flaky.recorded():
        assert OAUTH not in json.dumps(dict(req.headers))
    # Hooks ran in the isolated config dirs and journaled the sessions.
    assert "SessionStart" in hooks_of(journal("alpha"))
    # Nothing of the key in the journals or any file under FLEET_HOME.
    for path, data in all_bytes(home):
        assert KEY.encode() not in data, path
    shown = fleet_cli("status", "--json", env=coordinator_env).stdout
    assert KEY not in shown


def test_api_worker_never_uses_the_host_login(
    flaky: FlakyAnthropic, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path,
    host_home: Path,
) -> None:
    flaky.script([say("FLEET_WORKER_DONE: ok")], key="task-iso")
    task = brief(tmp_path, "iso", "task-iso: say done.\n")
    fleet_cli("start", "iso", "--task", str(task), "--repo", str(repo.path), "--endpoint",
              flaky.url, "--key-from", "env:FLEET_TEST_KEY", "--effort", "high",
              env=coordinator_env)
    exits("iso")
    assert Fleet().state("iso").state == "done"
    sent = [r for r in flaky.recorded() if r.method == "POST"]
    assert sent
    for req in sent:
        assert req.api_key == KEY
        assert OAUTH not in json.dumps(dict(req.headers))
        assert "sk-host-env-key" not in json.dumps(dict(req.headers))
    # The host's login files are as they were.
    assert "oauthAccount" in json.loads((host_home / ".claude.json").read_text())
    config = Path(os.environ["FLEET_HOME"]) / "workers" / "iso" / "config"
    assert json.loads((config / "settings.json").read_text())["effortLevel"] == "high"
    assert "oauthAccount" not in json.loads((config / ".claude.json").read_text())


def test_auth_error_is_not_retried(
    flaky: FlakyAnthropic, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path
) -> None:
    flaky.script([error(401)], key="task-auth")
    task = brief(tmp_path, "auth", "task-auth: anything.\n")
    fleet_cli("start", "auth", "--task", str(task), "--repo", str(repo.path), "--endpoint",
              flaky.url, "--key-from", "env:FLEET_TEST_KEY", "--backoff", "0.1",
              env=coordinator_env)
    done = exits("auth")[0]
    assert (done.reason, done.api_error_status, done.is_error) == ("auth", 401, True)
    assert len([e for e in journal("auth") if isinstance(e, Started)]) == 1
    state = Fleet().state("auth")
    assert (state.state, state.reason) == ("stopped", "api_error:401")


def test_codex_worker(
    openai: FakeOpenAI, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path
) -> None:
    openai.script([say("Codex finished.\nFLEET_WORKER_DONE: codex ok")], key="task-codex")
    task = brief(tmp_path, "cx", "task-codex: finish.\n")
    fleet_cli("start", "cx", "--tool", "codex", "--task", str(task), "--repo", str(repo.path),
              "--endpoint", openai.url, "--key-from", "env:FLEET_TEST_KEY", "--model",
              "fake-model", env=coordinator_env)
    done = exits("cx")[0]
    assert done.is_error is False and done.session_id
    state = Fleet().state("cx")
    assert (state.state, state.reason) == ("done", "claimed")
    assert set(openai.api_keys()) == {KEY}
    # The hooks fleet seeded are trusted, so `codex exec` ran them.
    assert {"SessionStart", "Stop"} <= set(hooks_of(journal("cx")))
    for path, data in all_bytes(Path(os.environ["FLEET_HOME"])):
        assert KEY.encode() not in data, path


def test_stop_a_running_worker(
    flaky: FlakyAnthropic, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path
) -> None:
    flaky.script([bash("touch started.flag && sleep 60", delay=0.2)], key="task-long")
    task = brief(tmp_path, "long", "task-long: sleep.\n")
    fleet_cli("start", "long", "--task", str(task), "--repo", str(repo.path), "--endpoint",
              flaky.url, "--key-from", "env:FLEET_TEST_KEY", env=coordinator_env)
    events = wait_for_journal(
        "long", lambda evs: any(isinstance(e, Started) for e in evs), timeout=60
    )
    worktree = Fleet().state("long").worktree
    assert worktree is not None
    deadline = time.monotonic() + 60
    while not (Path(worktree) / "started.flag").exists():  # the tool is running
        assert time.monotonic() < deadline, "the agent never started its tool"
        time.sleep(0.05)
    agent = next(e for e in events if isinstance(e, Started))
    out = fleet_cli("stop", "long", "--json", env=coordinator_env)
    state = json.loads(out.stdout)
    assert (state["state"], state["reason"]) == ("gone", "stopped")
    assert group_cmdlines(agent.pid) == []  # the agent and its `sleep 60` are gone


def test_fan_out_from_a_tasks_file(
    flaky: FlakyAnthropic, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path
) -> None:
    for name in ("one", "two"):
        flaky.script([say(f"FLEET_WORKER_DONE: {name}", delay=0.5)], key=f"task-{name}")
        brief(tmp_path, name, f"task-{name}: go.\n")
    tasks = tmp_path / "TASKS.toml"
    tasks.write_text(f'repo = "{repo.path}"\n'
                     '[[task]]\nname = "one"\nbrief = "one.md"\n'
                     '[[task]]\nname = "two"\nbrief = "two.md"\n')
    out = fleet_cli("run", str(tasks), "--max-parallel", "1", "--endpoint", flaky.url,
                    "--key-from", "env:FLEET_TEST_KEY", "--json", env=coordinator_env)
    started = json.loads(out.stdout)["started"]
    assert [s["worker"] for s in started] == ["one", "two"]
    # The coordinator follows with `fleet wait`, passing back what it has handled.
    seen: list[str] = []
    finished: dict[str, str] = {}
    while set(finished) != {"one", "two"}:
        more = ["--seen", *seen] if seen else []
        woke = json.loads(fleet_cli("wait", "one", "two", "--timeout", "90", "--json", *more,
                                    env=coordinator_env).stdout)
        finished.update({a["worker"]: a["state"] for a in woke["attention"]})
        seen += woke["seen_hint"]
    assert finished == {"one": "done", "two": "done"}
    exits("one")
    exits("two")
    one_end = next(e.ts for e in journal("one") if isinstance(e, Exited))
    two_start = next(e.ts for e in journal("two") if isinstance(e, Started))
    assert two_start >= one_end  # the cap held
    assert {Fleet().state(n).state for n in ("one", "two")} == {"done"}
    assert not any(isinstance(e, HookEvent) and e.hook == "StopFailure" for e in journal("one"))


def test_follow_up_resumes_the_claude_session(
    flaky: FlakyAnthropic, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path
) -> None:
    from fleet.adapters._base import Workspace
    from fleet.adapters.headless import HeadlessAdapter

    flaky.script([say("Which file should I write?"), say("FLEET_WORKER_DONE: wrote notes.txt")],
                 key="task-talk")
    task = brief(tmp_path, "talk", "task-talk: write the notes.\n")
    fleet_cli("start", "talk", "--task", str(task), "--repo", str(repo.path), "--endpoint",
              flaky.url, "--key-from", "env:FLEET_TEST_KEY", env=coordinator_env)
    first = exits("talk")[0]
    assert first.session_id and first.result == "Which file should I write?"
    state = Fleet().state("talk")
    assert state.state == "gone" and state.needs_attention
    follow = tmp_path / "follow.md"
    follow.write_text("Write notes.txt.")
    adapter = HeadlessAdapter(environ={**os.environ, **coordinator_env})
    ws = Workspace(worktree=Path(state.worktree or ""), branch="fleet/talk",
                   handle=dict(state.handle))
    adapter.send(ws, follow)
    second = exits("talk", 2)[1]
    assert second.session_id == first.session_id
    final = Fleet().state("talk")
    assert (final.state, final.reason) == ("done", "claimed")
    resumed = [r for r in flaky.recorded("main") if r.key == "task-talk"][-1]
    assert resumed.step == 1  # the earlier exchange came along: the session was resumed
    assert "Write notes.txt." in json.dumps(resumed.json["messages"])
    assert set(flaky.api_keys("main")) == {KEY}


def test_follow_up_resumes_the_codex_session(
    openai: FakeOpenAI, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path
) -> None:
    from fleet.adapters._base import Workspace
    from fleet.adapters.headless import HeadlessAdapter

    openai.script([say("Which file?"), say("FLEET_WORKER_DONE: wrote it")], key="task-cxtalk")
    task = brief(tmp_path, "cxtalk", "task-cxtalk: write the notes.\n")
    fleet_cli("start", "cxtalk", "--tool", "codex", "--task", str(task), "--repo",
              str(repo.path), "--endpoint", openai.url, "--key-from", "env:FLEET_TEST_KEY",
              "--model", "fake-model", env=coordinator_env)
    first = exits("cxtalk")[0]
    assert first.session_id and first.result == "Which file?"
    state = Fleet().state("cxtalk")
    follow = tmp_path / "follow.md"
    follow.write_text("Write notes.txt.")
    adapter = HeadlessAdapter(environ={**os.environ, **coordinator_env})
    ws = Workspace(worktree=Path(state.worktree or ""), branch="fleet/cxtalk",
                   handle=dict(state.handle))
    adapter.send(ws, follow)
    second = exits("cxtalk", 2)[1]
    assert second.session_id == first.session_id, second
    final = Fleet().state("cxtalk")
    assert (final.state, final.reason) == ("done", "claimed")
    assert set(openai.api_keys()) == {KEY}
