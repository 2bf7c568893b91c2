"""`arrowdedup search` and `arrowdedup context` (retrieval, SPEC §4)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..escape import escape
from .app import (
    ConfigOpt,
    EmbedderOpt,
    JsonOpt,
    app,
    clean_errors,
    console,
    id_width,
    lines_width,
    middle,
    note,
    plain,
    print_json,
    say,
    stdout_is_terminal,
    wrap_id,
)

if TYPE_CHECKING:
    from rich.table import Table

    from ..config import DedupConfig

ModeOpt = Annotated[str, typer.Option("--mode", "-m",
                                      help="hybrid (default), keyword or semantic.")]
WhereOpt = Annotated[str | None, typer.Option(
    "--where", "-w",
    help="DuckDB SQL predicate over the segment columns, applied before ranking, e.g. "
         "\"doc_id LIKE 'docs/v3.6/%'\" or \"language = 'de'\".")]
MinCosineOpt = Annotated[float | None, typer.Option(
    "--min-cosine",
    help="Drop results whose dense cosine to the query is below this (default: the config's "
         "Retrieval.MinDenseSimilarity, 0 = off).")]
# The context's forms say what they mean for expansions (pulled by place or key, not score).
ContextWhereOpt = Annotated[str | None, typer.Option(
    "--where", "-w",
    help="DuckDB SQL predicate over the segment columns; results and every expansion "
         "(neighbours, introduced code, linked segments) satisfy it, e.g. "
         "\"doc_id LIKE 'docs/v3.6/%'\".")]
ContextMinCosineOpt = Annotated[float | None, typer.Option(
    "--min-cosine",
    help="Drop retrieved results whose dense cosine to the query is below this; "
         "expansions are kept whatever their cosine (default: the config's "
         "Retrieval.MinDenseSimilarity, 0 = off).")]
# Characters of a result's text shown in the table (the whole text is in --json).
TEXT_CHARS = 320


def _config(path: Path | None) -> DedupConfig | None:
    from ..config import DedupConfig

    return DedupConfig.from_json(path) if path is not None else None


def search_payload(query: list[str], result: Any) -> dict[str, Any]:
    """The JSON object of `search --json` (the same keys as before, plus ``where``)."""
    return {"query": query, "mode": result.mode, "k": result.k, "where": result.where,
            "before": result.before, "after": result.after, "removed": result.removed,
            "timings": result.timings, "results": result.results.to_dicts()}


def results_table(title: str, results: Any, width: int) -> Table:
    """The results, readable at any width: every field kept, the text wrapped, ids wrapped at
    their separators (:func:`wrap_id`); ranks (dense/BM25/salience/freshness) and displaced
    ids under the id."""
    from rich.table import Table

    table = Table(title=title, show_lines=True, expand=False,
                  caption="score: normalised RRF (from ranks only); cosine: dense similarity "
                          "to the query; ranks: dense/BM25/salience/freshness")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("cosine", justify="right", no_wrap=True)
    ids = id_width(width, share=0.28, floor=16, cap=48)
    cells: list[str] = []
    texts: list[str] = []
    for r in results.iter_rows(named=True):
        ranks = "/".join(str(r[c]) if r[c] is not None else "-"
                         for c in ("rank_dense", "rank_bm25", "rank_salience", "rank_freshness"))
        sid, doc = str(r["segment_id"]), str(r["doc_id"])
        lines = [wrap_id(sid, ids)]
        if not sid.startswith(doc):
            lines.append(wrap_id(f"({doc})", ids))
        dups = len(r["displaced_ids"] or [])
        lines.append(middle(f"{ranks}" + (f" · {dups} dup{'s' if dups != 1 else ''}"
                                          if dups else ""), ids))
        cells.append("\n".join(lines))
        texts.append(" ".join(plain(r["text"]).split()))
    column = max([len("ranks d/b/s/f"), *(lines_width(c) for c in cells)])
    table.add_column("segment\nranks d/b/s/f", no_wrap=True, max_width=column,
                     min_width=column)
    table.add_column("text", ratio=1, min_width=16, overflow="fold")
    for r, cell, text in zip(results.iter_rows(named=True), cells, texts, strict=True):
        cosine = r.get("cosine")
        table.add_row(str(r["rank"]), f"{r['score']:.3f}",
                      "-" if cosine is None else f"{cosine:.3f}", cell,
                      text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1] + "…")
    return table


@app.command()
@clean_errors
def search(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    query: Annotated[list[str], typer.Argument(help="Query text; several are fused (RRF).")],
    k: Annotated[int, typer.Option("-k", "--k", help="Number of results.")] = 10,
    mode: ModeOpt = "hybrid",
    where: WhereOpt = None,
    min_cosine: MinCosineOpt = None,
    as_json: JsonOpt = False,
    embedder: EmbedderOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Hybrid search (dense + BM25 + salience + freshness, RRF) with cross-document dedup.

    score: the normalised RRF score in [0, 1] (ranks only: 1 = first on every signal);
    cosine: the dense cosine of the result to the query (how close it is).
    """
    from ..retrieval.search import search as run_search

    result = run_search(store, query[0] if len(query) == 1 else query, k=k, mode=mode,
                        config=_config(config), embedder=embedder,
                        where=where, min_cosine=min_cosine)
    if as_json:
        print_json(search_payload(query, result))
        note(result.summary())
        return
    title = f"{result.mode} search: {' | '.join(query)}"
    if result.where:
        title += f" (where {result.where})"
    console.print(results_table(escape(title), result.results, console.width))
    if result.results.height == 0:
        say("no result passed the relevance floor"
            + (" and the filter" if result.where else ""))
    note(result.summary())


@app.command()
@clean_errors
def context(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    query: Annotated[str, typer.Argument(help="Query text.")],
    k: Annotated[int, typer.Option("-k", "--k", help="Number of retrieved results.")] = 5,
    expand: Annotated[int, typer.Option(
        "--expand", help="Neighbours (same section) to add per result.")] = 0,
    expand_keys: Annotated[bool, typer.Option(
        "--expand-keys", help="Add segments of other documents that share a key with a "
                              "result (linked by `column: value`).")] = False,
    max_chars: Annotated[int | None, typer.Option(
        "--max-chars",
        help="Budget of the rendered context in characters: the best results are packed "
             "first, whole segments only (a token is ~4 characters).")] = None,
    mode: ModeOpt = "hybrid",
    where: ContextWhereOpt = None,
    min_cosine: ContextMinCosineOpt = None,
    as_json: JsonOpt = False,
    embedder: EmbedderOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Markdown context for an LLM prompt: results and their neighbours, grouped by document,
    each block with its source; code stays fenced, and the code a result introduces ("run
    the following command:") is always added after it."""
    from ..retrieval.context import build_context

    ctx = build_context(store, query, k=k, expand=expand, mode=mode,
                        config=_config(config), embedder=embedder,
                        expand_keys=expand_keys, where=where, min_cosine=min_cosine,
                        max_chars=max_chars)
    markdown = ctx.markdown()
    if as_json:
        print_json({"query": ctx.query, "markdown": markdown, "chars": len(markdown),
                    "tokens_estimate": ctx.tokens_estimate(), "left_out": ctx.left_out,
                    "dropped_duplicates": ctx.dropped,
                    "segments": ctx.segments.to_dicts()})
    else:
        # Documents' words never drive the terminal: on one, control characters are shown as
        # escapes; piped, the Markdown loses them (newlines and tabs, its layout, stay).
        typer.echo(escape(markdown, keep_layout=True, remove=not stdout_is_terminal()),
                   color=False)
    note(ctx.search.summary())
    note(f"context: {ctx.segments.height} segments, {len(markdown):,} characters "
         f"(~{ctx.tokens_estimate():,} tokens)"
         + (f"; {ctx.left_out} left out by --max-chars" if ctx.left_out else ""))
