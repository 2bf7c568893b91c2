"""Embeddings in one place: parsing the column, norms, unit rows and dense string codes.

Every module that reads embeddings or turns strings into integer codes takes them from here
(``schema`` validates through :func:`embeddings_from`, the store writes :func:`inverse_norms`
beside the embeddings it keeps, retrieval scores with them, ``verify``, ``salience``,
``crossdoc`` and ``calibrate`` normalise with :func:`unit_rows`).

The one pass over a large matrix (finite check and squared norms together) is a Numba kernel
(:mod:`arrowdedup.arrays.vectors_jit`), imported only for matrices of ``JIT_MIN_VALUES`` values or
more; smaller ones take the NumPy twin, so a small job loads no jitted code.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaError, first_rows

JIT_MIN_VALUES = 1 << 20
# The size of the whole input of the job running in this context (0: the call's own size).
# Kernels with a NumPy twin choose by it, so a bucket's bits never depend on the bucket count.
_INPUT_ROWS: contextvars.ContextVar[int] = contextvars.ContextVar("arrowdedup_input_rows",
                                                                  default=0)


@contextlib.contextmanager
def input_rows(n: int) -> Iterator[None]:
    """Within the block, size-dependent choices (jitted kernel or NumPy twin) are made as for
    an input of ``n`` rows."""
    token = _INPUT_ROWS.set(n)
    try:
        yield
    finally:
        _INPUT_ROWS.reset(token)


def input_rows_hint() -> int:
    return _INPUT_ROWS.get()
ALL_ROWS = np.ones(0, dtype=np.bool_)  # "every row is present": saves a mask per call


@dataclasses.dataclass(frozen=True)
class Embeddings:
    """Embeddings as one float32 matrix (zero rows where null) plus a usability mask."""

    matrix: np.ndarray  # (n, d) float32, C-contiguous
    present: np.ndarray  # bool (n,): not null
    usable: np.ndarray  # bool (n,): not null and non-zero norm
    dim: int
    sq_norm: np.ndarray | None = None  # float64 (n,): squared norms, when already computed




# The input row number of each row of the table being checked, when that table is a part of a
# larger input (a job's bucket, whose rows are spread over the input): refusals then name the
# rows as the user finds them in the input, not the rows' places inside the bucket.
_ROW_NUMBERS: contextvars.ContextVar[np.ndarray | None] = contextvars.ContextVar(
    "arrowdedup_row_numbers", default=None)


@contextlib.contextmanager
def input_row_numbers(numbers: np.ndarray | None) -> Iterator[None]:
    """Within the block, refusals report row ``i`` of the checked table as ``numbers[i]`` (the
    row's 0-based number in the input, counted across the input files in order)."""
    token = _ROW_NUMBERS.set(numbers)
    try:
        yield
    finally:
        _ROW_NUMBERS.reset(token)


def column_error(column: str, problem: str, rows: np.ndarray | Sequence[int], fix: str
                 ) -> SchemaError:
    numbers = _ROW_NUMBERS.get()
    if numbers is not None:
        rows = numbers[np.asarray(rows, dtype=np.int64)]
    return SchemaError(f"column {column!r}: {problem} (rows {first_rows(rows)}); {fix}")


def row_stats_numpy(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NumPy twin of the Numba row pass: (all values finite, squared norm) per row.

    The squares are exact in float64; their sums may differ from the Numba pass (which lets
    LLVM reassociate) in the last float64 bits, which moves a float32 inverse norm only when
    it lies within a few float64 ulps of a float32 rounding boundary (about 1e-8 of rows).
    Which pass runs depends only on the size of the whole input (``input_rows``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        sq = np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64) if matrix.size else \
            np.zeros(matrix.shape[0], dtype=np.float64)
    return np.isfinite(sq), sq


def row_stats(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: all values finite, and the squared norm (float64), in one pass."""
    rows = max(matrix.shape[0], input_rows_hint()) if matrix.ndim == 2 else matrix.shape[0]
    if rows * (matrix.shape[1] if matrix.ndim == 2 else 1) < JIT_MIN_VALUES:
        return row_stats_numpy(matrix)
    from .vectors_jit import row_stats_numba

    return row_stats_numba(matrix)


def inverse_norms(matrix: np.ndarray, sq_norm: np.ndarray | None = None) -> np.ndarray:
    """float32 ``1 / ‖row‖``, 0 for zero, null-zeroed or non-finite rows."""
    if sq_norm is None:
        finite, sq_norm = row_stats(matrix)
    else:
        finite = np.isfinite(sq_norm)
    inv = np.zeros(matrix.shape[0], dtype=np.float32)
    ok = finite & (sq_norm > 0)
    inv[ok] = (1.0 / np.sqrt(sq_norm[ok])).astype(np.float32)
    return inv


def unit_rows(matrix: np.ndarray, usable: np.ndarray | None = None,
              dtype: Any = np.float32) -> np.ndarray:
    """A copy of ``matrix`` (``dtype``, float32 by default) with unit rows; rows that are
    zero, non-finite or not ``usable`` become zero rows. float64 divides by the float64 norm."""
    m = np.asarray(matrix, dtype=dtype)
    finite, sq = row_stats(np.asarray(matrix))
    ok = finite & (sq > 0) if usable is None else finite & (sq > 0) & usable
    norms = np.sqrt(sq, where=ok, out=np.ones_like(sq)).astype(dtype)
    out = np.divide(m, norms[:, None], out=np.zeros_like(m), where=ok[:, None])
    return np.ascontiguousarray(out)


def fixed_size_values(arr: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """A zero-copy (n, d) view of a single-chunk fixed-size list of floats without nulls
    inside the values; ``None`` when that is not possible (then parse with
    :func:`embeddings_from`)."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks != 1:
            return None
        arr = arr.chunk(0)
    if not pa.types.is_fixed_size_list(arr.type) or not pa.types.is_floating(
            arr.type.value_type):
        return None
    d = arr.type.list_size
    values = arr.values.slice(arr.offset * d, len(arr) * d)
    if values.null_count or d == 0:
        return None
    try:
        flat = values.to_numpy(zero_copy_only=True)
    except pa.ArrowInvalid:
        return None
    return flat.reshape(len(arr), d)


def single_chunk(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


def without_column(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    """``frame`` without its column ``name``, the other columns as they are.

    Not ``frame.drop(name)``: on a frame whose columns are chunked differently (a new
    single-chunk column beside an input's chunks), Polars' projection rechunks every column
    first, a ~1.5 GB embedding column included, only to drop it (measured 0.6–5 s at 1M rows,
    most of it page faults of the fresh copy)."""
    return pl.DataFrame([frame.get_column(c) for c in frame.columns if c != name])


def dense_codes(series: pl.Series, *, null_code: bool = True, jit: bool = True
                ) -> tuple[np.ndarray, int]:
    """Dense int64 codes of a string column, equal exactly for equal strings (hash-based, no
    sort) and the number of codes; null gets a code of its own (the last one)."""
    codes, bound, _ = dictionary_codes(series, null_code=null_code, jit=jit)
    return codes, bound


def dictionary_codes(series: pl.Series, *, null_code: bool = True, jit: bool = True
                     ) -> tuple[np.ndarray, int, pa.Array]:
    """:func:`dense_codes` and the distinct strings they number: codes follow the order of
    first appearance, so ``dictionary[code]`` lists the values as they first occur.
    ``jit=False`` encodes every row with Arrow (the same codes, without loading the
    run-scan kernel: for a caller that runs once per process on a small column)."""
    # Encoded as Polars' string views (handed out without a copy; the default compat level
    # rebuilds a large_string column first); only the distinct values are cast back, so the
    # dictionary keeps the type it always had.
    strings = series.cast(pl.String)
    arr = single_chunk(strings.to_arrow(compat_level=pl.CompatLevel.newest()))
    runs = _run_starts(arr) if jit else None
    if runs is not None:
        # Only the first string of each run of equal strings is encoded (a document's
        # rows usually lie together): the same codes, first appearance being a run's start.
        encoded = pc.dictionary_encode(single_chunk(strings.gather(runs).to_arrow(
            compat_level=pl.CompatLevel.newest())))
        lengths = np.diff(runs, append=len(arr))
        codes = np.repeat(encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                          lengths)
    else:
        encoded = pc.dictionary_encode(arr)
        codes = None
    dictionary = encoded.dictionary
    if not pa.types.is_large_string(dictionary.type):
        dictionary = dictionary.cast(pa.large_string())
    n_values = len(dictionary)
    if codes is None:
        codes = encoded.indices.fill_null(n_values).to_numpy(zero_copy_only=False).astype(
            np.int64)
    return codes, n_values + (1 if null_code else 0), dictionary


def _run_starts(arr: pa.Array) -> np.ndarray | None:
    """Where each run of equal adjacent strings starts, for a ``string_view`` array of
    ``JIT_MIN_ROWS`` rows or more without nulls whose runs average 4 rows or more; None
    otherwise (every row is encoded then)."""
    from .hashing import JIT_MIN_ROWS, string_views

    if len(arr) < JIT_MIN_ROWS or (views := string_views(arr)) is None:
        return None
    from .hashing_jit import view_run_heads

    views_, data, bases = views
    # The first rows tell whether runs pay, before a pass over all of them (ids, hashes).
    if 4 * int(view_run_heads(views_[:16 * JIT_MIN_ROWS], data, bases).sum()) > JIT_MIN_ROWS:
        return None
    starts = np.flatnonzero(view_run_heads(views_, data, bases))
    return starts if 4 * starts.shape[0] <= len(arr) else None


def embeddings_from(frame: pl.DataFrame, column: str = "embedding") -> Embeddings | None:
    """The embedding column as a float32 matrix; ``None`` when the column is absent.

    Refuses mixed or zero dimension, non-numeric values and NaN / inf, naming the rows.
    """
    if column not in frame.columns:
        return None
    dtype = frame.schema[column]
    if not isinstance(dtype, (pl.List, pl.Array)) or not dtype.inner.is_numeric():
        raise SchemaError(
            f"column {column!r} has type {dtype}, expected a list or fixed-size list of floats; "
            "store embeddings as pl.Array(pl.Float32, d)"
        )
    arr = frame.get_column(column).to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    n = len(arr)
    present = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_fixed_size_list(arr.type):
        d = arr.type.list_size
        values = arr.values.slice(arr.offset * d, n * d)
        lengths = np.where(present, d, 0)
    else:
        if pa.types.is_list_view(arr.type) or pa.types.is_large_list_view(arr.type):
            arr = arr.cast(pa.large_list(arr.type.value_type))
        offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        lengths = np.diff(offsets)
        lengths = np.where(present, lengths, 0)
        dims = np.unique(lengths[present])
        if dims.size > 1:
            first_dim = lengths[present][0]
            rows = np.flatnonzero(present & (lengths != first_dim))
            raise column_error(column, f"mixed dimensions {dims[:5].tolist()}", rows,
                          "every embedding must have the same dimension; re-embed those "
                          "rows with one model")
        d = int(dims[0]) if dims.size else 0
        values = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        # Null list slots may still own values; keep only the non-null ranges.
        if (~present).any() and values is not None and len(values) != int(lengths.sum()):
            keep = np.zeros(len(values), dtype=bool)
            for r in np.flatnonzero(present):
                keep[offsets[r] - offsets[0]: offsets[r + 1] - offsets[0]] = True
            values = values.filter(pa.array(keep))
    if present.any() and d == 0:
        raise column_error(column, "embeddings of dimension 0", np.flatnonzero(present),
                      "an embedding needs at least one value; set those rows to null")
    if values.null_count:
        inner_null = np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        if pa.types.is_fixed_size_list(arr.type):
            bad_rows = np.flatnonzero(inner_null.reshape(n, d).any(axis=1) & present)
        else:
            bad_rows = np.flatnonzero(present)[inner_null.reshape(-1, d).any(axis=1)]
        if bad_rows.size:
            raise column_error(column, "null values inside embeddings", bad_rows,
                          "an embedding is either null as a whole or fully numeric: replace "
                          "those vectors")
        values = values.fill_null(0.0)
    flat = np.asarray(values.to_numpy(zero_copy_only=False))
    if d == 0:
        return Embeddings(np.zeros((n, 0), np.float32), present, np.zeros(n, bool), 0)
    # A float64 value beyond float32's range becomes inf here and is refused just below, by
    # name; numpy's overflow warning would only repeat that.
    with np.errstate(over="ignore"):
        if pa.types.is_fixed_size_list(arr.type):
            # Zero-copy when the input is float32 already; null slots are zeroed on a copy.
            matrix = np.ascontiguousarray(flat.reshape(n, d), dtype=np.float32)
            if (~present).any():
                matrix = matrix.copy()
                matrix[~present] = 0.0
        else:
            matrix = np.zeros((n, d), dtype=np.float32)
            matrix[present] = flat.reshape(-1, d)
    finite, sq_norm = row_stats(matrix)
    if not finite.all():
        raise column_error(column, "NaN or infinite values (or values that overflow float32)",
                      np.flatnonzero(~finite),
                      "embeddings must be finite; re-embed those rows or set them to null")
    usable = present & (sq_norm > 0.0)
    return Embeddings(matrix, present, usable, d, sq_norm)


# ----------------------------------------------------------------------------- ranked results


def embedding_matrix(frame: pl.DataFrame, column: str = "embedding"
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(n, d) float32 embeddings as given (zero rows where null) and the mask of present rows
    (empty when every row is present).

    Works on the Arrow buffers (a fixed-size float32 list without nulls is a free 2-D view);
    refuses mixed dimensions, naming the rows (SPEC §1). Normalisation and the NaN / infinity
    check happen in the kernel.
    """
    series = frame.get_column(column)
    dtype = series.dtype  # cheaper than frame.schema, which builds the whole schema
    if isinstance(dtype, pl.Array) and dtype.inner == pl.Float32 and not series.has_nulls():
        return series.to_numpy(), ALL_ROWS
    if not isinstance(dtype, (pl.Array, pl.List)) or not dtype.inner.is_numeric():
        raise SchemaError(
            f"column {column!r} has type {dtype}, expected a list or fixed-size list of floats; "
            "give each result its embedding as pl.Array(pl.Float32, d) (null when unknown)"
        )
    n = frame.height
    arr = single_chunk(series.to_arrow())
    present = np.ones(n, dtype=bool) if arr.null_count == 0 else \
        np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if isinstance(dtype, pl.Array):
        d = int(dtype.size)
        values = arr.values.slice(arr.offset * d, n * d)
        matrix = np.asarray(values.to_numpy(zero_copy_only=False),
                            dtype=np.float32).reshape(n, d)
    else:
        if not pa.types.is_large_list(arr.type):
            arr = arr.cast(pa.large_list(arr.type.value_type))
        offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        lengths = np.where(present, np.diff(offsets), 0)
        dims = np.unique(lengths[present])
        if dims.size > 1:
            rows = np.flatnonzero(present & (lengths != lengths[present][0]))
            raise SchemaError(
                f"column {column!r}: mixed embedding dimensions {dims[:5].tolist()} at rows "
                f"{first_rows(rows)}; every result must be embedded by one model"
            )
        d = int(dims[0]) if dims.size else 0
        flat = np.asarray(arr.values.to_numpy(zero_copy_only=False), dtype=np.float32)
        matrix = np.zeros((n, d), dtype=np.float32)
        for r in np.flatnonzero(present & (lengths > 0)):  # ~100 ranked results, not a column
            matrix[r] = flat[offsets[r] - offsets[0]: offsets[r + 1] - offsets[0]]
    if not present.all() and d:
        matrix = np.where(present[:, None], matrix, np.float32(0.0))
    return np.ascontiguousarray(matrix, dtype=np.float32), present


def language_codes(frame: pl.DataFrame) -> np.ndarray:
    """A code per language tag, equal for equal tags (null is its own code); all zero without
    the column."""
    if "language" not in frame.columns:
        return np.zeros(frame.height, dtype=np.int64)
    arr = single_chunk(frame.get_column("language").cast(pl.String).to_arrow())
    return dense_codes(pl.Series(arr))[0]
