"""ARCHITECTURE.md is kept true (issue 47): every path it names exists, the layers of its table
are the import graph's, no module imports itself back through others, and the store's file
names are spelled only inside the store. The graph is read from the source (every import
statement, function-level ones included) over the package and ``benchmarks/``."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT

DOC = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
SOURCES = ("arrowdedup", "benchmarks")


def _modules() -> dict[str, Path]:
    out = {}
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import of the package or the benchmarks in ``path``;
    ``from P import n`` imports the module ``P.n`` when there is one, else ``P``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in SOURCES:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] not in SOURCES:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if sub in MODULES else target), node.lineno


EDGES = {(m, t, line) for m, p in MODULES.items() for t, line in _imports(m, p) if t != m}


def _layers() -> dict[str, int]:
    table = DOC.split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    layers: dict[str, int] = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        for unit in re.findall(r"`([^`]+)`", cells[1]):
            layers[unit] = int(cells[0])
    return layers


LAYERS = _layers()


def _unit(module: str) -> str:
    """The row of the layer table a module belongs to: the longest listed prefix of its name
    below ``arrowdedup`` (``__init__`` for the package itself), or ``benchmarks``."""
    if module.split(".")[0] == "benchmarks":
        return "benchmarks"
    rest = module.split(".")[1:]
    if not rest:
        return "__init__"
    for n in range(len(rest), 0, -1):
        if ".".join(rest[:n]) in LAYERS:
            return ".".join(rest[:n])
    return ".".join(rest)


def test_every_path_the_map_names_exists() -> None:
    named = set(re.findall(r"`((?:arrowdedup|tests|benchmarks)/[\w./-]*)`", DOC))
    assert len(named) > 20
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"ARCHITECTURE.md names paths that do not exist: {missing}"


def test_every_module_has_a_layer() -> None:
    assert LAYERS, "no layer table between <!-- layers --> markers in ARCHITECTURE.md"
    unlisted = sorted({m for m in MODULES if _unit(m) not in LAYERS})
    assert not unlisted, f"modules on no layer of ARCHITECTURE.md: {unlisted}"


def test_imports_run_only_down_the_layers() -> None:
    wrong = []
    for module, target, line in sorted(EDGES):
        a, b = _unit(module), _unit(target)
        if a != b and LAYERS[a] <= LAYERS[b]:
            wrong.append(f"{MODULES[module].relative_to(ROOT)}:{line} imports {target} "
                         f"({a}, layer {LAYERS[a]} -> {b}, layer {LAYERS[b]})")
    assert not wrong, "imports that run up or across the layers:\n" + "\n".join(wrong)


def test_no_import_cycle() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, target, _ in EDGES:
        if target in graph:
            graph[module].add(target)
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    assert not cycles, f"modules that import each other (through others): {cycles}"


@pytest.mark.parametrize("forbidden", ["dedup", "pipeline", "extract", "retrieval"])
def test_the_store_imports_neither_ingestion_nor_retrieval(forbidden: str) -> None:
    bad = sorted(f"{m} -> {t}" for m, t, _ in EDGES
                 if _unit(m) == "store" and _unit(t) == forbidden)
    assert not bad, bad


def test_store_file_names_are_spelled_only_in_the_store() -> None:
    """The store owns its format: everyone else asks :mod:`arrowdedup.store.layout` for the
    names of its files (docstrings and comments may mention them)."""
    from arrowdedup.store import layout

    # (RETRIEVAL_LOG is left out: it is also the name of a DuckDB view)
    names = {layout.MANIFEST, layout.DOCUMENTS, layout.TOMBSTONES, layout.CHANGES,
             layout.HISTORY, layout.PART_GLOB}
    found = []
    for module, path in MODULES.items():
        if _unit(module) == "store" or module.startswith("benchmarks"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docstrings \
                    and any(name in node.value for name in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, "store file names spelled outside arrowdedup/store:\n" + "\n".join(found)


def test_no_test_imports_another_test_file() -> None:
    """Shared builders live in ``tests/helpers``; a test file is never imported by another
    (nor is ``conftest``, which pytest loads itself)."""
    tests = ROOT / "tests"
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                leaf = name.rsplit(".", 1)[-1]
                if leaf.startswith("test_") or leaf == "conftest":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not found, found
