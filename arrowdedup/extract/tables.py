"""CSV / TSV to segments: one ``table_row`` per row, text = "column: value" lines.

Parsing is pyarrow's (columnar, every column read as a string, so "007" stays "007"); the row
texts are built with Polars expressions, never a Python loop over rows. A row with the wrong
number of fields makes the whole file an :class:`InputError` naming its lines: a guess would
shift values under the wrong column names.
"""

from __future__ import annotations

import collections
import csv
import io
from collections.abc import Sequence
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv

from ..errors import InputError, first_rows
from .limits import ExtractLimits, over_limit

_SKIP_HINT = "or skip the file with --skip-bad-files"


def _reader(text: str, tsv: bool) -> Any:
    if tsv:
        return csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
    return csv.reader(io.StringIO(text))


def _header(text: str, tsv: bool, display: str,
            max_columns: int | None = None) -> tuple[list[str], int]:
    """Column names and the number of physical lines the header takes; more than
    ``max_columns`` names are refused (counted on the first line before it is split)."""
    if max_columns is not None:
        first = text.lstrip("\n").split("\n", 1)[0]
        fields = first.count("\t" if tsv else ",") + 1
        if fields > max_columns and '"' not in first:
            raise InputError(over_limit(display, f"the header has {fields:,} columns",
                                        "max_columns", f"{max_columns:,}"))
    reader = _reader(text, tsv)
    row: list[str] = []
    try:
        # Blank lines before the header are skipped, as pyarrow skips them in the data.
        for row in reader:
            if row:
                break
    except csv.Error as err:
        raise InputError(f"{display}: cannot read the header row ({err}); {_SKIP_HINT}") from err
    if max_columns is not None and len(row) > max_columns:
        raise InputError(over_limit(display, f"the header has {len(row):,} columns",
                                    "max_columns", f"{max_columns:,}"))
    names = [name.strip() or f"column_{i + 1}" for i, name in enumerate(row)]
    dups = sorted(n for n, count in collections.Counter(names).items() if count > 1)
    if dups:
        raise InputError(
            f"{display}: duplicate column name(s) {dups} in the header; give every "
            f"column a distinct name, {_SKIP_HINT}"
        )
    return names, reader.line_num


def _ragged_lines(data: str, tsv: bool, width: int, offset: int) -> tuple[list[int], list[int]]:
    """Lines (1-based, whole file) and field counts of the rows whose width is wrong."""
    lines: list[int] = []
    counts: list[int] = []
    reader = _reader(data, tsv)
    try:
        for row in reader:
            if row and len(row) != width:
                lines.append(reader.line_num + offset)
                counts.append(len(row))
                if len(lines) > 5:
                    break
    except csv.Error:
        pass  # the pyarrow error already says the file is malformed; lines are best effort
    return lines, counts


def read_delimited(
    text: str, display: str, *, tsv: bool, key_columns: Sequence[str] | None
) -> pl.DataFrame:
    """Rows of one CSV/TSV file as ``text`` (String) and ``keys`` (List(String)) columns.

    ``keys`` holds "column: value" for each key column, or is null without key columns.
    """
    frame = read_delimited_frame(text, display, tsv=tsv)
    if key_columns:
        missing = [k for k in key_columns if k not in frame.columns]
        if missing:
            raise InputError(
                f"{display}: key column(s) {missing} not in the header (columns: "
                f"{frame.columns}); fix --key-columns, {_SKIP_HINT}"
            )
    names = frame.columns
    parts = [
        pl.when(pl.col(n) != "").then(pl.lit(f"{n}: ") + pl.col(n)) for n in names
    ]
    if key_columns:
        keys: pl.Expr = pl.concat_list([pl.lit(f"{k}: ") + pl.col(k) for k in key_columns])
    else:
        keys = pl.lit(None, dtype=pl.List(pl.String))
    if not names:
        return pl.DataFrame(schema={"text": pl.String, "keys": pl.List(pl.String)})
    return (
        frame.select(
            text=pl.concat_str(parts, separator="\n", ignore_nulls=True),
            keys=keys,
        )
        .filter(pl.col("text") != "")
    )


def read_delimited_frame(text: str, display: str, *, tsv: bool,
                         limits: ExtractLimits | None = None) -> pl.DataFrame:
    """One CSV/TSV file as a frame of String columns (header names; no rows when empty).
    ``limits``: columns and cells past which the file is refused before it is parsed."""
    if not text.strip():
        return pl.DataFrame()
    limits = limits or ExtractLimits()
    names, header_lines = _header(text, tsv, display, limits.max_columns)
    # Each line is at most one row: a bound on the cells before anything is allocated.
    cells = (text.count("\n") + 1 - header_lines) * len(names)
    if cells > limits.max_cells:
        raise InputError(over_limit(
            display, f"it holds up to {cells:,} cells ({len(names):,} columns)", "max_cells",
            f"{limits.max_cells:,}"))
    empty = pl.DataFrame(schema=dict.fromkeys(names, pl.String))
    data = text.split("\n", header_lines)[-1] if text.count("\n") >= header_lines else ""
    if not data.strip():
        return empty
    invalid: list[int] = []

    def on_invalid(row: pacsv.InvalidRow) -> str:
        invalid.append(row.actual_columns)
        return "skip"

    raw = data.encode("utf-8")
    try:
        table = pacsv.read_csv(
            pa.py_buffer(raw),
            read_options=pacsv.ReadOptions(
                column_names=names, block_size=min(max(len(raw) + 1, 1 << 20), (1 << 31) - 1)
            ),
            parse_options=pacsv.ParseOptions(
                delimiter="\t" if tsv else ",",
                quote_char=False if tsv else '"',
                newlines_in_values=not tsv,
                invalid_row_handler=on_invalid,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowException, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(
            f"{display}: cannot parse the {'TSV' if tsv else 'CSV'} ({reason}); check the quoting "
            f"and the delimiter, {_SKIP_HINT}"
        ) from err
    if invalid:
        lines, counts = _ragged_lines(data, tsv, len(names), header_lines)
        where = f"lines {first_rows(lines)}" if lines else f"{len(invalid)} row(s)"
        shown = counts or invalid
        raise InputError(
            f"{display}: ragged rows: {where} have {sorted(set(shown))[:5]} field(s) where the "
            f"header has {len(names)}; fix the quoting or the delimiter so every row has "
            f"{len(names)} fields, {_SKIP_HINT}"
        )
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame
