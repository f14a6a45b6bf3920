"""A blind review on the real Claude Code of every tested release: `fleet check --blind` runs a
reviewer with read-only tools in the worker's worktree, journals its verdict on each criterion
with the check, and leaves the worker's journal free of the reviewer's own session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._core.events import Checked, HookEvent

from ..conftest import Repo
from .fake_anthropic import FakeAnthropic
from .harness import brief, exits, fleet_cli, journal
from .script import bash, say

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
    anthropic.script(list(replies), key="review-bw")  # type: ignore[arg-type]
    out = fleet_cli("check", "bw", "--blind", "--criteria", str(criteria), "--endpoint",
                    anthropic.url, "--key-from", "env:FLEET_TEST_KEY", "--json", env=env,
                    check=False)
    return out.returncode, json.loads(out.stdout)


def test_a_blind_review_that_fails_a_criterion_fails_the_check(
    anthropic: FakeAnthropic, coordinator_env: dict[str, str], repo: Repo, tmp_path: Path,
) -> None:
    _finished_worker(anthropic, repo, tmp_path, coordinator_env)
    hooks_before = [e for e in journal("bw") if isinstance(e, HookEvent)]

    code, result = _review(
        anthropic, tmp_path, coordinator_env,
        bash("touch reviewer-was-here"),  # outside the read-only tools: denied
        bash("git log --oneline -3"),
        say("Looked.\nCRITERION 1: PASS: notes.txt is committed\n"
            "CRITERION 2: FAIL: no test covers notes.txt"))

    assert code == 4, result
    assert result["verdict"] == "failed" and result["reviewer"] == anthropic.url
    assert [c["passed"] for c in result["criteria"]] == [True, False]  # type: ignore[index]
    worktree = Path(Fleet().state("bw").worktree or "")
    assert not (worktree / "reviewer-was-here").exists()
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
