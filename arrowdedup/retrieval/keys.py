"""Key-linked context (SPEC §4.7): from a result to the segments of other documents that share
one of its keys, and the key values that the BM25 index sees as tokens.

A result's ``keys`` are "column: value" strings (a spreadsheet row's ``order_id: A-1042``).
Another document's segment is *linked by* such a key when it carries the same key string, or,
lacking it, when its text contains the value as a whole token (not inside a longer token:
``A-1042`` matches "order A-1042." but not "A-10420"), e.g. the invoice page that names the
order. Page furniture is never linked. At most ``limit`` segments per key are taken, in store
order (deterministic), those that carry the key first. A table summary, which names sample
values of its columns, is not linked by a mere mention.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import polars as pl

from ..store import Store

_INDEXES: dict[str, _KeyIndex] = {}
_MAX_INDEXES = 4


def key_value(key: str) -> str:
    """The value part of a "column: value" key (the whole string when it has no column)."""
    return key.split(": ", 1)[1] if ": " in key else key


def indexed_text(kept: pl.DataFrame) -> pl.Series:
    """The text BM25 indexes: the segment's text, plus each key value the text does not
    already contain (so a key given in metadata is searchable by its value)."""
    text = kept.get_column("text").cast(pl.String).fill_null("")
    if "keys" not in kept.columns or kept.get_column("keys").null_count() == kept.height:
        return text
    values = kept.get_column("keys").list.eval(
        pl.element().str.splitn(": ", 2).struct.field("field_1").fill_null(pl.element()))
    frame = pl.DataFrame({"text": text, "values": values})
    missing = frame.with_row_index("i").explode("values").filter(
        pl.col("values").is_not_null()
        & ~pl.col("text").str.contains(pl.col("values"), literal=True)
    ).group_by("i", maintain_order=True).agg(pl.col("values").str.join(" "))
    if missing.height == 0:
        return text
    extra = pl.Series([""] * kept.height, dtype=pl.String).scatter(
        missing.get_column("i"), missing.get_column("values"))
    return pl.select(pl.when(extra != "").then(pl.concat_str([text, extra], separator="\n"))
                     .otherwise(text)).to_series().alias("text")


@dataclasses.dataclass(frozen=True)
class _KeyIndex:
    """Store rows (``row``, ``doc_id``, ``text``, ``segment_type``, ``keys``) and their keys
    exploded (``row``, ``key``), so a key lookup is one equality filter."""

    rows: pl.DataFrame
    keys: pl.DataFrame


def _index(store: Store) -> _KeyIndex:
    """The key index of a store version (cached: versions are immutable)."""
    name = str(store.version)
    index = _INDEXES.get(name)
    if index is None:
        lf = store.segments(with_embeddings=False)
        cols = lf.collect_schema().names()
        frame = lf.select(
            pl.col("doc_id").cast(pl.String), pl.col("text").cast(pl.String),
            (pl.col("segment_type").cast(pl.String) if "segment_type" in cols
             else pl.lit("", dtype=pl.String).alias("segment_type")),
            (pl.col("keys") if "keys" in cols
             else pl.lit(None, dtype=pl.List(pl.String)).alias("keys")),
        ).collect().with_row_index("row")
        keys = frame.select("row", pl.col("keys").alias("key")).explode("key") \
            .drop_nulls("key")
        index = _KeyIndex(frame, keys)
        while len(_INDEXES) >= _MAX_INDEXES:
            _INDEXES.pop(next(iter(_INDEXES)))
        _INDEXES[name] = index
    return index


def token_pattern(value: str) -> str:
    """A regex matching ``value`` as a whole token of a text."""
    return rf"(?:^|[^\w-]){re.escape(value)}(?:$|[^\w-])"


def linked_rows(store: Store, rows: np.ndarray, limit: int = 5) -> list[tuple[int, int, str]]:
    """(store row, rank of the result, key) of the segments linked to the results ``rows``."""
    if limit <= 0 or not rows.size:
        return []
    index = _index(store)
    frame = index.rows
    picked = frame[rows.tolist()]
    out: list[tuple[int, int, str]] = []
    result_keys: list[Any] = picked.get_column("keys").to_list()
    result_docs = picked.get_column("doc_id").to_list()
    for rank, (keys, doc) in enumerate(zip(result_keys, result_docs, strict=True), start=1):
        for key in keys or []:
            key = str(key)
            value = key_value(key)
            holders = index.keys.filter(pl.col("key") == pl.lit(key)).get_column("row")
            carries = frame[holders.sort().to_list()].filter(
                (pl.col("doc_id") != doc) & (pl.col("segment_type") != "page_furniture"))
            # A literal scan first (fast), the token rule on the few texts that pass it.
            mentions = frame.filter(pl.col("text").str.contains(value, literal=True)).filter(
                (pl.col("doc_id") != doc)
                & ~pl.col("segment_type").is_in(["page_furniture", "table_summary"])
                & ~pl.col("row").is_in(holders.implode())
                & pl.col("text").str.contains(token_pattern(value)))
            found = pl.concat([carries.select("row"), mentions.select("row")]).head(limit)
            out.extend((int(r), rank, key) for r in found.get_column("row").to_list())
    return out
