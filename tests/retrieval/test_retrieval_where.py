"""The `where` sandbox: one expression, never several statements; a time limit
(`Retrieval.WhereTimeoutMs`) after which the predicate is refused in one line; no file access."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from arrowdedup import DedupConfig, InputError, ingest, open_store, search, write_store
from arrowdedup.cli import app
from arrowdedup.retrieval.where import filter_rows
from tests.helpers import README, ROOT, segments_frame, unit

runner = CliRunner()
DIM = 8
# The runaway subquery of the report: 2e10 squares, hours of work.
RUNAWAY = "(SELECT sum(i * i) FROM range(20000000000) t(i)) > 0"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(5)
    texts = [f"Segment {i} about topic {i % 3}." for i in range(12)]
    vectors = [unit(rng.normal(size=DIM)) for _ in texts]
    docs = [f"docs/page{i % 4}" for i in range(12)]
    root = tmp_path_factory.mktemp("where") / "store"
    write_store(ingest(segments_frame(texts, vectors, doc_id=docs)), root, buckets=2)
    return root


def _query(store: Path) -> np.ndarray:
    return np.asarray(open_store(store).vectors()[0], dtype=np.float32)


def _config(store: Path, timeout_ms: int) -> DedupConfig:
    raw = open_store(store).config.to_dict()
    raw["Deduplication"]["Retrieval"]["WhereTimeoutMs"] = timeout_ms
    return DedupConfig.from_json(raw)


def _all_rows(store: Path) -> int:
    return int(open_store(store).segments(with_embeddings=False).collect().height)


def test_the_default_limit_is_documented_and_bounded() -> None:
    assert DedupConfig().retrieval.where_timeout_ms == 10_000
    readme = README.read_text(encoding="utf-8")
    assert "Retrieval.WhereTimeoutMs" in readme and "10000" in readme


@pytest.mark.parametrize("where", [
    "1 = 1; SELECT 42",
    "1 = 1); SELECT 42 AS __row; SELECT __row FROM segments WHERE (1 = 1",
    "doc_id = 'a'; DROP TABLE segments",
    "1 = 1;",
    "1 = 1) ORDER BY __row LIMIT 1 --",
    "1 = 1) OR (1 = 1",
    "1 = 1) UNION ALL SELECT __row FROM segments WHERE (1 = 1",
])
def test_several_statements_or_an_escape_are_refused(store: Path, where: str) -> None:
    with pytest.raises(InputError, match="is not a valid filter") as info:
        filter_rows(open_store(store), where)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("where", "expected"), [
    ("doc_id = 'docs/page1;x'", 0),  # a ';' inside a string is no statement
    ("doc_id = 'a)' OR doc_id LIKE 'docs/%'", 12),  # nor a ')' inside a string
    ('"doc_id" LIKE \'docs/page1\'', 3),  # quoted names
    ("doc_id LIKE 'docs/page1' -- a comment ; DROP\n", 3),  # a comment is nothing
    ("doc_id IN (SELECT 'docs/page' || x FROM (VALUES ('1'), ('2')) v(x))", 6),  # a subquery
])
def test_one_expression_with_tricky_text_is_accepted(store: Path, where: str,
                                                     expected: int) -> None:
    assert filter_rows(open_store(store), where).size == expected


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("();'\"- =1aSELECT")), max_size=30))
def test_any_text_is_rows_or_one_line(store: Path, text: str) -> None:
    """Whatever the text, the filter gives rows of the store or one InputError line."""
    st_ = open_store(store)
    try:
        rows = filter_rows(st_, text, 2_000)
    except InputError as err:
        assert "\n" not in str(err)
        return
    n = _all_rows(store)
    assert rows.size == 0 or (rows[0] >= 0 and rows[-1] < n and np.all(np.diff(rows) > 0))


def test_a_runaway_predicate_is_stopped_within_the_limit(store: Path) -> None:
    t = time.perf_counter()
    with pytest.raises(InputError, match=r"ran longer than Retrieval\.WhereTimeoutMs \(300 ms\)"):
        search(store, _query(store), k=3, where=RUNAWAY, config=_config(store, 300))
    assert time.perf_counter() - t < 20  # the query alone would run for hours
    # The same process goes on searching, filtered and not.
    assert search(store, _query(store), k=3, where="doc_id LIKE 'docs/%'").results.height
    assert search(store, _query(store), k=3).results.height


def test_a_predicate_that_hoards_memory_is_stopped(store: Path) -> None:
    """Without a memory cap this subquery took 2.5 GB in 7 s, inside the time limit."""
    import resource

    hoard = "(SELECT len(l) FROM (SELECT list(i) l FROM range(150000000) t(i))) > 0"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match=r"needed more than 512 MB and was stopped"):
        filter_rows(open_store(store), hoard, 60_000)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 1_000_000  # well under the 2.5 GB the query takes unbounded


def test_the_limit_comes_from_the_stores_config_by_default(store: Path) -> None:
    from arrowdedup.retrieval.search import store_view

    view = store_view(open_store(store))
    t = time.perf_counter()
    with pytest.raises(InputError, match=r"\(150 ms\)"):
        view.allowed_rows(RUNAWAY + " AND 1 = 1", 150)
    assert time.perf_counter() - t < 20
    assert view.allowed_rows("doc_id = 'docs/page0'") is not None  # cached views still work


def test_cli_refuses_a_runaway_predicate_in_one_line(store: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text('{"Retrieval": {"WhereTimeoutMs": 300}}')
    t = time.perf_counter()
    out = runner.invoke(app, ["search", str(store), "topic", "--mode", "keyword",
                              "--config", str(cfg), "--where", RUNAWAY])
    assert time.perf_counter() - t < 30
    assert out.exit_code == 1
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and "WhereTimeoutMs (300 ms)" in lines[0]
    out = runner.invoke(app, ["search", str(store), "topic", "--mode", "keyword",
                              "--where", "1 = 1; SELECT 1"])
    assert out.exit_code == 1
    assert len(out.output.strip().splitlines()) == 1
    assert "several statements" in out.output


@pytest.mark.parametrize("statement", [
    "COPY (SELECT 1) TO '{dir}/out.csv'",
    "ATTACH '{dir}/other.db'",
    "INSTALL httpfs",
    "LOAD httpfs",
])
def test_statements_that_touch_the_outside_are_refused(store: Path, tmp_path: Path,
                                                       statement: str) -> None:
    text = statement.format(dir=tmp_path)
    for where in (text, f"1 = 1; {text}", f"1 = 1); {text}; SELECT 1 WHERE (1 = 1"):
        with pytest.raises(InputError, match="is not a valid filter"):
            filter_rows(open_store(store), where)
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "other.db").exists()


def test_no_progress_bar_reaches_stdout(store: Path) -> None:
    """DuckDB draws a progress bar on stdout for a query past two seconds (also when stdout
    is a pipe); a filter must not, whatever the output is read by."""
    import subprocess
    import sys

    code = ("import sys\nfrom arrowdedup import open_store, InputError\n"
            "from arrowdedup.retrieval.search import filter_rows\n"
            "try:\n"
            f"    filter_rows(open_store(sys.argv[1]), {RUNAWAY!r}, 6000)\n"
            "except InputError as err:\n"
            "    print('refused', 'WhereTimeoutMs' in str(err))\n")
    root = ROOT
    out = subprocess.run([sys.executable, "-c", code, str(store)], capture_output=True,
                         text=True, timeout=300, cwd=root,
                         env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert out.stdout == "refused True\n", out.stdout[:300] + out.stderr[-2000:]


def test_frames_unchanged_by_the_sandbox(store: Path) -> None:
    """A plain predicate gives the rows Polars gives for the same condition."""
    frame = open_store(store).segments(with_embeddings=False).collect().with_row_index("r")
    want = frame.filter(pl.col("doc_id") == "docs/page2").get_column("r").to_list()
    assert filter_rows(open_store(store), "doc_id = 'docs/page2'").tolist() == want
