"""Scale (issue 5): exact vs LSH on one large document, the real corpus, local vs Ray engines.

Parts (``python -m benchmarks.scale [--quick] [--parts exact,lsh,real,engines]``, under
``flock /tmp/arrowdedup-heavy.lock``; results merge into ``benchmarks/results/scale.json``):

- ``exact`` / ``lsh``: one document of n = 1k … 200k segments (384-d, seeded, planted near
  duplicates, :func:`benchmarks.corpus.make_corpus`): time and peak memory of the kernel stage
  (``ingest.run_kernels``, the dispatcher ``ingest()`` uses), the ratio to the BLAS floor (one
  ``X @ X.T`` while it fits in 4 GB, beyond that the same product row block by row block; for
  n > 50k the floor is timed on ``FLOOR_SAMPLE`` evenly spaced row blocks and scaled by the
  block count, every block being the same GEMM shape), and the recall of LSH (share of
  exact-mode ``merged_near`` segments that LSH mode also removes).
- ``crossover``: one document of n = 500 … 16k segments through the Numba scan and through the
  BLAS-blocked kernel (best of 3 each); the smallest n from which the blocked kernel stays
  faster is where ``Ingestion.BlockMinSegments`` belongs.
- ``real``: the opentelemetry.io corpus of ``../shared/data`` extracted, embedded with the
  Model2Vec model, concatenated into large documents; exact vs both LSH methods.
- ``engines``: ``ingest_to_store`` with ``engine="local"`` and ``engine="ray"`` on 1M
  segments in 20k documents (wall time, Ray start-up included); the two stores must hold
  byte-identical data files.

Peak memory is the largest resident set size seen by a 2 ms sampler during the measured call,
minus the resident size just before it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .common import (
    RESULTS,
    ROOT,
    SHARED_DATA,
    git_commit,
    machine,
    now,
    pyplot,
    save_figure,
    table,
    versions,
)

TITLE = "Scale: large documents (exact, LSH), real corpus, engines"
RSS_TARGET_GB = 3.0  # issue 13: peak RSS of a file -> store job, Ray workers included
SIZES = (1_000, 10_000, 50_000, 100_000, 200_000)
QUICK_SIZES = (1_000, 5_000)
CROSSOVER_SIZES = (500, 1_000, 2_000, 3_000, 4_000, 6_000, 8_000, 12_000, 16_000)
QUICK_CROSSOVER_SIZES = (500, 2_000)
FULL_PRODUCT_BYTES = 4 << 30
FLOOR_BLOCK = 4096
FLOOR_SAMPLE = 6
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE


def measured(fn: Callable[[], Any]) -> tuple[float, int, Any]:
    """(seconds, peak RSS above the start in bytes, value) of one call."""
    base = rss()
    elapsed, peak, value = _sampled(fn, rss, 0.002, base)
    return elapsed, peak - base, value


def _sampled(fn: Callable[[], Any], probe: Callable[[], int], interval: float,
             first: int) -> tuple[float, int, Any]:
    """(seconds, highest ``probe()`` reading from ``first`` on, value) of one call, sampled
    every ``interval`` seconds by a thread and once more after the call."""
    peak = [first]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], probe())
            time.sleep(interval)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    start = time.perf_counter()
    try:
        value = fn()
    finally:
        elapsed = time.perf_counter() - start
        stop.set()
        t.join()
    return elapsed, max(peak[0], probe()), value


def blas_floor(unit: np.ndarray) -> tuple[float, str]:
    """Seconds of the all-pairs product: one ``X @ X.T`` while its output fits in 4 GB, else
    row blocks of 4096 into one preallocated output (no page faults counted)."""
    n = unit.shape[0]
    if n * n * 4 <= FULL_PRODUCT_BYTES:
        best = min(measured(lambda: unit @ unit.T)[0] for _ in range(2 if n <= 20_000 else 1))
        return best, "X @ X.T"
    starts = list(range(0, n, FLOOR_BLOCK))
    picked = starts if n <= 50_000 else \
        [starts[i] for i in np.linspace(0, len(starts) - 2, FLOOR_SAMPLE).astype(int)]
    buf = np.empty((FLOOR_BLOCK, n), dtype=np.float32)
    np.matmul(unit[:FLOOR_BLOCK], unit.T, out=buf)  # touch the buffer once
    total = 0.0
    for s in picked:
        block = unit[s : s + FLOOR_BLOCK]
        t0 = time.perf_counter()
        np.matmul(block, unit.T, out=buf[: block.shape[0]])
        total += time.perf_counter() - t0
    how = "row blocks of 4096" if len(picked) == len(starts) else \
        f"{len(picked)} of {len(starts)} row blocks of 4096, scaled"
    return total * len(starts) / len(picked), how


def part_floor(rows: list[dict[str, Any]]) -> None:
    """Re-time the floor of earlier sweep rows (same seeded corpus) in place."""
    from .corpus import make_corpus

    for row in rows:
        if row.get("label") != "synthetic":
            continue
        corpus = make_corpus(1, row["n"], 384, near_fraction=0.5, seed=7)
        unit = (corpus.matrix / np.linalg.norm(corpus.matrix, axis=1, keepdims=True)
                ).astype(np.float32)
        floor, how = blas_floor(unit)
        row.update(floor_s=floor, floor_how=how, exact_over_floor=row["exact_s"] / floor)
        print(f"   floor n={row['n']}: {floor:.2f} s ({how})", flush=True)


def config(mode: str, method: str | None = None, **ingestion: Any) -> Any:
    """The default config in ``mode`` (LSH for every group), with Ingestion overrides."""
    from arrowdedup.config import DedupConfig, LshMethod, Mode

    base = DedupConfig()
    ing = dataclasses.replace(base.ingestion, mode=Mode.EXACT if mode == "exact" else Mode.LSH,
                              lsh_min_segments=1, **ingestion)
    if method:
        ing = dataclasses.replace(ing, lsh_method=LshMethod(method))
    return dataclasses.replace(base, ingestion=ing)


def prepared(frame: Any) -> tuple[Any, Any, Any]:
    """Plan, embeddings and texts of a segments frame, as ``ingest()`` builds them."""
    from arrowdedup.config import DedupConfig
    from arrowdedup.dedup.ingest import content_hash_codes, make_plan
    from arrowdedup.schema import embeddings_from

    emb = embeddings_from(frame)
    salience = frame.get_column("salience").cast(float).to_numpy() \
        if "salience" in frame.columns else np.ones(frame.height)
    plan = make_plan(frame, salience, content_hash_codes(frame), DedupConfig())
    return plan, emb, frame.get_column("text").to_arrow()


def compare(frame: Any, label: str, sizes_note: str, repeats: int) -> dict[str, Any]:
    """Exact vs both LSH methods on one prepared frame."""
    from arrowdedup.dedup.ingest import run_kernels

    plan, emb, texts = prepared(frame)
    row: dict[str, Any] = {"label": label, "n": frame.height, "groups": int(plan.sizes.shape[0]),
                           "largest_group": int(plan.sizes.max()), "note": sizes_note,
                           "input_mb": emb.matrix.nbytes / 2**20}
    exact_action = None
    for name, cfg in (("exact", config("exact")), ("hyperplane", config("lsh", "Hyperplane")),
                      ("minhash", config("lsh", "MinHash"))):
        # MinHash (word shingles, a Python-heavy path) runs once: it is not the LSH whose
        # speed-up is in question; exact and Hyperplane run ``repeats`` times.
        times = 1 if name == "minhash" else repeats
        runs = [measured(lambda cfg=cfg: run_kernels(plan, emb, cfg, None, texts=texts))
                for _ in range(times)]
        secs = statistics.median(r[0] for r in runs)
        peak = max(r[1] for r in runs)
        action = runs[-1][2][0]
        row[f"{name}_s"] = secs
        row[f"{name}_min_s"] = min(r[0] for r in runs)
        row[f"{name}_max_s"] = max(r[0] for r in runs)
        row[f"{name}_peak_mb"] = peak / 2**20
        if name == "exact":
            exact_action = action
            row["exact_merged_near"] = int((action == 1).sum())
        else:
            was = exact_action == 1
            got = action == 1
            row[f"{name}_recall"] = float(((action != 0) & was).sum() / max(1, was.sum()))
            # Every LSH merge is a verified >= threshold merge; precision asks whether exact
            # mode removed that segment too (a different greedy path may keep it).
            row[f"{name}_precision"] = float((got & (exact_action != 0)).sum()
                                             / max(1, got.sum()))
            row[f"{name}_keepset_diff"] = float(((action == 0) != (exact_action == 0)).sum()
                                                / max(1, action.shape[0]))
            row[f"{name}_speedup"] = row["exact_s"] / secs
        print(f"   {label} n={frame.height} {name}: {secs:.2f} s, peak +{peak / 2**20:.0f} MB",
              flush=True)
    return row


def part_sweep(quick: bool) -> list[dict[str, Any]]:
    import polars as pl

    from .corpus import make_corpus

    out = []
    for n in QUICK_SIZES if quick else SIZES:
        corpus = make_corpus(1, n, 384, near_fraction=0.5, seed=7)
        frame = pl.from_arrow(corpus.table)
        assert isinstance(frame, pl.DataFrame)
        row = compare(frame, "synthetic", "one document, 50 % planted copies", 3 if n <= 10_000
                      else 1)
        unit = corpus.matrix / np.linalg.norm(corpus.matrix, axis=1, keepdims=True)
        floor, how = blas_floor(unit.astype(np.float32))
        row.update(floor_s=floor, floor_how=how, exact_over_floor=row["exact_s"] / floor)
        print(f"   floor n={n}: {floor:.2f} s ({how})", flush=True)
        out.append(row)
        del corpus, frame, unit
    return out


def part_crossover(quick: bool) -> dict[str, Any]:
    """Numba scan vs BLAS-blocked kernel on one document per n (kernel stage, best of 3)."""
    import polars as pl

    from arrowdedup.config import IngestionConfig
    from arrowdedup.dedup.ingest import run_kernels

    from .corpus import make_corpus

    rows = []
    for n in QUICK_CROSSOVER_SIZES if quick else CROSSOVER_SIZES:
        corpus = make_corpus(1, n, 384, near_fraction=0.5, seed=7)
        plan, emb, _ = prepared(pl.from_arrow(corpus.table))
        row: dict[str, Any] = {"n": n}
        for name, cfg in (("numba", config("exact", block_min_segments=n + 1)),
                          ("blocked", config("exact", block_min_segments=1))):
            run_kernels(plan, emb, cfg, None)  # warm-up (JIT cache, BLAS threads)
            times = []
            for _ in range(3):
                start = time.perf_counter()
                action = run_kernels(plan, emb, cfg, None)[0]
                times.append(time.perf_counter() - start)
            row[f"{name}_s"] = min(times)
            row[f"{name}_removed"] = int((action != 0).sum())
        assert row["numba_removed"] == row["blocked_removed"], row  # same decisions
        row["blocked_over_numba"] = row["blocked_s"] / row["numba_s"]
        print(f"   crossover n={n}: numba {row['numba_s']:.3f} s, blocked {row['blocked_s']:.3f} s",
              flush=True)
        rows.append(row)
    # The smallest n from which the blocked kernel is faster at every larger measured n.
    crossover = None
    for i, row in enumerate(rows):
        if all(r["blocked_s"] < r["numba_s"] for r in rows[i:]):
            crossover = row["n"]
            break
    return {"rows": rows, "crossover_n": crossover,
            "block_min_segments_default": IngestionConfig().block_min_segments}


HARD_SIZES = (10_000, 50_000)
QUICK_HARD_SIZES = (2_000,)


def real_spectrum(quick: bool) -> tuple[np.ndarray | None, np.ndarray | None, str]:
    """Mean and covariance eigen-spectrum of real embeddings (Model2Vec on the shared corpus),
    or ``None`` when the shared data is absent."""
    from arrowdedup.embed.embedders import Model2VecEmbedder
    from arrowdedup.extract.core import extract_documents

    content = SHARED_DATA / "corpus" / "opentelemetry.io" / "content"
    model = SHARED_DATA / "models" / "m2v-minilm-l6-256"
    if not content.exists() or not model.exists():
        return None, None, "power-law spectrum (shared corpus absent)"
    texts = extract_documents(content).segments.get_column("text").head(
        5_000 if quick else 30_000).to_list()
    vectors = Model2VecEmbedder(model).encode(texts).astype(np.float64)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    mean = vectors.mean(axis=0)
    eig = np.linalg.eigvalsh(np.cov(vectors - mean, rowvar=False))[::-1].clip(min=0)
    return mean, eig, f"spectrum and mean of {len(texts):,} Model2Vec embeddings of the corpus"


def part_hard(quick: bool) -> list[dict[str, Any]]:
    """The hard synthetic mode: anisotropic vectors (the real embeddings' mean and spectrum)
    and copies at cosine 0.88–0.92 from their base, around the 0.90 threshold."""
    import polars as pl

    from .corpus import make_hard_corpus

    mean, eig, how = real_spectrum(quick)
    out = []
    for n in QUICK_HARD_SIZES if quick else HARD_SIZES:
        corpus = make_hard_corpus(n, mean=mean, spectrum=eig, seed=5)
        frame = pl.from_arrow(corpus.table)
        assert isinstance(frame, pl.DataFrame)
        row = compare(frame, "hard synthetic", f"one document; {how}; copies at cos "
                      "0.88–0.92", 3)
        out.append(row)
        del corpus, frame
    return out


def part_real(quick: bool) -> list[dict[str, Any]]:
    import polars as pl

    from arrowdedup.embed.embedders import Model2VecEmbedder
    from arrowdedup.extract.core import extract_documents

    content = SHARED_DATA / "corpus" / "opentelemetry.io" / "content"
    model = SHARED_DATA / "models" / "m2v-minilm-l6-256"
    if not content.exists() or not model.exists():
        return []
    frame = extract_documents(content).segments
    if quick:
        frame = frame.head(20_000)
    emb = Model2VecEmbedder(model)
    vectors = emb.encode(frame.get_column("text").to_list())
    frame = frame.with_columns(pl.Series("embedding", vectors).cast(pl.Array(pl.Float32,
                                                                             emb.dim)))
    frame = frame.drop([c for c in ("salience", "language") if c in frame.columns])
    out = []
    total = frame.height
    # The whole corpus as one document is the largest real document it allows; a split in
    # halves gives a second size. Labels say the real sizes.
    for parts in (1,) if quick else (2, 1):
        per_doc = -(-total // parts)
        big = frame.with_columns(
            (pl.lit("big-") + (pl.int_range(pl.len()) // per_doc).cast(pl.String)).alias("doc_id"),
            pl.lit("paragraph").alias("segment_type"),
            pl.int_range(pl.len()).cast(pl.Int32).alias("position"),
            pl.lit(1.0, dtype=pl.Float32).alias("salience"),
        )
        note = (f"{parts} documents of ≤ {per_doc:,} real segments" if parts > 1 else
                f"the whole corpus as one document of {total:,} real segments")
        out.append(compare(big, "opentelemetry.io (Model2Vec)", note, 1 if quick else 3))
    return out


def _tree_pids(root: int) -> list[int]:
    """Process ``root`` and all its descendants (Ray's raylet, GCS, workers)."""
    pids, seen = [root], set()
    while pids:
        pid = pids.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    pids.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return sorted(seen)


def rss_of(pids: list[int]) -> int:
    """Resident bytes of the processes, summed: a page several of them map (the
    memory-mapped input, Ray's object store) counts once per process."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * PAGE
        except (OSError, ValueError):
            continue
    return total


def pss_of(pids: list[int]) -> int:
    """The processes' proportional set size: a shared page is split among the processes that
    map it, so the sum is the memory they hold, each page once."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError):
            continue
    return total


ENGINE_SIDES = ("init", "local", "ray")


def engine_memory(eng: dict[str, Any]) -> tuple[float, bool]:
    """The engines' process-tree peak in GB (the larger engine's) and whether it meets the
    memory target."""
    peak_gb = max(eng.get("local_peak_mb") or 0.0, eng.get("ray_peak_mb") or 0.0) / 1024
    return peak_gb, peak_gb <= RSS_TARGET_GB


def engine_side(side: str, src: str, out: str) -> dict[str, float]:
    """One side of the engines part, in this (fresh) process: seconds from the call, imports
    excluded. ``init``: Ray's own start-up (``ray.init``, which imports Ray), and apart from it
    its shutdown as a run stops Ray (``stop_ray``), which a Ray run of ``ingest_to_store``
    also pays inside the call (beside its commit)."""
    from arrowdedup.pipeline.engines.ray import ray_start, stop_ray
    from arrowdedup.pipeline.run import ingest_to_store

    if side == "init":
        start = time.perf_counter()
        ray_start(None)
        elapsed = time.perf_counter() - start
        start = time.perf_counter()
        stop_ray()
        return {"seconds": elapsed, "shutdown_s": time.perf_counter() - start}
    start = time.perf_counter()
    ingest_to_store([src], out, buckets=16, engine=side)
    return {"seconds": time.perf_counter() - start}


def run_engine_side(side: str, src: Path, out: Path, sample: bool = False
                    ) -> tuple[dict[str, float], int, int]:
    """(the side's answer, peak resident bytes and peak proportional set size of its whole
    process tree) of one side in a fresh process. With ``sample`` the parent samples the child
    and its descendants, Ray's daemons and workers, every 20 ms; without, it only waits (0, 0
    for the peaks). A sample of a Ray tree costs ~20 ms of CPU (the kernel walks every
    process's page tables for its PSS), so timed runs are never sampled: on 2 cores the
    sampler took half a core from the side it measured, and more from Ray's ten processes
    than from local's one."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.scale", "--engine-side", side, "--src", str(src),
         "--dest", str(out)], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = peak_pss = 0
    if sample:
        while proc.poll() is None:
            pids = _tree_pids(proc.pid)  # one walk of the tree per sample, for both figures
            peak = max(peak, rss_of(pids))
            peak_pss = max(peak_pss, pss_of(pids))
            time.sleep(0.02)
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"engine side {side} failed: {stderr.strip()[-2000:]}")
    return json.loads(stdout.strip().splitlines()[-1]), peak, peak_pss


def part_engines(quick: bool) -> dict[str, Any]:
    """Local and Ray engines, and Ray's start-up alone, each run in a fresh process (no side
    keeps a warm Numba or warm workers from an earlier run), interleaved round by round; then
    one more run of each engine, sampled for its peak memory (the timed runs are not)."""
    import tempfile

    import pyarrow.feather as feather

    from .corpus import make_corpus

    docs = 400 if quick else 20_000
    corpus = make_corpus(docs, 50, 384, near_fraction=0.5, seed=11)
    out: dict[str, Any] = {"docs": docs, "segments": corpus.n, "repeats": 3,
                           "fresh_processes": True, "memory_sampled_apart": True}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        src = Path(tmp) / "in.arrow"
        feather.write_feather(corpus.table, src, compression="uncompressed")
        del corpus
        # Numba's on-disk cache is filled before any timed run: a fresh checkout compiles
        # once (about a minute), which no run of a user's but the first pays.
        run_engine_side("local", src, Path(tmp) / "warm-cache")
        secs: dict[str, list[float]] = {side: [] for side in ENGINE_SIDES}
        shutdowns: list[float] = []
        stores: dict[str, Path] = {}
        for i in range(3):
            for side in ENGINE_SIDES:
                store = Path(tmp) / f"{side}-{i}"
                answer, _, _ = run_engine_side(side, src, store)
                secs[side].append(answer["seconds"])
                if "shutdown_s" in answer:
                    shutdowns.append(answer["shutdown_s"])
                stores[side] = store
                print(f"   engine side {side} run {i + 1}: {answer['seconds']:.2f} s",
                      flush=True)
        out["identical"] = same_data_files(stores["local"], stores["ray"])
        for engine in ("local", "ray"):
            _, peak, peak_pss = run_engine_side(engine, src, Path(tmp) / f"{engine}-memory",
                                                sample=True)
            out[f"{engine}_peak_mb"] = peak / 2**20
            out[f"{engine}_peak_pss_mb"] = peak_pss / 2**20
            print(f"   engine {engine} memory run: tree peak {peak / 2**20:.0f} MB (PSS "
                  f"{peak_pss / 2**20:.0f} MB)", flush=True)
    out["ray_init_s"] = statistics.median(secs["init"])
    out["ray_shutdown_s"] = statistics.median(shutdowns)
    for engine in ("local", "ray"):
        out[f"{engine}_s"] = statistics.median(secs[engine])
        out[f"{engine}_min_s"], out[f"{engine}_max_s"] = min(secs[engine]), max(secs[engine])
    out["runs_s"] = secs
    out["ray_budget_s"] = 1.2 * (out["local_s"] + out["ray_init_s"])
    out["ray_within_budget"] = out["ray_s"] <= out["ray_budget_s"]
    return out


def same_data_files(a: Path, b: Path) -> bool:
    def files(root: Path) -> dict[str, bytes]:
        version = (root / "current").resolve()
        return {str(p.relative_to(version)): p.read_bytes() for p in sorted(version.rglob("*"))
                if p.is_file() and p.name != "manifest.json"}

    fa, fb = files(a), files(b)
    return bool(fa) and fa == fb


def run(quick: bool, parts: tuple[str, ...] = ("exact", "crossover", "real", "hard", "engines")
        ) -> dict[str, Any]:
    body: dict[str, Any] = {"parameters": {"sizes": list(QUICK_SIZES if quick else SIZES),
                                           "dim": 384, "threshold": 0.9},
                            "figures": {}, "tables": [], "notes": []}
    if "exact" in parts or "lsh" in parts:
        body["figures"]["sweep"] = part_sweep(quick)
    if "real" in parts:
        body["figures"]["real"] = part_real(quick)
    if "hard" in parts:
        body["figures"]["hard"] = part_hard(quick)
    if "crossover" in parts:
        body["figures"]["crossover"] = part_crossover(quick)
    if "engines" in parts:
        body["figures"]["engines"] = part_engines(quick)
    body["tables"] = tables(body["figures"])
    return body


def _spread(eng: dict[str, Any], engine: str) -> str:
    """An engine's median seconds with the min and max of its runs."""
    low, high = eng.get(f"{engine}_min_s"), eng.get(f"{engine}_max_s")
    median = f"{eng[f'{engine}_s']:.2f}"
    return median if low is None or high is None else f"{median} ({low:.2f}–{high:.2f})"


def tables(figures: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    rows = figures.get("sweep") or []
    if rows:
        out.append(table(
            "Exact vs LSH on one document (384-d, 50 % planted copies; kernel stage)",
            ["n", "exact s", "BLAS floor s", "exact / floor", "exact peak MB", "input MB",
             "Hyperplane s", "speed-up", "recall", "peak MB", "MinHash s", "recall ",
             "peak MB "],
            [[r["n"], r["exact_s"], r["floor_s"], r["exact_over_floor"], r["exact_peak_mb"],
              r["input_mb"], r["hyperplane_s"], r["hyperplane_speedup"], r["hyperplane_recall"],
              r["hyperplane_peak_mb"], r["minhash_s"], r["minhash_recall"],
              r["minhash_peak_mb"]] for r in rows],
            "Floor: " + "; ".join(f"{r['n']:,}: {r['floor_how']}" for r in rows)))
    cross = figures.get("crossover") or {}
    if cross.get("rows"):
        out.append(table(
            "Numba scan vs BLAS-blocked kernel on one document (384-d, 50 % planted copies; "
            "kernel stage, best of 3)",
            ["n", "Numba s", "blocked s", "blocked / Numba"],
            [[r["n"], r["numba_s"], r["blocked_s"], r["blocked_over_numba"]]
             for r in cross["rows"]],
            f"Blocked is faster from n = {cross['crossover_n']} on (of the sizes measured); "
            f"BlockMinSegments default: {cross['block_min_segments_default']:,}."))
    for key, title in (("real", "Real embeddings: the opentelemetry.io corpus (Model2Vec 256-d)"),
                       ("hard", "Hard synthetic mode: anisotropic vectors, copies at cosine "
                                "0.88–0.92")):
        rows = figures.get(key) or []
        if rows:
            out.append(table(
                f"{title} (kernel stage; median of the runs)",
                ["segments", "documents", "largest", "exact s", "Hyperplane s", "speed-up",
                 "recall", "precision", "keep-set diff", "MinHash s", "recall ",
                 "exact merges"],
                [[r["n"], r["note"], r["largest_group"], r["exact_s"], r["hyperplane_s"],
                  r["hyperplane_speedup"], r["hyperplane_recall"], r.get("hyperplane_precision"),
                  r.get("hyperplane_keepset_diff"), r["minhash_s"], r["minhash_recall"],
                  r["exact_merged_near"]] for r in rows],
                "recall: share of exact-mode merges LSH also removes; precision: share of LSH "
                "merges exact mode also removes; keep-set diff: share of segments kept by one "
                "mode and not the other. Exact and Hyperplane: median of 3 runs; MinHash: one "
                "run."))
    eng = figures.get("engines")
    if eng:
        budget = eng.get("ray_budget_s")
        verdict = ("–" if budget is None else
                   f"{'met' if eng['ray_s'] <= budget else 'MISSED'} (≤ {budget:.2f} s = "
                   "1.2 × (local + ray.init))")
        peak_gb, memory_met = engine_memory(eng)
        memory = (f"{'met' if memory_met else 'MISSED'} ({peak_gb:.2f} GB vs "
                  f"≤ {RSS_TARGET_GB:.0f} GB)")
        out.append(table(
            f"Engines: {eng['segments']:,} segments in {eng['docs']:,} documents, Arrow IPC "
            "file to store, 16 buckets, BM25 index included (wall, median of "
            f"{eng.get('repeats', 1)}"
            + ("; every run, ray.init's included, in a fresh process, the sides interleaved"
               if eng.get("fresh_processes") else "")
            + "; peak memory of the whole process tree, Ray workers included"
            + (", from one more run of each engine, sampled (the timed runs are not)"
               if eng.get("memory_sampled_apart") else "") + ")",
            ["local s (min–max)", "ray s (min–max)", "ray.init s", "ray.shutdown s",
             "time target", "local peak MB", "ray peak MB", "memory target", "local PSS MB",
             "ray PSS MB",
             "identical data files"],
            [[_spread(eng, "local"), _spread(eng, "ray"), eng.get("ray_init_s"),
              eng.get("ray_shutdown_s", "–"), verdict, eng.get("local_peak_mb"),
              eng.get("ray_peak_mb"), memory, eng.get("local_peak_pss_mb", "–"),
              eng.get("ray_peak_pss_mb", "–"), eng["identical"]]],
            "Peak MB: resident memory of the process tree summed over its processes (a page "
            "several processes map, such as the memory-mapped input or Ray's object store, "
            "counts once per process); the verdict is on it. PSS: the same tree's proportional "
            "set size, each page counted once. ray.shutdown (as a run stops the cluster it "
            "started) is not part of the start-up the time target allows; a Ray run pays it "
            "inside the call, beside its commit."))
    parts = figures.get("parts") or {}
    if parts:
        out.append(table("Parts: each records the commit it was measured at",
                         ["part", "commit", "dirty", "date"],
                         [[k, (v.get("commit") or "?")[:10], v.get("dirty"), v.get("date")]
                          for k, v in sorted(parts.items())]))
    return out


def plot(result: dict[str, Any], out_dir: Path) -> list[Path]:
    plt = pyplot()

    rows = (result.get("figures") or {}).get("sweep") or []
    if not rows:
        return []
    n = [r["n"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for key, label in (("exact_s", "exact (blocked)"), ("floor_s", "BLAS floor X·Xᵀ"),
                       ("hyperplane_s", "LSH Hyperplane"), ("minhash_s", "LSH MinHash")):
        ax.plot(n, [r[key] for r in rows], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("segments in the document")
    ax.set_ylabel("seconds")
    ax.set_title("One large document, 384-d, 2 cores")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return save_figure(fig, out_dir / "scale.png", dpi=120)


def headline(result: dict[str, Any]) -> list[str]:
    figures = result.get("figures") or {}
    lines = []
    rows = {r["n"]: r for r in figures.get("sweep") or []}
    if 200_000 in rows:
        r = rows[200_000]
        lines.append(f"200k-segment document: exact {r['exact_s']:.1f} s "
                     f"({r['exact_over_floor']:.2f}× the BLAS floor), Hyperplane LSH "
                     f"{r['hyperplane_s']:.1f} s = {r['hyperplane_speedup']:.1f}× faster "
                     f"(recall {r['hyperplane_recall']:.4f})")
    eng = figures.get("engines")
    if eng:
        line = (f"1M segments to a store: local {eng['local_s']:.1f} s, Ray "
                f"{eng['ray_s']:.1f} s (identical: {eng['identical']})")
        if eng.get("ray_budget_s"):
            peak_gb, memory_met = engine_memory(eng)
            line += (f"; Ray target ≤ {eng['ray_budget_s']:.1f} s = 1.2 × (local + ray.init "
                     f"{eng['ray_init_s']:.1f} s): "
                     f"{'met' if eng['ray_s'] <= eng['ray_budget_s'] else 'MISSED'}; "
                     f"process-tree peak {peak_gb:.2f} GB (≤ {RSS_TARGET_GB:.0f} GB: "
                     f"{'met' if memory_met else 'MISSED'})")
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--parts", default="exact,crossover,real,hard,engines")
    parser.add_argument("--out", type=Path, default=None)
    # One side of the engines part in this process (run_engine_side starts it).
    parser.add_argument("--engine-side", choices=ENGINE_SIDES, default=None)
    parser.add_argument("--src", default=None)
    parser.add_argument("--dest", default=None)
    args = parser.parse_args()
    if args.engine_side:
        print(json.dumps(engine_side(args.engine_side, args.src, args.dest)), flush=True)
        return
    parts = tuple(p.strip() for p in args.parts.split(","))
    out_dir = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "scale.json"
    start = time.perf_counter()
    # One part at a time, the JSON rewritten after each, so a late failure loses nothing.
    for part in parts:
        previous = json.loads(path.read_text()) if path.exists() else {}
        figures = dict(previous.get("figures") or {})
        if part == "floor":
            if figures.get("sweep"):
                part_floor(figures["sweep"])
        else:
            figures.update(run(args.quick, (part,))["figures"])
        parts_git = dict(figures.get("parts") or {})
        parts_git[part] = {**git_commit(), "date": now()}
        figures["parts"] = parts_git
        commands = dict(previous.get("commands") or {})
        commands[part] = ("flock /tmp/arrowdedup-heavy.lock .venv/bin/python -m benchmarks.scale"
                          + (" --quick" if args.quick else "") + f" --parts {part}")
        result = {
            "name": "scale", "title": TITLE, "quick": args.quick, "date": now(),
            "duration_s": round(time.perf_counter() - start, 2),
            "command": "flock /tmp/arrowdedup-heavy.lock .venv/bin/python -m benchmarks.scale"
                       + (" --quick" if args.quick else "") + f" --parts {args.parts}",
            "commands": commands,
            "machine": machine(), "versions": versions(), "git": git_commit(),
            "parameters": {"sizes": list(QUICK_SIZES if args.quick else SIZES), "dim": 384,
                           "threshold": 0.9},
            "figures": figures, "tables": tables(figures),
            "notes": ["Medians of the runs stated per table, on a shared 2-core machine; other "
                      "engineers' processes ran at the same time, so compare ratios measured in "
                      "one run. Each part records its own commit (table 'Parts')."],
        }
        path.write_text(json.dumps(result, indent=2, default=float) + "\n")
        images = plot(result, out_dir)
        if not args.quick and out_dir == RESULTS:
            render_readme(result, images)
        print(f"wrote {path} ({part})", flush=True)


def render_readme(result: dict[str, Any], images: list[Path]) -> None:
    """Regenerate this benchmark's block of benchmarks/README.md (the harness's format)."""
    from .__main__ import section_markdown
    from .common import replace_block

    readme = Path(__file__).resolve().parent / "README.md"
    text = readme.read_text()
    text = replace_block(text, "<!-- bench:scale:start -->", "<!-- bench:scale:end -->",
                         section_markdown(result, images, readme))
    readme.write_text(text)


if __name__ == "__main__":
    main()
