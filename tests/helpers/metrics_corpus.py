"""A small corpus and store for the analytics tests (every action, doc_type and language)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import polars as pl

from arrowdedup import DedupConfig, IngestionResult, ingest, write_store
from tests.helpers import segments_frame, unit

DIM = 16


def corpus(seed: int = 7) -> pl.DataFrame:
    """Five documents: near duplicates, exact duplicates, a low-salience row, a null doc_type."""
    rng = np.random.default_rng(seed)
    base = [unit(rng.normal(size=DIM)) for _ in range(12)]

    def near(v: np.ndarray) -> np.ndarray:
        return unit(v + rng.normal(scale=0.02, size=DIM))

    rows: list[tuple[str, str | None, str, str, np.ndarray, float]] = [
        # doc_id, doc_type, language, text, embedding, salience
        ("faq-1", "faq", "en", "alpha", base[0], 0.9),
        ("faq-1", "faq", "en", "alpha again", near(base[0]), 0.8),
        ("faq-1", "faq", "en", "alpha, once again", near(base[0]), 0.7),
        ("faq-1", "faq", "en", "beta", base[1], 0.6),
        ("faq-2", "faq", "en", "gamma", base[2], 0.9),
        ("faq-2", "faq", "en", "gamma", base[2], 0.5),
        ("guide-1", "guide", "fr", "delta", base[3], 0.9),
        ("guide-1", "guide", "fr", "epsilon", base[4], 0.8),
        ("guide-1", "guide", "fr", "zeta", base[5], 0.7),
        ("guide-1", "guide", "fr", "eta", base[6], 0.02),  # below SalienceThreshold: filtered
        ("misc-1", None, "de", "theta", base[7], 0.9),
        ("misc-1", None, "de", "iota", base[8], 0.8),
        ("misc-1", None, "de", "kappa", base[9], 0.7),
    ]
    rows += [("spam-1", "spam", "en", "buy now" + "!" * i, near(base[10]) if i else base[10], 0.9)
             for i in range(6)]
    rows += [("spam-1", "spam", "en", "unrelated", base[11], 0.5)]
    docs = [r[0] for r in rows]
    frame = segments_frame(
        [r[3] for r in rows], [r[4] for r in rows], doc_id=docs,
        salience=[r[5] for r in rows],
        doc_type=[r[1] for r in rows], language=[r[2] for r in rows],
    )
    # Positions restart per document, as a real segmenter writes them.
    return frame.with_columns(
        pl.int_range(pl.len()).over("doc_id").cast(pl.Int32).alias("position"),
        (pl.col("doc_id") + "/" + pl.col("segment_id")).alias("segment_id"),
    )


def build_store(root: Path, frame: pl.DataFrame | None = None,
                config: DedupConfig | None = None) -> IngestionResult:
    """Ingest ``frame`` (default: :func:`corpus`) and write it as a new version at ``root``."""
    result = ingest(corpus() if frame is None else frame, config)
    write_store(result, root, buckets=4)
    return result


def empty_frame() -> pl.DataFrame:
    return pl.DataFrame(schema={"doc_id": pl.String, "segment_id": pl.String, "text": pl.String,
                                "segment_type": pl.String, "position": pl.Int32,
                                "doc_type": pl.String})


def write_log(root: Path, name: str, searches: list[tuple[int, int]],
              start: dt.datetime | None = None) -> Path:
    """One retrieval-log file with the retrieval engine's schema; ``searches`` = (before,
    after) per search."""
    start = start or dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    n = len(searches)
    frame = pl.DataFrame({
        "time": pl.Series([start + dt.timedelta(seconds=i) for i in range(n)],
                          dtype=pl.Datetime("us", "UTC")),
        "run_id": ["run"] * n,
        "query_hash": [f"{name}-{i:04d}" for i in range(n)],
        "mode": ["hybrid"] * n,
        "k": pl.Series([10] * n, dtype=pl.Int32),
        "before": pl.Series([b for b, _ in searches], dtype=pl.Int64),
        "after": pl.Series([a for _, a in searches], dtype=pl.Int64),
        "removed": pl.Series([b - a for b, a in searches], dtype=pl.Int64),
        "timings": ['{"dense": 0.001}'] * n,
    })
    log_dir = root / "retrieval_log"
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / f"{name}.parquet"
    frame.write_parquet(path)
    return path
