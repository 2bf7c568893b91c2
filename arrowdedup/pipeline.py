"""Whole jobs: input files to a written store, timed per stage."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from .config import DedupConfig, resolve_config
from .ingest import IngestionResult, ingest
from .schema import read_segments
from .store import DEFAULT_BUCKETS, write_store


def ingest_tables_to_store(
    inputs: Sequence[str | Path],
    out: str | Path,
    config: DedupConfig | None = None,
    *,
    threads: int | None = None,
    buckets: int = DEFAULT_BUCKETS,
) -> tuple[IngestionResult, Path]:
    """Read segments tables (Parquet / Arrow IPC), dedup them, write the store atomically."""
    cfg = resolve_config(config)
    start = time.perf_counter()
    frame = read_segments([Path(p) for p in inputs])
    read_s = time.perf_counter() - start
    result = ingest(frame, cfg, threads=threads)
    result.timings["read"] = read_s
    start = time.perf_counter()
    version = write_store(result, out, buckets=buckets, inputs=[str(p) for p in inputs])
    result.timings["write"] = time.perf_counter() - start
    return result, version
