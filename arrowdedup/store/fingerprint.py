"""Each document's input fingerprint: what ``--update`` compares to find unchanged documents.

A document is unchanged when every input column of every one of its segments is byte-equal
and its segment set is the same. Its fingerprint is two 64-bit sums of per-row hashes over all
input columns (names sorted, so a column order change is not a change) plus its row count; a
sum is independent of the row order and changes with any row added, removed or altered.

The row hash is Polars' ``hash_rows``, stable for one Polars version only: the manifest
records :data:`FINGERPRINT_KIND`, and an update whose kind differs treats every document as
changed (correct, only slower).
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

SEEDS = (0x5EED_0001, 0x5EED_0002)
COLUMNS = ("doc_id", "fp_a", "fp_b", "rows")


def fingerprint_kind() -> str:
    return f"polars-hash_rows-{pl.__version__}"


FINGERPRINT_KIND = fingerprint_kind()


def empty_fingerprints() -> pl.DataFrame:
    return pl.DataFrame(schema={"doc_id": pl.String, "fp_a": pl.UInt64, "fp_b": pl.UInt64,
                                "rows": pl.UInt32})


def document_fingerprints(table: pa.Table | pl.DataFrame) -> pl.DataFrame:
    """One row per document: ``doc_id``, ``fp_a``, ``fp_b``, ``rows``, sorted by doc_id."""
    frame = table if isinstance(table, pl.DataFrame) else pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    if frame.height == 0:
        return empty_fingerprints()
    inputs = frame.select(sorted(frame.columns))
    hashed = pl.DataFrame({
        "doc_id": frame.get_column("doc_id").cast(pl.String),
        "fp_a": inputs.hash_rows(SEEDS[0]),
        "fp_b": inputs.hash_rows(SEEDS[1]),
    })
    return (hashed.group_by("doc_id")
            .agg(pl.col("fp_a").sum(), pl.col("fp_b").sum(), pl.len().cast(pl.UInt32)
                 .alias("rows"))
            .sort("doc_id"))
