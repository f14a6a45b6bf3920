"""The fakes cannot drift from the apps: every command and procedure fleet's adapters call, and
every herdr error code they act on, has a source in tests/fakes/sources (the file and lines of
the app's code at a stated version), and the fakes refuse to answer anything without one."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.conftest import FAKES, HERDR, SUPERSET
from tests.adapters.superset_fake import FakeSupersetHost

ADAPTERS = Path(__file__).resolve().parents[2] / "src" / "fleet" / "adapters"
SOURCES = FAKES / "sources"
#: a cited place: a source file of the app and a line in it
CITED = re.compile(r"(?:src|packages)/[\w./-]+\.(?:rs|ts):\d+")
#: what the stored source does not hold (a later build's features, read from an open pull
#: request's branch): a short, fixed list, so nothing joins it unseen
UNVERIFIED = {"--local", "agents create --from-terminal", "terminal.transcript"}


def table(app: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SOURCES / f"{app}.json").read_text())
    return data


def tree(module: str) -> ast.Module:
    return ast.parse((ADAPTERS / f"{module}.py").read_text())


def words(nodes: list[ast.expr]) -> list[str]:
    """The leading string constants of an argument list."""
    found: list[str] = []
    for node in nodes:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            break
        found.append(node.value)
    return found


def herdr_commands() -> set[str]:
    """`herdr <a> <b>` for every command the herdr adapter runs: the literal arguments of its
    `_run`/`_call` calls and of the argument lists it builds for them."""
    found: set[str] = set()
    for node in ast.walk(tree("herdr")):
        seq: list[str] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
            node.func.attr in ("_run", "_call")
        ):
            seq = words(node.args)
        elif isinstance(node, ast.List):
            seq = words(node.elts)
            if not seq or seq[0] not in ("agent", "pane", "worktree"):
                seq = []
        if seq:
            found.add(seq[0] if seq[0] == "status" else " ".join(seq[:2]))
    return found


def herdr_error_codes() -> set[str]:
    """The herdr error codes the adapter acts on: compared with an error's `code`, or mapped to
    an exception in `_error_for`."""
    found: set[str] = set()
    for node in ast.walk(tree("herdr")):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and (
            node.left.attr == "code"
        ):
            for comp in node.comparators:
                elts = comp.elts if isinstance(comp, ast.Tuple) else [comp]
                found |= {e.value for e in elts
                          if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        if isinstance(node, ast.FunctionDef) and node.name == "_error_for":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Dict):
                    found |= {k.value for k in sub.keys
                              if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return found


def superset_commands() -> set[str]:
    """`superset <a> <b>` for every CLI command the Superset adapter runs."""
    found: set[str] = set()
    for node in ast.walk(tree("superset")):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
            node.func.attr == "_json" and node.args and isinstance(node.args[0], ast.Tuple)
        ):
            found.add(" ".join(words(node.args[0].elts)))
        first = node.elts[0] if isinstance(node, ast.List) and node.elts else None
        if isinstance(first, ast.Attribute) and first.attr == "superset":
            assert isinstance(node, ast.List)
            seq = words(node.elts[1:])
            if seq:
                found.add(" ".join(seq[:2]))
    return found


def superset_procedures() -> set[str]:
    """Every host procedure the Superset adapter and its host client call by name."""
    found: set[str] = set()
    for module in ("superset", "superset_host"):
        for node in ast.walk(tree(module)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr in ("query", "mutate")
            ):
                found |= set(words(node.args[:1]))
    return found


def test_the_scans_find_the_adapters_calls() -> None:
    """The scans below see what the adapters do (else they would prove nothing)."""
    assert {"status", "worktree create", "worktree remove", "pane run", "pane close",
            "agent prompt", "agent wait"} <= herdr_commands()
    assert {"server_not_running", "workspace_not_found", "pane_not_found",
            "agent_blocked"} <= herdr_error_codes()
    assert {"auth whoami", "agents create", "terminals send", "workspaces delete"} <= (
        superset_commands())
    assert {"agents.run", "settings.agentConfigs.update", "terminal.transcript"} <= (
        superset_procedures())


def test_every_herdr_command_and_error_the_adapter_uses_is_cited() -> None:
    herdr = table("herdr")
    for command in sorted(herdr_commands()):
        shapes = herdr["commands"].get(command)
        assert shapes, f"`herdr {command}` has no source in tests/fakes/sources/herdr.json"
        for shape, where in shapes.items():
            assert CITED.search(where), f"`herdr {command}` {shape}: {where!r} cites no line"
    for code in sorted(herdr_error_codes()):
        where = herdr["errors"].get(code, "")
        assert CITED.search(where), f"herdr error {code} has no source"


def test_every_superset_command_and_procedure_the_adapter_uses_is_cited() -> None:
    superset = table("superset")
    assert set(superset["unverified"]) == UNVERIFIED
    for command in sorted(superset_commands()):
        where = superset["cli"].get(command, "")
        assert CITED.search(where), f"`superset {command}` has no source"
    for procedure in sorted(superset_procedures()):
        where = superset["host"].get(procedure) or superset["unverified"].get(procedure, "")
        assert where, f"Superset procedure {procedure} has no source"
        if procedure not in UNVERIFIED:
            assert CITED.search(where), f"{procedure}: {where!r} cites no line"


def without(app: str, tmp: Path, section: str, key: str) -> Path:
    data = table(app)
    del data[section][key]
    path = tmp / f"{app}.json"
    path.write_text(json.dumps(data))
    return path


def test_the_fake_herdr_refuses_to_answer_without_a_source(tmp_path: Path) -> None:
    env = {**os.environ, "HERDR_FAKE_STATE": str(tmp_path / "state.json")}
    cited = subprocess.run([sys.executable, HERDR, "agent", "list"], env=env,
                           capture_output=True, text=True, check=False)
    assert cited.returncode == 0 and json.loads(cited.stdout)["result"]["type"] == "agent_list"
    env["HERDR_FAKE_SOURCES"] = str(without("herdr", tmp_path, "commands", "agent list"))
    done = subprocess.run([sys.executable, HERDR, "agent", "list"], env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 70 and done.stdout == ""
    assert "no source for shape 'agent_list' of `herdr agent list`" in done.stderr
    env["HERDR_FAKE_SOURCES"] = str(without("herdr", tmp_path, "errors", "agent_not_found"))
    done = subprocess.run([sys.executable, HERDR, "agent", "get", "nobody"], env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 70 and "no source for error 'agent_not_found'" in done.stderr


def test_the_fake_superset_cli_refuses_to_answer_without_a_source(tmp_path: Path) -> None:
    env = {**os.environ, "FAKE_SUPERSET_LOGGED_IN": "1",
           "FAKE_SUPERSET_SOURCES": str(without("superset", tmp_path, "cli", "auth whoami"))}
    done = subprocess.run([sys.executable, SUPERSET, "auth", "whoami", "--json"], env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 70 and "no source for `superset auth whoami`" in done.stderr
    env["FAKE_SUPERSET_SOURCES"] = str(without("superset", tmp_path, "unverified", "--local"))
    done = subprocess.run([sys.executable, SUPERSET, "agents", "list", "--local", "--json"],
                          env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 70 and "--local" in done.stderr


def test_the_fake_superset_host_refuses_to_start_without_a_source(tmp_path: Path) -> None:
    sources = without("superset", tmp_path, "host", "agents.run")
    host = FakeSupersetHost(tmp_path / "home", sources=sources)
    with pytest.raises(RuntimeError, match=r"no source for agents\.run"):
        host.start()
