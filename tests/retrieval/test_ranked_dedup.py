"""The search's cross-document dedup without Numba: the kernel's decisions, certified, with
the kernel deciding whenever a cosine lies too close to the threshold; a fresh search process
imports neither Numba nor anything else it does not use, and answers as the kernel path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrowdedup.dedup import kernels
from arrowdedup.retrieval import crossdoc_jit as crossdoc
from arrowdedup.retrieval.ranked_dedup import (
    certified_scan,
    displaced_lists,
    duplicate_of,
    output_plan,
)
from tests.helpers import M2V_MODEL, ROOT, random_facts


def _clustered(seed: int, n: int, dim: int, spread: float) -> np.ndarray:
    """Unit float32 rows around a few directions, so near duplicates are common."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(1, n // 4), dim))
    m = centres[rng.integers(len(centres), size=n)] + rng.normal(scale=spread, size=(n, dim))
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def _kernel(unit, usable, lang, thr, facts=None) -> np.ndarray:
    f = facts if facts is not None else kernels.no_facts(unit.shape[0])
    return crossdoc.greedy_ranked(unit, usable, lang, kernels.effective_threshold(thr), *f,
                                  facts is not None)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 160), st.sampled_from([3, 16, 40, 384]),
       st.sampled_from([0.05, 0.2, 0.5]), st.sampled_from([1, 3]),
       st.sampled_from([0.8, 0.9, 0.95, 1.0]), st.booleans())
def test_certified_scan_equals_the_kernel(seed, n, dim, spread, langs, thr, guarded):
    rng = np.random.default_rng(seed + 1)
    unit = _clustered(seed, n, dim, spread)
    unit[rng.random(n) < 0.2] = unit[0]  # exact repeats: cosines at 1 within float noise
    usable = rng.random(n) > 0.1
    lang = rng.integers(0, langs, n).astype(np.int64)
    facts = random_facts(n, seed) if guarded else None
    rep = certified_scan(unit, usable, lang, thr, facts)
    expected = _kernel(unit, usable, lang, thr, facts)
    if rep is None:  # a cosine inside the rounding bound: only the kernel may decide
        assert np.array_equal(duplicate_of(unit, usable, lang, thr, facts), expected)
    else:
        assert np.array_equal(rep, expected)


def test_the_scan_certifies_ordinary_lists():
    """Clear of the threshold the NumPy scan decides by itself (the kernel is not needed)."""
    certified = 0
    for seed in range(20):
        unit = _clustered(seed, 100, 384, 0.3)
        n = unit.shape[0]
        rep = certified_scan(unit, np.ones(n, bool), np.zeros(n, np.int64), 0.9)
        if rep is not None:
            certified += 1
            assert np.array_equal(rep, _kernel(unit, np.ones(n, bool), np.zeros(n, np.int64),
                                               0.9))
            assert (rep >= 0).any()  # real duplicates were judged
    assert certified >= 18


def test_a_cosine_on_the_threshold_is_left_to_the_kernel():
    rng = np.random.default_rng(3)
    a = rng.normal(size=384)
    a /= np.linalg.norm(a)
    other = rng.normal(size=384)
    other -= other.dot(a) * a
    other /= np.linalg.norm(other)
    unit = np.stack([a, a]).astype(np.float32)
    cos = float(unit[0].astype(np.float64) @ unit[1].astype(np.float64))
    # The threshold at the pair's own cosine: float noise decides, so the scan must not.
    thr = cos + kernels.COSINE_SLACK
    assert certified_scan(unit, np.ones(2, bool), np.zeros(2, np.int64), thr) is None
    b = (0.5 * a + np.sqrt(0.75) * other).astype(np.float32)  # cosine 0.5: far from 0.9
    unit = np.stack([a.astype(np.float32), b])
    assert np.array_equal(certified_scan(unit, np.ones(2, bool), np.zeros(2, np.int64), 0.9),
                          [-1, -1])


def test_non_finite_rows_are_left_to_the_kernel():
    unit = _clustered(1, 6, 8, 0.1)
    unit[2, 3] = np.inf
    assert certified_scan(unit, np.ones(6, bool), np.zeros(6, np.int64), 0.9) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-1, 30), min_size=0, max_size=40))
def test_output_plan_equals_the_kernel_plan(raw):
    # A valid rep: each skipped row points at an earlier kept row.
    rep = np.full(len(raw), -1, dtype=np.int64)
    for i, r in enumerate(raw):
        kept = np.flatnonzero(rep[:i] < 0)
        if r >= 0 and kept.size:
            rep[i] = kept[r % kept.size]
    order, offsets, nkept = output_plan(rep)
    k_order, k_offsets, k_nkept = crossdoc.output_plan(rep)
    assert nkept == k_nkept
    assert order.dtype == k_order.dtype and np.array_equal(order, k_order)
    assert np.array_equal(offsets, k_offsets)
    ids = pa.array([f"s{i}" for i in range(len(rep))])
    kept, lists = displaced_lists(ids, rep)
    k_kept, k_lists = crossdoc.displaced_lists(ids, rep)
    assert np.array_equal(kept, k_kept) and lists.equals(k_lists)


_FRESH = textwrap.dedent("""
    import json, sys
    from arrowdedup.retrieval.search import search
    if sys.argv[2] == "kernel":
        import arrowdedup.retrieval.crossdoc_jit  # loaded: the dedup takes the Numba kernel
    out = {}
    for q in ("how are webhooks retried", "invoices finalized", "payment retries"):
        r = search(sys.argv[1], q, k=5, embedder=sys.argv[3])
        out[q] = [r.results.to_dicts(), r.before, r.after]
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in (
        "numba", "torch", "sentence_transformers", "transformers", "duckdb")
        or m == "arrowdedup.extract.core")
    print(json.dumps({"results": out, "loaded": loaded}, default=str))
""")


def test_a_fresh_search_loads_no_numba_and_answers_as_the_kernel(tmp_path, embedder):
    from arrowdedup import ingest_to_store
    from tests.helpers import segments_frame

    # Near repeats in other documents (and one with another number: the guard keeps it).
    texts = ["Webhooks are retried eight times over three days.",
             "Failed payments are retried four times.",
             "Invoices are finalized at the end of each billing period.",
             "Webhooks are retried eight times over three days!",
             "Failed payments are retried five times.",
             "Invoices are finalized at the end of every billing period."]
    frame = segments_frame(texts, list(embedder.encode(texts)),
                           doc_id=[f"d{i}" for i in range(len(texts))])
    store = tmp_path / "store"
    ingest_to_store(frame, store, embedding_model=embedder.name, quiet=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    runs = {}
    for path in ("numpy", "kernel"):
        proc = subprocess.run([sys.executable, "-c", _FRESH, str(store), path,
                               f"model2vec:{M2V_MODEL}"], env=env,
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[path] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert runs["numpy"]["loaded"] == []
    assert "numba" in runs["kernel"]["loaded"]
    assert runs["numpy"]["results"] == runs["kernel"]["results"]
    removed = sum(b - a for _, b, a in runs["numpy"]["results"].values())
    assert removed > 0, "no cross-document duplicate was judged"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
