"""Installing fleet's hook: merge rules, malformed files, symlinks, Codex trust, status."""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from fleet._errors import SettingsError
from fleet._hook_command import (
    command_argv,
    hook_command,
    hook_python,
    hook_script_path,
    is_fleet_command,
    launcher_names,
    launcher_path,
    write_launcher,
)
from fleet._hook_install import (
    CLAUDE_EVENTS,
    CODEX_EVENTS,
    claude_target,
    codex_target,
    install,
    status,
    uninstall,
)

USER_HOOK = {"type": "command", "command": "/usr/local/bin/notify --done"}


def settings(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((path / "settings.json").read_text())
    return data


def fleet_handlers(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for event, groups in data.get("hooks", {}).items():
        for group in groups:
            for handler in group["hooks"]:
                if is_fleet_command(handler.get("command")):
                    out.setdefault(event, []).append(handler)
    return out


def write_json(path: Path, data: Any) -> bytes:
    raw = (json.dumps(data, indent=2) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return raw


# -- the command -------------------------------------------------------------------------------


def test_command_runs_the_launcher_which_runs_this_fleet_isolated(home: Path) -> None:
    command = hook_command("codex", home=home)
    # SIGTERM is ignored before the interpreter starts, which replaces the shell
    assert command.startswith("trap '' TERM; exec ")
    argv = command_argv(command)
    assert argv == ["/bin/sh", str(launcher_path(home)), "--tool", "codex", "--home", str(home)]
    write_launcher(home)
    text = launcher_path(home).read_text()
    assert launcher_names(launcher_path(home)) == (hook_python(), str(hook_script_path()))
    assert Path(hook_python()).is_absolute() and hook_script_path().is_file()
    assert 'exec "$py" -I -S "$hook" "$@"' in text


def test_command_quotes_awkward_paths(tmp_path: Path) -> None:
    odd = tmp_path / "my fleet's home"
    argv = command_argv(hook_command("claude", home=odd))
    assert argv[-1] == str(odd)


# -- Claude Code -------------------------------------------------------------------------------


class TestClaude:
    def test_fresh_install(self, tmp_path: Path, home: Path) -> None:
        cfg = tmp_path / "cfg"
        change = install(claude_target(cfg), home=home)
        assert change.changed and change.backups == ()
        handlers = fleet_handlers(settings(cfg))
        assert set(handlers) == set(CLAUDE_EVENTS)
        assert "WorktreeCreate" not in settings(cfg)["hooks"]
        assert "WorktreeRemove" not in settings(cfg)["hooks"]
        for event, found in handlers.items():
            assert len(found) == 1
            assert found[0]["command"] == hook_command("claude", home=home)
            # Tool activity and the events that move no state never hold the agent up.
            assert found[0].get("async", False) is (
                event in {"PostToolUse", "PostToolUseFailure", "PreModelSwitch",
                          "PostModelSwitch", "DirectoryAdded", "PreSkillShellCommand"}
            )
        for event in ("Stop", "PermissionRequest", "Notification", "SessionEnd", "StopFailure"):
            assert "async" not in handlers[event][0]
        st = status(claude_target(cfg), home=home)
        assert st.will_run and st.current and st.missing == () and st.problems == ()

    def test_keeps_other_hooks_and_keys(self, tmp_path: Path, home: Path) -> None:
        cfg = tmp_path / "cfg"
        original = {
            "model": "opus",
            "permissions": {"allow": ["Bash(ls)"]},
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [USER_HOOK]}],
                "WorktreeCreate": [{"hooks": [USER_HOOK]}],
            },
        }
        raw = write_json(cfg / "settings.json", original)
        install(claude_target(cfg), home=home)
        data = settings(cfg)
        assert data["model"] == "opus" and data["permissions"] == original["permissions"]
        assert data["hooks"]["PreToolUse"][0] == original["hooks"]["PreToolUse"][0]
        assert data["hooks"]["WorktreeCreate"] == original["hooks"]["WorktreeCreate"]
        assert (cfg / "settings.json.fleet-backup").read_bytes() == raw
        uninstall(claude_target(cfg))
        assert (cfg / "settings.json").read_bytes() == raw

    def test_reinstall_changes_nothing(self, tmp_path: Path, home: Path) -> None:
        cfg = tmp_path / "cfg"
        write_json(cfg / "settings.json", {"hooks": {"Stop": [{"hooks": [USER_HOOK]}]}})
        install(claude_target(cfg), home=home)
        before = (cfg / "settings.json").read_bytes()
        mtime = (cfg / "settings.json").stat().st_mtime_ns
        backup = (cfg / "settings.json.fleet-backup").read_bytes()
        change = install(claude_target(cfg), home=home)
        assert not change.changed and change.files_written == ()
        assert (cfg / "settings.json").read_bytes() == before
        assert (cfg / "settings.json").stat().st_mtime_ns == mtime
        assert (cfg / "settings.json.fleet-backup").read_bytes() == backup

    def test_reinstall_with_a_new_command_replaces_fleets_entries(
        self, tmp_path: Path, home: Path
    ) -> None:
        cfg = tmp_path / "cfg"
        install(claude_target(cfg), home=home)
        first = (cfg / "settings.json").read_bytes()
        change = install(claude_target(cfg), home=tmp_path / "other-home")
        assert change.changed
        handlers = fleet_handlers(settings(cfg))
        assert all(len(found) == 1 for found in handlers.values())
        assert (cfg / "settings.json.fleet-backup").read_bytes() == first
        st = status(claude_target(cfg), home=home)
        assert not st.current  # installed for another home than this one

    def test_uninstall_removes_only_fleets_handlers(self, tmp_path: Path, home: Path) -> None:
        cfg = tmp_path / "cfg"
        install(claude_target(cfg), home=home)
        data = settings(cfg)
        # The user added their own handler into fleet's Stop group, and an old fleet path.
        data["hooks"]["Stop"][0]["hooks"].append(USER_HOOK)
        old = "/opt/old/bin/python -I -S /opt/old/fleet/_hook/fleet_hook.py --tool claude"
        data["hooks"]["Notification"].append({"hooks": [{"type": "command", "command": old}]})
        write_json(cfg / "settings.json", data)
        change = uninstall(claude_target(cfg))
        assert change.removed == len(CLAUDE_EVENTS) + 1
        after = settings(cfg)
        assert after["hooks"] == {"Stop": [{"matcher": "*", "hooks": [USER_HOOK]}]}
        assert not uninstall(claude_target(cfg)).changed

    def test_uninstall_without_a_file_does_nothing(self, tmp_path: Path) -> None:
        cfg = tmp_path / "cfg"
        assert not uninstall(claude_target(cfg)).changed
        assert not cfg.exists()

    @pytest.mark.parametrize(
        "content",
        [
            b"{not json",
            b"[1, 2]",
            b'{"hooks": []}',
            b'{"hooks": {"Stop": {"hooks": []}}}',
            b'{"hooks": {"Stop": [{"hooks": "echo"}]}}',
            b'{"hooks": {"Stop": ["echo"]}}',
            b"\xff\xfe{}",
        ],
    )
    def test_malformed_settings_are_refused_and_untouched(
        self, tmp_path: Path, home: Path, content: bytes
    ) -> None:
        cfg = tmp_path / "cfg"
        cfg.mkdir()
        (cfg / "settings.json").write_bytes(content)
        with pytest.raises(SettingsError) as err:
            install(claude_target(cfg), home=home)
        assert "\n" not in str(err.value) and "settings.json" in str(err.value)
        with pytest.raises(SettingsError):
            uninstall(claude_target(cfg))
        assert (cfg / "settings.json").read_bytes() == content
        assert sorted(p.name for p in cfg.iterdir()) == ["settings.json"]
        assert not status(claude_target(cfg), home=home).will_run

    def test_symlinked_settings_are_written_through(self, tmp_path: Path, home: Path) -> None:
        shared = tmp_path / "shared" / "settings.json"
        raw = write_json(shared, {"theme": "dark"})
        profiles = [tmp_path / "p1", tmp_path / "p2"]
        for cfg in profiles:
            cfg.mkdir()
            (cfg / "settings.json").symlink_to(shared)
        install(claude_target(profiles[0]), home=home)
        for cfg in profiles:
            assert (cfg / "settings.json").is_symlink()
            assert (cfg / "settings.json").resolve() == shared
            assert status(claude_target(cfg), home=home).will_run
        assert settings(profiles[1])["theme"] == "dark"
        assert (shared.parent / "settings.json.fleet-backup").read_bytes() == raw
        assert not install(claude_target(profiles[1]), home=home).changed
        uninstall(claude_target(profiles[1]))
        assert shared.read_bytes() == raw and (profiles[0] / "settings.json").is_symlink()

    def test_keeps_the_file_mode(self, tmp_path: Path, home: Path) -> None:
        cfg = tmp_path / "cfg"
        write_json(cfg / "settings.json", {})
        (cfg / "settings.json").chmod(0o640)
        install(claude_target(cfg), home=home)
        assert (cfg / "settings.json").stat().st_mode & 0o777 == 0o640
        assert not list(cfg.glob(".settings.json.*.tmp"))

    def test_status_says_when_the_hook_cannot_run(self, tmp_path: Path, home: Path) -> None:
        cfg = tmp_path / "cfg"
        assert not status(claude_target(cfg), home=home).will_run
        install(claude_target(cfg), home=home)
        launcher = launcher_path(home)
        launcher.write_text(launcher.read_text().replace(
            str(hook_script_path()), str(tmp_path / "gone" / "fleet_hook.py")))
        st = status(claude_target(cfg), home=home)
        assert not st.will_run and any("which is gone" in p for p in st.problems)
        launcher.unlink()
        st = status(claude_target(cfg), home=home)
        assert not st.will_run and any("launcher" in p and "missing" in p for p in st.problems)

        install(claude_target(cfg), home=home)
        data = settings(cfg)
        data["hooks"]["Stop"][0]["hooks"][0]["command"] = shlex.join(
            ["/nonexistent/python3", "-I", "-S", str(hook_script_path()), "--tool", "claude"]
        )
        write_json(cfg / "settings.json", data)
        st = status(claude_target(cfg), home=home)
        assert not st.will_run and any("interpreter" in p for p in st.problems)

    def test_status_sees_a_missing_event_and_disabled_hooks(
        self, tmp_path: Path, home: Path
    ) -> None:
        cfg = tmp_path / "cfg"
        install(claude_target(cfg), home=home)
        data = settings(cfg)
        del data["hooks"]["Stop"]
        data["disableAllHooks"] = True
        write_json(cfg / "settings.json", data)
        st = status(claude_target(cfg), home=home)
        assert st.missing == ("Stop",) and not st.will_run
        assert any("disableAllHooks" in p for p in st.problems)


# -- Codex -------------------------------------------------------------------------------------


def recipe_hash(event_snake: str, matcher: str | None, command: str, timeout: int = 600) -> str:
    """The trust hash recipe of REAL-CLIENTS.md, written out independently of fleet's, with what
    Codex 0.171.0's app-server (hooks/list) showed besides: the matcher of an event without
    matchers is left out, and SessionEnd/Interrupt handlers get 1 s by default, at most 3 s."""
    identity: dict[str, Any] = {
        "event_name": event_snake,
        "hooks": [{"async": False, "command": command, "timeout": timeout, "type": "command"}],
    }
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


SNAKE = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt_submit",
    "PreToolUse": "pre_tool_use",
    "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
    "Stop": "stop",
    "Interrupt": "interrupt",
    "SessionEnd": "session_end",
}

USER_CONFIG = """\
# my codex config
model = "gpt-5"  # the default

[projects."/home/me/repo"]
trust_level = "trusted"
"""


def trust_state(codex: Path) -> dict[str, Any]:
    doc = tomlkit.parse((codex / "config.toml").read_text()).unwrap()
    state: dict[str, Any] = doc.get("hooks", {}).get("state", {})
    return state


class TestCodex:
    def test_install_trusts_each_handler(self, tmp_path: Path, home: Path) -> None:
        codex = tmp_path / "codex"
        codex.mkdir()
        (codex / "config.toml").write_text(USER_CONFIG)
        install(codex_target(codex), home=home)
        hooks = json.loads((codex / "hooks.json").read_text())["hooks"]
        # every event Codex fires but PreToolUse, which fleet leaves out on purpose
        assert set(hooks) == set(CODEX_EVENTS) == set(SNAKE) - {"PreToolUse"}
        command = hook_command("codex", home=home)
        state = trust_state(codex)
        assert len(state) == len(CODEX_EVENTS)
        for event, groups in hooks.items():
            matcher = None if event in ("UserPromptSubmit", "Stop", "Interrupt") else "*"
            short = event in ("SessionEnd", "Interrupt")
            handler: dict[str, Any] = {"type": "command", "command": command}
            if short:
                handler["timeout"] = 3
            group: dict[str, Any] = {"hooks": [handler]}
            if matcher:
                group = {"matcher": matcher, **group}
            assert groups == [group]
            key = f"{codex / 'hooks.json'}:{SNAKE[event]}:0:0"
            digest = recipe_hash(SNAKE[event], matcher, command, 3 if short else 600)
            assert state[key] == {"trusted_hash": digest}
        text = (codex / "config.toml").read_text()
        assert text.startswith(USER_CONFIG)  # comments and layout kept
        st = status(codex_target(codex), home=home)
        assert st.will_run and st.untrusted == ()

    def test_reinstall_and_uninstall_round_trip(self, tmp_path: Path, home: Path) -> None:
        codex = tmp_path / "codex"
        codex.mkdir()
        (codex / "config.toml").write_text(USER_CONFIG)
        user_hooks = {"hooks": {"Stop": [{"hooks": [USER_HOOK]}]}}
        raw_hooks = write_json(codex / "hooks.json", user_hooks)
        install(codex_target(codex), home=home)
        files = {p: p.read_bytes() for p in (codex / "hooks.json", codex / "config.toml")}
        assert not install(codex_target(codex), home=home).changed
        assert {p: p.read_bytes() for p in files} == files
        uninstall(codex_target(codex))
        assert (codex / "config.toml").read_text() == USER_CONFIG
        assert (codex / "hooks.json").read_bytes() == raw_hooks

    def test_users_trust_follows_its_handler(self, tmp_path: Path, home: Path) -> None:
        codex = tmp_path / "codex"
        install(codex_target(codex), home=home)
        # The user adds their own Stop group after fleet's and trusts it (index 1).
        data = json.loads((codex / "hooks.json").read_text())
        data["hooks"]["Stop"].append({"hooks": [USER_HOOK]})
        write_json(codex / "hooks.json", data)
        doc = tomlkit.parse((codex / "config.toml").read_text())
        user_hash = recipe_hash("stop", None, USER_HOOK["command"])
        doc["hooks"]["state"][f"{codex / 'hooks.json'}:stop:1:0"] = {"trusted_hash": user_hash}  # type: ignore[index]
        (codex / "config.toml").write_text(tomlkit.dumps(doc))

        uninstall(codex_target(codex))
        assert json.loads((codex / "hooks.json").read_text())["hooks"] == {
            "Stop": [{"hooks": [USER_HOOK]}]
        }
        assert trust_state(codex) == {
            f"{codex / 'hooks.json'}:stop:0:0": {"trusted_hash": user_hash}
        }
        install(codex_target(codex), home=home)
        state = trust_state(codex)
        assert state[f"{codex / 'hooks.json'}:stop:0:0"] == {"trusted_hash": user_hash}
        assert f"{codex / 'hooks.json'}:stop:1:0" in state
        assert status(codex_target(codex), home=home).will_run

    def test_status_sees_a_stale_trust_hash(self, tmp_path: Path, home: Path) -> None:
        codex = tmp_path / "codex"
        install(codex_target(codex), home=home)
        text = (codex / "config.toml").read_text()
        key = f"{codex / 'hooks.json'}:stop:0:0"
        doc = tomlkit.parse(text)
        doc["hooks"]["state"][key]["trusted_hash"] = "sha256:" + "0" * 64  # type: ignore[index]
        (codex / "config.toml").write_text(tomlkit.dumps(doc))
        st = status(codex_target(codex), home=home)
        assert not st.will_run and st.untrusted == ("Stop",)
        install(codex_target(codex), home=home)
        assert status(codex_target(codex), home=home).will_run

    def test_trust_keys_name_the_resolved_codex_home(self, tmp_path: Path, home: Path) -> None:
        real = tmp_path / "real-codex"
        real.mkdir()
        link = tmp_path / "codex-link"
        link.symlink_to(real)
        install(codex_target(link), home=home)
        keys = list(trust_state(real))
        assert len(keys) == len(CODEX_EVENTS)
        assert all(k.startswith(f"{real / 'hooks.json'}:") for k in keys)
        assert status(codex_target(link), home=home).will_run
        uninstall(codex_target(link))
        assert trust_state(real) == {}

    @pytest.mark.parametrize(
        ("event", "group", "identity"),
        [
            ("Stop", {"matcher": "*", "hooks": [{"command": "x"}]}, ("stop", None, 600)),
            ("SessionEnd", {"hooks": [{"command": "x"}]}, ("session_end", None, 1)),
            ("SessionEnd", {"hooks": [{"command": "x", "timeout": 5}]}, ("session_end", None, 3)),
            ("Interrupt", {"hooks": [{"command": "x", "timeout": 2}]}, ("interrupt", None, 2)),
            ("PreToolUse", {"matcher": "Bash", "hooks": [{"command": "x"}]},
             ("pre_tool_use", "Bash", 600)),
        ],
    )
    def test_trust_hash_of_codex_defaults(
        self, event: str, group: dict[str, Any], identity: tuple[str, str | None, int]
    ) -> None:
        from fleet._codex_trust import codex_trust_hash

        snake, matcher, timeout = identity
        assert codex_trust_hash(event, group) == recipe_hash(snake, matcher, "x", timeout)

    def test_status_sees_hooks_disabled(self, tmp_path: Path, home: Path) -> None:
        codex = tmp_path / "codex"
        install(codex_target(codex), home=home)
        with (codex / "config.toml").open("a") as f:
            f.write("\n[features]\nhooks = false\n")
        st = status(codex_target(codex), home=home)
        assert not st.will_run and any("disables hooks" in p for p in st.problems)

    def test_malformed_config_toml_leaves_both_files_untouched(
        self, tmp_path: Path, home: Path
    ) -> None:
        codex = tmp_path / "codex"
        codex.mkdir()
        (codex / "config.toml").write_bytes(b"model = [unclosed\n")
        hooks_raw = write_json(codex / "hooks.json", {"hooks": {}})
        with pytest.raises(SettingsError, match=r"config\.toml is not valid TOML"):
            install(codex_target(codex), home=home)
        assert (codex / "config.toml").read_bytes() == b"model = [unclosed\n"
        assert (codex / "hooks.json").read_bytes() == hooks_raw

    def test_hooks_key_that_is_not_a_table_is_refused(self, tmp_path: Path, home: Path) -> None:
        codex = tmp_path / "codex"
        codex.mkdir()
        (codex / "config.toml").write_text('hooks = "no"\n')
        with pytest.raises(SettingsError, match="not a table"):
            install(codex_target(codex), home=home)
        assert not (codex / "hooks.json").exists()
