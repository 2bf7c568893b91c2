"""Ranks and RRF against hand-computed values (SPEC §4.2–4.4)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrowdedup import ConfigError, DedupConfig, RrfConfig, SignalWeights, competition_rank, rrf
from arrowdedup.retrieval.fusion import group_rank, mode_weights, score_order


def test_competition_rank_shares_the_lowest_rank_of_a_tie():
    assert competition_rank(np.array([0.9, 0.5, 0.5, 0.1])).tolist() == [1, 2, 2, 4]
    assert competition_rank(np.array([3.0, 1.0, 3.0])).tolist() == [1, 3, 1]
    assert competition_rank(np.array([1.0, 2.0]), descending=False).tolist() == [1, 2]


def test_unknown_values_share_the_rank_after_the_last_known():
    ranks = competition_rank(np.array([0.0, 2.0, np.nan, 1.0, 5.0]),
                             known=np.array([False, True, True, True, False]))
    assert ranks.tolist() == [3, 1, 3, 2, 3]


def test_group_rank_gives_each_document_one_rank():
    # documents: x (newest 30), y (20), z (unknown)
    values = np.array([10.0, 30.0, 20.0, np.nan, 20.0])
    groups = np.array([0, 0, 1, 2, 1])
    known = ~np.isnan(values)
    assert group_rank(values, known, groups).tolist() == [1, 1, 2, 3, 2]


def test_rrf_against_hand_computed_values():
    ranks = {"dense": np.array([1, 2, 3]), "bm25": np.array([3, 1, 3]),
             "salience": np.array([2, 1, 3]), "freshness": np.array([1, 1, 1])}
    weights = {"dense": 1.0, "bm25": 1.0, "salience": 0.3, "freshness": 0.2}
    raw, norm = rrf(ranks, weights, k=60)
    expected0 = 1 / 61 + 1 / 63 + 0.3 / 62 + 0.2 / 61
    expected1 = 1 / 62 + 1 / 61 + 0.3 / 61 + 0.2 / 61
    expected2 = 1 / 63 + 1 / 63 + 0.3 / 63 + 0.2 / 61
    assert raw == pytest.approx([expected0, expected1, expected2], rel=1e-12)
    best = 2.5 / 61
    assert norm == pytest.approx([expected0 / best, expected1 / best, expected2 / best])
    # a candidate first on every signal scores exactly 1
    raw1, norm1 = rrf({s: np.array([1]) for s in weights}, weights)
    assert norm1[0] == pytest.approx(1.0)
    assert raw1[0] == pytest.approx(best)


def test_normaliser_counts_only_the_signals_the_mode_uses():
    ranks = {"dense": np.array([1, 5]), "bm25": np.array([1, 1])}
    raw, norm = rrf(ranks, {"dense": 1.0}, k=60)  # semantic: dense only
    assert raw.tolist() == pytest.approx([1 / 61, 1 / 65])
    assert norm.tolist() == pytest.approx([1.0, 61 / 65])


def test_raw_rrf_never_reaches_the_default_floor_but_normalised_does():
    weights = mode_weights(RrfConfig(), "hybrid")
    ranks = {s: np.array([1, 200]) for s in weights}
    raw, norm = rrf(ranks, weights)
    floor = DedupConfig().retrieval.min_relevance_score
    assert raw.max() < 0.07 < floor  # why the reference's raw floor removed everything
    assert norm[0] >= floor and norm[1] < floor


def test_mode_weights_follow_the_spec_and_the_config():
    assert mode_weights(RrfConfig(), "hybrid") == {"dense": 1.0, "bm25": 1.0,
                                                   "salience": 0.3, "freshness": 0.2}
    assert mode_weights(RrfConfig(), "keyword") == {"dense": 0.3, "bm25": 1.5,
                                                    "salience": 0.2, "freshness": 0.1}
    assert mode_weights(RrfConfig(), "semantic") == {"dense": 1.0}
    custom = RrfConfig(hybrid=SignalWeights(dense=2.0, bm25=0.5, salience=0.0, freshness=0.0))
    assert mode_weights(custom, "HYBRID")["dense"] == 2.0
    with pytest.raises(ConfigError, match="unknown search mode"):
        mode_weights(RrfConfig(), "fuzzy")


def test_rrf_refuses_bad_input():
    with pytest.raises(ConfigError, match="weight > 0"):
        rrf({"dense": np.array([1])}, {"dense": 0.0})
    with pytest.raises(ConfigError, match="1-based"):
        rrf({"dense": np.array([0])}, {"dense": 1.0})


def test_score_order_breaks_ties_by_segment_id():
    scores = np.array([0.5, 0.9, 0.5, 0.5])
    ids = np.array(["c", "z", "a", "b"])
    assert score_order(scores, ids).tolist() == [1, 2, 3, 0]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=40))
def test_competition_rank_matches_the_definition(values):
    v = np.array(values, dtype=float)
    ranks = competition_rank(v)
    # rank = 1 + number of strictly better values
    assert ranks.tolist() == [1 + int((v > x).sum()) for x in v]
