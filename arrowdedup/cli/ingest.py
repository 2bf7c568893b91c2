"""`arrowdedup ingest`: segments tables (or documents) to a store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..store.layout import DEFAULT_BUCKETS, KEEP_VERSIONS, MANIFEST
from .app import (
    ConfigOpt,
    EmbedderOpt,
    JsonOpt,
    QuietOpt,
    app,
    clean_errors,
    console,
    documents_table,
    load_config,
    note,
    print_json,
    say,
)
from .extract_limits import (
    DEFAULT_CELLS,
    DEFAULT_COLUMNS,
    DEFAULT_MEMORY_MB,
    DEFAULT_TEXT_MB,
    DEFAULT_TIMEOUT,
    FollowOpt,
    MaxCellsOpt,
    MaxColumnsOpt,
    MaxTextOpt,
    MemoryOpt,
    TimeoutOpt,
    extract_limits,
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
        int | None, typer.Option(help="Kernel threads per bucket (default: all cores; 1: one "
                                    "thread, one bucket at a time).")
    ] = None,
    buckets: Annotated[int, typer.Option(help="Hash buckets of doc_id in the store.")] = \
        DEFAULT_BUCKETS,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
    embedder: EmbedderOpt = None,
    root: Annotated[Path | None, typer.Option(
        help="Documents only: doc_id = path relative to this folder (default: each folder "
             "given).")] = None,
    language_from_path: Annotated[str | None, typer.Option(
        help="Documents only: language from the path, e.g. 'content/{lang}/**'.")] = None,
    doc_version_from_path: Annotated[str | None, typer.Option(
        help="Documents only: doc_version from the path, e.g. 'docs/v{version}/**'; search "
             "prefers the newest version of a page.")] = None,
    key_columns: Annotated[str | None, typer.Option(
        help="Documents only: table key columns, comma-separated (a,b); default: "
             "detected.")] = None,
    detect_keys: Annotated[bool, typer.Option(
        help="Documents only: detect key columns when --key-columns is not given.")] = True,
    skip_bad_files: Annotated[bool, typer.Option(
        "--skip-bad-files",
        help="Documents only: skip unreadable files (listed on stderr and in the manifest).")
    ] = False,
    mode: Annotated[str | None, typer.Option(
        help="Dedup mode: 'exact' or 'lsh' (groups of Ingestion.LshMinSegments or more; "
             "default: the config's Ingestion.Mode).")] = None,
    engine: Annotated[str, typer.Option(
        help="'local' (threads) or 'ray' (one Ray task per bucket; needs "
             "pip install 'arrowdedup[ray]').")] = "local",
    ray_address: Annotated[str | None, typer.Option(
        help="With --engine ray: address of an existing Ray cluster (e.g. 'auto' or "
             "'ray://head:10001'); default: start a local one.")] = None,
    fact_guard: Annotated[str | None, typer.Option(
        help="'on' or 'off': merge only segments whose facts the representative covers "
             "(default: the config's Ingestion.FactGuard, on).")] = None,
    update: Annotated[bool, typer.Option(
        "--update", help="Bring INPUT into the existing store: changed documents replace "
                         "theirs (by doc_id), unchanged ones are not touched, the rest "
                         "stay; written as one delta version.")] = False,
    delete_missing: Annotated[bool, typer.Option(
        "--delete-missing", help="With --update: also remove the store's documents that "
                                 "INPUT does not hold (the store mirrors INPUT).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="With --update: list the documents that would be added, changed "
                          "and removed, and write nothing.")] = False,
    allow_moved_sources: Annotated[bool, typer.Option(
        "--allow-moved-sources",
        help="With --update: let a document come from another file than the one the store "
             "recorded for it (a moved checkout, or another folder on purpose).")] = False,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Replace a store built from other inputs with this one (the old "
                          "versions are kept, see `arrowdedup versions`).")] = False,
    keep_versions: Annotated[int, typer.Option(
        help="Versions kept after this run (older ones are pruned).")] = KEEP_VERSIONS,
    max_cells: MaxCellsOpt = DEFAULT_CELLS,
    max_columns: MaxColumnsOpt = DEFAULT_COLUMNS,
    max_text_mb: MaxTextOpt = DEFAULT_TEXT_MB,
    extract_timeout: TimeoutOpt = DEFAULT_TIMEOUT,
    extract_memory_mb: MemoryOpt = DEFAULT_MEMORY_MB,
    follow_external_symlinks: FollowOpt = False,
) -> None:
    """Deduplicate segments inside each document and write a store atomically."""
    from ..extract.options import ExtractOptions
    from ..pipeline.options import RunOptions
    from ..pipeline.run import ingest_to_store

    limits = extract_limits(max_cells, max_columns, max_text_mb, extract_timeout,
                            extract_memory_mb)

    cfg = load_config(config)
    if mode is not None:
        cfg = _with_mode(cfg, mode)
    if fact_guard is not None:
        cfg = with_fact_guard(cfg, fact_guard)
    from ..pipeline.inputs import is_documents_input

    quiet_run = quiet or as_json
    keys = [k.strip() for k in key_columns.split(",") if k.strip()] if key_columns else None
    extract_options = ExtractOptions(
        language_from_path=language_from_path, key_columns=keys, detect_keys=detect_keys,
        doc_version_from_path=doc_version_from_path, skip_bad_files=skip_bad_files, root=root,
        limits=limits, follow_external_symlinks=follow_external_symlinks)
    if not any(is_documents_input(p) for p in inputs):
        for flag, value in (("--root", root), ("--doc-version-from-path", doc_version_from_path),
                            ("--language-from-path", language_from_path)):
            if value is not None:
                from ..errors import InputError

                raise InputError(f"{flag} applies to documents, and these inputs are segments "
                                 "tables; drop it, or add the column to the table")
    if update:
        from .store_life import run_update

        if replace:
            from ..errors import InputError

            raise InputError("--update and --replace exclude each other: --update keeps the "
                             "store's other documents, --replace rebuilds it; pick one")
        run_update(inputs, out, cfg if config is not None or mode is not None
                   or fact_guard is not None else None, delete_missing=delete_missing,
                   dry_run=dry_run, embedder=embedder, extract=extract_options,
                   run=RunOptions(threads=threads, keep_versions=keep_versions),
                   allow_moved_sources=allow_moved_sources, quiet=quiet, as_json=as_json)
        return
    for flag, given in (("--delete-missing", delete_missing), ("--dry-run", dry_run),
                        ("--allow-moved-sources", allow_moved_sources)):
        if given:
            from ..errors import InputError

            raise InputError(f"{flag} applies to an update; add --update")
    result = ingest_to_store(
        inputs, out, config=cfg, embedder=embedder, extract=extract_options, replace=replace,
        run=RunOptions(threads=threads, buckets=buckets, engine=engine.lower(),
                       ray_address=ray_address, quiet=quiet_run, keep_versions=keep_versions),
    )
    version = result.path
    manifest = _manifest(version)
    for line in _left_out_lines(manifest):
        note(line)
    documents = result.documents.collect()
    if as_json:
        note(result.summary())
        print_json(ingest_payload(result, out, version, manifest, documents))
        return
    if not quiet:
        console.print(documents_table(documents))
        for line in _key_column_lines(manifest):
            note(line)
    say(result.summary())
    if not quiet:
        from ..timings import line as stages_line

        say(stages_line(result.timings))
    say(f"store: {out} (version {result.version_id})")


def _manifest(version: Path) -> dict[str, Any]:
    try:
        data = json.loads((version / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _left_out_lines(manifest: dict[str, Any]) -> list[str]:
    """What the extraction left out, as `extract` prints it."""
    from ..extract.core import left_out_lines

    extract = manifest.get("extract") or {}
    return left_out_lines(
        [(str(s.get("path")), str(s.get("reason"))) for s in manifest.get("skipped_files") or []],
        [str(u) for u in extract.get("unsupported_files") or []],
        [str(link) for link in extract.get("external_links") or []],
    )


def _key_column_lines(manifest: dict[str, Any]) -> list[str]:
    """The key columns the extraction used per table (given or detected), from the manifest."""
    return [f"keys of {k['doc_id']}: {', '.join(k['columns'])} ({k['source']})"
            for k in (manifest.get("extract") or {}).get("key_columns") or []]


def ingest_payload(result: Any, out: Path, version: Path, manifest: dict[str, Any],
                   documents: Any = None) -> dict[str, Any]:
    """The one JSON object `ingest --json` prints: counts, the store version, timings."""
    docs = result.documents if documents is None else documents
    if hasattr(docs, "collect"):
        docs = docs.collect()
    counts = {
        "documents": int(docs.height),
        "segments_in": int(docs.get_column("original_count").sum()) if docs.height else 0,
        "segments_kept": int(docs.get_column("final_count").sum()) if docs.height else 0,
        "exact": int(docs.get_column("exact_count").sum()) if docs.height else 0,
        "near": int(docs.get_column("near_count").sum()) if docs.height else 0,
        "filtered": int(docs.get_column("filtered_count").sum()) if docs.height else 0,
    }
    removed = counts["segments_in"] - counts["segments_kept"]
    return {
        "store": str(out), "version": version.name, "run_id": manifest.get("run_id"),
        "counts": counts,
        "dedup_ratio": removed / counts["segments_in"] if counts["segments_in"] else 0.0,
        "embedding": manifest.get("embedding"),
        "skipped_files": manifest.get("skipped_files") or [],
        "unsupported_files": (manifest.get("extract") or {}).get("unsupported_files") or [],
        "key_columns": (manifest.get("extract") or {}).get("key_columns") or [],
        "timings": {k: float(v) for k, v in result.timings.items()},
    }


def _with_mode(cfg: Any, mode: str) -> Any:
    import dataclasses

    from ..config import Mode, enum_member
    from ..errors import ConfigError

    member = enum_member(Mode, mode)
    if member is None:
        raise ConfigError(f"--mode must be 'exact' or 'lsh', got {mode!r}")
    return dataclasses.replace(cfg, ingestion=dataclasses.replace(cfg.ingestion, mode=member))


def with_fact_guard(cfg: Any, value: str) -> Any:
    """``cfg`` with ``Ingestion.FactGuard`` set from 'on' / 'off'."""
    import dataclasses

    from ..errors import ConfigError

    choices = {"on": True, "off": False}
    if value.lower() not in choices:
        raise ConfigError(f"--fact-guard must be 'on' or 'off', got {value!r}")
    return dataclasses.replace(cfg, ingestion=dataclasses.replace(
        cfg.ingestion, fact_guard=choices[value.lower()]))
