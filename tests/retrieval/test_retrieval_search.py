"""search / context on a small real store (Model2Vec embeddings, BM25 built at ingest)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from arrowdedup import (
    AnalyticsConfig,
    DedupConfig,
    EmbedderError,
    InputError,
    RetrievalConfig,
    build_context,
    ingest,
    open_store,
    search,
    write_store,
)
from arrowdedup.cli import app
from arrowdedup.retrieval.bm25 import tokenize
from tests.helpers import M2V_MODEL, README
from tests.helpers.retrieval import CORPUS, corpus_frame


@pytest.fixture(scope="module")
def store(embedder, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("retrieval") / "store"
    write_store(ingest(corpus_frame(embedder)), root, embedding_model=embedder.name)
    return root


def log_files(root: Path) -> list[Path]:
    return sorted((root / "retrieval_log").glob("*.parquet"))


def top(result) -> dict:
    return result.results.row(0, named=True)


def test_result_columns_and_types(store, embedder):
    res = search(store, "rocket launch", k=5, embedder=embedder)
    assert res.results.columns == ["rank", "doc_id", "segment_id", "text", "rrf", "score",
                                   "cosine", "rank_dense", "rank_bm25", "rank_salience",
                                   "rank_freshness", "rank_rerank", "displaced_ids"]
    assert res.results.schema["displaced_ids"] == pl.List(pl.String)
    assert res.results.get_column("rank").to_list() == list(range(1, res.results.height + 1))
    assert top(res)["segment_id"] == "space-2"
    scores = res.results.get_column("rrf").to_list()
    assert scores == sorted(scores, reverse=True)


def test_keyword_only_query_finds_the_person_through_bm25(store, embedder):
    for mode in ("keyword", "hybrid"):
        res = search(store, "Hopper", k=3, mode=mode, embedder=embedder)
        first = top(res)
        assert first["segment_id"] == "history-1", mode
        assert first["rank_bm25"] == 1
        # every other candidate has no BM25 hit: they share the rank after the last hit
        assert set(res.results.get_column("rank_bm25").to_list()[1:]) == {2}


def test_paraphrase_found_through_the_dense_path(store, embedder):
    query = "How much should a young dog eat?"
    words = set(tokenize([query]).to_list()[0])
    target = "Feed your puppy three small meals daily."
    assert not words & set(tokenize([target]).to_list()[0])  # BM25 cannot see it
    for mode in ("hybrid", "semantic"):
        res = search(store, query, k=3, mode=mode, embedder=embedder)
        assert top(res)["text"] == target, mode
        assert top(res)["rank_dense"] == 1


def test_cross_doc_duplicate_removed_after_ranking(store, embedder):
    res = search(store, "loyal dogs living with families", k=5, embedder=embedder)
    ids = res.results.get_column("segment_id").to_list()
    assert ("pets-0" in ids) != ("pets-copy-0" in ids)
    kept = "pets-0" if "pets-0" in ids else "pets-copy-0"
    other = "pets-copy-0" if kept == "pets-0" else "pets-0"
    row = res.results.filter(pl.col("segment_id") == kept).row(0, named=True)
    assert other in row["displaced_ids"]
    assert res.removed == res.before - res.after >= 1
    assert res.summary() == (f"Post-ranking deduplication: {res.before} → {res.after} segments "
                             f"(removed {res.removed} cross-doc duplicates)")


def test_retrieval_disabled_keeps_duplicates(store, embedder):
    cfg = DedupConfig(retrieval=RetrievalConfig(enabled=False, min_relevance_score=0.0))
    res = search(store, "loyal dogs living with families", k=5, config=cfg, embedder=embedder)
    ids = res.results.get_column("segment_id").to_list()
    assert "pets-0" in ids and "pets-copy-0" in ids
    assert res.removed == 0


def test_semantic_mode_is_dense_order_only(store, embedder):
    res = search(store, "galaxy photographs", k=6, mode="semantic", embedder=embedder)
    assert res.results.get_column("rank_bm25").null_count() == res.results.height
    dense = res.results.get_column("rank_dense").to_numpy()
    assert np.all(np.diff(dense) >= 0)
    assert res.results.get_column("rrf").to_numpy() == pytest.approx(1 / (60 + dense))


def test_vector_query_needs_no_embedder_and_skips_bm25(store):
    st = open_store(store)
    vectors = st.vectors()
    ids = st.segments().select("segment_id").collect().get_column("segment_id").to_list()
    i = ids.index("finance-1")
    res = search(store, np.array(vectors[i]) * 3.0, k=3)  # any length: normalised
    assert top(res)["segment_id"] == "finance-1"
    assert res.results.get_column("rank_bm25").null_count() == res.results.height
    with pytest.raises(InputError, match="keyword mode needs a text query"):
        search(store, np.array(vectors[i]), mode="keyword")
    with pytest.raises(InputError, match="256"):
        search(store, np.ones(7, dtype=np.float32))


def test_multi_query_fuses_each_signals_best(store, embedder):
    res = search(store, ["preparing noodles", "Hopper"], k=4, embedder=embedder)
    ids = res.results.get_column("segment_id").to_list()
    assert "cooking-0" in ids[:2] and "history-1" in ids[:2]
    single = search(store, "Hopper", k=4, embedder=embedder)
    # the Hopper segment keeps its best BM25 rank inside the fused list
    fused_row = res.results.filter(pl.col("segment_id") == "history-1").row(0, named=True)
    assert fused_row["rank_bm25"] == top(single)["rank_bm25"] == 1


def test_relevance_floor_on_the_normalised_score(store, embedder):
    everything = DedupConfig(retrieval=RetrievalConfig(min_relevance_score=0.0, enabled=False))
    res_all = search(store, "rain tomorrow", k=50, config=everything, embedder=embedder)
    assert res_all.before == sum(len(v) for v in CORPUS.values())  # all 23 are candidates
    strict = DedupConfig(retrieval=RetrievalConfig(min_relevance_score=0.99))
    res = search(store, "rain tomorrow", k=50, config=strict, embedder=embedder)
    assert res.before < res_all.before
    assert (res.results.get_column("score") >= 0.99).all()
    nothing = DedupConfig(retrieval=RetrievalConfig(min_relevance_score=1.0))
    res_none = search(store, "zebra quantum", k=5, config=nothing, embedder=embedder)
    assert res_none.results.height == 0 and res_none.before == 0


def test_deterministic(store, embedder):
    a = search(store, ["snow in the mountains", "market"], k=8, embedder=embedder)
    b = search(store, ["snow in the mountains", "market"], k=8, embedder=embedder)
    assert a.results.equals(b.results)


def test_every_search_appends_one_log_file(store, embedder):
    before = log_files(store)
    res = search(store, "bread dough", k=2, embedder=embedder)
    after = log_files(store)
    assert len(after) == len(before) + 1
    new = pl.read_parquet(sorted(set(after) - set(before))[0])
    assert new.schema == pl.Schema({
        "time": pl.Datetime("us", "UTC"), "run_id": pl.String, "query_hash": pl.String,
        "mode": pl.String, "k": pl.Int32, "before": pl.Int64, "after": pl.Int64,
        "removed": pl.Int64, "timings": pl.String})
    row = new.row(0, named=True)
    assert row["run_id"] == open_store(store).manifest["run_id"]
    assert (row["mode"], row["k"], row["before"], row["after"], row["removed"]) == \
        ("hybrid", 2, res.before, res.after, res.removed)
    assert row["query_hash"] == res.query_hash and len(row["query_hash"]) == 16
    assert set(json.loads(row["timings"])) >= {"dense", "bm25", "fuse", "dedup", "total"}
    for old in before:  # old files are never rewritten
        assert old.exists()
    quiet = DedupConfig(analytics=AnalyticsConfig(enable_metrics=False))
    search(store, "bread dough", k=2, config=quiet, embedder=embedder)
    assert len(log_files(store)) == len(after)


def test_freshness_breaks_a_tie_newer_document_first(embedder, tmp_path):
    corpus = {"old": ["The bridge opens at noon."], "new": ["The bridge opens at noon."],
              "undated": ["The bridge opens at noon."], "other": ["Penguins live in Antarctica."]}
    created = {"old": dt.datetime(2020, 1, 1), "new": dt.datetime(2025, 1, 1), "undated": None}
    frame = corpus_frame(embedder, corpus, created)
    root = tmp_path / "s"
    write_store(ingest(frame), root, embedding_model=embedder.name)
    res = search(root, "bridge noon", k=3, embedder=embedder)
    first = top(res)
    assert first["doc_id"] == "new" and first["rank_freshness"] == 1
    assert sorted(first["displaced_ids"]) == ["old-0", "undated-0"]
    off = DedupConfig(retrieval=RetrievalConfig(enabled=False))
    res = search(root, "bridge noon", k=4, config=off, embedder=embedder)
    order = res.results.get_column("doc_id").to_list()
    assert order[:3] == ["new", "old", "undated"]
    fresh = dict(zip(order, res.results.get_column("rank_freshness").to_list(), strict=True))
    assert fresh["undated"] == 4  # unknown last


def test_config_none_uses_the_config_recorded_in_the_store(embedder, tmp_path):
    root = tmp_path / "s"
    recorded = DedupConfig(retrieval=RetrievalConfig(enabled=False))
    write_store(ingest(corpus_frame(embedder), recorded), root, embedding_model=embedder.name)
    res = search(root, "loyal dogs living with families", k=5, embedder=embedder)
    ids = res.results.get_column("segment_id").to_list()
    assert "pets-0" in ids and "pets-copy-0" in ids


def test_text_query_on_a_model2vec_store_without_a_recorded_path_says_what_to_do(store):
    with pytest.raises(EmbedderError, match="model2vec:PATH"):
        search(store, "bread")


def test_wrong_embedder_is_refused(store):
    class Other:
        name = "other-model"
        dim = 256

        def encode(self, texts):
            return np.ones((len(texts), 256), dtype=np.float32)

    with pytest.raises(EmbedderError, match="not the store's model"):
        search(store, "bread", embedder=Other())


def test_context_expands_neighbours_and_renders_markdown(store, embedder):
    ctx = build_context(store, "Hopper", k=1, expand=2, embedder=embedder)
    seg = ctx.segments
    assert seg.filter(pl.col("origin") == "retrieved").get_column("segment_id").to_list() == \
        ["history-1"]
    assert sorted(seg.filter(pl.col("origin") == "expanded").get_column("segment_id")
                  .to_list()) == ["history-0", "history-2"]
    md = ctx.markdown()
    assert md.index("history-0") < md.index("history-1") < md.index("history-2")  # doc order
    assert "retrieved #1" in md and md.count("expanded") == 2 and "## history" in md
    assert build_context(store, "Hopper", k=1, expand=0, embedder=embedder).segments.height == 1


def test_context_takes_the_nearest_neighbours_first(store, embedder):
    # history-2's neighbours before are [history-1, history-0], nearest first
    ctx = build_context(store, "pyramids Giza Egyptians", k=1, expand=1, embedder=embedder)
    assert ctx.segments.get_column("segment_id").to_list() == ["history-2", "history-1"]


def test_context_dedupes_expansions_against_the_context(store, embedder):
    ctx = build_context(store, "loyal dogs living with families", k=4, expand=3,
                        embedder=embedder)
    st = open_store(store)
    ids = st.segments().select("segment_id").collect().get_column("segment_id").to_list()
    vectors = st.vectors()
    rows = [ids.index(s) for s in ctx.segments.get_column("segment_id").to_list()]
    gram = vectors[rows] @ vectors[rows].T
    np.fill_diagonal(gram, 0)
    assert gram.max() < 0.9
    assert len(set(rows)) == len(rows)


def test_cli_search_json_and_table(store):
    runner = CliRunner()
    spec = f"model2vec:{M2V_MODEL}"
    out = runner.invoke(app, ["search", str(store), "Hopper", "-k", "2", "--mode", "keyword",
                              "--json", "--embedder", spec])
    assert out.exit_code == 0, out.output
    payload = json.loads(out.stdout)
    assert payload["results"][0]["segment_id"] == "history-1"
    assert payload["mode"] == "keyword" and payload["k"] == 2
    table = runner.invoke(app, ["search", str(store), "Hopper", "--embedder", spec])
    assert table.exit_code == 0 and "history-1" in table.stdout
    bad = runner.invoke(app, ["search", str(store), "Hopper"])
    assert bad.exit_code == 1 and "model2vec:PATH" in bad.output


def test_cli_context(store):
    out = CliRunner().invoke(app, ["context", str(store), "Hopper", "-k", "1", "--expand", "1",
                                   "--embedder", f"model2vec:{M2V_MODEL}"])
    assert out.exit_code == 0, out.output
    assert "# Context for: Hopper" in out.stdout and "retrieved #1" in out.stdout
    assert "expanded" in out.stdout


def test_readme_retrieval_example_runs(tmp_path, capsys):
    import re

    readme = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    retrieval = next(b for b in blocks if "ad.search(" in b)
    namespace: dict[str, object] = {}
    for code in (blocks[0], retrieval):
        code = code.replace("/tmp/arrowdedup-readme-store", str(tmp_path / "store"))
        exec(compile(code, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "Post-ranking deduplication: 2 → 2 segments" in out
    hits = namespace["hits"].results  # type: ignore[attr-defined]
    assert hits.get_column("segment_id").to_list() == ["g#0", "g#3"]
    assert '["b"]' in out


def test_store_without_embeddings_searches_by_bm25_only(embedder, tmp_path):
    from arrowdedup import StoreError

    root = tmp_path / "s"
    write_store(ingest(corpus_frame(embedder).drop("embedding")), root)
    res = search(root, "Hopper compilers", k=2)  # no embedder needed: no dense signal
    assert top(res)["segment_id"] == "history-1"
    assert res.results.get_column("rank_dense").null_count() == res.results.height
    with pytest.raises(StoreError, match="semantic search"):
        search(root, "Hopper", mode="semantic")


@pytest.mark.slow
def test_minilm_store_embeds_text_queries_with_its_recorded_model(tmp_path):
    from arrowdedup.embed.embedders import MINILM_NAME, MiniLMEmbedder

    minilm = MiniLMEmbedder()
    root = tmp_path / "s"
    write_store(ingest(corpus_frame(minilm)), root, embedding_model=MINILM_NAME)
    res = search(root, "How much should a young dog eat?", k=3)  # no embedder=: the manifest's
    assert top(res)["segment_id"] == "pets-2"
    res = search(root, "Hopper", k=3, mode="keyword")
    assert top(res)["segment_id"] == "history-1"
