"""What a user writes by hand (the baselines of issues 2, 7 and 13), and the SemHash peer.

Not a benchmark module (no ``run``): helpers shared by ``ingest_scale`` and ``peers``.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

# The peers and the hand-written baseline have no fact guard: they are compared with
# arrowdedup run the same way (issue 12, item 6), and the guarded time is reported beside.
UNGUARDED = {"Ingestion": {"FactGuard": False}}


def best_ingest(table: pa.Table, repeats: int, warmup: int = 1, *, fact_guard: bool = True
                ) -> dict[str, Any]:
    """``arrowdedup.ingest(table)`` ``repeats`` times after ``warmup`` untimed runs (the JIT
    cache load): best wall time, best ``timings["kernel"]`` and best of every stage, all from
    the same runs, plus the last result. ``fact_guard=False`` runs it with
    ``Ingestion.FactGuard: false`` (cosine-only, like the peers)."""
    import arrowdedup
    from arrowdedup.config import resolve_config

    config = resolve_config(None if fact_guard else UNGUARDED)
    result = None
    for _ in range(warmup):
        result = arrowdedup.ingest(table, config)
    walls, stages = [], []
    for _ in range(max(1, repeats)):
        gc.collect()
        start = time.perf_counter()
        result = arrowdedup.ingest(table, config)
        walls.append(time.perf_counter() - start)
        stages.append(dict(result.timings))
    return {
        "best": min(walls),
        "median": statistics.median(walls),
        "kernel": min(t["kernel"] for t in stages),
        "stages": {k: min(t.get(k, float("nan")) for t in stages) for k in stages[0]},
        "result": result,
    }


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def groupby_greedy(table: pa.Table, matrix: np.ndarray, threshold: float = 0.90) -> np.ndarray:
    """Polars ``group_by("doc_id")``, per group a sort by salience, per candidate
    ``np.max(E[selected] @ e) >= threshold`` in NumPy. Returns the kept row indices, sorted."""
    E = unit_rows(matrix)
    frame = pl.from_arrow(table.select(["doc_id", "salience", "position"])).with_row_index("row")
    assert isinstance(frame, pl.DataFrame)
    kept: list[int] = []
    for _, group in frame.group_by("doc_id"):
        rows = group.sort(["salience", "position"], descending=[True, False])["row"].to_numpy()
        selected: list[int] = []
        for r in rows:
            e = E[r]
            if selected and np.max(E[selected] @ e) >= threshold:
                continue
            selected.append(int(r))
        kept.extend(selected)
    return np.sort(np.asarray(kept, dtype=np.int64))


def gram_greedy(table: pa.Table, matrix: np.ndarray, threshold: float = 0.90) -> np.ndarray:
    """The competent baseline: Polars ``group_by("doc_id")`` (rows in salience order), one
    ``G = E @ E.T`` per document, then the greedy pass over ``G`` (a candidate is dropped when
    ``G[i, selected]`` reaches the threshold). Returns the kept row indices, sorted."""
    E = unit_rows(matrix)
    frame = pl.from_arrow(table.select(["doc_id", "salience", "position"])).with_row_index("row")
    assert isinstance(frame, pl.DataFrame)
    groups = (frame.sort(["doc_id", "salience", "position"], descending=[False, True, False])
              .group_by("doc_id", maintain_order=True).agg(pl.col("row")))
    kept: list[np.ndarray] = []
    for rows_list in groups.get_column("row").to_list():
        rows = np.asarray(rows_list, dtype=np.int64)
        gram = E[rows] @ E[rows].T
        selected: list[int] = []
        for i in range(rows.shape[0]):
            if selected and gram[i, selected].max() >= threshold:
                continue
            selected.append(i)
        kept.append(rows[selected])
    return np.sort(np.concatenate(kept)) if kept else np.empty(0, np.int64)


def salience_order(table: pa.Table) -> np.ndarray:
    """Row order of arrowdedup's greedy pass inside one group: salience desc, position asc."""
    frame = pl.from_arrow(table.select(["salience", "position"]))
    assert isinstance(frame, pl.DataFrame)
    return frame.select(
        pl.arg_sort_by(["salience", "position"], descending=[True, False], maintain_order=True)
    ).to_series().to_numpy()


class _NoEncoder:
    """SemHash wants a model; with pre-computed embeddings it is never called."""

    def encode(self, sentences: list[str], **_: object) -> np.ndarray:
        raise RuntimeError("the benchmark passes embeddings; nothing should be encoded")


def semhash_basic(texts: list[str], matrix: np.ndarray, ids: np.ndarray,
                  threshold: float = 0.90) -> np.ndarray:
    """SemHash 0.5 exact greedy (``Backend.BASIC``) over records already in greedy order.

    Returns the ids of the selected records, sorted. Records carry their id so exact-text
    copies (which SemHash groups before the index) map back to rows.
    """
    from semhash import SemHash
    from vicinity import Backend

    records = [{"text": t, "id": str(i)} for t, i in zip(texts, ids.tolist(), strict=True)]
    sh = SemHash.from_embeddings(embeddings=matrix, records=records, model=_NoEncoder(),
                                 columns=["text"], ann_backend=Backend.BASIC)
    result = sh.self_deduplicate(threshold=threshold)
    return np.sort(np.asarray([int(r["id"]) for r in result.selected], dtype=np.int64))
