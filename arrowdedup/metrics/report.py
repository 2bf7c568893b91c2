"""The analyst's HTML report: one self-contained file (PNG plots inlined as base64).

The plots are plain :class:`matplotlib.figure.Figure` objects built from the DuckDB views, so the
notebook dashboard shows exactly the same ones. No pyplot: nothing depends on the backend.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..config import AnalyticsConfig
from ..errors import StoreError
from ..escape import escape
from ..store import Store, open_store
from .views import CORPUS_METRICS, connect, corpus_metrics
from .warnings import MetricWarning, compute_warnings

MAX_DUPLICATES_SHOWN = 10  # per boosted segment in the report table (the view has them all)
ACTIONS = ("dropped_exact", "merged_near", "filtered_low_salience")
ACTION_LABELS = {"dropped_exact": "exact", "merged_near": "near",
                 "filtered_low_salience": "filtered"}
ACTION_COLORS = {"dropped_exact": "#d62728", "merged_near": "#1f77b4",
                 "filtered_low_salience": "#7f7f7f"}


@dataclasses.dataclass(frozen=True)
class ReportData:
    """What the plots and tables are drawn from (small frames, fetched once)."""

    documents: pl.DataFrame  # doc_id, doc_type, dedup_ratio, max_salience_boost
    by_doc_type: pl.DataFrame  # doc_type, documents, segments, value
    boosts: pl.Series  # salience_boost of every kept segment
    actions: pl.DataFrame  # doc_type, action, n (removed decisions only)
    searches: pl.DataFrame  # time, query_hash, before, removed, ratio
    metrics: dict[str, float | None]
    warnings: list[MetricWarning]
    analytics: AnalyticsConfig


def report_data(con: duckdb.DuckDBPyConnection, analytics: AnalyticsConfig) -> ReportData:
    """Fetch everything the report needs from the views of ``con``."""
    metrics = corpus_metrics(con)
    return ReportData(
        documents=con.sql(
            "SELECT doc_id, coalesce(doc_type, '(none)') AS doc_type, dedup_ratio, "
            "max_salience_boost FROM documents ORDER BY doc_id").pl(),
        by_doc_type=con.sql(
            "SELECT coalesce(doc_type, '(none)') AS doc_type, documents, segments, value "
            "FROM dedup_by_doc_type").pl(),
        boosts=con.sql("SELECT salience_boost FROM segments").pl().get_column("salience_boost"),
        actions=con.sql(
            "SELECT coalesce(doc.doc_type, '(none)') AS doc_type, CAST(d.action AS VARCHAR) "
            "AS action, count(*) AS n FROM decisions AS d JOIN documents AS doc "
            "ON doc.doc_id = d.doc_id WHERE d.action <> 'kept' GROUP BY ALL ORDER BY ALL").pl(),
        searches=con.sql(
            'SELECT "time", query_hash, "before", removed, '
            'CASE WHEN "before" > 0 THEN removed / "before" END AS ratio '
            'FROM retrieval_log ORDER BY "time", query_hash').pl(),
        metrics=metrics,
        warnings=compute_warnings(con, analytics, metrics),
        analytics=analytics,
    )


# ----------------------------------------------------------------------------- figures


def _figure(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Any]:
    fig = Figure(figsize=(7.5, 3.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return fig, ax


def _label(text: object) -> str:
    """A data value as a plot label, drawn as written: matplotlib reads text between two
    ``$`` as mathtext (a doc_type ``$x_$`` ended the report in a parse error), so ``$`` is
    escaped (``\\$`` is drawn as ``$``); a control character, which no font has a glyph
    for, is drawn as its escape (``\\x1b``)."""
    return escape(text).replace("$", "\\$")


def _no_data(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555555")


def doc_ratio_figure(data: ReportData) -> Figure:
    """Histogram of the per-document dedup ratio, with the warning thresholds."""
    fig, ax = _figure("Dedup ratio per document", "dedup ratio (removed / segments)",
                      "documents")
    ratios = data.documents.get_column("dedup_ratio").drop_nulls().to_numpy()
    ax.hist(ratios, bins=20, range=(0.0, 1.0), color="#1f77b4", edgecolor="white")
    cfg = data.analytics
    ax.axvline(cfg.high_ingestion_dedup_threshold, color="#d62728", linestyle="--",
               label=f"high > {cfg.high_ingestion_dedup_threshold:g}")
    ax.axvline(cfg.low_ingestion_dedup_threshold, color="#ff7f0e", linestyle=":",
               label=f"low < {cfg.low_ingestion_dedup_threshold:g}")
    ax.legend(loc="upper right")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if ratios.size == 0:
        _no_data(ax, "no documents")
    return fig


def doc_type_figure(data: ReportData) -> Figure:
    """Bar chart of the dedup ratio per doc_type."""
    fig, ax = _figure("Dedup ratio per doc_type", "doc_type", "dedup ratio")
    frame = data.by_doc_type
    if frame.height:
        labels = [_label(t) for t in frame.get_column("doc_type").to_list()]
        ax.bar(labels, frame.get_column("value").to_list(), color="#2ca02c")
        ax.tick_params(axis="x", labelrotation=30)
    else:
        _no_data(ax, "no documents")
    ax.set_ylim(0.0, 1.0)
    return fig


def boost_figure(data: ReportData) -> Figure:
    """Histogram of the salience boost of kept segments (log-scaled counts)."""
    fig, ax = _figure("Salience boost of kept segments", "salience boost", "segments")
    boosts = data.boosts.drop_nulls().to_numpy()
    if boosts.size:
        top = max(float(boosts.max()), data.analytics.high_salience_boost_threshold) * 1.05
        ax.hist(boosts, bins=30, range=(0.0, top or 1.0), color="#9467bd", edgecolor="white",
                log=True)
    else:
        _no_data(ax, "no kept segments")
    ax.axvline(data.analytics.high_salience_boost_threshold, color="#d62728", linestyle="--",
               label=f"warn >= {data.analytics.high_salience_boost_threshold:g}")
    ax.legend(loc="upper right")
    return fig


def action_figure(data: ReportData) -> Figure:
    """Exact vs near vs filtered removals, stacked per doc_type."""
    fig, ax = _figure("Removed segments: exact vs near vs filtered", "doc_type", "segments")
    frame = data.actions
    if frame.height:
        types = sorted(set(frame.get_column("doc_type").to_list()))
        bottom = [0.0] * len(types)
        for action in ACTIONS:
            sub = dict(frame.filter(pl.col("action") == action)
                       .select("doc_type", "n").iter_rows())
            heights = [float(sub.get(t, 0)) for t in types]
            ax.bar([_label(t) for t in types], heights, bottom=bottom, label=ACTION_LABELS[action],
                   color=ACTION_COLORS[action])
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.tick_params(axis="x", labelrotation=30)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        _no_data(ax, "nothing removed")
    return fig


def retrieval_figure(data: ReportData) -> Figure:
    """The retrieval dedup ratio of each logged search, in time order."""
    fig, ax = _figure("Retrieval dedup ratio over searches", "search (time order)",
                      "removed / results")
    frame = data.searches
    threshold = data.analytics.high_retrieval_dedup_threshold
    if frame.height:
        ratios = frame.get_column("ratio").fill_null(0.0).to_list()
        ax.plot(range(1, len(ratios) + 1), ratios, marker="o", color="#17becf")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        _no_data(ax, "no searches logged yet")
    ax.axhline(threshold, color="#d62728", linestyle="--", label=f"high > {threshold:g}")
    ax.set_ylim(0.0, 1.0)
    ax.legend(loc="upper right")
    return fig


def figures(data: ReportData) -> dict[str, Figure]:
    """Every plot of the report, by title, in page order."""
    return {
        "Dedup ratio per document": doc_ratio_figure(data),
        "Dedup ratio per doc_type": doc_type_figure(data),
        "Salience boost": boost_figure(data),
        "Exact vs near vs filtered": action_figure(data),
        "Retrieval dedup over searches": retrieval_figure(data),
    }


def figure_png(fig: Figure) -> bytes:
    """PNG bytes of ``fig`` (no timestamp metadata, so identical data gives identical bytes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


# ----------------------------------------------------------------------------- tables


def top_boosted(con: duckdb.DuckDBPyConnection, limit: int = 10) -> pl.DataFrame:
    """The most boosted kept segments with the duplicates merged into them.

    Columns: ``doc_id, segment_id, text`` (first 200 characters), ``salience_boost``,
    ``near_duplicate_count``, ``exact_duplicate_count`` and ``duplicates`` (list of
    ``{segment_id, action, similarity}``, most similar first).
    """
    return con.sql(
        """
        WITH top AS (
            SELECT doc_id, segment_id, left(CAST(text AS VARCHAR), 200) AS text, salience_boost,
                   near_duplicate_count, exact_duplicate_count
            FROM segments WHERE salience_boost > 0
            ORDER BY salience_boost DESC, near_duplicate_count DESC, doc_id, segment_id
            LIMIT ?
        )
        SELECT t.doc_id, t.segment_id, t.text, t.salience_boost, t.near_duplicate_count,
               t.exact_duplicate_count,
               coalesce(list({'segment_id': d.segment_id, 'action': CAST(d.action AS VARCHAR),
                              'similarity': d.similarity}
                             ORDER BY d.similarity DESC NULLS LAST, d.segment_id)
                        FILTER (WHERE d.segment_id IS NOT NULL), []) AS duplicates
        FROM top AS t
        LEFT JOIN decisions AS d
          ON d.doc_id = t.doc_id AND d.representative_id = t.segment_id AND d.action <> 'kept'
        GROUP BY ALL
        ORDER BY t.salience_boost DESC, t.near_duplicate_count DESC, t.doc_id, t.segment_id
        """,
        params=[limit],
    ).pl()


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "no data yet"
    if isinstance(value, int):
        return str(value)
    return f"{value:.1%}" if pct else f"{value:.3f}"


def _table(header: list[str], rows: list[list[str]], numeric: tuple[int, ...] = (),
           classes: dict[int, str] | None = None) -> str:
    """An HTML table of already-escaped cells; ``numeric`` columns never wrap and take only
    their width; ``classes`` give other columns a minimum width (``list``, ``prose``), so the
    browser's table layout cannot squeeze them to a few characters."""
    kinds = {i: "num" for i in numeric} | (classes or {})
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td class='{kinds[i]}'>{c}</td>" if i in kinds else f"<td>{c}</td>"
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """
body { font-family: sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
th { background: #f2f2f2; white-space: nowrap; }
img { display: block; margin: 0.6em 0; max-width: 100%; height: auto; }
td.num { white-space: nowrap; overflow-wrap: normal; text-align: right; width: 1%; }
td.id, td.list { overflow-wrap: anywhere; min-width: 8em; } td.list { min-width: 10em; }
td.prose { min-width: 12em; }
.warn { color: #a40000; } .muted { color: #666; }
"""


def render_html(
    con: duckdb.DuckDBPyConnection, analytics: AnalyticsConfig, *, title: str, limit: int = 10
) -> str:
    """The report page for the views of ``con``."""
    data = report_data(con, analytics)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>", "<h2>Metrics</h2>"]
    parts.append(_table(["metric", "value"], [
        [html.escape(name), _fmt(data.metrics[name], pct=name.startswith("dedup"))]
        for name in CORPUS_METRICS
    ], numeric=(1,)))
    parts.append("<h2>Warnings</h2>")
    if data.warnings:
        parts.append(_table(["metric", "value", "threshold", "documents", "note"], [
            [html.escape(w.metric), f"{w.value:.3f}", f"{w.threshold:g}",
             html.escape(", ".join(w.doc_ids[:20]) + (" …" if len(w.doc_ids) > 20 else "")),
             f"<span class='warn'>{html.escape(w.message)}</span>"]
            for w in data.warnings
        ], numeric=(1, 2), classes={3: "list", 4: "prose"}))
    else:
        parts.append("<p class='muted'>No warning: every metric is inside its threshold.</p>")
    parts.append("<h2>Dedup by doc_type</h2>")
    parts.append(_table(["doc_type", "documents", "segments", "dedup ratio"], [
        [html.escape(str(r["doc_type"])), str(r["documents"]), str(r["segments"]),
         f"{r['value']:.1%}"] for r in data.by_doc_type.iter_rows(named=True)
    ], numeric=(1, 2, 3)))
    for name, fig in figures(data).items():
        encoded = base64.b64encode(figure_png(fig)).decode("ascii")
        parts.append(f"<h2>{html.escape(name)}</h2>"
                     f"<img alt='{html.escape(name)}' src='data:image/png;base64,{encoded}'>")
    parts.append("<h2>Most boosted segments and their merged duplicates</h2>")
    top = top_boosted(con, limit)
    if top.height:
        rows = []
        for r in top.iter_rows(named=True):
            shown = r["duplicates"][:MAX_DUPLICATES_SHOWN]
            dups = ", ".join(
                f"{d['segment_id']} ({ACTION_LABELS.get(d['action'], d['action'])}"
                + (f", sim {d['similarity']:.3f}" if d["similarity"] is not None else "") + ")"
                for d in shown)
            if len(r["duplicates"]) > len(shown):
                dups += f" … and {len(r['duplicates']) - len(shown)} more"
            rows.append([html.escape(str(r["doc_id"])), html.escape(str(r["segment_id"])),
                         f"{r['salience_boost']:.3f}", str(r["near_duplicate_count"]),
                         str(r["exact_duplicate_count"]), html.escape(str(r["text"] or "")),
                         html.escape(dups)])
        parts.append(_table(["doc_id", "segment_id", "boost", "near", "exact", "text",
                             "merged duplicates"], rows, numeric=(2, 3, 4),
                            classes={0: "id", 1: "id", 5: "prose", 6: "list"}))
    else:
        parts.append("<p class='muted'>No segment was boosted.</p>")
    parts += _examples_section(con, limit)
    parts.append("</body></html>")
    return "\n".join(parts)


def _examples_section(con: duckdb.DuckDBPyConnection, limit: int) -> list[str]:
    """Merge and refusal examples with their texts: a decision is only as good as what it
    keeps, and counts do not show that."""
    parts = ["<h2>Merge examples</h2>"]
    merges = con.sql(f"SELECT * FROM merges LIMIT {int(limit)}").pl()
    if merges.height:
        header = ["doc_id", "type", "similarity", "merged segment", "kept representative"]
        parts.append(_table(header, [
            [html.escape(str(r["doc_id"])), html.escape(str(r["segment_type"] or "")),
             "" if r["similarity"] is None else f"{r['similarity']:.3f}",
             html.escape(str(r["segment_text"] or "")),
             html.escape(str(r["representative_text"] or ""))]
            for r in merges.iter_rows(named=True)], numeric=(2,)))
    else:
        parts.append("<p class='muted'>No near-duplicate merge.</p>")
    parts.append("<h2>Fact-guard refusals</h2>")
    refusals = con.sql(f"SELECT * FROM guard_refusals LIMIT {int(limit)}").pl()
    if refusals.height:
        parts.append(_table(["doc_id", "type", "reason", "kept apart", "from representative"], [
            [html.escape(str(r["doc_id"])), html.escape(str(r["segment_type"] or "")),
             html.escape(str(r["reason"] or "")), html.escape(str(r["segment_text"] or "")),
             html.escape(str(r["representative_text"] or ""))]
            for r in refusals.iter_rows(named=True)]))
    else:
        parts.append("<p class='muted'>The fact guard refused no merge.</p>")
    return parts


def write_report(store: str | Path | Store, out: str | Path, *, limit: int = 10) -> Path:
    """Write the HTML report of ``store`` to ``out``; returns the path."""
    opened = open_store(store)
    con = connect(opened)
    try:
        page = render_html(con, opened.config.analytics,
                           title=f"arrowdedup report: {opened.root.name} "
                                 f"(run {opened.manifest.get('run_id')})", limit=limit)
    finally:
        con.close()
    path = Path(out)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as err:
        raise StoreError(f"cannot write the report to {path}: {err.strerror}; "
                         "choose a writable --out path") from err
    return path


def benchmark_results(directory: str | Path) -> list[dict[str, Any]]:
    """The JSON benchmark results in ``directory`` (empty when absent), by file name."""
    folder = Path(directory)
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        out.append({"file": path.name, "data": data})
    return out


def benchmark_tables(directory: str | Path) -> list[tuple[str, pl.DataFrame]]:
    """Every table of the benchmark results in ``directory`` (the harness's
    ``{"tables": [{"title", "columns", "rows"}]}`` shape) as ``(title, frame)``; cells are
    shown as text so mixed columns stay readable."""
    out = []
    for result in benchmark_results(directory):
        data = result["data"]
        tables = data.get("tables", []) if isinstance(data, dict) else []
        name = data.get("name") or Path(result["file"]).stem
        for t in tables:
            if not isinstance(t, dict) or "columns" not in t or "rows" not in t:
                continue
            columns = [str(c) for c in t["columns"]]
            rows = [["" if v is None else str(v) for v in row] for row in t["rows"]]
            frame = pl.DataFrame(rows, schema=columns, orient="row") if rows else \
                pl.DataFrame(schema=dict.fromkeys(columns, pl.String))
            out.append((f"{name}: {t.get('title', '')}", frame))
    return out
