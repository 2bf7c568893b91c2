"""Dense candidates: exact cosine over the store's memory-mapped embeddings (no ANN index, so
results are deterministic). One BLAS matrix–vector (or matrix–matrix for several queries)
product per stored embeddings file, scaled by the stored inverse norms, then a partial sort
for the top N."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError


def unit_queries(queries: np.ndarray, dim: int) -> np.ndarray:
    """(m, dim) unit float32 query vectors; refuses a wrong dimension or non-finite values."""
    q = np.asarray(queries, dtype=np.float32)
    if q.ndim == 1:
        q = q[None, :]
    if q.ndim != 2 or q.shape[1] != dim:
        raise InputError(
            f"query vector has shape {tuple(np.shape(queries))}, the store holds {dim}-d "
            f"embeddings; pass a 1-D array of length {dim} (or a text query)"
        )
    if not np.isfinite(q).all():
        raise InputError("query vector has NaN or infinite values; pass finite numbers")
    norms = np.linalg.norm(q, axis=1, keepdims=True)
    if (norms == 0).any():
        raise InputError("query vector is all zeros; it has no direction to compare with")
    return np.ascontiguousarray(q / norms, dtype=np.float32)


def cosine_scores(vectors: Any, queries: np.ndarray) -> np.ndarray:
    """(n, m) cosines of every stored vector with each unit query (zero rows score 0).

    ``vectors``: the store's :class:`~arrowdedup.store.StoredVectors` (embeddings as stored
    times their inverse norms) or a matrix of unit rows.
    """
    if hasattr(vectors, "scores"):
        return vectors.scores(queries)
    if queries.shape[0] == 1:
        return (vectors @ queries[0])[:, None]
    return vectors @ queries.T


def top_n(scores: np.ndarray, n: int, *, positive_only: bool = False,
          tie_key: np.ndarray | None = None) -> np.ndarray:
    """Row indices of the ``n`` highest scores (any order); only scores > 0 when asked.

    ``tie_key`` (one integer per row, e.g. the rank of its segment_id): rows tied at the
    boundary are taken in its order, so the choice does not depend on the row order (a store
    with deltas and one built from scratch order their rows differently)."""
    if positive_only:
        hits = np.flatnonzero(scores > 0)
        if hits.size <= n:
            return hits
        part = np.argpartition(-scores[hits], n - 1)[:n]
        return _ties(scores, hits[part], n, tie_key, hits)
    if scores.shape[0] <= n:
        return np.arange(scores.shape[0])
    return _ties(scores, np.argpartition(-scores, n - 1)[:n], n, tie_key, None)


def _ties(scores: np.ndarray, top: np.ndarray, n: int, tie_key: np.ndarray | None,
          among: np.ndarray | None) -> np.ndarray:
    if tie_key is None or top.size == 0:
        return top
    edge = scores[top].min()
    pool = np.arange(scores.shape[0]) if among is None else among
    above = pool[scores[pool] > edge]
    tied = pool[scores[pool] == edge]
    need = n - above.size
    if tied.size <= need:
        return np.concatenate([above, tied])
    return np.concatenate([above, tied[np.argsort(tie_key[tied], kind="stable")[:need]]])
