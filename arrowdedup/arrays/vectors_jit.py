"""The Numba row pass of :mod:`arrowdedup.arrays.vectors` (imported only for large matrices)."""

from __future__ import annotations

import numpy as np

from ..jit.runtime import numba


@numba.njit(nogil=True, cache=True, parallel=True, error_model="numpy",
            fastmath={"reassoc", "contract"})
def row_stats_numba(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: all values finite, and the squared norm, in one pass over the matrix.

    NaN and ±inf propagate into the float64 sum of squares (finite float32 values cannot
    overflow it), so one reduction answers both questions.
    """
    n, d = matrix.shape
    finite = np.ones(n, dtype=np.bool_)
    sq = np.zeros(n, dtype=np.float64)
    for r in numba.prange(n):
        acc = 0.0
        for k in range(d):
            v = np.float64(matrix[r, k])
            acc += v * v
        sq[r] = acc
        finite[r] = np.isfinite(acc)
    return finite, sq


@numba.njit(nogil=True, cache=True, parallel=True)
def gather_rows_numba(matrix: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    """``out[:] = matrix[rows]`` with the rows copied in parallel, so the page faults of a
    fresh ``out`` are taken by every thread instead of one."""
    d = matrix.shape[1]
    for i in numba.prange(rows.shape[0]):
        r = rows[i]
        for k in range(d):
            out[i, k] = matrix[r, k]
