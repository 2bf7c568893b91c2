"""Spreadsheets (xlsx, xlsm, xls, ods) to tables: Polars ``read_excel`` with the calamine engine.

One table per sheet, in the workbook's sheet order; a sheet without any cell yields nothing.
Merged cells hold their value in the top-left cell only (calamine's reading), so the other rows
of a merged range simply lack that column.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..errors import InputError, MissingDependencyError
from .tabular import tidy_types

SHEET_FORMATS = frozenset({"xlsx", "xlsm", "xls", "ods"})
_SKIP_HINT = "or skip it with --skip-bad-files"


def read_workbook(path: Path, display: str) -> list[tuple[str, pl.DataFrame]]:
    """(sheet name, typed frame) of every sheet of a workbook."""
    try:
        import fastexcel  # noqa: F401
    except ImportError as err:
        raise MissingDependencyError("fastexcel", "sheets", "reading spreadsheets") from err
    try:
        sheets = pl.read_excel(path, sheet_id=0, engine="calamine", raise_if_empty=False)
    except (OSError, FileNotFoundError) as err:
        raise InputError(f"cannot read {display}: {err}; check that the file exists and is "
                         f"readable, {_SKIP_HINT}") from err
    except Exception as err:  # fastexcel raises its own (Calamine…) error types
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"{display}: not a readable spreadsheet ({reason}); the file is "
                         f"corrupt, encrypted or not what its extension says: re-save it, "
                         f"{_SKIP_HINT}") from err
    out = []
    for name, frame in sheets.items():
        if frame.width == 0:
            continue
        frame = frame.filter(~pl.all_horizontal(pl.all().is_null()))
        out.append((str(name), tidy_types(frame)))
    return out
