"""The interpreted twins (arrowdedup.interpreted): the jitted modules' own source run by Python
gives the jitted bits, and a small job loads no jitted code at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from conftest import random_facts
from hypothesis import given, settings
from hypothesis import strategies as st

from arrowdedup import _facts_jit, fact_scan, interpreted
from arrowdedup import facts as F
from arrowdedup.hashing import _buffers

ROOT = Path(__file__).resolve().parents[1]
# Words the scanner treats specially, mixed with arbitrary text.
PIECES = [
    "3.5", "v3.5", "--max-request-bytes", "http_server_requests_total", "10,000", "1,5", "217MB",
    "`config`", '"quoted"', "“curly”", "«guillemets»", "10:30", "Monday", "January", "not",
    "don't", "n’t", "enable", "disable", "Obama", "Putin", "U.S.", "e.g.", "node0", "camelCase",
    "/etc/x.conf", "https://example.org/a", "10.0.0.1", "#7", "~26%", "不", "东京", "ない",
    "nicht", "ne", "pas", "three", "zwölf", "### Heading", "> quote", "1.", "- item", "\n",
    "Title Case Words Here", "ßtraße", "ÀÉÎ", "Ωmega", "Жук", "🙂", "\u00a0", "\u3000",
]
texts = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=12).map(
    " ".join)
TYPES = [None, "paragraph", "code", "heading", "page_furniture"]
LANGS = [None, "en", "de", "fr-CA", "zh"]


def scan_both(values: list[str], types: list[str | None], langs: list[str | None]):
    text = pl.Series(values, dtype=pl.String)
    n = len(values)
    comma, nouns = F._language_flags(pl.Series(langs, dtype=pl.String), n)
    code = np.array([t == "code" for t in types], dtype=bool)
    offsets, data = _buffers(text.to_arrow())
    twin = interpreted.twin("arrowdedup.fact_scan")
    with interpreted.quiet():
        expected = fact_scan.scan(offsets, data, code, comma, nouns, *F._tables())
        got = twin.scan(offsets, data, code, comma, nouns, *F._tables())
    return expected, got


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(texts, st.sampled_from(TYPES), st.sampled_from(LANGS)), min_size=1,
                max_size=8))
def test_the_twin_scanner_gives_the_jitted_fact_hashes(rows) -> None:
    values, types, langs = (list(x) for x in zip(*rows, strict=True))
    (rows_j, hashes_j), (rows_t, hashes_t) = scan_both(values, types, langs)
    assert rows_t.dtype == rows_j.dtype and hashes_t.dtype == hashes_j.dtype
    np.testing.assert_array_equal(rows_t, rows_j)
    np.testing.assert_array_equal(hashes_t, hashes_j)


def test_the_twin_scanner_on_every_piece() -> None:
    (rows_j, hashes_j), (rows_t, hashes_t) = scan_both(PIECES, [None] * len(PIECES),
                                                       [None] * len(PIECES))
    assert hashes_j.size > 20  # the pieces do state facts
    np.testing.assert_array_equal(rows_t, rows_j)
    np.testing.assert_array_equal(hashes_t, hashes_j)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 40))
def test_the_twin_guard_gives_the_jitted_reasons(seed: int, m: int) -> None:
    offsets, values, modes = random_facts(m, seed)
    rng = np.random.default_rng(seed)
    a = rng.integers(0, m, 64).astype(np.int64)
    b = rng.integers(0, m, 64).astype(np.int64)
    twin = interpreted.twin("arrowdedup._facts_jit")
    expected = _facts_jit._conflict_many(offsets, values, modes, a, b)
    got = twin._conflict_many(offsets, values, modes, a, b)
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == expected.dtype
    rows = np.sort(rng.integers(0, m, 50)).astype(np.int64)
    vals = rng.integers(0, 2**63, 50, dtype=np.uint64) % np.uint64(7)
    csr = np.searchsorted(rows, np.arange(m + 1)).astype(np.int64)  # unsorted rows, repeats
    got_offsets, got_values = _facts_jit._sorted_unique_csr(csr, vals)
    for r in range(m):
        np.testing.assert_array_equal(got_values[got_offsets[r]:got_offsets[r + 1]],
                                      np.unique(vals[csr[r]:csr[r + 1]]))
    for x, y in zip((got_offsets, got_values), twin._sorted_unique_csr(csr, vals), strict=True):
        np.testing.assert_array_equal(y, x)


def test_a_twin_is_built_once_and_only_for_listed_modules() -> None:
    assert interpreted.twin("arrowdedup.fact_scan") is interpreted.twin("arrowdedup.fact_scan")
    with pytest.raises(ValueError, match="no interpreted twin"):
        interpreted.twin("arrowdedup.kernels_blocked")


def run_fresh(code: str) -> Any:
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_ten_segment_job_loads_no_jitted_code_and_writes_the_jitted_signatures(
        tmp_path: Path) -> None:
    """Cold start: a 10-segment ingest in a fresh process imports neither Numba nor a jitted
    module; the fact signatures it stores are those the jitted scanner computes."""
    rng = np.random.default_rng(3)
    frame = pl.DataFrame({
        "doc_id": ["d"] * 10, "segment_id": [f"s{i}" for i in range(10)],
        "text": [f"Step {i}: set --max-bytes to {i}0MB on Monday, not v3.{i}." for i in range(10)],
        "segment_type": ["paragraph"] * 9 + ["code"], "position": list(range(10)),
        "embedding": pl.Series(rng.standard_normal((10, 8)).astype(np.float32)),
    })
    src = tmp_path / "small.parquet"
    frame.write_parquet(src)
    out = run_fresh(
        "import json, sys\n"
        "from arrowdedup import ingest_to_store\n"
        f"r = ingest_to_store({str(src)!r}, {str(tmp_path / 'store')!r}, quiet=True)\n"
        "sig = r.kept.select('segment_id', 'fact_signature').collect()\n"
        "jit = sorted(m for m in sys.modules if m == 'numba' or m.endswith('_jit')\n"
        "             or m in ('arrowdedup.fact_scan', 'arrowdedup.kernels_blocked'))\n"
        "print(json.dumps({'jit': jit, 'sig': sig.rows()}))\n")
    assert out["jit"] == []
    stored = dict(out["sig"])
    assert len(stored) == 10
    expected = F.fact_signatures(frame.get_column("text"),
                                 segment_type=frame.get_column("segment_type"))
    assert "arrowdedup.fact_scan" in sys.modules  # this process computed them jitted
    for sid, sig in zip(frame.get_column("segment_id"), expected.to_list(), strict=True):
        assert stored[sid] == sig


def test_the_store_imports_neither_ingest_nor_retrieval() -> None:
    """#13: the store is read and written without the job's modules; the job path registers
    its indexes (BM25) with the writer."""
    out = run_fresh(
        "import json, sys\n"
        "import arrowdedup.store\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('arrowdedup.'))))\n")
    loaded = set(out)
    assert "arrowdedup.store.writer" in loaded and "arrowdedup.store.reader" in loaded
    assert not {m for m in loaded if m == "arrowdedup.ingest" or m == "arrowdedup.job"
                or m.startswith("arrowdedup.retrieval")}, loaded
