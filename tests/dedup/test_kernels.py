"""The Numba kernel, its NumPy twin and a direct transcription of SPEC §2 agree."""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import polars as pl
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from arrowdedup import DedupConfig, IngestionConfig, fact_conflict
from arrowdedup.dedup import kernels
from arrowdedup.schema import embeddings_from
from tests.helpers import random_facts
from tests.helpers.dedup import random_table

ingest_mod = importlib.import_module("arrowdedup.dedup.ingest")

THRESHOLD = 0.90
BAND = 1e-4  # test data keeps clear of the threshold by more than the 1e-5 the spec allows


def clear_of_band(frame: pl.DataFrame, threshold: float) -> bool:
    emb = embeddings_from(frame)
    assert emb is not None
    unit = np.zeros_like(emb.matrix, dtype=np.float64)
    unit[emb.usable] = emb.matrix[emb.usable] / np.linalg.norm(
        emb.matrix[emb.usable].astype(np.float64), axis=1, keepdims=True)
    cos = unit @ unit.T
    keys = frame.select(pl.concat_str(["doc_id", "segment_type", "language"])).to_series()
    same = keys.to_numpy()[:, None] == keys.to_numpy()[None, :]
    both = emb.usable[:, None] & emb.usable[None, :] & same
    return not bool((np.abs(cos[both] - threshold) < BAND).any())


def spec_transcription(frame: pl.DataFrame, cfg: DedupConfig) -> tuple[list[str], list[int]]:
    """SPEC §2 read literally, one group at a time, in float64; the fact guard is the public
    rule ``fact_conflict`` applied pair by pair."""
    rows = frame.to_dicts()
    action = ["kept"] * len(rows)
    rep = [-1] * len(rows)
    ing = cfg.ingestion
    key = lambda i: (rows[i]["doc_id"], rows[i]["segment_type"], rows[i].get("language"))  # noqa: E731
    for _, members in itertools.groupby(sorted(range(len(rows)), key=key), key=key):
        group = list(members)
        candidates = []
        for i in group:
            s = rows[i]["salience"]
            if 0 < s < ing.salience_threshold:
                action[i] = "filtered_low_salience"
            else:
                candidates.append(i)
        candidates.sort(key=lambda i: (-rows[i]["salience"], rows[i]["position"]))
        selected: list[int] = []
        for i in candidates:
            same_text = [j for j in selected if rows[j]["text"] == rows[i]["text"]]
            if same_text:
                action[i], rep[i] = "dropped_exact", same_text[0]
                continue
            e = rows[i]["embedding"]
            if e is not None and np.linalg.norm(e) > 0:
                u = np.asarray(e, np.float64) / np.linalg.norm(e)
                for j in selected:
                    f = rows[j]["embedding"]
                    if f is None or np.linalg.norm(f) == 0:
                        continue
                    if float(u @ (np.asarray(f, np.float64) / np.linalg.norm(f))) >= \
                            ing.similarity_threshold and not (ing.fact_guard and fact_conflict(
                                rows[i]["text"], rows[j]["text"],
                                segment_type=rows[i]["segment_type"],
                                language=rows[i].get("language"))):
                        action[i], rep[i] = "merged_near", j
                        break
                if action[i] == "merged_near":
                    continue
            selected.append(i)
    return action, rep


def run_both(frame: pl.DataFrame, cfg: DedupConfig, facts=None) -> list[tuple[np.ndarray, ...]]:
    emb = embeddings_from(frame)
    assert emb is not None
    salience = frame.get_column("salience").cast(pl.Float64).to_numpy()
    plan = ingest_mod.make_plan(frame, salience, ingest_mod.content_hash_codes(frame), cfg)
    inv = kernels.inverse_norms(emb.matrix, emb.usable)
    groups = np.arange(plan.offsets.shape[0] - 1, dtype=np.int64)
    p = kernels.plan_of(plan.order, plan.offsets, emb.matrix, inv, emb.usable, plan.hash_class,
                        plan.filtered, cfg.ingestion.similarity_threshold, facts=facts)
    outs = []
    for fn in (kernels.greedy_numba, kernels.greedy_numpy):
        out = kernels.new_outputs(frame.height)
        fn(p, groups, out)
        outs.append((out.action, out.rep, out.sim, out.refused, out.reason))
    return outs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60))
def test_numba_and_numpy_twin_agree_with_fact_guard(seed: int, n: int) -> None:
    frame = random_table(seed, n)
    cfg = DedupConfig()
    assume(clear_of_band(frame, cfg.ingestion.similarity_threshold))
    one, two = run_both(frame, cfg, random_facts(n, seed % 10_000))
    for x, y in zip(one, two, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-5, equal_nan=True)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60))
def test_numba_numpy_and_spec_agree(seed: int, n: int) -> None:
    frame = random_table(seed, n)
    cfg = DedupConfig(ingestion=IngestionConfig(fact_guard=False))
    assume(clear_of_band(frame, cfg.ingestion.similarity_threshold))
    (a1, r1, s1, _, _), (a2, r2, s2, _, _) = run_both(frame, cfg)
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_allclose(s1, s2, atol=1e-5, equal_nan=True)
    expected_action, expected_rep = spec_transcription(frame, cfg)
    assert [kernels.ACTION_NAMES[a] for a in a1] == expected_action
    assert r1.tolist() == expected_rep
    # and the whole ingest() pipeline says the same, with the fact guard on and off
    guarded, guarded_rep = spec_transcription(frame, DedupConfig())
    result = ingest_mod.ingest(frame, DedupConfig())
    assert result.decisions.get_column("action").cast(pl.String).to_list() == guarded
    rep_ids = result.decisions.get_column("representative_id").to_list()
    ids = frame.get_column("segment_id").to_list()
    assert rep_ids == [None if r < 0 else ids[r] for r in guarded_rep]
    result = ingest_mod.ingest(frame, cfg)
    assert result.decisions.get_column("action").cast(pl.String).to_list() == expected_action


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), threshold=st.sampled_from([0.5, 0.8, 0.95, 1.0]))
def test_agreement_at_other_thresholds(seed: int, threshold: float) -> None:
    frame = random_table(seed, 40)
    cfg = DedupConfig(ingestion=IngestionConfig(similarity_threshold=threshold, fact_guard=False))
    assume(clear_of_band(frame, threshold))
    (a1, r1, *_), (a2, r2, *_) = run_both(frame, cfg)
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(r1, r2)
    expected_action, expected_rep = spec_transcription(frame, cfg)
    assert [kernels.ACTION_NAMES[a] for a in a1] == expected_action
    assert r1.tolist() == expected_rep


def test_thread_count_does_not_change_decisions() -> None:
    frame = pl.concat([random_table(s, 50).with_columns(pl.lit(f"doc{s}").alias("doc_id"),
                                                        pl.format("{}-{}", pl.lit(s), "segment_id")
                                                        .alias("segment_id"))
                       for s in range(40)])
    one = ingest_mod.ingest(frame, threads=1)
    two = ingest_mod.ingest(frame, threads=2)
    assert one.decisions.equals(two.decisions)
    assert one.kept.equals(two.kept)


def test_inverse_norms() -> None:
    m = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    inv = kernels.inverse_norms(m, np.array([True, False, True]))
    np.testing.assert_allclose(inv, [0.2, 0.0, 1.0])


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 3000), n_groups=st.integers(1, 40),
       ties=st.booleans())
def test_plan_counting_sort_equals_polars_sort(seed: int, n: int, n_groups: int,
                                               ties: bool) -> None:
    """The jitted plan (large inputs) gives the Polars plan's order and offsets, and hash
    classes that split the rows the same way: groups of 1 to over 64 rows (the classes'
    hash table grows with the group), salience ties (with -0.0 beside 0.0), repeated
    positions and hashes."""
    from arrowdedup.dedup.plan_jit import group_order, sort_and_classify

    rng = np.random.default_rng(seed)
    groups = rng.integers(0, n_groups, n).astype(np.int64)
    levels = np.array([0.0, -0.0, 0.25, 0.5, 1.0])
    salience = (rng.choice(levels, n) if ties else rng.random(n)) + 0.0
    position = rng.integers(0, 25, n).astype(np.int64)
    hashes = rng.integers(0, int(rng.integers(1, 40)), n).astype(np.int64)
    order, offsets, classes, _ = ingest_mod._sorted_plan(groups, salience, position, hashes)
    order_jit, offsets_jit = group_order(groups, n_groups + 3)
    classes_jit = sort_and_classify(order_jit, offsets_jit, salience, position, hashes)
    np.testing.assert_array_equal(order_jit, order)
    np.testing.assert_array_equal(offsets_jit, offsets)
    pairs = set(zip(classes.tolist(), classes_jit.tolist(), strict=True))
    assert len(pairs) == len(set(classes.tolist())) == len(set(classes_jit.tolist()))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80))
def test_document_stats_equal_a_group_by_of_the_decisions(seed: int, n: int) -> None:
    """The bincount document statistics, recomputed from the decisions and the kept
    segments with a Polars group_by (order of first appearance)."""
    frame = random_table(seed, n)
    result = ingest_mod.ingest(frame)
    acts = result.decisions.with_columns(pl.col("action").cast(pl.String))
    expected = acts.group_by("doc_id", maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("original_count"),
        (pl.col("action") == "kept").sum().cast(pl.Int64).alias("final_count"),
        (pl.col("action") == "dropped_exact").sum().cast(pl.Int64).alias("exact_count"),
        (pl.col("action") == "merged_near").sum().cast(pl.Int64).alias("near_count"),
        (pl.col("action") == "filtered_low_salience").sum().cast(pl.Int64)
        .alias("filtered_count"),
    )
    boosts = result.kept.group_by("doc_id").agg(
        pl.col("salience_boost").mean().alias("avg_salience_boost"),
        pl.col("salience_boost").max().alias("max_salience_boost"))
    expected = expected.join(boosts, on="doc_id", how="left", maintain_order="left").with_columns(
        pl.col("avg_salience_boost", "max_salience_boost").fill_null(0.0))
    got = result.documents.select(expected.columns)
    assert got.get_column("doc_id").to_list() == expected.get_column("doc_id").to_list()
    for col in expected.columns[1:]:
        np.testing.assert_allclose(got.get_column(col).to_numpy(),
                                   expected.get_column(col).to_numpy(), rtol=1e-12)


def test_document_counts_equal_the_numpy_bincounts_bit_for_bit() -> None:
    """The jitted per-document pass (large inputs) against the bincounts of small ones:
    equal counts, boost sums and maxima, documents without kept rows at 0."""
    from arrowdedup.dedup.plan_jit import document_counts

    rng = np.random.default_rng(3)
    n, n_docs, n_actions = 20_000, 700, len(kernels.ACTION_NAMES)
    codes = rng.integers(0, n_docs - 5, n).astype(np.int64)  # 5 documents without rows
    action = rng.integers(0, n_actions, n).astype(np.int8)
    boost = np.where(rng.random(n) < 0.3, 0.0, rng.random(n))
    kept = action == kernels.KEPT
    counts, boost_sum, boost_max = document_counts(codes, action, boost, kept, n_docs,
                                                   n_actions)
    expected = np.bincount(codes * n_actions + action, minlength=n_docs * n_actions)
    np.testing.assert_array_equal(counts, expected.reshape(n_docs, n_actions))
    sums = np.bincount(codes[kept], weights=boost[kept], minlength=n_docs)
    assert sums.tobytes() == boost_sum.tobytes()
    maxima = np.zeros(n_docs)
    np.maximum.at(maxima, codes[kept], boost[kept])
    assert maxima.tobytes() == boost_max.tobytes()
