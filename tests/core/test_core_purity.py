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
    for path in CORE.rglob("*.py"):
        for name in _imports(path):
            top = name.split(".")[0]
            if name.startswith("fleet") and not name.startswith(ALLOWED_FLEET):
                offenders.append(f"{path.relative_to(CORE)}: {name}")
            if top in FORBIDDEN_STDLIB:
                offenders.append(f"{path.relative_to(CORE)}: {name}")
    assert offenders == []


FORBIDDEN_CALLS = {"now", "utcnow", "today", "open", "time", "monotonic", "sleep"}


def test_core_reads_no_clock_and_opens_no_file() -> None:
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in FORBIDDEN_CALLS:
                    offenders.append(f"{path.relative_to(CORE)}:{node.lineno}: {name}()")
    assert offenders == []


def test_importing_the_core_loads_neither_the_journal_nor_watchdog() -> None:
    """In a fresh interpreter: the fold is usable without the shell behind Fleet."""
    import subprocess
    import sys

    probe = (
        "import sys, fleet._core.fold, fleet._core.routing\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('watchdog', 'httpx', 'nats', 'mcp', 'rich') or m in"
        " ('fleet._journal', 'fleet._fleet', 'fleet._watch', 'fleet.adapters')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout
