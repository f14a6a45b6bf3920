"""The commands: fleet hooks install|uninstall|status|command, fleet trust, fleet doctor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet._cli import main
from fleet._hook_command import hook_command
from fleet._hook_install import CLAUDE_EVENTS, CODEX_EVENTS
from fleet._journal import index_worktree
from tests.hooks.conftest import Hook, claude_payloads


@pytest.fixture(autouse=True)
def _no_codex_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Codex on the developer's PATH must not be asked (test_codex_check.py asks a fake)."""
    monkeypatch.setenv("FLEET_CODEX", "none")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code, out, _ = run(capsys, *argv, "--json")
    return code, json.loads(out)


def test_command_prints_what_gets_installed(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "hooks", "command", "--tool", "claude")
    assert code == 0 and out.strip() == hook_command("claude", home=home)
    code, data = run_json(capsys, "hooks", "command", "--tool", "codex")
    assert data["command"] == hook_command("codex", home=home)
    assert data["argv"][1:3] == ["-I", "-S"]
    assert data["launcher"] == str(home / "bin" / "fleet-hook")
    assert f"/bin/sh {data['launcher']} --tool codex" in data["command"]
    cfg = tmp_path / "cfg"
    run(capsys, "hooks", "install", "--config-dir", str(cfg), "--create")
    settings = json.loads((cfg / "settings.json").read_text())
    assert settings["hooks"]["Stop"][0]["hooks"][0]["command"] == out.strip()


def test_install_status_uninstall(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cfg, codex = tmp_path / "cfg", tmp_path / "codex"
    targets = ["--config-dir", str(cfg), "--codex-home", str(codex)]
    code, changes = run_json(capsys, "hooks", "install", *targets, "--create")
    assert code == 0 and [c["changed"] for c in changes] == [True, True]
    assert [len(c["events"]) for c in changes] == [len(CLAUDE_EVENTS), len(CODEX_EVENTS)]
    code, changes = run_json(capsys, "hooks", "install", *targets)
    assert [c["changed"] for c in changes] == [False, False]
    code, statuses = run_json(capsys, "hooks", "status", *targets)
    assert code == 0 and all(s["will_run"] for s in statuses)
    code, out, _ = run(capsys, "hooks", "status", *targets)
    assert code == 0 and "yes" in out
    code, changes = run_json(capsys, "hooks", "uninstall", *targets)
    assert [c["removed"] for c in changes] == [len(CLAUDE_EVENTS), len(CODEX_EVENTS)]
    code, statuses = run_json(capsys, "hooks", "status", *targets)
    assert code == 1 and not any(s["will_run"] for s in statuses)


def test_malformed_settings_one_line_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text('{"hooks": ')
    code, out, err = run(capsys, "hooks", "install", "--config-dir", str(cfg))
    assert code == 1 and out == ""
    assert err.startswith("fleet: ") and err.count("\n") == 1 and "not valid JSON" in err
    assert (cfg / "settings.json").read_text() == '{"hooks": '


def test_a_target_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "hooks", "install")
    assert code == 1 and "--config-dir" in err


def test_profiles_from_clausona(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared-settings.json"
    shared.write_text("{}\n")
    dirs = {name: tmp_path / name for name in ("work", "home-acct", "cx")}
    for name in ("work", "home-acct"):
        dirs[name].mkdir()
        (dirs[name] / "settings.json").symlink_to(shared)
    listing = [
        {"name": "claude:work", "tool": "claude", "configDir": str(dirs["work"])},
        {"name": "claude:home-acct", "tool": "claude", "configDir": str(dirs["home-acct"])},
        {"name": "codex:cx", "tool": "codex", "configDir": str(dirs["cx"])},
    ]
    snapshot = tmp_path / "profiles.json"
    snapshot.write_text(json.dumps(listing))
    monkeypatch.setenv("FLEET_PROFILES", str(snapshot))

    code, changes = run_json(capsys, "hooks", "install", "--profile", "cx")
    assert code == 0 and [c["target"] for c in changes] == ["codex:cx"]
    assert (dirs["cx"] / "hooks.json").is_file()
    code, changes = run_json(capsys, "hooks", "install", "--all-profiles")
    assert [c["target"] for c in changes] == ["claude:work", "claude:home-acct", "codex:cx"]
    # Both Claude profiles share one settings.json: written once, through the links.
    assert [c["changed"] for c in changes] == [True, False, False]
    assert (dirs["home-acct"] / "settings.json").is_symlink()
    code, statuses = run_json(capsys, "hooks", "status", "--all-profiles")
    assert code == 0 and all(s["will_run"] for s in statuses)
    code, _, err = run(capsys, "hooks", "status", "--profile", "nope")
    assert code == 1 and "no profile 'nope'" in err

    worktree = tmp_path / "wt"
    worktree.mkdir()
    code, data = run_json(capsys, "trust", "--profile", "cx", "--path", str(worktree))
    assert code == 0 and data["file"] == str(dirs["cx"] / "config.toml")
    code, data = run_json(capsys, "trust", "--profile", "claude:work", "--path", str(worktree))
    assert code == 0 and data["file"] == str(dirs["work"] / ".claude.json")
    code, _ = run_json(
        capsys, "trust", "--profile", "home-acct", "--path", str(worktree), "--check"
    )
    assert code == 4

    code, changes = run_json(capsys, "hooks", "uninstall", "--all-profiles")
    assert [c["changed"] for c in changes] == [True, False, True]
    assert json.loads(shared.read_text()) == {}


def test_trust_and_check(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cfg, wt = tmp_path / "cfg", tmp_path / "wt"
    wt.mkdir()
    code, data = run_json(capsys, "trust", "--config-dir", str(cfg), "--path", str(wt), "--check")
    assert code == 4 and data["trusted"] is False
    code, out, err = run(capsys, "trust", "--config-dir", str(cfg), "--path", str(wt))
    assert (code, out) == (1, "") and "does not exist (a typo?)" in err and not cfg.exists()
    code, data = run_json(capsys, "trust", "--config-dir", str(cfg), "--path", str(wt),
                          "--create")
    assert code == 0 and data["trusted"] is True
    code, out, _ = run(capsys, "trust", "--config-dir", str(cfg), "--path", str(wt), "--check")
    assert code == 0 and "trusted" in out
    code, _, err = run(
        capsys, "trust", "--codex-home", str(tmp_path / "cx"), "--config-dir", str(cfg),
        "--path", str(wt),
    )
    assert code == 1 and "exactly one" in err


class TestDoctor:
    def test_healthy(self, capsys: pytest.CaptureFixture[str], home: Path, set_up: Path) -> None:
        code, report = run_json(capsys, "doctor")
        assert code == 0 and report["ok"] and report["problems"] == []
        assert report["hook_program"] and Path(report["hook_program"]).is_file()
        assert [(a["tool"], a["version"]) for a in report["agents"]] == [
            ("claude", "2.1.332"), ("codex", None)]
        assert [s["target"] for s in report["hooks"]] == [f"claude:{set_up}"]

    def test_nothing_set_up_is_not_ok(
        self, capsys: pytest.CaptureFixture[str], home: Path
    ) -> None:
        code, out, _ = run(capsys, "doctor")
        assert code == 1 and "ok:" not in out
        assert "problem: no agent CLI found" in out and "  do: install one: npm install" in out
        assert "problem: nothing to check: no Claude Code config dir" in out

    def test_reports_hook_failures(
        self, capsys: pytest.CaptureFixture[str], hook: Hook, set_up: Path
    ) -> None:
        hook.run(b"not json", project=hook.worktree)
        hook.run(claude_payloads()["Stop"], env={"FLEET_WORKER": "Bad!"})
        code, report = run_json(capsys, "doctor")
        assert code == 1 and report["hook_errors"] == 2
        assert "not a valid worker id" in report["last_hook_errors"][-1]
        code, out, _ = run(capsys, "doctor", "--clear-errors")
        assert code == 1 and "2 failures" in out and "hook-errors.log.old" in out
        code, report = run_json(capsys, "doctor")
        assert code == 0 and report["hook_errors"] == 0
        assert len((hook.home / "hook-errors.log.old").read_text().splitlines()) == 2

    def test_counts_unreadable_lines_per_worker(
        self, capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
    ) -> None:
        index_worktree(home, "w1", str(tmp_path))
        journal = home / "workers" / "w1" / "journal.jsonl"
        journal.parent.mkdir(parents=True)
        journal.write_bytes(
            b'{"v":1,"ts":1.0,"src":"claude","type":"Stop"}\nnot json\n{"v":1}\n'
        )
        code, report = run_json(capsys, "doctor")
        assert code == 1 and report["unreadable"] == {"w1": 2}

    def test_checks_named_targets(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        code, report = run_json(capsys, "doctor", "--config-dir", str(tmp_path / "cfg"))
        assert code == 1 and any("not installed" in p for p in report["problems"])


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["hooks", "install", "--help"])
    out = capsys.readouterr().out
    assert "--codex-home" in out and "--all-profiles" in out and "fleet-backup" in out


def test_status_without_a_target_checks_the_default_config_dirs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    code, out, err = run(capsys, "hooks", "status")
    assert (code, out) == (1, "")
    assert "no Claude Code config dir" in err and str(tmp_path / ".claude") in err
    assert "name a target with --config-dir DIR" in err and err.count("\n") == 1
    run(capsys, "hooks", "install", "--config-dir", str(tmp_path / ".claude"), "--create")
    code, statuses = run_json(capsys, "hooks", "status")
    assert code == 0 and [s["target"] for s in statuses] == [f"claude:{tmp_path}/.claude"]
    assert statuses[0]["will_run"]
    run(capsys, "hooks", "install", "--codex-home", str(tmp_path / ".codex"), "--create")
    code, out, _ = run(capsys, "hooks", "status")
    assert code == 0 and str(tmp_path / ".codex") in out and "NO" not in out
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(other))
    code, statuses = run_json(capsys, "hooks", "status")
    assert code == 1 and [s["target"] for s in statuses] == [
        f"claude:{other}", f"codex:{tmp_path}/.codex"
    ]
    assert [s["will_run"] for s in statuses] == [False, True]
