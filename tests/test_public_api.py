"""The package's public names: ``__all__``, the lazy-import table and the type-checking imports
of ``fleet/__init__.py`` are three lists kept by hand; this keeps them one."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import fleet
import fleet.testing

INIT = Path(fleet.__file__)


def _tree() -> ast.Module:
    return ast.parse(INIT.read_text(encoding="utf-8"))


def _type_checking_imports() -> dict[str, str]:
    names: dict[str, str] = {}
    for node in _tree().body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                for alias in stmt.names:
                    names[alias.asname or alias.name] = stmt.module
    return names


def _eager_imports() -> set[str]:
    return {
        alias.asname or alias.name
        for node in _tree().body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fleet")
        for alias in node.names
    }


def test_the_lazy_table_and_the_type_checking_imports_name_the_same_things() -> None:
    assert _type_checking_imports() == fleet._LAZY


def test_all_is_exactly_the_eager_and_the_lazy_names() -> None:
    assert sorted(fleet.__all__) == sorted(_eager_imports() | set(fleet._LAZY))
    assert len(set(fleet.__all__)) == len(fleet.__all__)


def test_every_public_name_resolves_from_the_module_it_is_said_to_come_from() -> None:
    for name in fleet.__all__:
        value = getattr(fleet, name)
        module = fleet._LAZY.get(name)
        if module is not None:
            assert getattr(importlib.import_module(module), name) is value


def test_what_the_api_returns_is_exported() -> None:
    for name in ("WaitResult", "Transition", "WorkerState", "CheckResult", "Outcome", "Plan"):
        assert name in fleet.__all__


def test_test_doubles_live_in_fleet_testing_not_in_the_main_namespace() -> None:
    for name in ("MockClock", "MockRunner"):
        assert name in fleet.testing.__all__
        assert name not in fleet.__all__
    clock = fleet.testing.MockClock()
    clock.advance(5)
    assert clock.monotonic() == 5
    runner = fleet.testing.MockRunner(lambda argv, options: (0, "out", ""))
    assert runner.run(["git", "status"]).stdout == "out"
    assert runner.calls[0][0] == ("git", "status")
