"""The warnings of SPEC §8, with the thresholds recorded in the store's config.

Comparisons follow the SPEC wording and its healthy ranges, so a value exactly at a threshold
is on the healthy side:

- ``dedup_ratio_ingestion`` high: a document's dedup ratio ``> HighIngestionDedupThreshold``
  (boilerplate or a generated document); ``value`` is the highest such ratio.
- ``dedup_ratio_ingestion`` low: the corpus ratio ``< LowIngestionDedupThreshold`` (diverse
  content or poor embeddings); a corpus-wide note, so ``doc_ids`` is empty.
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
        out.append(MetricWarning(
            "dedup_ratio_ingestion", ratio, low, (),
            f"ingestion removed only {ratio:.1%} of the segments (< {low:.0%}): diverse "
            "content, or embeddings too poor to see near duplicates",
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
