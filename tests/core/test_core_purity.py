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
    "datetime",
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
