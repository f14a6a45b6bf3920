"""A blind review on the real Claude Code of every tested release: `fleet check --blind` runs a
reviewer with read-only tools in the worker's worktree, journals its verdict on each criterion
with the check, and leaves the worker's journal free of the reviewer's own session. The
reviewer has no tool that writes: no shell (whose `git diff --output=FILE` once overwrote a
committed file), no Write or Edit; it reads the history fleet rendered for it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from fleet import Fleet
from fleet._core.events import Checked, HookEvent

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .harness import brief, exits, fleet_cli, journal
from .script import Reply, bash, call, say

pytestmark = pytest.mark.e2e

PUSHED = ("echo x > notes.txt && git add notes.txt && git commit -qm notes && "
          "git push -q -u origin HEAD")


def _finished_worker(anthropic: FakeAnthropic, repo: Repo, tmp_path: Path,
                     env: dict[str, str]) -> None:
    anthropic.script([bash(PUSHED), say("Pushed.\nFLEET_WORKER_DONE: notes pushed")],
                     key="task-bw")
    task = brief(tmp_path, "bw", "task-bw: add notes.\n")
    fleet_cli("start", "bw", "--task", str(task), "--repo", str(repo.path), "--endpoint",
              anthropic.url, "--key-from", "env:FLEET_TEST_KEY", "--model", "m", env=env)
    exits("bw")
    assert Fleet().state("bw").state == "done"


def _review(anthropic: FakeAnthropic, tmp_path: Path, env: dict[str, str],
            *replies: object) -> tuple[int, dict[str, object]]:
    criteria = tmp_path / "criteria.md"
    criteria.write_text("- review-bw: notes.txt exists\n- every change has a test\n")
    if replies:
        anthropic.script(list(replies), key="review-bw")  # type: ignore[arg-type]
    out = fleet_cli("check", "bw", "--blind", "--criteria", str(criteria), "--endpoint",
                    anthropic.url, "--key-from", "env:FLEET_TEST_KEY", "--json", env=env,
                    check=False)
    return out.returncode, json.loads(out.stdout)


def _reading_the_diff(anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch,
                      *then: Reply) -> None:
    """The reviewer's script: Read the diff file its prompt names (a path fleet picks per
    review, so the script is made when the prompt arrives), then ``then``."""
    answer = anthropic.answer

    def reading(req: Any, out: Any) -> Any:
        body = req.json if isinstance(req.json, Mapping) else {}
        found = re.search(r"- (/\S+/changes\.diff):", json.dumps(body.get("messages") or [])
                          .replace("\\n", "\n"))
        if found:
            anthropic.script([call("Read", {"file_path": found[1]}), *then], key="review-bw")
        return answer(req, out)

    monkeypatch.setattr(anthropic, "answer", reading)


def _tool_results(anthropic: FakeAnthropic) -> list[tuple[bool, str]]:
    """Each tool result the reviewer's session sent back: (is an error, its text)."""
    last = [r for r in anthropic.recorded("main") if r.key == "review-bw"][-1]
    out = []
    for message in last.json["messages"]:
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                content = block.get("content")
                text = content if isinstance(content, str) else json.dumps(content)
                out.append((bool(block.get("is_error")), text))
    return out


def test_a_blind_review_that_fails_a_criterion_fails_the_check(
    anthropic: FakeAnthropic, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _finished_worker(anthropic, repo, tmp_path, coordinator_env)
    hooks_before = [e for e in journal("bw") if isinstance(e, HookEvent)]
    worktree = Path(Fleet().state("bw").worktree or "")
    home = Path(coordinator_env.get("HOME") or Path.home())
    _reading_the_diff(
        anthropic, monkeypatch,
        # What once wrote through `Bash(git diff:*)`: there is no shell any more.
        bash("git diff --output=notes.txt HEAD~1"),
        bash(f"git log --output={home}/x -1"),
        call("Write", {"file_path": str(worktree / "reviewer-was-here"), "content": "x"}),
        call("Edit", {"file_path": str(worktree / "notes.txt"), "old_string": "x",
                      "new_string": "y"}),
        say("Looked.\nCRITERION 1: PASS: notes.txt is committed\n"
            "CRITERION 2: FAIL: no test covers notes.txt"))

    code, result = _review(anthropic, tmp_path, coordinator_env)

    assert code == 4, result
    assert result["verdict"] == "failed" and result["reviewer"] == anthropic.url
    assert [c["passed"] for c in result["criteria"]] == [True, False]  # type: ignore[index]
    # Its session had the read-only tools and no other.
    offered = {t["name"] for r in anthropic.recorded("main") if r.key == "review-bw"
               for t in r.json["tools"]}
    # (2.1.332 also lists a "DeferredToolPlaceholder" that does nothing: "Reserved placeholder
    # that keeps deferred tool loading active; never call this tool", with no input.)
    assert offered - {"DeferredToolPlaceholder"} == {"Read", "Grep", "Glob"}, offered
    (read, *refused) = _tool_results(anthropic)
    assert read[0] is False and "+x" in read[1]  # the diff fleet rendered, read with Read
    assert len(refused) == 4 and all(error for error, _ in refused), refused
    assert (worktree / "notes.txt").read_text() == "x\n"
    assert not (worktree / "reviewer-was-here").exists() and not (home / "x").exists()
    (checked,) = [e for e in journal("bw") if isinstance(e, Checked)]
    assert checked.reviewer == anthropic.url
    assert [c["verdict"] for c in checked.criteria] == ["pass", "fail"]
    state = Fleet().state("bw")
    assert (state.state, state.reason) == ("done", "failed")
    assert state.findings == ("blind review, criterion 2 (every change has a test): no test "
                              "covers notes.txt",)
    # The reviewer's own session journaled nothing into the worker's journal.
    assert [e for e in journal("bw") if isinstance(e, HookEvent)] == hooks_before
    report = fleet_cli("report", env=coordinator_env).stdout
    assert "check failed: blind review, criterion 2" in report


def test_a_blind_review_that_passes_is_reported_apart_from_commands(
    anthropic: FakeAnthropic, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path,
) -> None:
    _finished_worker(anthropic, repo, tmp_path, coordinator_env)

    code, result = _review(anthropic, tmp_path, coordinator_env,
                           say("CRITERION 1: PASS: there\nCRITERION 2: PASS: tested"))

    assert code == 0 and result["verdict"] == "checked", result
    state = Fleet().state("bw")
    assert (state.state, state.reason, state.reviewer) == ("done", "checked", anthropic.url)
    report = json.loads(fleet_cli("report", "--json", env=coordinator_env).stdout)
    assert report[0]["why"] == (f"checked by commands and a blind reviewer on {anthropic.url}, "
                                "not retired yet")
