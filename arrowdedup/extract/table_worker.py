"""Tables read in an extraction worker (:mod:`.isolated`): a workbook or a CSV/TSV file to the
row segments and summary of each of its tables, within :class:`~.limits.ExtractLimits`.

A workbook is measured from its XML first (:mod:`.sheet_scan`), so one past a limit is refused
before the reader allocates anything; every table read is checked again (cells, columns,
text), which bounds the formats the scan cannot see into (xls). Everything here runs in the
worker, so a reader that crashes, hangs or exhausts its memory costs that file only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from ..errors import InputError
from .limits import ExtractLimits, mb, over_limit
from .sheet_scan import scan_workbook
from .sheets import SHEET_FORMATS, read_workbook
from .tables import read_delimited_frame
from .tabular import table_rows


def frame_problem(display: str, tables: list[tuple[str | None, pl.DataFrame]],
                  limits: ExtractLimits) -> str | None:
    """The first limit the tables read pass, as one line, or ``None``."""
    cells = 0
    for sheet, frame in tables:
        where = f"sheet {sheet}" if sheet is not None else "the table"
        if frame.width > limits.max_columns:
            return over_limit(display, f"{where} has {frame.width:,} columns", "max_columns",
                              f"{limits.max_columns:,}")
        cells += frame.height * frame.width
        if cells > limits.max_cells:
            return over_limit(display, f"its tables hold {cells:,} cells", "max_cells",
                              f"{limits.max_cells:,}")
    text = 0
    for _, frame in tables:
        strings = [pl.col(n).str.len_bytes().sum() for n, t in frame.schema.items()
                   if t == pl.String]
        if strings:
            text += sum(int(v or 0) for v in frame.select(strings).row(0))
    if text > limits.max_text_bytes:
        return over_limit(display, f"its cells hold {mb(text)} of text", "max_text_bytes",
                          mb(limits.max_text_bytes))
    return None


def read_table(path: str, display: str, fmt: str, doc_id: str, text: str | None,
               options: dict[str, Any]) -> dict[str, Any]:
    """``{"tables": [...]}`` (one per sheet, or one for a CSV/TSV: sheet name or None, row
    segments, summary, key columns and how they were chosen, column names), or
    ``{"error": one line}``. ``text``: a CSV/TSV file's decoded text."""
    limits = ExtractLimits(**options["limits"])
    try:
        if fmt in SHEET_FORMATS:
            problem = scan_workbook(Path(path), display, fmt, limits)
            if problem:
                return {"error": problem}
            named: list[tuple[str | None, pl.DataFrame]] = list(
                read_workbook(Path(path), display))
            separator = "; "
        else:
            assert text is not None
            named = [(None, read_delimited_frame(text, display, tsv=fmt == "tsv",
                                                 limits=limits))]
            separator = "\n"
        problem = frame_problem(display, named, limits)
        if problem:
            return {"error": problem}
        tables = []
        for sheet, frame in named:
            name = f"{doc_id}#{sheet}" if sheet is not None else doc_id
            rows = table_rows(frame, name=name, key_columns=options["key_columns"],
                              detect_keys=options["detect_keys"], separator=separator)
            tables.append({"sheet": sheet, "rows": rows.rows, "summary": rows.summary,
                           "key_columns": rows.key_columns, "key_source": rows.key_source,
                           "columns": frame.columns})
    except InputError as err:
        return {"error": str(err)}
    return {"tables": tables}
