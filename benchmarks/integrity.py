"""Reads that notice damage (issue 45): what the block checksums cost.

- **search**: p50 of ``search`` over the 1M-segment store of :mod:`benchmarks.retrieval`
  (20,000 documents × 50 segments × 384-d, planted cross-document duplicates, BM25 index),
  damage detection on against off, in the same run and process: ``ROUNDS`` rounds, each
  opening the store afresh once with the checks and once without (the order alternates), with
  a cold first search (it loads the store's small columns and, with the checks on, hashes every
  block the dense scan reads) and then warm vector and hybrid-text searches. Median of the
  rounds' p50s, with min and max. The checks are switched off through
  ``ARROWDEDUP_BENCH_NO_READ_CHECKS=1``, which exists for this benchmark only.
- **write**: file → store (``ingest_to_store`` of an Arrow IPC file) of a 100k-segment corpus
  (2,000 documents × 50 × 384-d, half near duplicates), with the block checksums against the
  same job with their computation patched out (the whole-file checksums stay), alternating,
  ``ROUNDS`` each after one untimed job.
- the raw speed of the block hashing (XXH3-64 per 256 KiB block) over 1.5 GB in memory.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .common import table, timed

TITLE = "Damage detection: what the block checksums cost"
FULL = {"queries": 40, "write_docs": 2000, "segments": 50, "dim": 384}
QUICK = {"queries": 20, "write_docs": 200, "segments": 50, "dim": 64}
ROUNDS = 3
TARGETS = {"search_p50_on_over_off": 1.1}
OFF = "ARROWDEDUP_BENCH_NO_READ_CHECKS"


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _search_round(root: Path, checks: bool, qvecs: np.ndarray, texts: list[str],
                  embedder: Any, k: int) -> dict[str, float]:
    from arrowdedup import open_store, search
    from arrowdedup.retrieval.search import _VIEWS
    from arrowdedup.store.integrity import forget_checked

    if checks:
        os.environ.pop(OFF, None)
    else:
        os.environ[OFF] = "1"
    try:
        _VIEWS.clear()
        forget_checked()
        store = open_store(root)
        cold, _ = timed(lambda: search(store, qvecs[0], k=k))
        vec, txt = [], []
        for q, text in zip(qvecs, texts, strict=True):
            start = time.perf_counter()
            search(store, q, k=k)
            vec.append(time.perf_counter() - start)
            start = time.perf_counter()
            search(store, text, k=k, embedder=embedder)
            txt.append(time.perf_counter() - start)
        store.close()
    finally:
        os.environ.pop(OFF, None)
    return {"cold_s": cold, "vector_p50_ms": float(np.percentile(vec, 50) * 1e3),
            "hybrid_p50_ms": float(np.percentile(txt, 50) * 1e3)}


def bench_search(quick: bool, queries: int) -> dict[str, Any]:
    from . import retrieval

    params = dict(retrieval.QUICK if quick else retrieval.FULL, seed=7)
    root = Path(tempfile.gettempdir()) / \
        f"arrowdedup-integrity-bench-{'quick' if quick else 'full'}"
    root, build_s = retrieval.build_store(params, root)
    from arrowdedup import open_store

    store = open_store(root)
    assert "block_checksum" in store.manifest, "the store predates block checksums: remove it"
    vectors = store.vectors()
    assert vectors is not None
    picks, qvecs = retrieval.noisy_queries(vectors, queries, params["seed"] + 1)
    segs = store.segments(with_embeddings=False).select("text").collect().get_column("text")
    texts = [" ".join(str(segs[int(i)]).split()[:3]) for i in picks]
    embedder = retrieval.LookupEmbedder(dict(zip(texts, qvecs, strict=True)))
    segments = len(vectors)
    store.close()
    del vectors, store
    rounds: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    for r in range(ROUNDS):
        for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
            rounds[mode].append(_search_round(root, mode == "on", qvecs, texts, embedder,
                                              params["k"]))
    out: dict[str, Any] = {"segments": segments, "build_s": build_s, "rounds": rounds}
    for mode in ("on", "off"):
        for key in ("vector_p50_ms", "hybrid_p50_ms", "cold_s"):
            out[f"{key}_{mode}"] = spread([x[key] for x in rounds[mode]])
    for key in ("vector_p50_ms", "hybrid_p50_ms"):
        out[f"{key}_ratio"] = out[f"{key}_on"]["median"] / out[f"{key}_off"]["median"]
    return out


def _patched_off() -> Any:
    """Patch the writer to skip the block checksums (keeping the whole-file ones); returns
    the function that restores it."""
    from arrowdedup.store import writer

    saved = (writer.file_entry, writer.index_file_entry)
    writer.file_entry = lambda data: {writer.CHECKSUM: writer.checksum_bytes(data)}  # type: ignore[assignment]
    writer.index_file_entry = lambda path: {writer.CHECKSUM: writer.checksum_file(path)}  # type: ignore[assignment]

    def restore() -> None:
        writer.file_entry, writer.index_file_entry = saved

    return restore


def bench_write(params: dict[str, Any], tmp: Path) -> dict[str, Any]:
    import pyarrow.ipc as ipc

    from arrowdedup.pipeline.run import ingest_to_store

    from .corpus import make_corpus

    corpus = make_corpus(params["write_docs"], params["segments"], params["dim"], seed=5)
    source = tmp / "segments.arrow"
    with ipc.new_file(str(source), corpus.table.schema) as writer:
        writer.write_table(corpus.table)
    rows = corpus.table.num_rows
    del corpus

    def job(checks: bool) -> float:
        out = tmp / "store"
        shutil.rmtree(out, ignore_errors=True)
        restore = None if checks else _patched_off()
        try:
            seconds, _ = timed(lambda: ingest_to_store([source], out, quiet=True))
        finally:
            if restore is not None:
                restore()
        return seconds

    job(True)  # untimed: JIT cache, page cache
    times: dict[str, list[float]] = {"on": [], "off": []}
    for r in range(ROUNDS):
        for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
            times[mode].append(job(mode == "on"))
    from arrowdedup import open_store

    files = (open_store(tmp / "store").manifest.get("files") or {}).values()
    written = sum(int(e.get("bytes") or 0) for e in files)
    manifest_kb = (open_store(tmp / "store").version / "manifest.json").stat().st_size / 1024
    shutil.rmtree(tmp / "store", ignore_errors=True)
    return {"rows": rows, "on_s": spread(times["on"]), "off_s": spread(times["off"]),
            "times": times, "bytes_written_on": written, "manifest_kb_on": manifest_kb,
            "ratio": statistics.median(times["on"]) / statistics.median(times["off"])}


def bench_hash(megabytes: int) -> dict[str, Any]:
    from arrowdedup.store.integrity import block_digests

    data = np.random.default_rng(1).integers(0, 255, size=megabytes << 20, dtype=np.uint8)
    runs = [timed(lambda: block_digests(data))[0] for _ in range(ROUNDS)]
    return {"megabytes": megabytes, "seconds": spread(runs),
            "gb_per_s": megabytes / 1024 / statistics.median(runs)}


def run(quick: bool) -> dict[str, Any]:
    params = QUICK if quick else FULL
    load_before = os.getloadavg()[0]
    hashing = bench_hash(64 if quick else 1536)
    with tempfile.TemporaryDirectory(prefix="arrowdedup-integrity-write-") as tmp:
        write = bench_write(params, Path(tmp))
    search = bench_search(quick, params["queries"])
    ratio = max(search["vector_p50_ms_ratio"], search["hybrid_p50_ms_ratio"])
    met = ratio <= TARGETS["search_p50_on_over_off"]
    verdict = f"{'met' if met else 'MISSED'} (≤ {TARGETS['search_p50_on_over_off']}×)"

    def cell(s: dict[str, float], digits: int = 1) -> str:
        return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"

    search_rows = [
        ["search(vector) p50 ms", cell(search["vector_p50_ms_on"]),
         cell(search["vector_p50_ms_off"]), f"{search['vector_p50_ms_ratio']:.3f}", verdict],
        ["search(text, hybrid) p50 ms", cell(search["hybrid_p50_ms_on"]),
         cell(search["hybrid_p50_ms_off"]), f"{search['hybrid_p50_ms_ratio']:.3f}", verdict],
        ["first search after open, s", cell(search["cold_s_on"], 2),
         cell(search["cold_s_off"], 2),
         f"{search['cold_s_on']['median'] / search['cold_s_off']['median']:.3f}", "–"],
    ]
    write_rows = [
        [f"file → store, {write['rows']:,} segments, s", cell(write["on_s"], 2),
         cell(write["off_s"], 2), f"{write['ratio']:.3f}"],
    ]
    figures = {
        "search": search, "write": write, "hashing": hashing,
        "search_p50_on_over_off": ratio, "targets": TARGETS,
        "meets_targets": {"search_p50_on_over_off": met},
        "load_average_1m_before_after": [load_before, os.getloadavg()[0]],
    }
    notes = [
        f"{search['segments']:,} segments; {params['queries']} queries per round, vector and "
        f"hybrid text; {ROUNDS} rounds per side, alternating, each opening the store afresh; "
        "median of the rounds' p50 (min–max). Same process, same store files: the store is "
        "written with block checksums, and the off side reads it without checking them.",
        "With the checks on, each block a search reads is hashed once per process: the first "
        "search after opening hashes the embeddings it scans (every block, for a dense scan) "
        "and the columns it loads; later searches only look up which blocks are done.",
        f"Block hashing (XXH3-64 per 256 KiB) over {hashing['megabytes']:,} MB in memory: "
        f"{hashing['gb_per_s']:.1f} GB/s (median of {ROUNDS}).",
        f"Write: {write['bytes_written_on'] / 1e6:.0f} MB of store files; the manifest with "
        f"block checksums is {write['manifest_kb_on']:.0f} KB. The off side patches the "
        "block checksums out of the writer (whole-file checksums kept), in this process.",
        f"Shared machine: 1-minute load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after (2 cores); both sides run interleaved in the same "
        "rounds, so the ratio is the fair figure.",
    ]
    return {
        "parameters": {**params, "rounds": ROUNDS},
        "figures": figures,
        "tables": [
            table("search with damage detection on and off (median of rounds, min–max)",
                  ["what", "checks on", "checks off", "on / off", "target"], search_rows),
            table("file → store with and without block checksums (median, min–max)",
                  ["what", "with", "without", "with / without"], write_rows),
        ],
        "notes": notes,
    }


def headline(result: dict[str, Any]) -> list[str]:
    f = result["figures"]
    load = max(f["load_average_1m_before_after"])
    return [
        f"Damage detection: search p50 with block checks {f['search_p50_on_over_off']:.2f}× "
        f"the same search without (target ≤ 1.1×); file → store of "
        f"{f['write']['rows']:,} segments with block checksums {f['write']['ratio']:.2f}× the "
        f"same job without; block hashing {f['hashing']['gb_per_s']:.1f} GB/s (load average "
        f"up to {load:.0f} on 2 cores during the run)."
    ]
