"""The greedy dedup kernels of SPEC section 2, over the offsets of a whole table.

Every kernel takes and returns NumPy arrays only:

- ``order``: row indices, grouped (one group after another) and, inside a group, sorted by
  salience descending then position ascending;
- ``offsets``: ``order[offsets[g]:offsets[g + 1]]`` are the rows of group ``g``;
- ``matrix``: (n, d) float32 embeddings in input row order (never moved: the kernel reads
  rows through ``order``), ``inv_norm`` their inverse norms (0 where unusable), ``usable``;
- ``hash_class``: a dense id per row, equal for rows of one group with one content hash;
- ``filtered``: rows removed by the noise filter before the pass.

They return ``action`` (int8, codes below), ``rep`` (representative row or -1) and ``sim``
(cosine to the representative for near merges, else NaN). The Numba kernel runs groups in
parallel; each group is scanned by one thread in a fixed order, so the output does not depend
on the thread count. ``greedy_numpy`` is the pure-NumPy twin, tested to agree.
"""

from __future__ import annotations

import numba
import numpy as np

KEPT = np.int8(0)
MERGED_NEAR = np.int8(1)
DROPPED_EXACT = np.int8(2)
FILTERED = np.int8(3)
ACTION_NAMES = ("kept", "merged_near", "dropped_exact", "filtered_low_salience")

# Float32 cosines of one direction with itself land a few ULPs below 1 (0.99999994 and, for
# long vectors summed in order, ~1e-6 below). Comparing against ``threshold - SLACK`` makes
# threshold 1.0 merge identical directions; the slack is inside the 1e-5 band where the spec
# lets kernels with different summation orders disagree.
COSINE_SLACK = 4e-6


def effective_threshold(threshold: float) -> float:
    """The float32 comparison bound every kernel uses for ``cosine >= threshold``."""
    return float(np.float32(threshold - COSINE_SLACK))


@numba.njit(inline="always")
def filtered_or_exact(r: int, filtered: np.ndarray, hash_class: np.ndarray,
                      sel_of_class: np.ndarray, action: np.ndarray, rep: np.ndarray) -> bool:
    """SPEC §2 steps 1 and 3 for row ``r``: the noise filter, then an exact copy of a selected
    segment. Records the decision and returns True when one of them applies. Shared by every
    kernel so the exact and LSH paths cannot drift apart."""
    if filtered[r]:
        action[r] = FILTERED
        return True
    s = sel_of_class[hash_class[r]]
    if s >= 0:
        action[r] = DROPPED_EXACT
        rep[r] = s
        return True
    return False


@numba.njit(nogil=True, cache=True, fastmath=True)
def _scan_group(
    rows: np.ndarray,
    matrix: np.ndarray,
    inv_norm: np.ndarray,
    usable: np.ndarray,
    hash_class: np.ndarray,
    filtered: np.ndarray,
    threshold: float,
    sel_of_class: np.ndarray,
    action: np.ndarray,
    rep: np.ndarray,
    sim: np.ndarray,
) -> None:
    m = rows.shape[0]
    d = matrix.shape[1]
    # Unit vectors of the selected segments, contiguous, in selection order.
    buffer = np.empty((m, d), dtype=np.float32)
    buffer_rows = np.empty(m, dtype=np.int64)
    cand = np.empty(d, dtype=np.float32)
    thr = np.float32(threshold)
    nsel = 0
    for i in range(m):
        r = rows[i]
        if filtered_or_exact(r, filtered, hash_class, sel_of_class, action, rep):
            continue
        c = hash_class[r]
        if usable[r]:
            scale = inv_norm[r]
            for k in range(d):
                cand[k] = matrix[r, k] * scale
            merged = False
            for j in range(nsel):
                acc = np.float32(0.0)
                for k in range(d):
                    acc += buffer[j, k] * cand[k]
                if acc >= thr:
                    action[r] = MERGED_NEAR
                    rep[r] = buffer_rows[j]
                    sim[r] = acc
                    merged = True
                    break
            if merged:
                continue
            for k in range(d):
                buffer[nsel, k] = cand[k]
            buffer_rows[nsel] = r
            nsel += 1
        action[r] = KEPT
        sel_of_class[c] = r


@numba.njit(nogil=True, cache=True, parallel=True)
def greedy_numba(
    order: np.ndarray,
    offsets: np.ndarray,
    groups: np.ndarray,
    matrix: np.ndarray,
    inv_norm: np.ndarray,
    usable: np.ndarray,
    hash_class: np.ndarray,
    n_classes: int,
    filtered: np.ndarray,
    threshold: float,
    action: np.ndarray,
    rep: np.ndarray,
    sim: np.ndarray,
) -> None:
    """Scan the groups listed in ``groups`` in parallel, writing into action/rep/sim."""
    sel_of_class = np.full(n_classes, -1, dtype=np.int64)
    for gi in numba.prange(groups.shape[0]):
        g = groups[gi]
        rows = order[offsets[g] : offsets[g + 1]]
        _scan_group(rows, matrix, inv_norm, usable, hash_class, filtered, threshold,
                    sel_of_class, action, rep, sim)


def new_outputs(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    action = np.zeros(n, dtype=np.int8)
    rep = np.full(n, -1, dtype=np.int64)
    sim = np.full(n, np.nan, dtype=np.float32)
    return action, rep, sim


def greedy_numpy(
    order: np.ndarray,
    offsets: np.ndarray,
    groups: np.ndarray,
    matrix: np.ndarray,
    inv_norm: np.ndarray,
    usable: np.ndarray,
    hash_class: np.ndarray,
    n_classes: int,
    filtered: np.ndarray,
    threshold: float,
    action: np.ndarray,
    rep: np.ndarray,
    sim: np.ndarray,
) -> None:
    """Pure-NumPy twin of :func:`greedy_numba` (same arguments, same decisions)."""
    thr = np.float32(threshold)
    sel_of_class = np.full(n_classes, -1, dtype=np.int64)
    for g in groups:
        rows = order[offsets[g] : offsets[g + 1]]
        selected: list[np.ndarray] = []
        selected_rows: list[int] = []
        for r in rows:
            if filtered[r]:
                action[r] = FILTERED
                continue
            c = hash_class[r]
            if sel_of_class[c] >= 0:
                action[r] = DROPPED_EXACT
                rep[r] = sel_of_class[c]
                continue
            if usable[r]:
                cand = matrix[r] * inv_norm[r]
                if selected:
                    sims = np.stack(selected) @ cand
                    hits = np.flatnonzero(sims >= thr)
                    if hits.size:
                        j = int(hits[0])
                        action[r] = MERGED_NEAR
                        rep[r] = selected_rows[j]
                        sim[r] = sims[j]
                        continue
                selected.append(cand.astype(np.float32))
                selected_rows.append(int(r))
            action[r] = KEPT
            sel_of_class[c] = r


@numba.njit(nogil=True, cache=True, parallel=True)
def inverse_norms(matrix: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """1/‖row‖ in float32 for usable rows, 0 elsewhere."""
    n, d = matrix.shape
    out = np.zeros(n, dtype=np.float32)
    for r in numba.prange(n):
        if usable[r]:
            acc = 0.0
            for k in range(d):
                v = np.float64(matrix[r, k])
                acc += v * v
            if acc > 0.0:
                out[r] = np.float32(1.0 / np.sqrt(acc))
    return out
