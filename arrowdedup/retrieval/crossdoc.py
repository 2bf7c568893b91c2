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

import numpy as np
import polars as pl
import pyarrow as pa

from ..arrays.vectors import embedding_matrix, language_codes
from ..config import DedupConfig, resolve_config
from ..dedup.kernels import effective_threshold, no_facts
from ..errors import SchemaError, first_rows
from ..facts.tables import FACT_COLUMN
from .crossdoc_jit import dedupe_rows
from .ranked_lists import fact_arrays

_DEFAULT = DedupConfig()  # frozen: safe to share, and validating it per call costs ~0.1 ms
class NoEmbeddingsWarning(UserWarning):
    """``dedupe_ranked`` got results none of which has a usable embedding: nothing is deduped."""


class NoFactsWarning(UserWarning):
    """``dedupe_ranked`` got results with neither ``text`` nor ``fact_signature``: its
    decisions are cosine-only (the fact guard has nothing to read)."""


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


_NO_IDS = pl.Series("displaced_ids", [[]], dtype=pl.List(pl.String))


def _no_ids(ids: pl.Series, n: int) -> pl.Series:
    """``n`` empty ``displaced_ids`` lists of the ids' type."""
    empty = _NO_IDS if ids.dtype == pl.String else \
        pl.Series("displaced_ids", [[]], dtype=pl.List(ids.dtype))
    return empty.new_from_index(0, n)
# Polars keeps strings as views; exporting and importing them in that form copies nothing.
_VIEWS = pl.CompatLevel.newest()


def dedupe_ranked(results: pl.DataFrame | pl.LazyFrame | pa.Table | pa.RecordBatch,
                  config: DedupConfig | None = None) -> pl.DataFrame:
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
    columns = frame.columns
    for col in ("segment_id", "embedding"):
        if col not in columns:
            raise SchemaError(
                f"dedupe_ranked needs a {col!r} column (have: {', '.join(columns)}); "
                "add it to the ranked results (embedding may be null per row)"
            )
    matrix, present = embedding_matrix(frame)
    if cfg.retrieval.fact_guard and FACT_COLUMN not in columns and "text" not in columns:
        warnings.warn(
            "dedupe_ranked: the results have neither a 'text' nor a 'fact_signature' "
            "column, so duplicates are decided by cosine alone (the fact guard is off); "
            "return the texts with the results",
            NoFactsWarning, stacklevel=2,
        )
    # All per-row work is one Numba call; what remains is as few Polars calls as possible,
    # because each costs microseconds of Python even on 100 rows. Columns are gathered one
    # Series at a time: a DataFrame gather hands the work to Polars' thread pool, which costs
    # more than it saves on 100 rows.
    lang = language_codes(frame)
    threshold = effective_threshold(cfg.retrieval.similarity_threshold)
    stored = cfg.retrieval.fact_guard and FACT_COLUMN in columns
    # A stored signature costs a few microseconds to read: read it now and scan once. Texts
    # cost a tokenizer pass: scan without the guard first, and read them only when cosine
    # found duplicates (a list without any pays nothing; the guard can only keep more rows).
    facts_now = fact_arrays(frame) if stored else None
    nbad, nusable, order, offsets, nkept = dedupe_rows(
        matrix, present, lang, threshold,
        *(facts_now if facts_now is not None else no_facts(frame.height)), stored)
    if not stored and nkept < order.shape[0] and nbad == 0 and cfg.retrieval.fact_guard:
        guard = fact_arrays(frame)
        if guard is not None:
            nbad, nusable, order, offsets, nkept = dedupe_rows(
                matrix, present, lang, threshold, *guard, True)
    if nbad:
        bad = np.flatnonzero(~np.isfinite(np.asarray(matrix, dtype=np.float64).sum(axis=1)))
        raise SchemaError(
            f"column 'embedding': NaN or infinite values at rows {first_rows(bad)}; "
            "embeddings must be finite: re-embed those results or set them to null"
        )
    if nusable == 0 and frame.height:
        warnings.warn(
            f"dedupe_ranked: none of the {frame.height} results has a usable embedding, so no "
            "cross-document duplicate can be found and every result is kept; return the "
            "embeddings from your vector store",
            NoEmbeddingsWarning, stacklevel=2,
        )
    kept_cols = frame.get_columns()
    if "displaced_ids" in columns:
        kept_cols = [col for col in kept_cols if col.name != "displaced_ids"]
    ids = frame.get_column("segment_id")
    if nkept == order.shape[0]:
        lists = _no_ids(ids, nkept)
    else:
        # The plan's order lists the kept rows first, then the skipped ones grouped by the
        # kept row they repeat, so the skipped ids in that order are the lists' flat values.
        index = pl.Series(order)
        lists = pl.Series("displaced_ids", pa.LargeListArray.from_arrays(
            pa.array(offsets), ids[index.slice(nkept)].to_arrow(compat_level=_VIEWS)))
        head = index.slice(0, nkept)
        kept_cols = [col[head] for col in kept_cols]
    out = kept_cols[0].to_frame()
    out.hstack([*kept_cols[1:], lists], in_place=True)
    return out
