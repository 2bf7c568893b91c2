"""Analytics latency (issue 6): DuckDB views, warnings, Prometheus text and the HTML report.

A synthetic store (``benchmarks.corpus``: planted near and exact copies, 5 doc types, 3
languages) plus a retrieval log of one Parquet file per search, as the search engine writes it.
Every number is the best of 3 runs on a fresh connection's warm views (the views re-read the
Parquet files on every query: nothing is cached between runs but the OS page cache).
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .common import table, timeit
from .corpus import make_corpus

TITLE = "Analytics: DuckDB views, warnings, Prometheus, report"
DOC_TYPES = ("faq", "guide", "api", "blog", "spec")
LANGUAGES = ("en", "de", "fr")


def _log(root: Path, searches: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    before = rng.integers(20, 60, size=searches)
    removed = rng.binomial(before, 0.15)
    directory = root / "retrieval_log"
    directory.mkdir(parents=True, exist_ok=True)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for i in range(searches):
        pl.DataFrame({
            "time": pl.Series([start + dt.timedelta(seconds=i)], dtype=pl.Datetime("us", "UTC")),
            "run_id": ["bench"], "query_hash": [f"{i:08x}"], "mode": ["hybrid"],
            "k": pl.Series([10], dtype=pl.Int32),
            "before": pl.Series([int(before[i])], dtype=pl.Int64),
            "after": pl.Series([int(before[i] - removed[i])], dtype=pl.Int64),
            "removed": pl.Series([int(removed[i])], dtype=pl.Int64),
            "timings": ['{"dense": 0.001}'],
        }).write_parquet(directory / f"{i:08d}.parquet")


def run(quick: bool) -> dict[str, Any]:
    from arrowdedup import ingest, open_store, write_store
    from arrowdedup.metrics import (
        compute_warnings,
        connect,
        corpus_metrics,
        prometheus_text,
        render_html,
    )

    docs, per_doc, searches = (2_000, 20, 100) if quick else (20_000, 50, 1_000)
    corpus = make_corpus(docs, per_doc, dim=32, seed=3)
    frame = pl.from_arrow(corpus.table)
    assert isinstance(frame, pl.DataFrame)
    doc_index = frame.get_column("doc_id").str.slice(1).cast(pl.Int64)
    frame = frame.with_columns(
        pl.Series("doc_type", np.asarray(DOC_TYPES)[doc_index.to_numpy() % len(DOC_TYPES)]),
        pl.Series("language", np.asarray(LANGUAGES)[doc_index.to_numpy() % len(LANGUAGES)]),
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="arrowdedup-analytics-") as tmp:
        root = Path(tmp) / "store"
        write_store(ingest(frame), root)
        _log(root, searches, seed=3)
        store = open_store(root)
        cfg = store.config.analytics
        rows.append(["connect (create the views)",
                     timeit(lambda: connect(store).close())["best"]])
        con = connect(store)
        for view in ("dedup_ratio_ingestion", "dedup_ratio_retrieval", "avg_salience_boost",
                     "max_salience_boost", "dedup_by_doc_type", "dedup_by_language"):
            rows.append([f"SELECT * FROM {view}",
                         timeit(lambda v=view: con.sql(f"SELECT * FROM {v}").fetchall())["best"]])
        def stats() -> tuple[Any, Any]:
            metrics = corpus_metrics(con)
            return metrics, compute_warnings(con, cfg, metrics)

        rows.append(["all metrics + warnings (stats --format json)", timeit(stats)["best"]])
        rows.append(["Prometheus text", timeit(lambda: prometheus_text(con, *stats()))["best"]])
        report = timeit(lambda: render_html(con, cfg, title="bench"), repeats=2)
        rows.append(["HTML report (5 plots)", report["best"]])
        figures = {"segments": frame.height, "documents": docs, "searches": searches,
                   "seconds": {r[0]: r[1] for r in rows},
                   "report_bytes": len(report["value"].encode("utf-8"))}
        con.close()
    return {
        "parameters": {"documents": docs, "segments_per_document": per_doc, "dim": 32,
                       "searches": searches},
        "figures": figures,
        "tables": [table(f"Analytics latency on {frame.height:,} segments, {docs:,} documents, "
                         f"{searches:,} logged searches (best of 3, seconds)",
                         ["query", "seconds"], rows)],
        "notes": ["Views over the bucketed Parquet files; nothing is materialised."],
    }
