"""Reading clausona profiles: every quota state, API profiles, snapshots, the real-binary path
through the fake clausona, and finding the coordinator's own profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet._core.routing import (
    DEFAULT_STALE_AFTER,
    Profile,
    Settings,
    assess,
    profile_from_json,
    profiles_from_json,
)
from fleet._errors import SettingsError, ToolError
from fleet._profiles import (
    coordinator_dir,
    coordinator_profile,
    detect_coordinator_tool,
    find_profile,
    load_profiles,
)
from fleet._runner import MockRunner

from .helpers import NOW, item

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "clausona"
FETCHED_MS = int((NOW - 30) * 1000)


@pytest.fixture
def fake_clausona(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake clausona as FLEET_CLAUSONA, driven by the returned state file."""
    state = tmp_path / "clausona-state.json"
    state.write_text(json.dumps({"profiles": []}))
    monkeypatch.setenv("CLAUSONA_FAKE", str(state))
    monkeypatch.setenv("FLEET_CLAUSONA", str(FAKE))
    monkeypatch.delenv("FLEET_PROFILES", raising=False)
    return state


def set_state(state: Path, **values: Any) -> None:
    data = json.loads(state.read_text())
    data.update(values)
    state.write_text(json.dumps(data))


SUBSCRIPTION = item(
    "claude:work",
    quota={
        "state": "ok",
        "fetchedAt": FETCHED_MS,
        "session": {"usedPercent": 23, "resetsAt": "2026-09-20T14:00:00.000Z"},
        "weekly": {"usedPercent": 49, "resetsAt": None},
        "scoped": {"usedPercent": 77, "resetsAt": "2026-09-24T09:00:00.000Z", "label": "Opus"},
    },
)
API = item("claude:glm", kind="api", email="", label="openrouter.ai", model="z-ai/glm-5.3")


def test_a_subscription_with_every_window() -> None:
    p = profile_from_json(SUBSCRIPTION)
    assert (p.name, p.tool, p.kind, p.model) == ("claude:work", "claude", "subscription", None)
    assert p.config_dir == Path("/home/me/.claude-work")
    assert p.quota is not None and p.quota.state == "ok"
    assert p.quota.fetched_at == pytest.approx(NOW - 30)
    assert p.quota.session is not None and p.quota.session.used_percent == 23
    assert p.quota.session.resets_at == 1789912800.0
    assert p.quota.weekly is not None and p.quota.weekly.resets_at is None
    assert p.quota.scoped is not None and p.quota.scoped.label == "Opus"
    assert p.headroom == 51
    assert not p.quota.is_stale(NOW)


def test_an_api_profile_has_a_model_and_no_quota() -> None:
    p = profile_from_json(API)
    assert p.kind == "api" and p.is_api and p.model == "z-ai/glm-5.3"
    assert p.quota is None and p.headroom is None and p.label == "openrouter.ai"
    a = assess(p, settings=Settings(), coordinator=None, now=NOW)
    assert a.eligible and a.reasons == ()


def test_missing_kind_means_subscription_and_bare_names_get_their_tool() -> None:
    raw = item("codex:x")
    raw["name"] = "x"
    p = profile_from_json(raw)
    assert p.kind == "subscription" and p.name == "codex:x" and p.short == "x"


@pytest.mark.parametrize(
    ("state", "eligible", "why"),
    [
        ("ok", True, ""),
        ("expired", False, "quota state expired"),
        ("missing", False, "quota state missing"),
        ("cooldown", False, "quota state cooldown"),
        ("error", False, "quota state error"),
        ("brand-new", False, "quota state brand-new"),
    ],
)
def test_every_quota_state(state: str, eligible: bool, why: str) -> None:
    raw = item("claude:a", quota={"state": state, "fetchedAt": FETCHED_MS,
                                  "weekly": {"usedPercent": 12, "resetsAt": None}})
    p = profile_from_json(raw)
    assert p.quota is not None and p.quota.state == state and p.quota.session is None
    a = assess(p, settings=Settings(), coordinator=None, now=NOW)
    assert a.eligible is eligible
    assert why in a.why


def test_no_quota_reading_is_not_eligible() -> None:
    a = assess(profile_from_json(item("claude:a")), settings=Settings(), coordinator=None, now=NOW)
    assert not a.eligible and "no quota reading" in a.why


def test_a_stale_reading_is_noted_not_refused() -> None:
    old = (NOW - DEFAULT_STALE_AFTER - 3600) * 1000
    p = profile_from_json(item("claude:a", quota={"state": "ok", "fetchedAt": old}))
    assert p.quota is not None and p.quota.is_stale(NOW)
    a = assess(p, settings=Settings(), coordinator=None, now=NOW)
    assert a.eligible and any("old" in n for n in a.notes)


def test_usage_is_clamped_and_fetched_at_in_seconds_is_kept() -> None:
    p = profile_from_json(item("claude:a", quota={
        "state": "ok", "fetchedAt": NOW, "session": {"usedPercent": 140, "resetsAt": None},
    }))
    assert p.quota is not None and p.quota.fetched_at == NOW
    assert p.quota.session is not None and p.quota.session.used_percent == 100
    assert p.headroom == 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"profiles": []}, "expected a JSON array"),
        ([42], "profile 0 is not an object"),
        ([{"tool": "claude", "configDir": "/x"}], "has no name"),
        ([item("claude:a", tool="emacs")], "tool 'emacs'"),
        ([item("claude:a", kind="lease")], "kind 'lease'"),
        ([{"name": "claude:a", "tool": "claude"}], "has no configDir"),
        ([item("claude:a", quota={"fetchedAt": 1})], "quota.state is missing"),
        ([item("claude:a", quota={"state": "ok", "session": {"usedPercent": "x"}})],
         "quota.session.usedPercent"),
        ([item("claude:a", quota={"state": "ok", "weekly": {"usedPercent": 1,
                                                             "resetsAt": "soon"}})],
         "not an ISO 8601 time"),
        ([item("claude:a"), item("claude:A")], "listed twice"),
    ],
)
def test_malformed_profiles_name_the_problem(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        profiles_from_json(data)


def test_find_profile_by_full_or_unique_bare_name() -> None:
    profiles = profiles_from_json([item("claude:work"), item("codex:work"), item("claude:glm")])
    assert find_profile("GLM", profiles).name == "claude:glm"
    assert find_profile("Codex:Work", profiles).name == "codex:work"
    with pytest.raises(SettingsError, match="ambiguous"):
        find_profile("work", profiles)
    with pytest.raises(SettingsError, match="no profile 'nope'"):
        find_profile("nope", profiles)


# --------------------------------------------------------------------------------------------
# Loading


def test_load_from_the_fake_clausona(fake_clausona: Path) -> None:
    set_state(fake_clausona, profiles=[SUBSCRIPTION, API])
    profiles = load_profiles()
    assert [p.name for p in profiles] == ["claude:work", "claude:glm"]
    calls = json.loads(fake_clausona.read_text())["calls"]
    assert calls == [["list", "--json"]]


def test_a_clausona_error_is_one_line(fake_clausona: Path) -> None:
    set_state(fake_clausona, list_error="No profiles registered. Run `clausona init`.")
    with pytest.raises(ToolError) as err:
        load_profiles()
    assert str(err.value) == (
        "clausona list failed (exit 1): No profiles registered. Run `clausona init`."
    )


def test_malformed_clausona_output_is_one_line(fake_clausona: Path) -> None:
    set_state(fake_clausona, list_stdout="Loading…\n[{")
    with pytest.raises(ToolError, match=r"output of `clausona list --json` is not JSON"):
        load_profiles()
    set_state(fake_clausona, list_stdout='{"name": "claude:a"}')
    with pytest.raises(ToolError, match="expected a JSON array"):
        load_profiles()


def test_a_missing_clausona_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FLEET_CLAUSONA", str(tmp_path / "no-such-clausona"))
    monkeypatch.delenv("FLEET_PROFILES", raising=False)
    with pytest.raises(ToolError) as err:
        load_profiles()
    assert "\n" not in str(err.value) and "no-such-clausona is not installed" in str(err.value)
    assert "fleet profiles add NAME --config-dir DIR" in str(err.value)


def test_load_through_a_mock_runner() -> None:
    runner = MockRunner(lambda argv, opts: (0, json.dumps([API]), ""))
    profiles = load_profiles(runner=runner, binary="/opt/clausona")
    assert profiles[0].name == "claude:glm"
    assert runner.calls[0][0] == ("/opt/clausona", "list", "--json")


def test_load_from_a_snapshot_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = tmp_path / "profiles.json"
    snap.write_text(json.dumps([SUBSCRIPTION]))
    runner = MockRunner(lambda argv, opts: (1, "", "must not run"))
    assert load_profiles(runner=runner, source=snap)[0].name == "claude:work"
    monkeypatch.setenv("FLEET_PROFILES", str(snap))
    assert load_profiles(runner=runner)[0].name == "claude:work"
    assert runner.calls == []
    snap.write_text("[{]")
    with pytest.raises(SettingsError, match=r"profiles.json is not JSON \(line 1"):
        load_profiles(source=snap)
    with pytest.raises(SettingsError, match="cannot read profiles"):
        load_profiles(source=tmp_path / "absent.json")


# --------------------------------------------------------------------------------------------
# The coordinator's own profile


def _profiles(home: Path) -> list[Profile]:
    return profiles_from_json([
        item("claude:default", configDir=str(home / ".claude"), isActive=False),
        item("claude:work", configDir=str(home / ".claude-work"), isActive=True),
        item("codex:default", configDir=str(home / ".codex")),
        item("codex:work", configDir=str(home / ".codex-work"), isActive=True),
    ])


def test_claude_coordinator_defaults_to_home_claude_not_the_active_profile(
    tmp_path: Path,
) -> None:
    profiles = _profiles(tmp_path)
    env = {"HOME": str(tmp_path)}
    p = coordinator_profile(profiles, "claude", env)
    assert p is not None and p.name == "claude:default"
    assert coordinator_dir("claude", env) == tmp_path / ".claude"


def test_claude_config_dir_picks_the_coordinator(tmp_path: Path) -> None:
    profiles = _profiles(tmp_path)
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude-work")}
    p = coordinator_profile(profiles, "claude", env)
    assert p is not None and p.name == "claude:work"


def test_paths_are_compared_resolved(tmp_path: Path) -> None:
    (tmp_path / ".claude-work").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / ".claude-work")
    profiles = _profiles(tmp_path)
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "link") + "/"}
    p = coordinator_profile(profiles, "claude", env)
    assert p is not None and p.name == "claude:work"


def test_codex_coordinator_uses_codex_home(tmp_path: Path) -> None:
    profiles = _profiles(tmp_path)
    p = coordinator_profile(profiles, "codex", {"HOME": str(tmp_path)})
    assert p is not None and p.name == "codex:default"
    env = {"HOME": str(tmp_path), "CODEX_HOME": str(tmp_path / ".codex-work"),
           "CLAUDE_CONFIG_DIR": str(tmp_path / ".codex-work")}
    p = coordinator_profile(profiles, "codex", env)
    assert p is not None and p.name == "codex:work"
    assert coordinator_profile(profiles, "claude", {"HOME": str(tmp_path / "elsewhere")}) is None
    with pytest.raises(SettingsError, match="unknown coordinator tool"):
        coordinator_profile(profiles, "emacs", {})


def test_coordinator_tool_is_guessed_from_the_environment() -> None:
    assert detect_coordinator_tool({"CLAUDECODE": "1"}) == "claude"
    assert detect_coordinator_tool({"CODEX_SANDBOX": "seatbelt"}) == "codex"
    assert detect_coordinator_tool({}) == "claude"


def test_clausona_colour_codes_and_usage_lines_are_dropped_from_errors() -> None:
    stderr = "\x1b[31m  ✖ Unknown option: --x\x1b[39m\nRun `clausona list --help` for usage.\n"
    runner = MockRunner(lambda argv, opts: (1, "", stderr))
    with pytest.raises(ToolError) as err:
        load_profiles(runner=runner)
    assert str(err.value) == "clausona list failed (exit 1): Unknown option: --x"
