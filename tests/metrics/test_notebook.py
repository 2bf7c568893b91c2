"""The dashboard notebook runs top to bottom on a small store (so it cannot rot)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from arrowdedup.metrics import benchmark_tables
from tests.helpers import ROOT
from tests.helpers.metrics_corpus import build_store, write_log

NOTEBOOK = ROOT / "notebooks" / "dedup_dashboard.ipynb"


def fake_benchmarks(directory: Path) -> None:
    """A result in the shape the benchmark harness writes."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "lsh_vs_exact.json").write_text(json.dumps({
        "name": "lsh_vs_exact", "parameters": {"n": 1000},
        "tables": [{"title": "exact vs LSH", "columns": ["mode", "seconds", "recall"],
                    "rows": [["Exact", 1.5, 1.0], ["Lsh", 0.25, None]], "note": None}],
    }))


def outputs(nb: nbformat.NotebookNode, kind: str) -> list[str]:
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if kind in out.get("data", {}):
                found.append(out["data"][kind])
            if kind == "text/plain" and out.get("name") == "stdout":
                found.append(out["text"])
    return found


def test_committed_without_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)
    assert "parameters" in code[0].metadata.get("tags", [])


def test_benchmark_tables(tmp_path: Path) -> None:
    assert benchmark_tables(tmp_path / "none") == []
    fake_benchmarks(tmp_path)
    [(title, frame)] = benchmark_tables(tmp_path)
    assert title == "lsh_vs_exact: exact vs LSH"
    assert frame.columns == ["mode", "seconds", "recall"]
    assert frame.rows() == [("Exact", "1.5", "1.0"), ("Lsh", "0.25", "")]


def test_notebook_executes_on_a_small_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    store = tmp_path / "store"
    build_store(store)
    write_log(store, "log", [(10, 8), (10, 5)])
    fake_benchmarks(tmp_path / "bench")
    monkeypatch.setenv("ARROWDEDUP_STORE", str(store))
    monkeypatch.setenv("ARROWDEDUP_BENCHMARKS", str(tmp_path / "bench"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=300,
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError on any failing cell

    text = "\n".join(outputs(nb, "text/plain"))
    # The kernel is this virtualenv's Python, and it opened the store we built.
    assert f"python {sys.executable}" in text
    assert f"store {store}" in text
    assert "dedup_by_language" in text
    html = "\n".join(outputs(nb, "text/html"))
    assert "spam-1" in html  # the warning's document and the most boosted segment
    assert "exact vs LSH" in "\n".join(outputs(nb, "text/markdown"))
    assert len(outputs(nb, "image/png")) == 5


def test_notebook_explains_a_missing_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    monkeypatch.setenv("ARROWDEDUP_STORE", str(tmp_path / "missing"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells = nb.cells[:3]
    client = NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=True,
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert len(errors) == 1 and "make demo" in errors[0]["evalue"]
