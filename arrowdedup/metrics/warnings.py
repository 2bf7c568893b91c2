"""The warnings of SPEC §8, with the thresholds recorded in the store's config.

Comparisons follow the SPEC wording and its healthy ranges, so a value exactly at a threshold
is on the healthy side:

- ``dedup_ratio_ingestion`` high: a document's dedup ratio ``> HighIngestionDedupThreshold``
  (boilerplate or a generated document); ``value`` is the highest such ratio.
- ``dedup_ratio_ingestion`` low: the corpus ratio ``< LowIngestionDedupThreshold`` *and* the
  embeddings miss repetition the corpus evidently has: it holds at least
  :data:`MIN_EXACT_COPIES` verbatim copies, yet the embeddings put fewer segments at the
  similarity threshold of another (merged, or kept by the fact guard) than there are copies.
  A corpus-wide note, so ``doc_ids`` is empty. A low ratio alone is not a problem: on the
  shared OpenTelemetry docs every embedder gives 2-4 % (the copies and the noise filter make
  most of it, and the fact guard refuses most cosine-only merges), while a good embedder sees
  2-3 near pairs per copy and a broken one none (see :func:`near_pairs_seen`).
- ``dedup_ratio_retrieval`` high: the ratio over the logged searches
  ``> HighRetrievalDedupThreshold`` (queries too broad or many similar documents); the log
  names no documents, so ``doc_ids`` is empty.
- ``max_salience_boost`` high: a document's largest boost ``>= HighSalienceBoostThreshold``
  (the SPEC's healthy range is "< 0.60"; check the boost is legitimate, not spam).

Documents are listed worst first, ties by ``doc_id``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import duckdb

from ..config import AnalyticsConfig
from .views import corpus_metrics


@dataclasses.dataclass(frozen=True)
class MetricWarning:
    """One warning: the metric, the value that crossed, the threshold and the documents."""

    metric: str
    value: float
    threshold: float
    doc_ids: tuple[str, ...]
    message: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``arrowdedup stats --format json``."""
        return {"metric": self.metric, "value": self.value, "threshold": self.threshold,
                "doc_ids": list(self.doc_ids)}


def _documents_where(
    con: duckdb.DuckDBPyConnection, column: str, op: str, threshold: float
) -> tuple[float | None, tuple[str, ...]]:
    rows = con.execute(
        f"SELECT doc_id, {column} FROM documents WHERE {column} {op} ? "
        f"ORDER BY {column} DESC, doc_id",
        [threshold],
    ).fetchall()
    if not rows:
        return None, ()
    return float(rows[0][1]), tuple(str(r[0]) for r in rows)


# Fewer verbatim copies than this are too little evidence that the corpus repeats itself.
MIN_EXACT_COPIES = 10


def near_pairs_seen(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(verbatim copies dropped, segments the embeddings put at the similarity threshold of
    another: merged, or kept by the fact guard from a cosine-only merge).

    A corpus that repeats itself verbatim also repeats itself in other words (edited copies,
    reworded boilerplate), so embeddings that see duplicates find near pairs in proportion.
    Measured on the English OpenTelemetry docs (29,327 segments, 546-567 copies): MiniLM saw
    1.9 near pairs per copy, Model2Vec 2.9; the same Model2Vec vectors with noise of norm 0.3
    saw 0.5, with noise of norm 0.6 and random vectors 0. All five gave ratios of 3.0-3.7 %."""
    columns = {row[0] for row in con.sql("DESCRIBE decisions").fetchall()}
    # A store written before the fact guard has no refusals to count.
    refused = " OR guard_refused_id IS NOT NULL" if "guard_refused_id" in columns else ""
    exact, seen = con.sql(
        f"""
        SELECT count(*) FILTER (WHERE action = 'dropped_exact'),
               count(*) FILTER (WHERE action = 'merged_near'{refused})
        FROM decisions
        """
    ).fetchall()[0]
    return int(exact or 0), int(seen or 0)


# Share of kept segments with a verbatim copy in another document above which the retrieval
# warning blames the copies (version copies of a page, mirrored docs), not the queries.
COPY_SHARE = 0.2


def page_copies(con: duckdb.DuckDBPyConnection) -> tuple[float, int, list[str]] | None:
    """(share of kept segments whose text appears in another document, pages shared by
    several documents, the first few such documents) when that share is at least
    :data:`COPY_SHARE`, else None. A "page" is a doc_id's last path part."""
    rows = con.sql(
        """
        WITH t AS (SELECT doc_id, CAST(text AS VARCHAR) AS text FROM segments),
        shared AS (SELECT text FROM t GROUP BY text HAVING count(DISTINCT doc_id) > 1),
        flagged AS (SELECT t.doc_id, t.text IN (SELECT text FROM shared) AS copied FROM t)
        SELECT
          (SELECT avg(CAST(copied AS DOUBLE)) FROM flagged),
          (SELECT count(*) FROM (
              SELECT regexp_extract(doc_id, '[^/]*$') AS page FROM flagged WHERE copied
              GROUP BY page HAVING count(DISTINCT doc_id) > 1)),
          (SELECT list(doc_id ORDER BY doc_id) FROM (
              SELECT DISTINCT doc_id FROM flagged WHERE copied ORDER BY doc_id LIMIT 4))
        """
    ).fetchall()[0]
    if rows[0] is None or rows[0] < COPY_SHARE:
        return None
    return float(rows[0]), int(rows[1] or 0), [str(d) for d in (rows[2] or [])]


def compute_warnings(
    con: duckdb.DuckDBPyConnection,
    analytics: AnalyticsConfig,
    metrics: dict[str, float | None] | None = None,
) -> list[MetricWarning]:
    """The warnings that fire on the views of ``con`` (see the module docstring).

    ``metrics``: the :func:`corpus_metrics` of ``con`` when the caller has them already (the
    retrieval log is one file per search, so re-reading it is the expensive part)."""
    out: list[MetricWarning] = []
    metrics = corpus_metrics(con) if metrics is None else metrics

    high = analytics.high_ingestion_dedup_threshold
    worst, docs = _documents_where(con, "dedup_ratio", ">", high)
    if worst is not None:
        out.append(MetricWarning(
            "dedup_ratio_ingestion", worst, high, docs,
            f"{len(docs)} document(s) lost more than {high:.0%} of their segments at ingestion "
            "(boilerplate or generated documents?)",
        ))

    low = analytics.low_ingestion_dedup_threshold
    ratio = metrics["dedup_ratio_ingestion"]
    if ratio is not None and ratio < low:
        exact, seen = near_pairs_seen(con)
        if exact >= MIN_EXACT_COPIES and seen < exact:
            out.append(MetricWarning(
                "dedup_ratio_ingestion", ratio, low, (),
                f"ingestion removed only {ratio:.1%} of the segments (< {low:.0%}), and the "
                f"embeddings put {seen} segment(s) at the similarity threshold of another "
                f"while the corpus holds {exact} verbatim copies: embeddings too poor to see "
                "near duplicates? Check them against labelled pairs with `arrowdedup "
                "calibrate`, or ingest with another --embedder",
            ))

    retrieval = analytics.high_retrieval_dedup_threshold
    r_ratio = metrics["dedup_ratio_retrieval"]
    if r_ratio is not None and r_ratio > retrieval:
        copies = page_copies(con)
        if copies is not None:
            share, pages, copied = copies
            message = (
                f"retrieval dedup removed {r_ratio:.1%} of the results (> {retrieval:.0%}); "
                f"{share:.0%} of the kept segments have an exact copy in another document "
                f"({pages} page(s) appear in several documents, e.g. {', '.join(copied)}): most "
                "removed results are likely those copies, not too broad queries; narrow the "
                "search to one version (--where) or ingest one copy"
            )
            out.append(MetricWarning("dedup_ratio_retrieval", r_ratio, retrieval,
                                     tuple(copied), message))
        else:
            out.append(MetricWarning(
                "dedup_ratio_retrieval", r_ratio, retrieval, (),
                f"retrieval dedup removed {r_ratio:.1%} of the results (> {retrieval:.0%}) and "
                "the store holds few verbatim copies across documents: queries too broad, or "
                "many similar (not identical) documents",
            ))

    boost = analytics.high_salience_boost_threshold
    worst, docs = _documents_where(con, "max_salience_boost", ">=", boost)
    if worst is not None:
        out.append(MetricWarning(
            "max_salience_boost", worst, boost, docs,
            f"{len(docs)} document(s) have a salience boost of {boost:.2f} or more: check "
            "the repetition is legitimate, not spam",
        ))
    return out
