"""fleet trust: pre-answering the folder-trust prompt, verified, retried."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import tomlkit

from fleet._agent_config import claude_state_file
from fleet._errors import SettingsError
from fleet._hook_install import claude_target, codex_target
from fleet._trust import check, trust


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    path = tmp_path / "wt"
    path.mkdir()
    return path


def no_sleep(_: float) -> None:
    pass


class TestClaude:
    def test_trust_writes_and_keeps_the_rest(self, tmp_path: Path, worktree: Path) -> None:
        cfg = tmp_path / "cfg"
        cfg.mkdir()
        state = {"hasCompletedOnboarding": True, "projects": {"/other": {"allowedTools": []}}}
        (cfg / ".claude.json").write_text(json.dumps(state))
        target = claude_target(cfg)
        assert not check(target, worktree).trusted
        result = trust(target, worktree, sleep=no_sleep)
        assert result.trusted and result.written and result.attempts == 1
        data = json.loads((cfg / ".claude.json").read_text())
        assert data["hasCompletedOnboarding"] is True
        assert data["projects"]["/other"] == {"allowedTools": []}
        assert data["projects"][os.path.realpath(worktree)] == {"hasTrustDialogAccepted": True}
        again = trust(target, worktree, sleep=no_sleep)
        assert again.trusted and not again.written

    def test_keys_the_real_path(self, tmp_path: Path, worktree: Path) -> None:
        link = tmp_path / "link"
        link.symlink_to(worktree)
        cfg = tmp_path / "cfg"
        trust(claude_target(cfg), link, sleep=no_sleep)
        data = json.loads((cfg / ".claude.json").read_text())
        assert list(data["projects"]) == [str(worktree.resolve())]
        assert check(claude_target(cfg), worktree).trusted

    def test_default_config_dir_uses_home_claude_json(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("HOME", str(tmp_path))
        assert claude_state_file(tmp_path / ".claude") == tmp_path / ".claude.json"
        assert claude_state_file(tmp_path / "cfg") == tmp_path / "cfg" / ".claude.json"

    def test_retries_when_the_agent_rewrites_the_file(
        self, tmp_path: Path, worktree: Path
    ) -> None:
        cfg = tmp_path / "cfg"
        cfg.mkdir()
        state_file = cfg / ".claude.json"
        state_file.write_text("{}")
        rewrites = []

        def agent_rewrites_once(_: float) -> None:
            if not rewrites:  # a starting agent writes its own copy, without our entry
                rewrites.append(1)
                state_file.write_text(json.dumps({"numStartups": 1}))

        result = trust(claude_target(cfg), worktree, sleep=agent_rewrites_once)
        assert result.trusted and result.attempts == 2
        data = json.loads(state_file.read_text())
        assert data["numStartups"] == 1
        assert data["projects"][str(worktree.resolve())]["hasTrustDialogAccepted"] is True

    def test_gives_up_with_a_clear_error(self, tmp_path: Path, worktree: Path) -> None:
        cfg = tmp_path / "cfg"
        cfg.mkdir()

        def agent_always_rewrites(_: float) -> None:
            (cfg / ".claude.json").write_text("{}")

        with pytest.raises(SettingsError, match="keeps rewriting"):
            trust(claude_target(cfg), worktree, attempts=3, sleep=agent_always_rewrites)

    def test_malformed_state_is_refused_and_untouched(
        self, tmp_path: Path, worktree: Path
    ) -> None:
        cfg = tmp_path / "cfg"
        cfg.mkdir()
        (cfg / ".claude.json").write_bytes(b'{"projects": ')
        with pytest.raises(SettingsError, match="not valid JSON"):
            trust(claude_target(cfg), worktree, sleep=no_sleep)
        assert (cfg / ".claude.json").read_bytes() == b'{"projects": '


class TestCodex:
    def test_trust_writes_projects_table(self, tmp_path: Path, worktree: Path) -> None:
        codex = tmp_path / "codex"
        codex.mkdir()
        original = '# mine\nmodel = "m"\n\n[projects."/x"]\ntrust_level = "untrusted"\n'
        (codex / "config.toml").write_text(original)
        target = codex_target(codex)
        assert not check(target, worktree).trusted
        assert trust(target, worktree, sleep=no_sleep).trusted
        text = (codex / "config.toml").read_text()
        assert text.startswith(original)
        doc = tomlkit.parse(text).unwrap()
        assert doc["projects"][str(worktree.resolve())] == {"trust_level": "trusted"}
        assert doc["projects"]["/x"] == {"trust_level": "untrusted"}
        assert check(target, worktree).trusted

    def test_upgrades_an_untrusted_entry(self, tmp_path: Path, worktree: Path) -> None:
        codex = tmp_path / "codex"
        codex.mkdir()
        key = str(worktree.resolve())
        (codex / "config.toml").write_text(f'[projects."{key}"]\ntrust_level = "untrusted"\n')
        assert trust(codex_target(codex), worktree, sleep=no_sleep).trusted
        doc = tomlkit.parse((codex / "config.toml").read_text()).unwrap()
        assert doc == {"projects": {key: {"trust_level": "trusted"}}}
