"""Whole jobs: input files to a written store, bucket by bucket, on threads or on Ray.

The corpus is processed one bucket (``xxh64(doc_id) % buckets``, :func:`store.bucket_of`) at a
time, so a corpus larger than memory works: every document lies wholly in one bucket, and
dedup is per document, so a bucket is a complete job. Rows reach a bucket without loading the
corpus:

- Arrow IPC *files* are memory-mapped (file-backed pages, not process memory) and each bucket
  takes its rows from them;
- Parquet inputs up to ``memory_budget`` (default 2 GiB uncompressed, local engine) are read
  whole, which is faster than a round trip through the disk;
- anything else (larger Parquet, IPC streams, the Ray engine) goes through one partitioning
  pass: record batches of ``PARTITION_BATCH`` rows are scattered into one uncompressed IPC file
  per bucket in a temporary directory of the store, which is then memory-mapped the same way.

Peak memory is bounded by the largest bucket: its rows as a table, the ingest result (kept
rows, decisions), the encoded files and its unit vectors — a few times the bucket's size
(about ``corpus / buckets``), plus the doc_id column of one input file (for bucket ids) and
one record batch. Raise ``--buckets`` to lower it.

Engines: ``local`` runs the buckets in order in this process (the kernels use the threads;
the next bucket is prepared while one is written); ``ray`` runs one plain Ray task per bucket
(each the same single-process code, with one kernel thread) and writes their outputs in bucket
order, so both engines write byte-identical data files. Decisions never depend on the bucket count.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from .config import DedupConfig, resolve_config
from .errors import InputError, MissingDependencyError, SchemaError, StoreError
from .ingest import ACTION_DTYPE, IngestionResult, ingest
from .schema import read_table_file
from .store import DEFAULT_BUCKETS, BucketOutput, StoreWriter, bucket_of, encode_bucket

ENGINES = ("local", "ray")
PARTITION_BATCH = 64 * 1024
DEFAULT_MEMORY_BUDGET = 2 << 30
LOCAL_AHEAD = 1  # buckets prepared ahead of the one being written (local engine)


def _is_ipc_file(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(6) == b"ARROW1"
    except OSError as err:
        raise InputError(f"cannot read {path}: {err}") from err


def _mapped(path: str) -> pa.Table:
    with pa.memory_map(path, "r") as source:
        return ipc.open_file(source).read_all()


def _bucket_ids(table: pa.Table, buckets: int) -> np.ndarray:
    if "doc_id" not in table.column_names:
        raise SchemaError("required column 'doc_id' is missing; add it (the partition key)")
    ids = table.column("doc_id")
    if not pa.types.is_string(ids.type):
        ids = pc.cast(ids, pa.string())
    return bucket_of(ids, buckets)


@dataclasses.dataclass(frozen=True)
class BucketSource:
    """Where the rows of each bucket come from (picklable, for Ray tasks).

    ``partitioned``: ``files[b]`` holds bucket ``b`` alone ("" when empty); otherwise every
    file is read (memory-mapped) and filtered to the bucket.
    """

    files: tuple[str, ...]
    buckets: int
    partitioned: bool
    # Small inputs of the local engine are held in memory ("mem:<i>" in ``files``).
    tables: tuple[pa.Table, ...] = dataclasses.field(default=(), compare=False, repr=False)

    def open(self, key: str) -> pa.Table:
        return self.tables[int(key[4:])] if key.startswith("mem:") else _mapped(key)

    def read(self, bucket: int, cache: dict[str, np.ndarray] | None = None) -> pa.Table | None:
        if self.partitioned:
            path = self.files[bucket]
            return _mapped(path) if path else None
        parts = []
        for path in self.files:
            table = self.open(path)
            ids = cache.get(path) if cache is not None else None
            if ids is None:
                ids = _bucket_ids(table, self.buckets)
                if cache is not None:
                    cache[path] = ids
            rows = np.flatnonzero(ids == bucket)
            if rows.size:
                # Polars gathers across the mapped chunks ~6x faster than pyarrow's take,
                # without combining them (which would copy the whole file into memory).
                frame = pl.from_arrow(table, rechunk=False)
                assert isinstance(frame, pl.DataFrame)
                parts.append(frame[rows].to_arrow())
        if not parts:
            return None
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def empty(self) -> pa.Table:
        """A zero-row table with the input schema (an empty corpus still gets a store)."""
        for path in self.files:
            if path:
                return self.open(path).slice(0, 0)
        raise InputError("no input rows and no schema; pass a non-empty segments table")


def check_inputs(inputs: Sequence[Path]) -> None:
    """Refuse a missing input before anything is created."""
    if not inputs:
        raise InputError("no input files given; pass at least one Parquet or Arrow IPC file")
    for p in inputs:
        if not p.exists():
            raise InputError(f"input file {p} does not exist; check the path")
        if p.is_dir():
            raise InputError(f"input {p} is a directory; pass the Parquet/IPC files inside it "
                             "(or use the documents pipeline for a folder of documents)")


def _parquet_bytes_uncompressed(path: Path) -> int | None:
    try:
        with path.open("rb") as fh:
            if fh.read(4) != b"PAR1":
                return None
        meta = pq.ParquetFile(path).metadata
    except (pa.ArrowException, OSError):
        return None  # read_table_file reports the damage clearly
    return sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))


@contextlib.contextmanager
def bucket_source(inputs: Sequence[Path], buckets: int, workdir: Path,
                  memory_budget: int = 0) -> Iterator[BucketSource]:
    """The :class:`BucketSource` of ``inputs``; partition files live under ``workdir`` and
    are removed afterwards. Parquet inputs whose uncompressed size is at most
    ``memory_budget`` bytes in total are read into memory instead of partitioned."""
    check_inputs(inputs)
    if all(_is_ipc_file(p) for p in inputs):
        _check_schemas([_mapped(str(p)).schema for p in inputs], inputs)
        yield BucketSource(tuple(str(p) for p in inputs), buckets, False)
        return
    sizes = [_parquet_bytes_uncompressed(p) for p in inputs]
    if memory_budget > 0 and all(n is not None for n in sizes) and \
            sum(n or 0 for n in sizes) <= memory_budget:
        tables = [read_table_file(p) for p in inputs]
        _check_schemas([t.schema for t in tables], inputs)
        yield BucketSource(tuple(f"mem:{i}" for i in range(len(tables))), buckets, False,
                           tuple(tables))
        return
    tmp = workdir / f".partition-{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    try:
        yield _partition(inputs, buckets, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check_schemas(schemas: list[pa.Schema], inputs: Sequence[Path]) -> None:
    for schema, path in zip(schemas[1:], inputs[1:], strict=True):
        if not schema.equals(schemas[0]):
            raise SchemaError(
                f"the input files do not share one schema ({inputs[0]} vs {path}); "
                "write them with the same columns and types")


def _batches(path: Path) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
        if head == b"PAR1":
            pf = pq.ParquetFile(path)
            return pf.schema_arrow, pf.iter_batches(batch_size=PARTITION_BATCH)
    except (pa.ArrowException, OSError) as err:
        raise InputError(f"{path} is truncated or corrupted and cannot be read ({err}); "
                         "re-export the file") from err
    table = read_table_file(path)  # IPC streams: refused clearly when damaged
    return table.schema, iter(table.to_batches(PARTITION_BATCH))


def _partition(inputs: Sequence[Path], buckets: int, tmp: Path) -> BucketSource:
    writers: dict[int, ipc.RecordBatchFileWriter] = {}
    schema0: pa.Schema | None = None
    try:
        for path in inputs:
            schema, batches = _batches(path)
            if schema0 is None:
                schema0 = schema
            elif not schema.equals(schema0):
                raise SchemaError(
                    f"the input files do not share one schema ({inputs[0]} vs {path}); "
                    "write them with the same columns and types")
            try:
                for batch in batches:
                    ids = _bucket_ids(pa.Table.from_batches([batch]), buckets)
                    order = np.argsort(ids, kind="stable")
                    bounds = np.searchsorted(ids[order], np.arange(buckets + 1))
                    for b in np.flatnonzero(np.diff(bounds)).tolist():
                        if b not in writers:
                            writers[b] = ipc.new_file(str(tmp / f"b-{b:05d}.arrow"), schema0)
                        rows = order[bounds[b] : bounds[b + 1]]
                        writers[b].write_batch(batch.take(pa.array(rows, type=pa.int64())))
            except (pa.ArrowException, OSError) as err:
                raise InputError(f"{path} is truncated or corrupted and cannot be read "
                                 f"({err}); re-export the file") from err
        if schema0 is not None and not writers:  # no rows at all: keep the schema
            ipc.new_file(str(tmp / "b-00000.arrow"), schema0).close()
            return BucketSource(tuple(str(tmp / "b-00000.arrow") if b == 0 else ""
                                      for b in range(buckets)), buckets, True)
    finally:
        for w in writers.values():
            w.close()
    return BucketSource(tuple(str(tmp / f"b-{b:05d}.arrow") if b in writers else ""
                              for b in range(buckets)), buckets, True)


@dataclasses.dataclass
class BucketSummary:
    """What the driver keeps of one bucket besides its files: small columns for the result."""

    actions: pl.Series
    kept_ids: pl.Series
    documents: pl.DataFrame
    timings: dict[str, float]
    embedding_dim: int | None


def process_bucket(
    source: BucketSource,
    bucket: int,
    config: DedupConfig,
    threads: int | None,
    cache: dict[str, np.ndarray] | None = None,
    force: bool = False,
) -> tuple[BucketOutput, BucketSummary] | None:
    """Ingest and encode one bucket (the unit of work of both engines); ``None`` when empty
    (unless ``force``, which ingests an empty table)."""
    table = source.read(bucket, cache)
    if table is None:
        if not force:
            return None
        table = source.empty()
    result = ingest(table, config, threads=threads)
    out = encode_bucket(bucket, result.kept, result.decisions, result.documents,
                        result.embedding_dim)
    summary = BucketSummary(
        actions=result.decisions.get_column("action"),
        kept_ids=result.kept.get_column("segment_id").cast(pl.String),
        documents=result.documents,
        timings=dict(result.timings),
        embedding_dim=result.embedding_dim,
    )
    return out, summary


def _local(source: BucketSource, config: DedupConfig, threads: int | None
           ) -> Iterator[tuple[BucketOutput, BucketSummary]]:
    """Buckets in order; the next bucket is read and ingested on a second thread while this
    one is written (Polars, Arrow, Numba and BLAS release the GIL), so at most
    ``LOCAL_AHEAD + 1`` buckets are in memory."""
    from concurrent.futures import Future, ThreadPoolExecutor

    cache: dict[str, np.ndarray] = {}
    for path in () if source.partitioned else source.files:
        cache[path] = _bucket_ids(source.open(path), source.buckets)
    with ThreadPoolExecutor(max_workers=LOCAL_AHEAD + 1) as pool:
        pending: dict[int, Future[Any]] = {}
        nxt = 0
        for b in range(source.buckets):
            while nxt < source.buckets and len(pending) <= LOCAL_AHEAD:
                pending[nxt] = pool.submit(process_bucket, source, nxt, config, threads, cache)
                nxt += 1
            done = pending.pop(b).result()
            if done is not None:
                yield done


def _ray(source: BucketSource, config: DedupConfig, address: str | None
         ) -> Iterator[tuple[BucketOutput, BucketSummary]]:
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "ray", "--engine ray") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    try:
        task = ray.remote(num_cpus=1)(process_bucket)
        # A bounded window of tasks in flight keeps the driver's memory near a few buckets.
        window = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        pending: dict[int, Any] = {}
        nxt = 0
        for b in range(source.buckets):
            while nxt < source.buckets and len(pending) < window:
                pending[nxt] = task.remote(source, nxt, config, 1)
                nxt += 1
            done = ray.get(pending.pop(b))
            if done is not None:
                yield done
    finally:
        if started:
            ray.shutdown()


def ingest_tables_to_store(
    inputs: Sequence[str | Path],
    out: str | Path,
    config: DedupConfig | None = None,
    *,
    threads: int | None = None,
    buckets: int = DEFAULT_BUCKETS,
    engine: str = "local",
    ray_address: str | None = None,
    embedding_model: str | None = None,
    hooks: Sequence[Callable[..., Any]] = (),
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> tuple[IngestionResult, Path]:
    """Read segments tables (Parquet / Arrow IPC), dedup them bucket by bucket, write the
    store atomically. The returned result is a summary: ``documents`` in full, ``decisions``
    with the ``action`` column only and ``kept`` with ``segment_id`` only (the data is in the
    store). ``memory_budget``: Parquet inputs up to this many uncompressed bytes are read
    whole instead of partitioned to disk first (local engine; 0 always partitions)."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose 'local' or 'ray'")
    if buckets < 1:
        raise StoreError(f"buckets must be >= 1, got {buckets}")
    cfg = resolve_config(config)
    root = Path(out)
    paths = [Path(p) for p in inputs]
    check_inputs(paths)
    start = time.perf_counter()
    timings: dict[str, float] = {}
    summaries: list[BucketSummary] = []
    writer = StoreWriter(root, buckets=buckets, config=cfg, inputs=[str(p) for p in paths],
                         embedding_model=embedding_model, hooks=hooks,
                         extra={"engine": engine})
    budget = memory_budget if engine == "local" else 0  # Ray tasks read files
    with writer, bucket_source(paths, buckets, root, budget) as source:
        timings["partition"] = time.perf_counter() - start
        stream = _local(source, cfg, threads) if engine == "local" else \
            _ray(source, cfg, ray_address)
        t_write = 0.0
        for bucket_out, summary in stream:
            t0 = time.perf_counter()
            writer.add(bucket_out)
            t_write += time.perf_counter() - t0
            summaries.append(summary)
            for key, value in summary.timings.items():
                timings[key] = timings.get(key, 0.0) + value
        if not summaries:  # empty corpus: an empty bucket 0, as for a whole empty result
            done = process_bucket(source, 0, cfg, threads, force=True)
            assert done is not None
            writer.add(done[0])
            summaries.append(done[1])
        t0 = time.perf_counter()
        documents = pl.concat([s.documents for s in summaries], how="vertical_relaxed")
        version = writer.commit(documents=documents, timings=timings)
        timings["write"] = t_write + time.perf_counter() - t0
    timings["total"] = time.perf_counter() - start
    result = IngestionResult(
        kept=pl.DataFrame({"segment_id": pl.concat([s.kept_ids for s in summaries])}),
        decisions=pl.DataFrame({"action": pl.concat([s.actions for s in summaries])
                                .cast(ACTION_DTYPE)}),
        documents=documents,
        timings=timings,
        config=cfg,
        embedding_dim=next((s.embedding_dim for s in summaries if s.embedding_dim), None),
    )
    return result, version
