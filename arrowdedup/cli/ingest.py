"""`arrowdedup ingest`: segments tables (or documents) to a store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .app import (
    ConfigOpt,
    QuietOpt,
    app,
    clean_errors,
    console,
    documents_table,
    err_console,
    load_config,
)


@app.command()
@clean_errors
def ingest(
    inputs: Annotated[list[Path], typer.Argument(
        help="Segments tables (Parquet / Arrow IPC), or document folders / files (Markdown, "
             "text, HTML, CSV/TSV, JSONL, PDF, xlsx/xlsm/xls/ods), which are extracted and "
             "embedded first.")],
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
        help="Documents only: table key columns, comma-separated (a,b); default: "
             "detected.")] = None,
    detect_keys: Annotated[bool, typer.Option(
        help="Documents only: detect key columns when --key-columns is not given.")] = True,
    skip_bad_files: Annotated[bool, typer.Option(
        help="Documents only: skip unreadable files (listed in the manifest).")] = False,
    mode: Annotated[str | None, typer.Option(
        help="Dedup mode: 'exact' or 'lsh' (groups of Ingestion.LshMinSegments or more; "
             "default: the config's Ingestion.Mode).")] = None,
    engine: Annotated[str, typer.Option(
        help="Tables only: 'local' (threads) or 'ray' (one Ray task per bucket; extra "
             "[ray]).")] = "local",
    ray_address: Annotated[str | None, typer.Option(
        help="With --engine ray: address of an existing Ray cluster (e.g. 'auto' or "
             "'ray://head:10001'); default: start a local one.")] = None,
    fact_guard: Annotated[str | None, typer.Option(
        help="'on' or 'off': merge only segments whose facts the representative covers "
             "(default: the config's Ingestion.FactGuard, on).")] = None,
) -> None:
    """Deduplicate segments inside each document and write a store atomically."""
    from ..pipeline import ingest_tables_to_store

    cfg = load_config(config)
    if mode is not None:
        cfg = _with_mode(cfg, mode)
    if fact_guard is not None:
        cfg = with_fact_guard(cfg, fact_guard)
    from ..documents import ingest_documents, is_documents_input

    if any(is_documents_input(p) for p in inputs):
        keys = [k.strip() for k in key_columns.split(",") if k.strip()] if key_columns else None
        result, version = ingest_documents(
            inputs, out, cfg, embedder=embedder, language_from_path=language_from_path,
            key_columns=keys, skip_bad_files=skip_bad_files, threads=threads, buckets=buckets,
            quiet=quiet, detect_keys=detect_keys,
        )
    else:
        result, version = ingest_tables_to_store(inputs, out, cfg, threads=threads,
                                                 buckets=buckets, engine=engine,
                                                 ray_address=ray_address)
    if not quiet:
        console.print(documents_table(result.documents))
        _print_key_columns(version)
    console.print(result.summary(), markup=False)
    stages = {k[len("stage_"):]: v for k, v in result.timings.items() if k.startswith("stage_")}
    if stages and not quiet:
        console.print("stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in stages.items()),
                      markup=False)
    console.print(f"store: {out} (version {version.name})", markup=False)


def _print_key_columns(version: Path) -> None:
    """The key columns the extraction used per table (given or detected), from the manifest."""
    import json

    try:
        manifest = json.loads((version / "manifest.json").read_text())
    except (OSError, ValueError):
        return
    for k in (manifest.get("extract") or {}).get("key_columns", []):
        err_console.print(f"keys of {k['doc_id']}: {', '.join(k['columns'])} ({k['source']})",
                          markup=False, soft_wrap=True)


def _with_mode(cfg: Any, mode: str) -> Any:
    import dataclasses

    from ..config import Mode
    from ..errors import ConfigError

    modes = {"exact": Mode.EXACT, "lsh": Mode.LSH}
    if mode.lower() not in modes:
        raise ConfigError(f"--mode must be 'exact' or 'lsh', got {mode!r}")
    return dataclasses.replace(cfg, ingestion=dataclasses.replace(
        cfg.ingestion, mode=modes[mode.lower()]))


def with_fact_guard(cfg: Any, value: str) -> Any:
    """``cfg`` with ``Ingestion.FactGuard`` set from 'on' / 'off'."""
    import dataclasses

    from ..errors import ConfigError

    choices = {"on": True, "off": False}
    if value.lower() not in choices:
        raise ConfigError(f"--fact-guard must be 'on' or 'off', got {value!r}")
    return dataclasses.replace(cfg, ingestion=dataclasses.replace(
        cfg.ingestion, fact_guard=choices[value.lower()]))
