"""`arrowdedup extract`: documents to a segments table (documents-to-store issue)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import JsonOpt, QuietOpt, app, clean_errors, note, print_json, say
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
def extract(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Document files or folders (.md .markdown .txt .html .htm .csv .tsv "
                            ".jsonl .parquet .pdf .xlsx .xlsm .xls .ods); folders are walked "
                            "recursively."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Parquet file to write.")],
    root: Annotated[
        Path | None,
        typer.Option(help="doc_id = path relative to this folder (default: each folder given)."),
    ] = None,
    key_columns: Annotated[
        str | None, typer.Option(help="Table key columns (CSV/TSV, spreadsheets), comma "
                                      "separated (fill `keys`); default: detected.")
    ] = None,
    detect_keys: Annotated[
        bool, typer.Option(help="Detect key columns (id-like names or values) when "
                                "--key-columns is not given.")
    ] = True,
    language_from_path: Annotated[
        str | None,
        typer.Option(help="Language from the path, e.g. 'content/{lang}/**' (front matter wins)."),
    ] = None,
    doc_version_from_path: Annotated[
        str | None,
        typer.Option(help="doc_version from the path, e.g. 'docs/v{version}/**'."),
    ] = None,
    skip_bad_files: Annotated[
        bool, typer.Option("--skip-bad-files",
                           help="Skip unreadable or undecodable files instead of stopping.")
    ] = False,
    workers: Annotated[
        int | None, typer.Option(help="Parsing processes (default: all cores for large inputs).")
    ] = None,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
    max_cells: MaxCellsOpt = DEFAULT_CELLS,
    max_columns: MaxColumnsOpt = DEFAULT_COLUMNS,
    max_text_mb: MaxTextOpt = DEFAULT_TEXT_MB,
    extract_timeout: TimeoutOpt = DEFAULT_TIMEOUT,
    extract_memory_mb: MemoryOpt = DEFAULT_MEMORY_MB,
    follow_external_symlinks: FollowOpt = False,
) -> None:
    """Extract segments from documents into one Parquet segments table, written atomically."""
    from ..errors import InputError
    from ..extract import extract_documents

    if out.is_dir():
        raise InputError(f"--out {out} is a folder; give a file name such as segments.parquet")
    from ..progress import spinner

    with spinner("extracting", quiet=quiet or as_json):
        result = extract_documents(
            paths, root=root, key_columns=key_columns, language_from_path=language_from_path,
            skip_bad_files=skip_bad_files, workers=workers, detect_keys=detect_keys,
            doc_version_from_path=doc_version_from_path,
            limits=extract_limits(max_cells, max_columns, max_text_mb, extract_timeout,
                                  extract_memory_mb),
            follow_external_symlinks=follow_external_symlinks,
        )
    from ..store.atomic import atomic_path

    # Temp file in the same folder, then an atomic rename: a reader never sees half a file.
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(out) as tmp:
            result.segments.write_parquet(tmp, compression="zstd", statistics=True)
    except OSError as err:  # Polars reports a failed create as an OSError too
        raise InputError(f"cannot write --out {out}: {err.strerror or err}; choose a "
                         "writable location") from err
    if not quiet or as_json:
        for line in result.left_out():
            note(line)
    if not quiet:
        for line in result.keys_report():
            note(line)
    if as_json:
        note(f"{result.summary()} → {out}")
        print_json({"out": str(out), **result.manifest()})
        return
    say(f"{result.summary()} → {out}")
