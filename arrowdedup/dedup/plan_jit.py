"""The Numba pass behind :func:`arrowdedup.dedup.ingest.make_plan` for large inputs.

It gives exactly what the Polars path gives (rows grouped by ascending group code; inside a
group salience descending, position ascending, row ascending) and, per row, a content-hash
class equal exactly for rows of one group with one hash. A class is named by the place, in
``order``, of its first row, so classes of different groups never meet. Grouping is a counting
sort (one pass, no comparison sort over the whole table); the groups are then sorted and
classified in parallel, each by one thread, so the result does not depend on the thread count.
"""

from __future__ import annotations

import numpy as np

from ..jit.runtime import numba

_INSERTION_RUN = 32
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(inline="always")
def _before(x: int, y: int, salience: np.ndarray, position: np.ndarray) -> bool:
    """Row ``x`` goes strictly before row ``y`` (ties keep row order: the sort is stable)."""
    sx, sy = salience[x], salience[y]
    if sx != sy:
        return sx > sy
    return position[x] < position[y]


@numba.njit(nogil=True, cache=True)
def group_order(groups: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows by ascending group code (codes in ``[0, n_keys)``), row order kept inside a
    group, and the offsets of the non-empty groups."""
    n = groups.shape[0]
    counts = np.zeros(n_keys + 1, dtype=np.int64)
    for i in range(n):
        counts[groups[i] + 1] += 1
    n_groups = 0
    for k in range(n_keys):
        if counts[k + 1] > 0:
            n_groups += 1
        counts[k + 1] += counts[k]
    offsets = np.empty(n_groups + 1, dtype=np.int64)
    j = 0
    for k in range(n_keys):
        if counts[k + 1] > counts[k]:
            offsets[j] = counts[k]
            j += 1
    offsets[n_groups] = n
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        k = groups[i]
        order[counts[k]] = i
        counts[k] += 1
    return order, offsets


@numba.njit(nogil=True)
def _sort_group(rows: np.ndarray, scratch: np.ndarray, salience: np.ndarray,
                position: np.ndarray) -> None:
    """Stable sort of ``rows`` (one group, ascending row order) in place: insertion-sorted
    runs, then bottom-up merges through ``scratch`` (same length)."""
    m = rows.shape[0]
    for lo in range(0, m, _INSERTION_RUN):
        hi = min(lo + _INSERTION_RUN, m)
        for i in range(lo + 1, hi):
            cur = rows[i]
            j = i
            while j > lo and _before(cur, rows[j - 1], salience, position):
                rows[j] = rows[j - 1]
                j -= 1
            rows[j] = cur
    width = _INSERTION_RUN
    src, dst = rows, scratch
    in_scratch = False
    while width < m:
        for lo in range(0, m, 2 * width):
            mid = min(lo + width, m)
            hi = min(lo + 2 * width, m)
            a, b, k = lo, mid, lo
            while a < mid and b < hi:
                # Take from the right run only when strictly before: stability.
                if _before(src[b], src[a], salience, position):
                    dst[k] = src[b]
                    b += 1
                else:
                    dst[k] = src[a]
                    a += 1
                k += 1
            while a < mid:
                dst[k] = src[a]
                a += 1
                k += 1
            while b < hi:
                dst[k] = src[b]
                b += 1
                k += 1
        src, dst = dst, src
        in_scratch = not in_scratch
        width *= 2
    if in_scratch:
        rows[:] = scratch


@numba.njit(nogil=True)
def _classify_group(rows: np.ndarray, start: int, hashes: np.ndarray,
                    hash_class: np.ndarray) -> None:
    """``hash_class[r]`` = the place in ``order`` of the first row of the group (in group
    order) with ``r``'s hash: one pass in group order through an open-addressing table of
    the group's distinct hashes (at most half full), whose first row names the class."""
    m = rows.shape[0]
    cap = 16
    while cap < 2 * m:
        cap *= 2
    mask = np.uint64(cap - 1)
    keys = np.empty(cap, dtype=np.int64)
    cls = np.full(cap, -1, dtype=np.int64)
    for i in range(m):
        h = hashes[rows[i]]
        # Fibonacci hashing: the top bits of the product spread any key set (dense codes
        # as well as XXH64 values).
        slot = ((np.uint64(h) * _GOLDEN) >> np.uint64(32)) & mask
        while True:
            c = cls[slot]
            if c < 0:
                keys[slot] = h
                cls[slot] = start + i
                hash_class[rows[i]] = start + i
                break
            if keys[slot] == h:
                hash_class[rows[i]] = c
                break
            slot = (slot + np.uint64(1)) & mask


@numba.njit(nogil=True, cache=True, parallel=True)
def sort_and_classify(order: np.ndarray, offsets: np.ndarray, salience: np.ndarray,
                      position: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Sort every group of ``order`` in place and return the per-row hash classes."""
    hash_class = np.empty(order.shape[0], dtype=np.int64)
    for g in numba.prange(offsets.shape[0] - 1):
        a, b = offsets[g], offsets[g + 1]
        rows = order[a:b]
        _sort_group(rows, np.empty(b - a, dtype=np.int64), salience, position)
        _classify_group(rows, a, hashes, hash_class)
    return hash_class


@numba.njit(nogil=True, cache=True)
def document_counts(codes: np.ndarray, action: np.ndarray, boost: np.ndarray,
                    kept: np.ndarray, n_docs: int, n_actions: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per document: rows per action (n_docs × n_actions), and the sum and maximum of the
    kept rows' boosts (0 without kept rows), in one pass in row order (the sums add in the
    order ``np.bincount`` does)."""
    counts = np.zeros((n_docs, n_actions), dtype=np.int64)
    boost_sum = np.zeros(n_docs, dtype=np.float64)
    boost_max = np.zeros(n_docs, dtype=np.float64)
    for r in range(codes.shape[0]):
        d = codes[r]
        counts[d, action[r]] += 1
        # Without a branch on ``kept`` (half the rows, unpredictable): a removed row adds
        # +0.0, which changes no sum, and boosts are >= 0, so it raises no maximum.
        b = boost[r] if kept[r] else 0.0
        boost_sum[d] += b
        boost_max[d] = max(boost_max[d], b)
    return counts, boost_sum, boost_max
