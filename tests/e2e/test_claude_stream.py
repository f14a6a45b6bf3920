"""A headless Claude Code worker stays visible when no hook runs: fleet's supervisor reads the
agent's own ``stream-json`` output as it is written and journals what decides its state.

Each scenario runs through ``fleet start`` three ways on every pinned release: with hooks on,
with ``CLAUDE_CODE_SIMPLE=1`` in the worker's environment, and with a ``claude`` on PATH that
adds ``--bare`` to every ``-p`` run (both turn every hook off). In all three the worker reads
working within a second of its first tool call and reaches the same final state; a waiting
``fleet wait`` wakes within a second of the fact, and only once; the journal never holds the
key the agent printed."""

from __future__ import annotations

import json
import os
import select
import stat
import subprocess
import time
from pathlib import Path

import pytest

from fleet._core.events import Event, HookEvent, HooksOff
from fleet._core.fold import fold

from ..conftest import Repo
from .binaries import Agents
from .fake_anthropic import FakeAnthropic
from .harness import KEY, brief, exits, fleet_argv, fleet_cli, journal, wait_for_journal
from .script import Reply, bash, error, say

pytestmark = pytest.mark.e2e

MODES = ("hooks", "simple", "bare")
#: The model's first answer waits this long, so the coordinator's `fleet wait` is blocking
#: before any fact it should wake for.
FIRST_DELAY = 2.0
#: scenario: the model's replies, fleet start's extra options, the final state
SCENARIOS: dict[str, tuple[list[Reply], list[str], tuple[str, str]]] = {
    "done": ([bash("sleep 2; echo hi > x.txt", delay=FIRST_DELAY),
              say(f"Wrote x.txt. The key is {KEY}.\nFLEET_WORKER_DONE: wrote x.txt")],
             [], ("done", "claimed")),
    "denied": ([bash("touch /etc/fleet-e2e-nope", delay=FIRST_DELAY),
                say("I could not create the file.")],
               ["--permission-mode", "dontAsk"], ("blocked", "permission_denied")),
    "limit": ([Reply(status=429, message="Rate limited", error_type="rate_limit_error",
                     delay=FIRST_DELAY)], [], ("blocked", "limit")),
    # every attempt overloaded: fleet retries, then the run ends on the API error
    "overloaded": ([Reply(status=529, delay=FIRST_DELAY)], ["--retries", "2"],
                   ("stopped", "api_error:529")),
}


def bare_wrapper(agents: Agents, root: Path) -> Path:
    """A directory holding a ``claude`` that runs the real one with ``--bare`` added to every
    ``-p`` run: the default Claude Code's documentation announces."""
    root.mkdir(parents=True, exist_ok=True)
    script = root / "claude"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do\n'
        f'  if [ "$a" = "-p" ]; then exec {agents.claude} --bare "$@"; fi\n'
        "done\n"
        f'exec {agents.claude} "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return root


def mode_env(mode: str, env: dict[str, str], agents: Agents, tmp_path: Path) -> dict[str, str]:
    if mode == "simple":
        return {**env, "CLAUDE_CODE_SIMPLE": "1"}
    if mode == "bare":
        return {**env, "PATH": f"{bare_wrapper(agents, tmp_path / 'bare')}:{env['PATH']}"}
    return env


def wait_cli(worker: str, env: dict[str, str], *seen: str) -> subprocess.Popen[str]:
    args = [*fleet_argv(), "wait", worker, "--json", "--timeout", "90"]
    for mark in seen:
        args += ["--seen", mark]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})


def woken(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[float, str, str]:
    """When ``fleet wait`` printed its answer (its first byte: not when the process was done
    exiting), and what it printed."""
    assert proc.stdout is not None and proc.stderr is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    woke = time.time()
    assert ready, "fleet wait never answered"
    out, err = proc.communicate(timeout=30)
    return woke, out, err


def entering(events: list[Event], seq: int) -> Event:
    return events[seq]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_headless_states_with_and_without_hooks(
    anthropic: FakeAnthropic, coordinator_env: dict[str, str], agents: Agents, repo: Repo,
    tmp_path: Path, mode: str, scenario: str,
) -> None:
    replies, options, expected = SCENARIOS[scenario]
    worker = f"{scenario}-{mode}"
    key = f"task-{worker}"
    anthropic.script(replies, key=key)
    env = mode_env(mode, coordinator_env, agents, tmp_path)
    task = brief(tmp_path, worker, f"{key}: do the work.\n")
    fleet_cli("start", worker, "--task", str(task), "--repo", str(repo.path), "--endpoint",
              anthropic.url, "--key-from", "env:FLEET_TEST_KEY", "--backoff", "0.1", *options,
              env=env)
    waiting = wait_cli(worker, env)
    try:
        woke, out, err = woken(waiting)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, err
    attention = json.loads(out)["attention"]
    assert len(attention) == 1, attention
    [first] = attention
    exits(worker)
    events = journal(worker)
    state = fold(worker, events, now=time.time())
    sources = {e.src for e in events if isinstance(e, HookEvent)}
    report = "; ".join(f"{type(e).__name__}:{getattr(e, 'hook', '')}:{e.src}:{e.ts:.3f}"
                       for e in events)
    assert (state.state, state.reason) == expected, report
    # the first wake was for the final fact's mark, and came within a second of it. With
    # hooks on, a denied run's Stop hook (turn_end) precedes its stream's result by some tens
    # of milliseconds: the wake may come at stopped, and the result then names the cause
    # under the same mark.
    assert first["mark"] == state.mark, (first, report)
    if not (mode == "hooks" and scenario == "denied"):
        assert (first["state"], first["reason"]) == expected, (first, report)
    lag = woke - entering(events, state.seq).ts
    assert lag < 1.0, (lag, report)
    # no second wake for the same fact: the other source agreed on the same mark
    again = wait_cli(worker, env, state.mark)
    try:
        again.communicate(timeout=8)
    except subprocess.TimeoutExpired:
        pass
    finally:
        again.kill()
        again.communicate()
    assert again.returncode != 0, "woken twice for one fact"
    assert "stream" in sources, report
    if mode == "hooks":
        assert "claude" in sources
        assert state.hooks_seen and not state.hooks_not_running
    else:
        assert "claude" not in sources, report
        assert state.hooks_not_running
        # one per attempt (each attempt is a process of its own)
        offs = [e for e in events if isinstance(e, HooksOff)]
        word = "CLAUDE_CODE_SIMPLE" if mode == "simple" else "--bare"
        assert offs and all(any(word in why for why in off.why) for off in offs), offs
        status = fleet_cli("status", worker, env=env)
        shown = status.stdout + status.stderr
        assert "hooks are not running" in shown and word in shown, shown
    if scenario == "done":
        # working within a second of the first tool call (the model's reply to the first
        # request), long before the tool's two seconds were over
        answered = FIRST_DELAY + min(r.t for r in anthropic.recorded("main") if r.key == key)
        working = [e for e in events if isinstance(e, HookEvent) and e.hook == "PreToolUse"]
        assert working and working[0].ts - answered < 1.0, (answered, report)
        # fleet's own files (the journal, the run's output) never hold the key the agent
        # printed; the agent's own transcript in its config dir is the agent's business
        home = Path(os.environ["FLEET_HOME"]) / "workers" / worker
        for path in [home / "journal.jsonl", *(home / "headless").rglob("*")]:
            if path.is_file() and not path.is_symlink():
                assert KEY.encode() not in path.read_bytes(), path
        assert state.message is not None and "[redacted]" in state.message


def test_the_stream_alone_marks_the_limit_until_its_reset(
    anthropic: FakeAnthropic, coordinator_env: dict[str, str], agents: Agents, repo: Repo,
    tmp_path: Path,
) -> None:
    """A limit seen only in the stream (hooks off) still blocks with its reason and keeps the
    worker's state: the exit agrees."""
    anthropic.script([error(429, "Rate limited", error_type="rate_limit_error")], key="task-lim")
    env = mode_env("simple", coordinator_env, agents, tmp_path)
    task = brief(tmp_path, "lim", "task-lim: anything.\n")
    fleet_cli("start", "lim", "--task", str(task), "--repo", str(repo.path), "--endpoint",
              anthropic.url, "--key-from", "env:FLEET_TEST_KEY", "--backoff", "0.1", env=env)
    events = wait_for_journal("lim", lambda evs: any(
        isinstance(e, HookEvent) and e.hook == "StopFailure" and e.src == "stream" for e in evs))
    exits("lim")
    events = journal("lim")
    state = fold("lim", events, now=time.time())
    assert (state.state, state.reason) == ("blocked", "limit")
    failure = next(e for e in events if isinstance(e, HookEvent) and e.hook == "StopFailure")
    assert state.seq == events.index(failure)
