"""The expected dedup outcome of data/sample with MiniLM (the demo's embedder), pinned.

data/sample/README.md lists the planted cases; if you edit the corpus, this test says what
moved. One MiniLM ingest per module (~10 s model load plus ~5-10 s of embedding on 2 cores).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from arrowdedup.demo import SAMPLE, cross_language_merges, sample_inputs
from arrowdedup.pipeline.documents import extract_segments
from arrowdedup.pipeline.run import ingest_to_store
from arrowdedup.store import open_store

NEAR_TRIPLES = {
    # doc: (the kept representative, the texts merged into it). Rules 18.0 (content coverage)
    # keep apart the planted paraphrases that change a word the representative does not say
    # (CONTENT_REFUSED below).
    "docs/invoices": ("At the end of each billing period", ("Invoices are finalized automat",
                                                            "Invoices are automatically fin")),
    "docs/meters": ("Usage events are aggregated", ("Received usage events",)),
    "docs/pagination": ("Cursor pagination returns", ("Cursor-based pagination",
                                                      "Pass the next_cursor")),
    "docs/testing": ("Keys for test mode begin", ("Test-mode keys start",
                                                  "Test mode keys, which start")),
    "docs/webhooks": ("Tallybird retries a failed", ("Tallybird will retry",)),
}
# Planted paraphrases the content rule keeps, and the words it names (guard_detail).
CONTENT_REFUSED = {
    "If you exceed the rate limit": "returns",        # "returns" for "responds with"
    "Exceeding the rate limit": "makes",
    "Usage events are added": "added",                # "added to" for "aggregated into"
    "A failed webhook delivery": "growing, gaps, between, attempts",  # a clause more
}
EXACT_PER_DOC = {
    "reference/endpoints": 17, "legal/terms-summary": 2, "docs/authentication": 1,
    "docs/webhooks": 1, "docs/index": 1, "changelog": 1,
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pl.DataFrame, pl.DataFrame]:
    out = tmp_path_factory.mktemp("sample") / "store"
    ingest_to_store(sample_inputs(), out, embedder="minilm", root=SAMPLE, quiet=True)
    segments = extract_segments(sample_inputs(), root=SAMPLE).segments
    decisions = open_store(out).decisions().collect().drop("text").join(
        segments.select("segment_id", "text", "language"), on="segment_id", how="left")
    return out, segments, decisions


def test_corpus_shape(sample) -> None:
    _, segments, _ = sample
    assert segments.get_column("doc_id").n_unique() == 32
    assert segments.height == 567  # 566 + the table_summary of reference/error-codes.csv
    assert "README" not in segments.get_column("doc_id").to_list()
    per_doc = segments.group_by("doc_id").len()
    assert per_doc.filter(pl.col("doc_id") == "changelog").item(0, "len") >= 100
    assert segments.filter(pl.col("doc_type") == "csv").height == 19


def test_counts_per_action(sample) -> None:
    out, _, decisions = sample
    counts = dict(decisions.get_column("action").cast(pl.String).value_counts().iter_rows())
    assert counts == {"kept": 536, "dropped_exact": 23, "merged_near": 8}
    manifest = open_store(out).manifest
    assert manifest["counts"]["segments_kept"] == 536
    assert manifest["embedding"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_exact_duplicates_are_the_planted_boilerplate(sample) -> None:
    _, _, decisions = sample
    exact = decisions.filter(pl.col("action") == "dropped_exact")
    assert dict(exact.group_by("doc_id").len().iter_rows()) == EXACT_PER_DOC
    reps = decisions.select(pl.col("segment_id").alias("representative_id"),
                            pl.col("text").alias("rep_text"))
    joined = exact.join(reps, on="representative_id")
    assert joined.height == exact.height
    assert (joined.get_column("text") == joined.get_column("rep_text")).all()


def test_planted_near_duplicates_merge_into_one(sample) -> None:
    _, _, decisions = sample
    near = decisions.filter(pl.col("action") == "merged_near")
    assert sorted(near.get_column("doc_id").unique().to_list()) == sorted(NEAR_TRIPLES)
    texts = dict(decisions.select("segment_id", "text").iter_rows())
    for doc, (kept, merged) in NEAR_TRIPLES.items():
        rows = near.filter(pl.col("doc_id") == doc)
        assert rows.height == len(merged), doc
        rep_ids = set(rows.get_column("representative_id").to_list())
        assert len(rep_ids) == 1, doc
        assert texts[rep_ids.pop()].startswith(kept), doc
        merged_texts = rows.get_column("text").to_list()
        for prefix in merged:
            assert sum(t.startswith(prefix) for t in merged_texts) == 1, (doc, prefix)
        assert (rows.get_column("similarity") >= 0.90).all()


def test_paraphrases_that_add_a_fact_are_refused(sample) -> None:
    """docs/authentication says one rule three ways, two of them with a fact more: the fact
    guard keeps both, and says why."""
    _, _, decisions = sample
    auth = decisions.filter(pl.col("doc_id") == "docs/authentication",
                            pl.col("guard_refused_id").is_not_null())
    reasons = dict(zip(auth.get_column("text").str.slice(0, 22).to_list(),
                       auth.get_column("guard_reason").cast(pl.String).to_list(), strict=True))
    assert reasons == {"Each API request must ": "content", "All API requests must ": "number"}
    assert (auth.get_column("action") == "kept").all()


def test_paraphrases_that_change_a_word_are_refused_with_the_words(sample) -> None:
    _, _, decisions = sample
    refused = decisions.filter(pl.col("guard_reason").cast(pl.String) == "content")
    details = {t: d for t, d in refused.select("text", "guard_detail").iter_rows()}
    for prefix, words in CONTENT_REFUSED.items():
        hits = [d for t, d in details.items() if t.startswith(prefix)]
        assert hits == [words], prefix


def test_translation_is_never_merged(sample) -> None:
    out, segments, decisions = sample
    german = decisions.filter(pl.col("doc_id") == "de/quickstart")
    assert german.height == 16
    assert (german.get_column("action") == "kept").all()
    assert set(german.get_column("language").to_list()) == {"de"}
    assert cross_language_merges(out, segments) == 0


def test_shared_paragraphs_survive_in_every_document(sample) -> None:
    _, _, decisions = sample
    shared = "Use an idempotency key so that retrying a request never records the same usage"
    rows = decisions.filter(pl.col("text").str.starts_with(shared))
    assert sorted(rows.get_column("doc_id").to_list()) == [
        "blog/2026-05-counting-usage-exactly-once", "docs/events", "docs/idempotency", "faq"]
    assert (rows.get_column("action") == "kept").all()


def test_kept_representatives_are_boosted(sample) -> None:
    out, _, _ = sample
    kept = open_store(out).segments(with_embeddings=False).collect()
    boosted = kept.filter(pl.col("near_duplicate_count") > 0)
    assert boosted.height == 5
    assert set(boosted.get_column("near_duplicate_count").to_list()) == {1, 2}
    assert (boosted.get_column("salience") >= boosted.get_column("salience_original")).all()
