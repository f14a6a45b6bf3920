"""`fleet workspace show|read` and `fleet superset status|configs`, through the adapter a
worker was registered with (the fakes first on PATH, as the real tools would be)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet._cli import main
from fleet._launch import API_TOOLS
from tests.adapters.conftest import FAKES, Rig, make_rig
from tests.conftest import Repo


@pytest.fixture(autouse=True)
def _fakes_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def superset(tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from make_rig("superset-host", tmp_path, repo, monkeypatch)


def test_workspace_show_and_read_ask_the_registered_adapter(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    _ws, spec = rig.started("w1")
    assert main(["workspace", "show", "w1", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["host"] == rig.adapter.name
    assert main(["workspace", "read", "w1", "--lines", "20"]) == 0
    screen = capsys.readouterr().out
    assert str(spec.brief) in screen or "Write the docs." in screen


def test_workspace_show_of_an_unknown_worker_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["workspace", "show", "nobody"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fleet: ") and err.count("\n") == 1


def test_superset_configs_lists_profiles_without_env(
    superset: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["superset", "configs", "--json"]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out)
    assert sorted(r["profile"] for r in rows) == ["claude:side", "claude:work"]
    assert "SECRETISH" not in out
    assert main(["superset", "status"]) == 0
    assert capsys.readouterr().out.startswith("superset: host route at http://127.0.0.1:")


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """claude:work (a subscription) and claude:glm (an API profile), as clausona lists them."""
    listing = [
        {"name": "claude:work", "tool": "claude", "configDir": str(tmp_path / "c-work")},
        {"name": "claude:glm", "tool": "claude", "configDir": str(tmp_path / "c-glm"),
         "kind": "api", "model": "glm-5", "label": "openrouter.ai"},
    ]
    snapshot = tmp_path / "profiles.json"
    snapshot.write_text(json.dumps(listing))
    monkeypatch.setenv("FLEET_PROFILES", str(snapshot))


def test_superset_add_config_shows_then_adds_with_yes(
    superset: Rig, profiles: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The config is written by start's launch rules: the settings' mode, and an API
    profile's short tool list."""
    assert superset.host is not None
    assert main(["settings", "set", "permissions.claude", "acceptEdits"]) == 0
    capsys.readouterr()
    before = len(superset.host.configs)
    args = ["superset", "add-config", "claude:glm", "--model", "glm-5", "--json"]
    assert main(args) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "missing"
    assert shown["label"] == "Claude · glm (glm-5)"
    assert shown["args"] == ["run", "claude:glm", "--", "--permission-mode", "acceptEdits",
                             "--model", "glm-5", "--strict-mcp-config", API_TOOLS]
    assert len(superset.host.configs) == before
    assert main([*args, "--yes"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "added"
    assert superset.host.configs[-1]["args"] == shown["args"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "exists"


def test_superset_add_config_update_shows_the_change_then_rewrites_it(
    superset: Rig, profiles: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """claude:work's config states acceptEdits and sonnet; the settings now say plan."""
    assert superset.host is not None
    assert main(["settings", "set", "permissions.claude", "plan"]) == 0
    capsys.readouterr()
    (config,) = [c for c in superset.host.configs if c["args"][1] == "claude:work"]
    before = list(config["args"])
    args = ["superset", "add-config", "claude:work", "--model", "sonnet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("differs: Claude · work: --permission-mode acceptEdits instead of "
                          "plan\n")
    assert ("rewrite it with `fleet superset add-config claude:work --model sonnet "
            "--permission-mode plan --update --yes`") in out
    assert config["args"] == before  # shown, not changed
    assert main([*args, "--update", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "differs" and shown["current"] == before
    assert config["args"] == before
    assert main([*args, "--update", "--yes", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["status"] == "updated" and done["id"] == config["id"]
    assert config["args"] == ["run", "claude:work", "--", "--permission-mode", "plan",
                              "--model", "sonnet", "--strict-mcp-config"]
    assert config["label"] == "Claude · work (sonnet)"
    assert main(args) == 0
    assert capsys.readouterr().out.startswith("exists: ")


def test_send_delivers_a_follow_up_file_through_the_registered_adapter(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleet import FollowUpSent

    rig.started("w1")
    follow = rig.brief("Also update the changelog.\n", "follow.md")
    assert main(["send", "w1", str(follow), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sent"] == str(follow)
    sent = [e for e in rig.fleet.log("w1") if isinstance(e, FollowUpSent)]
    assert [e.file for e in sent] == [str(follow)]
    assert main(["send", "w1", str(follow.parent / "missing.md")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_hand_over_moves_the_task_to_another_profile(
    rig: Rig, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from fleet import HandedOver

    _ws, spec = rig.started("w1")
    code = main(
        [
            "hand-over",
            "w1",
            "--profile",
            "claude:side",
            "--brief",
            str(spec.brief),
            "--config-dir",
            str(tmp_path / "side-config"),
            "--json",
        ]
    )
    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert out["profile"] == "claude:side"
    handed = [e for e in rig.fleet.log("w1") if isinstance(e, HandedOver)]
    assert [e.profile for e in handed] == ["claude:side"]
    state = rig.fleet.state("w1")
    assert (state.state, state.profile) == ("starting", "claude:side")


def test_hand_over_with_no_profile_takes_the_next_one_by_the_routing_rules(
    rig: Rig, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fleet import HandedOver

    now_ms = int(time.time() * 1000)
    listing = [
        {"name": name, "tool": "claude", "kind": "subscription",
         "configDir": str(tmp_path / name.replace(":", "-")),
         "quota": {"state": "ok", "fetchedAt": now_ms,
                   "session": {"usedPercent": used, "resetsAt": None},
                   "weekly": {"usedPercent": 0, "resetsAt": None}}}
        for name, used in (("claude:work", 10), ("claude:side", 40), ("claude:full", 99))
    ]
    (tmp_path / "profiles.json").write_text(json.dumps(listing))
    monkeypatch.setenv("FLEET_PROFILES", str(tmp_path / "profiles.json"))
    _ws, spec = rig.started("w1")
    before = rig.fleet.state("w1").profile
    code = main(["hand-over", "w1", "--brief", str(spec.brief), "--config-dir",
                 str(tmp_path / "next-config"), "--json"])
    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    # Not the worker's own, not the one at its limit: the one with room.
    assert before == "claude:work" and out["profile"] == "claude:side" and out["why"]
    handed = [e for e in rig.fleet.log("w1") if isinstance(e, HandedOver)]
    assert [e.profile for e in handed] == [out["profile"]]
