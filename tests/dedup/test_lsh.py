"""LSH mode: verified merges, exact-equivalence with all pairs, recall, determinism."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import polars as pl
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from arrowdedup import ConfigError, DedupConfig, IngestionConfig, LshMethod, ingest
from arrowdedup.dedup import kernels
from arrowdedup.dedup.lsh import (
    all_pairs_buckets,
    buckets_from_keys,
    buckets_from_keys_numpy,
    greedy_lsh_group,
    hyperplane_keys,
    hyperplane_plan,
    hyperplane_signatures,
    max_hamming,
    popcount,
    shingles,
)
from tests.helpers import ROOT, random_facts
from tests.helpers.dedup import THR, clear_of_band, inputs, lsh_config, lsh_corpus, planted


def test_buckets_from_keys():
    keys = np.array([[1, 5], [2, 5], [1, 6], [1, 5], [2, 7]], dtype=np.uint64)
    valid = np.array([True, True, True, True, False])
    b = buckets_from_keys(keys, valid)
    groups = {tuple(b.members[b.starts[k] : b.starts[k + 1]]) for k in range(b.n_buckets)}
    assert groups == {(0, 2, 3), (0, 1, 3)}
    assert (b.row_bucket[4] == -1).all() and b.row_bucket[2, 1] == -1


@settings(max_examples=12, deadline=None)
@given(
    m=st.integers(1, 800),
    d=st.sampled_from([8, 32]),
    seed=st.integers(0, 10_000),
    dup=st.sampled_from([0.0, 0.3, 0.6]),
    exact=st.sampled_from([0.0, 0.1]),
    filt=st.sampled_from([0.0, 0.05]),
    unusable=st.sampled_from([0.0, 0.1]),
)
def test_all_pairs_equals_exact(m, d, seed, dup, exact, filt, unusable):
    x = planted(m, d, seed, dup)
    assume(clear_of_band(x))
    order, usable, inv, hc, filtered = inputs(x, seed, exact, filt, unusable)
    n_classes = int(hc.max()) + 1
    facts = random_facts(m, seed) if seed % 2 else None
    p = kernels.plan_of(order, np.array([0, m], np.int64), x, inv, usable, hc, filtered, THR,
                        facts=facts)
    a1, r1, s1, f1, w1 = kernels.new_outputs(m)
    kernels.greedy_numba(p, np.array([0], np.int64), kernels.Outputs(a1, r1, s1, f1, w1))
    a2, r2, s2, f2, w2 = kernels.new_outputs(m)
    greedy_lsh_group(order, p, np.full(n_classes, -1, np.int64),
                     kernels.Outputs(a2, r2, s2, f2, w2), all_pairs_buckets(usable[order]))
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_array_equal(f1, f2)  # the first refusal, in selection order
    np.testing.assert_array_equal(w1, w2)
    # Summation order may move a cosine in its last bits.
    np.testing.assert_allclose(s1, s2, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("method", [LshMethod.HYPERPLANE, LshMethod.MINHASH])
def test_every_lsh_merge_is_verified(method):
    frame = lsh_corpus(2000, 11)
    res = ingest(frame, lsh_config(method))
    dec = res.decisions
    near = dec.filter(pl.col("action") == "merged_near")
    assert near.height > 100
    ids = {s: i for i, s in enumerate(frame["segment_id"].to_list())}
    x = frame["embedding"].to_numpy().astype(np.float64)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    kept = set(dec.filter(pl.col("action") == "kept")["segment_id"].to_list())
    for seg, rep_id, s in near.select("segment_id", "representative_id", "similarity").iter_rows():
        assert rep_id in kept
        cos = float(u[ids[seg]] @ u[ids[rep_id]])
        assert cos >= THR - 1e-6 and abs(cos - s) < 1e-5


def test_hyperplane_recall_and_small_groups_stay_exact():
    frame = lsh_corpus(3000, 4)
    exact = ingest(frame, DedupConfig()).decisions
    lsh = ingest(frame, lsh_config(LshMethod.HYPERPLANE)).decisions
    was_near = exact["action"] == "merged_near"
    removed = lsh["action"] != "kept"
    recall = float((was_near & removed).sum() / was_near.sum())
    assert recall >= 0.99
    # Below LshMinSegments the group is scanned exactly.
    small = ingest(frame, lsh_config(LshMethod.HYPERPLANE, min_segments=10_000)).decisions
    assert small.equals(exact)


def test_hyperplane_keys_are_seeded():
    u = np.random.default_rng(0).standard_normal((50, 16)).astype(np.float32)
    assert np.array_equal(hyperplane_keys(u, 8, 12, 3), hyperplane_keys(u, 8, 12, 3))
    assert not np.array_equal(hyperplane_keys(u, 8, 12, 3), hyperplane_keys(u, 8, 12, 4))
    assert int(hyperplane_keys(u, 8, 12, 3).max()) < 2**12


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 300), bands=st.integers(1, 6), bits=st.sampled_from([1, 3, 12, 21, 40]),
       seed=st.integers(0, 10_000), invalid=st.sampled_from([0.0, 0.3]))
def test_buckets_equal_the_numpy_twin(m, bands, bits, seed, invalid):
    """Counting sort (<= 20 bits) and merge sort (wider keys) give the argsort twin's buckets."""
    rng = np.random.default_rng(seed)
    # Few distinct keys, so buckets are common.
    pool = rng.integers(0, 2**bits, size=max(1, m // 4), dtype=np.uint64)
    keys = pool[rng.integers(0, pool.size, size=(m, bands))] if m else \
        np.zeros((0, bands), np.uint64)
    valid = rng.random(m) >= invalid
    a = buckets_from_keys(keys, valid, bits)
    b = buckets_from_keys_numpy(keys, valid)
    np.testing.assert_array_equal(a.row_bucket, b.row_bucket)
    np.testing.assert_array_equal(a.starts, b.starts)
    np.testing.assert_array_equal(a.members, b.members)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=20))
def test_popcount(values):
    import numba

    @numba.njit
    def total(a):
        s = 0
        for x in a:
            s += popcount(x)
        return s

    assert total(np.array(values, dtype=np.uint64)) == sum(bin(v).count("1") for v in values)


def test_hamming_bound_keeps_pairs_at_the_threshold_and_drops_chance_mates():
    """Signatures of pairs at exactly cosine 0.90 stay within the bound; random pairs do not."""
    rng = np.random.default_rng(4)
    d, n = 64, 4000
    a = rng.standard_normal((n, d))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    other = rng.standard_normal((n, d))
    other -= (other * a).sum(axis=1, keepdims=True) * a
    other /= np.linalg.norm(other, axis=1, keepdims=True)
    b = 0.9 * a + np.sqrt(1 - 0.81) * other
    planes, _ = hyperplane_plan(d, 256, 1, 8, seed=2)
    rows = np.arange(n, dtype=np.int64)
    ones = np.ones(n, np.float32)
    sa = hyperplane_signatures(a.astype(np.float32), rows, ones, planes)
    sb = hyperplane_signatures(b.astype(np.float32), rows, ones, planes)
    sr = hyperplane_signatures(rng.standard_normal((n, d)).astype(np.float32), rows, ones, planes)

    def distance(x, y):
        return np.unpackbits((x ^ y).view(np.uint8), axis=1).sum(axis=1)

    bound = max_hamming(0.9, 256)
    assert distance(sa, sb).max() <= bound
    assert (distance(sa, sr) <= bound).mean() < 0.001
    assert max_hamming(1.0, 256) == 1 and max_hamming(0.5, 64) < 64


def test_signature_config_is_validated():
    assert IngestionConfig().lsh_signature_bits == 256
    for bad in (0, 100, 8192):
        with pytest.raises(ConfigError, match="LshSignatureBits"):
            IngestionConfig(lsh_signature_bits=bad)
    cfg = DedupConfig.from_dict({"Ingestion": {"LshSignatureBits": 512}})
    assert cfg.ingestion.lsh_signature_bits == 512


def test_shingles():
    assert shingles("A b c D", 3) == [b"a b c", b"b c d"]
    assert shingles("one two", 3) == [b"one two"]


SCRIPT = textwrap.dedent("""
    import hashlib
    from tests.helpers.dedup import lsh_config, lsh_corpus
    from arrowdedup import LshMethod, ingest
    frame = lsh_corpus(600, 2)
    for method in (LshMethod.MINHASH, LshMethod.HYPERPLANE):
        dec = ingest(frame, lsh_config(method)).decisions
        print(method.value, hashlib.sha256(dec.write_ipc(None).getvalue()).hexdigest())
""")


def test_deterministic_across_hash_seeds():
    outs = []
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300, check=True)
        outs.append(done.stdout)
    assert outs[0] == outs[1] and outs[0].count("\n") == 2
    frame = lsh_corpus(600, 2)
    here = {m.value: hashlib.sha256(ingest(frame, lsh_config(m)).decisions.write_ipc(None)
                                    .getvalue()).hexdigest() for m in LshMethod}
    assert all(f"{k} {v}" in outs[0] for k, v in here.items())
