"""Hugging Face ``datasets``: a ``Dataset`` as a segments table, for :func:`arrowdedup.ingest`
and :func:`arrowdedup.ingest_to_store` (which take one directly, with ``columns=``).

A ``Dataset`` is an Arrow table, possibly behind an *indices mapping* (what ``select``,
``filter``, ``shuffle`` and ``sort`` leave): without one its table is used as it is (zero-copy:
the segments table shares its buffers, memory-mapped ones included); with one the rows are
taken once, in the dataset's order. ``columns={"doc_id": "url", "text": "content", ...}``
names the dataset column each segments-table column comes from (renaming shares the buffers
too); other columns are carried as they are. Columns a dataset of chunks rarely has are made
when absent: ``segment_type`` ``"paragraph"``, ``position`` the row's order inside its
document, ``segment_id`` ``"{doc_id}#{position}"``.

``pip install 'arrowdedup[datasets]'``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from ..errors import InputError, MissingDependencyError

try:
    import datasets
except ImportError as err:
    raise MissingDependencyError("datasets", "datasets",
                                 "arrowdedup.integrations.datasets") from err

__all__ = ["dataset_table"]

SEGMENT_TYPE = "paragraph"


def dataset_table(dataset: Any, columns: Mapping[str, str] | None = None) -> pa.Table:
    """The segments table of ``dataset`` (see the module): its own Arrow table when it has no
    indices mapping, else its rows taken once; ``columns`` maps segments-table columns to
    dataset columns."""
    if isinstance(dataset, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        splits = list(dataset)
        raise InputError(
            f"a DatasetDict holds several splits ({', '.join(map(repr, splits))}) and "
            f"arrowdedup ingests one table; pass one split, e.g. dataset[{splits[0]!r}]"
            if splits else "the DatasetDict holds no split; pass a Dataset")
    if isinstance(dataset, datasets.IterableDataset):
        raise InputError("an IterableDataset (streaming=True) has no Arrow table to read; load "
                         "the dataset without streaming=True, or write it to Parquet first")
    if not isinstance(dataset, datasets.Dataset):
        raise InputError(f"expected a datasets.Dataset, got {type(dataset).__name__}")
    table: pa.Table = dataset.data.table
    # select/filter/shuffle leave the table whole and point at its rows through a mapping,
    # which is private API: read it as it is, with no copy, or refuse clearly if it changes.
    indices = getattr(dataset, "_indices", None)
    if indices is not None:
        table = table.take(indices.column(0))
    return _mapped(table, dict(columns or {}))


def _mapped(table: pa.Table, columns: dict[str, str]) -> pa.Table:
    names = table.column_names
    unknown = {k: v for k, v in columns.items() if v not in names}
    if unknown:
        raise InputError(
            f"columns={unknown} names dataset column(s) that do not exist; the dataset has: "
            f"{', '.join(names)}")
    sources = set(columns.values())
    shadowed = [t for t in columns if t in names and t not in sources]
    if shadowed:
        raise InputError(
            f"the dataset already has column(s) {shadowed}, which columns= would fill from "
            f"another column; drop them first (dataset.remove_columns({shadowed!r})) or map "
            "them elsewhere")
    target = {v: k for k, v in columns.items()}
    if len(target) != len(columns):
        raise InputError(f"columns={columns} maps one dataset column twice; map each once")
    # Renaming shares every buffer; the huggingface schema metadata describes the dataset's
    # names, not these.
    out = table.rename_columns([target.get(n, n) for n in names]).replace_schema_metadata(None)
    return _filled(out)


def _filled(table: pa.Table) -> pa.Table:
    names = table.column_names
    missing = [c for c in ("doc_id", "text") if c not in names]
    if missing:
        raise InputError(
            f"the dataset has no {' or '.join(map(repr, missing))} column; name the dataset "
            f"columns that hold them, e.g. columns={{'doc_id': 'url', 'text': 'content'}} "
            f"(it has: {', '.join(names)})")
    n = table.num_rows
    if "segment_type" not in names:
        table = table.append_column("segment_type", pa.repeat(pa.scalar(SEGMENT_TYPE), n))
    if "position" in names and "segment_id" in names:
        return table
    doc = pl.from_arrow(table.select(["doc_id"]))
    assert isinstance(doc, pl.DataFrame)
    position = doc.select(pl.int_range(pl.len(), dtype=pl.Int32).over("doc_id")).to_series()
    if "position" not in names:
        table = table.append_column("position", position.to_arrow())
    if "segment_id" not in names:
        pos = pl.Series(np.asarray(table.column("position"))).cast(pl.String)
        ids = doc.select(pl.col("doc_id").cast(pl.String) + "#" + pos).to_series()
        table = table.append_column("segment_id", ids.to_arrow())
    return table
