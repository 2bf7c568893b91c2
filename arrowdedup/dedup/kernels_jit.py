"""The jitted greedy kernels of :mod:`arrowdedup.dedup.kernels` (imported only when an input is too
large for the NumPy twin, :func:`arrowdedup.dedup.kernels.greedy_numpy`).
"""

from __future__ import annotations

import numpy as np

from ..facts.conflict_jit import conflict
from ..jit.intrinsics_jit import prefetch_row
from ..jit.runtime import numba
from .types import DROPPED_EXACT, FILTERED, KEPT, MERGED_NEAR, KernelPlan, Outputs


@numba.njit(inline="always")
def filtered_or_exact(r: int, p: KernelPlan, sel_of_class: np.ndarray, out: Outputs) -> bool:
    """SPEC §2 steps 1 and 3 for row ``r``: the noise filter, then an exact copy of a selected
    segment. Records the decision and returns True when one of them applies. Shared by every
    kernel so the exact and LSH paths cannot drift apart."""
    if p.filtered[r]:
        out.action[r] = FILTERED
        return True
    s = sel_of_class[p.hash_class[r]]
    if s >= 0:
        out.action[r] = DROPPED_EXACT
        out.rep[r] = s
        return True
    return False


@numba.njit(inline="always")
def guard_refuses(r: int, s: int, p: KernelPlan, out: Outputs) -> bool:
    """SPEC §2 step 4's fact guard for row ``r`` against selected row ``s``, which passed the
    cosine test: True (and the first refusal recorded) when ``s`` does not cover ``r``."""
    if not p.guard:
        return False
    k = conflict(p.fact_offsets, p.fact_values, p.fact_modes, r, s)
    if k == 0:
        return False
    if out.refused[r] < 0:
        out.refused[r] = s
        out.reason[r] = k
    return True


@numba.njit(nogil=True, cache=True, fastmath=True)
def _scan_group(rows: np.ndarray, p: KernelPlan, sel_of_class: np.ndarray, out: Outputs
                ) -> None:
    m = rows.shape[0]
    d = p.matrix.shape[1]
    # Unit vectors of the selected segments, contiguous, in selection order.
    buffer = np.empty((m, d), dtype=np.float32)
    buffer_rows = np.empty(m, dtype=np.int64)
    cand = np.empty(d, dtype=np.float32)
    thr = np.float32(p.threshold)
    nsel = 0
    if m > 0:
        prefetch_row(p.matrix, rows[0])
    for i in range(m):
        r = rows[i]
        # The rows are visited in group order, scattered over the matrix: fetch the next
        # candidate's row while this one is compared (see _intrinsics_jit).
        if i + 1 < m:
            prefetch_row(p.matrix, rows[i + 1])
        if filtered_or_exact(r, p, sel_of_class, out):
            continue
        c = p.hash_class[r]
        if p.usable[r]:
            scale = p.inv_norm[r]
            for k in range(d):
                cand[k] = p.matrix[r, k] * scale
            merged = False
            for j in range(nsel):
                acc = np.float32(0.0)
                for k in range(d):
                    acc += buffer[j, k] * cand[k]
                if acc >= thr:
                    if not guard_refuses(r, buffer_rows[j], p, out):
                        out.action[r] = MERGED_NEAR
                        out.rep[r] = buffer_rows[j]
                        out.sim[r] = acc
                        merged = True
                        break
                    if p.lone[r]:
                        break  # its first refusal is recorded, and no other row covers it
            if merged:
                continue
            for k in range(d):
                buffer[nsel, k] = cand[k]
            buffer_rows[nsel] = r
            nsel += 1
        out.action[r] = KEPT
        sel_of_class[c] = r


@numba.njit(nogil=True, cache=True, parallel=True)
def greedy_numba(p: KernelPlan, groups: np.ndarray, out: Outputs) -> None:
    """Scan the groups listed in ``groups`` in parallel, writing into ``out``."""
    sel_of_class = np.full(p.n_classes, -1, dtype=np.int64)
    for gi in numba.prange(groups.shape[0]):
        g = groups[gi]
        _scan_group(p.order[p.offsets[g] : p.offsets[g + 1]], p, sel_of_class, out)


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
