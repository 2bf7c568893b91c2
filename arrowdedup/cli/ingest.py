"""`arrowdedup ingest`: segments tables (or documents) to a store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .app import ConfigOpt, QuietOpt, app, clean_errors, console, documents_table, load_config


@app.command()
@clean_errors
def ingest(
    inputs: Annotated[list[Path], typer.Argument(
        help="Segments tables (Parquet / Arrow IPC), or document folders / files (Markdown, "
             "text, HTML, CSV/TSV, JSONL), which are extracted and embedded first.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Store directory to write.")],
    config: ConfigOpt = None,
    threads: Annotated[
        int | None, typer.Option(help="Kernel threads (default: all cores).")
    ] = None,
    buckets: Annotated[int, typer.Option(help="Hash buckets of doc_id in the store.")] = 16,
    quiet: QuietOpt = False,
    embedder: Annotated[str, typer.Option(
        help="Documents only: 'minilm' or 'model2vec:PATH'.")] = "minilm",
    language_from_path: Annotated[str | None, typer.Option(
        help="Documents only: language from the path, e.g. '{lang}/**'.")] = None,
    key_columns: Annotated[str | None, typer.Option(
        help="Documents only: CSV/TSV key columns, comma-separated (a,b).")] = None,
    skip_bad_files: Annotated[bool, typer.Option(
        help="Documents only: skip unreadable files (listed in the manifest).")] = False,
    mode: Annotated[str | None, typer.Option(
        help="Dedup mode: 'exact' or 'lsh' (groups of Ingestion.LshMinSegments or more; "
             "default: the config's Ingestion.Mode).")] = None,
    engine: Annotated[str, typer.Option(
        help="'local' (threads) or 'ray' (one Ray task per bucket; extra [ray]).")] = "local",
    ray_address: Annotated[str | None, typer.Option(
        help="With --engine ray: address of an existing Ray cluster (e.g. 'auto' or "
             "'ray://head:10001'); default: start a local one.")] = None,
) -> None:
    """Deduplicate segments inside each document and write a store atomically."""
    from ..job import ingest_to_store

    cfg = load_config(config)
    if mode is not None:
        cfg = _with_mode(cfg, mode)
    keys = [k.strip() for k in key_columns.split(",") if k.strip()] if key_columns else None
    result = ingest_to_store(
        inputs, out, cfg, threads=threads, buckets=buckets, engine=engine,
        ray_address=ray_address, embedder=embedder, language_from_path=language_from_path,
        key_columns=keys, skip_bad_files=skip_bad_files, quiet=quiet,
    )
    if not quiet:
        console.print(documents_table(result.documents.collect()))
    console.print(result.summary(), markup=False)
    if not quiet:
        shown = {k: v for k, v in result.timings.items() if v >= 0.005 and k != "total"}
        console.print("stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in shown.items())
                      + f"; total {result.timings['total']:.2f} s", markup=False)
    console.print(f"store: {out} (version {result.version_id})", markup=False)


def _with_mode(cfg: Any, mode: str) -> Any:
    import dataclasses

    from ..config import Mode
    from ..errors import ConfigError

    modes = {"exact": Mode.EXACT, "lsh": Mode.LSH}
    if mode.lower() not in modes:
        raise ConfigError(f"--mode must be 'exact' or 'lsh', got {mode!r}")
    return dataclasses.replace(cfg, ingestion=dataclasses.replace(
        cfg.ingestion, mode=modes[mode.lower()]))
