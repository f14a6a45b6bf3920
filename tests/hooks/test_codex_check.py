"""Asking Codex itself (``codex app-server`` → ``hooks/list``) whether it trusts fleet's hook."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fleet._hook_install import CODEX_EVENTS, codex_target, install, status
from tests.e2e.binaries import AgentsMissing, codex_sets, find_agents

#: A stand-in for ``codex app-server`` whose trust recipe differs from fleet's copy, as a future
#: Codex's might: it hashes the command alone.
FAKE_CODEX = r'''#!PYTHON
import hashlib, json, os, sys, tomllib
if sys.argv[1:] != ["app-server"]:
    sys.exit("fake codex: only app-server")
if os.environ.get("FAKE_CODEX_FAIL"):
    sys.exit(3)
home = os.environ["CODEX_HOME"]
def snake(event):
    return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(event))
for line in sys.stdin:
    message = json.loads(line)
    if message.get("id") == 1:
        print(json.dumps({"id": 1, "result": {"codexHome": home}}), flush=True)
    elif message.get("id") == 2:
        hooks_file = os.path.join(os.path.realpath(home), "hooks.json")
        with open(hooks_file) as f:
            groups_by_event = json.load(f).get("hooks", {})
        try:
            with open(os.path.join(home, "config.toml"), "rb") as f:
                state = tomllib.load(f).get("hooks", {}).get("state", {})
        except FileNotFoundError:
            state = {}
        listed = []
        for event, groups in groups_by_event.items():
            for gi, group in enumerate(groups):
                for hi, handler in enumerate(group["hooks"]):
                    key = f"{hooks_file}:{snake(event)}:{gi}:{hi}"
                    digest = "sha256:" + hashlib.sha256(handler["command"].encode()).hexdigest()
                    have = state.get(key, {}).get("trusted_hash")
                    trust = "trusted" if have == digest else ("modified" if have else "untrusted")
                    listed.append({"key": key, "command": handler["command"], "source": "user",
                                   "currentHash": digest, "trustStatus": trust})
        print(json.dumps({"id": 2, "result": {"data": [{"cwd": home, "hooks": listed}]}}),
              flush=True)
'''


@pytest.fixture
def fake_codex(tmp_path: Path) -> str:
    path = tmp_path / "bin" / "codex"
    path.parent.mkdir()
    path.write_text(FAKE_CODEX.replace("PYTHON", sys.executable, 1))
    path.chmod(0o755)
    return str(path)


def test_install_takes_codexs_word_over_the_recipe(
    tmp_path: Path, home: Path, fake_codex: str
) -> None:
    codex_home = tmp_path / "codex"
    target = codex_target(codex_home)
    change = install(target, home=home, codex=fake_codex)
    check = change.codex_check
    assert check is not None and check.error is None
    assert len(check.repaired) == len(CODEX_EVENTS)
    assert check.ok and len(check.trusted) == len(CODEX_EVENTS)
    assert status(target, home=home, codex=fake_codex).will_run
    # fleet's own copy of the recipe no longer agrees, and says so when Codex is not asked.
    offline = status(target, home=home)
    assert not offline.will_run and set(offline.untrusted) == set(CODEX_EVENTS)
    # Asking again changes nothing.
    again = install(target, home=home, codex=fake_codex)
    assert not again.changed and again.codex_check is not None and again.codex_check.ok


def test_codex_says_which_entries_it_does_not_trust(
    tmp_path: Path, home: Path, fake_codex: str
) -> None:
    codex_home = tmp_path / "codex"
    install(codex_target(codex_home), home=home)  # recipe hashes only: the fake rejects them
    st = status(codex_target(codex_home), home=home, codex=fake_codex)
    assert not st.will_run and set(st.untrusted) == set(CODEX_EVENTS)
    assert any("does not trust" in p for p in st.problems)
    assert st.codex_check is not None and st.codex_check.untrusted


def test_a_failing_codex_is_reported_not_fatal(
    tmp_path: Path, home: Path, fake_codex: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CODEX_FAIL", "1")
    codex_home = tmp_path / "codex"
    change = install(codex_target(codex_home), home=home, codex=fake_codex)
    assert change.changed and (codex_home / "hooks.json").is_file()
    assert change.codex_check is not None and change.codex_check.error
    st = status(codex_target(codex_home), home=home, codex=fake_codex)
    assert not st.will_run and any("could not ask Codex" in p for p in st.problems)


def test_cli_names_codex_and_reports_its_verdict(
    tmp_path: Path, fake_codex: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleet._cli import main

    codex_home = str(tmp_path / "codex")
    assert main(["hooks", "install", "--codex-home", codex_home, "--codex-bin", fake_codex,
                 "--create"]) == 0
    out = capsys.readouterr().out
    assert "trusts every entry" in out
    assert main(["hooks", "status", "--codex-home", codex_home, "--codex-bin", fake_codex,
                 "--json"]) == 0
    [st] = json.loads(capsys.readouterr().out)
    assert st["will_run"] and st["codex_check"]["error"] is None


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("pin_set", "version"), codex_sets(), ids=[f"codex-{v}" for _, v in codex_sets()]
)
def test_the_pinned_codex_trusts_what_fleet_writes(
    tmp_path: Path, home: Path, pin_set: str, version: str
) -> None:
    """The recipe fleet keeps is exactly each pinned Codex's: no repair needed."""
    try:
        agents = find_agents(pin_set)
    except AgentsMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    codex = str(agents.codex)
    codex_home = tmp_path / "codex"
    change = install(codex_target(codex_home), home=home, codex=codex)
    check = change.codex_check
    assert check is not None and check.error is None, check
    assert check.repaired == ()
    assert len(check.trusted) == len(CODEX_EVENTS) and check.untrusted == ()
