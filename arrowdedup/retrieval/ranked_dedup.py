"""The cross-document dedup of one search's ranked candidates, without loading Numba.

A search dedups ~100 candidates (SPEC §4.5). The scan itself takes microseconds in the
kernel of :mod:`.crossdoc_jit`, but a fresh process (``arrowdedup search``) pays ~0.5 s to import
Numba and load that kernel's cached machine code. So a ranked list of up to
:data:`MAX_ROWS` rows is scanned here with NumPy, and each decision is certified to be the
kernel's:

- the kernel sums float32 products in an order of its own (``fastmath`` reassociation, fused
  multiply-adds), so its cosine of rows ``x`` and ``y`` lies within
  ``gamma_d * sum(|x_t * y_t|)`` of the exact one, ``gamma_d = d*u / (1 - d*u)`` with
  ``u = 2**-24`` (any order of summation; Higham, *Accuracy and Stability*, §3.1);
- here the cosine is computed in float64 from the same float32 values (its own error is
  ~1e-13, covered by doubling the bound);
- a comparison with the threshold whose float64 cosine lies farther from the threshold than
  the bound has the kernel's answer; when any comparison the scan makes lies inside the
  bound, the kernel decides the whole list instead.

The decisions, and so the search results, are the kernel's whatever path ran. The fact guard
is the same integer logic either way (:func:`arrowdedup.facts.guard.conflict_reasons`, whose
interpreted twin gives the kernel's bits).
"""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa

from ..dedup.kernels import effective_threshold
from ..facts.guard import conflict_reasons
from .ranked_lists import FactArrays, planned_lists

# Above this many rows the kernel runs (its load is then a small part of the work, and the
# float64 Gram matrix here grows with the square of the rows).
MAX_ROWS = 512
_UNIT_ROUNDOFF = 2.0 ** -24


def duplicate_of(unit: np.ndarray, usable: np.ndarray, lang: np.ndarray,
                 threshold: float, facts: FactArrays | None = None) -> np.ndarray:
    """:func:`.crossdoc_jit.duplicate_of`, the same decisions: per row of a ranked list -1 when
    kept, else the row index of the kept row it repeats. Scanned with NumPy when the list is
    short and the kernel is not loaded yet; by the kernel otherwise, or when a cosine lies too
    close to the threshold to certify the kernel's answer."""
    unit = np.ascontiguousarray(unit, dtype=np.float32)
    usable = np.ascontiguousarray(usable, dtype=np.bool_)
    lang = np.ascontiguousarray(lang, dtype=np.int64)
    if unit.shape[0] <= MAX_ROWS and "arrowdedup.retrieval.crossdoc_jit" not in sys.modules:
        rep = certified_scan(unit, usable, lang, threshold, facts)
        if rep is not None:
            return rep
    from .crossdoc_jit import duplicate_of as kernel_duplicate_of

    return kernel_duplicate_of(unit, usable, lang, threshold, facts)


def certified_scan(unit: np.ndarray, usable: np.ndarray, lang: np.ndarray, threshold: float,
                   facts: FactArrays | None = None) -> np.ndarray | None:
    """The greedy scan of :func:`.crossdoc_jit.greedy_ranked` in float64, or None when a cosine
    it compares lies within the kernel's rounding bound of the threshold (or a usable row is
    not finite): only then could the kernel decide otherwise."""
    n, d = unit.shape
    rep = np.full(n, -1, dtype=np.int64)
    rows = np.flatnonzero(usable)
    if rows.size == 0:
        return rep
    x = unit[rows].astype(np.float64)
    if not np.isfinite(x).all():
        return None
    gram, magnitude = _gram_rows(x)
    gamma = d * _UNIT_ROUNDOFF / (1.0 - d * _UNIT_ROUNDOFF)
    bound = 2.0 * gamma * magnitude + 1e-30
    # The kernel compares float32 cosines with this float32 bound.
    thr = float(np.float32(effective_threshold(threshold)))
    sure_yes = gram - bound >= thr
    sure_no = gram + bound < thr
    sub_lang = lang[rows]
    selected: list[int] = []  # positions in ``rows``, in rank order
    for p in range(rows.size):
        if selected:
            sel = np.asarray(selected, dtype=np.int64)
            same = sub_lang[sel] == sub_lang[p]
            if (same & ~sure_yes[p, sel] & ~sure_no[p, sel]).any():
                return None
            hit = same & sure_yes[p, sel]
            if facts is not None and hit.any():
                pairs = np.flatnonzero(hit)
                why = conflict_reasons(*facts, np.full(pairs.size, rows[p]), rows[sel[pairs]])
                hit[pairs[why != 0]] = False
            if hit.any():
                rep[rows[p]] = rows[sel[int(np.argmax(hit))]]
                continue
        selected.append(p)
    return rep


def _gram_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x @ x.T`` and ``|x| @ |x|.T``, one matrix-vector product per row: for ~100 rows a
    BLAS matrix product wakes the BLAS thread pool, which cost 25-35 ms on a loaded 2-core
    machine against under 1 ms for the row products."""
    m = x.shape[0]
    ax = np.abs(x)
    gram = np.empty((m, m))
    magnitude = np.empty((m, m))
    for i in range(m):
        gram[i] = x @ x[i]
        magnitude[i] = ax @ ax[i]
    return gram, magnitude


def output_plan(rep: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`.crossdoc_jit.output_plan` in NumPy (the same integers): the kept rows first in rank
    order, then the skipped ones grouped by the kept row they repeat, each group in rank
    order; the offsets of each kept row's group; the number of kept rows."""
    rep = np.asarray(rep, dtype=np.int64)
    kept = np.flatnonzero(rep < 0)
    skipped = np.flatnonzero(rep >= 0)
    slot = np.full(rep.shape[0], -1, dtype=np.int64)
    slot[kept] = np.arange(kept.size)
    owner = slot[rep[skipped]]
    grouped = skipped[np.argsort(owner, kind="stable")]
    offsets = np.zeros(kept.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=kept.size), out=offsets[1:])
    return np.concatenate([kept, grouped]).astype(np.uint32), offsets, int(kept.size)


def displaced_lists(ids: pa.Array | None, rep: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Kept row indices and, aligned with them, the list of ids each one displaced
    (:func:`.crossdoc_jit.displaced_lists` with the NumPy plan).

    ``ids`` may be ``None`` when no row was skipped (the ids are then not needed).
    """
    return planned_lists(ids, *output_plan(rep))


