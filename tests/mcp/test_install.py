"""``fleet mcp install|uninstall|status``: merge-safe, like ``fleet hooks install``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomlkit

from fleet._cli import main
from fleet._cli._common import Exit
from fleet._mcp import install

SERVE = ["mcp", "serve"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_claude_code_install_merges_and_is_idempotent(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, home: Path
) -> None:
    cfg = tmp_path / "claude"
    cfg.mkdir()
    state = cfg / ".claude.json"
    state.write_text(json.dumps({
        "hasCompletedOnboarding": True,
        "mcpServers": {"other": {"type": "stdio", "command": "other-server", "args": []}},
    }))
    code, out, _ = run(capsys, "mcp", "install", "--config-dir", str(cfg), "--repo",
                       str(tmp_path), "--max-wait", "40", "--json")
    assert code == Exit.OK
    [change] = json.loads(out)
    assert change["changed"] and change["file"] == str(state)
    data = json.loads(state.read_text())
    assert data["hasCompletedOnboarding"] is True
    assert data["mcpServers"]["other"]["command"] == "other-server"
    entry = data["mcpServers"]["fleet"]
    assert entry["type"] == "stdio" and entry["command"] == str(Path(sys.executable).absolute())
    assert entry["args"] == ["-m", "fleet", "--home", str(home), *SERVE, "--repo",
                             str(tmp_path.resolve()), "--max-wait", "40"]
    assert Path(change["backup"]).is_file()
    before = state.read_bytes()
    code, out, _ = run(capsys, "mcp", "install", "--config-dir", str(cfg), "--repo",
                       str(tmp_path), "--max-wait", "40", "--json")
    assert code == Exit.OK and json.loads(out)[0]["changed"] is False
    assert state.read_bytes() == before
    code, out, _ = run(capsys, "mcp", "status", "--config-dir", str(cfg), "--repo",
                       str(tmp_path), "--max-wait", "40", "--json")
    assert code == Exit.OK and json.loads(out)[0]["state"] == "installed"
    code, out, _ = run(capsys, "mcp", "status", "--config-dir", str(cfg), "--json")
    assert code == Exit.ERROR and json.loads(out)[0]["state"] == "different"
    # the entry is what `claude mcp add` would write, so the real client takes it (e2e tests)
    code, out, _ = run(capsys, "mcp", "uninstall", "--config-dir", str(cfg))
    assert code == Exit.OK and "removed" in out
    assert json.loads(state.read_text())["mcpServers"] == {
        "other": {"type": "stdio", "command": "other-server", "args": []}}


def test_a_malformed_file_and_a_server_that_is_not_fleets_are_left_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cfg = tmp_path / "claude"
    cfg.mkdir()
    state = cfg / ".claude.json"
    state.write_text("{not json")
    code, out, err = run(capsys, "mcp", "install", "--config-dir", str(cfg))
    assert (code, out) == (Exit.ERROR, "")
    assert err.startswith(f"fleet: {state} is not valid JSON") and err.count("\n") == 1
    assert state.read_text() == "{not json"
    state.write_text(json.dumps({"mcpServers": {"fleet": {"command": "npx", "args": ["x"]}}}))
    for action in ("install", "uninstall"):
        code, _, err = run(capsys, "mcp", action, "--config-dir", str(cfg))
        assert code == Exit.ERROR and "not fleet's; left it untouched" in err
    assert json.loads(state.read_text())["mcpServers"]["fleet"]["command"] == "npx"
    code, _, _ = run(capsys, "mcp", "install", "--config-dir", str(cfg), "--name", "fleet2")
    assert code == Exit.OK
    assert set(json.loads(state.read_text())["mcpServers"]) == {"fleet", "fleet2"}


def test_codex_install_keeps_the_rest_of_config_toml(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text('# my settings\nmodel = "gpt-x"\n\n[mcp_servers.docs]\ncommand = "docs"\n')
    code, _, _ = run(capsys, "mcp", "install", "--codex-home", str(codex_home), "--key-from",
                     "env:MY_KEY", "--env-var", "EXTRA_VAR")
    assert code == Exit.OK
    text = config.read_text()
    assert text.startswith('# my settings\nmodel = "gpt-x"\n')
    doc = tomlkit.parse(text).unwrap()
    assert doc["mcp_servers"]["docs"] == {"command": "docs"}
    table = doc["mcp_servers"]["fleet"]
    assert table["args"][-4:] == [*SERVE, "--key-from", "env:MY_KEY"]
    assert table["required"] is True and table["tool_timeout_sec"] == install.CODEX_TOOL_TIMEOUT
    assert {"MY_KEY", "EXTRA_VAR", "FLEET_SETTINGS"} <= set(table["env_vars"])
    before = config.read_bytes()
    code, out, _ = run(capsys, "mcp", "install", "--codex-home", str(codex_home), "--key-from",
                       "env:MY_KEY", "--env-var", "EXTRA_VAR")
    assert code == Exit.OK and "unchanged" in out and config.read_bytes() == before
    code, _, _ = run(capsys, "mcp", "uninstall", "--codex-home", str(codex_home))
    assert code == Exit.OK
    assert tomlkit.parse(config.read_text()).unwrap() == {
        "model": "gpt-x", "mcp_servers": {"docs": {"command": "docs"}}}


def test_print_shows_the_claude_mcp_add_line_and_the_codex_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, home: Path
) -> None:
    code, out, _ = run(capsys, "mcp", "install", "--print")
    assert code == Exit.OK
    python = str(Path(sys.executable).absolute())
    assert f"claude mcp add --scope user fleet -- {python} -m fleet --home {home} mcp serve" in out
    assert "[mcp_servers.fleet]" in out
    code, out, _ = run(capsys, "mcp", "install", "--print", "--json")
    printed = json.loads(out)
    assert printed["command"] == [python, "-m", "fleet", "--home", str(home), *SERVE]
    assert not list(tmp_path.iterdir())  # nothing written


def test_serve_without_the_sdk_says_how_to_install_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import fleet._mcp

    monkeypatch.setattr(fleet._mcp, "sdk_available", lambda: False)
    code, out, err = run(capsys, "mcp", "serve")
    assert (code, out) == (Exit.ERROR, "")
    assert err == f"fleet: {fleet._mcp.sdk_missing()}\n"
    assert err.startswith(f"fleet: {fleet._mcp.SDK_MISSING}: ") and "[mcp]'" in err


def test_import_fleet_does_not_import_the_sdk() -> None:
    code = ("import sys, fleet, fleet._cli, fleet._mcp, fleet._mcp.tools, fleet._mcp.install; "
            "from fleet._cli import build_parser; build_parser(); "
            "assert not [m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')], "
            "sorted(m for m in sys.modules if m.startswith('mcp'))")
    subprocess.run([sys.executable, "-c", code], check=True)
