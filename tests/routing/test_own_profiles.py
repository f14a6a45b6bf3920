"""Profiles without clausona: fleet's own, kept in its settings (`fleet profiles add`), listed
with an unknown quota, routed, and launched by fleet-profile-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet import _profile_store
from fleet._cli import main
from fleet._core.routing import Task
from fleet._errors import SettingsError, ToolError
from fleet._plan import plan_tasks
from fleet._profiles import clausona_binary, find_profile, load_profiles

from .test_profiles import API


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with no clausona anywhere and no settings file."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("FLEET_SETTINGS", str(tmp_path / ".clausona" / "fleet.json"))
    monkeypatch.setenv("FLEET_CLAUSONA", str(tmp_path / "no-clausona"))
    monkeypatch.delenv("FLEET_PROFILES", raising=False)
    monkeypatch.delenv("CLAUDECODE", raising=False)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def settings(world: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((world / ".clausona" / "fleet.json").read_text())
    return data


def test_no_profile_anywhere_says_both_ways_to_add_one(
    world: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "profiles")
    assert (code, out) == (1, "")
    assert "fleet profiles add NAME --config-dir DIR" in err and "clausona add NAME" in err
    assert err.count("\n") == 1
    with pytest.raises(ToolError, match="no profiles: add one with `fleet profiles add"):
        load_profiles()


def test_add_list_remove(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (world / ".claude-work").mkdir()
    code, out, _ = run(capsys, "profiles", "add", "work", "--config-dir", "~/.claude-work")
    assert code == 0 and out.startswith(f"claude:work: {world}/.claude-work in ")
    assert "does not exist" not in out
    code, out, _ = run(capsys, "profiles", "add", "codex:side", "--config-dir",
                       str(world / ".codex-side"), "--model", "gpt-5-codex")
    assert code == 0 and "does not exist yet: log in there once (CODEX_HOME=" in out
    code, out, _ = run(capsys, "profiles", "add", "glm", "--config-dir", str(world / "g"),
                       "--endpoint", "https://api.example/anthropic", "--key-from",
                       "env:GLM_KEY", "--model", "glm-5", "--json")
    assert json.loads(out)["name"] == "claude:glm"
    assert settings(world)["profiles"] == {
        "claude:work": {"configDir": f"{world}/.claude-work"},
        "codex:side": {"configDir": f"{world}/.codex-side", "model": "gpt-5-codex"},
        "claude:glm": {"configDir": f"{world}/g", "model": "glm-5",
                       "endpoint": "https://api.example/anthropic", "keyFrom": "env:GLM_KEY"},
    }
    code, out, _ = run(capsys, "profiles", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and list(rows) == ["claude:work", "codex:side", "claude:glm"]
    assert rows["claude:work"]["source"] == "fleet" and rows["claude:work"]["worker"] is True
    assert rows["claude:work"]["quota"] is None and rows["claude:work"]["quotaKnown"] is False
    assert rows["claude:work"]["quotaSource"] == "unknown" and rows["claude:work"]["limit"] is None
    assert rows["claude:glm"]["quotaSource"] == "none"
    assert rows["claude:work"]["headroom"] is None
    assert rows["claude:glm"]["kind"] == "api" and rows["claude:glm"]["model"] == "glm-5"
    code, out, _ = run(capsys, "profiles")
    (work,) = [ln for ln in out.splitlines() if ln.startswith("  claude:work ")]
    assert work.split()[-3:] == ["unknown", "yes", "-"]
    assert ("  claude:work: quota unknown (no clausona reading, no limit seen): used as if it "
            "had room") in out
    code, out, _ = run(capsys, "profiles", "remove", "side")
    assert code == 0 and out.startswith("codex:side removed from ")
    code, _, err = run(capsys, "profiles", "remove", "side")
    assert code == 1 and "fleet has no profile 'side' (its own profiles: claude:work, " in err
    assert list(settings(world)["profiles"]) == ["claude:work", "claude:glm"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["x", "--config-dir", "/d", "--endpoint", "http://e"], 2,
         "--endpoint and --key-from go together"),
        (["codex:x", "--config-dir", "/d", "--endpoint", "http://e", "--key-from", "env:K"], 2,
         "--endpoint is for Claude Code profiles only"),
        (["bad name", "--config-dir", "/d"], 1, "profile name 'bad name'"),
        (["gpt:x", "--config-dir", "/d"], 1, "must be claude or codex"),
        (["codex:x", "--tool", "claude", "--config-dir", "/d"], 1, "is a codex profile"),
        (["x", "--config-dir", "/d", "--endpoint", "ftp://e", "--key-from", "env:K"], 1,
         "endpoint must be an http(s) URL"),
        (["x", "--config-dir", "/d", "--endpoint", "http://e", "--key-from", "nope"], 1,
         "not a key source"),
    ],
)
def test_add_refuses_what_cannot_run_and_writes_nothing(
    world: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    got, out, err = run(capsys, "profiles", "add", *argv)
    assert (got, out) == (code, "") and message in err and err.count("\n") == 1
    assert not (world / ".clausona" / "fleet.json").exists()


def test_settings_set_checks_profiles_too(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for key, value, message in [
        ("profiles", "[]", "profiles must be an object"),
        ("profiles.claude:w", '{"dir": "/x"}', "unknown key 'dir'"),
        ("profiles.claude:w", '{"model": "m"}', "has no configDir"),
        ("profiles.w", '{"configDir": "/x"}', "name it claude:w"),
        ("profiles.claude:w.configDir", "/x", "set a whole profile"),
    ]:
        code, _, err = run(capsys, "settings", "set", key, value)
        assert code == 2 and message in err, (key, err)
    code, _, _ = run(capsys, "settings", "set", "profiles.claude:w", '{"configDir": "/x"}')
    assert code == 0 and [p.name for p in load_profiles()] == ["claude:w"]
    (world / ".clausona" / "fleet.json").write_text('{"profiles": {"claude:w": 3}}')
    with pytest.raises(SettingsError, match=r"fleet\.json: profiles\.claude:w must be an object"):
        load_profiles()


def test_own_profiles_come_first_and_win_over_clausonas_of_the_same_name(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = world / "clausona-list.json"
    theirs = {**API, "name": "claude:work", "kind": "subscription", "configDir": "/theirs"}
    snapshot.write_text(json.dumps([theirs, API]))
    monkeypatch.setenv("FLEET_PROFILES", str(snapshot))
    _profile_store.add("work", config_dir="/mine")
    profiles = load_profiles()
    assert [(p.name, str(p.config_dir)) for p in profiles] == [
        ("claude:work", "/mine"), (API["name"], API["configDir"])
    ]
    assert _profile_store.quota_unknown(profiles[0]) and not _profile_store.quota_unknown(
        profiles[1])
    with pytest.raises(SettingsError) as err:
        find_profile("nope", profiles)
    assert "no profile 'nope' (there are: claude:work, " in str(err.value)
    assert "fleet profiles add NAME --config-dir DIR" in str(err.value)


def test_plan_says_quota_unknown_and_launches_through_fleet(world: Path) -> None:
    _profile_store.add("work", config_dir=str(world / "w"))
    result = plan_tasks([Task(name="paths")], coordinator_tool="claude")
    (row,) = result.rows
    assert row.profile == "claude:work"
    assert "quota unknown" in row.reason and "headroom" not in row.reason
    assert row.launch == ("fleet-profile-run", "run", "claude:work", "--")


def test_clausona_binary_is_the_launcher_once_fleet_has_profiles(world: Path) -> None:
    assert clausona_binary() == str(world / "no-clausona")
    _profile_store.add("work", config_dir=str(world / "w"))
    assert Path(clausona_binary()).name == "fleet-profile-run"
    assert os.access(clausona_binary(), os.X_OK)


def test_launch_argv_sets_the_profile_and_nothing_else(world: Path) -> None:
    entry = {"configDir": "~/c", "model": "glm-5", "endpoint": "https://e/", "keyFrom": "env:K"}
    argv, env = _profile_store.launch_argv(
        entry, "claude", ["-p", "x"], {"K": "sk-1", "ANTHROPIC_API_KEY": "other", "A": "b"}
    )
    assert argv == ["claude", "-p", "x"]
    assert env == {"K": "sk-1", "A": "b", "CLAUDE_CONFIG_DIR": f"{world}/c",
                   "ANTHROPIC_MODEL": "glm-5", "ANTHROPIC_BASE_URL": "https://e",
                   "ANTHROPIC_AUTH_TOKEN": "sk-1"}
    argv, env = _profile_store.launch_argv(
        {"configDir": "/cx", "model": "gpt-5"}, "codex", ["exec", "--json"], {}
    )
    assert argv == ["codex", "exec", "-m", "gpt-5", "--json"] and env == {"CODEX_HOME": "/cx"}


def _launcher(world: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleet._profile_store", *args], capture_output=True, text=True,
        timeout=60, check=False, env={**os.environ, **env},
    )


def test_the_launcher_runs_the_tool_on_fleets_profile_else_hands_over_to_clausona(
    world: Path,
) -> None:
    tool = world / "fake-claude"
    tool.write_text('#!/bin/sh\necho "$CLAUDE_CONFIG_DIR $*"\n')
    tool.chmod(0o755)
    clausona = world / "fake-clausona"
    clausona.write_text('#!/bin/sh\necho "clausona $*"\n')
    clausona.chmod(0o755)
    _profile_store.add("work", config_dir=str(world / "w"))
    done = _launcher(world, "run", "WORK", "--", "-p", "hi", FLEET_CLAUDE=str(tool))
    assert (done.returncode, done.stdout) == (0, f"{world}/w -p hi\n")
    done = _launcher(world, "run", "claude:other", "--", "-p", "hi",
                     FLEET_CLAUSONA=str(clausona))
    assert (done.returncode, done.stdout) == (0, "clausona run claude:other -- -p hi\n")
    done = _launcher(world, "run", "claude:other", "--", "-p")
    assert done.returncode == 127 and done.stderr.startswith("fleet-profile-run: cannot run ")
    (world / ".clausona" / "fleet.json").write_text('{"profiles": 1}')
    done = _launcher(world, "run", "work", "--", "-p")
    assert done.returncode == 1 and "profiles must be an object" in done.stderr
