"""BLAS-blocked greedy kernel of SPEC section 2 for one large group (≳ 1,000 segments).

The Numba scan of :mod:`arrowdedup.dedup.kernels` compares each candidate with the selected set one
dot product at a time. For a large group that is memory-bound; here a *block* of ``block``
consecutive candidates (in greedy order) is compared with the vectors selected before the block
by one matrix product per ``chunk`` selected vectors (a BLAS GEMM), then the greedy scan runs
inside the block, resolving in-block pairs with the block's own Gram matrix.

Same decisions as the Numba kernel: the GEMM is only a *screen*. Every pair it flags with a
cosine ≥ ``threshold - SCREEN_MARGIN`` is re-computed by :func:`_dot`, a fixed-order Numba dot
product of the same unit vectors the Numba kernel builds, and only that value decides. BLAS
rounding (which may depend on its thread count and blocking) moves a float32 cosine of unit
vectors by far less than the margin, so neither the BLAS nor the Numba thread count can change
a decision, a representative or a reported similarity.

Memory, for one group of ``m`` rows with dimension ``d``: the selected unit vectors
(at most ``m_usable × d`` float32, i.e. at most one more copy of the group's embeddings) plus
the block buffers — candidates ``block × d``, screen ``block × chunk`` and Gram ``block × block``
floats — plus O(m) integers. The similarity work never holds more than
O(block × selected) floats, and with the default ``chunk`` only ``block × chunk``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from ..jit.runtime import numba
from .kernels_jit import filtered_or_exact, guard_refuses
from .types import KEPT, MERGED_NEAR, KernelPlan, Outputs

BLOCK = 1024
CHUNK = 4096
# Far above the float32 rounding error of a d ≤ 4096 dot product of unit vectors (~1e-5 worst
# case), so the screen never hides a pair that the exact dot would accept.
SCREEN_MARGIN = 1e-3
# first_hit of a candidate: the index of its representative among the selected rows, or one
# of these (LONE: refused by a selected row and by every other row of its group, so it is
# kept whatever the later chunks hold).
NO_HIT = -1
LONE = -2


@numba.njit(nogil=True, cache=True, fastmath=True, inline="always")
def _dot(a: np.ndarray, b: np.ndarray) -> np.float32:
    acc = np.float32(0.0)
    for k in range(a.shape[0]):
        acc += a[k] * b[k]
    return acc


@numba.njit(nogil=True, cache=True)
def _first_hits(
    screen: np.ndarray,
    pending: np.ndarray,
    cand: np.ndarray,
    crow: np.ndarray,
    selected: np.ndarray,
    sel_rows: np.ndarray,
    c0: int,
    low: float,
    first_hit: np.ndarray,
    hit_sim: np.ndarray,
    p: KernelPlan,
    out: Outputs,
) -> None:
    """For each pending candidate, the first selected vector in ``[c0, c0 + chunk)`` whose exact
    cosine reaches the threshold and whose facts cover the candidate's. Serial: it is a small
    share of the work, and a parallel region per chunk costs more than it saves on a busy
    machine."""
    thr = np.float32(p.threshold)
    lo = np.float32(low)
    width = screen.shape[1]
    for a in range(pending.shape[0]):
        q = pending[a]
        for j in range(width):
            if screen[a, j] >= lo:
                acc = _dot(cand[q], selected[c0 + j])
                if acc >= thr:
                    if not guard_refuses(crow[q], sel_rows[c0 + j], p, out):
                        first_hit[q] = c0 + j
                        hit_sim[q] = acc
                        break
                    if p.lone[crow[q]]:
                        first_hit[q] = LONE  # refused, and no other row covers it: kept
                        break


@numba.njit(nogil=True, cache=True)
def _scan_block(
    brows: np.ndarray,
    cpos: np.ndarray,
    cand: np.ndarray,
    gram: np.ndarray,
    first_hit: np.ndarray,
    hit_sim: np.ndarray,
    selected: np.ndarray,
    sel_rows: np.ndarray,
    nsel: int,
    low: float,
    sel_of_class: np.ndarray,
    p: KernelPlan,
    out: Outputs,
) -> int:
    """The greedy scan of one block, in order; returns the new selected count."""
    thr = np.float32(p.threshold)
    lo = np.float32(low)
    nsel0 = nsel
    inblock = np.empty(brows.shape[0], dtype=np.int64)
    nin = 0
    for t in range(brows.shape[0]):
        r = brows[t]
        if filtered_or_exact(r, p, sel_of_class, out):
            # It became an exact copy inside this block, after the screen looked at it: a
            # refusal the screen recorded explains nothing (the Numba scan never records one).
            out.refused[r] = -1
            out.reason[r] = 0
            continue
        c = p.hash_class[r]
        if p.usable[r]:
            # sel_of_class only grows, so a row that is no exact duplicate now was none at the
            # start of the block and has a candidate slot.
            q = cpos[t]
            if first_hit[q] >= 0:
                out.action[r] = MERGED_NEAR
                out.rep[r] = sel_rows[first_hit[q]]
                out.sim[r] = hit_sim[q]
                continue
            merged = False
            for k in range(nin if first_hit[q] != LONE else 0):
                pq = inblock[k]
                if gram[q, pq] >= lo:
                    acc = _dot(cand[q], cand[pq])
                    if acc >= thr:
                        if not guard_refuses(r, sel_rows[nsel0 + k], p, out):
                            out.action[r] = MERGED_NEAR
                            out.rep[r] = sel_rows[nsel0 + k]
                            out.sim[r] = acc
                            merged = True
                            break
                        if p.lone[r]:
                            break
            if merged:
                continue
            selected[nsel, :] = cand[q]
            sel_rows[nsel] = r
            nsel += 1
            inblock[nin] = q
            nin += 1
        out.action[r] = KEPT
        sel_of_class[c] = r
    return nsel


def greedy_blocked_group(
    rows: np.ndarray,
    p: KernelPlan,
    sel_of_class: np.ndarray,
    out: Outputs,
    *,
    block: int = BLOCK,
    chunk: int = CHUNK,
) -> None:
    """Scan one group (``rows`` in greedy order) like ``kernels._scan_group``, blocked.

    ``sel_of_class`` maps a hash class to its selected row (-1 when none) and is updated.
    """
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    m = rows.shape[0]
    matrix, inv_norm, usable = p.matrix, p.inv_norm, p.usable
    filtered, hash_class = p.filtered, p.hash_class
    d = matrix.shape[1]
    low = float(np.float32(p.threshold) - np.float32(SCREEN_MARGIN))
    capacity = int(np.count_nonzero(usable[rows] & ~filtered[rows]))
    selected = np.empty((max(capacity, 1), d), dtype=np.float32)
    sel_rows = np.empty(max(capacity, 1), dtype=np.int64)
    nsel = 0
    # One screen buffer for the whole group: a fresh GEMM output per chunk would cost more
    # in page faults than the product itself.
    screen_buf = np.empty(block * min(chunk, max(capacity, 1)), dtype=np.float32)
    for b0 in range(0, m, block):
        brows = rows[b0 : b0 + block]
        # Candidates worth screening: comparable and not already an exact duplicate.
        cmask = ~filtered[brows] & usable[brows] & (sel_of_class[hash_class[brows]] < 0)
        cidx = np.flatnonzero(cmask)
        cpos = np.full(brows.shape[0], -1, dtype=np.int64)
        cpos[cidx] = np.arange(cidx.shape[0])
        crow = np.ascontiguousarray(brows[cidx])
        # Same float32 products as the Numba kernel's unit vectors, bit for bit.
        cand = matrix[crow] * inv_norm[crow][:, None]
        first_hit = np.full(cidx.shape[0], NO_HIT, dtype=np.int64)
        hit_sim = np.zeros(cidx.shape[0], dtype=np.float32)
        pending = np.arange(cidx.shape[0], dtype=np.int64)
        for c0 in range(0, nsel, chunk):
            if pending.shape[0] == 0:
                break
            c1 = min(nsel, c0 + chunk)
            left = cand if pending.shape[0] == cand.shape[0] else cand[pending]
            screen = screen_buf[: left.shape[0] * (c1 - c0)].reshape(left.shape[0], c1 - c0)
            np.matmul(left, selected[c0:c1].T, out=screen)
            _first_hits(screen, pending, cand, crow, selected, sel_rows, c0, low, first_hit,
                        hit_sim, p, out)
            pending = pending[first_hit[pending] == NO_HIT]
        gram = cand @ cand.T
        nsel = _scan_block(brows, cpos, cand, gram, first_hit, hit_sim, selected, sel_rows, nsel,
                           low, sel_of_class, p, out)


@contextlib.contextmanager
def blas_threads(threads: int | None) -> Iterator[None]:
    """Cap the BLAS thread pool at ``threads`` (speed only: decisions never depend on it)."""
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=max(1, threads), user_api="blas"):
        yield
