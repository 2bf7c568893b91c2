"""The options that bound what one document file may cost to extract (`extract`, `ingest`)."""

from __future__ import annotations

from typing import Annotated

import typer

from ..extract.limits import ExtractLimits

_DEFAULT = ExtractLimits()

MaxCellsOpt = Annotated[int, typer.Option(
    "--max-cells", help="Documents only: cells one table file may hold (a sheet counts its "
                        "whole rectangle, empty cells included).")]
MaxColumnsOpt = Annotated[int, typer.Option(
    "--max-columns", help="Documents only: columns one table may have.")]
MaxTextOpt = Annotated[int, typer.Option(
    "--max-text-mb", help="Documents only: MB of text one table file may expand to (shared "
                          "strings counted per cell; a CSV/TSV: its size).")]
TimeoutOpt = Annotated[float, typer.Option(
    "--extract-timeout", help="Documents only: seconds one PDF, workbook or CSV/TSV file may "
                              "take to read.")]
MemoryOpt = Annotated[int, typer.Option(
    "--extract-memory-mb", help="Documents only: MB of memory one extraction worker may use.")]
FollowOpt = Annotated[bool, typer.Option(
    "--follow-external-symlinks", help="Documents only: read the files that symbolic links "
                                       "inside a folder point at outside it (default: listed, "
                                       "not read).")]

DEFAULT_CELLS = _DEFAULT.max_cells
DEFAULT_COLUMNS = _DEFAULT.max_columns
DEFAULT_TEXT_MB = _DEFAULT.max_text_bytes >> 20
DEFAULT_TIMEOUT = _DEFAULT.timeout
DEFAULT_MEMORY_MB = _DEFAULT.memory >> 20


def extract_limits(max_cells: int, max_columns: int, max_text_mb: int, timeout: float,
                   memory_mb: int) -> ExtractLimits:
    """The limits the options give (a value out of range is one ConfigError line)."""
    return ExtractLimits(max_cells=max_cells, max_columns=max_columns,
                         max_text_bytes=max_text_mb << 20 if max_text_mb > 0 else max_text_mb,
                         timeout=timeout,
                         memory=memory_mb << 20 if memory_mb > 0 else memory_mb)
