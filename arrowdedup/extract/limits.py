"""Bounds on what one input file may cost to extract: cells, columns, text, time and memory.

A file from the outside world decides how much a naive reader allocates: a 2 KB workbook can
declare a cell at XFD1048576 (17 billion cells once materialised), 100k cells can point at one
20 KB shared string (2 GB of text), a CSV header can hold a million columns. Tables are
measured before they are read (:mod:`.sheet_scan` for workbooks, the header for CSV/TSV), and
every reader runs in a worker process (:mod:`.isolated`) that is killed past the time or memory
limit, so one file can cost a bounded amount and never end the run.
"""

from __future__ import annotations

import dataclasses

from ..errors import ConfigError

_MB = 1 << 20

#: Limit name -> the CLI option that sets it.
OPTIONS: dict[str, str] = {
    "max_cells": "--max-cells",
    "max_columns": "--max-columns",
    "max_text_bytes": "--max-text-mb",
    "timeout": "--extract-timeout",
    "memory": "--extract-memory-mb",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExtractLimits:
    """What one file may cost to extract (``extract_documents(limits=...)``).

    - ``max_cells``: cells of one table file (CSV/TSV; a workbook: every sheet's rectangle
      from its first to its last cell, empty cells included, as the reader allocates them).
    - ``max_columns``: columns of one table (a CSV header, a sheet's widest row).
    - ``max_text_bytes``: text one table file expands to (shared strings counted once per
      cell that uses them; a CSV/TSV: its size).
    - ``timeout``: seconds one file (PDF, workbook, CSV/TSV) may take in its worker.
    - ``memory``: bytes of resident memory one extraction worker may use.
    """

    max_cells: int = 10_000_000
    max_columns: int = 2_000
    max_text_bytes: int = 64 * _MB
    timeout: float = 300.0
    memory: int = 1024 * _MB

    def __post_init__(self) -> None:
        for name in ("max_cells", "max_columns", "max_text_bytes", "memory"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"extraction limit {name} must be a whole number >= 1, got "
                                  f"{value!r}; raise or lower it with {OPTIONS[name]}")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) \
                or not self.timeout > 0 or self.timeout == float("inf"):
            raise ConfigError(f"extraction limit timeout must be a number of seconds > 0, got "
                              f"{self.timeout!r}; set it with --extract-timeout")


def over_limit(display: str, what: str, limit_name: str, shown: str) -> str:
    """One line: ``display`` is past the limit ``limit_name`` (``what`` says by how much),
    naming the option that raises it."""
    return (f"{display}: {what}, past the limit of {shown} ({OPTIONS[limit_name]}); raise "
            f"{OPTIONS[limit_name]} to read it, or skip it with --skip-bad-files")


def mb(n: int) -> str:
    """``n`` bytes as whole MB (the unit of the CLI options)."""
    return f"{n / _MB:,.0f} MB" if n >= _MB else f"{n:,} bytes"
