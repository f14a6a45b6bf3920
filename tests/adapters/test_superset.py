"""Superset specifics: host discovery, the token kept secret, API drift, agent configs, names,
flags that differ between CLI builds, and the hand-over routes."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

from fleet._errors import Refused, SettingsError
from fleet.adapters._base import LaunchSpec
from fleet.adapters.superset import (
    HostAPIChanged,
    MissingAgentConfig,
    NoHost,
    SupersetAdapter,
    SupersetHostError,
    config_label,
    match_config,
    workspace_name,
)
from fleet.adapters.superset_host import HostManifest, SupersetHost, discover_host
from tests.adapters.conftest import Rig, git, make_rig
from tests.adapters.superset_fake import FakeSupersetHost
from tests.conftest import Repo


def rig_fixture(kind: str) -> Any:
    @pytest.fixture
    def fixture(tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
        yield from make_rig(kind, tmp_path, repo, monkeypatch)

    return fixture


cli = rig_fixture("superset-cli")
cli_0822 = rig_fixture("superset-cli-0822")
host = rig_fixture("superset-host")


def cli_calls(rig: Rig, *words: str) -> list[tuple[str, ...]]:
    return [c for c in rig.runner.calls if c[1 : 1 + len(words)] == words and "--help" not in c]


def procs(rig: Rig) -> list[str]:
    assert rig.host is not None
    return [p for p, _ in rig.host.calls]


# -- discovery --------------------------------------------------------------------------------


def write_manifest(root: Path, org: str, **data: Any) -> None:
    path = root / "host" / org / "manifest.json"
    path.parent.mkdir(parents=True)
    path.write_text(data.pop("raw", None) or json.dumps(data))


def test_discovery_skips_bad_and_dead_manifests(tmp_path: Path) -> None:
    write_manifest(tmp_path, "a-bad", raw="{not json")
    write_manifest(tmp_path, "b-dead", pid=999_999_999, endpoint="http://127.0.0.1:1",
                   authToken="t-dead")
    write_manifest(tmp_path, "c-no-token", pid=os.getpid(), endpoint="http://127.0.0.1:2")
    write_manifest(tmp_path, "d-live", pid=os.getpid(), endpoint="http://127.0.0.1:3/",
                   authToken="t-live", organizationId="org")
    write_manifest(tmp_path, "e-later", pid=os.getpid(), endpoint="http://127.0.0.1:4",
                   authToken="t-later")
    found = discover_host(tmp_path)
    assert found.endpoint == "http://127.0.0.1:3"
    assert found.token == "t-live"
    assert "t-live" not in repr(found)


def test_no_live_host_says_how_to_start_one(tmp_path: Path) -> None:
    write_manifest(tmp_path, "dead", pid=999_999_999, endpoint="http://x", authToken="t")
    with pytest.raises(NoHost, match="superset start"):
        discover_host(tmp_path)


def test_auto_route_without_login_or_host_fails_clearly(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.adapters.conftest import SUPERSET

    monkeypatch.setenv("FAKE_SUPERSET_LOGGED_IN", "0")
    adapter = SupersetAdapter(superset=SUPERSET, superset_home=tmp_path / "none")
    with pytest.raises(NoHost):
        adapter.status()


# -- the token --------------------------------------------------------------------------------


def test_the_token_never_shows(host: Rig, caplog: pytest.LogCaptureFixture,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert host.host is not None
    token = host.host.token
    caplog.set_level(logging.DEBUG)
    adapter = host.adapter
    assert isinstance(adapter, SupersetAdapter)
    seen: list[str] = [repr(adapter), repr(adapter.backend), str(adapter.status())]
    client: SupersetHost = adapter.backend.host  # type: ignore[attr-defined]
    seen.append(repr(client))
    for call in (
        lambda: client.query("nothing.here"),  # 404: API changed
        lambda: client.mutate("agents.run", {"workspaceId": "nope", "agent": "x"}),  # 404 row
        lambda: SupersetHost(attrs.evolve(client.manifest, token="wrong")).query("project.list"),
    ):
        with pytest.raises(SupersetHostError) as info:
            call()
        seen += [str(info.value), repr(info.value)]
    host.host.stop()
    with pytest.raises(SupersetHostError) as info:
        client.query("project.list")
    seen += [str(info.value), repr(info.value), repr(info.value.__cause__)]
    out = capsys.readouterr()
    seen += [out.out, out.err, caplog.text]
    assert all(token not in text for text in seen)
    assert host.host.unauthorized == 1


def test_the_fleet_cli_status_hides_the_token(host: Rig,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from fleet._cli import main

    assert host.host is not None
    assert main(["superset", "status", "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["route"] == "host"
    assert host.host.token not in out


def test_a_missing_procedure_is_a_changed_api_not_a_failure() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == "Bearer sekrit"
        return httpx.Response(404, json={"error": {"json": {
            "message": 'No procedure found on path "agents.run"', "code": -32004}}})

    manifest = HostManifest(path=Path("/m.json"), pid=1, endpoint="http://h", token="sekrit")
    client = SupersetHost(manifest, transport=httpx.MockTransport(answer))
    with pytest.raises(HostAPIChanged, match=r"API has changed \(agents.run is gone\)"):
        client.mutate("agents.run", {})


def test_other_host_errors_keep_their_message_and_status() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"error": {"json": {"message": "disk full sekrit"}}})

    manifest = HostManifest(path=Path("/m.json"), pid=1, endpoint="http://h", token="sekrit")
    client = SupersetHost(manifest, transport=httpx.MockTransport(answer))
    with pytest.raises(SupersetHostError) as info:
        client.query("project.list")
    assert info.value.status == 500
    assert str(info.value) == "project.list failed: disk full <redacted>"
    assert not isinstance(info.value, HostAPIChanged)


def test_superjson_envelope_on_the_wire() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"result": {"data": {"json": {"ok": 1}}}})

    manifest = HostManifest(path=Path("/m.json"), pid=1, endpoint="http://h", token="t")
    client = SupersetHost(manifest, transport=httpx.MockTransport(answer))
    assert client.query("terminal.list", {"workspaceId": "w"}) == {"ok": 1}
    assert client.mutate("terminal.send", {"text": "hi"}) == {"ok": 1}
    get, post = seen
    assert get.method == "GET" and get.url.path == "/trpc/terminal.list"
    assert json.loads(get.url.params["input"]) == {"json": {"workspaceId": "w"}}
    assert post.method == "POST" and json.loads(post.content) == {"json": {"text": "hi"}}


# -- agent configs and names ------------------------------------------------------------------


def spec_for(rig: Rig, profile: str, **kw: Any) -> LaunchSpec:
    return attrs.evolve(rig.spec("w1", rig.brief("Brief.\n")), profile=profile, **kw)


def test_a_missing_config_says_exactly_what_to_add(cli: Rig) -> None:
    ws = cli.adapter.create_workspace("w1", repo=cli.repo.path, base="main", label="x")
    adapter = cli.adapter
    assert isinstance(adapter, SupersetAdapter)
    adapter.clausona = "/usr/local/bin/clausona"
    with pytest.raises(MissingAgentConfig) as info:
        adapter.start(ws, spec_for(cli, "claude:extra", effort="high"))
    err = info.value
    assert err.label == "Claude · extra (sonnet)"
    assert err.command == "/usr/local/bin/clausona"
    assert err.config_args == ["run", "claude:extra", "--", "--permission-mode", "acceptEdits",
                               "--model", "sonnet", "--effort", "high", "--strict-mcp-config"]
    assert "Settings → Agents" in str(err) and json.dumps(err.config_args) in str(err)
    assert cli_calls(cli, "agents", "create") == []


def test_the_cli_route_never_adds_a_config_even_when_allowed(cli: Rig) -> None:
    adapter = cli.adapter
    assert isinstance(adapter, SupersetAdapter)
    adapter.add_missing_configs = True
    with pytest.raises(MissingAgentConfig):
        adapter.config_for(spec_for(cli, "claude:extra"))


def test_the_host_route_adds_a_config_once_the_user_agreed(host: Rig) -> None:
    adapter = host.adapter
    assert isinstance(adapter, SupersetAdapter) and host.host is not None
    with pytest.raises(MissingAgentConfig):
        adapter.config_for(spec_for(host, "claude:extra"))
    assert "settings.agentConfigs.add" not in procs(host)
    adapter.add_missing_configs = True
    ws = adapter.create_workspace("w1", repo=host.repo.path, base="main", label="x")
    handle = adapter.start(ws, spec_for(host, "claude:extra"))
    added = host.host.configs[-1]
    assert added["args"][:2] == ["run", "claude:extra"]
    assert added["label"] == "Claude · extra (sonnet)"
    assert host.host.sessions[handle["terminal"]].argv[:3] == [added["command"], "run",
                                                               "claude:extra"]


def test_configs_match_profiles_by_their_args() -> None:
    configs = [
        {"id": "a", "command": "/bin/claude", "args": ["run", "claude:work"]},
        {"id": "b", "command": "/opt/bin/clausona", "args": ["run", "work", "--"]},
        {"id": "c", "command": "clausona", "args": ["run", "claude:work", "--", "--model", "x"]},
        {"id": "d", "command": "clausona", "args": ["run", "codex:side"]},
        {"id": "e", "command": "clausona", "args": ["list"]},
    ]
    assert match_config(configs, "claude:work")["id"] == "c"  # type: ignore[index]
    assert match_config(configs, "work")["id"] == "b"  # type: ignore[index]
    assert match_config(configs, "side")["id"] == "d"  # type: ignore[index]
    assert match_config(configs, "claude:side") is None
    assert match_config(configs, "CLAUDE:WORK")["id"] == "c"  # type: ignore[index]


@pytest.mark.parametrize(
    ("task", "label"),
    [("Paths", "work (Opus 5.5)"), ("Rewrite the whole parser", "work"), ("x", "a" * 40)],
)
def test_workspace_names_fit_the_sidebar(task: str, label: str) -> None:
    name = workspace_name(task, label)
    assert len(name) < 26
    if len(label) < 15:
        assert name.endswith(f" · {label}")


def test_config_label_format() -> None:
    spec = LaunchSpec(worker="w", brief=Path("/b"), profile="claude:work", model="Sonnet 5.5")
    assert config_label(spec) == "Claude · work (Sonnet 5.5)"


def test_long_workspace_labels_are_cut(cli: Rig) -> None:
    cli.adapter.create_workspace("w1", repo=cli.repo.path, base="main",
                                 label="A very long task name · work (Opus)")
    (create,) = cli_calls(cli, "workspaces", "create")
    assert len(create[create.index("--name") + 1]) < 26


def test_a_repo_that_is_no_superset_project_is_refused(cli: Rig, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="not a Superset project"):
        cli.adapter.create_workspace("w1", repo=tmp_path, base="main", label="x")


# -- build differences ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["superset-cli", "superset-cli-0822"])
def test_local_is_passed_where_the_build_has_it(
    kind: str, tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminals_local = kind == "superset-cli"
    for rig in make_rig(kind, tmp_path, repo, monkeypatch):
        ws, _ = rig.started("w1")
        rig.adapter.read(ws)
        (create,) = cli_calls(rig, "workspaces", "create")
        assert "--local" in create  # required on every build
        (read,) = cli_calls(rig, "terminals", "read")
        assert ("--local" in read) is terminals_local
        (agent,) = cli_calls(rig, "agents", "create")
        assert ("--local" in agent) is terminals_local
        assert all("--json" in c for c in cli_calls(rig))


def test_cli_hand_over_carries_the_brief_where_from_terminal_exists(cli: Rig) -> None:
    """Superset's `--from-terminal` writes its own prompt and refuses fleet's, so the brief
    would be lost: fleet hands over with its own prompt, the transcript and the brief."""
    ws, spec = cli.started("w1")
    cli.adapter.hand_over(ws, attrs.evolve(spec, profile="claude:side"))
    _, handoff = cli_calls(cli, "agents", "create")
    assert "--from-terminal" not in handoff
    note = next(ws.worktree.glob(".fleet-handover-*.md"))
    assert handoff[handoff.index("--prompt") + 1] == (
        f"Read the hand-over note in {note} and do what it says.")
    text = note.read_text()
    assert str(spec.brief) in text and "<previous-terminal-output>" in text
    assert cli_calls(cli, "terminals", "read")  # the old terminal's output, read by fleet


def test_cli_hand_over_on_an_older_build_sends_a_note_file(cli_0822: Rig) -> None:
    rig = cli_0822
    ws, spec = rig.started("w1")
    rig.adapter.hand_over(ws, attrs.evolve(spec, profile="claude:side"))
    _, handoff = cli_calls(rig, "agents", "create")
    assert "--from-terminal" not in handoff
    note = next(ws.worktree.glob(".fleet-handover-*.md"))
    assert handoff[handoff.index("--prompt") + 1] == (
        f"Read the hand-over note in {note} and do what it says."
    )
    text = note.read_text()
    assert "You are taking over a task" in text and str(spec.brief) in text
    assert "<previous-terminal-output>" in text and "claude:work" in text
    assert git(ws.worktree, "status", "--porcelain") == ""


@pytest.mark.parametrize(
    ("kind", "proc"),
    [("superset-host", "terminal.transcript"), ("superset-host-0822", "terminal.snapshot")],
)
def test_host_hand_over_falls_back_to_the_screen_without_transcripts(
    kind: str, proc: str, tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rig in make_rig(kind, tmp_path, repo, monkeypatch):
        assert rig.host is not None
        ws, spec = rig.started("w1")
        handle = rig.adapter.hand_over(ws, attrs.evolve(spec, profile="claude:side"))
        assert proc in procs(rig)
        prompt = rig.host.sessions[handle["terminal"]].argv[-1]
        assert prompt.startswith("You are taking over a task")
        assert "Brief." not in prompt.split("<previous-terminal-output>")[0]
        assert "claude:work" in prompt  # the old terminal's screen went along
        assert rig.host.sessions[ws.handle["terminal"]].exited


def test_host_route_sends_the_brief_in_the_request_body(host: Rig) -> None:
    assert host.host is not None
    _ws, spec = host.started("w1", "Write the docs.\nThen stop.\n")
    (_, run), = [(p, d) for p, d in host.host.calls if p == "agents.run"]
    assert run["prompt"] == "Write the docs.\nThen stop."
    assert not any(spec.brief.read_text().strip() in " ".join(c) for c in host.runner.calls)


def test_describe_reads_superset_status_from_hook_events(host: Rig) -> None:
    assert host.host is not None
    ws, _ = host.started("w1")
    host.host.hook(ws.handle["terminal"], "PermissionRequest")
    info = host.adapter.describe(ws)
    assert info["status"] == "permission"
    assert "account" not in info["agent"]  # type: ignore[operator]
    host.host.hook(ws.handle["terminal"], "Stop")
    assert host.adapter.describe(ws)["status"] == "review"


def test_a_refused_delete_never_reaches_supersets_forceful_delete(host: Rig) -> None:
    ws, _ = host.started("w1")
    (ws.worktree / "draft.txt").write_text("unsaved\n")
    with pytest.raises(Refused):
        host.adapter.delete(ws)
    assert "workspace.delete" not in procs(host)
    assert (ws.worktree / "draft.txt").exists()


def test_the_fake_host_really_deletes_dirty_worktrees(host: Rig) -> None:
    """Why the guard matters: the host's delete is forceful (as Superset's is)."""
    assert host.host is not None
    ws, _ = host.started("w1")
    (ws.worktree / "draft.txt").write_text("unsaved\n")
    host.adapter.backend.delete(ws.handle["workspace"])  # type: ignore[union-attr]
    assert not ws.worktree.exists()


def test_fake_host_rejects_a_missing_token(tmp_path: Path) -> None:
    fake = FakeSupersetHost(tmp_path).start()
    try:
        response = httpx.get(f"{fake.endpoint}/trpc/project.list")
        assert response.status_code == 401
    finally:
        fake.stop()


@pytest.mark.parametrize("kind", ["superset-cli", "superset-host"])
def test_an_existing_workspace_on_the_branch_is_never_reused(
    kind: str, tmp_path: Path, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rig in make_rig(kind, tmp_path, repo, monkeypatch):
        rig.adapter.create_workspace("w1", repo=rig.repo.path, base="main", label="x")
        with pytest.raises(Refused, match="does not reuse"):
            rig.adapter.create_workspace("w1", repo=rig.repo.path, base="main", label="y")
