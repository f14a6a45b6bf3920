"""The layers run downhill: the CLI, the MCP server and the facade compose, orchestration
decides, adapters act on one host. Read from the source with ``ast``, so an import hidden in a
function counts as much as one at the top of a module."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import attrs

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "fleet"

#: What an adapter must never reach: it is handed a journal port, and the verbs that decide
#: live above it.
ABOVE_ADAPTERS = (
    "fleet._fleet",
    "fleet._orchestrate",
    "fleet._cli",
    "fleet._check",
    "fleet._retire",
    "fleet._report",
)


@attrs.frozen(kw_only=True)
class Edge:
    source: str
    target: str
    line: int
    top_level: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The fleet module an import names: the longest known prefix (``from fleet._core.events
    import X`` is ``fleet._core.events``; ``from fleet import _journal`` is ``fleet._journal``)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, *, top: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import under ``node``, and whether it runs when the module is imported (at the
    top, outside functions and ``if TYPE_CHECKING:``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, top
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) or (
            isinstance(child, ast.If) and _is_type_checking(child)
        ):
            yield from _walk(child, top=False)
        else:
            yield from _walk(child, top=top)


def _edges() -> list[Edge]:
    known = _modules()
    edges: list[Edge] = []
    for source, path in known.items():
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        for node, top in _walk(ast.parse(path.read_text()), top=True):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                names = [f"{base}.{alias.name}" for alias in node.names]
            for name in names:
                target = _resolve(name, known)
                if target is not None and target != source:
                    edges.append(Edge(source=source, target=target, line=node.lineno,
                                      top_level=top))
    return edges


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph``, as the path that closes it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_the_walk_sees_imports_at_every_level() -> None:
    edges = {(e.source, e.target, e.top_level) for e in _edges()}
    # one at the top of a module, one inside a function: both are found
    assert ("fleet._watch", "fleet._fold_cache", True) in edges
    assert any(s == "fleet._fleet" and not top for s, _, top in edges)


def test_no_import_cycle_among_fleet_modules() -> None:
    graph: dict[str, set[str]] = {}
    for edge in _edges():
        if edge.top_level:
            graph.setdefault(edge.source, set()).add(edge.target)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_no_cycle_even_through_imports_inside_functions() -> None:
    # The CLI's own modules may defer imports of each other (they load per command); below
    # the CLI a lazy import that closes a loop is the same tangle, only hidden.
    graph: dict[str, set[str]] = {}
    for edge in _edges():
        if not _under(edge.source, "fleet._cli"):
            graph.setdefault(edge.source, set()).add(edge.target)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_adapters_never_import_what_composes_or_decides() -> None:
    wrong = [
        f"{e.source}:{e.line} imports {e.target}"
        for e in _edges()
        if _under(e.source, "fleet.adapters")
        and any(_under(e.target, above) for above in ABOVE_ADAPTERS)
    ]
    assert wrong == []
