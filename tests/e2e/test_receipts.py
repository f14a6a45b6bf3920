"""A follow-up sent with a receipt, on the real Claude Code and Codex of every tested release:
fleet says it was taken once the resumed session's hooks show the agent ran on it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._core.events import Exited, Started

from ..conftest import Repo
from ._server import texts
from .fake_anthropic import FakeAnthropic
from .fake_openai import FakeOpenAI
from .harness import brief, exits, fleet_argv, fleet_cli, journal
from .script import say

pytestmark = pytest.mark.e2e


def _ask_then_finish(worker: str, tool: str, url: str, repo: Repo, tmp_path: Path,
                     env: dict[str, str]) -> None:
    task = brief(tmp_path, worker, f"task-{worker}: write the notes.\n")
    fleet_cli("start", worker, "--tool", tool, "--task", str(task), "--repo", str(repo.path),
              "--endpoint", url, "--key-from", "env:FLEET_TEST_KEY", "--model", "m", env=env)
    exits(worker)
    follow = tmp_path / f"{worker}-follow.md"
    follow.write_text("Write notes.txt.")

    sent = fleet_cli("send", worker, str(follow), "--receipt", "50", "--json", env=env)

    receipt = json.loads(sent.stdout)["receipt"]
    assert receipt["taken"] is True, receipt
    assert receipt["why"] is None
    exits(worker, 2)
    with Fleet() as fleet:
        state = fleet.state(worker)
    assert (state.state, state.delivery) == ("done", "taken")


def test_a_claude_follow_up_is_taken(
    anthropic: FakeAnthropic, coordinator_env: dict[str, str], repo: Repo,
    tmp_path: Path,
) -> None:
    anthropic.script([say("Which file?"), say("FLEET_WORKER_DONE: wrote notes.txt")],
                     key="task-ctalk")
    _ask_then_finish("ctalk", "claude", anthropic.url, repo, tmp_path, coordinator_env)


def test_a_codex_follow_up_is_taken(
    openai: FakeOpenAI, coordinator_env: dict[str, str], repo: Repo,
    tmp_path: Path,
) -> None:
    openai.script([say("Which file?"), say("FLEET_WORKER_DONE: wrote it")], key="task-xtalk")
    _ask_then_finish("xtalk", "codex", openai.url, repo, tmp_path, coordinator_env)


def test_two_claude_follow_ups_sent_at_once_each_run_once_in_turn(
    anthropic: FakeAnthropic, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path,
) -> None:
    anthropic.script([say("Which file?"), say("Done one.", delay=1.0), say("Done two.")],
                     key="task-race")
    task = brief(tmp_path, "race", "task-race: write the notes.\n")
    fleet_cli("start", "race", "--task", str(task), "--repo", str(repo.path), "--endpoint",
              anthropic.url, "--key-from", "env:FLEET_TEST_KEY", "--model", "m",
              env=coordinator_env)
    exits("race")
    texts_of = {"alpha": "ALPHA: write notes.txt.", "bravo": "BRAVO: write todo.txt."}
    for name, text in texts_of.items():
        (tmp_path / f"{name}.md").write_text(text)

    procs = {name: subprocess.Popen(
        [*fleet_argv(), "send", "race", str(tmp_path / f"{name}.md"), "--receipt", "60",
         "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **coordinator_env}) for name in texts_of}
    outs = {name: p.communicate(timeout=180) for name, p in procs.items()}

    for name, (out, err) in outs.items():
        assert procs[name].returncode == 0, (name, out, err)
        assert json.loads(out)["receipt"]["taken"] is True, (name, out, err)
    exits("race", 3)
    # The model was given each follow-up exactly once: each as the newest user message of
    # one conversation step, and the last request holds both, one after the other.
    newest = []
    for req in anthropic.recorded("main"):
        users = [m for m in req.json["messages"] if m.get("role") == "user"]
        newest.append("\n".join(texts(users[-1].get("content"))))
    for text in texts_of.values():
        assert sum(text in n for n in newest) == 1, (text, newest)
    # One run after the other: no two `claude --resume` at once.
    runs = [type(e).__name__ for e in journal("race") if isinstance(e, (Started, Exited))]
    assert runs == ["Started", "Exited"] * 3, runs
