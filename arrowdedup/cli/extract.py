"""`arrowdedup extract`: documents to a segments table (documents-to-store issue)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import QuietOpt, app, clean_errors, console, err_console


@app.command()
@clean_errors
def extract(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Document files or folders (.md .markdown .txt .html .htm .csv .tsv "
                            ".jsonl .parquet); folders are walked recursively."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Parquet file to write.")],
    root: Annotated[
        Path | None,
        typer.Option(help="doc_id = path relative to this folder (default: each folder given)."),
    ] = None,
    key_columns: Annotated[
        str | None, typer.Option(help="CSV/TSV key columns, comma separated (fill `keys`).")
    ] = None,
    language_from_path: Annotated[
        str | None,
        typer.Option(help="Language from the path, e.g. 'content/{lang}/**' (front matter wins)."),
    ] = None,
    skip_bad_files: Annotated[
        bool, typer.Option(help="Skip unreadable or undecodable files instead of stopping.")
    ] = False,
    workers: Annotated[
        int | None, typer.Option(help="Parsing processes (default: all cores for large inputs).")
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """Extract segments from documents into one Parquet segments table, written atomically."""
    from ..errors import InputError
    from ..extract import extract_documents

    if out.is_dir():
        raise InputError(f"--out {out} is a folder; give a file name such as segments.parquet")
    result = extract_documents(
        paths, root=root, key_columns=key_columns, language_from_path=language_from_path,
        skip_bad_files=skip_bad_files, workers=workers,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    from ..store.atomic import atomic_path

    # Temp file in the same folder, then an atomic rename: a reader never sees half a file.
    with atomic_path(out) as tmp:
        result.segments.write_parquet(tmp, compression="zstd", statistics=True)
    if not quiet:
        for skipped in result.skipped:
            err_console.print(f"skipped {skipped.path}: {skipped.reason}", markup=False,
                              soft_wrap=True)
    console.print(f"{result.summary()} → {out}", markup=False, soft_wrap=True)
