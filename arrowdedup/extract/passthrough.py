"""JSONL and Parquet files that already hold a segments table: validated, passed through."""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl

from ..errors import ArrowDedupError, InputError
from ..schema import read_table_file, validate

_HINT = "or skip the file with --skip-bad-files"


def read_jsonl(data: bytes, display: str) -> pl.DataFrame:
    """A JSON Lines segments table (one object per line)."""
    if not data.strip():
        raise InputError(f"{display}: the JSONL file is empty; add segments, {_HINT}")
    try:
        frame = pl.read_ndjson(io.BytesIO(data))
    except (pl.exceptions.PolarsError, ValueError, RuntimeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(
            f"{display}: not valid JSON Lines ({reason}); write one JSON object per line, {_HINT}"
        ) from err
    return _checked(frame, display)


def read_parquet(path: Path, display: str) -> pl.DataFrame:
    """A Parquet (or Arrow IPC) segments table."""
    try:
        table = read_table_file(path)
        frame = pl.from_arrow(table)
    except ArrowDedupError as err:
        raise InputError(f"{display}: {err}") from err
    except (pl.exceptions.PolarsError, ValueError, TypeError) as err:
        raise InputError(
            f"{display}: cannot convert the table to a frame ({err}); {_HINT}"
        ) from err
    assert isinstance(frame, pl.DataFrame)
    return _checked(frame, display)


def _checked(frame: pl.DataFrame, display: str) -> pl.DataFrame:
    try:
        validate(frame)
    except ArrowDedupError as err:
        raise InputError(f"{display}: not a valid segments table: {err}") from err
    return frame
