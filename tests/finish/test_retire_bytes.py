"""Names that are not UTF-8 (a file called b"\\xff.txt", a check command that prints raw
bytes) are hostile input like any other: retire and check answer with one clear line, never a
traceback, and the journal stays valid JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._check import check_worker
from fleet._cli import main
from tests.conftest import Repo
from tests.finish._helpers import exclude, finished_worker, retire


def raw_name(wt: Path, suffix: bytes) -> bytes:
    return os.fsencode(wt) + b"/caf\xe9-\xff" + suffix


def test_an_untracked_file_whose_name_is_not_utf8_refuses_by_name(
    repo: Repo, home: Path
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        with open(raw_name(wt, b".txt"), "wb") as fh:
            fh.write(b"keep me\n")
        outcome = retire(fleet, "w")
        state = fleet.state("w")
    assert not outcome.retired
    assert "untracked file caf\\xe9-\\xff.txt" in (outcome.reason or "")
    assert state.refused == outcome.reason
    assert os.path.exists(raw_name(wt, b".txt"))


def test_an_ignored_file_whose_name_is_not_utf8_may_go(repo: Repo, home: Path) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        exclude(wt, "*.bin")
        with open(raw_name(wt, b".bin"), "wb") as fh:
            fh.write(b"build output\n")
        outcome = retire(fleet, "w")
    assert outcome.retired, outcome.reason
    assert outcome.ignored is not None and outcome.ignored.files == 1


def test_a_check_command_that_prints_raw_bytes_is_reported(
    repo: Repo, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Fleet() as fleet:
        finished_worker(fleet, repo, "w")
        result = check_worker(fleet, "w", commands=["printf 'bad \\377 byte\\n'; exit 3"])
    assert result.verdict == "failed"
    assert any("bad \\xff byte" in f for f in result.findings), result.findings
    assert main(["check", "w", "--cmd", "printf '\\377\\n'; exit 1", "--json"]) == 4
    assert json.loads(capsys.readouterr().out)["verdict"] == "failed"


def test_ask_mode_and_json_show_a_raw_ignored_name(
    repo: Repo, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Fleet() as fleet:
        wt = finished_worker(fleet, repo, "w")
        exclude(wt, "*.bin")
        with open(raw_name(wt, b".bin"), "wb") as fh:
            fh.write(b"build output\n")
    assert main(["retire", "w"]) == 4
    assert "caf\\xe9-\\xff.bin" in capsys.readouterr().out
    assert main(["retire", "w", "--yes", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["outcomes"][0]["ignored"]["largest"][0]["path"] == "caf\\xe9-\\xff.bin"
