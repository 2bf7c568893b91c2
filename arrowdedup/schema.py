"""The segments table of SPEC section 1: reading, validation and the arrays the kernels need.

Types are accepted loosely (any integer ``position``, float32/float64 ``salience``, list or
fixed-size list embeddings of any float width) and never rewritten: validation only reads.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from .arrays.hashing import ascii_only
from .arrays.vectors import Embeddings, column_error, embeddings_from
from .errors import InputError, SchemaError

if TYPE_CHECKING:
    from datasets import Dataset

REQUIRED = ("doc_id", "segment_id", "text", "segment_type", "position")
SegmentsInput: TypeAlias = (
    "pl.DataFrame | pl.LazyFrame | pa.Table | str | Path | Sequence[str | Path] | Dataset"
)

_STRINGISH = (pl.String, pl.Categorical, pl.Enum)


def is_dataset(source: object) -> bool:
    """Whether ``source`` is a Hugging Face ``datasets`` object (``Dataset``, ``DatasetDict``,
    …), known without importing ``datasets``: if it is not imported, nothing is one."""
    module = sys.modules.get("datasets")
    kinds = tuple(getattr(module, name, ()) for name in (
        "Dataset", "DatasetDict", "IterableDataset", "IterableDatasetDict"))
    return module is not None and isinstance(source, tuple(k for k in kinds if k))


def dataset_segments(source: Any, columns: Mapping[str, str] | None) -> pa.Table:
    """A ``datasets.Dataset`` as an Arrow segments table (:mod:`arrowdedup.integrations.datasets`);
    ``columns=`` given with anything else is refused."""
    if not is_dataset(source):
        raise InputError(
            "columns= maps the columns of a datasets.Dataset; rename a frame's or a table's "
            "columns before passing it (DataFrame.rename, Table.rename_columns)")
    from .integrations.datasets import dataset_table

    return dataset_table(source, columns)


def read_segments(source: SegmentsInput, *, columns: Mapping[str, str] | None = None
                  ) -> pl.DataFrame:
    """Load a segments table from a frame, an Arrow table, a ``datasets.Dataset`` (whose columns
    ``columns`` maps) or Parquet / Arrow IPC file(s)."""
    if columns is not None or is_dataset(source):
        return _from_arrow(dataset_segments(source, columns), "the dataset")
    if isinstance(source, pl.DataFrame):
        return source
    if isinstance(source, pl.LazyFrame):
        try:
            return source.collect()
        except pl.exceptions.PolarsError as err:
            raise InputError(f"cannot evaluate the LazyFrame: {err}") from err
    if isinstance(source, pa.Table):
        return _from_arrow(source, "the Arrow table")
    if isinstance(source, pa.RecordBatch):
        return _from_arrow(pa.Table.from_batches([source]), "the Arrow record batch")
    if isinstance(source, (str, Path)):
        return _from_arrow(read_table_file(Path(source)), str(source))
    if isinstance(source, Sequence):
        paths = [Path(p) for p in source]
        if not paths:
            raise InputError("no input files given; pass at least one Parquet or Arrow IPC file")
        tables = [read_table_file(p) for p in paths]
        try:
            table = pa.concat_tables(tables, promote_options="none")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
            raise SchemaError(
                f"the input files do not share one schema ({err}); "
                "write them with the same columns and types"
            ) from err
        return _from_arrow(table, ", ".join(str(p) for p in paths))
    raise InputError(
        f"cannot read segments from a {type(source).__name__}; pass a polars DataFrame or "
        "LazyFrame, a pyarrow Table, a datasets.Dataset, or Parquet / Arrow IPC file path(s)"
    )


def read_table_file(path: Path) -> pa.Table:
    """Read one Parquet or Arrow IPC (file or stream) file, refusing damaged ones clearly."""
    if not path.exists():
        raise InputError(f"input file {path} does not exist; check the path")
    if path.is_dir():
        raise InputError(
            f"input {path} is a directory; pass the Parquet/IPC files inside it "
            "(or use the documents pipeline for a folder of documents)"
        )
    try:
        with path.open("rb") as fh:
            head = fh.read(6)
    except OSError as err:
        raise InputError(f"cannot read {path}: {err}") from err
    try:
        if head[:4] == b"PAR1":
            return pq.read_table(path)
        if head == b"ARROW1":
            with pa.memory_map(str(path), "r") as source:
                table = ipc.open_file(source).read_all()
        else:
            try:
                with pa.memory_map(str(path), "r") as source:
                    table = ipc.open_stream(source).read_all()
            except (pa.ArrowInvalid, OSError) as err:
                raise InputError(
                    f"{path} is neither a Parquet nor an Arrow IPC file; convert it to Parquet"
                ) from err
        # IPC bytes are taken as they are: a corrupted offset would be read out of bounds
        # later (a segmentation fault in a take or a hash), so every offset and string is
        # checked here, where a damaged file can still be named.
        table.validate(full=True)
        return table
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError) as err:
        raise InputError(
            f"{path} is truncated or corrupted and cannot be read ({err}); "
            "re-export the file"
        ) from err


def _from_arrow(table: pa.Table, origin: str) -> pl.DataFrame:
    _check_utf8(table, origin)
    try:
        frame = pl.from_arrow(table)
    except (pl.exceptions.PolarsError, pa.ArrowException, ValueError, TypeError) as err:
        raise SchemaError(f"cannot convert {origin} to a frame: {err}") from err
    assert isinstance(frame, pl.DataFrame)
    return frame


def _check_utf8(table: pa.Table, origin: str) -> None:
    """Refuse string columns holding invalid UTF-8 (Arrow does not check on read; Polars would
    accept the bytes and fail later, far from the cause)."""
    for name, col in zip(table.column_names, table.columns, strict=True):
        kind = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_string_view(kind)):
            continue
        try:
            # A chunk of ASCII bytes under consistent offsets is valid UTF-8 as it stands:
            # one pass over its bytes instead of a check per string (~0.03 s at 1M rows).
            for chunk in col.chunks:
                if not ascii_only(chunk):
                    chunk.validate(full=True)
        except pa.ArrowInvalid as err:
            raise InputError(
                f"column {name!r} of {origin} is not valid UTF-8 ({err}); decode the source "
                "with its real encoding (or with errors='replace') and re-export the file"
            ) from err


def validate(
    frame: pl.DataFrame, max_segments_per_document: int | None = None
) -> Embeddings | None:
    """Refuse a table that breaks SPEC section 1; never changes the frame.

    Returns the embeddings (checked on the way), so callers need not read them twice.
    """
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise SchemaError(
            f"missing required column(s) {', '.join(repr(m) for m in missing)}; a segments table "
            f"needs {', '.join(REQUIRED)} (SPEC §1): add them, or use `arrowdedup extract` to "
            "build the table from documents"
        )
    schema = frame.schema
    for col in ("doc_id", "segment_id", "segment_type", "language", "content_hash", "doc_type"):
        # An all-null optional column (language, doc_type) may arrive typed as Null.
        all_null_ok = col in ("language", "doc_type") and schema.get(col) == pl.Null
        if col in schema and not isinstance(schema[col], _STRINGISH) and not all_null_ok:
            raise SchemaError(
                f"column {col!r} has type {schema[col]}, expected a string; "
                f"cast it with pl.col({col!r}).cast(pl.String)"
            )
    if not isinstance(schema["text"], pl.String):
        raise SchemaError(
            f"column 'text' has type {schema['text']}, expected UTF-8 strings; decode it first "
            "(e.g. pl.col('text').cast(pl.String))"
        )
    if not schema["position"].is_integer():
        raise SchemaError(
            f"column 'position' has type {schema['position']}, expected an integer type; "
            "cast it with pl.col('position').cast(pl.Int32)"
        )
    if "content_hash" in schema and frame.get_column("content_hash").null_count():
        rows = np.flatnonzero(frame.get_column("content_hash").is_null().to_numpy())
        raise column_error("content_hash", "null values", rows,
                      "give every row a hash, or drop the column to let arrowdedup compute "
                      "XXH64 of the text")
    for col in REQUIRED:
        nulls = frame.get_column(col).is_null()
        if nulls.any():
            raise column_error(col, "null values", np.flatnonzero(nulls.to_numpy()),
                          f"every segment needs a {col}; fill or drop those rows")
    ids = frame.get_column("segment_id")
    # Distinct hashes prove distinct ids at half the cost of counting the strings.
    if ids.hash().n_unique() != frame.height and ids.n_unique() != frame.height:
        dup = ids.is_duplicated()
        rows = np.flatnonzero(dup.to_numpy())
        examples = ids.gather(rows[:3]).to_list()
        raise column_error("segment_id", f"duplicate ids (e.g. {examples})", rows,
                      "segment_id must be unique in the table; make the ids unique, e.g. "
                      "'{doc_id}#{position}'")
    if "salience" in schema:
        dtype = schema["salience"]
        if not dtype.is_numeric():
            raise SchemaError(
                f"column 'salience' has type {dtype}, expected float32 or float64 in [0, 1]; "
                "cast it with pl.col('salience').cast(pl.Float32)"
            )
        column = frame.get_column("salience").cast(pl.Float64)
        s = column.fill_null(0.0).to_numpy()
        bad = np.isnan(s) | (s < 0.0) | (s > 1.0)
        if bad.any():
            raise column_error("salience", "values outside [0, 1] or NaN", np.flatnonzero(bad),
                          "salience must lie in [0, 1]; rescale it or drop the column to let "
                          "the default scorer compute it")
    # raises on mixed or zero dimension, non-numeric values, NaN, inf
    embeddings = embeddings_from(frame) if "embedding" in schema else None
    if max_segments_per_document is not None and frame.height:
        counts = frame.group_by("doc_id").len().filter(pl.col("len") > max_segments_per_document)
        if counts.height:
            worst = counts.sort(["len", "doc_id"], descending=[True, False]).row(0)
            raise SchemaError(
                f"document {worst[0]!r} has {worst[1]} segments, more than "
                f"Ingestion.MaxSegmentsPerDocument = {max_segments_per_document} "
                f"({counts.height} document(s) over the limit); raise the limit in the config "
                "or split the document"
            )
    return embeddings


__all__ = ["REQUIRED", "Embeddings", "SegmentsInput", "dataset_segments", "embeddings_from",
           "is_dataset", "read_segments", "read_table_file", "validate"]
