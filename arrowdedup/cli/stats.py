"""`arrowdedup stats` and `arrowdedup report` (analytics, SPEC §8)."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InputError
from ..escape import escape
from .app import (
    JsonOpt,
    app,
    clean_errors,
    console,
    plain,
    print_json,
    say,
    stdout_is_terminal,
)

if TYPE_CHECKING:
    from rich.table import Table


class StatsFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    PROMETHEUS = "prometheus"


def _number(value: Any, pct: bool = False) -> str:
    if value is None:
        return "no data yet"
    if isinstance(value, float):
        if pct:
            return f"{value:.1%}"
        # A whole number is printed whole (a count summed as a double reads 638, not 638.0
        # nor 6.38e+02).
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else f"{value:.4g}"
    return plain(value)


def run_sql(con: Any, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run ``query`` on the views; a DuckDB error becomes one clean :class:`InputError`."""
    import duckdb

    from ..metrics import metric_views

    try:
        rel = con.sql(query)
        if rel is None:  # a statement without a result (e.g. CREATE VIEW)
            return [], []
        return list(rel.columns), rel.fetchall()
    except duckdb.Error as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        views = ", ".join(["segments", "decisions", "documents", "retrieval_log",
                           *metric_views(con)])
        raise InputError(
            f"--sql query failed: {first} (views you can query: {views}); fix the query"
        ) from err


def _rows_table(title: str, columns: list[str], rows: list[tuple[Any, ...]]) -> Table:
    from rich.table import Table

    table = Table(title=title)
    for col in columns:
        table.add_column(escape(col))
    for row in rows:
        # A null in a row is a missing key (a document without language, say), not a metric
        # that lacks data.
        table.add_row(*("(none)" if v is None else _number(v) if isinstance(v, float)
                        else plain(v) for v in row))
    return table


def _group_rows(con: Any, view: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    rel = con.sql(f"SELECT * FROM {view}")
    return list(rel.columns), rel.fetchall()


@app.command()
@clean_errors
def stats(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    fmt: Annotated[StatsFormat, typer.Option("--format", "-f", help="Output format.",
                                             case_sensitive=False)] =
    StatsFormat.TABLE,
    sql: Annotated[str | None, typer.Option("--sql", help="A SQL query against the views.")] =
    None,
    as_json: Annotated[bool, typer.Option("--json", help="The same as --format json.")] =
    False,
) -> None:
    """Dedup metrics and warnings of a store (thresholds from the store's config).

    Warnings: a document's dedup ratio > HighIngestionDedupThreshold;

    the corpus dedup ratio < LowIngestionDedupThreshold while the embeddings see fewer
    near pairs than the corpus has verbatim copies (at least 10);

    the retrieval dedup ratio > HighRetrievalDedupThreshold;

    a document's largest salience boost >= HighSalienceBoostThreshold.

    --sql queries the views: segments, decisions, documents, retrieval_log and the metrics.
    It has full DuckDB access (files, extensions, several statements, no time limit): never
    pass it untrusted text (search's --where is the sandboxed filter).
    """
    from ..metrics import compute_warnings, connect, corpus_metrics, metric_views, prometheus_text
    from ..store import open_store

    if as_json:
        if fmt is StatsFormat.PROMETHEUS:
            raise InputError("--json and --format prometheus exclude each other; pick one")
        fmt = StatsFormat.JSON
    opened = open_store(store)
    con = connect(opened)
    try:
        if sql is not None:
            if fmt is StatsFormat.PROMETHEUS:
                raise InputError("--sql prints query rows; use --format table or json with it")
            columns, rows = run_sql(con, sql)
            if fmt is StatsFormat.JSON:
                typer.echo(json.dumps([dict(zip(columns, r, strict=True)) for r in rows],
                                      indent=2, default=str))
            else:
                console.print(_rows_table("query", columns, rows))
            return
        metrics = corpus_metrics(con)
        warnings = compute_warnings(con, opened.config.analytics, metrics)
        if fmt is StatsFormat.PROMETHEUS:
            text = prometheus_text(con, metrics, warnings)
            # A label value (a doc_type) is the data's own text: exact for a scraper, shown
            # with its control characters escaped on a terminal.
            sys.stdout.write(escape(text, keep_layout=True) if stdout_is_terminal() else text)
            sys.stdout.flush()
            return
        by_type_cols, by_type = _group_rows(con, "dedup_by_doc_type")
        if fmt is StatsFormat.JSON:
            out: dict[str, Any] = dict(metrics)
            out["dedup_by_doc_type"] = [dict(zip(by_type_cols, r, strict=True)) for r in by_type]
            out["warnings"] = [w.to_dict() for w in warnings]
            typer.echo(json.dumps(out, indent=2))
            return
        from rich.table import Table

        table = Table(title=escape(f"Metrics of {opened.root} "
                                   f"(run {opened.manifest.get('run_id')})"))
        table.add_column("metric")
        table.add_column("value", justify="right")
        for name, value in metrics.items():
            table.add_row(name, _number(value, pct=name.startswith("dedup")))
        console.print(table)
        console.print(_rows_table("dedup_by_doc_type", by_type_cols, by_type))
        if "dedup_by_language" in metric_views(con):
            console.print(_rows_table("dedup_by_language", *_group_rows(con, "dedup_by_language")))
        if not warnings:
            say("no warnings")
        for w in warnings:
            docs = ""
            if w.doc_ids:
                shown = ", ".join(w.doc_ids[:10])
                more = f" and {len(w.doc_ids) - 10} more" if len(w.doc_ids) > 10 else ""
                docs = f" [documents: {shown}{more}]"
            say(f"warning: {w.metric} = {w.value:.3f} (threshold {w.threshold:g}): "
                f"{w.message}{docs}")
    finally:
        con.close()


@app.command()
@clean_errors
def report(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write.")] =
    Path("report.html"),
    top: Annotated[int, typer.Option(help="How many of the most boosted segments to list.")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Write a self-contained HTML report (plots inlined) of a store."""
    from ..metrics import write_report

    if top < 1:
        raise InputError(f"--top must be at least 1, got {top}")
    path = write_report(store, out, limit=top)
    if as_json:
        print_json({"store": str(store), "report": str(path), "bytes": path.stat().st_size})
        return
    say(f"report: {path}")
