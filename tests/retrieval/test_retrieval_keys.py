"""Key-linked context, the ``keys`` view, key values in BM25, the reranker stage (issue 16)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from arrowdedup import InputError, build_context, ingest, ingest_to_store, search, write_store
from arrowdedup.cli import app
from arrowdedup.metrics import connect
from arrowdedup.retrieval.keys import indexed_text, token_pattern
from tests.helpers import DOCS, M2V_MODEL
from tests.helpers.retrieval import corpus_frame


@pytest.fixture(scope="module")
def linked_store(embedder, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("linked") / "store"
    ingest_to_store([DOCS / "invoice-A-1042.pdf", DOCS / "tallybird-purchases.xlsx",
                     DOCS / "otel-distributions-running-headers.pdf"], root,
                    embedder=embedder, quiet=True, root=DOCS)
    return root


def test_context_follows_a_key_from_a_row_to_the_pdf_that_names_it(linked_store, embedder):
    ctx = build_context(linked_store, "status of order A-1042", k=2, mode="keyword",
                        embedder=embedder, expand_keys=True)
    seg = ctx.segments
    retrieved = seg.filter(pl.col("origin") == "retrieved")
    assert "tallybird-purchases#Orders#2" in retrieved["segment_id"].to_list()
    linked = seg.filter(pl.col("origin") == "linked")
    by_order = linked.filter(pl.col("linked_by") == "order_id: A-1042")
    assert by_order.height >= 1
    assert set(by_order["doc_id"]) == {"invoice-A-1042"}
    assert by_order["text"].str.contains("A-1042").all()
    assert "linked by `order_id: A-1042`" in ctx.markdown()
    # Without expand_keys nothing is linked.
    plain = build_context(linked_store, "status of order A-1042", k=2, mode="keyword",
                          embedder=embedder)
    assert "linked" not in plain.segments["origin"].to_list()


def test_context_cli_expand_keys(linked_store, embedder):
    res = CliRunner().invoke(app, ["context", str(linked_store), "status of order A-1042",
                                   "-k", "2", "--mode", "keyword", "--expand-keys",
                                   "--embedder", f"model2vec:{M2V_MODEL}"])
    assert res.exit_code == 0, res.output
    assert "linked by `order_id: A-1042`" in res.output


def test_keys_view_joins_across_files(linked_store):
    con = connect(linked_store)
    rows = con.sql("SELECT doc_id, segment_id, key, value FROM keys "
                   "WHERE value = 'A-1042' ORDER BY segment_id").fetchall()
    assert rows == [("tallybird-purchases#Orders", "tallybird-purchases#Orders#2", "order_id",
                     "A-1042")]
    shared = con.sql("SELECT count(*) FROM keys a JOIN keys b USING (key, value) "
                     "WHERE a.doc_id <> b.doc_id AND key = 'customer_id'").fetchall()[0]
    assert shared[0] > 0  # Orders and Customers share customer ids


def test_page_furniture_stays_out_of_search(linked_store, embedder):
    res = search(linked_store, "Page 1 of 2 OpenTelemetry documentation", k=10,
                 mode="keyword", embedder=embedder)
    assert not res.results["text"].str.starts_with("Page ").any()
    every = search(linked_store, "Page 1 of 2 OpenTelemetry documentation", k=10,
                   mode="keyword", embedder=embedder, include_page_furniture=True)
    assert every.results["text"].str.starts_with("Page ").any()


def test_key_values_reach_the_bm25_text():
    frame = pl.DataFrame({"text": ["Invoice for the order", "order A-1 paid"],
                          "keys": [["order_id: A-1"], ["order_id: A-1"]]})
    assert indexed_text(frame).to_list() == ["Invoice for the order\nA-1", "order A-1 paid"]
    assert pl.Series(["see A-1.", "A-10", "xA-1"]).str.contains(token_pattern("A-1")) \
        .to_list() == [True, False, False]


@pytest.fixture(scope="module")
def store(embedder, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rerank") / "store"
    write_store(ingest(corpus_frame(embedder)), root, embedding_model=embedder.name)
    return root


def by_length(query: str, texts: list[str]) -> list[float]:
    """A deterministic reranker: shorter texts first."""
    return [-float(len(t)) for t in texts]


def test_reranker_reorders_the_floor_passing_candidates(store, embedder):
    plain = search(store, "dogs animals families", k=5, embedder=embedder)
    assert plain.results["rank_rerank"].null_count() == plain.results.height
    seen: list[tuple[str, int]] = []

    def spy(query: str, texts: list[str]) -> list[float]:
        seen.append((query, len(texts)))
        return by_length(query, texts)

    res = search(store, "dogs animals families", k=5, embedder=embedder, reranker=spy)
    assert seen == [("dogs animals families", plain.before)]
    lengths = res.results["text"].str.len_chars().to_list()
    assert lengths == sorted(lengths)
    ranks = res.results["rank_rerank"].to_list()
    assert ranks == sorted(ranks) and ranks[0] == 1
    # Dedup runs on the reranked order: the kept list is a subsequence of it.
    assert res.after <= res.before


def test_reranker_errors_are_clear(store, embedder):
    with pytest.raises(InputError, match="one score per text"):
        search(store, "rain", embedder=embedder, reranker=lambda q, t: [1.0])
    with pytest.raises(InputError, match="NaN"):
        search(store, "rain", embedder=embedder, reranker=lambda q, t: [np.nan] * len(t))
    vector = embedder.encode(["rain"])[0]
    with pytest.raises(InputError, match="text query"):
        search(store, vector, reranker=by_length)


def test_demo_step_prints_a_context_across_the_pdf_and_the_workbook(embedder, tmp_path):
    from arrowdedup.demo import show_linked_context

    text = show_linked_context(tmp_path / "linked", embedder)
    assert "## tallybird-purchases#Orders" in text
    assert "## Invoice INV-1042\n_source: `invoice-A-1042`_" in text
    assert "linked by `order_id: A-1042`" in text


def test_linked_segments_satisfy_where_and_min_cosine_is_for_results(linked_store, embedder):
    query = "status of order A-1042"
    ctx = build_context(linked_store, query, k=2, mode="keyword", embedder=embedder,
                        expand_keys=True, where="doc_id <> 'invoice-A-1042'")
    assert "tallybird-purchases#Orders#2" in ctx.segments["segment_id"].to_list()
    assert "invoice-A-1042" not in ctx.segments["doc_id"].to_list()  # the predicate holds
    # min_cosine filters what is retrieved; a linked segment is pulled by its key, whatever
    # its cosine to the query (README: "applies to the retrieved results only").
    plain = build_context(linked_store, query, k=2, mode="keyword", embedder=embedder,
                          expand_keys=True)
    floor = float(plain.search.results["cosine"].min())
    floored = build_context(linked_store, query, k=2, mode="keyword", embedder=embedder,
                            expand_keys=True, min_cosine=floor)
    assert floored.search.results["segment_id"].to_list() == \
        plain.search.results["segment_id"].to_list()
    linked = floored.segments.filter(pl.col("origin") == "linked")
    assert linked["segment_id"].to_list() == \
        plain.segments.filter(pl.col("origin") == "linked")["segment_id"].to_list()
    vectors = embedder.encode([query, *linked["text"].to_list()])
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert (unit[1:] @ unit[0] < floor).any()  # kept although below the floor
