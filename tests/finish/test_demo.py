from __future__ import annotations

import io
import json
import os
import re
import shutil
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
        "from fleet._cli import main; sys.exit(main(['demo', '--fast', '--json']))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(site)], capture_output=True, text=True, timeout=120,
        env=env, cwd=tmp_path, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["hook_program"] == str(site / "fleet" / "_hook" / "fleet_hook.py")
    assert "/bin/fleet-hook --tool claude" in data["hook"]  # through the launcher
    assert [line["outcome"] for line in data["report"]] == ["retired"] * 3


def test_the_demo_runs_the_hook_command_fleet_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleet._hook_command import hook_command

    assert main(["--home", str(tmp_path), "hooks", "command", "--tool", "claude"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == hook_command("claude", home=tmp_path)


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _demo_cli(env: dict[str, str], *args: str, tty: bool = False) -> str:
    """``fleet demo --fast`` in a child, its stdout a pipe or (``tty``) a terminal."""
    argv = [sys.executable, "-m", "fleet", "demo", "--fast", *args]
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    full.update(env)
    if not tty:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=full,
                              check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout
    import pty

    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(argv, stdout=follower, stderr=subprocess.PIPE, env=full)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=120) == 0
        assert proc.stderr is not None
        proc.stderr.close()
    finally:
        os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_the_demo_fits_100_columns_shows_no_internals_and_says_what_next() -> None:
    out = _demo_cli({})
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert not ANSI.search(out)  # piped: no colour
    assert "fleet_hook" not in out and "trap '' TERM" not in out and " -I -S " not in out
    assert "removed at the end (--keep keeps it)" in lines[1]
    (removed,) = [ln for ln in lines if ln.startswith("Removed /")]
    assert "--keep keeps them" in out
    root = removed.split()[1].rstrip(":")
    assert not Path(root).exists()
    assert lines[-2].startswith("Next: ") and "fleet hooks install" in out
    assert "README's quick start" in out


def test_the_demo_is_in_colour_on_a_terminal_unless_no_color() -> None:
    out = _demo_cli({"TERM": "xterm-256color"}, tty=True)
    assert ANSI.search(out)
    assert "\x1b[32mretired\x1b[0m" in out and "\x1b[31mFAILED\x1b[0m" in out
    plain = ANSI.sub("", out)
    assert max(len(line) for line in plain.splitlines()) <= 100
    assert "3 workers: 3 checked, 0 failed, 0 only claimed; 3 retired, 0 kept" in plain
    out = _demo_cli({"TERM": "xterm-256color", "NO_COLOR": "1"}, tty=True)
    assert not ANSI.search(out) and "3 retired, 0 kept" in out


def test_keep_keeps_everything_and_says_where() -> None:
    result = run_demo(fast=True, keep=True, out=io.StringIO())
    try:
        root = Path(result.root)
        assert result.ok and root.is_dir() and (root / "fleet-home").is_dir()
        text = "\n".join(result.narration)
        assert f"Working in {root} (kept at the end: --keep)." in text
        assert f"Kept {root}: the repository, its origin, the worktrees and the fleet" in text
        assert "Removed" not in text
    finally:
        shutil.rmtree(result.root, ignore_errors=True)


def test_lines_are_wrapped_under_their_own_indent() -> None:
    from fleet._demo import fit

    line = "[  1.0s] " + "word " * 40
    pieces = fit(line)
    assert len(pieces) > 1 and all(len(p) <= 100 for p in pieces)
    assert all(p.startswith(" " * 11) for p in pieces[1:])
    assert fit("short") == ["short"]
