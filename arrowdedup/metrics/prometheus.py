"""The metrics as Prometheus text exposition (format 0.0.4), without a client library.

Corpus-level gauges have no labels and are left without a sample while they have no data
(NULL); the per-``doc_type`` gauges carry a ``doc_type`` label (empty for documents without a
type, which Prometheus reads as "no doc_type").
"""

from __future__ import annotations

import math

import duckdb

from .warnings import MetricWarning

PREFIX = "arrowdedup_"

_CORPUS_HELP = {
    "dedup_ratio_ingestion": "Fraction of input segments removed at ingestion.",
    "dedup_ratio_retrieval": "Fraction of search results removed by retrieval dedup.",
    "avg_salience_boost": "Mean over documents of the mean salience boost of kept segments.",
    "max_salience_boost": "Largest salience boost of any kept segment.",
    "guard_refused_merges": "Segments the fact guard kept from a cosine-only merge.",
}

_BY_DOC_TYPE = (
    ("dedup_ratio_by_doc_type", "value", "Fraction of segments removed at ingestion per doc_type."),
    ("documents_by_doc_type", "documents", "Documents per doc_type."),
    ("segments_by_doc_type", "segments", "Input segments per doc_type."),
)


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))  # a count (or a whole ratio) reads as 638, not 638.0
    return repr(float(value))


def _family(name: str, help_text: str, samples: list[tuple[str, float]]) -> list[str]:
    lines = [f"# HELP {PREFIX}{name} {help_text}", f"# TYPE {PREFIX}{name} gauge"]
    lines += [f"{PREFIX}{name}{labels} {_number(v)}" for labels, v in samples]
    return lines


def prometheus_text(
    con: duckdb.DuckDBPyConnection,
    metrics: dict[str, float | None],
    warnings: list[MetricWarning],
) -> str:
    """The exposition text of the corpus metrics, the per-doc_type breakdown and the warnings."""
    lines: list[str] = []
    for name, help_text in _CORPUS_HELP.items():
        value = metrics.get(name)
        lines += _family(name, help_text, [] if value is None else [("", value)])
    rows = con.sql(
        "SELECT doc_type, documents, segments, value FROM dedup_by_doc_type").fetchall()
    for name, column, help_text in _BY_DOC_TYPE:
        index = ("doc_type", "documents", "segments", "value").index(column)
        samples = [(f'{{doc_type="{_escape_label(r[0] or "")}"}}', float(r[index]))
                   for r in rows]
        lines += _family(name, help_text, samples)
    counts: dict[str, int] = {}
    for w in warnings:
        counts[w.metric] = counts.get(w.metric, 0) + 1
    lines += _family(
        "warnings", "Warnings firing per metric (SPEC section 8 thresholds).",
        [(f'{{metric="{_escape_label(m)}"}}', float(c)) for m, c in sorted(counts.items())],
    )
    return "\n".join(lines) + "\n"
