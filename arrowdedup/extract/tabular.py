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
    """Columns that look like keys, by name or by values (see the module docstring); the
    value statistics of every candidate column are computed in one pass."""
    by_name: set[str] = set()
    by_value: list[str] = []
    for name, dtype in frame.schema.items():
        if dtype.is_float() or dtype.is_temporal() or dtype == pl.Boolean:
            continue
        if is_id_name(name):
            by_name.add(name)
        elif dtype == pl.String:
            by_value.append(name)
    found = set(by_name)
    if by_value:
        exprs = []
        for i, name in enumerate(by_value):
            values = pl.col(name).filter(pl.col(name).is_not_null() & (pl.col(name) != ""))
            exprs += [values.len().alias(f"n{i}"), values.n_unique().alias(f"u{i}"),
                      values.str.contains(ID_VALUE).mean().alias(f"s{i}")]
        stats = frame.select(exprs).row(0, named=True)
        for i, name in enumerate(by_value):
            share = stats[f"s{i}"]
            if stats[f"n{i}"] >= 2 and stats[f"u{i}"] >= 2 and share is not None \
                    and float(share) >= _VALUE_SHARE:
                found.add(name)
    return [name for name in frame.columns if name in found]


def tidy_types(frame: pl.DataFrame) -> pl.DataFrame:
    """Whole-number float columns become integers, midnight-only datetimes dates (spreadsheets
    store every number as a float and every date as a datetime); one pass over the columns."""
    tests = []
    for i, (name, dtype) in enumerate(frame.schema.items()):
        values = pl.col(name).drop_nulls()
        if dtype.is_float():
            tests.append(((values.len() > 0) & ((values % 1) == 0).all()
                          & (values.abs().max() < 2**53)).alias(str(i)))
        elif isinstance(dtype, pl.Datetime):
            tests.append(((values.len() > 0)
                          & (values.dt.time() == pl.time(0)).all()).alias(str(i)))
    if not tests:
        return frame
    passed = frame.select(tests).row(0, named=True)
    fixes = []
    for i, (name, dtype) in enumerate(frame.schema.items()):
        if passed.get(str(i)):
            fixes.append(pl.col(name).cast(pl.Int64 if dtype.is_float() else pl.Date))
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


def _kind(dtype: pl.DataType) -> str:
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


_CASTS: tuple[tuple[pl.DataType, Any], ...] = (
    (pl.Int64(), lambda c: c.str.to_integer(strict=False)),
    (pl.Float64(), lambda c: c.cast(pl.Float64, strict=False)),
    (pl.Date(), lambda c: c.str.to_date("%Y-%m-%d", strict=False)),
)


def _parsed_columns(frame: pl.DataFrame) -> dict[str, pl.Expr]:
    """Each text column whose every non-empty value is a number (or an ISO date), as that
    type (empty values null); one pass over the columns."""
    texts = [n for n, dtype in frame.schema.items() if dtype == pl.String]
    if not texts:
        return {}
    exprs = []
    for i, name in enumerate(texts):
        values = pl.col(name).filter(pl.col(name).is_not_null() & (pl.col(name) != ""))
        exprs.append(values.len().alias(f"n{i}"))
        exprs += [(cast(values).null_count() == 0).alias(f"c{i}_{k}")
                  for k, (_, cast) in enumerate(_CASTS)]
    stats = frame.select(exprs).row(0, named=True)
    out = {}
    for i, name in enumerate(texts):
        if not stats[f"n{i}"]:
            continue
        for k, (_, cast) in enumerate(_CASTS):
            if stats[f"c{i}_{k}"]:
                out[name] = cast(pl.col(name).replace("", None))
                break
    return out


def summarize(frame: pl.DataFrame, name: str) -> str:
    """One paragraph of column statistics: type, range or distinct and top values (every
    column's statistics in one pass)."""
    parsed = _parsed_columns(frame)
    typed = frame.select([parsed.get(c, pl.col(c)).alias(c) for c in frame.columns])
    exprs = []
    kinds = []
    for i, (col, dtype) in enumerate(typed.schema.items()):
        kind = _kind(dtype)
        kinds.append(kind)
        values = pl.col(col).drop_nulls()
        if kind == "text":
            values = values.filter(values != "")
        exprs.append(values.len().alias(f"n{i}"))
        if kind in ("integer", "number", "date", "datetime"):
            exprs += [values.min().alias(f"lo{i}"), values.max().alias(f"hi{i}")]
            if kind in ("integer", "number"):
                exprs.append(values.mean().alias(f"mean{i}"))
        else:
            exprs.append(values.n_unique().alias(f"u{i}"))
            one_line = values.cast(pl.String).str.replace_all(r"\s+", " ").alias("v")
            counts = one_line.value_counts(name="n")
            exprs.append(counts.sort_by([counts.struct.field("n"), counts.struct.field("v")],
                                        descending=[True, False]).head(3)
                         .implode().alias(f"top{i}"))
    stats = typed.select(exprs).row(0, named=True) if exprs else {}
    parts = []
    for i, (col, kind) in enumerate(zip(typed.columns, kinds, strict=True)):
        count = stats[f"n{i}"]
        empty = frame.height - count
        note = f"; {empty} empty" if empty else ""
        if not count:
            parts.append(f"{col} (empty)")
        elif kind in ("integer", "number", "date", "datetime"):
            average = stats.get(f"mean{i}")
            mean = f", mean {_fmt(float(average))}" if average is not None else ""
            parts.append(f"{col} ({kind}, {_fmt(stats[f'lo{i}'])} to {_fmt(stats[f'hi{i}'])}"
                         f"{mean}{note})")
        else:
            distinct = stats[f"u{i}"]
            top_rows = [(t["v"], t["n"]) for t in stats[f"top{i}"]]
            top = ", ".join(f"{v} ×{n}" for v, n in top_rows)
            label = f"top {top}" if distinct < count else \
                f"e.g. {', '.join(str(v) for v, _ in top_rows[:2])}"
            parts.append(f"{col} ({kind}, {distinct} distinct; {label}{note})")
    return (f"{name}: {frame.height} rows, {frame.width} columns. " + "; ".join(parts) + ".")
