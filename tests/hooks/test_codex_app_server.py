"""The client of ``codex app-server``: the JSON-RPC exchange, each way it can fail, and running it
as its own isolated process as fleet does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fleet import _codex_app_server
from fleet._codex_app_server import AppServerError, hooks_list, main

#: Answers as ``MODE`` says: ``ok`` (notifications and noise first), ``error``, ``silent`` (exits
#: at once), ``late`` (answers initialize, never hooks/list).
FAKE = r'''#!PYTHON
import json, os, sys
mode = os.environ.get("MODE", "ok")
if sys.argv[1:] != ["app-server"] or mode == "silent":
    sys.exit(0)
for line in sys.stdin:
    message = json.loads(line)
    if message.get("id") == 1:
        print("not json", flush=True)
        print(json.dumps({"method": "note", "params": {}}), flush=True)
        print(json.dumps({"id": 1, "result": {}}), flush=True)
    elif message.get("id") == 2 and mode == "ok":
        hooks = [{"key": "k", "cwd": message["params"]["cwds"][0]}]
        print(json.dumps({"id": 2, "result": {"data": [{"hooks": hooks}, {}]}}), flush=True)
    elif message.get("id") == 2 and mode == "error":
        print(json.dumps({"id": 2, "error": {"code": -1, "message": "no"}}), flush=True)
'''


@pytest.fixture
def fake(tmp_path: Path) -> str:
    path = tmp_path / "codex"
    path.write_text(FAKE.replace("PYTHON", sys.executable, 1))
    path.chmod(0o755)
    return str(path)


def test_lists_the_hooks_codex_reports(fake: str, tmp_path: Path) -> None:
    assert hooks_list(fake, str(tmp_path), 10) == [{"key": "k", "cwd": str(tmp_path)}]


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("error", 'codex app-server: {"code": -1, "message": "no"}'),
        ("silent", "did not answer initialize"),
        ("late", "did not answer hooks/list"),
    ],
)
def test_each_failure_is_one_reason(
    fake: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, reason: str
) -> None:
    monkeypatch.setenv("MODE", mode)
    with pytest.raises(AppServerError) as exc:
        hooks_list(fake, str(tmp_path), 1.0)
    assert reason in str(exc.value)


def test_a_missing_binary_is_a_reason(tmp_path: Path) -> None:
    with pytest.raises(AppServerError, match="cannot run"):
        hooks_list(str(tmp_path / "none"), str(tmp_path), 1.0)


def test_main_prints_json_or_exits_with_the_reason(
    fake: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([fake, str(tmp_path), "10"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"key": "k", "cwd": str(tmp_path)}]
    assert main([str(tmp_path / "none"), str(tmp_path), "1"]) == 1
    assert "cannot run" in capsys.readouterr().err
    assert main([]) == 2


def test_runs_as_an_isolated_script(fake: str, tmp_path: Path) -> None:
    """fleet runs the file itself under -I, with no fleet on the path."""
    script = Path(_codex_app_server.__file__)
    done = subprocess.run(
        [sys.executable, "-I", str(script), fake, str(tmp_path), "10"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"key": "k", "cwd": str(tmp_path)}]
