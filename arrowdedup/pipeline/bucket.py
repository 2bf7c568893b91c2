"""The work on one bucket: ingest it, encode it for the store, and summarise it for the
driver (the unit of work of every engine).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ..arrays import scratch
from ..config import DedupConfig
from ..store import (
    BucketOutput,
    IndexBuilder,
    encode_bucket,
    write_staged,
)
from ..store.delta import fingerprint_file
from ..timings import STAGES as STAGES
from .inputs import DEFAULT_MEMORY_BUDGET, BucketSource, SourceCache, row_buckets

if TYPE_CHECKING:
    pass


@dataclasses.dataclass
class BucketSummary:
    """What the driver keeps of one bucket besides its files."""

    documents: pl.DataFrame
    timings: dict[str, float]


@dataclasses.dataclass(frozen=True)
class BucketJob:
    """Everything a worker needs besides the source and the bucket number (picklable)."""

    config: DedupConfig
    threads: int | None
    indexes: tuple[IndexBuilder, ...] = ()
    scorer: Any = None
    # A Ray task running on ``node`` (the driver's Ray node) writes its bucket's files into
    # ``staging`` (the writer's version directory) itself, instead of returning their bytes.
    staging: str | None = None
    node: str | None = None


def _on_driver_node(node: str | None) -> bool:
    if node is None:
        return False
    import ray

    return bool(ray.get_runtime_context().get_node_id() == node)


def process_bucket(
    source: BucketSource,
    bucket: int,
    job: BucketJob,
    cache: SourceCache | None = None,
    force: bool = False,
    alone: bool = False,
) -> tuple[BucketOutput, BucketSummary] | None:
    """Ingest and encode one bucket (the unit of work of both engines); ``None`` when empty
    (unless ``force``, which ingests an empty table). ``alone``: nothing runs beside it, so
    the buffer its rows were read into goes back to the OS once they are ingested, instead
    of staying in ``cache``'s pool under its encoding."""
    from ..arrays.vectors import input_row_numbers, input_rows
    from ..dedup.ingest import ingest, numba_threads

    with scratch.scratch_pool(cache.pool if cache is not None else None):
        start = time.perf_counter()
        table, numbers = source.read_numbered(bucket, cache)
        read_s = time.perf_counter() - start
        if table is None:
            if not force:
                return None
            table = source.empty()
        # Each document's input fingerprint, for a later `--update` (store.fingerprint):
        # taken first, so that the rows read are not held under the encoding (the 150k-row
        # CSV document's: its embeddings read, 0.17 GB, and its other columns), and its
        # Polars copy of them is not made beside the ingest's result.
        start = time.perf_counter()
        fingerprints = fingerprint_file(bucket, table)
        fingerprint_s = time.perf_counter() - start
        with input_rows(source.total_rows), input_row_numbers(numbers):
            result = ingest(table, job.config, threads=job.threads, scorer=job.scorer)
        del table
        if alone and cache is not None:
            cache.pool.trim(0)
        # The index builders' parallel passes (BM25's lower-casing) keep to the job's
        # threads too: one thread means one thread.
        with numba_threads(job.threads):
            out = encode_bucket(bucket, result.kept, result.decisions, result.documents,
                                result.embedding_dim, job.indexes)
    out.files.append(fingerprints)
    timings = {**result.timings, **out.timings}
    # The bucket's rows taken from the input belong to reading it (ingest's own "read" is
    # the conversion of the table it is given), its fingerprints to encoding it.
    timings["read"] = timings.get("read", 0.0) + read_s
    timings["encode"] = timings.get("encode", 0.0) + fingerprint_s
    if job.staging is not None and _on_driver_node(job.node):
        start = time.perf_counter()
        # The file images come from the worker's pool: the buffers its earlier buckets
        # were read into, already faulted in.
        out = write_staged(job.staging, out, cache.pool if cache is not None else None)
        timings["write"] = time.perf_counter() - start
    return out, BucketSummary(documents=result.documents, timings=timings)


# A bucket of more input bytes than this runs alone (nothing else in flight beside it): a
# tenth of the default memory budget. A bucket's working set is about five times its input
# (the rows read, the Polars frame, the salience and kernel temporaries, the kept rows and
# the files written): the 150k-row CSV document of benchmarks/hostile_input's corpus + four
# large files run (256 MB of input) took ~1.3 GB, and scoring it beside the next 55k-row
# bucket took the run to 1.74 GB. The 1M-segment benchmark's 16 equal buckets (~0.1 GB
# each) stay well below it and still run two at a time. (Not the job's ``memory_budget``,
# which only says which Parquet inputs are read whole, and is 0 to always partition.)
ALONE_BYTES = DEFAULT_MEMORY_BUDGET // 10


def bucket_bytes(source: BucketSource, cache: SourceCache) -> list[int]:
    """About the input bytes of each bucket: its partition file's size, or its share of the
    input tables' bytes by rows (``cache`` holds the bucket of every row, :func:`bucket_ids`)."""
    if source.partitioned:
        return [os.path.getsize(path) if path else 0 for path in source.files]
    sizes = np.zeros(source.buckets, dtype=np.float64)
    for path in source.files:
        table = source.table_of(path, cache)[0]
        if table.num_rows:
            counts = np.bincount(cache.ids[path], minlength=source.buckets)
            sizes += counts * (table.nbytes / table.num_rows)
    return [int(n) for n in sizes]


def bucket_ids(source: BucketSource, cache: SourceCache) -> None:
    """The bucket of every row of each unpartitioned input, into ``cache`` (part of
    partitioning)."""
    for path in () if source.partitioned else source.files:
        if path not in cache.ids:
            cache.ids[path] = row_buckets(source.table_of(path, cache)[0], source.buckets)


def encoder_of(builder: IndexBuilder) -> IndexBuilder:
    fresh = getattr(builder, "encoder", None)
    return fresh() if callable(fresh) else builder


def default_indexes() -> list[IndexBuilder]:
    """The indexes every version gets unless ``indexes=False``: BM25 over the kept text."""
    from ..retrieval.bm25 import Bm25Builder

    return [Bm25Builder()]
