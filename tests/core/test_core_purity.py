"""The functional core never imports the shell, and does no I/O of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import fleet._core

CORE = Path(fleet._core.__file__).parent
ALLOWED_FLEET = ("fleet._core", "fleet._errors")
FORBIDDEN_STDLIB = {
    "os",
    "sys",
    "io",
    "time",
    "threading",
    "subprocess",
    "socket",
    "shutil",
    "tempfile",
    "fcntl",
    "signal",
    "asyncio",
    "random",
    "multiprocessing",
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_core_modules_exist() -> None:
    assert {p.stem for p in CORE.glob("*.py")} >= {"events", "fold", "ids", "machine"}


def test_core_imports_only_core() -> None:
    offenders = []
    for path in CORE.glob("*.py"):
        for name in _imports(path):
            top = name.split(".")[0]
            if name.startswith("fleet") and not name.startswith(ALLOWED_FLEET):
                offenders.append(f"{path.name}: {name}")
            if top in FORBIDDEN_STDLIB:
                offenders.append(f"{path.name}: {name}")
    assert offenders == []


FORBIDDEN_CALLS = {"now", "utcnow", "today", "open", "time", "monotonic", "sleep"}


def test_core_reads_no_clock_and_opens_no_file() -> None:
    offenders = []
    for path in CORE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in FORBIDDEN_CALLS:
                    offenders.append(f"{path.name}:{node.lineno}: {name}()")
    assert offenders == []
