"""Cross-document dedup after ranking (SPEC §4.5): ``dedupe_ranked``.

Walk the ranked list best first; a result whose cosine to an already selected result is
``>= Retrieval.SimilarityThreshold`` is skipped and attributed to the *first* such selected
result in rank order; a result without a usable embedding is kept without comparison; results
of different ``language`` are never compared. The output is a subsequence of the input.

The greedy scan is a small single-threaded Numba kernel (``greedy_ranked``) that computes only
the cosines it needs; its pure-NumPy twin (``greedy_ranked_numpy``, over a Gram matrix) is the
oracle the tests hold it to.
"""

from __future__ import annotations

import warnings
from typing import Any

import numba
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ..config import DedupConfig, resolve_config
from ..errors import SchemaError, first_rows
from ..kernels import effective_threshold

_DEFAULT = DedupConfig()  # frozen: safe to share, and validating it per call costs ~0.1 ms


class NoEmbeddingsWarning(UserWarning):
    """``dedupe_ranked`` got results none of which has a usable embedding: nothing is deduped."""


@numba.njit(nogil=True, cache=True, fastmath=True)
def greedy_ranked(unit: np.ndarray, usable: np.ndarray, lang: np.ndarray,
                  threshold: float) -> np.ndarray:
    """For each row in rank order: -1 if kept, else the kept row it repeats (first in rank).

    Computes only the dot products the greedy scan needs (row against the selected rows), in
    one thread: for ~100 rows this beats a BLAS Gram matrix, whose thread pool costs
    milliseconds on a busy machine.
    """
    n, d = unit.shape
    rep = np.full(n, -1, dtype=np.int64)
    selected = np.empty(n, dtype=np.int64)
    nsel = 0
    thr = np.float32(threshold)
    for i in range(n):
        if not usable[i]:
            continue
        for s in range(nsel):
            j = selected[s]
            if lang[j] != lang[i]:
                continue
            acc = np.float32(0.0)
            for t in range(d):
                acc += unit[i, t] * unit[j, t]
            if acc >= thr:
                rep[i] = j
                break
        if rep[i] < 0:
            selected[nsel] = i
            nsel += 1
    return rep


def greedy_ranked_numpy(unit: np.ndarray, usable: np.ndarray, lang: np.ndarray,
                        threshold: float) -> np.ndarray:
    """The NumPy twin of :func:`greedy_ranked` (a Gram matrix, one vectorised test per row)."""
    n = unit.shape[0]
    gram = unit @ unit.T
    rep = np.full(n, -1, dtype=np.int64)
    selected: list[int] = []
    thr = np.float32(threshold)
    for i in range(n):
        if usable[i] and selected:
            sel = np.asarray(selected, dtype=np.int64)
            hit = (lang[sel] == lang[i]) & (gram[i, sel] >= thr)
            if hit.any():
                rep[i] = sel[int(np.argmax(hit))]
                continue
        if usable[i]:
            selected.append(i)
    return rep


def duplicate_of(unit: np.ndarray, usable: np.ndarray, lang: np.ndarray,
                 threshold: float) -> np.ndarray:
    """Per row of a ranked list: -1 when kept, else the row index of the kept row it repeats.

    ``threshold`` is the configured one; the float32 slack of ``kernels.effective_threshold``
    is applied here, so identical directions count as duplicates at 1.0.
    """
    return greedy_ranked(  # type: ignore[no-any-return]
        np.ascontiguousarray(unit, dtype=np.float32),
        np.ascontiguousarray(usable, dtype=np.bool_),
        np.ascontiguousarray(lang, dtype=np.int64), effective_threshold(threshold))


def _as_frame(results: Any) -> pl.DataFrame:
    if isinstance(results, pl.DataFrame):
        return results
    if isinstance(results, pl.LazyFrame):
        return results.collect()
    if isinstance(results, (pa.Table, pa.RecordBatch)):
        frame = pl.from_arrow(results)
        assert isinstance(frame, pl.DataFrame)
        return frame
    raise SchemaError(
        f"dedupe_ranked takes a Polars DataFrame or an Arrow table, got {type(results).__name__}; "
        "convert the results with pl.DataFrame(...) first"
    )


def _single_chunk(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


def unit_matrix(frame: pl.DataFrame, column: str = "embedding") -> tuple[np.ndarray, np.ndarray]:
    """(n, d) unit float32 vectors and the mask of usable rows (present, finite, non-zero).

    Works on the Arrow buffers (a fixed-size list is read without a copy); refuses NaN /
    infinite values and mixed dimensions, naming the rows (SPEC §1).
    """
    n = frame.height
    series = frame.get_column(column)
    dtype = series.dtype  # cheaper than frame.schema, which builds the whole schema
    if not isinstance(dtype, (pl.Array, pl.List)) or not dtype.inner.is_numeric():
        raise SchemaError(
            f"column {column!r} has type {dtype}, expected a list or fixed-size list of floats; "
            "give each result its embedding as pl.Array(pl.Float32, d) (null when unknown)"
        )
    if isinstance(dtype, pl.Array) and series.null_count() == 0 and dtype.inner == pl.Float32:
        # The common case (a float32 fixed-size list without nulls) is a free 2-D view.
        return _normalise(np.asarray(series.to_numpy()), np.ones(n, dtype=bool), column)
    arr = _single_chunk(series.to_arrow())
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
    if d == 0:
        return np.zeros((n, 0), np.float32), np.zeros(n, dtype=bool)
    if not present.all():
        matrix = np.where(present[:, None], matrix, np.float32(0.0))
    return _normalise(matrix, present, column)


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _unit_rows(matrix: np.ndarray, present: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One pass: unit float32 rows, the usable mask and the finite mask (NaN / inf anywhere in
    a row make its float64 sum of squares non-finite)."""
    n, d = matrix.shape
    unit = np.zeros((n, d), dtype=np.float32)
    usable = np.zeros(n, dtype=np.bool_)
    finite = np.ones(n, dtype=np.bool_)
    for i in range(n):
        acc = 0.0
        for t in range(d):
            v = np.float64(matrix[i, t])
            acc += v * v
        if not np.isfinite(acc):
            finite[i] = False
        elif present[i] and acc > 0.0:
            usable[i] = True
            inv = np.float32(1.0 / np.sqrt(acc))
            for t in range(d):
                unit[i, t] = np.float32(matrix[i, t]) * inv
    return unit, usable, finite


def _normalise(matrix: np.ndarray, present: np.ndarray,
               column: str) -> tuple[np.ndarray, np.ndarray]:
    """Unit rows and the usable mask; NaN / inf anywhere in a row makes its norm non-finite."""
    n = matrix.shape[0]
    if matrix.shape[1] == 0:
        return np.zeros((n, 0), np.float32), np.zeros(n, dtype=bool)
    unit, usable, finite = _unit_rows(matrix, np.ascontiguousarray(present, dtype=np.bool_))
    if not finite.all():
        raise SchemaError(
            f"column {column!r}: NaN or infinite values at rows "
            f"{first_rows(np.flatnonzero(~finite))}; "
            "embeddings must be finite: re-embed those results or set them to null"
        )
    return unit, usable


def language_codes(frame: pl.DataFrame) -> np.ndarray:
    """A code per language tag, equal for equal tags (null is its own code); all zero without
    the column."""
    if "language" not in frame.columns:
        return np.zeros(frame.height, dtype=np.int64)
    arr = _single_chunk(frame.get_column("language").cast(pl.String).to_arrow())
    encoded = pc.dictionary_encode(arr, null_encoding="encode")
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


_EMPTY_IDS = pa.array([], type=pa.large_string())


def displaced_lists(ids: pa.Array | None, rep: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Kept row indices and, aligned with them, the list of ids each one displaced.

    ``ids`` may be ``None`` when no row was skipped (the ids are then not needed).
    """
    n = rep.shape[0]
    kept = np.flatnonzero(rep < 0)
    skipped = np.flatnonzero(rep >= 0)
    if skipped.size == 0:
        return kept, pa.LargeListArray.from_arrays(
            pa.array(np.zeros(kept.size + 1, dtype=np.int64)), _EMPTY_IDS)
    assert ids is not None
    # Position of each kept row in the output, so skipped rows can be bucketed by their rep.
    slot = np.full(n, -1, dtype=np.int64)
    slot[kept] = np.arange(kept.size)
    owner = slot[rep[skipped]]
    order = np.argsort(owner, kind="stable")  # stable: displaced ids stay in rank order
    counts = np.bincount(owner, minlength=kept.size) if skipped.size else \
        np.zeros(kept.size, dtype=np.int64)
    offsets = np.zeros(kept.size + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    values = ids.take(pa.array(skipped[order], type=pa.int64())) if skipped.size else \
        pa.array([], type=ids.type)
    return kept, pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values)


def dedupe_ranked(results: Any, config: DedupConfig | None = None) -> pl.DataFrame:
    """Drop results that repeat a better-ranked one (cosine ``>=`` the retrieval threshold).

    ``results`` (Polars or Arrow) is sorted best first and has ``segment_id`` and ``embedding``
    (nullable) columns, optionally ``language``. Returns the kept rows in the same order plus a
    ``displaced_ids`` list column (ids of the skipped rows attributed to each kept row).
    ``Retrieval.Enabled = false`` returns the input unchanged. Rows without a usable embedding
    are kept; when *no* row has one, a :class:`NoEmbeddingsWarning` says nothing was deduped.
    """
    cfg = _DEFAULT if config is None else resolve_config(config)
    frame = _as_frame(results)
    if not cfg.retrieval.enabled:
        return frame
    for col in ("segment_id", "embedding"):
        if col not in frame.columns:
            raise SchemaError(
                f"dedupe_ranked needs a {col!r} column (have: {', '.join(frame.columns)}); "
                "add it to the ranked results (embedding may be null per row)"
            )
    unit, usable = unit_matrix(frame)
    if frame.height and not usable.any():
        warnings.warn(
            f"dedupe_ranked: none of the {frame.height} results has a usable embedding, so no "
            "cross-document duplicate can be found and every result is kept; return the "
            "embeddings from your vector store",
            NoEmbeddingsWarning, stacklevel=2,
        )
    rep = duplicate_of(unit, usable, language_codes(frame), cfg.retrieval.similarity_threshold)
    ids = _single_chunk(frame.get_column("segment_id").to_arrow()) if (rep >= 0).any() else None
    kept, lists = displaced_lists(ids, rep)
    out = frame.drop("displaced_ids") if "displaced_ids" in frame.columns else frame
    if kept.size != frame.height:
        out = out[kept]
    out = out.clone() if out is frame else out  # insert_column works in place
    out.insert_column(out.width, pl.Series("displaced_ids", lists))
    return out
