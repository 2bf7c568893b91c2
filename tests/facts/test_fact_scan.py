"""The fact scanner stays split into small jitted functions (issue 44 item 0, issue 46 item 1):
a rule change recompiles one small handler, not one function of hundreds of lines."""

from __future__ import annotations

import ast
from pathlib import Path

from arrowdedup.facts import scan_facts_jit, scan_jit, scan_pieces_jit, scan_text_jit

# The scanner's four files: the row loop and its character, piece and fact levels.
SOURCES = [Path(m.__file__) for m in (scan_jit, scan_text_jit, scan_pieces_jit, scan_facts_jit)]
MAX_JITTED_LINES = 150  # issue 47's bound for a jitted function
# ``inline="always"`` copies a function into each caller before compiling it: only small
# leaf helpers may ask for it, or the callers grow back into one huge compile.
MAX_INLINED_LINES = 25


def _njit_options(decorator: ast.expr) -> dict[str, ast.expr] | None:
    """The keyword options of a ``numba.njit`` decorator, or of ``jit.runtime.njit`` (bare or
    called), or None for any other decorator."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if not ((isinstance(target, ast.Attribute) and target.attr == "njit"
             and isinstance(target.value, ast.Name) and target.value.id == "numba")
            or (isinstance(target, ast.Name) and target.id == "njit")):
        return None
    if not isinstance(decorator, ast.Call):
        return {}
    return {k.arg: k.value for k in decorator.keywords if k.arg is not None}


def _jitted() -> list[tuple[str, int, bool]]:
    """(name, lines from ``def`` to the last line, inlined) of every jitted function."""
    found = []
    nodes = [n for source in SOURCES
             for n in ast.walk(ast.parse(source.read_text(encoding="utf-8")))]
    for node in nodes:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            options = _njit_options(decorator)
            if options is None:
                continue
            inline = options.get("inline")
            inlined = isinstance(inline, ast.Constant) and inline.value == "always"
            assert node.end_lineno is not None
            found.append((node.name, node.end_lineno - node.lineno + 1, inlined))
    return found


def test_the_scanner_is_many_small_jitted_functions() -> None:
    jitted = _jitted()
    names = {name for name, _, _ in jitted}
    assert {"_scan", "_row", "piece_extent", "word_piece", "number_piece"} <= names
    too_long = [(name, n) for name, n, _ in jitted if n > MAX_JITTED_LINES]
    assert too_long == [], f"jitted functions over {MAX_JITTED_LINES} lines: {too_long}"


def test_only_small_helpers_are_inlined() -> None:
    inlined = [(name, n) for name, n, inline in _jitted() if inline and n > MAX_INLINED_LINES]
    assert inlined == [], f"inline='always' functions over {MAX_INLINED_LINES} lines: {inlined}"
