"""The store's life (issue 14): an update and a delete against a full ingest, a no-op update,
disk use after 10 updates, search on an uncompacted store.

A store of 1M segments in 20,000 documents (the ingest-scale corpus, 384-d) is ingested from an
Arrow IPC file. Each *update step* changes 1 % of the documents (their texts and embeddings),
adds 0.5 % and deletes 0.5 %: one ``update_store`` call (``ingest --update``) on the IPC file
of the new corpus plus one ``delete_documents`` call. Every side is timed in this process the
same way (median of ``REPEATS`` runs, min and max; the update runs on a fresh hard-linked copy
of the base store each time), except the cold 10-segment ingest, which is a new
``python -m arrowdedup ingest`` process each run (what "cold" means).

Targets (issue 14), shown met or MISSED:

- update + delete ≤ max(5 % of the full ingest, 2 × cold 10-segment ingest + 2 s);
- a no-op ``--update`` ≤ 1 s + one read of the input (``read_table_file``, timed here);
- after 10 update steps with 5 versions kept, the store on disk (each file once: versions
  share their files by hard links) ≤ 1.3 × one compacted version;
- search p50 on the store with 10 uncompacted updates ≤ 1.1 × the compacted store's, for
  hybrid text queries (BM25 over the layers and dense) and semantic (vector) queries.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .common import ROOT, fmt, table

TITLE = "The store's life: update, delete, versions and search on deltas (1M segments)"
FULL = {"docs": 20_000, "segments": 50, "dim": 384}
QUICK = {"docs": 400, "segments": 25, "dim": 32}
REPEATS = 3
STEPS = 10
KEEP = 5
QUERIES = 40
SHARES = {"changed": 0.01, "added": 0.005, "deleted": 0.005}


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def verdict(value: float, target: float) -> str:
    return f"{'met' if value <= target else 'MISSED'} ({fmt(value)} ≤ {fmt(target)})"


def _save_ipc(frame: Any, path: Path) -> Path:
    import pyarrow.feather as feather

    feather.write_feather(frame.to_arrow(), path, compression="uncompressed")
    return path


def step_inputs(corpus: Any, rng: np.random.Generator, step: int) -> tuple[Any, list[str]]:
    """The next corpus for one update step (1 % changed, 0.5 % added) and the 0.5 % of
    doc_ids to delete afterwards."""
    import polars as pl

    ids = corpus.get_column("doc_id").unique().sort().to_numpy()
    n = ids.shape[0]
    pick = rng.permutation(n)
    n_changed = max(1, round(n * SHARES["changed"]))
    n_added = max(1, round(n * SHARES["added"]))
    n_deleted = max(1, round(n * SHARES["deleted"]))
    changed = ids[pick[:n_changed]].tolist()
    deleted = ids[pick[n_changed:n_changed + n_deleted]].tolist()
    templates = ids[pick[-n_added:]].tolist()
    dim = corpus.get_column("embedding").dtype.shape[0]  # type: ignore[attr-defined]
    is_changed = pl.col("doc_id").is_in(changed)
    noise = rng.standard_normal((corpus.height, dim), dtype=np.float32) * 0.01
    edited = corpus.with_columns(
        pl.when(is_changed).then(pl.col("text") + f" rev{step}").otherwise(pl.col("text"))
        .alias("text"),
        pl.when(is_changed).then(pl.col("embedding") + pl.Series(noise))
        .otherwise(pl.col("embedding")).alias("embedding"),
    )
    # New documents modelled on existing ones, their texts and vectors made their own (an
    # exact copy of another document would tie with it in search).
    added = corpus.filter(pl.col("doc_id").is_in(templates))
    spread_noise = rng.standard_normal((added.height, dim), dtype=np.float32) * 0.05
    added = added.with_columns(
        (pl.lit(f"s{step}-") + pl.col("doc_id")).alias("doc_id"),
        (pl.lit(f"s{step}-") + pl.col("segment_id")).alias("segment_id"),
        (pl.col("text") + f" new{step}").alias("text"),
        (pl.col("embedding") + pl.Series(spread_noise)).alias("embedding"))
    return pl.concat([edited, added]), deleted


def _link_copy(src: Path, dst: Path) -> Path:
    """A copy of a store whose files are hard links (versions are immutable)."""
    shutil.copytree(src, dst, copy_function=os.link, symlinks=True)
    return dst


def disk_bytes(root: Path) -> int:
    """Bytes of the store's versions on disk, each file (inode) once."""
    seen: dict[int, int] = {}
    for path in (root / "versions").rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            seen[st.st_ino] = st.st_size
    return sum(seen.values())


def version_bytes(version: Path) -> int:
    return sum(p.stat().st_size for p in version.rglob("*") if p.is_file())


def cold_ingest(tiny: Path, out: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "arrowdedup", "ingest", str(tiny), "--out", str(out),
                    "-q"], check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


class QueryEmbedder:
    """A stand-in embedder for text queries (the corpus has synthetic embeddings, no model):
    a vector seeded by the query's hash, the same in every run."""

    name = "bench-query-hash"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def encode(self, texts: Any, **_: Any) -> np.ndarray:
        import zlib

        return np.stack([np.random.default_rng(zlib.crc32(t.encode())).standard_normal(
            self.dim).astype(np.float32) for t in texts])


def _search(root: Path, q: Any, mode: str) -> Any:
    from arrowdedup.retrieval.search import search

    dim = q.shape[0] if isinstance(q, np.ndarray) else DIM[0]
    return search(root, q, k=10, mode=mode, embedder=QueryEmbedder(dim))


DIM = [0]  # the corpus dimension, set by run()
MODES = {"hybrid": "hybrid (text: BM25 + dense)", "semantic": "semantic (vector)"}


def search_p50(root: Path, texts: list[str], vectors: np.ndarray) -> dict[str, float]:
    _search(root, texts[0], "hybrid")  # warm: the store view and the index load
    _search(root, vectors[0], "semantic")
    out: dict[str, float] = {}
    for mode, queries in (("hybrid", texts), ("semantic", list(vectors))):
        times = []
        for q in queries:
            t = time.perf_counter()
            _search(root, q, mode)
            times.append(time.perf_counter() - t)
        out[mode] = float(np.percentile(times, 50))
    return out


def same_results(a: Path, b: Path, texts: list[str], vectors: np.ndarray
                 ) -> tuple[float, list[dict[str, Any]]]:
    """The share of queries whose top-10 is the same on both stores, and the differences."""
    same = 0
    queries = [("hybrid", t) for t in texts[:10]] + [("semantic", v) for v in vectors[:10]]
    diffs = []
    for mode, q in queries:
        ra = _search(a, q, mode).results
        rb = _search(b, q, mode).results
        if ra["segment_id"].to_list() == rb["segment_id"].to_list():
            same += 1
        else:
            cols = [c for c in ("segment_id", "score") if c in ra.columns]
            diffs.append({"mode": mode, "query": q if isinstance(q, str) else "vector",
                          "a": ra.select(cols).rows(), "b": rb.select(cols).rows()})
    return same / len(queries), diffs


def run(quick: bool) -> dict[str, Any]:
    import polars as pl

    from arrowdedup.pipeline.run import ingest_to_store
    from arrowdedup.pipeline.update import compact_store, delete_documents, update_store
    from arrowdedup.schema import read_table_file

    from .corpus import make_corpus

    params: dict[str, Any] = dict(QUICK if quick else FULL, seed=14, repeats=REPEATS,
                                  steps=STEPS, keep_versions=KEEP, shares=SHARES)
    corpus_gen = make_corpus(params["docs"], params["segments"], params["dim"],
                             seed=params["seed"])
    frame = pl.from_arrow(corpus_gen.table)
    assert isinstance(frame, pl.DataFrame)
    del corpus_gen
    rng = np.random.default_rng(params["seed"])
    DIM[0] = params["dim"]
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="arrowdedup-life-") as tmp_name:
        tmp = Path(tmp_name)
        base_ipc = _save_ipc(frame, tmp / "base.arrow")
        tiny = tmp / "tiny.parquet"
        frame.head(10).drop("embedding").write_parquet(tiny)

        full = []
        for _ in range(REPEATS):
            shutil.rmtree(tmp / "base", ignore_errors=True)
            t = time.perf_counter()
            ingest_to_store([base_ipc], tmp / "base", quiet=True)
            full.append(time.perf_counter() - t)
        base = tmp / "base"
        cold = [cold_ingest(tiny, tmp / f"tiny-{i}") for i in range(REPEATS)]

        nxt, deleted = step_inputs(frame, rng, 0)
        upd_ipc = _save_ipc(nxt, tmp / "update-0.arrow")
        upd, dele, both = [], [], []
        for i in range(REPEATS):
            root = _link_copy(base, tmp / f"upd-{i}")
            t = time.perf_counter()
            update_store(root, [upd_ipc])
            t_upd = time.perf_counter() - t
            delete_documents(root, deleted)
            total = time.perf_counter() - t
            upd.append(t_upd)
            dele.append(total - t_upd)
            both.append(total)

        reads, noop = [], []
        for _ in range(REPEATS):
            t = time.perf_counter()
            read_table_file(base_ipc)
            reads.append(time.perf_counter() - t)
            t = time.perf_counter()
            result = update_store(base, [base_ipc])
            noop.append(time.perf_counter() - t)
            assert result.changes and not (result.changes["added"] or result.changes["changed"])

        # Ten update steps (update + delete each) with 5 versions kept.
        life = _link_copy(base, tmp / "life")
        corpus = frame
        step_s = []
        for step in range(STEPS):
            nxt, deleted = step_inputs(corpus, rng, step + 1)
            path = _save_ipc(nxt, tmp / "step.arrow")
            t = time.perf_counter()
            update_store(life, [path], keep_versions=KEEP)
            delete_documents(life, deleted, keep_versions=KEEP)
            step_s.append(time.perf_counter() - t)
            corpus = nxt.filter(~pl.col("doc_id").is_in(deleted))
        on_disk = disk_bytes(life)
        compacted = _link_copy(life, tmp / "compacted")
        t = time.perf_counter()
        compact_store(compacted, keep_versions=1)
        compact_s = time.perf_counter() - t
        one_version = version_bytes((compacted / "current").resolve())

        texts = [" ".join(s.split()[:3]) for s in
                 corpus.get_column("text").sample(QUERIES, seed=1).to_list()]
        vectors = rng.standard_normal((QUERIES, params["dim"])).astype(np.float32)
        p50_layered = search_p50(life, texts, vectors)
        p50_compact = search_p50(compacted, texts, vectors)
        agree, differences = same_results(life, compacted, texts, vectors)

    med = {"full": statistics.median(full), "cold": statistics.median(cold),
           "both": statistics.median(both), "noop": statistics.median(noop),
           "read": statistics.median(reads)}
    update_target = max(0.05 * med["full"], 2 * med["cold"] + 2.0)
    figures.update({
        "full_ingest_s": spread(full), "cold_10_segment_ingest_s": spread(cold),
        "update_s": spread(upd), "delete_s": spread(dele), "update_plus_delete_s": spread(both),
        "update_target_s": update_target, "noop_update_s": spread(noop),
        "input_read_s": spread(reads), "noop_target_s": 1.0 + med["read"],
        "step_s": spread(step_s), "compact_s": compact_s,
        "disk_after_steps_mb": on_disk / 1e6, "compacted_version_mb": one_version / 1e6,
        "disk_ratio": on_disk / one_version,
        "search_p50_layered_ms": {k: v * 1e3 for k, v in p50_layered.items()},
        "search_p50_compacted_ms": {k: v * 1e3 for k, v in p50_compact.items()},
        "search_ratio": {k: p50_layered[k] / p50_compact[k] for k in p50_layered},
        "same_top10_share": agree, "top10_differences": differences,
    })
    return report(params, figures, quick)


def report(params: dict[str, Any], f: dict[str, Any], quick: bool) -> dict[str, Any]:
    def s(key: str) -> str:
        v = f[key]
        return f"{fmt(v['median'])} s (min {fmt(v['min'])}, max {fmt(v['max'])})"

    rows = [
        ["full ingest (IPC file → store)", s("full_ingest_s"), "", ""],
        ["cold 10-segment ingest (new process)", s("cold_10_segment_ingest_s"), "", ""],
        ["update (1 % changed, 0.5 % added)", s("update_s"), "", ""],
        ["delete (0.5 %)", s("delete_s"), "", ""],
        ["update + delete", s("update_plus_delete_s"),
         f"{fmt(f['update_plus_delete_s']['median'] / f['full_ingest_s']['median'])}× full",
         verdict(f["update_plus_delete_s"]["median"], f["update_target_s"])],
        ["no-op --update", s("noop_update_s"), f"read of the input {s('input_read_s')}",
         verdict(f["noop_update_s"]["median"], f["noop_target_s"])],
        ["one update step, 10 steps", s("step_s"), "", ""],
        ["compact after 10 steps", f"{fmt(f['compact_s'])} s", "", ""],
    ]
    size_rows = [
        ["store on disk after 10 steps, 5 kept", f"{fmt(f['disk_after_steps_mb'])} MB",
         f"{fmt(f['disk_ratio'])}× one compacted version "
         f"({fmt(f['compacted_version_mb'])} MB)", verdict(f["disk_ratio"], 1.3)],
    ]
    for mode, label in MODES.items():
        size_rows.append([
            f"search p50, {label}, 10 uncompacted updates",
            f"{fmt(f['search_p50_layered_ms'][mode])} ms",
            f"compacted {fmt(f['search_p50_compacted_ms'][mode])} ms",
            verdict(f["search_ratio"][mode], 1.1)])
    notes = [
        "Every side timed in this process, median of 3 (min, max), except the cold ingest "
        "(a new process per run). The update runs on a fresh hard-linked copy of the base.",
        f"Top-10 results equal between the uncompacted and the compacted store for "
        f"{f['same_top10_share']:.0%} of 20 queries.",
    ]
    if quick:
        notes.append("Quick mode: a small corpus; the targets are for the full size.")
    return {"parameters": params, "figures": f, "notes": notes, "tables": [
        table("Update and delete against a full ingest", ["side", "time", "ratio", "target"],
              rows),
        table("Disk and search after 10 update steps", ["measure", "value", "against",
                                                         "target"], size_rows),
    ]}


def headline(result: dict[str, Any]) -> list[str]:
    f = result["figures"]
    return [
        f"Store life: update + delete of 2 % of 20k documents in "
        f"{fmt(f['update_plus_delete_s']['median'])} s vs a full ingest of "
        f"{fmt(f['full_ingest_s']['median'])} s; no-op update "
        f"{fmt(f['noop_update_s']['median'])} s; disk after 10 updates "
        f"{fmt(f['disk_ratio'])}× a compacted version.",
    ]
