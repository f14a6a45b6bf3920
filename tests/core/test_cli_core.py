from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet import Fleet, HookEvent
from fleet._cli import main
from fleet._fold_cache import load_states
from fleet.testing import MockClock


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_register_status_log_seen(capsys: pytest.CaptureFixture[str], worktree: Path) -> None:
    code, out, _ = run(
        capsys,
        "register",
        "w1",
        "--worktree",
        str(worktree),
        "--profile",
        "claude:work",
        "--branch",
        "fleet/w1",
        "--json",
    )
    assert code == 0 and json.loads(out)["state"] == "starting"
    with Fleet() as fleet:
        fleet.record("w1", HookEvent(ts=fleet.clock.now(), src="claude", hook="Stop"))
    code, out, _ = run(capsys, "status", "--json")
    (row,) = json.loads(out)
    assert (row["state"], row["mark"], row["needs_attention"]) == ("stopped", "w1@1", True)
    assert row["profile"] == "claude:work" and row["branch"] == "fleet/w1"
    code, out, _ = run(capsys, "status")
    assert "! w1" in out and "stopped" in out and "1 needs attention" in out
    assert run(capsys, "seen", "w1@1")[0] == 0
    code, out, _ = run(capsys, "status", "--json")
    assert json.loads(out)[0]["needs_attention"] is False
    code, out, _ = run(capsys, "log", "w1", "--json")
    assert [e["type"] for e in json.loads(out)] == ["registered", "Stop", "seen"]
    code, out, _ = run(capsys, "log", "w1")
    assert "Stop" in out and "seen" in out


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["register", "Bad/Id", "--worktree", "/tmp"], 1, "invalid worker id"),
        (["status", "ghost"], 1, "no worker 'ghost'"),
        (["seen", "w1@x"], 1, "invalid seen mark"),
        (["seen", "ghost@1"], 1, "no worker 'ghost'"),
        (["log", "ghost"], 1, "no worker"),
    ],
)
def test_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int, needle: str
) -> None:
    got, out, err = run(capsys, *argv)
    assert got == code and needle in err and err.count("\n") == 1 and out == ""


def test_usage_error_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["status", "--quiet-after"])
    assert info.value.code == 2


def test_warm_cache_equals_full_replay(home: Path, tmp_path: Path) -> None:
    with Fleet(clock=MockClock(now=50.0)) as fleet:
        for n in range(5):
            fleet.register(f"w{n}", worktree=tmp_path)
            fleet.record(f"w{n}", HookEvent(ts=100.0 + n, src="claude", hook="UserPromptSubmit"))
        cold = load_states(home, None, 1000.0, use_cache=True)
        for n in range(0, 5, 2):
            fleet.record(f"w{n}", HookEvent(ts=200.0, src="claude", hook="Stop"))
        warm = load_states(home, None, 1000.0, use_cache=True)
        replay = load_states(home, None, 1000.0, use_cache=False)
    assert warm == replay
    assert cold != warm
    assert [s.state for s in warm] == ["stopped", "quiet", "stopped", "quiet", "stopped"]


def test_every_command_is_mapped_to_the_module_that_defines_it() -> None:
    import argparse
    import importlib

    from fleet._cli import COMMAND_MODULES, COMMANDS

    defined: dict[str, str] = {}
    for name in COMMAND_MODULES:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(name).add_parser(sub)
        for command in sub.choices:
            defined[command] = name
    assert defined == COMMANDS


def test_global_home_option_before_the_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "--home", str(tmp_path / "h"), "status", "--json")
    assert code == 0 and json.loads(out) == []
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("fleet ")
