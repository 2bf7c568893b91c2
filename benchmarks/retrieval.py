"""Retrieval (issue 4): ``dedupe_ranked`` per call on 100 results, and ``search`` latency over a
1M-segment store beside the floor measured in the same run (one matrix–vector product over the
stored, memory-mapped embeddings).

The store is the synthetic corpus of :mod:`benchmarks.corpus` (20,000 documents × 50 segments ×
384-d, no near duplicates inside a document, one ``created_at`` per document) plus planted
cross-document duplicates (``CROSS_DOC_SHARE`` of the segments copied into another document),
so that retrieval dedup has something to remove; written by ``ingest()`` + ``write_store()``
(BM25 index included). Building it takes minutes,
so it is kept under the system temp directory and reused while its parameters match.

Queries: stored vectors plus noise (so each has a real neighbourhood) and, for the hybrid text
path, three vocabulary words; a text query is embedded by a lookup "embedder" that returns the
precomputed vector, so the timing covers BM25, fusion, dedup and the log write, not a model.
Latencies are warm (the store's small columns are loaded once per process; the first search
pays that load, reported separately).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .common import fmt, table, timed

TITLE = "Retrieval: cross-doc dedup and search latency (1M segments)"
FULL = {"docs": 20_000, "segments": 50, "dim": 384, "queries": 200, "k": 10}
QUICK = {"docs": 400, "segments": 50, "dim": 64, "queries": 40, "k": 10}
# The 0.2 ms dedupe target is retired (below what returning a Polars frame costs): 0.3 ms.
TARGETS = {"dedupe_ms_per_call": 0.3, "search_p50_over_floor": 1.5}
# Planted cross-document duplicates: this share of the segments is copied, as near
# duplicates (cosine ~0.97, same text), into another document, so retrieval dedup has work.
CROSS_DOC_SHARE = 0.05
DEDUPE_CALLS = {"quick": 500, "full": 2000}  # calls per timing round
MODEL = "bench:precomputed"


class LookupEmbedder:
    """Returns the precomputed vector of each known query text (no model in the timing)."""

    name = MODEL

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self._vectors = vectors
        self.dim = int(next(iter(vectors.values())).shape[0])

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vectors[t] for t in texts]).astype(np.float32)


def percentiles(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values)
    return {"p50_ms": float(np.percentile(arr, 50) * 1e3),
            "p95_ms": float(np.percentile(arr, 95) * 1e3),
            "mean_ms": float(arr.mean() * 1e3)}


def build_store(params: dict[str, Any], root: Path) -> tuple[Path, float]:
    """The benchmark store at ``root`` (reused when its parameters match); build seconds."""
    marker = root / "bench-params.json"
    wanted = {**{k: params[k] for k in ("docs", "segments", "dim", "seed")},
              "cross_doc_share": CROSS_DOC_SHARE, "format": 2}
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return root, 0.0
    import shutil

    import arrowdedup
    from arrowdedup.pipeline.run import write_store

    from .corpus import make_corpus

    shutil.rmtree(root, ignore_errors=True)
    start = time.perf_counter()
    corpus = make_corpus(params["docs"], params["segments"], params["dim"], near_fraction=0.0,
                         seed=params["seed"])
    frame = pl.from_arrow(corpus.table)
    assert isinstance(frame, pl.DataFrame)
    frame = plant_cross_doc(frame, corpus.matrix, params)
    del corpus
    rng = np.random.default_rng(params["seed"])
    days = rng.integers(0, 3650, size=params["docs"])
    doc_day = pl.Series(days).gather(
        frame.get_column("doc_id").str.slice(1).cast(pl.Int64))
    frame = frame.with_columns(
        (pl.lit(np.datetime64("2015-01-01T00:00:00", "us")) + pl.duration(days=doc_day))
        .alias("created_at"))
    result = arrowdedup.ingest(frame)
    del frame
    write_store(result, root, embedding_model=MODEL)
    marker.write_text(json.dumps(wanted))
    return root, time.perf_counter() - start


def open_bench_store(params: dict[str, Any], quick: bool) -> tuple[Any, float]:
    """The benchmark store, opened (built, or reused when its parameters match, under the
    temporary directory or ``ARROWDEDUP_RETRIEVAL_BENCH_STORE``), and its build seconds."""
    from arrowdedup import open_store

    root = Path(os.environ.get("ARROWDEDUP_RETRIEVAL_BENCH_STORE",
                               Path(tempfile.gettempdir()) /
                               f"arrowdedup-retrieval-bench-{'quick' if quick else 'full'}"))
    root, build_s = build_store(params, root)
    return open_store(root), build_s


def noisy_queries(vectors: Any, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, queries): ``count`` distinct stored vectors, each moved by a little noise and
    normalised again, so a query is near its row but never equal to it."""
    n, dim = vectors.shape
    rng = np.random.default_rng(seed)
    picks = rng.choice(n, size=count, replace=False)
    qvecs = np.asarray(vectors[picks], dtype=np.float32) \
        + 0.05 * rng.standard_normal((count, dim)).astype(np.float32)
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    return picks, qvecs


def plant_cross_doc(frame: pl.DataFrame, matrix: np.ndarray, params: dict[str, Any]
                    ) -> pl.DataFrame:
    """Copy ``CROSS_DOC_SHARE`` of the segments into another document each: same text, the
    vector plus small noise (cosine ~0.97), a new id; ingestion keeps them (another
    document), retrieval must skip them."""
    rng = np.random.default_rng(params["seed"] + 2)
    n = frame.height
    picks = np.sort(rng.choice(n, size=max(1, int(n * CROSS_DOC_SHARE)), replace=False))
    dim = matrix.shape[1]
    noisy = matrix[picks] + (0.25 / np.sqrt(dim)) * rng.standard_normal(
        (picks.size, dim)).astype(np.float32)
    docs = frame.get_column("doc_id").unique().sort()
    target = docs.gather(rng.integers(0, docs.len(), size=picks.size))
    copies = frame[picks].with_columns(
        pl.Series("doc_id", target),
        (pl.col("segment_id") + "-copy").alias("segment_id"),
        pl.Series("embedding", noisy).cast(frame.schema["embedding"]),
    )
    return pl.concat([frame, copies], how="vertical")


def bench_dedupe(dim: int, calls: int) -> dict[str, Any]:
    """``dedupe_ranked`` on 100 ranked results (a fifth of them near copies of earlier ones)."""
    from arrowdedup import dedupe_ranked
    from arrowdedup.retrieval.crossdoc_jit import duplicate_of

    rng = np.random.default_rng(3)
    m = rng.standard_normal((100, dim)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    copies = rng.choice(np.arange(20, 100), size=20, replace=False)
    m[copies] = m[rng.integers(0, 20, size=20)] \
        + (0.25 / np.sqrt(dim)) * rng.standard_normal((20, dim))  # cosine ~0.97
    frame = pl.DataFrame({
        "segment_id": [f"s{i:03d}" for i in range(100)],
        "doc_id": [f"d{i % 37}" for i in range(100)],
        "rrf": np.linspace(0.04, 0.01, 100),
    }).with_columns(pl.Series("embedding", m).cast(pl.Array(pl.Float32, dim)))
    out = dedupe_ranked(frame)  # warm-up: JIT cache, BLAS threads
    unit = m / np.linalg.norm(m, axis=1, keepdims=True)
    usable = np.ones(100, dtype=bool)
    lang = np.zeros(100, dtype=np.int64)
    duplicate_of(unit, usable, lang, 0.9)

    def per_call(fn: Any) -> list[float]:
        rounds = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            rounds.append((time.perf_counter() - start) / calls)
        return rounds

    whole = per_call(lambda: dedupe_ranked(frame))
    kernel = per_call(lambda: duplicate_of(unit, usable, lang, 0.9))
    return {"kept": out.height, "removed": 100 - out.height,
            "ms_per_call_median": statistics.median(whole) * 1e3,
            "ms_per_call_best": min(whole) * 1e3,
            "kernel_ms_per_call_median": statistics.median(kernel) * 1e3,
            "calls_per_round": calls, "rounds": 7}


def run(quick: bool) -> dict[str, Any]:
    from arrowdedup import search
    from arrowdedup.retrieval.search import store_view

    params = dict(QUICK if quick else FULL, seed=7)
    load_before = os.getloadavg()
    dedupe = bench_dedupe(params["dim"], DEDUPE_CALLS["quick" if quick else "full"])

    store, build_s = open_bench_store(params, quick)
    vectors = store.vectors()
    assert vectors is not None
    n, dim = vectors.shape
    picks, qvecs = noisy_queries(vectors, params["queries"], params["seed"] + 1)
    segs = store.segments(with_embeddings=False).select("text").collect().get_column("text")
    texts = [" ".join(str(segs[int(i)]).split()[:3]) for i in picks]
    embedder = LookupEmbedder(dict(zip(texts, qvecs, strict=True)))

    cold_s, _ = timed(lambda: search(store, qvecs[0], k=params["k"]))  # loads the store view
    view = store_view(store)
    parts = vectors.parts  # the stored embeddings, memory-mapped per bucket file
    _ = [p @ qvecs[0] for p in parts]  # page them in

    floor, vec_lat, text_lat, stages = [], [], [], []
    before_after = []
    for q, text in zip(qvecs, texts, strict=True):
        # The floor: one matrix–vector product over the stored embeddings (no scaling).
        start = time.perf_counter()
        scores = [p @ q for p in parts]
        floor.append(time.perf_counter() - start)
        del scores
        start = time.perf_counter()
        res = search(store, q, k=params["k"])
        vec_lat.append(time.perf_counter() - start)
        start = time.perf_counter()
        res = search(store, text, k=params["k"], embedder=embedder)
        text_lat.append(time.perf_counter() - start)
        stages.append(res.timings)
        before_after.append((res.before, res.after))
    f = percentiles(floor)
    v = percentiles(vec_lat)
    t = percentiles(text_lat)
    stage_med = {s: statistics.median(x[s] for x in stages if s in x) * 1e3
                 for s in ("embed", "dense", "bm25", "fuse", "dedup", "total")}
    removed = [b - a for b, a in before_after]
    figures = {
        "segments": int(n), "dim": int(dim),
        "dedupe_ranked_ms_per_call": dedupe["ms_per_call_median"],
        "dedupe_ranked_kernel_ms_per_call": dedupe["kernel_ms_per_call_median"],
        "dedupe_detail": dedupe,
        "floor_matvec": f,
        "search_vector": v,
        "search_hybrid_text": t,
        "search_vector_p50_over_floor": v["p50_ms"] / f["p50_ms"],
        "search_hybrid_p50_over_floor": t["p50_ms"] / f["p50_ms"],
        "hybrid_stage_median_ms": stage_med,
        "first_search_s": cold_s,
        "store_build_s": build_s,
        "load_average_1m_before_after": [load_before[0], os.getloadavg()[0]],
        "store_reused": build_s == 0.0,
        "view_rows": view.frame.height,
        "mean_candidates_past_floor": float(np.mean([b for b, _ in before_after])),
        "mean_removed_cross_doc": float(np.mean(removed)),
        "targets": TARGETS,
        "meets_targets": {
            "dedupe_ms_per_call": dedupe["ms_per_call_median"] <= TARGETS["dedupe_ms_per_call"],
            "search_p50_over_floor": max(v["p50_ms"], t["p50_ms"]) / f["p50_ms"]
            <= TARGETS["search_p50_over_floor"],
        },
    }
    def verdict(ratio: float) -> str:
        ok = ratio <= TARGETS["search_p50_over_floor"]
        return f"{'met' if ok else 'MISSED'} (≤ 1.5× floor)"

    rows = [
        ["floor: one matrix–vector product (E @ q)", f["p50_ms"], f["p95_ms"], 1.0, "–"],
        ["search(vector): dense + salience + freshness", v["p50_ms"], v["p95_ms"],
         v["p50_ms"] / f["p50_ms"], verdict(v["p50_ms"] / f["p50_ms"])],
        ["search(text, hybrid): dense + BM25 + salience + freshness", t["p50_ms"],
         t["p95_ms"], t["p50_ms"] / f["p50_ms"], verdict(t["p50_ms"] / f["p50_ms"])],
    ]
    dedupe_rows = [
        ["dedupe_ranked(100 results), whole call", dedupe["ms_per_call_median"],
         ("met" if dedupe["ms_per_call_median"] <= TARGETS["dedupe_ms_per_call"] else "MISSED")
         + " (≤ 0.3 ms)"],
        ["its kernel only (single-threaded Numba greedy)", dedupe["kernel_ms_per_call_median"],
         "–"],
    ]
    notes = [
        f"{n:,} stored segments × {dim}-d; {params['queries']} queries, k = {params['k']}, "
        f"N = max(3k, 50) candidates per signal; warm latencies (the first search, which loads "
        f"the store's small columns, took {cold_s:.2f} s). Every search also appends its "
        "retrieval-log file, included in the times.",
        "hybrid stage medians (ms): " + ", ".join(f"{k} {fmt(val)}" for k, val in
                                                   stage_med.items()),
        f"Shared machine: 1-minute load average {load_before[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after the run (2 cores), so absolute times are inflated; "
        "the floor is measured in the same loop, so the ratio is the fair figure.",
        f"dedupe_ranked: median of 7 rounds of {dedupe['calls_per_round']} calls on 100 "
        f"results ({dedupe['removed']} near copies removed).",
        f"Planted cross-document duplicates: {CROSS_DOC_SHARE:.0%} of the segments; the searches "
        f"removed {float(np.mean(removed)):.2f} cross-document duplicates per query on average "
        f"(of {float(np.mean([b for b, _ in before_after])):.1f} candidates past the floor).",
    ]
    return {
        "parameters": params,
        "figures": figures,
        "tables": [
            table("search latency (ms) vs the matrix–vector floor",
                  ["what", "p50 ms", "p95 ms", "p50 × floor", "target"], rows),
            table("dedupe_ranked per call (ms)", ["what", "ms", "target"], dedupe_rows),
        ],
        "notes": notes,
    }


def headline(result: dict[str, Any]) -> list[str]:
    f = result["figures"]
    return [
        f"Retrieval over {f['segments']:,} segments: hybrid search p50 "
        f"{f['search_hybrid_text']['p50_ms']:.0f} ms (p95 {f['search_hybrid_text']['p95_ms']:.0f}"
        f" ms) = {f['search_hybrid_p50_over_floor']:.2f}× the matrix–vector floor "
        f"({f['floor_matvec']['p50_ms']:.0f} ms); `dedupe_ranked` on 100 results "
        f"{f['dedupe_ranked_ms_per_call'] * 1e3:.0f} µs per call."
    ]
