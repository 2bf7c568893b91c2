"""The Numba row pass of :mod:`arrowdedup.vectors` (imported only for large matrices)."""

from __future__ import annotations

import numba
import numpy as np


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
