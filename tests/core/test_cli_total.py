"""A hook line of a shape no release sends (an object where a string belongs) is journaled as
it came; every command that folds that journal still works, and ``fleet doctor`` counts it."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from fleet._cli import main
from fleet._home import journal_path, resolve_home

NOTIFICATION = {
    "v": 1, "ts": 1_700_000_000.0, "src": "claude", "type": "Notification",
    "session_id": "s1", "notification_type": {"a": 1}, "message": "Claude needs your attention",
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_status_survives_an_object_notification_type_and_doctor_reports_it(
    capsys: pytest.CaptureFixture[str], worktree: Path
) -> None:
    assert run(capsys, "register", "w1", "--worktree", str(worktree), "--json")[0] == 0
    with journal_path(resolve_home(None), "w1").open("ab") as f:
        f.write(orjson.dumps(NOTIFICATION) + b"\n")
    code, out, err = run(capsys, "status", "--json")
    assert (code, err) == (0, "")
    (row,) = json.loads(out)
    assert (row["worker"], row["state"], row["malformed"]) == ("w1", "starting", 1)
    code, out, err = run(capsys, "status")
    assert code == 0 and "w1" in out and "internal error" not in err
    code, out, _ = run(capsys, "wait", "w1", "--timeout", "0", "--json")
    assert "internal error" not in out
    for argv in (["log", "w1"], ["log", "w1", "--json"], ["report"], ["report", "--json"]):
        code, out, err = run(capsys, *argv)
        assert code == 0 and "internal error" not in err, (argv, err)
    code, out, _ = run(capsys, "doctor", "--json")
    assert json.loads(out)["malformed"] == {"w1": 1}
    code, out, _ = run(capsys, "doctor")
    assert "worker w1: 1 journal lines with a field of a type fleet cannot read" in out
