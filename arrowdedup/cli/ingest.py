"""`arrowdedup ingest`: segments tables (or documents) to a store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import ConfigOpt, QuietOpt, app, clean_errors, console, documents_table, load_config


@app.command()
@clean_errors
def ingest(
    inputs: Annotated[list[Path], typer.Argument(help="Segments tables (Parquet / Arrow IPC).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Store directory to write.")],
    config: ConfigOpt = None,
    threads: Annotated[int | None, typer.Option(help="Kernel threads (default: all cores).")] = None,
    buckets: Annotated[int, typer.Option(help="Hash buckets of doc_id in the store.")] = 16,
    quiet: QuietOpt = False,
) -> None:
    """Deduplicate segments inside each document and write a store atomically."""
    from ..pipeline import ingest_tables_to_store

    cfg = load_config(config)
    result, version = ingest_tables_to_store(inputs, out, cfg, threads=threads, buckets=buckets)
    if not quiet:
        console.print(documents_table(result.documents))
    console.print(result.summary(), markup=False)
    console.print(f"store: {out} (version {version.name})", markup=False)
