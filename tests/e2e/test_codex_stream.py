"""A headless Codex worker from its own ``codex exec --json`` events, read live by fleet's
supervisor: with its hooks on and with them off (a ``codex`` on PATH that adds ``--disable
hooks``), the same states, a waiting ``fleet wait`` woken within a second and once."""

from __future__ import annotations

import json
import stat
import subprocess
import time
from pathlib import Path

import pytest

from fleet._core.events import HookEvent
from fleet._core.fold import fold

from ..conftest import Repo
from .binaries import Agents
from .fake_openai import FakeOpenAI
from .harness import brief, exits, fleet_cli, journal
from .script import Reply, say, shell
from .test_claude_stream import FIRST_DELAY, wait_cli, woken

pytestmark = pytest.mark.e2e

SCENARIOS: dict[str, tuple[list[Reply], tuple[str, str]]] = {
    "done": ([shell("sleep 2; echo hi > x.txt", delay=FIRST_DELAY),
              say("Wrote x.txt.\nFLEET_WORKER_DONE: wrote x.txt")], ("done", "claimed")),
    "limit": ([Reply(status=429, message="You exceeded your current quota",
                     error_type="usage_limit_reached", delay=FIRST_DELAY)],
              ("blocked", "limit")),
}


def no_hooks(agents: Agents, root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    script = root / "codex"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = exec ]; then shift; exec {agents.codex} exec --disable hooks "$@"; fi\n'
        f'exec {agents.codex} "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return root


@pytest.mark.parametrize("mode", ["hooks", "no-hooks"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_codex_states_with_and_without_hooks(
    openai: FakeOpenAI, coordinator_env: dict[str, str], agents: Agents, repo: Repo,
    tmp_path: Path, mode: str, scenario: str,
) -> None:
    replies, expected = SCENARIOS[scenario]
    worker = f"cx-{scenario}-{mode}"
    key = f"task-{worker}"
    openai.script(replies, key=key)
    env = dict(coordinator_env)
    if mode == "no-hooks":
        env["PATH"] = f"{no_hooks(agents, tmp_path / 'wrap')}:{env['PATH']}"
    task = brief(tmp_path, worker, f"{key}: do the work.\n")
    fleet_cli("start", worker, "--tool", "codex", "--task", str(task), "--repo",
              str(repo.path), "--endpoint", openai.url, "--key-from", "env:FLEET_TEST_KEY",
              "--model", "fake-model", "--backoff", "0.1", env=env)
    waiting = wait_cli(worker, env)
    try:
        woke, out, err = woken(waiting)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, err
    [first] = json.loads(out)["attention"]
    exits(worker)
    events = journal(worker)
    state = fold(worker, events, now=time.time())
    report = "; ".join(f"{type(e).__name__}:{getattr(e, 'hook', '')}:{e.src}:{e.ts:.3f}"
                       for e in events)
    assert (state.state, state.reason) == expected, report
    assert (first["state"], first["reason"], first["mark"]) == (*expected, state.mark), report
    lag = woke - events[state.seq].ts
    assert lag < 1.0, (lag, report)
    again = wait_cli(worker, env, state.mark)
    try:
        again.communicate(timeout=8)
    except subprocess.TimeoutExpired:
        pass
    finally:
        again.kill()
        again.communicate()
    assert again.returncode != 0, "woken twice for one fact"
    sources = {e.src for e in events if isinstance(e, HookEvent)}
    assert "stream" in sources, report
    if mode == "hooks":
        assert "codex" in sources and not state.hooks_not_running, report
    else:
        assert "codex" not in sources and state.hooks_not_running, report
    if scenario == "done":
        answered = FIRST_DELAY + min(r.t for r in openai.recorded("main") if r.key == key)
        working = [e for e in events if isinstance(e, HookEvent) and e.hook == "PreToolUse"]
        assert working and working[0].ts - answered < 1.0, (answered, report)
