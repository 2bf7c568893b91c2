"""The one job path: documents or segments tables → bucketed, streamed dedup → store version.

::

    documents ─extract─▶ segments ─embed (store cache)─▶ segments table ─┐
    Parquet / Arrow IPC files, DataFrames, LazyFrames, Arrow tables ─────┴▶ buckets
      ─▶ per bucket: ingest() (salience when absent, hash, plan, kernels) ─▶ encode
      ─▶ StoreWriter (in bucket order; indexes registered here: BM25) ─▶ atomic switch

:func:`ingest_to_store` is the only function that writes a store from inputs; the library
(``arrowdedup.ingest_to_store``) and ``arrowdedup ingest`` both call it, and it returns a
:class:`JobResult` read lazily from the version it wrote. Dedup is per document and every
document lies wholly in one bucket (``xxh64(doc_id) % buckets``), so a bucket is a complete
job: the corpus is processed one bucket at a time and a corpus larger than memory works.
Rows reach a bucket without loading the corpus:

- Arrow IPC *files* are memory-mapped (once per run by the local engine) and each bucket
  takes its rows from them: the embeddings (fixed-width lists) with one ``pread`` per run of
  rows straight into the bucket's array, issued by a jitted loop that holds no GIL (faulting
  scattered rows in through the mapping would map, and count as resident, several times the
  bytes read), the other columns taken from the mapping record batch by record batch;
- in-memory tables (and documents after extraction and embedding) are used as they are, and
  Parquet inputs up to ``memory_budget`` (default 2 GiB uncompressed, local engine) are read
  whole, which is faster than a round trip through the disk;
- anything else (larger Parquet, IPC streams, the Ray engine) goes through one partitioning
  pass: record batches of ``PARTITION_BATCH`` rows are scattered into one uncompressed IPC file
  per bucket in a temporary directory of the store, which is then memory-mapped the same way.

Peak memory is bounded by the largest bucket (its rows, the ingest result, the encoded files)
plus the doc_id column of one input file and one record batch, plus the mapped pages of the
input files' non-embedding columns (file-backed: the kernel can drop them); raise ``buckets``
to lower it.

Engines: ``local`` runs the buckets in order in this process (the kernels use the threads;
the next bucket is prepared while one is written, unless ``threads`` is 1); ``ray`` runs one
plain Ray task per bucket (each the same single-process code, with one kernel thread). A task
on the driver's machine writes its bucket's files into the new version's staging directory
itself (nothing large crosses Ray's object store); one elsewhere returns the bytes and the
driver writes them. The writer takes the buckets in bucket order either way, so both engines
write byte-identical data files. Decisions never depend on the bucket count.

Stage timings (:data:`STAGES`, the same keys for every input and every kind of run; see
:mod:`arrowdedup.timings`): ``compile`` (the jitted kernels the run uses, loaded or compiled
up front by :mod:`arrowdedup.pipeline.precompile`), ``extract``, ``embedder_load`` and ``embed``
(documents only, 0 otherwise), ``partition`` (opening or partitioning the inputs, and the
bucket of every input row), ``buckets`` (the pass over the buckets: the wall time from the
first bucket read to the last written), inside it the stages of :func:`arrowdedup.ingest`
summed over the buckets (``read`` includes taking each bucket's rows from the input),
``encode`` (Parquet / IPC bytes and the input fingerprints), ``index`` (tokenizing the
buckets, and finishing the BM25 index after the pass) and ``write`` (files and checksums),
then ``commit`` (fsync, manifest, switch) and ``total`` (wall time). Buckets overlap, so the
stages inside ``buckets`` can sum to more than it; the others run one after another.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from .. import progress
from ..arrays import scratch
from ..config import DedupConfig, resolve_config
from ..errors import InputError, StoreError
from ..facts.rules import RULES_VERSION
from ..store import (
    DEFAULT_BUCKETS,
    IndexBuilder,
    Store,
    StoreWriter,
    bucket_of,
    current_manifest,
    encode_bucket,
    open_store,
    prepare_root,
)
from ..store.fingerprint import FINGERPRINT_KIND
from ..timings import STAGES as STAGES
from ..timings import complete

if TYPE_CHECKING:
    from ..dedup.ingest import IngestionResult
    from ..dedup.salience import SalienceScorer
    from ..embed.embedders import Embedder
from ..extract.options import ExtractOptions
from .bucket import BucketJob, default_indexes, encoder_of, process_bucket
from .documents import documents_stream, load_documents, refuse_embedder_for_tables
from .engines import Engine, runner
from .inputs import (
    BatchStream,
    Source,
    SourceCache,
    arrow_of,
    bucket_source,
    check_inputs,
    is_documents_input,
)
from .options import RunOptions, with_legacy


@dataclasses.dataclass(frozen=True)
class JobResult:
    """What a job returns: the version it wrote, read lazily, and its stage timings.

    ``kept``, ``decisions`` and ``documents`` are LazyFrames over the written version (the
    data is in the store, not held in memory); ``timings`` has every key of :data:`STAGES`.
    """

    store: Store
    timings: Mapping[str, float]
    config: DedupConfig
    # An update or delete (arrowdedup.pipeline.update): documents added / changed / removed /
    # unchanged; ``dry_run``: nothing was written (``store`` is the current version).
    changes: Mapping[str, int] | None = None
    dry_run: bool = False
    # The doc_ids behind ``changes``: ``added``, ``changed`` and ``removed``, each sorted.
    change_ids: Mapping[str, Sequence[str]] | None = None

    @property
    def version_id(self) -> str:
        return self.store.run_id

    @property
    def path(self) -> Path:
        """The version directory."""
        return self.store.version

    @property
    def root(self) -> Path:
        return self.store.root

    @property
    def kept(self) -> pl.LazyFrame:
        return self.store.segments()

    @property
    def decisions(self) -> pl.LazyFrame:
        return self.store.decisions()

    @property
    def documents(self) -> pl.LazyFrame:
        return self.store.documents()

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.store.manifest.get("counts") or {})

    @property
    def embedding_dim(self) -> int | None:
        return self.store.embedding_dim

    @property
    def original_count(self) -> int:
        return int(self.counts.get("segments_in", 0))

    @property
    def final_count(self) -> int:
        return int(self.counts.get("segments_kept", 0))

    @property
    def dedup_ratio(self) -> float:
        n = self.original_count
        return (n - self.final_count) / n if n else 0.0

    def summary(self) -> str:
        from ..dedup.ingest import log_line

        c = self.counts
        return (
            f"{log_line(self.original_count, self.final_count)} in {c.get('documents', 0)} "
            f"documents (exact {c.get('dropped_exact', 0)}, near {c.get('merged_near', 0)}, "
            f"filtered {c.get('filtered_low_salience', 0)}; dedup ratio {self.dedup_ratio:.1%})"
        )


def result_timings(values: Mapping[str, float]) -> Mapping[str, float]:
    return complete(values)


# Documents whose segments and vectors take more than this are partitioned to disk batch by
# batch instead of held in memory for the whole job: the four-large-files run of
# benchmarks/hostile_input (311k segments, a 0.5 GB table) peaked at 2.17 GB held in memory
# and at 1.60 GB streamed (with the pool and partition reads of the same commit). Small
# runs stay in memory, where partitioning would only add file writes.
STREAM_DOCUMENTS_BYTES = 128 << 20


def as_inputs(source: Source, columns: Mapping[str, str] | None = None
              ) -> tuple[list[pa.Table], list[Path]]:
    from ..schema import dataset_segments, is_dataset

    if columns is not None or is_dataset(source):
        return [dataset_segments(source, columns)], []
    if isinstance(source, (pl.DataFrame, pl.LazyFrame, pa.Table)):
        return [arrow_of(source)], []
    if isinstance(source, (str, Path)):
        return [], [Path(source)]
    if isinstance(source, Sequence) and source and all(
            isinstance(s, (pl.DataFrame, pl.LazyFrame, pa.Table)) for s in source):
        return [arrow_of(s) for s in source], []
    if isinstance(source, Sequence) and all(isinstance(s, (str, Path)) for s in source):
        return [], [Path(s) for s in source]
    raise InputError(
        f"cannot ingest a {type(source).__name__}; pass a polars DataFrame or LazyFrame, a "
        "pyarrow Table, Parquet / Arrow IPC file path(s), or document files / folders")


def ingest_to_store(
    source: Source,
    out: str | Path,
    *,
    config: DedupConfig | None = None,
    embedder: str | Embedder | None = None,
    embedding_model: str | None = None,
    extract: ExtractOptions | None = None,
    run: RunOptions | None = None,
    scorer: SalienceScorer | None = None,
    indexes: bool | Sequence[IndexBuilder] = True,
    replace: bool = False,
    columns: Mapping[str, str] | None = None,
    **legacy: object,
) -> JobResult:
    """Deduplicate ``source`` inside each document and write it as a new version of the store
    at ``out``, switched to atomically; returns the :class:`JobResult` of that version.

    ``source``: a segments table (DataFrame, LazyFrame, Arrow table), Parquet / Arrow IPC
    segments files, or document files and folders (Markdown, text, HTML, CSV/TSV, JSONL),
    which are extracted as ``extract`` says (:class:`ExtractOptions`) and embedded with
    ``embedder`` through the store's embedding cache first. Tables are never embedded (SPEC
    §3); ``embedding_model`` names the model their embeddings came from. Salience is scored
    (``scorer``, default SPEC §3) when the input has none. ``indexes``: the index builders
    (default: BM25), or False for none. ``run`` (:class:`RunOptions`): threads, buckets,
    engine, memory budget, versions kept, progress display. ``replace``: write over a store
    built from other inputs (refused otherwise, naming ``--update`` and ``--replace``).
    ``source`` may be a Hugging Face ``datasets.Dataset``, whose columns ``columns`` maps onto
    the segments table (:mod:`arrowdedup.integrations.datasets`).

    The keywords this function took before the option objects (``threads=``, ``buckets=``,
    ``language_from_path=``, ``extract_limits=``, ...) still work for one release, with a
    ``DeprecationWarning``.
    """
    ex, ro = with_legacy("ingest_to_store", legacy, extract, run)
    threads, buckets, engine, ray_address = ro.threads, ro.buckets, ro.engine, ro.ray_address
    memory_budget, keep_versions, quiet = ro.memory_budget, ro.keep_versions, ro.quiet
    engine_runner = runner(engine, ray_address=ray_address)
    if buckets < 1:
        raise StoreError(f"buckets must be >= 1, got {buckets}")
    start = time.perf_counter()
    cfg = resolve_config(config)
    store_root = Path(out)
    tables, paths = as_inputs(source, columns)
    timings: dict[str, float] = {}
    extra: dict[str, Any] = {"engine": Engine(engine).value}
    model = embedding_model
    names = [str(p) for p in paths] if paths else [f"<table {i}>" for i in range(len(tables))]
    input_key = inputs_key(paths, tables)
    if not replace:
        check_same_inputs(store_root, input_key)
    extra["input_key"] = input_key
    extra["fingerprints"] = FINGERPRINT_KIND
    extra["rules"] = RULES_VERSION
    streamed: BatchStream | None = None
    if paths and any(is_documents_input(p) for p in paths):
        for p in paths:
            if not p.exists():
                raise InputError(f"input {p} does not exist; check the path")
        prepare_root(store_root)
        docs = load_documents(
            paths, store_root, embedder=embedder, extract=ex, quiet=quiet, timings=timings)
        model = docs.model
        extra.update(docs.extra)
        from ..extract.discover import discover_files
        from ..store.source_files import file_records

        # Each file's size, mtime and hash: a later --update re-extracts the changed ones only.
        extra["source_files"] = file_records(
            discover_files(list(paths), ex.root),
            docs.frame.get_column("doc_id").cast(pl.String).unique().to_list())
        extra["extract_options"] = {
            "language_from_path": ex.language_from_path,
            "key_columns": list(ex.key_columns) if ex.key_columns else None,
            "detect_keys": ex.detect_keys, "doc_version_from_path": ex.doc_version_from_path}
        paths = []
        if docs.table_bytes() > STREAM_DOCUMENTS_BYTES:
            streamed = documents_stream(docs)
        else:
            # The Arrow table holds the segments from here on (its strings are copies of the
            # frame's views): a second copy of a large corpus's text would stay for the job.
            tables = [docs.table().to_arrow()]
        del docs
    else:
        refuse_embedder_for_tables(embedder)
        if paths:
            check_inputs(paths)
    builders = default_indexes() if indexes is True else list(indexes or [])
    # Workers get stateless copies of the builders (a Ray task pickles what it is given; the
    # writer's builders accumulate the buckets).
    job = BucketJob(cfg, threads, tuple(encoder_of(b) for b in builders), scorer)
    writer = StoreWriter(store_root, buckets=buckets, config=cfg, inputs=names,
                         embedding_model=model, extra=extra, indexes=builders,
                         keep_versions=keep_versions)
    inputs: Sequence[Path] | Sequence[pa.Table] | BatchStream = \
        streamed or (tables if tables else paths)
    del streamed, tables  # a stream's data goes as it is partitioned
    budget = memory_budget if engine_runner.reads_in_process else 0
    sums: dict[str, float] = {}
    from . import precompile

    precompile.for_partition(inputs, timings, quiet=quiet)
    with writer, contextlib.ExitStack() as stack:
        stack.enter_context(scratch.small_pages())  # see scratch.small_pages: faster here
        t = time.perf_counter()
        # Reading (and partitioning) files can take a while; in-memory tables are instant.
        with progress.spinner("reading the segments",
                              quiet=quiet or not (paths or isinstance(inputs, BatchStream))):
            src = stack.enter_context(bucket_source(inputs, buckets, store_root, budget,
                                                    in_memory=engine_runner.reads_in_process))
            cache = SourceCache()
            engine_runner.prepare(src, cache)
        timings["partition"] = time.perf_counter() - t
        precompile.for_buckets(src, cache, job, timings, quiet=quiet)
        t = time.perf_counter()
        stream = engine_runner.buckets(src, job, cache, writer.staging, stack)
        # Closed before the writer's exit, so a failed run cancels its Ray tasks before the
        # staging directory they may write into is removed.
        close = getattr(stream, "close", None)
        if close is not None:
            stack.callback(close)
        documents: list[pl.DataFrame] = []
        ticked = 0
        with progress.bar("deduplicating buckets", src.buckets, quiet=quiet) as tick:
            for bucket_out, summary in stream:
                if tick is not None:  # empty buckets yield nothing: count up to this one
                    tick(bucket_out.bucket + 1 - ticked)
                    ticked = bucket_out.bucket + 1
                writer.add(bucket_out)
                documents.append(summary.documents)
                for key, value in summary.timings.items():
                    sums[key] = sums.get(key, 0.0) + value
                del bucket_out, summary  # written: not held while the next bucket runs
            if not documents:  # empty corpus: an empty bucket 0, as for a whole empty result
                done = process_bucket(src, 0, job, force=True)
                assert done is not None
                writer.add(done[0])
                documents.append(done[1].documents)
        timings["buckets"] = time.perf_counter() - t
        from ..dedup.ingest import numba_threads

        # The index builders' finish runs parallel passes: kept to the job's threads.
        with progress.spinner("writing the store", quiet=quiet), numba_threads(threads):
            writer.commit(documents=pl.concat(documents, how="vertical_relaxed"),
                          timings={**timings, **sums}, started=start)
    timings.update(sums)
    # The writers' own time: file writes and checksums (the driver's, and Ray tasks' that
    # wrote their bucket themselves), the index builders' merge and finish (beside the
    # workers' tokenizing), and the commit.
    timings["write"] = sums.get("write", 0.0) + writer.timings["write"]
    timings["index"] = sums.get("index", 0.0) + writer.timings["index"]
    timings["commit"] = writer.timings["commit"]
    timings["total"] = time.perf_counter() - start
    return JobResult(open_store(store_root), result_timings(timings), cfg)


def inputs_key(paths: Sequence[Path], tables: Sequence[pa.Table]) -> list[str]:
    """What a store records of its inputs: the resolved paths, or each table's fingerprint
    (a sum of row hashes: equal tables give equal keys)."""
    if paths:
        return [str(p.resolve()) for p in paths]
    out = []
    for t in tables:
        frame = pl.from_arrow(t)
        assert isinstance(frame, pl.DataFrame)
        h = int(frame.select(sorted(frame.columns)).hash_rows(7).sum()) if frame.height else 0
        out.append(f"table:{frame.height}:{h:016x}")
    return out


def check_same_inputs(root: Path, key: list[str]) -> None:
    """No silent replacement: refuse to write over a non-empty store built from other
    inputs."""
    try:
        previous = current_manifest(root)
    except StoreError:
        return  # a damaged store is reported by the writer
    if previous is None or not (previous.get("counts") or {}).get("documents"):
        return
    recorded = previous.get("input_key")
    if recorded is None:  # stores written before the key: compare the names given
        return
    if list(recorded) != list(key):
        shown = ", ".join(str(r) for r in list(recorded)[:3])
        raise StoreError(
            f"store {root} was built from other inputs ({shown}); pass --update to bring "
            "these documents into it (changed ones replace theirs, the rest stay), or "
            "--replace to replace the store with this input (its versions are kept)")


def write_store(
    result: IngestionResult,
    root: str | Path,
    *,
    buckets: int = DEFAULT_BUCKETS,
    inputs: Sequence[str] = (),
    embedding_model: str | None = None,
    extra: Mapping[str, object] | None = None,
    hooks: Sequence[Callable[[Path, pl.DataFrame], object]] = (),
    indexes: bool = True,
) -> Path:
    """Write an in-memory :func:`arrowdedup.ingest` result as a new store version through
    the same writer and indexes as :func:`ingest_to_store`; returns the version directory.

    ``hooks`` are extra callables ``hook(version_dir, kept_frame)`` run before the manifest
    (the kept segments in store order, without embeddings).
    """
    if buckets < 1:
        raise StoreError(f"buckets must be >= 1, got {buckets}")
    kept, decisions = result.kept, result.decisions
    kept_bucket = bucket_of(kept.get_column("doc_id").cast(pl.String).to_arrow(), buckets)
    dec_bucket = bucket_of(decisions.get_column("doc_id").cast(pl.String).to_arrow(), buckets)
    kept_order = np.argsort(kept_bucket, kind="stable")
    dec_order = np.argsort(dec_bucket, kind="stable")
    kept_bounds = np.searchsorted(kept_bucket[kept_order], np.arange(buckets + 1))
    dec_bounds = np.searchsorted(dec_bucket[dec_order], np.arange(buckets + 1))
    builders: list[Any] = default_indexes() if indexes else []
    builders += [_HookIndex(h) for h in hooks]
    # The signatures were written under today's rules: say so, as ingest_to_store does, so
    # readers know their layout (rules.signatures_current).
    extra = {"rules": RULES_VERSION, **(extra or {})}
    writer = StoreWriter(root, buckets=buckets, config=result.config, inputs=inputs,
                         embedding_model=embedding_model, extra=extra, indexes=builders)
    from ..arrays.vectors import input_rows

    with writer, input_rows(result.original_count):
        for b in range(buckets):
            k_rows = kept_order[kept_bounds[b]:kept_bounds[b + 1]]
            d_rows = dec_order[dec_bounds[b]:dec_bounds[b + 1]]
            if k_rows.size == 0 and d_rows.size == 0 and not (b == 0 and kept.height == 0):
                continue
            writer.add(encode_bucket(b, kept[k_rows], decisions[d_rows], None,
                                     result.embedding_dim, builders))
        return writer.commit(
            documents=result.documents, timings=result.timings,
            counts={"documents": result.documents.height,
                    "segments_in": result.original_count, "segments_kept": result.final_count},
        )


class _HookIndex:
    """A ``hook(version_dir, kept_frame)`` callable as an index builder."""

    def __init__(self, hook: Callable[[Path, pl.DataFrame], object]) -> None:
        self.hook = hook
        self.name = f"hook-{id(hook)}"
        self.frames: list[pl.DataFrame] = []

    def encode(self, kept: pl.DataFrame) -> pl.DataFrame:
        return kept

    def add(self, part: pl.DataFrame | None, rows: int) -> None:
        if part is not None:
            self.frames.append(part)

    def finish(self, version_dir: Path) -> None:
        frame = pl.concat(self.frames, how="vertical") if self.frames else pl.DataFrame()
        self.hook(version_dir, frame)
