"""Tables (CSV/TSV files, spreadsheet sheets) to segments: row texts, keys, typed values, summary.

- ``keys``: "column: value" for each key column of the row. Key columns are the ones given
  (``--key-columns``: those of the list this table has) or, unless detection is off, the
  detected ones: an id-like *name* (``id``, ``…_id``, ``…Id``, ``…_key``, ``code``, ``sku``) or
  id-like *values* (at least 95 % of a text column's values mix letters and digits without
  spaces, e.g. ``A-1042``, ``INV-2026-7``, ``SKU123``). Uniqueness is not required: foreign keys
  are what link one file to another.
- ``row_values``: the row's typed values as a JSON object (numbers stay numbers, dates are
  ISO 8601 strings, empty cells null), for analysts and for exact filters.
- the ``table_summary`` segment: rows, columns, each column's type and range or top values,
  from column statistics alone (no language model).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import polars as pl

_ID_NAME = re.compile(r"[a-z0-9](?:Id|ID|Key|Code|SKU)$")  # camelCase: orderId, CustomerID
_ID_NAME_CI = re.compile(r"(?i)(?:^(?:id|key|code|sku)$|[_\s-](?:id|key|code|sku)$|sku)")
ID_VALUE = (r"^(?:[A-Za-z]+[-_/.]?\d[A-Za-z0-9]*(?:[-_/.][A-Za-z0-9]+)*"
            r"|\d+[-_/][A-Za-z][A-Za-z0-9]*)$")
_VALUE_SHARE = 0.95


@dataclasses.dataclass(frozen=True)
class TableRows:
    """The segments of one table: rows (``text``, ``keys``, ``row_values``), its summary text,
    and the key columns used, with how they were chosen ("given" or "detected")."""

    rows: pl.DataFrame
    summary: str | None
    key_columns: tuple[str, ...]
    key_source: str


def is_id_name(name: str) -> bool:
    """Whether a column name looks like an identifier (``order_id``, ``CustomerID``, ``sku``)."""
    return bool(_ID_NAME.search(name) or _ID_NAME_CI.search(name))


def detect_key_columns(frame: pl.DataFrame) -> list[str]:
    """Columns that look like keys, by name or by values (see the module docstring)."""
    found = []
    for name, dtype in frame.schema.items():
        if dtype.is_float() or dtype.is_temporal() or dtype == pl.Boolean:
            continue
        if is_id_name(name):
            found.append(name)
            continue
        if dtype != pl.String:
            continue
        values = frame.get_column(name).drop_nulls()
        values = values.filter(values != "")
        if values.len() < 2 or values.n_unique() < 2:
            continue
        share = values.str.contains(ID_VALUE).mean()
        if share is not None and float(share) >= _VALUE_SHARE:  # type: ignore[arg-type]
            found.append(name)
    return found


def tidy_types(frame: pl.DataFrame) -> pl.DataFrame:
    """Whole-number float columns become integers, midnight-only datetimes dates (spreadsheets
    store every number as a float and every date as a datetime)."""
    fixes = []
    for name, dtype in frame.schema.items():
        col = frame.get_column(name)
        if dtype.is_float():
            v = col.drop_nulls()
            if v.len() and bool(((v % 1) == 0).all()) and float(v.abs().max()) < 2**53:  # type: ignore[arg-type]
                fixes.append(pl.col(name).cast(pl.Int64))
        elif isinstance(dtype, pl.Datetime):
            v = col.drop_nulls()
            if v.len() and bool((v.dt.time() == pl.time(0)).all()):
                fixes.append(pl.col(name).cast(pl.Date))
    return frame.with_columns(fixes) if fixes else frame


def table_rows(
    frame: pl.DataFrame,
    *,
    name: str,
    key_columns: Sequence[str] | None,
    detect_keys: bool,
    separator: str,
) -> TableRows:
    """Row segments and summary of one table (``frame``: one column per table column)."""
    if key_columns:
        keys = [k for k in key_columns if k in frame.columns]
        source = "given"
    else:
        keys = detect_key_columns(frame) if detect_keys else []
        source = "detected"
    if frame.width == 0:
        empty = pl.DataFrame(schema={"text": pl.String, "keys": pl.List(pl.String),
                                     "row_values": pl.String})
        return TableRows(empty, None, (), source)
    as_text = [pl.col(n).cast(pl.String) for n in frame.columns]
    parts = [
        pl.when(c.is_not_null() & (c != "")).then(pl.lit(f"{n}: ") + c)
        for n, c in zip(frame.columns, as_text, strict=True)
    ]
    if keys:
        key_expr: pl.Expr = pl.concat_list([
            pl.when(pl.col(k).is_not_null() & (pl.col(k).cast(pl.String) != ""))
            .then(pl.lit(f"{k}: ") + pl.col(k).cast(pl.String)) for k in keys
        ]).list.drop_nulls()
    else:
        key_expr = pl.lit(None, dtype=pl.List(pl.String))
    rows = frame.select(
        text=pl.concat_str(parts, separator=separator, ignore_nulls=True),
        keys=key_expr,
        row_values=_json_values(frame),
    ).filter(pl.col("text") != "")
    summary = summarize(frame, name) if frame.height and frame.width else None
    return TableRows(rows, summary, tuple(keys), source)


def _json_values(frame: pl.DataFrame) -> pl.Expr:
    cols = []
    for n, dtype in frame.schema.items():
        c = pl.col(n)
        cols.append(c.dt.to_string("iso") if dtype.is_temporal() else c)
    return pl.struct(cols).struct.json_encode() if cols else pl.lit(None, dtype=pl.String)


def _kind(series: pl.Series) -> str:
    dtype = series.dtype
    if dtype.is_integer():
        return "integer"
    if dtype.is_numeric():
        return "number"
    if dtype == pl.Date:
        return "date"
    if dtype.is_temporal():
        return "datetime"
    if dtype == pl.Boolean:
        return "boolean"
    return "text"


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _parsed(series: pl.Series) -> pl.Series:
    """A text column whose every value is a number (or an ISO date) as that type."""
    if series.dtype != pl.String:
        return series
    values = series.filter(series.is_not_null() & (series != ""))
    if not values.len():
        return series
    for cast in (
        lambda s: s.str.to_integer(strict=False),
        lambda s: s.cast(pl.Float64, strict=False),
        lambda s: s.str.to_date("%Y-%m-%d", strict=False),
    ):
        out = cast(values)
        if out.null_count() == 0:
            return out
    return series


def summarize(frame: pl.DataFrame, name: str) -> str:
    """One paragraph of column statistics: type, range or distinct and top values."""
    parts = []
    for col in frame.columns:
        s = _parsed(frame.get_column(col))
        kind = _kind(s)
        values = s.drop_nulls()
        if kind == "text":
            values = values.filter(values != "")
        empty = frame.height - values.len()
        note = f"; {empty} empty" if empty else ""
        if not values.len():
            parts.append(f"{col} (empty)")
        elif kind in ("integer", "number", "date", "datetime"):
            lo, hi = values.min(), values.max()
            average: Any = values.mean() if kind in ("integer", "number") else None
            mean = f", mean {_fmt(float(average))}" if average is not None else ""
            parts.append(f"{col} ({kind}, {_fmt(lo)} to {_fmt(hi)}{mean}{note})")
        else:
            distinct = values.n_unique()
            values = values.cast(pl.String).str.replace_all(r"\s+", " ")  # one line each
            counts = values.value_counts(sort=True, name="n") \
                .sort(["n", values.name], descending=[True, False]).head(3)
            top = ", ".join(f"{v} ×{n}" for v, n in counts.iter_rows())
            label = f"top {top}" if distinct < values.len() else \
                f"e.g. {', '.join(counts.get_column(values.name).cast(pl.String).to_list()[:2])}"
            parts.append(f"{col} ({kind}, {distinct} distinct; {label}{note})")
    return (f"{name}: {frame.height} rows, {frame.width} columns. " + "; ".join(parts) + ".")
