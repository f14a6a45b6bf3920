"""The blind review's pure parts: the criteria file, the reviewer's answer, the findings, and
what the report and the command line make of them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet._blind import (
    READ_ONLY_TOOLS,
    CriterionVerdict,
    Reviewer,
    findings_of,
    parse_verdicts,
    read_criteria,
    review_prompt,
)
from fleet._core import events as ev
from fleet._core.fold import fold
from fleet._errors import SettingsError
from fleet._report import report_line
from tests.cli.test_cli_surface import run

CRITERIA = ["The parser accepts an empty file", "Every new function has a test"]


def test_criteria_are_one_per_line_without_list_marks(tmp_path: Path) -> None:
    path = tmp_path / "criteria.md"
    path.write_text("# Criteria\n\n- The parser accepts an empty file\n2. Every new function "
                    "has a test\n   \n")
    assert read_criteria(path) == CRITERIA
    path.write_text("# nothing but a heading\n\n")
    with pytest.raises(SettingsError, match="has no criteria"):
        read_criteria(path)


def test_the_prompt_lists_the_criteria_and_the_answer_form() -> None:
    prompt = review_prompt(CRITERIA, branch="fleet/w1", base="main")
    assert "1. The parser accepts an empty file\n2. Every new function has a test" in prompt
    assert "since main" in prompt and "CRITERION <number>: PASS" in prompt
    assert "Change nothing" in prompt


def test_the_last_line_for_each_criterion_is_its_verdict() -> None:
    text = ("I looked.\nCRITERION 1: FAIL: first thought\n**CRITERION 1: PASS: empty.txt "
            "parses**\ncriterion 3: PASS: out of range\nCRITERION 2 - fail - no test for "
            "split()")
    verdicts = parse_verdicts(text, CRITERIA)
    assert [(v.number, v.passed) for v in verdicts] == [(1, True), (2, False)]
    assert verdicts[0].reason == "empty.txt parses**"
    assert verdicts[1].reason == "no test for split()"
    silent = parse_verdicts("Looks fine to me.", CRITERIA)
    assert [v.passed for v in silent] == [None, None]


def test_findings_name_every_criterion_that_did_not_pass() -> None:
    verdicts = [CriterionVerdict(number=1, criterion="a", passed=True, reason="ok"),
                CriterionVerdict(number=2, criterion="b", passed=False, reason="no test"),
                CriterionVerdict(number=3, criterion="c", passed=None,
                                 reason="the reviewer gave no verdict")]
    assert findings_of(verdicts) == (
        "blind review, criterion 2 (b): no test",
        "blind review, criterion 3 (c): the reviewer gave no verdict")
    assert verdicts[2].as_dict() == {"criterion": "c", "verdict": "none",
                                     "reason": "the reviewer gave no verdict"}


def test_a_reviewer_is_a_profile_or_an_endpoint_with_its_key() -> None:
    assert Reviewer(profile="claude:side").name == "claude:side"
    for bad in ({}, {"profile": "p", "endpoint": "http://127.0.0.1:9"},
                {"endpoint": "http://127.0.0.1:9"}):
        with pytest.raises(SettingsError):
            Reviewer(**bad)  # type: ignore[arg-type]
    assert READ_ONLY_TOOLS == ("Read", "Grep", "Glob")
    assert not any(t in READ_ONLY_TOOLS for t in ("Write", "Edit", "Bash"))


def test_the_report_keeps_a_blind_review_apart_from_commands() -> None:
    def checked(**kw: object) -> ev.Checked:
        return ev.Checked(ts=3.0, verdict="checked", head="abc", **kw)  # type: ignore[arg-type]

    base = [ev.Registered(ts=1.0, worktree="/w", profile="claude:work"),
            ev.HookEvent(ts=2.0, src="claude", hook="Stop",
                         data={"last_assistant_message": "FLEET_WORKER_DONE: ok"})]
    by_commands = report_line(fold("w1", [*base, checked()], 10.0))
    assert by_commands.why == "checked, not retired yet" and by_commands.reviewer is None
    blind = fold("w1", [*base, checked(reviewer="claude:side", criteria=(
        {"criterion": "a", "verdict": "pass", "reason": "ok"},))], 10.0)
    line = report_line(blind)
    assert line.why == "checked by commands and a blind reviewer on claude:side, not retired yet"
    assert line.reviewer == "claude:side"
    failed = ev.Checked(ts=3.0, verdict="failed", reviewer="claude:side",
                        findings=("blind review, criterion 1 (a): missing",))
    assert "blind review, criterion 1 (a): missing" in report_line(
        fold("w1", [*base, failed], 10.0)).why
    assert ev.decode_line(ev.encode_line(failed)) == failed


def test_blind_options_are_checked_before_anything_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    home = os.environ["FLEET_HOME"]
    code, _, err = run(capsys, "check", "w1", "--blind")
    assert code != 0 and "--blind needs --criteria FILE" in err and err.count("\n") == 1
    code, _, err = run(capsys, "check", "w1", "--criteria", "c.md")
    assert code != 0 and "go with --blind" in err
    assert not (Path(home) / "workers" / "w1").exists()
