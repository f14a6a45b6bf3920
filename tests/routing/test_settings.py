"""The settings file: get/set keep every other key, malformed files stay untouched, the legacy
file is read and copied on the first change, writes are atomic."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from fleet import _settings
from fleet._cli import main
from fleet._core.routing import Settings
from fleet._errors import SettingsError


@pytest.fixture
def path(tmp_path: Path) -> Path:
    d = tmp_path / ".clausona"
    d.mkdir()
    return d / "fleet.json"


def write(p: Path, data: object) -> None:
    p.write_text(json.dumps(data, indent=2) + "\n")


def test_set_keeps_every_other_key_and_their_order(path: Path) -> None:
    write(path, {"workers": ["claude:work"], "zzUnknown": {"deep": [1, 2]}, "maxUsage": 90,
                 "routing": "claude:glm never edits src/"})
    _settings.set("maxUsage", 75, path)
    data = json.loads(path.read_text())
    assert list(data) == ["workers", "zzUnknown", "maxUsage", "routing"]
    assert data == {"workers": ["claude:work"], "zzUnknown": {"deep": [1, 2]}, "maxUsage": 75,
                    "routing": "claude:glm never edits src/"}
    assert _settings.get("maxUsage", path) == 75
    assert _settings.get("zzUnknown.deep", path) == [1, 2]
    assert _settings.get("nope", path, default="d") == "d"


def test_nested_keys_and_unset(path: Path) -> None:
    write(path, {"permissions": {"codex": "never"}, "other": 1})
    _settings.set("permissions.claude", "acceptEdits", path)
    assert json.loads(path.read_text())["permissions"] == {"codex": "never",
                                                           "claude": "acceptEdits"}
    _settings.unset("permissions.codex", path)
    _settings.unset("absent", path)
    assert json.loads(path.read_text()) == {"permissions": {"claude": "acceptEdits"}, "other": 1}
    with pytest.raises(SettingsError, match="unknown settings key 'other'"):
        _settings.set("other.x", "y", path)
    write(path, {"hub": "nats://x"})
    with pytest.raises(SettingsError, match="hub is not an object"):
        _settings.set("hub.url", "nats://y", path)


@pytest.mark.parametrize(
    "text",
    [
        '{"workers": ["claude:work",]}\n',
        "[1, 2]\n",
        '"just text"',
        "\x00\xff not utf8",
    ],
)
def test_a_malformed_file_is_refused_and_left_byte_for_byte(path: Path, text: str) -> None:
    raw = text.encode("latin-1")
    path.write_bytes(raw)
    mtime = path.stat().st_mtime_ns
    for action in (
        lambda: _settings.set("maxUsage", 80, path),
        lambda: _settings.unset("workers", path),
        lambda: _settings.get("workers", path),
        lambda: _settings.load_settings(path),
    ):
        with pytest.raises(SettingsError) as err:
            action()
        assert "\n" not in str(err.value) and str(path) in str(err.value)
    assert path.read_bytes() == raw and path.stat().st_mtime_ns == mtime
    assert sorted(os.listdir(path.parent)) == ["fleet.json"]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("maxUsage", 150, "maxUsage must be"),
        ("maxUsage", "high", "maxUsage must be"),
        ("maxUsage", True, "maxUsage must be"),
        ("retire", "sometimes", "retire must be ask or auto"),
        ("workers", {"a": 1}, "workers must be a list"),
        ("routing", 3, "routing must be text"),
        ("permissions", ["x"], "permissions must be an object"),
        ("permissions.claude", 3, "must be text"),
        ("permissions.claude", "bogus", "permissions.claude cannot be 'bogus': use one of "
         "default, acceptEdits, plan"),
        ("permissions.codex", "sometimes", "use one of on-failure, on-request, never"),
        ("permissions.codexSandbox", "all", "use one of read-only, workspace-write"),
        ("permissions", {"claude": "bogus"}, "permissions.claude cannot be"),
        ("permissions.other", "x", "unknown settings key 'permissions.other'"),
        ("maxusage", 50, "unknown settings key 'maxusage' \\(did you mean maxUsage\\?\\): "
         "known ones are workers, routing, maxUsage, retire, adapter, permissions, hub, profiles"),
        ("bogus", 1, "unknown settings key 'bogus': known ones are workers"),
        ("adapter", "tmux", "adapter must be one of headless, superset, herdr"),
        ("workers.x", 1, "workers has no subkeys"),
        ("permissions.claude.x", "plan", "permissions.claude must be text"),
        ("hub.url", 3, "hub.url must be text"),
        ("hub.view", "yes", "hub.view must be true or false"),
        ("hub.heartbeat", 0, "hub.heartbeat must be a number of seconds"),
        ("hub.port", 4222, "unknown settings key 'hub.port'"),
        ("hub", "nats://x", "hub must be an object"),
        ("hub", {"url": 1}, "hub.url must be text"),
        ("", 1, "invalid settings key"),
        ("a..b", 1, "invalid settings key"),
    ],
)
def test_bad_values_are_refused_before_writing(
    path: Path, key: str, value: object, message: str
) -> None:
    write(path, {"maxUsage": 90})
    before = path.read_bytes()
    with pytest.raises(SettingsError, match=message):
        _settings.set(key, value, path)
    assert path.read_bytes() == before


def test_workers_as_comma_separated_text(path: Path) -> None:
    _settings.set("workers", "claude:work, claude:glm", path)
    assert json.loads(path.read_text()) == {"workers": ["claude:work", "claude:glm"]}
    assert _settings.load_settings(path).workers == ("claude:work", "claude:glm")


def test_legacy_file_is_read_then_copied_on_first_change(path: Path) -> None:
    legacy = path.with_name("superset-fleet.json")
    write(legacy, {"workers": ["claude:glm"], "custom": "kept", "maxUsage": 85})
    legacy_bytes = legacy.read_bytes()
    assert not path.exists()
    assert _settings.source_path(path) == legacy
    assert _settings.load_settings(path) == Settings(workers=("claude:glm",), max_usage=85)
    assert _settings.get("custom", path) == "kept"
    _settings.set("retire", "auto", path)
    assert json.loads(path.read_text()) == {"workers": ["claude:glm"], "custom": "kept",
                                            "maxUsage": 85, "retire": "auto"}
    assert legacy.read_bytes() == legacy_bytes
    # From now on fleet.json wins, even when the legacy file changes.
    write(legacy, {"maxUsage": 10})
    assert _settings.load_settings(path).max_usage == 85


def test_only_a_fleet_json_has_a_legacy_fallback(tmp_path: Path) -> None:
    write(tmp_path / "superset-fleet.json", {"maxUsage": 10})
    assert _settings.load_settings(tmp_path / "mine.json") == Settings()


def test_defaults_when_no_file_and_env_var_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "deep" / "dir" / "fleet.json"
    monkeypatch.setenv("FLEET_SETTINGS", str(target))
    assert _settings.settings_path() == target
    assert _settings.load_settings() == Settings()
    assert _settings.read_raw() == {}
    _settings.set("maxUsage", 70)
    assert json.loads(target.read_text()) == {"maxUsage": 70}
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_default_location_is_under_the_home_clausona_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLEET_SETTINGS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _settings.settings_path() == tmp_path / ".clausona" / "fleet.json"


def test_an_empty_file_reads_as_no_settings(path: Path) -> None:
    path.write_text("")
    assert _settings.load_settings(path) == Settings()


def test_writes_keep_the_mode_and_follow_a_symlink(path: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "fleet.json"
    real.parent.mkdir()
    write(real, {"maxUsage": 90})
    real.chmod(0o640)
    path.symlink_to(real)
    _settings.set("retire", "auto", path)
    assert path.is_symlink()
    assert json.loads(real.read_text()) == {"maxUsage": 90, "retire": "auto"}
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(os.listdir(real.parent)) == ["fleet.json"]


def test_concurrent_sets_lose_no_key(path: Path) -> None:
    write(path, {})

    keys = [k for k in _settings.HUB_KEYS
            if k not in ("view", "insecure", "offlineAfter", "heartbeat")]
    assert len(keys) >= 10

    def worker(key: str) -> None:
        _settings.set(f"hub.{key}", f"v-{key}", path)

    threads = [threading.Thread(target=worker, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert json.loads(path.read_text()) == {"hub": {k: f"v-{k}" for k in keys}}


def test_known_keys_with_wrong_shapes_are_refused_when_loading(path: Path) -> None:
    write(path, {"maxUsage": "lots"})
    with pytest.raises(SettingsError, match=r"fleet.json: maxUsage must be"):
        _settings.load_settings(path)
    # Changing another key still works and keeps the bad one for the user to fix.
    _settings.set("retire", "ask", path)
    assert json.loads(path.read_text()) == {"maxUsage": "lots", "retire": "ask"}


def test_settings_from_mapping_reads_routing_as_text_or_list() -> None:
    assert Settings.from_mapping({"routing": "keep GLM off src/"}).routing == ("keep GLM off src/",)
    assert Settings.from_mapping({"routing": ["a", "b"]}).routing == ("a", "b")
    assert Settings.from_mapping({"routing": "  "}).routing == ()
    assert Settings.from_mapping({"workers": None}).workers is None


# --------------------------------------------------------------------------------------------
# CLI


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_settings_get_set_unset_path(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(path, {"unknown": True})
    s = str(path)
    code, out, _ = run(capsys, "settings", "--settings", s, "set", "maxUsage", "80")
    assert code == 0 and "maxUsage = 80" in out
    code, out, _ = run(capsys, "settings", "--settings", s, "set", "workers",
                       '["claude:work"]', "--json")
    assert code == 0 and json.loads(out) == {"file": s, "key": "workers",
                                             "value": ["claude:work"]}
    code, _, _ = run(capsys, "settings", "--settings", s, "set", "routing", "keep GLM off src/")
    code, out, _ = run(capsys, "settings", "--settings", s, "get", "routing")
    assert (code, out) == (0, "keep GLM off src/\n")
    code, out, _ = run(capsys, "settings", "--settings", s, "get", "maxUsage")
    assert (code, out.strip()) == (0, "80")
    code, out, _ = run(capsys, "settings", "--settings", s, "get", "--json")
    assert json.loads(out) == {"unknown": True, "maxUsage": 80, "workers": ["claude:work"],
                               "routing": "keep GLM off src/"}
    code, out, _ = run(capsys, "settings", "--settings", s, "get", "absent")
    assert (code, out) == (2, "")  # an unknown key is a usage error
    code, out, _ = run(capsys, "settings", "--settings", s, "unset", "unknown")
    assert code == 0 and "unknown" not in json.loads(path.read_text())
    code, out, _ = run(capsys, "settings", "get", "maxUsage", "--settings", s)
    assert (code, out) == (0, "80\n")
    code, out, _ = run(capsys, "settings", "--settings", s, "path", "--json")
    assert json.loads(out) == {"file": s, "readFrom": s}


def test_cli_refuses_a_malformed_file_in_one_line(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path.write_text("{nope")
    code, out, err = run(capsys, "settings", "--settings", str(path), "set", "maxUsage", "80")
    assert code == 1 and out == ""
    assert err.startswith("fleet: ") and err.count("\n") == 1 and "not valid JSON" in err
    assert path.read_text() == "{nope"
    code, _, err = run(capsys, "settings", "--settings", str(path), "set", "retire", "never")
    assert code == 2 and "retire must be ask or auto" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["maxusage", "50"], "unknown settings key 'maxusage' (did you mean maxUsage?): known "
         "ones are workers, routing, maxUsage, retire, adapter, permissions, hub, profiles"),
        (["permissions.claude", "bogus"], "permissions.claude cannot be 'bogus': use one of "
         "default, acceptEdits, plan, auto, dontAsk, bypassPermissions"),
        (["maxUsage", "150"], "maxUsage must be a number above 0 and at most 100"),
    ],
)
@pytest.mark.parametrize("existing", [True, False])
def test_cli_refuses_unknown_keys_and_bad_values_as_usage_writing_nothing(
    path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str,
    existing: bool,
) -> None:
    if existing:
        write(path, {"maxUsage": 90, "custom": 1})
    before = path.read_bytes() if existing else None
    code, out, err = run(capsys, "settings", "--settings", str(path), "set", *argv)
    assert (code, out) == (2, "")
    assert err == f"fleet: settings set: {message}\n"
    if existing:
        assert path.read_bytes() == before
    else:
        assert not path.exists()
    assert sorted(os.listdir(path.parent)) == (["fleet.json"] if existing else [])


def test_cli_accepts_every_allowed_permission_value(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for sub, values in _settings.PERMISSION_VALUES.items():
        for value in values:
            code, _, err = run(capsys, "settings", "--settings", str(path), "set",
                               f"permissions.{sub}", value)
            assert (code, err) == (0, "")
            assert json.loads(path.read_text())["permissions"][sub] == value
