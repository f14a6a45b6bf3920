from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fleet._cli import main
from fleet._demo import run_demo

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_runs_the_whole_loop_and_reports_it() -> None:
    result = run_demo(fast=True, narrate=False)
    assert result.problems == ()
    assert result.ok
    assert not Path(result.root).exists()  # cleaned up
    by_worker = {line.worker: line for line in result.report}
    assert sorted(by_worker) == ["cli", "docs", "parser"]
    for line in result.report:
        assert (line.verdict, line.outcome) == ("checked", "retired"), line
        assert line.ref is not None and line.ref.startswith(f"refs/fleet/{line.worker}/")
        assert line.branch == f"fleet/{line.worker}"
        assert line.profile is not None and line.profile != "claude:main"  # never the coordinator
    assert by_worker["docs"].profile == "claude:glm"  # wide mechanical work to the API profile
    assert by_worker["cli"].follow_ups == 1
    assert by_worker["docs"].follow_ups == by_worker["parser"].follow_ups == 0
    text = "\n".join(result.narration)
    assert "parser: asks permission to use Bash" in text
    assert "cli: claims done" in text
    assert "fleet check: FAILED: no upstream" in text
    assert "fleet retire: refused, worktree kept" in text
    assert "3 workers: 3 checked, 0 failed, 0 only claimed; 3 retired, 0 kept" in text


def test_demo_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--fast", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True
    assert [line["outcome"] for line in data["report"]] == ["retired"] * 3


def test_the_demo_runs_from_a_built_wheel(tmp_path: Path) -> None:
    """The wheel carries the hook program as fleet/_hook; the demo's workers run it from there."""
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(dist), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )
    (wheel,) = dist.glob("fleet_agents-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        assert "fleet/_hook/fleet_hook.py" in zf.namelist()
        zf.extractall(site)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import fleet;"
        "assert fleet.__file__.startswith(sys.argv[1]), fleet.__file__;"
        "from fleet._cli import main; sys.exit(main(['demo', '--fast']))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(site)], capture_output=True, text=True, timeout=120,
        env=env, cwd=tmp_path, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert str(site / "fleet" / "_hook" / "fleet_hook.py") in done.stdout
    assert "3 retired, 0 kept" in done.stdout


def test_the_demo_runs_the_hook_command_fleet_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleet._hooks import hook_command

    assert main(["--home", str(tmp_path), "hooks", "command", "--tool", "claude"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == hook_command("claude", home=tmp_path)
