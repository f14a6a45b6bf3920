from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._check import check_worker
from fleet._cli import main
from fleet._report import build_report, format_report
from fleet._retire import Retirer
from tests.conftest import Repo
from tests.finish._helpers import add_worktree, commit, finished_worker, register


def test_report_keeps_checked_apart_from_claimed(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        finished_worker(fleet, repo, "r-retired")
        Retirer(fleet).retire_worker("r-retired")
        finished_worker(fleet, repo, "r-claimed")
        finished_worker(fleet, repo, "r-checked")
        check_worker(fleet, "r-checked")
        bad = add_worktree(repo, "r-failed")
        commit(bad)
        register(fleet, "r-failed", bad, "fleet/r-failed")
        check_worker(fleet, "r-failed")
        working = add_worktree(repo, "r-working")
        register(fleet, "r-working", working, "fleet/r-working", done=False)
        lines = {line.worker: line for line in build_report(fleet)}
        text = format_report(list(lines.values()))
    got = {w: (line.verdict, line.outcome) for w, line in lines.items()}
    assert got == {
        "r-retired": ("checked", "retired"),
        "r-claimed": ("claimed", "kept"),
        "r-checked": ("checked", "kept"),
        "r-failed": ("failed", "kept"),
        "r-working": ("none", "kept"),
    }
    assert lines["r-claimed"].why == "claimed done, not checked yet"
    assert lines["r-failed"].why.startswith("check failed: no upstream")
    assert lines["r-working"].why == "not done: starting (registered)"
    assert lines["r-retired"].ref is not None
    assert lines["r-retired"].profile == "claude:work" and lines["r-retired"].model == "sonnet"
    assert "5 workers: 2 checked, 1 failed, 1 only claimed; 1 retired, 4 kept" in text


def test_report_shows_why_a_retire_was_refused(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        path = finished_worker(fleet, repo, "r1")
        (path / "notes.txt").write_text("x\n")
        Retirer(fleet).retire_worker("r1")
        (line,) = build_report(fleet)
    assert line.outcome == "kept"
    assert line.why == "retire refused: check failed: untracked file notes.txt"


def test_report_cli(repo: Repo, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Fleet() as fleet:
        finished_worker(fleet, repo, "c1")
    assert main(["report", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["worker"], row["verdict"], row["outcome"]) == ("c1", "claimed", "kept")
    assert main(["report"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["WORKER", "PROFILE"]
    assert "c1" in out
