"""The BLAS-blocked kernel makes the Numba kernel's decisions (SPEC §2), whatever the threads."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from arrowdedup import DedupConfig, IngestionConfig, ingest
from arrowdedup.dedup import kernels
from arrowdedup.dedup.blocked import blas_threads, greedy_blocked_group
from tests.helpers import random_facts, segments_frame
from tests.helpers.dedup import THR, clear_of_band, inputs, planted


def run_both(x, order, usable, inv, hc, filtered, block, chunk, facts=None):
    m = x.shape[0]
    n_classes = int(hc.max()) + 1
    p = kernels.plan_of(order, np.array([0, m], np.int64), x, inv, usable, hc, filtered, THR,
                        facts=facts)
    one = kernels.new_outputs(m)
    kernels.greedy_numba(p, np.array([0], np.int64), one)
    two = kernels.new_outputs(m)
    greedy_blocked_group(order, p, np.full(n_classes, -1, np.int64), two, block=block,
                         chunk=chunk)
    return tuple(one), tuple(two)


def assert_same(one, two):
    a1, r1, s1 = one[:3]
    a2, r2, s2 = two[:3]
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(r1, r2)
    for extra1, extra2 in zip(one[3:], two[3:], strict=True):  # guard refusals and reasons
        np.testing.assert_array_equal(extra1, extra2)
    # Summation order may move a cosine in its last bits.
    np.testing.assert_allclose(s1, s2, atol=1e-5, equal_nan=True)


@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 700), seed=st.integers(0, 10_000), dup=st.sampled_from([0.3, 0.6]),
       block=st.sampled_from([1, 7, 64]), chunk=st.sampled_from([1, 5, 4096]))
def test_blocked_equals_numba_with_fact_guard(m, seed, dup, block, chunk):
    """The guard decides identically in both kernels, refusals and reasons included."""
    x = planted(m, 16, seed, dup)
    assume(clear_of_band(x))
    order, usable, inv, hc, filtered = inputs(x, seed, 0.05, 0.0, 0.05)
    facts = random_facts(m, seed)
    one, two = run_both(x, order, usable, inv, hc, filtered, block, chunk, facts)
    assert_same(one, two)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 1200) | st.sampled_from([999, 1000, 1001]),
    d=st.sampled_from([8, 24, 64]),
    seed=st.integers(0, 10_000),
    dup=st.sampled_from([0.0, 0.2, 0.5]),
    exact=st.sampled_from([0.0, 0.1]),
    filt=st.sampled_from([0.0, 0.05]),
    unusable=st.sampled_from([0.0, 0.1]),
    block=st.sampled_from([5, 64, 512]),
    chunk=st.sampled_from([97, 8192]),
)
def test_blocked_equals_numba(m, d, seed, dup, exact, filt, unusable, block, chunk):
    x = planted(m, d, seed, dup)
    assume(clear_of_band(x))
    order, usable, inv, hc, filtered = inputs(x, seed, exact, filt, unusable)
    one, two = run_both(x, order, usable, inv, hc, filtered, block, chunk)
    assert_same(one, two)


def test_planted_duplicates_are_found():
    x = planted(3000, 64, 7, 0.3)
    assert clear_of_band(x)
    order, usable, inv, hc, filtered = inputs(x, 7, 0.05, 0.02, 0.02)
    one, two = run_both(x, order, usable, inv, hc, filtered, 256, 500)
    assert_same(one, two)
    assert (two[0] == kernels.MERGED_NEAR).sum() > 500
    assert (two[0] == kernels.DROPPED_EXACT).sum() > 50


def test_thread_counts_do_not_change_results():
    x = planted(2500, 48, 3, 0.4)
    order, usable, inv, hc, filtered = inputs(x, 3, 0.05, 0.0, 0.0)
    outs = []
    for threads in (1, 2):
        with blas_threads(threads):
            out = kernels.new_outputs(x.shape[0])
            p = kernels.plan_of(order, np.array([0, x.shape[0]], np.int64), x, inv, usable, hc,
                                filtered, THR)
            greedy_blocked_group(order, p, np.full(int(hc.max()) + 1, -1, np.int64), out)
            outs.append(tuple(out))
    for i in range(3):
        np.testing.assert_array_equal(outs[0][i], outs[1][i])  # bit for bit, sims included


@pytest.mark.parametrize("switch", [1, 1000, 10**9])
def test_ingest_dispatch_around_the_switch(switch):
    """Whole-table ingest: groups above and below BlockMinSegments, same decisions."""
    rng = np.random.default_rng(5)
    sizes = [40, 999, 1000, 1300]
    docs, embs, texts = [], [], []
    for i, size in enumerate(sizes):
        x = planted(size, 16, 100 + i, 0.3)
        docs += [f"d{i}"] * size
        embs += list(x)
        texts += [f"t{i}-{j % (size - 5)}" for j in range(size)]  # a few exact copies
    frame = segments_frame(texts, embs, doc_id=docs,
                           salience=list(rng.uniform(0.1, 1.0, len(texts)).astype(float)))
    base = DedupConfig(ingestion=IngestionConfig(fact_guard=False))  # texts: ids
    cfg = dataclasses.replace(base, ingestion=dataclasses.replace(
        base.ingestion, block_min_segments=switch))
    ref_cfg = dataclasses.replace(base, ingestion=dataclasses.replace(
        base.ingestion, block_min_segments=10**9))
    got = ingest(frame, cfg).decisions
    ref = ingest(frame, ref_cfg).decisions
    assert got.select("action", "representative_id").equals(
        ref.select("action", "representative_id"))
    assert got.filter(pl.col("action") == "merged_near").height > 500
    np.testing.assert_allclose(got["similarity"].fill_null(np.nan).to_numpy(),
                               ref["similarity"].fill_null(np.nan).to_numpy(), atol=1e-5)
