"""The agents' config files: strict reads, merges that keep the user's content, atomic writes
with a backup, and the writers that go through them (folder trust, a headless worker's seeding)."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path

import pytest

from fleet import _agent_config as cfg
from fleet._errors import SettingsError
from fleet.adapters._headless_run import LaunchRecord, codex_config, trust_claude, trust_codex

USER_TOML = """\
# my Codex settings
model = "o3"   # the one I pay for

[projects."/home/me/src"]
trust_level = "trusted"  # keep

[mcp_servers.docs]
command = "docs-mcp"
args = [ "--port",   "9000" ]
"""


def one_line(exc: pytest.ExceptionInfo[SettingsError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


class TestStrictRead:
    @pytest.mark.parametrize("text", ["{not json", "[1, 2]", '"a string"', "{" * 100_000])
    def test_a_bad_json_file_is_refused_and_left_untouched(
        self, tmp_path: Path, text: str
    ) -> None:
        path = tmp_path / ".claude.json"
        path.write_text(text)
        with pytest.raises(SettingsError) as exc:
            cfg.trust_claude_project(path, "/wt")
        assert str(path) in one_line(exc) and "left it untouched" in str(exc.value)
        assert path.read_text() == text
        assert sorted(p.name for p in tmp_path.iterdir()) == [".claude.json"]

    def test_a_bad_toml_file_is_refused_and_left_untouched(self, tmp_path: Path) -> None:
        path = tmp_path / "config.toml"
        text = 'model = "o3"\nmodel = "twice"\n'
        path.write_text(text)
        with pytest.raises(SettingsError) as exc:
            cfg.trust_codex_project(path, "/wt")
        assert str(path) in one_line(exc) and "not valid TOML" in str(exc.value)
        assert path.read_text() == text

    def test_a_key_of_the_wrong_type_is_refused(self, tmp_path: Path) -> None:
        claude = tmp_path / ".claude.json"
        claude.write_text('{"projects": []}')
        with pytest.raises(SettingsError, match="'projects' is not an object"):
            cfg.trust_claude_project(claude, "/wt")
        codex = tmp_path / "config.toml"
        codex.write_text('projects = "all"\n')
        with pytest.raises(SettingsError, match="'projects' is not a table"):
            cfg.trust_codex_project(codex, "/wt")
        entry = tmp_path / "entry.toml"
        entry.write_text('projects = { "/wt" = 1 }\n')
        with pytest.raises(SettingsError, match=r"projects\.'/wt' is not a table"):
            cfg.trust_codex_project(entry, "/wt")
        assert claude.read_text() == '{"projects": []}'
        assert codex.read_text() == 'projects = "all"\n'

    def test_a_missing_file_reads_empty(self, tmp_path: Path) -> None:
        assert cfg.read_json_object(tmp_path / "none.json") == ({}, None)
        doc, raw = cfg.read_toml(tmp_path / "none.toml")
        assert raw is None and not doc


class TestMerge:
    def test_claude_trust_keeps_the_rest(self, tmp_path: Path) -> None:
        path = tmp_path / ".claude.json"
        state = {"oauthAccount": {"id": 1}, "projects": {"/wt": {"allowedTools": ["Bash"]}}}
        path.write_text(json.dumps(state))
        assert cfg.trust_claude_project(path, "/wt")
        data = json.loads(path.read_text())
        assert data["oauthAccount"] == {"id": 1}
        assert data["projects"]["/wt"] == {"allowedTools": ["Bash"], "hasTrustDialogAccepted": True}
        before = path.read_bytes()
        assert not cfg.trust_claude_project(path, "/wt")
        assert path.read_bytes() == before

    def test_codex_trust_keeps_the_users_comments_and_formatting(self, tmp_path: Path) -> None:
        path = tmp_path / "config.toml"
        path.write_text(USER_TOML)
        assert cfg.trust_codex_project(path, "/work/wt")
        text = path.read_text()
        lines = iter(text.splitlines())
        assert all(line in lines for line in USER_TOML.splitlines() if line)  # kept, in order
        data = tomllib.loads(text)
        assert data["projects"] == {
            "/home/me/src": {"trust_level": "trusted"}, "/work/wt": {"trust_level": "trusted"},
        }
        assert data["model"] == "o3" and data["mcp_servers"]["docs"]["args"] == ["--port", "9000"]
        assert not cfg.trust_codex_project(path, "/home/me/src")
        assert path.read_text() == text

    def test_an_untrusted_entry_in_any_spelling_becomes_trusted(self, tmp_path: Path) -> None:
        path = tmp_path / "config.toml"
        path.write_text("[projects.'/work/wt']\ntrust_level = 'untrusted'  # asked me once\n")
        assert cfg.trust_codex_project(path, "/work/wt")
        text = path.read_text()
        assert tomllib.loads(text) == {"projects": {"/work/wt": {"trust_level": "trusted"}}}
        assert "# asked me once" in text


class TestWrite:
    def test_the_old_content_is_kept_as_a_backup(self, tmp_path: Path) -> None:
        path = tmp_path / "settings.json"
        path.write_text('{"old": true}')
        path.chmod(0o640)
        saved = cfg.write_json(path, {"new": True})
        assert saved == tmp_path / ("settings.json" + cfg.BACKUP_SUFFIX)
        assert saved.read_text() == '{"old": true}'
        assert json.loads(path.read_text()) == {"new": True}
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "settings.json", "settings.json.fleet-backup",
        ]

    def test_a_new_file_is_private_and_has_no_backup(self, tmp_path: Path) -> None:
        path = tmp_path / "new" / "config.toml"
        assert cfg.write_file(path, b"x = 1\n") is None
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700

    def test_a_symlink_is_written_through_and_stays_one(self, tmp_path: Path) -> None:
        shared = tmp_path / "shared" / "settings.json"
        shared.parent.mkdir()
        shared.write_text("{}")
        link = tmp_path / "profile" / "settings.json"
        link.parent.mkdir()
        link.symlink_to(shared)
        cfg.write_json(link, {"a": 1})
        assert link.is_symlink() and json.loads(shared.read_text()) == {"a": 1}
        assert (shared.parent / "settings.json.fleet-backup").read_text() == "{}"

    def test_a_failed_write_leaves_the_file_as_it_was(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = tmp_path / "config.toml"
        path.write_text(USER_TOML)

        def fail(src: object, dst: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "replace", fail)
        with pytest.raises(OSError):
            cfg.trust_codex_project(path, "/work/wt", backup=False)
        assert path.read_text() == USER_TOML
        assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]

    def test_trim_drops_the_blank_line_a_removed_table_leaves(self, tmp_path: Path) -> None:
        path = tmp_path / "config.toml"
        path.write_text("a = 1\n\n[t]\nb = 2\n")
        doc, _ = cfg.read_toml(path)
        del doc["t"]
        assert cfg.dump_toml(doc) == b"a = 1\n\n"
        assert cfg.dump_toml(doc, trim=True) == b"a = 1\n"
        del doc["a"]
        assert cfg.dump_toml(doc, trim=True) == b""


class TestHeadlessWriters:
    def record(self, **kw: str) -> LaunchRecord:
        return LaunchRecord(
            worker="w", tool="codex", worktree="/wt", branch="fleet/w",
            endpoint="http://127.0.0.1:9", **kw,
        )

    def test_codex_config_is_the_toml_it_means(self) -> None:
        text = codex_config(self.record(model="gpt-x", effort="high"), Path('/work/"a" b'))
        assert tomllib.loads(text) == {
            "model": "gpt-x",
            "model_provider": "fleet",
            "approval_policy": "never",
            "sandbox_mode": "danger-full-access",  # the default the command line states too
            "check_for_update_on_startup": False,
            "model_reasoning_effort": "high",
            "model_providers": {
                "fleet": {
                    "name": "fleet endpoint",
                    "base_url": "http://127.0.0.1:9/v1",
                    "env_key": "FLEET_ENDPOINT_API_KEY",
                    "wire_api": "responses",
                    "request_max_retries": 0,
                    "stream_max_retries": 0,
                },
            },
            "projects": {'/work/"a" b': {"trust_level": "trusted"}},
        }

    def test_codex_config_with_a_control_character_stays_valid(self) -> None:
        # JSON leaves DEL unescaped and TOML forbids it raw: a JSON-quoted string broke the file.
        text = codex_config(self.record(model="m\x7fx"), Path("/work/a\x7fb"))
        data = tomllib.loads(text)
        assert data["model"] == "m\x7fx"
        assert data["projects"] == {"/work/a\x7fb": {"trust_level": "trusted"}}

    def test_codex_folder_trust_merges_into_the_parsed_file(self, tmp_path: Path) -> None:
        wt = tmp_path / "wt"
        (tmp_path / "config.toml").write_text(f"[projects.'{wt}']\ntrust_level = 'untrusted'\n")
        trust_codex(tmp_path, wt)
        trust_codex(tmp_path, wt)
        data = tomllib.loads((tmp_path / "config.toml").read_text())
        assert data == {"projects": {str(wt): {"trust_level": "trusted"}}}

    def test_claude_folder_trust_refuses_a_bad_state_file(self, tmp_path: Path) -> None:
        (tmp_path / ".claude.json").write_text("{oops")
        with pytest.raises(SettingsError, match="not valid JSON"):
            trust_claude(tmp_path, tmp_path / "wt")
        assert (tmp_path / ".claude.json").read_text() == "{oops"
        (tmp_path / ".claude.json").write_text('{"numStartups": 3}')
        trust_claude(tmp_path, tmp_path / "wt")
        assert json.loads((tmp_path / ".claude.json").read_text()) == {
            "numStartups": 3,
            "projects": {str(tmp_path / "wt"): {"hasTrustDialogAccepted": True}},
        }
