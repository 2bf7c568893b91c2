"""`arrowdedup search` and `arrowdedup context` (retrieval, SPEC §4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from .app import ConfigOpt, app, clean_errors, console, err_console

ModeOpt = Annotated[str, typer.Option("--mode", "-m",
                                      help="hybrid (default), keyword or semantic.")]
EmbedderOpt = Annotated[str | None, typer.Option(
    "--embedder", "-e",
    help="Embedder for the query when the store's model cannot be loaded from its manifest: "
         "'minilm' or 'model2vec:PATH'.")]


def _config(path: Path | None) -> object | None:
    from ..config import DedupConfig

    return DedupConfig.from_json(path) if path is not None else None


@app.command()
@clean_errors
def search(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    query: Annotated[list[str], typer.Argument(help="Query text; several are fused (RRF).")],
    k: Annotated[int, typer.Option("-k", help="Number of results.")] = 10,
    mode: ModeOpt = "hybrid",
    as_json: Annotated[bool, typer.Option("--json", help="JSON for scripts.")] = False,
    embedder: EmbedderOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Hybrid search (dense + BM25 + salience + freshness, RRF) with cross-document dedup."""
    from ..retrieval.search import search as run_search

    result = run_search(store, query[0] if len(query) == 1 else query, k=k, mode=mode,
                        config=_config(config), embedder=embedder)  # type: ignore[arg-type]
    if as_json:
        payload = {"query": query, "mode": result.mode, "k": result.k,
                   "before": result.before, "after": result.after, "removed": result.removed,
                   "timings": result.timings, "results": result.results.to_dicts()}
        console.print(json.dumps(payload, ensure_ascii=False, indent=2), markup=False,
                      soft_wrap=True, highlight=False)
        return
    table = Table(title=f"{result.mode} search: {' | '.join(query)}")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("segment (doc)", no_wrap=True)
    table.add_column("ranks d/b/s/f", no_wrap=True)
    table.add_column("dups", justify="right", no_wrap=True)
    table.add_column("text", ratio=1, min_width=20)
    for r in result.results.iter_rows(named=True):
        ranks = "/".join(str(r[c]) if r[c] is not None else "-"
                         for c in ("rank_dense", "rank_bm25", "rank_salience", "rank_freshness"))
        text = str(r["text"]).replace("\n", " ")
        table.add_row(str(r["rank"]), f"{r['score']:.3f}", f"{r['segment_id']} ({r['doc_id']})",
                      ranks, str(len(r["displaced_ids"])),
                      text if len(text) <= 200 else text[:199] + "…")
    console.print(table)
    err_console.print(result.summary(), markup=False)


@app.command()
@clean_errors
def context(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    query: Annotated[str, typer.Argument(help="Query text.")],
    k: Annotated[int, typer.Option("-k", help="Number of retrieved results.")] = 5,
    expand: Annotated[int, typer.Option(
        "--expand", help="Neighbours (same section) to add per result.")] = 0,
    expand_keys: Annotated[bool, typer.Option(
        "--expand-keys", help="Add segments of other documents that share a key with a "
                              "result (linked by `column: value`).")] = False,
    mode: ModeOpt = "hybrid",
    embedder: EmbedderOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Markdown context for an LLM prompt: results and their neighbours, grouped by document."""
    from ..retrieval.context import build_context

    ctx = build_context(store, query, k=k, expand=expand, mode=mode,
                        config=_config(config), embedder=embedder,  # type: ignore[arg-type]
                        expand_keys=expand_keys)
    typer.echo(ctx.markdown())
    err_console.print(ctx.search.summary(), markup=False)
