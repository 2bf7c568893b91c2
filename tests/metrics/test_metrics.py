"""Analytics views, warnings and Prometheus text against values computed from the decisions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from arrowdedup import AnalyticsConfig, DedupConfig, IngestionResult, StoreError, open_store
from arrowdedup.cli import app
from arrowdedup.metrics import (
    CORPUS_METRICS,
    compute_warnings,
    connect,
    corpus_metrics,
    metric_views,
    prometheus_text,
)
from arrowdedup.metrics.views import RETRIEVAL_LOG_COLUMNS
from tests.helpers import segments_frame
from tests.helpers.metrics_corpus import build_store, corpus, empty_frame, write_log

runner = CliRunner()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, IngestionResult]:
    root = tmp_path_factory.mktemp("metrics") / "store"
    result = build_store(root)
    write_log(root, "a", [(10, 7), (10, 10), (8, 6)])
    return root, result


@pytest.fixture()
def con(built: tuple[Path, IngestionResult]) -> duckdb.DuckDBPyConnection:
    c = connect(built[0])
    yield c
    c.close()


def value(con: duckdb.DuckDBPyConnection, view: str) -> float | None:
    rows = con.sql(f"SELECT value FROM {view}").fetchall()
    assert len(rows) == 1
    return rows[0][0]


# ----------------------------------------------------------------------------- oracles


def removed(decisions: pl.DataFrame) -> pl.Expr:
    return (pl.col("action").cast(pl.String) != "kept").cast(pl.Float64)


def oracle_boosts(decisions: pl.DataFrame) -> pl.DataFrame:
    """Per kept segment: the boost of SPEC §2.6 (logarithmic, defaults) from the near counts."""
    near = (decisions.filter(pl.col("action").cast(pl.String) == "merged_near")
            .group_by("doc_id", "representative_id").len("near"))
    kept = decisions.filter(pl.col("action").cast(pl.String) == "kept").join(
        near, left_on=["doc_id", "segment_id"], right_on=["doc_id", "representative_id"],
        how="left").with_columns(pl.col("near").fill_null(0))
    c = kept.get_column("near").to_numpy().astype(np.float64)
    boost = np.where(c > 0, 0.15 * np.log1p(c) / np.log(2.0), 0.0)
    return kept.with_columns(pl.Series("boost", boost))


def test_base_views_are_the_store_files(con: duckdb.DuckDBPyConnection,
                                        built: tuple[Path, IngestionResult]) -> None:
    _, result = built
    assert con.sql("SELECT count(*) FROM decisions").fetchall()[0][0] == result.decisions.height
    assert con.sql("SELECT count(*) FROM segments").fetchall()[0][0] == result.kept.height
    docs = con.sql("SELECT * FROM documents ORDER BY doc_id").pl()
    assert docs.equals(result.documents.sort("doc_id"))
    assert "embedding" not in con.sql("SELECT * FROM segments").columns


def test_dedup_ratio_ingestion(con: duckdb.DuckDBPyConnection,
                               built: tuple[Path, IngestionResult]) -> None:
    expected = built[1].decisions.select(removed(built[1].decisions).mean()).item()
    assert value(con, "dedup_ratio_ingestion") == pytest.approx(expected, rel=1e-12)
    assert 0.0 < expected < 1.0


def test_dedup_ratio_retrieval(con: duckdb.DuckDBPyConnection) -> None:
    assert value(con, "dedup_ratio_retrieval") == pytest.approx((3 + 0 + 2) / (10 + 10 + 8))


def test_salience_boost_views(con: duckdb.DuckDBPyConnection,
                              built: tuple[Path, IngestionResult]) -> None:
    kept = oracle_boosts(built[1].decisions)
    per_doc = kept.group_by("doc_id").agg(pl.col("boost").mean())
    assert value(con, "avg_salience_boost") == pytest.approx(per_doc["boost"].mean(), rel=1e-9)
    assert value(con, "max_salience_boost") == pytest.approx(kept["boost"].max(), rel=1e-9)
    assert kept["boost"].max() > 0


def test_dedup_by_doc_type(con: duckdb.DuckDBPyConnection,
                           built: tuple[Path, IngestionResult]) -> None:
    types = corpus().select("doc_id", "doc_type").unique("doc_id")
    dec = built[1].decisions
    expected = (dec.join(types, on="doc_id").group_by("doc_type")
                .agg(pl.col("doc_id").n_unique().cast(pl.Int64).alias("documents"),
                     pl.len().cast(pl.Int64).alias("segments"),
                     removed(dec).mean().alias("value"))
                .sort("doc_type", nulls_last=True))
    got = con.sql("SELECT * FROM dedup_by_doc_type").pl()
    assert got.columns == ["doc_type", "documents", "segments", "value"]
    assert got.select("doc_type", "documents", "segments").equals(
        expected.select("doc_type", "documents", "segments"))
    assert got["value"].to_list() == pytest.approx(expected["value"].to_list(), rel=1e-12)
    assert got["doc_type"].null_count() == 1  # the document without a type is a row too


def test_dedup_by_language(con: duckdb.DuckDBPyConnection,
                           built: tuple[Path, IngestionResult]) -> None:
    frame = corpus().select("doc_id", "segment_id", "language")
    dec = built[1].decisions.drop("language").join(frame, on=["doc_id", "segment_id"])
    expected = (dec.group_by("language")
                .agg(pl.col("doc_id").n_unique().cast(pl.Int64).alias("documents"),
                     pl.len().cast(pl.Int64).alias("segments"), removed(dec).mean().alias("value"))
                .sort("language"))
    got = con.sql("SELECT * FROM dedup_by_language").pl()
    assert got.columns == ["language", "documents", "segments", "value"]
    assert got.select("language", "documents", "segments").equals(
        expected.select("language", "documents", "segments"))
    assert got["value"].to_list() == pytest.approx(expected["value"].to_list(), rel=1e-12)


def test_no_language_view_without_the_column(tmp_path: Path) -> None:
    build_store(tmp_path / "s", corpus().drop("language"))
    c = connect(tmp_path / "s")
    assert "dedup_by_language" not in metric_views(c)
    assert "language" not in c.sql("SELECT * FROM decisions").columns
    assert value(c, "dedup_ratio_ingestion") is not None


def test_connect_accepts_an_open_store_and_a_connection(built: tuple[Path, IngestionResult]
                                                        ) -> None:
    mine = duckdb.connect()
    got = connect(open_store(built[0]), mine)
    assert got is mine
    assert set(metric_views(mine)) == {*CORPUS_METRICS, "dedup_by_doc_type", "dedup_by_language"}


def test_views_follow_a_new_ingest_and_new_searches(tmp_path: Path) -> None:
    root = tmp_path / "s"
    build_store(root)
    write_log(root, "first", [(10, 5)])
    c = connect(root)
    before = value(c, "dedup_ratio_ingestion")
    assert value(c, "dedup_ratio_retrieval") == pytest.approx(0.5)
    # A second ingest of only the duplicate-free document: the same connection sees it.
    second = build_store(root, corpus().filter(pl.col("doc_id") == "misc-1"))
    assert second.dedup_ratio == 0.0
    assert value(c, "dedup_ratio_ingestion") == 0.0 != before
    assert c.sql("SELECT count(*) FROM documents").fetchall()[0][0] == 1
    write_log(root, "second", [(10, 10)])
    assert value(c, "dedup_ratio_retrieval") == pytest.approx(5 / 20)


def test_store_without_retrieval_log(tmp_path: Path) -> None:
    build_store(tmp_path / "s")
    c = connect(tmp_path / "s")
    log = c.sql("SELECT * FROM retrieval_log")
    assert log.columns == list(RETRIEVAL_LOG_COLUMNS)
    assert [str(t) for t in log.types] == [
        "TIMESTAMP WITH TIME ZONE", "VARCHAR", "VARCHAR", "VARCHAR", "INTEGER", "BIGINT",
        "BIGINT", "BIGINT", "VARCHAR"]
    assert log.fetchall() == []
    assert value(c, "dedup_ratio_retrieval") is None
    metrics = corpus_metrics(c)
    assert metrics["dedup_ratio_retrieval"] is None
    assert metrics["dedup_ratio_ingestion"] is not None
    # A retrieval threshold of 0 cannot fire without searches.
    cfg = AnalyticsConfig(high_retrieval_dedup_threshold=0.0)
    assert not [w for w in compute_warnings(c, cfg) if w.metric == "dedup_ratio_retrieval"]
    # The first search is visible on the same connection (the directory did not exist).
    assert not (tmp_path / "s" / "retrieval_log").exists()
    write_log(tmp_path / "s", "first", [(4, 3)])
    assert c.sql("SELECT count(*) FROM retrieval_log").fetchall() == [(1,)]
    assert value(c, "dedup_ratio_retrieval") == pytest.approx(0.25)


def test_empty_store(tmp_path: Path) -> None:
    build_store(tmp_path / "s", empty_frame())
    c = connect(tmp_path / "s")
    assert corpus_metrics(c) == dict.fromkeys(CORPUS_METRICS)
    assert c.sql("SELECT * FROM dedup_by_doc_type").fetchall() == []
    assert compute_warnings(c, AnalyticsConfig(low_ingestion_dedup_threshold=1.0)) == []
    out = runner.invoke(app, ["stats", str(tmp_path / "s"), "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == {**dict.fromkeys(CORPUS_METRICS), "dedup_by_doc_type": [],
                                      "warnings": []}
    families = list(text_string_to_metric_families(prometheus_text(c, corpus_metrics(c), [])))
    assert all(not f.samples for f in families)


def test_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store at"):
        connect(tmp_path / "missing")


# ----------------------------------------------------------------------------- warnings


def warnings_for(con: duckdb.DuckDBPyConnection, **thresholds: float) -> dict[str, list]:
    out: dict[str, list] = {}
    for w in compute_warnings(con, AnalyticsConfig(**thresholds)):
        out.setdefault(w.metric, []).append(w)
    return out


def test_high_ingestion_warning_fires_above_the_threshold_only(
        con: duckdb.DuckDBPyConnection) -> None:
    # faq-1 and faq-2 sit exactly at 0.5; spam-1 is at 5/7.
    at = warnings_for(con, high_ingestion_dedup_threshold=0.5, low_ingestion_dedup_threshold=0.0)
    [w] = at["dedup_ratio_ingestion"]
    assert w.doc_ids == ("spam-1",) and w.value == pytest.approx(5 / 7) and w.threshold == 0.5
    below = warnings_for(con, high_ingestion_dedup_threshold=math.nextafter(0.5, 0.0),
                         low_ingestion_dedup_threshold=0.0)
    [w] = below["dedup_ratio_ingestion"]
    assert w.doc_ids == ("spam-1", "faq-1", "faq-2")  # worst first, ties by doc_id
    spam = warnings_for(con, high_ingestion_dedup_threshold=5 / 7,
                        low_ingestion_dedup_threshold=0.0)
    assert "dedup_ratio_ingestion" not in spam


def _repetitive(tmp_path: Path, name: str, *, copies: int, near_pairs: int) -> Path:
    """A store of 300 distinct segments (random 64-d directions, cosine far below 0.90), one
    sentence repeated ``copies + 1`` times (``copies`` exact copies dropped) and
    ``near_pairs`` pairs of differently worded segments that share one direction (cosine 1:
    merged or refused by the guard, either way seen)."""
    rng = np.random.default_rng(3)
    texts = [f"Distinct statement number {i} about topic {i * 7 % 13}." for i in range(300)]
    vecs = [rng.normal(size=64) for _ in texts]
    texts += ["The footer that every page repeats."] * (copies + 1)
    vecs += [rng.normal(size=64)] * (copies + 1)
    for i in range(near_pairs):
        v = rng.normal(size=64)
        texts += [f"Install the agent on host {i}.", f"Install the agent on the host {i}."]
        vecs += [v, v]
    vecs = [v / np.linalg.norm(v) for v in vecs]
    docs = [f"d{i % 5}" for i in range(300)] + ["d0"] * (copies + 1) + ["d1"] * 2 * near_pairs
    frame = segments_frame(texts, vecs, doc_id=docs,
                           salience=[0.9] * len(texts))
    frame = frame.with_columns(
        pl.int_range(pl.len()).over("doc_id").cast(pl.Int32).alias("position"),
        (pl.col("doc_id") + "/" + pl.col("segment_id")).alias("segment_id"))
    root = tmp_path / name
    build_store(root, frame)
    return root


def test_low_ingestion_note_fires_only_when_embeddings_miss_repetition(tmp_path: Path) -> None:
    """The rule decided on the shared corpus (README, `stats`): a low ratio alone is not a
    problem; a low ratio with verbatim copies but fewer near pairs seen than copies is."""
    def low(root: Path) -> list:
        c = connect(root)
        try:
            return warnings_for(c, high_ingestion_dedup_threshold=1.0).get(
                "dedup_ratio_ingestion", [])
        finally:
            c.close()

    blind = _repetitive(tmp_path, "blind", copies=12, near_pairs=3)  # 12 copies, 3 pairs seen
    [w] = low(blind)
    assert w.value < 0.05 and w.threshold == 0.05 and w.doc_ids == ()
    assert "12 verbatim copies" in w.message and "calibrate" in w.message
    c = connect(blind)
    assert warnings_for(c, low_ingestion_dedup_threshold=w.value,  # at the ratio: healthy
                        high_ingestion_dedup_threshold=1.0).get("dedup_ratio_ingestion") is None
    c.close()
    # As many near pairs seen as copies: the embeddings see repetition, the ratio is the data's.
    assert low(_repetitive(tmp_path, "sees", copies=12, near_pairs=12)) == []
    # Too few copies to judge, and no copies at all: no warning.
    assert low(_repetitive(tmp_path, "few", copies=9, near_pairs=0)) == []
    assert low(_repetitive(tmp_path, "none", copies=0, near_pairs=0)) == []


def test_retrieval_warning_fires_above_the_threshold_only(
        con: duckdb.DuckDBPyConnection) -> None:
    ratio = value(con, "dedup_ratio_retrieval")
    assert ratio is not None
    assert "dedup_ratio_retrieval" not in warnings_for(con, high_retrieval_dedup_threshold=ratio)
    [w] = warnings_for(con, high_retrieval_dedup_threshold=math.nextafter(ratio, 0.0))[
        "dedup_ratio_retrieval"]
    assert w.value == ratio and w.doc_ids == ()


def test_salience_boost_warning_fires_at_the_threshold(con: duckdb.DuckDBPyConnection) -> None:
    top = value(con, "max_salience_boost")
    assert top is not None
    [w] = warnings_for(con, high_salience_boost_threshold=top)["max_salience_boost"]
    assert w.doc_ids == ("spam-1",) and w.value == top
    assert "max_salience_boost" not in warnings_for(
        con, high_salience_boost_threshold=math.nextafter(top, 1.0))
    [w] = warnings_for(con, high_salience_boost_threshold=0.2)["max_salience_boost"]
    assert w.doc_ids == ("spam-1", "faq-1")


def test_default_thresholds(con: duckdb.DuckDBPyConnection) -> None:
    got = {w.metric: w for w in compute_warnings(con, AnalyticsConfig())}
    # Defaults: spam-1 loses 5/7 > 50 %; retrieval 5/28 < 30 %; boosts stay below 0.60.
    assert set(got) == {"dedup_ratio_ingestion"}
    assert got["dedup_ratio_ingestion"].doc_ids == ("spam-1",)


# ----------------------------------------------------------------------------- CLI


def test_stats_json_uses_the_store_config(tmp_path: Path) -> None:
    root = tmp_path / "s"
    cfg = DedupConfig.from_json({"Analytics": {"HighSalienceBoostThreshold": 0.2}})
    build_store(root, config=cfg)
    out = runner.invoke(app, ["stats", str(root), "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert list(data) == [*CORPUS_METRICS, "dedup_by_doc_type", "warnings"]
    assert data["dedup_ratio_retrieval"] is None
    c = connect(root)
    for name in CORPUS_METRICS:
        assert data[name] == value(c, name)
    assert data["dedup_by_doc_type"] == c.sql("SELECT * FROM dedup_by_doc_type").to_dicts()
    assert all(set(w) == {"metric", "value", "threshold", "doc_ids"} for w in data["warnings"])
    boost = [w for w in data["warnings"] if w["metric"] == "max_salience_boost"]
    assert boost == [{"metric": "max_salience_boost", "value": pytest.approx(0.387744, abs=1e-6),
                      "threshold": 0.2, "doc_ids": ["spam-1", "faq-1"]}]


def test_stats_table_names_the_documents(built: tuple[Path, IngestionResult]) -> None:
    out = runner.invoke(app, ["stats", str(built[0])])
    assert out.exit_code == 0, out.output
    assert "dedup_by_doc_type" in out.output and "dedup_by_language" in out.output
    assert "warning: dedup_ratio_ingestion" in out.output and "spam-1" in out.output


def test_stats_sql(built: tuple[Path, IngestionResult]) -> None:
    out = runner.invoke(app, ["stats", str(built[0]), "--format", "json", "--sql",
                              "SELECT doc_id, final_count FROM documents ORDER BY doc_id"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert rows == built[1].documents.sort("doc_id").select("doc_id", "final_count").to_dicts()
    out = runner.invoke(app, ["stats", str(built[0]), "--sql", "SELECT * FROM dedup_by_language"])
    assert out.exit_code == 0 and "fr" in out.output


@pytest.mark.parametrize(("query", "expected"), [
    ("SELECT * FROM no_such_view", "Catalog Error"),
    ("SELEC 1", "Parser Error"),
    ("SELECT no_such_column FROM documents", "Binder Error"),
])
def test_stats_sql_errors_are_one_clean_line(built: tuple[Path, IngestionResult], query: str,
                                             expected: str) -> None:
    out = runner.invoke(app, ["stats", str(built[0]), "--sql", query])
    assert out.exit_code == 1
    lines = out.output.strip().splitlines()
    assert len(lines) == 1, out.output
    assert lines[0].startswith("error: --sql query failed: ") and expected in lines[0]
    assert "dedup_by_doc_type" in lines[0] and "Traceback" not in out.output


def test_stats_on_a_missing_store_is_clean(tmp_path: Path) -> None:
    out = runner.invoke(app, ["stats", str(tmp_path / "nope")])
    assert out.exit_code == 1 and out.output.startswith("error: no store at")


# ----------------------------------------------------------------------------- Prometheus


def test_prometheus_text_parses_and_matches_the_views(built: tuple[Path, IngestionResult],
                                                      con: duckdb.DuckDBPyConnection) -> None:
    out = runner.invoke(app, ["stats", str(built[0]), "--format", "prometheus"])
    assert out.exit_code == 0, out.output
    families = {f.name: f for f in text_string_to_metric_families(out.output)}
    assert all(f.type == "gauge" for f in families.values())
    for name in CORPUS_METRICS:
        [sample] = families[f"arrowdedup_{name}"].samples
        assert sample.value == pytest.approx(value(con, name), rel=1e-12)
    by_type = {s.labels["doc_type"]: s.value
               for s in families["arrowdedup_dedup_ratio_by_doc_type"].samples}
    rows = con.sql("SELECT coalesce(doc_type, ''), value FROM dedup_by_doc_type").fetchall()
    assert by_type == pytest.approx(dict(rows))
    assert {s.labels["doc_type"]: s.value for s in
            families["arrowdedup_segments_by_doc_type"].samples}["spam"] == 7
    [warn] = families["arrowdedup_warnings"].samples
    assert warn.labels == {"metric": "dedup_ratio_ingestion"} and warn.value == 1


def test_prometheus_escapes_label_values(tmp_path: Path) -> None:
    odd = 'we"ird\\type\nx'
    build_store(tmp_path / "s", corpus().with_columns(pl.lit(odd).alias("doc_type")))
    c = connect(tmp_path / "s")
    text = prometheus_text(c, corpus_metrics(c), [])
    families = {f.name: f for f in text_string_to_metric_families(text)}
    [sample] = families["arrowdedup_documents_by_doc_type"].samples
    assert sample.labels["doc_type"] == odd and sample.value == 5


# ----------------------------------------------------------------------------- property


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 4),
                          # Real words: the store's BM25 index refuses a corpus with no token.
                          st.sampled_from(["alpha", "bravo", "charlie", "delta"]),
                          st.sampled_from([0.01, 0.5, 0.9]), st.sampled_from(["en", "de"])),
                min_size=1, max_size=30))
def test_group_views_match_polars_on_random_tables(tmp_path_factory: pytest.TempPathFactory,
                                                   rows: list[tuple[int, str, float, str]]
                                                   ) -> None:
    docs = [f"doc{d}" for d, _, _, _ in rows]
    frame = segments_frame([t for _, t, _, _ in rows], doc_id=docs,
                           salience=[s for _, _, s, _ in rows],
                           doc_type=[None if d == 4 else f"type{d % 2}" for d, _, _, _ in rows],
                           language=[lang for _, _, _, lang in rows])
    root = tmp_path_factory.mktemp("prop") / "s"
    result = build_store(root, frame)
    c = connect(root)
    dec = result.decisions.join(frame.select("doc_id", "segment_id", "doc_type"),
                                on=["doc_id", "segment_id"])
    assert value(c, "dedup_ratio_ingestion") == pytest.approx(
        dec.select(removed(dec).mean()).item(), rel=1e-12)
    for key, view in (("doc_type", "dedup_by_doc_type"), ("language", "dedup_by_language")):
        expected = (dec.group_by(key)
                    .agg(pl.col("doc_id").n_unique().cast(pl.Int64).alias("documents"),
                         pl.len().cast(pl.Int64).alias("segments"),
                         removed(dec).mean().alias("value"))
                    .sort(key, nulls_last=True))
        got = c.sql(f"SELECT * FROM {view}").pl()
        assert got.drop("value").equals(expected.drop("value"))
        assert got["value"].to_list() == pytest.approx(expected["value"].to_list(), rel=1e-12)
    c.close()
