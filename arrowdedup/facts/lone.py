"""Lone rows: the rows of a group that every other row of it refuses under the guard, whatever
the cosine (their facts are in no other row), so a kernel skips their pairs. An optimisation
that changes no decision (``tests/facts/test_lone_rows.py``).
"""

from __future__ import annotations

import numpy as np

from .tables import (
    CODE,
    DATE,
    EQUAL,
    KIND_SHIFT,
    NEGATION,
    NUMBER,
    SUBSET,
    VERSION,
)

# Kinds that ``conflict`` requires of a representative byte for byte: no alias, case form or
# antonym stands in for a number, a date, a version or a negation (``_facts_jit._missing``).
EXACT_KINDS = np.array([NUMBER, DATE, VERSION, NEGATION], dtype=np.uint64)


# Documents smaller than this never have their lone rows looked for: their greedy scan is
# short, and the sort would cost more than it saves.
LONE_MIN_ROWS = 256


def lone_rows(order: np.ndarray, offsets: np.ndarray, fact_offsets: np.ndarray,
              fact_values: np.ndarray, fact_modes: np.ndarray,
              min_rows: int = LONE_MIN_ROWS) -> np.ndarray:
    """Rows the fact guard refuses to merge into any other row of their group (bool per row).

    A row is lone when it states a number, date, version or negation that no other row of its
    group (``order[offsets[g]:offsets[g + 1]]``, one document) states: ``conflict`` then fails
    against every possible representative, so once a greedy scan has recorded the row's first
    refusal it can stop (the row is kept, and later refusals are never recorded). Rows of a
    table that name their key are lone, which keeps the scan linear where every row embeds
    alike (a 30,000-row numeric CSV took 143 s of quadratic refusals). The rule holds for
    rows compared by facts (modes SUBSET and EQUAL) in groups without code rows (code is
    compared by line, where a missing number does not refuse). Only groups of ``min_rows``
    rows or more are looked at; elsewhere rows are not lone (always safe: a scan that does not
    stop early makes the same decisions)."""
    n = fact_modes.shape[0]
    lone = np.zeros(n, dtype=bool)
    sizes = np.diff(offsets)
    big = np.flatnonzero(sizes >= min_rows)
    if big.size == 0 or fact_values.size == 0:
        return lone
    at = np.repeat(np.arange(sizes.shape[0], dtype=np.int64), sizes)  # group of order[i]
    at[sizes[at] < min_rows] = -1
    group = np.full(n, -1, dtype=np.int64)
    group[order[:at.shape[0]]] = at
    row_of_value = np.repeat(np.arange(n, dtype=np.int64), np.diff(fact_offsets))
    kinds = fact_values >> KIND_SHIFT
    keep = np.isin(kinds, EXACT_KINDS) & (group[row_of_value] >= 0)
    rows = row_of_value[keep]
    values = fact_values[keep]
    groups = group[rows]
    # A hash table of (group, value) counts settles most values without a sort; the values
    # that share a slot are counted exactly by sorting only them.
    key = values ^ (groups.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    bits = max(int(rows.size * 4 - 1).bit_length(), 1)
    slot = ((key * np.uint64(0xBF58476D1CE4E5B9)) >> np.uint64(64 - bits)).astype(np.int64)
    alone = np.bincount(slot, minlength=1 << bits)[slot] == 1
    lone[rows[alone]] = True
    shared = np.flatnonzero(~alone)
    if shared.size:
        by = np.lexsort((values[shared], groups[shared]))
        g, v, r = groups[shared][by], values[shared][by], rows[shared][by]
        start = np.ones(r.size, dtype=bool)
        start[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1])
        run = np.cumsum(start) - 1
        lone[r[np.bincount(run)[run] == 1]] = True
    compared = (fact_modes == SUBSET) | (fact_modes == EQUAL)
    with_code = np.zeros(offsets.shape[0], dtype=bool)
    with_code[group[(fact_modes == CODE) & (group >= 0)]] = True
    return lone & compared & (group >= 0) & ~with_code[np.maximum(group, 0)]
