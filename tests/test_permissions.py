"""The permission policy: where it comes from, the flags it becomes, what a headless run
refuses, and how a coordinator's own mode is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet import _settings
from fleet._core.routing import Settings
from fleet._errors import Refused, SettingsError
from fleet._launch import claude_policy_args as claude_args
from fleet._launch import codex_policy_args as codex_args
from fleet._permissions import (
    PermissionPolicy,
    check_headless,
    coordinator_mode,
    default_policy,
    policy_from_settings,
    split_rules,
    task_layer,
    transcript_mode,
)
from fleet._plan import load_task_file

# -- the value ------------------------------------------------------------------------------


def test_policy_refuses_unknown_modes_and_bad_rules() -> None:
    with pytest.raises(SettingsError, match=r"unknown permission mode .yolo..*dontAsk"):
        PermissionPolicy(mode="yolo")
    with pytest.raises(SettingsError, match="unknown Codex sandbox"):
        PermissionPolicy(codex_sandbox="none")
    with pytest.raises(SettingsError, match="unknown Codex approval"):
        PermissionPolicy(codex_approval="sometimes")
    with pytest.raises(SettingsError, match="invalid tool rule"):
        PermissionPolicy(allowed_tools=["Read", "  "])
    with pytest.raises(SettingsError, match="invalid tool rule"):
        PermissionPolicy(add_dirs=["/a\nb"])


def test_policy_is_frozen_and_keyword_only() -> None:
    policy = PermissionPolicy(mode="dontAsk", allowed_tools=["Read"])
    assert policy.allowed_tools == ("Read",)
    with pytest.raises(AttributeError):
        policy.mode = "default"  # type: ignore[misc]
    with pytest.raises(TypeError):
        PermissionPolicy("dontAsk")  # type: ignore[call-arg]


def test_rules_split_on_commas_outside_parentheses() -> None:
    assert split_rules(["Read,Bash(git status:*)", "Bash(npm run test,lint)", " ", "Edit"]) == (
        "Read", "Bash(git status:*)", "Bash(npm run test,lint)", "Edit",
    )


# -- flags ----------------------------------------------------------------------------------


def test_claude_args_one_flag_per_rule() -> None:
    policy = PermissionPolicy(mode="dontAsk", allowed_tools=["Read", "Bash(git status:*)"],
                              disallowed_tools=["WebFetch"], add_dirs=["/data"])
    assert claude_args(policy) == [
        "--permission-mode", "dontAsk",
        "--allowedTools=Read", "--allowedTools=Bash(git status:*)",
        "--disallowedTools=WebFetch", "--add-dir=/data",
    ]


def test_claude_args_default_to_bypass() -> None:
    assert claude_args(PermissionPolicy()) == ["--permission-mode", "bypassPermissions"]


def test_codex_args_state_the_sandbox_and_overrides_that_parse_as_toml() -> None:
    import tomllib

    policy = PermissionPolicy(codex_sandbox="workspace-write", codex_approval="on-request",
                              add_dirs=['/tmp/with "quote"'])
    args = codex_args(policy)
    assert args[:2] == ["-s", "workspace-write"]
    assert args[2::2] == ["-c", "-c"]
    parsed = {k: v for a in args[3::2] for k, v in tomllib.loads(a).items()}
    assert parsed == {"approval_policy": "on-request",
                      "sandbox_workspace_write": {"writable_roots": ['/tmp/with "quote"']}}
    assert codex_args(PermissionPolicy()) == [
        "-s", "danger-full-access", "-c", 'approval_policy="never"']
    network = codex_args(PermissionPolicy(codex_sandbox="workspace-write", codex_network=True))
    assert network[-2:] == ["-c", "sandbox_workspace_write.network_access=true"]


# -- refusing and warning -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "plan"])
def test_prompting_modes_are_refused_with_the_modes_that_work(mode: str) -> None:
    with pytest.raises(Refused) as info:
        check_headless(PermissionPolicy(mode=mode), tool="claude", is_root=False)
    message = str(info.value)
    assert f"permission mode {mode}" in message
    assert "bypassPermissions, or dontAsk with --allowed-tools" in message
    assert "--insist" in message
    assert isinstance(info.value, PermissionError)


def test_insist_starts_a_prompting_mode_with_a_warning() -> None:
    warnings = check_headless(PermissionPolicy(mode="default"), tool="claude", is_root=False,
                              force=True)
    assert len(warnings) == 1 and "starting anyway" in warnings[0]


@pytest.mark.parametrize("mode", ["dontAsk", "bypassPermissions", "auto", None])
def test_modes_that_work_are_not_refused(mode: str | None) -> None:
    check_headless(PermissionPolicy(mode=mode, allowed_tools=["Read"]), tool="claude",
                   is_root=False)


def test_dont_ask_without_allowlist_warns() -> None:
    assert check_headless(PermissionPolicy(mode="dontAsk", allowed_tools=["Read"]),
                          tool="claude", is_root=False) == []
    (warning,) = check_headless(PermissionPolicy(mode="dontAsk"), tool="claude", is_root=False)
    assert "no --allowed-tools" in warning


def test_root_bypass_says_what_it_needs_and_sets_nothing() -> None:
    env: dict[str, str] = {}
    (warning,) = check_headless(PermissionPolicy(), tool="claude", is_root=True, env=env)
    assert "IS_SANDBOX=1" in warning and "sets nothing" in warning
    assert env == {}
    assert check_headless(PermissionPolicy(), tool="claude", is_root=True,
                          env={"IS_SANDBOX": "1"}) == []
    assert check_headless(PermissionPolicy(), tool="claude", is_root=False) == []


def test_codex_approval_and_sandbox_limits_are_warned() -> None:
    (warning,) = check_headless(PermissionPolicy(codex_approval="on-request"), tool="codex",
                                is_root=True)
    assert "approval policy on-request" in warning and "fails instead of asking" in warning
    warnings = check_headless(
        PermissionPolicy(codex_sandbox="workspace-write", allowed_tools=["Read"]),
        tool="codex", is_root=True)
    assert any(".git read-only and blocks the network" in w for w in warnings)
    assert any("no tool allowlist" in w for w in warnings)
    (open_net,) = check_headless(
        PermissionPolicy(codex_sandbox="workspace-write", codex_network=True), tool="codex",
        is_root=True)
    assert "read-only: the worker can neither commit nor push" in open_net
    assert check_headless(PermissionPolicy(), tool="codex", is_root=True) == []
    # A Claude mode that is refused for Claude means nothing to a Codex worker.
    assert check_headless(PermissionPolicy(mode="default"), tool="codex", is_root=True) == []


def test_codex_untrusted_is_refused_as_codex_refuses_it() -> None:
    with pytest.raises(SettingsError, match="no longer supported by Codex"):
        PermissionPolicy(codex_approval="untrusted")


# -- where the policy comes from ------------------------------------------------------------


RULES = {
    "claude": "bypassPermissions",
    "allowedTools": ["Read"],
    "codexSandbox": "workspace-write",
    "kinds": {"exploratory": {"mode": "dontAsk", "allowedTools": "Read,Grep"}},
    "profiles": {"claude:work": {"allowedTools": ["Read", "Bash(git:*)"], "addDirs": ["/d"]}},
}


def test_layers_override_in_order() -> None:
    assert policy_from_settings(RULES) == PermissionPolicy(
        mode="bypassPermissions", allowed_tools=["Read"], codex_sandbox="workspace-write")
    by_kind = policy_from_settings(RULES, kind="exploratory")
    assert (by_kind.mode, by_kind.allowed_tools) == ("dontAsk", ("Read", "Grep"))
    both = policy_from_settings(RULES, kind="exploratory", profile="claude:work")
    assert both.mode == "dontAsk" and both.allowed_tools == ("Read", "Bash(git:*)")
    assert both.add_dirs == ("/d",)
    task = policy_from_settings(RULES, profile="claude:work", task={"mode": "dontAsk"})
    assert task.mode == "dontAsk"
    cli = policy_from_settings(RULES, profile="claude:work", task={"mode": "dontAsk"},
                               cli=PermissionPolicy(mode="bypassPermissions",
                                                    allowed_tools=["Edit"]))
    assert (cli.mode, cli.allowed_tools, cli.add_dirs) == ("bypassPermissions", ("Edit",),
                                                           ("/d",))
    assert policy_from_settings(None) == PermissionPolicy()


def test_unknown_keys_and_shapes_are_one_line_errors() -> None:
    with pytest.raises(SettingsError, match=r"^permissions: unknown key 'allowTools'"):
        policy_from_settings({"allowTools": ["Read"]})
    with pytest.raises(SettingsError, match=r"permissions.profiles.p.mode must be non-empty"):
        policy_from_settings({"profiles": {"p": {"mode": ""}}}, profile="p")
    with pytest.raises(SettingsError, match=r"permissions\.kinds must be an object"):
        policy_from_settings({"kinds": ["x"]}, kind="x")
    with pytest.raises(SettingsError, match="unknown key 'profiles'"):
        task_layer({"profiles": {}})


def test_settings_file_keeps_texts_and_reads_lists(tmp_path: Path) -> None:
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"permissions": RULES}))
    settings = _settings.load_settings(path)
    assert settings.permissions == {"claude": "bypassPermissions",
                                    "codexSandbox": "workspace-write"}
    assert settings.permission_rules == RULES
    with pytest.raises(SettingsError, match=r"permissions\.allowedTools must be text or a list"):
        Settings.from_mapping({"permissions": {"allowedTools": [1]}})
    with pytest.raises(SettingsError, match=r"permissions\.claude must be text"):
        Settings.from_mapping({"permissions": {"claude": ["x"]}})
    with pytest.raises(SettingsError, match=r"permissions\.profiles\.p must be an object"):
        Settings.from_mapping({"permissions": {"profiles": {"p": "dontAsk"}}})


def test_settings_set_checks_a_nested_permission_key(tmp_path: Path) -> None:
    path = tmp_path / "fleet.json"
    _settings.set("permissions.profiles.claude:work.allowedTools", ["Read"], path)
    assert json.loads(path.read_text()) == {
        "permissions": {"profiles": {"claude:work": {"allowedTools": ["Read"]}}}}
    with pytest.raises(SettingsError, match="must be text or a list"):
        _settings.set("permissions.allowedTools", {"x": 1}, path)
    with pytest.raises(SettingsError, match="must be text"):
        _settings.set("permissions.claude", 3, path)


def _task_file(tmp_path: Path, table: str) -> Path:
    (tmp_path / "b.md").write_text("brief")
    path = tmp_path / "TASKS.toml"
    path.write_text(f'[[task]]\nname = "one"\nbrief = "b.md"\n{table}\n'
                    '[[task]]\nname = "two"\nbrief = "b.md"\n')
    return path


def test_task_file_permissions_are_read_and_checked(tmp_path: Path) -> None:
    tf = load_task_file(_task_file(
        tmp_path, 'permissions = { mode = "dontAsk", allowedTools = ["Read"] }'))
    assert tf.permissions == {"one": {"mode": "dontAsk", "allowedTools": ["Read"]}}
    policy = policy_from_settings({}, task=tf.permissions["one"])
    assert policy == PermissionPolicy(mode="dontAsk", allowed_tools=["Read"])
    with pytest.raises(SettingsError, match=r"task 'one': unknown permission mode 'ask'"):
        load_task_file(_task_file(tmp_path, 'permissions = { mode = "ask" }'))
    with pytest.raises(SettingsError, match=r"task 'one': permissions: unknown key 'allow'"):
        load_task_file(_task_file(tmp_path, 'permissions = { allow = "Read" }'))
    with pytest.raises(SettingsError, match=r"task 'one': permissions must be an object"):
        load_task_file(_task_file(tmp_path, 'permissions = "dontAsk"'))


# -- the coordinator's mode -----------------------------------------------------------------


def test_transcript_mode_is_the_last_one_recorded() -> None:
    lines = [
        json.dumps({"type": "permission-mode", "permissionMode": "auto"}),
        "not json permissionMode",
        json.dumps({"type": "user", "permissionMode": "acceptEdits"}),
        json.dumps({"type": "assistant"}),
        json.dumps(["permissionMode"]),
    ]
    assert transcript_mode(lines) == "acceptEdits"
    assert transcript_mode([]) is None


def _session(config: Path, session: str, *entries: dict[str, str]) -> None:
    project = config / "projects" / "-work-repo"
    project.mkdir(parents=True)
    (project / f"{session}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))


def test_coordinator_mode_reads_its_own_session(tmp_path: Path) -> None:
    config = tmp_path / "cfg"
    _session(config, "s-1", {"type": "user", "permissionMode": "auto"})
    env = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": "s-1", "CLAUDE_CONFIG_DIR": str(config)}
    assert coordinator_mode(env) == "auto"
    assert coordinator_mode({**env, "CLAUDE_CODE_SESSION_ID": "s-2"}) is None
    assert coordinator_mode({**env, "CLAUDECODE": ""}) is None
    assert coordinator_mode({**env, "CLAUDE_CODE_SESSION_ID": "../s-1"}) is None


def test_coordinator_mode_defaults_to_the_home_config(tmp_path: Path) -> None:
    _session(tmp_path / ".claude", "s-9", {"type": "user", "permissionMode": "plan"})
    env = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": "s-9"}
    assert coordinator_mode(env, home=tmp_path) == "plan"


def test_coordinator_mode_survives_an_unreadable_transcript(tmp_path: Path) -> None:
    def broken(path: Path) -> list[str]:
        raise PermissionError(13, "denied", str(path))

    env = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": "s", "CLAUDE_CONFIG_DIR": "/c"}
    seen: list[tuple[Path, str]] = []

    def glob(root: Path, pattern: str) -> list[Path]:
        seen.append((root, pattern))
        return [root / "x" / "s.jsonl"]

    assert coordinator_mode(env, glob=glob, read_lines=broken) is None
    assert seen == [(Path("/c/projects"), "*/s.jsonl")]


def test_default_policy_follows_an_auto_coordinator() -> None:
    policy, message = default_policy("auto", ["Read", "Bash(git:*)"])
    assert policy == PermissionPolicy(mode="dontAsk", allowed_tools=["Read", "Bash(git:*)"])
    assert message is not None and "auto mode" in message and "Read, Bash(git:*)" in message
    policy, message = default_policy("auto")
    assert message is not None and "--allowed-tools" in message
    check_headless(policy, tool="claude", is_root=False)
    for other in ("bypassPermissions", "default", None):
        policy, message = default_policy(other, ["Read"])
        assert policy.mode == "bypassPermissions" and message is None


@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
def test_a_prompting_mode_is_allowed_headless_when_the_coordinator_answers(mode: str) -> None:
    (warning,) = check_headless(PermissionPolicy(mode=mode), tool="claude", is_root=False,
                                answerer="coordinator")
    assert f"permission mode {mode}: each request waits for the coordinator" in warning
    assert "2.1.197 asks no hook in -p" in warning


def test_plan_and_unknown_answerers_stay_refused() -> None:
    with pytest.raises(Refused, match="permission mode plan"):
        check_headless(PermissionPolicy(mode="plan"), tool="claude", is_root=False,
                       answerer="coordinator")
    with pytest.raises(SettingsError, match="unknown answerer 'anyone'"):
        check_headless(PermissionPolicy(mode="default"), tool="claude", is_root=False,
                       answerer="anyone")
    with pytest.raises(Refused, match="default/acceptEdits with --answer coordinator"):
        check_headless(PermissionPolicy(mode="default"), tool="claude", is_root=False)
