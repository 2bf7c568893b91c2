"""The greedy dedup kernels of SPEC section 2, over the offsets of a whole table.

Every kernel takes one :class:`KernelPlan` (a NamedTuple of NumPy arrays that Numba passes as
a struct) and writes into one :class:`Outputs`:

- ``order``: row indices, grouped (one group after another) and, inside a group, sorted by
  salience descending then position ascending;
- ``offsets``: ``order[offsets[g]:offsets[g + 1]]`` are the rows of group ``g``;
- ``matrix``: (n, d) float32 embeddings in input row order (never moved: the kernel reads
  rows through ``order``), ``inv_norm`` their inverse norms (0 where unusable), ``usable``;
- ``hash_class``: a dense id per row, equal for rows of one group with one content hash;
- ``filtered``: rows removed by the noise filter before the pass;
- ``fact_offsets`` / ``fact_values`` / ``fact_modes``: the fact signatures in CSR form and the
  per-row guard mode (:mod:`arrowdedup.facts.guard`); ``guard`` turns the fact guard on; ``lone``
  marks rows the guard refuses against every other row of their group
  (:func:`arrowdedup.facts.guard.lone_rows`): a scan stops at such a row's first refusal, which
  changes no decision and keeps a table of alike rows from a quadratic scan.

They write ``action`` (int8, codes below), ``rep`` (representative row or -1), ``sim``
(cosine to the representative for near merges, else NaN), and ``refused`` / ``reason`` (the
first selected row that passed the cosine test but failed the fact guard, and why).
The Numba kernel runs groups in parallel; each group is scanned by one thread in a fixed
order, so the output does not depend on the thread count. ``greedy_numpy`` is the pure-NumPy
twin (a BLAS product per candidate where the jitted scan lets LLVM vectorise its sums): the
decisions agree outside the 1e-5 band of SPEC §5 and the similarities within it (tested), and
small inputs take it without loading any jitted code.

The jitted kernels live in :mod:`arrowdedup.dedup.kernels_jit` (``greedy_numba``,
``inverse_norms``, ``filtered_or_exact``, ``guard_refuses`` are reached through this module,
which imports Numba only when one of them is asked for).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .types import ACTION_NAMES as ACTION_NAMES
from .types import DROPPED_EXACT, FILTERED, KEPT, MERGED_NEAR, KernelPlan, Outputs

# Float32 cosines of one direction with itself land a few ULPs below 1 (0.99999994 and, for
# long vectors summed in order, ~1e-6 below). Comparing against ``threshold - SLACK`` makes
# threshold 1.0 merge identical directions; the slack is inside the 1e-5 band where the spec
# lets kernels with different summation orders disagree.
COSINE_SLACK = 4e-6
_JITTED = ("greedy_numba", "inverse_norms", "filtered_or_exact", "guard_refuses")


def __getattr__(name: str) -> Any:
    if name in _JITTED:
        from . import kernels_jit as _kernels_jit

        return getattr(_kernels_jit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def effective_threshold(threshold: float) -> float:
    """The float32 comparison bound every kernel uses for ``cosine >= threshold``."""
    return float(np.float32(threshold - COSINE_SLACK))


def no_facts(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Empty signatures for ``n`` rows (the guard then has nothing to check)."""
    return np.zeros(n + 1, dtype=np.int64), np.empty(0, dtype=np.uint64), \
        np.zeros(n, dtype=np.int8)


def plan_of(order: np.ndarray, offsets: np.ndarray, matrix: np.ndarray, inv_norm: np.ndarray,
            usable: np.ndarray, hash_class: np.ndarray, filtered: np.ndarray,
            threshold: float, *,
            facts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> KernelPlan:
    """A :class:`KernelPlan` from its parts (``threshold`` is used as given); ``facts`` =
    (offsets, values, modes) turns the fact guard on."""
    n = matrix.shape[0]
    f_off, f_val, f_mode = facts if facts is not None else no_facts(n)
    n_classes = int(hash_class.max()) + 1 if hash_class.size else 0
    return KernelPlan(order, offsets, matrix, inv_norm, usable, hash_class, n_classes, filtered,
                      float(threshold), f_off, f_val, f_mode, facts is not None,
                      lone_of(order, offsets, f_off, f_val, f_mode, facts is not None))


def lone_of(order: np.ndarray, offsets: np.ndarray, fact_offsets: np.ndarray,
            fact_values: np.ndarray, fact_modes: np.ndarray, guard: bool) -> np.ndarray:
    """:func:`arrowdedup.facts.guard.lone_rows` under the guard, else no row is lone."""
    if not guard:
        return np.zeros(fact_modes.shape[0], dtype=bool)
    from ..facts.lone import lone_rows

    return lone_rows(order, offsets, fact_offsets, fact_values, fact_modes)


def new_outputs(n: int) -> Outputs:
    return Outputs(
        np.zeros(n, dtype=np.int8),
        np.full(n, -1, dtype=np.int64),
        np.full(n, np.nan, dtype=np.float32),
        np.full(n, -1, dtype=np.int64),
        np.zeros(n, dtype=np.int8),
    )


def greedy_numpy(p: KernelPlan, groups: np.ndarray, out: Outputs) -> None:
    """Pure-NumPy twin of :func:`greedy_numba` (same arguments, same decisions)."""
    from ..facts.guard import conflict_reasons

    thr = np.float32(p.threshold)
    sel_of_class = np.full(p.n_classes, -1, dtype=np.int64)
    for g in groups:
        rows = p.order[p.offsets[g] : p.offsets[g + 1]]
        selected: list[np.ndarray] = []
        selected_rows: list[int] = []
        for r in rows:
            if p.filtered[r]:
                out.action[r] = FILTERED
                continue
            c = p.hash_class[r]
            if sel_of_class[c] >= 0:
                out.action[r] = DROPPED_EXACT
                out.rep[r] = sel_of_class[c]
                continue
            if p.usable[r]:
                cand = p.matrix[r] * p.inv_norm[r]
                if selected:
                    sims = np.stack(selected) @ cand
                    hits = np.flatnonzero(sims >= thr)
                    if hits.size and p.guard:
                        reps = np.asarray(selected_rows, dtype=np.int64)[hits]
                        why = conflict_reasons(p.fact_offsets, p.fact_values, p.fact_modes,
                                               np.full(hits.size, r), reps)
                        if why[0] != 0:
                            out.refused[r] = reps[0]
                            out.reason[r] = why[0]
                        hits = hits[why == 0]
                    if hits.size:
                        j = int(hits[0])
                        out.action[r] = MERGED_NEAR
                        out.rep[r] = selected_rows[j]
                        out.sim[r] = sims[j]
                        continue
                selected.append(cand.astype(np.float32))
                selected_rows.append(int(r))
            out.action[r] = KEPT
            sel_of_class[c] = r
