"""Stage timings you can trust: one set of keys (``arrowdedup.timings.STAGES``) for a full
ingest, an update, a delete and a compaction, in the JobResult and in the manifest; every
value >= 0; ``total`` the wall time, at least the sum of the stages that run one after
another."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

import polars as pl
import pytest

from arrowdedup import (
    JobResult,
    compact_store,
    delete_documents,
    ingest_to_store,
    open_store,
    update_store,
)
from arrowdedup.timings import IN_BUCKETS, SEQUENTIAL, STAGES, complete
from tests.helpers.pipeline import corpus

TOLERANCE = 0.05  # seconds: perf_counter readings taken a few statements apart


def check(timings: Mapping[str, float], wall: float | None = None) -> None:
    assert set(timings) == set(STAGES)  # a manifest's keys are sorted; a JobResult's in order
    assert all(isinstance(v, float) and v >= 0.0 for v in timings.values()), dict(timings)
    assert timings["total"] > 0.0
    assert timings["total"] + TOLERANCE >= sum(timings[k] for k in SEQUENTIAL), dict(timings)
    if wall is not None:
        assert timings["total"] <= wall + TOLERANCE


def timed(run: Callable[[], JobResult]) -> tuple[JobResult, float]:
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


def check_run(result: JobResult, wall: float) -> None:
    assert tuple(result.timings) == STAGES
    check(result.timings, wall)
    manifest = open_store(result.root).manifest["timings"]
    check(manifest)
    # The manifest is written before the switch: its commit and total stop there.
    assert manifest["total"] <= result.timings["total"] + TOLERANCE
    for key in ("compile", "extract", "embedder_load", "embed", "partition", "buckets",
                *IN_BUCKETS):
        assert manifest[key] == pytest.approx(result.timings[key], abs=1e-9), key


def test_every_kind_of_run_has_the_same_keys(tmp_path: Path) -> None:
    frame = corpus(docs=6, per_doc=20)
    store = tmp_path / "s"
    full, wall = timed(lambda: ingest_to_store(frame, store, buckets=3, quiet=True))
    check_run(full, wall)
    assert full.timings["buckets"] > 0 and full.timings["commit"] > 0

    changed = frame.with_columns(
        pl.when(pl.col("doc_id") == "doc-0").then(pl.col("text") + " changed")
        .otherwise(pl.col("text")).alias("text"))
    updated, wall = timed(lambda: update_store(store, changed))
    check_run(updated, wall)
    assert updated.changes is not None and updated.changes["changed"] == 1
    assert updated.timings["buckets"] > 0 and updated.timings["write"] > 0
    assert updated.timings["commit"] > 0 and updated.timings["index"] > 0

    dry, wall = timed(lambda: update_store(store, changed, dry_run=True))
    check(dry.timings, wall)

    deleted, wall = timed(lambda: delete_documents(store, ["doc-1"]))
    check_run(deleted, wall)
    assert deleted.timings["write"] > 0 and deleted.timings["commit"] > 0

    compacted, wall = timed(lambda: compact_store(store))
    check_run(compacted, wall)
    assert compacted.timings["partition"] > 0 and compacted.timings["commit"] > 0


def test_documents_timings_do_not_count_the_embedder_load_twice(tmp_path: Path,
                                                                embedder: object) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\nKeys rotate every {i + 90} days.\n\n"
                                       "Keys rotate every 90 days.\n")
    result, wall = timed(lambda: ingest_to_store(docs, tmp_path / "s", embedder=embedder,
                                                 quiet=True))
    check_run(result, wall)
    assert result.timings["extract"] > 0 and result.timings["embed"] > 0
    assert result.timings["partition"] >= 0.0


def test_complete_orders_and_clamps() -> None:
    out = complete({"total": 2.0, "partition": -1e-9, "unknown": 5.0})
    assert tuple(out) == STAGES and out["partition"] == 0.0 and "unknown" not in out
    assert set(SEQUENTIAL) | set(IN_BUCKETS) | {"total"} == set(STAGES)


def test_the_printed_line_brackets_the_overlapping_stages() -> None:
    from arrowdedup.timings import line

    text = line(complete({"compile": 1.5, "partition": 0.25, "buckets": 2.0, "read": 0.5,
                          "kernel": 1.75, "write": 0.001, "commit": 0.125, "total": 4.0}))
    assert text == ("stages: compile 1.50 s, partition 0.25 s, buckets 2.00 s [overlapping: "
                    "read 0.50 s, kernel 1.75 s], commit 0.12 s; total 4.00 s")
