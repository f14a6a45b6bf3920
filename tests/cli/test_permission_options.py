"""`fleet start` and `fleet run` check the permission policy before anything is created."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from fleet._cli import build_parser
from tests.cli.test_cli_surface import run
from tests.conftest import Repo


def _created(home: Path) -> list[Path]:
    return sorted(p for p in home.rglob("*")) if home.exists() else []


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "plan"])
def test_start_refuses_a_prompting_mode_before_creating_anything(
    capsys: pytest.CaptureFixture[str], repo: Repo, tmp_path: Path, mode: str
) -> None:
    (tmp_path / "brief.md").write_text("do it")
    home = Path(os.environ["FLEET_HOME"])
    before = _created(home)

    code, out, err = run(capsys, "start", "w1", "--task", str(tmp_path / "brief.md"),
                         "--repo", str(repo.path), "--permission-mode", mode)

    assert code == 4, err
    assert err.count("\n") == 1
    assert f"permission mode {mode}" in err and "dontAsk with --allowed-tools" in err
    assert out == ""
    assert _created(home) == before
    assert not (repo.path.parent / f"{repo.path.name}.fleet").exists()


def test_start_refuses_a_mode_from_the_profile_settings(
    capsys: pytest.CaptureFixture[str], repo: Repo, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = tmp_path / "fleet.json"
    settings.write_text(json.dumps(
        {"permissions": {"profiles": {"claude:work": {"mode": "acceptEdits"}}},
         "profiles": {"claude:work": {"configDir": str(tmp_path)}}}))
    monkeypatch.setenv("FLEET_SETTINGS", str(settings))
    code, _, err = run(capsys, "start", "w1", "--task", str(tmp_path / "b.md"),
                       "--repo", str(repo.path), "--profile", "claude:work")
    assert code == 4 and "permission mode acceptEdits" in err, err


def test_insist_passes_the_check_and_the_adapter_answers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # No brief file: the start fails in the adapter, which shows the check let it through.
    code, _, err = run(capsys, "start", "w1", "--task", str(tmp_path / "missing.md"),
                       "--repo", str(tmp_path), "--permission-mode", "default", "--insist")
    assert code != 0
    assert "permission mode" not in err and err.count("\n") == 1


def test_bad_rules_and_sandboxes_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "start", "w1", "--task", "b.md", "--repo", str(tmp_path),
                       "--tool", "codex", "--permission-mode", "dontAsk")
    assert code == 1 and "unknown Codex sandbox 'dontAsk'" in err and err.count("\n") == 1
    code, _, err = run(capsys, "start", "w1", "--task", "b.md", "--repo", str(tmp_path),
                       "--allowed-tools", ",,", "--allowed-tools", "Read,",
                       "--permission-mode", "yolo")
    assert code == 1 and "unknown permission mode 'yolo'" in err


def _tasks(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "b.md").write_text("brief")
    path = tmp_path / "TASKS.toml"
    path.write_text('[[task]]\nname = "alpha"\nbrief = "b.md"\ntool = "claude"\n'
                    f"{extra}\n"
                    '[[task]]\nname = "beta"\nbrief = "b.md"\n')
    return path


def test_run_refuses_a_task_in_a_prompting_mode_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tasks = _tasks(tmp_path, 'permissions = { mode = "default" }')
    home = Path(os.environ["FLEET_HOME"])
    before = _created(home)
    code, _, err = run(capsys, "run", str(tasks))
    assert code == 4, err
    assert "task 'alpha' (claude): permission mode default" in err
    assert _created(home) == before


def test_run_checks_a_task_of_unknown_tool_as_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only beta, which may go to either tool: acceptEdits is refused for Claude, and the same
    # option is not read as a Codex sandbox (that would be an unknown-sandbox error).
    tasks = tmp_path / "TASKS.toml"
    (tmp_path / "b.md").write_text("brief")
    tasks.write_text('[[task]]\nname = "beta"\nbrief = "b.md"\n')
    code, _, err = run(capsys, "run", str(tasks), "--permission-mode", "acceptEdits")
    assert code == 4 and "task 'beta' (claude): permission mode acceptEdits" in err, err
    settings = tmp_path / "fleet.json"
    settings.write_text(json.dumps({"permissions": {"codex": "untrusted"}}))
    monkeypatch.setenv("FLEET_SETTINGS", str(settings))
    code, _, err = run(capsys, "run", str(tasks))
    assert code == 1 and "task 'beta' (claude): Codex approval policy 'untrusted'" in err, err
    assert err.count("\n") == 1


def test_help_teaches_the_modes_that_work() -> None:
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("start", "run"):
        text = subs.choices[command].format_help()
        for option in ("--allowed-tools", "--disallowed-tools", "--add-dir", "--insist"):
            assert option in text
        assert "dontAsk" in text and "--insist" in text


def _auto_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str = "auto") -> None:
    """This process runs inside a Claude Code session (its Bash tool) in ``mode``."""
    monkeypatch.setenv("IS_SANDBOX", "1")  # no root warning, whoever runs the suite
    project = tmp_path / "coordinator" / "projects" / "-repo"
    project.mkdir(parents=True)
    (project / "s-1.jsonl").write_text(json.dumps({"type": "user", "permissionMode": mode}))
    monkeypatch.setenv("CLAUDECODE", "1")
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "s-1")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "coordinator"))


def _start_policy(*options: str) -> tuple[object, list[str]]:
    from fleet._cli.run import start_policy

    args = build_parser().parse_args(["start", "w1", "--task", "b.md", *options])
    return start_policy(args)


def test_an_auto_mode_coordinator_starts_its_workers_in_dont_ask_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleet._permissions import PermissionPolicy

    monkeypatch.setenv("IS_SANDBOX", "1")
    assert _start_policy() == (PermissionPolicy(mode="bypassPermissions"), [])
    _auto_session(tmp_path, monkeypatch)
    policy, notes = _start_policy("--allowed-tools", "Write,Bash(git:*)")
    assert policy == PermissionPolicy(mode="dontAsk", allowed_tools=["Write", "Bash(git:*)"])
    assert len(notes) == 1 and "auto mode" in notes[0] and "Write, Bash(git:*)" in notes[0]
    # No allowlist: still dontAsk, and both notes say what to pass.
    policy, notes = _start_policy()
    assert policy.mode == "dontAsk"  # type: ignore[attr-defined]
    assert any("--allowed-tools" in n for n in notes) and len(notes) == 2
    # A mode someone chose is kept, whoever chose it.
    assert _start_policy("--permission-mode", "bypassPermissions")[0] == PermissionPolicy(
        mode="bypassPermissions")
    settings = tmp_path / "fleet.json"
    settings.write_text(json.dumps({"permissions": {"claude": "bypassPermissions"}}))
    monkeypatch.setenv("FLEET_SETTINGS", str(settings))
    assert _start_policy() == (PermissionPolicy(mode="bypassPermissions"), [])


def test_codex_workers_and_other_coordinator_modes_keep_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleet._permissions import PermissionPolicy

    _auto_session(tmp_path, monkeypatch)
    assert _start_policy("--tool", "codex") == (PermissionPolicy(), [])
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "other")
    assert _start_policy() == (PermissionPolicy(mode="bypassPermissions"), [])


def test_run_gives_each_unchosen_task_the_auto_default(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleet._cli.run import run_policies

    tasks = _tasks(tmp_path, 'permissions = { mode = "bypassPermissions" }')
    _auto_session(tmp_path, monkeypatch)
    args = build_parser().parse_args(["run", str(tasks), "--allowed-tools", "Read"])
    policies, warnings = run_policies(args)
    assert policies["alpha"].mode == "bypassPermissions"
    assert policies["beta"].mode == "dontAsk"
    assert [w for w in warnings if "auto mode" in w] == [
        "task 'beta' (claude): the coordinator runs in auto mode, which may not start a "
        "bypassPermissions worker: starting it in dontAsk with the allowlist Read"]
