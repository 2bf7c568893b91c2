"""Reciprocal rank fusion over the four signals (SPEC §4.2–4.4).

- :func:`competition_rank`: rank 1 = best, equal values share the lowest rank of their tie
  ("1, 2, 2, 4"); unknown values (NaN / masked) share the rank after the last known one.
- :func:`rrf`: ``raw = Σ w_s / (k + rank_s)`` and ``normalised = raw / Σ w_s / (k + 1)`` over
  the signals with a weight > 0, so the relevance floor compares like with like.
- :func:`score_order`: best first, ties broken by ``segment_id``.
- :func:`mode_weights`: the weights of a mode from the ``Rrf`` config section.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

import numpy as np

from ..config import RrfConfig
from ..errors import ConfigError


class SearchMode(str, Enum):
    HYBRID = "hybrid"
    KEYWORD = "keyword"
    SEMANTIC = "semantic"


SIGNALS = ("dense", "bm25", "salience", "freshness")


def competition_rank(values: np.ndarray, known: np.ndarray | None = None, *,
                     descending: bool = True) -> np.ndarray:
    """1-based competition ranks ("1, 2, 2, 4"); rows not ``known`` (or NaN) rank last, tied."""
    v = np.asarray(values, dtype=np.float64)
    ok = ~np.isnan(v) if known is None else (np.asarray(known, dtype=bool) & ~np.isnan(v))
    key = -v if descending else v
    ranks = np.empty(v.shape[0], dtype=np.int64)
    known_sorted = np.sort(key[ok])
    ranks[ok] = np.searchsorted(known_sorted, key[ok], side="left") + 1
    ranks[~ok] = known_sorted.shape[0] + 1
    return ranks


def group_rank(values: np.ndarray, known: np.ndarray, groups: np.ndarray, *,
               descending: bool = True) -> np.ndarray:
    """Competition ranks of *groups* (e.g. documents) by their best value, given to every row
    of the group: the segments of one document share its rank. Unknown groups rank last."""
    codes, inverse = np.unique(groups, return_inverse=True)
    v = np.asarray(values, dtype=np.float64)
    ok = np.asarray(known, dtype=bool) & ~np.isnan(v)
    fill = -np.inf if descending else np.inf
    best = np.full(codes.shape[0], fill)
    if descending:
        np.maximum.at(best, inverse[ok], v[ok])
    else:
        np.minimum.at(best, inverse[ok], v[ok])
    group_known = np.zeros(codes.shape[0], dtype=bool)
    group_known[inverse[ok]] = True
    return competition_rank(best, group_known, descending=descending)[inverse]


def rrf(ranks: Mapping[str, np.ndarray], weights: Mapping[str, float], *,
        k: float = 60) -> tuple[np.ndarray, np.ndarray]:
    """(raw, normalised) RRF scores of candidates whose per-signal 1-based ranks are aligned.

    Signals missing from ``weights`` or weighted 0 do not count, in the sum or in the
    normaliser. Raises ``ConfigError`` when no weighted signal has ranks.
    """
    if k <= 0:
        raise ConfigError(f"Rrf.K = {k!r} is invalid: it must be a number > 0")
    used = [s for s in ranks if float(weights.get(s, 0.0)) > 0.0]
    if not used:
        raise ConfigError(
            f"rrf: no signal among {sorted(ranks)} has a weight > 0 (weights {dict(weights)}); "
            "give at least one of them a positive weight"
        )
    n = len(next(iter(ranks.values())))
    raw = np.zeros(n, dtype=np.float64)
    best = 0.0
    for s in used:
        r = np.asarray(ranks[s], dtype=np.float64)
        if r.shape[0] != n:
            raise ConfigError(f"rrf: ranks of {s!r} have {r.shape[0]} entries, expected {n}")
        if n and r.min() < 1:
            raise ConfigError(f"rrf: ranks of {s!r} must be 1-based (found {r.min():g})")
        w = float(weights[s])
        raw += w / (k + r)
        best += w / (k + 1.0)
    return raw, raw / best


def score_order(scores: np.ndarray, segment_ids: np.ndarray) -> np.ndarray:
    """Row order best score first; equal scores in ascending ``segment_id`` order."""
    return np.lexsort((np.asarray(segment_ids), -np.asarray(scores, dtype=np.float64)))


def mode_weights(rrf_config: RrfConfig, mode: SearchMode | str) -> dict[str, float]:
    """Signal weights of a mode: Hybrid / Keyword from the config; semantic = dense only."""
    try:
        m = SearchMode(str(mode.value if isinstance(mode, Enum) else mode).lower())
    except ValueError:
        raise ConfigError(
            f"unknown search mode {mode!r}; use one of: hybrid, keyword, semantic"
        ) from None
    if m is SearchMode.SEMANTIC:
        return {"dense": 1.0}
    weights = rrf_config.hybrid if m is SearchMode.HYBRID else rrf_config.keyword
    return weights.as_dict()
