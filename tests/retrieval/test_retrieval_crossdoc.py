"""Cross-document dedup after ranking: SPEC §4 example, properties, edge cases."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from arrowdedup import (
    DedupConfig,
    NoEmbeddingsWarning,
    NoFactsWarning,
    RetrievalConfig,
    SchemaError,
    dedupe_ranked,
)
from arrowdedup.dedup import kernels
from arrowdedup.retrieval.crossdoc_jit import greedy_ranked, greedy_ranked_numpy
from tests.helpers import random_facts


def ranked(ids, vectors, **extra) -> pl.DataFrame:
    dim = next(len(v) for v in vectors if v is not None)
    emb = pl.Series("embedding", [None if v is None else [float(x) for x in v] for v in vectors],
                    dtype=pl.List(pl.Float32)).cast(pl.Array(pl.Float32, dim))
    return pl.DataFrame({"segment_id": ids, **extra}).with_columns(emb)


def with_cosine(base: np.ndarray, cos: float, rng: np.random.Generator) -> np.ndarray:
    """A unit vector at exactly ``cos`` to the unit vector ``base``."""
    other = rng.normal(size=base.shape)
    other -= other.dot(base) * base
    other /= np.linalg.norm(other)
    return cos * base + np.sqrt(1 - cos**2) * other


def test_spec_example_keeps_a1_a2_and_attributes_b1_to_a1():
    rng = np.random.default_rng(0)
    a1 = np.zeros(16)
    a1[0] = 1.0
    b1 = with_cosine(a1, 0.93, rng)
    a2 = with_cosine(a1, 0.2, rng)
    frame = ranked(["A1", "B1", "A2"], [a1, b1, a2],
                   text=["Authentication is configured via config.yaml",
                         "Configure auth using the config.yaml file",
                         "Set the API key in environment variables"],
                   rrf=[0.052, 0.048, 0.041])
    out = dedupe_ranked(frame)
    assert out.get_column("segment_id").to_list() == ["A1", "A2"]
    assert out.get_column("displaced_ids").to_list() == [["B1"], []]
    assert out.get_column("rrf").to_list() == [0.052, 0.041]


def test_threshold_comes_from_the_retrieval_config():
    rng = np.random.default_rng(1)
    a = np.eye(8)[0]
    frame = ranked(["a", "b"], [a, with_cosine(a, 0.93, rng)])
    strict = DedupConfig(retrieval=RetrievalConfig(similarity_threshold=0.95))
    assert dedupe_ranked(frame, strict).height == 2
    assert dedupe_ranked(frame).height == 1


def test_disabled_returns_the_input_unchanged():
    frame = ranked(["a", "b"], [np.ones(4), np.ones(4)])
    out = dedupe_ranked(frame, DedupConfig(retrieval=RetrievalConfig(enabled=False)))
    assert out.equals(frame)


def test_rows_without_embedding_are_kept_and_never_compared():
    frame = ranked(["a", "b", "c", "d"], [np.ones(4), None, np.zeros(4), np.ones(4)])
    out = dedupe_ranked(frame)
    assert out.get_column("segment_id").to_list() == ["a", "b", "c"]
    assert out.get_column("displaced_ids").to_list() == [["d"], [], []]


def test_warns_once_when_no_row_has_an_embedding():
    frame = ranked(["a", "b", "c"], [None, np.zeros(3), None])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = dedupe_ranked(frame.with_columns(text=pl.lit("same words")))
    assert [w.category for w in caught] == [NoEmbeddingsWarning]
    assert out.height == 3


def test_warns_when_results_carry_no_text_and_no_signature():
    frame = ranked(["a", "b"], [np.ones(3), np.ones(3)])
    with pytest.warns(NoFactsWarning, match="cosine alone"):
        out = dedupe_ranked(frame)
    assert out.get_column("segment_id").to_list() == ["a"]  # cosine-only: a duplicate
    off = DedupConfig(retrieval=RetrievalConfig(fact_guard=False))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dedupe_ranked(frame, off).height == 1


def test_fact_guard_keeps_different_facts_apart():
    # SPEC §4 step 5: "Upgrade from 3.4 to 3.5" is not a duplicate of "Upgrade from 3.3 to 3.4".
    texts = ["Upgrade from 3.3 to 3.4", "Upgrade from 3.4 to 3.5", "Upgrade from 3.3 to 3.4!"]
    frame = ranked(["a", "b", "c"], [np.ones(4)] * 3).with_columns(text=pl.Series(texts))
    out = dedupe_ranked(frame)
    assert out.get_column("segment_id").to_list() == ["a", "b"]
    assert out.get_column("displaced_ids").to_list() == [["c"], []]
    off = DedupConfig(retrieval=RetrievalConfig(fact_guard=False))
    assert dedupe_ranked(frame, off).get_column("segment_id").to_list() == ["a"]
    # A stored signature column is read instead of the text, with the same decisions.
    from arrowdedup import fact_signatures

    signed = frame.with_columns(fact_signatures(frame.get_column("text"))).drop("text")
    assert dedupe_ranked(signed).get_column("segment_id").to_list() == ["a", "b"]


def test_no_warning_when_some_row_has_an_embedding():
    frame = ranked(["a", "b"], [None, np.ones(3)]).with_columns(text=pl.lit("x"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dedupe_ranked(frame).height == 2


def test_languages_are_never_compared():
    frame = ranked(["en", "de", "en2"], [np.ones(4), np.ones(4), np.ones(4)],
                   language=["en", "de", "en"])
    out = dedupe_ranked(frame)
    assert out.get_column("segment_id").to_list() == ["en", "de"]
    assert out.get_column("displaced_ids").to_list() == [["en2"], []]


def test_skipped_row_goes_to_the_first_kept_match_in_rank_order():
    rng = np.random.default_rng(2)
    a = np.eye(32)[0]
    b = with_cosine(a, 0.7, rng)
    # c (the midpoint) is at ~0.92 to both a and b: attributed to a, the earlier kept row.
    c = a + b
    c /= np.linalg.norm(c)
    assert c.dot(a) >= 0.85 and c.dot(b) >= 0.85
    frame = ranked(["a", "b", "c"], [a, b, c])
    out = dedupe_ranked(frame, DedupConfig(retrieval=RetrievalConfig(similarity_threshold=0.85)))
    assert out.get_column("displaced_ids").to_list() == [["c"], []]


def test_arrow_input_and_plain_list_embeddings():
    table = pa.table({"segment_id": ["x", "y", "z"],
                      "embedding": pa.array([[1.0, 0.0], [1.0, 0.01], None],
                                            type=pa.list_(pa.float64()))})
    out = dedupe_ranked(table)
    assert out.get_column("segment_id").to_list() == ["x", "z"]
    assert out.get_column("displaced_ids").to_list() == [["y"], []]


def test_refuses_nan_and_missing_columns():
    with pytest.raises(SchemaError, match="NaN"):
        dedupe_ranked(ranked(["a", "b"], [np.ones(3), np.array([np.nan, 1, 1])]))
    with pytest.raises(SchemaError, match="'embedding'"):
        dedupe_ranked(pl.DataFrame({"segment_id": ["a"]}))


def test_integer_ids_and_a_stale_displaced_ids_column():
    frame = ranked([7, 8, 9], [np.ones(3), np.ones(3), np.eye(3)[0]],
                   displaced_ids=[["old"], [], []])
    out = dedupe_ranked(frame)
    assert out.columns == ["segment_id", "embedding", "displaced_ids"]
    assert out.schema["displaced_ids"] == pl.List(pl.Int64)
    assert out.get_column("displaced_ids").to_list() == [[8], []]
    kept_all = dedupe_ranked(frame[[0, 2]])
    assert kept_all.schema["displaced_ids"] == pl.List(pl.Int64)
    assert kept_all.get_column("displaced_ids").to_list() == [[], []]


def test_displaced_lists_keep_rank_order_across_many_owners():
    rng = np.random.default_rng(5)
    base = rng.normal(size=(5, 16))
    order = [0, 1, 2, 3, 4, 0, 3, 1, 0, 4, 3, 2, 0]  # later rows repeat earlier directions
    frame = ranked([f"r{i}" for i in range(len(order))], [base[k] for k in order])
    out = dedupe_ranked(frame)
    assert out.get_column("segment_id").to_list() == ["r0", "r1", "r2", "r3", "r4"]
    assert out.get_column("displaced_ids").to_list() == [
        ["r5", "r8", "r12"], ["r7"], ["r11"], ["r6", "r10"], ["r9"]]


def test_empty_input():
    frame = ranked(["a"], [np.ones(3)]).clear()
    out = dedupe_ranked(frame)
    assert out.height == 0 and "displaced_ids" in out.columns


# ----------------------------------------------------------------------------- properties


def random_ranked(seed: int, n: int, dim: int, null_share: float, langs: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    # Few directions plus noise, so near duplicates are common.
    centres = rng.normal(size=(max(2, n // 4), dim))
    vectors: list[np.ndarray | None] = []
    for _ in range(n):
        v = centres[rng.integers(len(centres))] + rng.normal(scale=0.25, size=dim)
        vectors.append(None if rng.random() < null_share else v)
    if all(v is None for v in vectors):
        vectors[0] = rng.normal(size=dim)
    extra = {"language": [f"l{rng.integers(langs)}" for _ in range(n)]} if langs else {}
    return ranked([f"id{i:03d}" for i in range(n)], vectors, **extra)


def cosines(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    m = np.array([np.zeros(frame.get_column("embedding").dtype.size) if v is None else v
                  for v in frame.get_column("embedding").to_list()], dtype=np.float64)
    norms = np.linalg.norm(m, axis=1)
    ok = norms > 0
    m[ok] /= norms[ok, None]
    return m @ m.T, ok


params = st.tuples(st.integers(0, 10_000), st.integers(1, 60), st.integers(2, 24),
                   st.sampled_from([0.0, 0.2]), st.sampled_from([0, 2]),
                   st.sampled_from([0.5, 0.8, 0.9]))


@settings(max_examples=60, deadline=None)
@given(params)
def test_properties_subsequence_coverage_and_no_kept_pair(p):
    seed, n, dim, null_share, langs, thr = p
    frame = random_ranked(seed, n, dim, null_share, langs)
    cfg = DedupConfig(retrieval=RetrievalConfig(similarity_threshold=thr))
    out = dedupe_ranked(frame, cfg)
    ids = frame.get_column("segment_id").to_list()
    kept = out.get_column("segment_id").to_list()
    pos = {s: i for i, s in enumerate(ids)}
    kept_pos = [pos[s] for s in kept]
    assert kept_pos == sorted(kept_pos)  # subsequence, order kept
    gram, ok = cosines(frame)
    lang = frame.get_column("language").to_list() if langs else [None] * n
    eps = 1e-5  # SPEC §5: BLAS and float64 may differ in the last bits
    kept_set = set(kept_pos)
    skipped = [i for i in range(n) if i not in kept_set]
    owner = {pos[d]: pos[k] for k, ds in zip(kept, out.get_column("displaced_ids").to_list(),
                                              strict=True) for d in ds}
    assert sorted(owner) == skipped  # every skipped row is attributed exactly once
    for i in skipped:
        j = owner[i]
        assert j < i and ok[i] and lang[i] == lang[j] and gram[i, j] >= thr - eps
    for a in kept_pos:
        for b in kept_pos:
            if a < b and ok[a] and ok[b] and lang[a] == lang[b]:
                assert gram[a, b] < thr + eps
    assert dedupe_ranked(frame, cfg).equals(out)  # deterministic


@settings(max_examples=40, deadline=None)
@given(params)
def test_numba_kernel_equals_numpy_twin(p):
    seed, n, dim, null_share, langs, thr = p
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, dim)).astype(np.float32)
    m[rng.random(n) < 0.3] = m[0]
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    usable = rng.random(n) > null_share
    lang = rng.integers(0, max(langs, 1), n).astype(np.int64)
    off, val, modes = kernels.no_facts(n)
    a = greedy_ranked(m, usable, lang, thr, off, val, modes, False)
    b = greedy_ranked_numpy(m, usable, lang, thr)
    assert np.array_equal(a, b)
    # With random fact signatures, the guarded kernel equals the guarded twin.
    facts = random_facts(n, seed % 10_000)
    a = greedy_ranked(m, usable, lang, thr, *facts, True)
    b = greedy_ranked_numpy(m, usable, lang, thr, facts)
    assert np.array_equal(a, b)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 70), st.sampled_from([3, 16, 17, 40, 384]),
       st.sampled_from([0, 3]), st.sampled_from([0.8, 0.9]))
def test_dedupe_ranked_equals_the_numpy_twin_on_raw_vectors(seed, n, dim, langs, thr):
    """The one-call path (unnormalised rows, padded aligned copy, rows in pairs) decides like
    the Gram-matrix twin on unit vectors, for every size parity and dimension."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(1, n // 3), dim))
    m = centres[rng.integers(len(centres), size=n)] + rng.normal(scale=0.05, size=(n, dim))
    m *= rng.uniform(0.5, 3.0, size=(n, 1))  # not unit length
    unit32 = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
    gram = unit32.astype(np.float64) @ unit32.T.astype(np.float64)
    assume(not (np.abs(gram - thr) < 1e-4).any())  # clear of the rounding band
    lang = [f"l{v}" for v in rng.integers(0, max(langs, 1), n)]
    frame = ranked([f"r{i}" for i in range(n)], list(m), **({"language": lang} if langs else {}))
    out = dedupe_ranked(frame, DedupConfig(retrieval=RetrievalConfig(similarity_threshold=thr)))
    codes = np.unique(lang, return_inverse=True)[1].astype(np.int64) if langs else \
        np.zeros(n, dtype=np.int64)
    rep = greedy_ranked_numpy(unit32, np.ones(n, dtype=bool), codes, thr)
    assert out.get_column("segment_id").to_list() == [f"r{i}" for i in range(n) if rep[i] < 0]
    expected = [[f"r{j}" for j in range(n) if rep[j] == i] for i in range(n) if rep[i] < 0]
    assert out.get_column("displaced_ids").to_list() == expected
