"""`arrowdedup merges STORE`: read what was merged (or kept apart by the fact guard) beside
what stands for it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import (
    app,
    clean_errors,
    console,
    id_width,
    lines_width,
    plain,
    print_json,
    say,
    wrap_id,
)

# Rows of the table when -n is not given (--json then prints every row).
TABLE_ROWS = 20


@app.command()
@clean_errors
def merges(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    doc: Annotated[str | None, typer.Option("--doc", help="Only this doc_id.")] = None,
    refused: Annotated[bool, typer.Option(
        "--refused", help="Show the fact guard's refusals (with the reason) instead.")] = False,
    limit: Annotated[int | None, typer.Option(
        "--limit", "-n", min=1,
        help=f"At most N rows (default: {TABLE_ROWS} in the table, all with --json).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array on stdout.")] = False,
) -> None:
    """Near-duplicate merges with both texts side by side, or with --refused the merges the
    fact guard refused and why (number, identifier, negation, …)."""
    from ..metrics.views import merge_examples

    if limit is None and not as_json:
        limit = TABLE_ROWS
    rows = merge_examples(store, doc_id=doc, refused=refused, limit=limit)
    if as_json:
        print_json(rows.to_dicts())
        return
    if rows.height == 0:
        say("no guard refusals" if refused else "no near-duplicate merges")
        return
    label = "reason" if refused else "similarity"
    from rich.table import Table

    table = Table(title="Fact-guard refusals" if refused else "Near-duplicate merges",
                  show_lines=True, expand=True)
    # doc_id wrapped at its separators (a folded id reads as "docs/au thentic ation" at 80
    # columns), never narrower than its header; the two texts share what is left.
    room = id_width(console.width, 0.28, 12, 40)
    ids = [wrap_id(r["doc_id"], room) for r in rows.iter_rows(named=True)]
    width = max([len("doc_id"), *(lines_width(i) for i in ids)])
    table.add_column("doc_id", no_wrap=True, min_width=width, max_width=width)
    table.add_column(label, justify="right", no_wrap=True)
    table.add_column("kept apart" if refused else "merged segment", overflow="fold", ratio=3)
    table.add_column("representative", overflow="fold", ratio=3)
    for r, doc_id in zip(rows.iter_rows(named=True), ids, strict=True):
        value = r["reason"] if refused else (
            "" if r["similarity"] is None else f"{r['similarity']:.3f}")
        table.add_row(doc_id, plain(value or ""),
                      plain(r["segment_text"] or ""), plain(r["representative_text"] or ""))
    console.print(table)
