"""`arrowdedup merges STORE`: read what was merged (or kept apart by the fact guard) beside
what stands for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .app import app, clean_errors, console, id_width, middle, plain


@app.command()
@clean_errors
def merges(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    doc: Annotated[str | None, typer.Option("--doc", help="Only this doc_id.")] = None,
    refused: Annotated[bool, typer.Option(
        "--refused", help="Show the fact guard's refusals (with the reason) instead.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most N rows.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array on stdout.")] = False,
) -> None:
    """Near-duplicate merges with both texts side by side, or with --refused the merges the
    fact guard refused and why (number, identifier, negation, …)."""
    from ..metrics.views import merge_examples

    rows = merge_examples(store, doc_id=doc, refused=refused, limit=limit)
    if as_json:
        typer.echo(json.dumps(rows.to_dicts(), ensure_ascii=False, default=str))
        return
    if rows.height == 0:
        console.print("no guard refusals" if refused else "no near-duplicate merges",
                      markup=False)
        return
    label = "reason" if refused else "similarity"
    from rich.table import Table

    table = Table(title="Fact-guard refusals" if refused else "Near-duplicate merges",
                  show_lines=True, expand=True)
    # doc_id on one line, shortened from the middle when it must be (a folded id reads as
    # "docs/au thentic ation" at 80 columns); the two texts share what is left.
    ids = [str(r["doc_id"]) for r in rows.iter_rows(named=True)]
    width = min(max(len(i) for i in ids), id_width(console.width, 0.28, 12, 40))
    table.add_column("doc_id", no_wrap=True, min_width=width, max_width=width)
    table.add_column(label, justify="right", no_wrap=True)
    table.add_column("kept apart" if refused else "merged segment", overflow="fold", ratio=3)
    table.add_column("representative", overflow="fold", ratio=3)
    for r in rows.iter_rows(named=True):
        value = r["reason"] if refused else (
            "" if r["similarity"] is None else f"{r['similarity']:.3f}")
        table.add_row(middle(str(r["doc_id"]), width), plain(value or ""),
                      plain(r["segment_text"] or ""), plain(r["representative_text"] or ""))
    console.print(table)
