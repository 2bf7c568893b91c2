"""The interpreted twins (arrowdedup.jit.interpreted): the jitted modules' own source run by Python
gives the jitted bits, and a small job loads no jitted code at all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrowdedup.arrays.hashing import string_buffers
from arrowdedup.extract import extract_documents
from arrowdedup.facts import conflict_jit as _facts_jit
from arrowdedup.facts import guard as F
from arrowdedup.facts import scan_jit as fact_scan
from arrowdedup.facts import tables as fact_tables
from arrowdedup.jit import interpreted
from arrowdedup.pipeline.run import ingest_to_store
from arrowdedup.store.manifest import current_version
from tests.helpers import OTEL_CONTENT, ROOT, golden, need, random_facts

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
    offsets, data = string_buffers(text.to_arrow())
    twin = interpreted.twin("arrowdedup.facts.scan_jit")
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
    twin = interpreted.twin("arrowdedup.facts.conflict_jit")
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
    scan = "arrowdedup.facts.scan_jit"
    assert interpreted.twin(scan) is interpreted.twin(scan)
    with pytest.raises(ValueError, match="no interpreted twin"):
        interpreted.twin("arrowdedup.dedup.blocked")


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
        "             or m in ('arrowdedup.facts.scan_jit', 'arrowdedup.dedup.blocked'))\n"
        "print(json.dumps({'jit': jit, 'sig': sig.rows()}))\n")
    assert out["jit"] == []
    stored = dict(out["sig"])
    assert len(stored) == 10
    with interpreted.forced(interpreted.KERNEL):  # this process computes them jitted
        expected = F.fact_signatures(frame.get_column("text"),
                                     segment_type=frame.get_column("segment_type"))
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
    assert not {m for m in loaded if m in ("arrowdedup.dedup.ingest", "arrowdedup.pipeline.run")
                or m.startswith("arrowdedup.retrieval")}, loaded


# ----------------------------------------------------------------------------- the choice
# The scanner and the guard take their twins by the size of a call (SPEC §8a asks an update to
# equal a full ingest, so a choice by size is only allowed where twin and kernel agree bit for
# bit): the tests below hold them to the same bits on real and generated text, and a store
# written on twins to the bytes of one written on kernels.


def test_module_takes_the_twin_up_to_its_bound_until_the_kernel_is_taken(monkeypatch) -> None:
    monkeypatch.setattr(interpreted, "_taken", set())
    name = "arrowdedup.facts.conflict_jit"
    assert interpreted.module(name, 10, 10) is interpreted.twin(name)
    assert not interpreted.taken(name)
    assert interpreted.module(name, 11, 10) is _facts_jit
    assert interpreted.taken(name) and interpreted.taken_modules() == {name}
    # Once taken, the kernel serves every size: its machine code is loaded.
    assert interpreted.module(name, 1, 10) is _facts_jit
    with interpreted.forced(interpreted.TWIN):
        assert interpreted.module(name, 10**9, 10) is interpreted.twin(name)
        with interpreted.forced(interpreted.KERNEL):
            assert interpreted.module(name, 0, 10) is _facts_jit
        assert interpreted.module(name, 0, 10) is interpreted.twin(name)
    with pytest.raises(ValueError, match="'twin' or 'kernel'"):
        with interpreted.forced("jit"):
            pass


def test_a_jitted_module_imported_by_another_is_not_taken(monkeypatch) -> None:
    """The guard's kernels import the scanner's sort: a run that loads them (the greedy
    kernel does) must not send the scanner's calls to its jitted module, which nothing
    compiled (it did, inside the ``output`` stage, before ``taken``)."""
    monkeypatch.setattr(interpreted, "_taken", set())
    assert "arrowdedup.facts.scan_jit" in sys.modules  # imported by this test module
    assert F._scanner(100) is interpreted.twin("arrowdedup.facts.scan_jit")
    assert F._scanner(fact_tables.TWIN_MAX_BYTES + 1) is fact_scan


def test_the_scan_size_counts_bytes_outside_ascii_three_times() -> None:
    assert F.scan_size(np.frombuffer("ab 東京".encode(), dtype=np.uint8)) == 3 + 3 * 6


def both(work: Any) -> tuple[Any, Any]:
    with interpreted.forced(interpreted.TWIN):
        twin = work()
    with interpreted.forced(interpreted.KERNEL):
        kernel = work()
    return twin, kernel


def assert_same_arrays(twin: tuple[np.ndarray, ...], kernel: tuple[np.ndarray, ...]) -> None:
    assert len(twin) == len(kernel)
    for t, k in zip(twin, kernel, strict=True):
        assert t.dtype == k.dtype
        np.testing.assert_array_equal(t, k)


# Text that reaches every handler of the scanner: any Unicode (control characters among
# them), caseless scripts, numbers with separators, signs and units (longer than the parse
# buffer), words of the lists with hyphens and affixes, quotes, tokens longer than the
# scanner's scratch buffers, and what separates them.
WORDS = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(max_codepoint=0x1F), max_size=4),
    st.text(alphabet=st.characters(min_codepoint=0x3040, max_codepoint=0x9FFF), max_size=16),
    st.text(alphabet=st.characters(min_codepoint=0xAC00, max_codepoint=0xD7AF), max_size=8),
    st.text(alphabet=st.characters(min_codepoint=0x0980, max_codepoint=0x09FF), max_size=8),
    st.from_regex(r"[-v$#~]?[0-9][0-9.,:]{0,90}[a-zA-Z%µ°]{0,4}", fullmatch=True),
    st.from_regex(r"[A-Za-z][a-z]{0,12}(-[a-z]{1,10}){0,3}('s|n't|’s)?", fullmatch=True),
    st.integers(4000, 9000).map(lambda k: "Ab" * (k // 2)),
    st.integers(60, 300).map(lambda k: "9" * k),
    st.sampled_from([*PIECES, "`", '"', "“", "”", "«", "»", "„", "「", "」", "。", "’", "one",
                     "twenty-one", "thirty", "MB", "%", "ない", "않", "DISABLE", "APIs"]),
)
SEPARATORS = st.sampled_from([" ", "", "\n", "\t", "-", "=", ".", ", ", "\u00a0", "\u3000"])
TEXTS = st.lists(st.tuples(WORDS, SEPARATORS), max_size=25).map(
    lambda parts: "".join(w + s for w, s in parts))
ALL_TYPES = [*TYPES, "table_row", "title", "list_item"]


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(TEXTS, st.sampled_from(ALL_TYPES), st.sampled_from(LANGS),
                          st.lists(st.sampled_from(PIECES), max_size=2)),
                min_size=1, max_size=6))
def test_twins_and_kernels_give_the_same_signatures_of_generated_text(rows) -> None:
    values, types, langs, terms = (list(x) for x in zip(*rows, strict=True))

    def signatures() -> tuple[np.ndarray, np.ndarray]:
        return F.signature_arrays(pl.Series(values, dtype=pl.String),
                                  segment_type=pl.Series(types, dtype=pl.String),
                                  language=pl.Series(langs, dtype=pl.String),
                                  code_terms=pl.Series(terms, dtype=pl.List(pl.String)))

    assert_same_arrays(*both(signatures))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.binary(max_size=400), min_size=1, max_size=6), st.integers(0, 2**32 - 1))
def test_twin_and_kernel_scan_the_same_facts_of_any_bytes(chunks, seed) -> None:
    """Malformed UTF-8 included: the scanner reads each bad byte as one U+FFFD."""
    data = np.frombuffer(b"".join(chunks), dtype=np.uint8).copy()
    offsets = np.cumsum([0] + [len(c) for c in chunks]).astype(np.int64)
    n = len(chunks)
    flags = np.random.default_rng(seed).random((3, n)) < 0.3
    rows = np.arange(n, dtype=np.int64)
    twin = interpreted.twin("arrowdedup.facts.scan_jit")
    with interpreted.quiet():
        for module in (twin, fact_scan):  # the twin first: it would raise where Numba reads
            result = (*module.scan(offsets, data, *flags, *F._tables()),  # out of bounds
                      *module.line_facts(offsets, data, rows, fact_tables.IDENTIFIER))
            if module is twin:
                expected = result
    assert_same_arrays(expected, result)


def corpus_files(per_language: int) -> list[Path]:
    """Every k-th Markdown page of each language of the shared corpus, ``per_language`` of
    each (small pages first: more pages, every kind of block)."""
    picked: list[Path] = []
    for folder in sorted(p for p in need(OTEL_CONTENT).iterdir() if p.is_dir()):
        pages = sorted(folder.rglob("*.md"), key=lambda p: (p.stat().st_size, str(p)))
        pages = [p for p in pages if p.stat().st_size <= 6000]
        step = max(1, len(pages) // per_language)
        picked += pages[::step][:per_language]
    return picked


def test_twins_and_kernels_extract_the_same_segments_of_the_shared_corpus(
        tmp_path: Path) -> None:
    """Real pages of every language through extraction (the scanner, table rows, code
    terms, headings, the merges of the guard): the segments frames are equal, and the fact
    signatures read the same on the twins' own path."""
    root = tmp_path / "corpus"
    for i, page in enumerate(corpus_files(per_language=25)):
        target = root / page.parent.name / f"{i}-{page.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(page, target)
    twin, kernel = both(lambda: extract_documents(
        [root], root=root, language_from_path="{lang}/**").segments)
    assert twin.height > 1500, twin.height
    assert twin.get_column("language").n_unique() > 5
    assert twin.equals(kernel)
    texts, langs = golden.corpus_sample()  # the golden test's paragraphs, typed as there
    text = pl.Series(texts, dtype=pl.String)
    types = pl.Series([golden.TYPES[i % len(golden.TYPES)] for i in range(len(texts))],
                      dtype=pl.String)
    twin_arrays, kernel_arrays = both(lambda: F.signature_arrays(
        text, segment_type=types, language=pl.Series(langs)))
    assert_same_arrays(twin_arrays, kernel_arrays)
    assert golden.digest(*kernel_arrays) == golden.EXPECTED[1]


def test_a_store_written_on_twins_equals_one_written_on_kernels(tmp_path: Path,
                                                                  embedder) -> None:
    """The bundled sample (Markdown, CSV, German) and, when the shared corpus is present,
    pages of its caseless scripts: the same input ingested on forced twins and on forced
    kernels writes the same bytes in every data file of the store."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "data" / "sample", docs)
    if OTEL_CONTENT.is_dir():
        for lang in ("ja", "zh", "ko", "bn"):
            for i, page in enumerate(sorted((OTEL_CONTENT / lang).rglob("*.md"))[:3]):
                (docs / lang).mkdir(exist_ok=True)
                shutil.copyfile(page, docs / lang / f"{i}-{page.name}")
    stores: dict[str, Path] = {}
    for kind in (interpreted.TWIN, interpreted.KERNEL):
        with interpreted.forced(kind):
            ingest_to_store(docs, tmp_path / kind, embedder=embedder, quiet=True)
        version = current_version(tmp_path / kind)
        assert version is not None
        stores[kind] = version
    twin_files = data_files(stores[interpreted.TWIN])
    kernel_files = data_files(stores[interpreted.KERNEL])
    assert sorted(twin_files) == sorted(kernel_files)
    assert any(name.startswith("segments/") for name in twin_files)
    for name, data in twin_files.items():
        assert data == kernel_files[name], name


def data_files(version: Path) -> dict[str, bytes]:
    """Every file of a store version but its manifest (which holds the run's timings)."""
    return {p.relative_to(version).as_posix(): p.read_bytes() for p in version.rglob("*")
            if p.is_file() and p.name != "manifest.json"}
