"""The jitted greedy scan of a ranked list (SPEC §4.5) and its NumPy twin
(:func:`greedy_ranked_numpy`, over a Gram matrix), the oracle the tests hold it to; the
kernel computes only the cosines it needs. :func:`arrowdedup.retrieval.crossdoc.dedupe_ranked`
calls it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..dedup.kernels import effective_threshold, no_facts
from ..facts.conflict_jit import conflict
from ..facts.guard import conflict_reasons
from ..jit.runtime import numba
from .ranked_lists import FactArrays, planned_lists

# Reassociation lets LLVM vectorise the dot products; no nnan / ninf, which would fold away
# the finiteness checks.
_FASTMATH = {"reassoc", "contract"}


@numba.njit(inline="always", fastmath=_FASTMATH)
def _pair_dots(a0: np.ndarray, a1: np.ndarray, matrix: np.ndarray, selected: np.ndarray,
               nsel: int, dots: np.ndarray) -> None:
    """Raw dot products of rows ``a0`` and ``a1`` with the first ``nsel`` selected rows.

    Two rows against four selected rows per pass over the dimensions: six vector loads feed
    eight multiply-adds, where one pair at a time needs two loads per multiply-add (about
    1.25x faster on 100 x 384 in an A/B; tiling for L1 gained nothing further).
    """
    d = matrix.shape[1]
    s = 0
    while s + 4 <= nsel:
        b0 = matrix[selected[s]]
        b1 = matrix[selected[s + 1]]
        b2 = matrix[selected[s + 2]]
        b3 = matrix[selected[s + 3]]
        c00 = c01 = c02 = c03 = np.float32(0.0)
        c10 = c11 = c12 = c13 = np.float32(0.0)
        for t in range(d):
            x = a0[t]
            y = a1[t]
            u = b0[t]
            c00 += x * u
            c10 += y * u
            u = b1[t]
            c01 += x * u
            c11 += y * u
            u = b2[t]
            c02 += x * u
            c12 += y * u
            u = b3[t]
            c03 += x * u
            c13 += y * u
        dots[0, s] = c00
        dots[0, s + 1] = c01
        dots[0, s + 2] = c02
        dots[0, s + 3] = c03
        dots[1, s] = c10
        dots[1, s + 1] = c11
        dots[1, s + 2] = c12
        dots[1, s + 3] = c13
        s += 4
    while s < nsel:
        b = matrix[selected[s]]
        c0 = np.float32(0.0)
        c1 = np.float32(0.0)
        for t in range(d):
            c0 += a0[t] * b[t]
            c1 += a1[t] * b[t]
        dots[0, s] = c0
        dots[1, s] = c1
        s += 1


@numba.njit(inline="always")
def _covered(f_off: np.ndarray, f_val: np.ndarray, f_mode: np.ndarray, guard: bool, row: int,
             j: int) -> bool:
    """SPEC §4 step 5's fact guard: does selected result ``j`` cover result ``row``?"""
    return (not guard) or conflict(f_off, f_val, f_mode, row, j) == 0


@numba.njit(inline="always", fastmath=_FASTMATH)
def _greedy_into(matrix: np.ndarray, inv: np.ndarray, usable: np.ndarray, lang: np.ndarray,
                 thr: np.float32, rep: np.ndarray, f_off: np.ndarray, f_val: np.ndarray,
                 f_mode: np.ndarray, guard: bool) -> None:
    """The greedy scan of SPEC §4.5, writing ``rep`` (-1 = kept, else the kept row repeated).

    ``matrix`` rows need not be unit length: the cosine is ``dot · inv[i] · inv[j]`` with
    ``inv`` the inverse norms (ones for unit rows). Rows are taken two at a time: both are
    compared with every row selected before them (:func:`_pair_dots`), then decided in rank
    order, the second also against the first when the first was selected. A row goes to the
    first selected row, in rank order, that it repeats.
    """
    n, d = matrix.shape
    selected = np.empty(n, dtype=np.int64)
    dots = np.empty((2, n), dtype=np.float32)
    nsel = 0
    for i in range(0, n, 2):
        pair = i + 1 < n
        last = i + 1 if pair else i
        if usable[i] or (pair and usable[last]):
            _pair_dots(matrix[i], matrix[last], matrix, selected, nsel, dots)
        before = nsel
        for r in range(2 if pair else 1):
            row = i + r
            rep[row] = -1
            if not usable[row]:
                continue
            li = lang[row]
            for s in range(before):
                j = selected[s]
                if lang[j] == li and dots[r, s] * (inv[row] * inv[j]) >= thr and \
                        _covered(f_off, f_val, f_mode, guard, row, j):
                    rep[row] = j
                    break
            if rep[row] < 0 and r == 1 and nsel > before and lang[i] == li:
                c = np.float32(0.0)
                for t in range(d):
                    c += matrix[i, t] * matrix[row, t]
                if c * (inv[row] * inv[i]) >= thr and \
                        _covered(f_off, f_val, f_mode, guard, row, i):
                    rep[row] = i
            if rep[row] < 0:
                selected[nsel] = row
                nsel += 1


@numba.njit(nogil=True, cache=True, fastmath=_FASTMATH)
def greedy_ranked(unit: np.ndarray, usable: np.ndarray, lang: np.ndarray,
                  threshold: float, f_off: np.ndarray, f_val: np.ndarray, f_mode: np.ndarray,
                  guard: bool) -> np.ndarray:
    """For each row of unit vectors in rank order: -1 if kept, else the kept row it repeats.

    Computes only the dot products the greedy scan needs (rows against the selected rows), in
    one thread: for ~100 rows this beats a BLAS Gram matrix, whose thread pool costs
    milliseconds on a busy machine.
    """
    n = unit.shape[0]
    rep = np.empty(n, dtype=np.int64)
    _greedy_into(unit, np.ones(n, dtype=np.float32), usable, lang, np.float32(threshold), rep,
                 f_off, f_val, f_mode, guard)
    return rep


@numba.njit(nogil=True, cache=True)
def output_plan(rep: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """From ``rep`` (-1 = kept): a row order with the kept rows first (in rank order), then the
    skipped ones grouped by the kept row they repeat, each group in rank order; the list
    offsets of the ``displaced_ids`` per kept row; and the number of kept rows."""
    n = rep.shape[0]
    slot = np.full(n, -1, dtype=np.int64)
    nkept = 0
    for i in range(n):
        if rep[i] < 0:
            slot[i] = nkept
            nkept += 1
    order = np.empty(n, dtype=np.uint32)
    offsets = np.zeros(nkept + 1, dtype=np.int64)
    for i in range(n):
        if rep[i] < 0:
            order[slot[i]] = i
        else:
            offsets[slot[rep[i]] + 1] += 1
    for s in range(nkept):
        offsets[s + 1] += offsets[s]
    fill = offsets[:-1].copy()
    for i in range(n):  # rank order, so each group stays in rank order
        if rep[i] >= 0:
            s = slot[rep[i]]
            order[nkept + fill[s]] = i
            fill[s] += 1
    return order, offsets, nkept


_ALL = np.ones(0, dtype=np.bool_)  # "every row": saves allocating a mask per call


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath=_FASTMATH)
def dedupe_rows(matrix: np.ndarray, present: np.ndarray, lang: np.ndarray, threshold: float,
                 f_off: np.ndarray, f_val: np.ndarray, f_mode: np.ndarray, guard: bool
                 ) -> tuple[int, int, np.ndarray, np.ndarray, int]:
    """:func:`dedupe_ranked`'s per-row work in one call: inverse norms (float64 sums of
    squares; NaN / inf anywhere in a row make it non-finite), the greedy scan and the output
    plan. An empty ``present`` means every row is present.
    Returns the number of non-finite rows (nothing is decided when there are any), the
    number of usable rows and :func:`output_plan`'s three values."""
    n, d = matrix.shape
    inv = np.zeros(n, dtype=np.float32)
    usable = np.zeros(n, dtype=np.bool_)
    nbad = 0
    nusable = 0
    # The rows are copied, as they are read for their norms, into a 64-byte-aligned buffer
    # whose rows are padded to 16 floats: Arrow buffers from Polars need not be aligned, and
    # vector loads that straddle cache lines cost more than the copy (~10 % of the scan).
    width = (d + 15) // 16 * 16
    raw = np.empty(n * width + 16, dtype=np.float32)
    start = (16 - (raw.ctypes.data // 4) % 16) % 16
    rows = raw[start : start + n * width].reshape(n, width)
    for i in range(n):
        acc = 0.0
        for t in range(d):
            x = matrix[i, t]
            rows[i, t] = x
            v = np.float64(x)
            acc += v * v
        for t in range(d, width):
            rows[i, t] = 0.0
        if not np.isfinite(acc):
            nbad += 1
        elif (present.size == 0 or present[i]) and acc > 0.0:
            usable[i] = True
            nusable += 1
            inv[i] = np.float32(1.0 / np.sqrt(acc))
    rep = np.full(n, -1, dtype=np.int64)
    if nbad == 0:
        _greedy_into(rows, inv, usable, lang, np.float32(threshold), rep, f_off, f_val, f_mode,
                     guard)
    order, offsets, nkept = output_plan(rep)
    return nbad, nusable, order, offsets, nkept


def greedy_ranked_numpy(unit: np.ndarray, usable: np.ndarray, lang: np.ndarray,
                        threshold: float, facts: FactArrays | None = None) -> np.ndarray:
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
            if facts is not None and hit.any():
                why = conflict_reasons(*facts, np.full(sel.size, i), sel)
                hit &= why == 0
            if hit.any():
                rep[i] = sel[int(np.argmax(hit))]
                continue
        if usable[i]:
            selected.append(i)
    return rep


def duplicate_of(unit: np.ndarray, usable: np.ndarray, lang: np.ndarray,
                 threshold: float, facts: FactArrays | None = None) -> np.ndarray:
    """Per row of a ranked list: -1 when kept, else the row index of the kept row it repeats.

    ``threshold`` is the configured one; the float32 slack of ``kernels.effective_threshold``
    is applied here, so identical directions count as duplicates at 1.0. ``facts`` (CSR
    signatures and guard modes of the rows, :func:`fact_arrays`) turns the fact guard on.
    """
    n = unit.shape[0]
    f_off, f_val, f_mode = facts if facts is not None else no_facts(n)
    return greedy_ranked(
        np.ascontiguousarray(unit, dtype=np.float32),
        np.ascontiguousarray(usable, dtype=np.bool_),
        np.ascontiguousarray(lang, dtype=np.int64), effective_threshold(threshold),
        f_off, f_val, f_mode, facts is not None)


def displaced_lists(ids: pa.Array | None, rep: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Kept row indices and, aligned with them, the list of ids each one displaced.

    ``ids`` may be ``None`` when no row was skipped (the ids are then not needed).
    """
    return planned_lists(ids, *output_plan(np.ascontiguousarray(rep, dtype=np.int64)))
