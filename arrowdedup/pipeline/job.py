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
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from .. import progress
from ..arrays import scratch
from ..config import DedupConfig, resolve_config
from ..errors import ArrowDedupError, InputError, MissingDependencyError, SchemaError, StoreError
from ..facts.rules import RULES_VERSION
from ..schema import read_table_file
from ..store import (
    DEFAULT_BUCKETS,
    BucketOutput,
    IndexBuilder,
    Store,
    StoreWriter,
    bucket_of,
    current_manifest,
    encode_bucket,
    open_store,
    prepare_root,
    write_staged,
)
from ..store.atomic import save_npy
from ..store.delta import fingerprint_file
from ..store.fingerprint import FINGERPRINT_KIND
from ..store.layout import KEEP_VERSIONS
from ..timings import STAGES as STAGES
from ..timings import complete

if TYPE_CHECKING:
    from datasets import Dataset

    from ..dedup.ingest import IngestionResult
    from ..dedup.salience import SalienceScorer
    from ..embed.embedders import Embedder
    from ..extract.limits import ExtractLimits

ENGINES = ("local", "ray")
PARTITION_BATCH = 64 * 1024
DEFAULT_MEMORY_BUDGET = 2 << 30
LOCAL_AHEAD = 1  # buckets prepared ahead of the one being written (local engine)
# Suffixes that are segments tables, not documents.
TABLE_SUFFIXES = frozenset({".parquet", ".arrow", ".ipc", ".feather"})

TableLike: TypeAlias = pl.DataFrame | pl.LazyFrame | pa.Table
# A Hugging Face datasets.Dataset is a source too (arrowdedup.integrations.datasets).
Source: TypeAlias = "TableLike | str | Path | Sequence[str | Path] | Dataset"


# ----------------------------------------------------------------------------- the result


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


def _timings(values: Mapping[str, float]) -> Mapping[str, float]:
    return complete(values)


def _encoder_of(builder: IndexBuilder) -> IndexBuilder:
    fresh = getattr(builder, "encoder", None)
    return fresh() if callable(fresh) else builder


def default_indexes() -> list[IndexBuilder]:
    """The indexes every version gets unless ``indexes=False``: BM25 over the kept text."""
    from ..retrieval.bm25 import Bm25Builder

    return [Bm25Builder()]


# ----------------------------------------------------------------------------- inputs


def is_documents_input(path: str | Path) -> bool:
    """True when ``path`` is documents (a folder or a document file); Parquet / Arrow IPC
    files are segments tables."""
    p = Path(path)
    return p.is_dir() or p.suffix.lower() not in TABLE_SUFFIXES


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


def _is_ipc_file(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(6) == b"ARROW1"
    except OSError as err:
        raise InputError(f"cannot read {path}: {err}") from err


def _mapped(path: str, *, validate: bool = True) -> pa.Table:
    return _mapped_at(path, validate=validate)[0]


def _mapped_at(path: str, *, validate: bool = True) -> tuple[pa.Table, int, int]:
    """The memory-mapped table of an IPC file, the address of the mapping and its size (a
    buffer of the table lies in the file at ``buffer.address - base`` when it lies in the
    mapping at all: a compressed file's buffers are decompressed into memory instead).
    ``validate=False`` for the job's own partition files, written from batches that a
    Parquet reader built or :func:`read_table_file` validated."""
    try:
        with pa.memory_map(path, "r") as source:
            size = source.size()
            base = source.read_buffer(1).address if size else 0
            source.seek(0)
            table = ipc.open_file(source).read_all()
        if validate:
            _validate_once(path, table)
        return table, base, size
    except (pa.ArrowException, OSError) as err:
        # A file cut short loses its footer ("Not an Arrow file"): say what to do about it.
        raise InputError(f"{path} is truncated or corrupted and cannot be read as an Arrow "
                         f"IPC file ({err}); re-export the file") from err


# Input files whose mapped tables passed a full validation in this process, by what they are
# on disk (a file rewritten since is validated again).
_VALIDATED: set[tuple[str, int, int, int, int]] = set()


def _validate_once(path: str, table: pa.Table) -> None:
    """Check every offset and string of a mapped table once per file version and process.
    Nothing reads a mapped IPC file's bytes before the job takes rows from it: a corrupted
    offset made that take read out of bounds (a segmentation fault, not an error), measured
    on byte-flipped files. About 0.03 s for the 1M-segment benchmark file."""
    st = os.stat(path)
    key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _VALIDATED:
        table.validate(full=True)
        _VALIDATED.add(key)


def _fixed_rows(column: pa.ChunkedArray, base: int, size: int
                ) -> list[tuple[int, int, int]] | None:
    """Per chunk of a fixed-size list column of fixed-width values without nulls (the
    embeddings): (rows, file offset of its first row, bytes per row); ``None`` for any other
    column or when a chunk's values are not in the mapped file."""
    kind = column.type
    if not pa.types.is_fixed_size_list(kind):
        return None
    value = kind.value_type
    if not (pa.types.is_floating(value) or pa.types.is_integer(value)):
        return None
    width = value.bit_width
    row_bytes = kind.list_size * width // 8
    spans = []
    for chunk in column.chunks:
        values = chunk.values
        if chunk.null_count or values.null_count:
            return None
        data = chunk.buffers()[2]
        if data is None:
            return None
        first = data.address - base + (chunk.offset * kind.list_size + values.offset) * width // 8
        if data.address < base or first + len(chunk) * row_bytes > size:
            return None
        spans.append((len(chunk), first, row_bytes))
    return spans


# From this many runs a bucket's rows are read by one jitted loop (_pread_jit), which
# holds no GIL between reads; fewer runs are read from Python (no Numba to load for them).
JIT_MIN_RUNS = 64


# Each run of consecutive rows: (file offsets, positions in the output, lengths), in bytes.
Runs: TypeAlias = tuple[np.ndarray, np.ndarray, np.ndarray]


def _runs(spans: list[tuple[int, int, int]], rows: np.ndarray) -> Runs:
    """The runs of ``rows`` (increasing, at least one) of a fixed-width column (one row per
    ``row_bytes``, the same in every chunk): one ``pread`` each."""
    row_bytes = spans[0][2]
    starts = np.cumsum([0] + [n for n, _, _ in spans])
    chunk = np.searchsorted(starts, rows, side="right") - 1
    # A run ends where the next row is not the next one, or lies in another chunk.
    breaks = np.flatnonzero((np.diff(rows) != 1) | (np.diff(chunk) != 0)) + 1
    run_lo = np.concatenate([[0], breaks]).astype(np.int64)
    run_hi = np.concatenate([breaks, [rows.size]]).astype(np.int64)
    run_chunk = chunk[run_lo]
    first = np.array([f for _, f, _ in spans], dtype=np.int64)[run_chunk]
    offsets = first + (rows[run_lo].astype(np.int64) - starts[run_chunk]) * row_bytes
    dst = run_lo * row_bytes  # where each run goes in the output
    lengths = (run_hi - run_lo) * row_bytes
    return offsets, dst, lengths


def _read_runs(path: str, runs: Runs, out: np.ndarray) -> None:
    """Read ``runs`` (:func:`_runs`) of a fixed-width column straight from the file into
    ``out``: one ``pread`` per run of consecutive rows."""
    offsets, dst, lengths = runs
    flat = out.reshape(-1).view(np.uint8)
    fd = os.open(path, os.O_RDONLY)
    try:
        done = 0
        if offsets.size >= JIT_MIN_RUNS:
            from .pread_jit import pread_runs

            done = pread_runs(fd, flat, dst, offsets, lengths)
        # The rest from Python: every run when they are few, else the run the jitted loop
        # could not finish (an error or a short file: raised here, with its reason).
        view = flat.data
        for i in range(done, offsets.size):
            target = view[int(dst[i]):int(dst[i] + lengths[i])]
            offset = int(offsets[i])
            while target.nbytes:
                got = os.preadv(fd, [target], offset)
                if got <= 0:
                    raise InputError(f"{path} is shorter than its Arrow IPC footer says; "
                                     "re-export the file")
                target, offset = target[got:], offset + got
    finally:
        os.close(fd)


def _load_reader() -> None:
    """Load the jitted reader's code with a call that reads nothing. Done before a bucket's
    read buffer is taken: a process's first load (Numba's import and registry, ~0.4 s
    holding the GIL) then runs while the local engine's prefault thread writes that buffer's
    pages on the other core (:meth:`scratch.ScratchPool.prefault`)."""
    from .pread_jit import pread_runs

    nothing = np.empty(0, np.int64)
    pread_runs(-1, np.empty(0, np.uint8), nothing, nothing, nothing)


def _take_rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``rows`` (increasing) of ``table`` as one chunk, taken record batch by record batch: the
    input's columns are never combined into one copy, and no string column is converted
    (Polars would first convert the whole table's strings to its own layout, once per bucket).
    One chunk, because Polars rechunks every column of a frame whose columns are chunked
    differently (the embeddings beside them are one chunk)."""
    parts = []
    start = 0
    for batch in table.to_batches():
        lo, hi = np.searchsorted(rows, [start, start + batch.num_rows])
        if hi > lo:
            parts.append(batch.take(pa.array(rows[lo:hi] - start)))
        start += batch.num_rows
    if not parts:
        return table.slice(0, 0)
    return pa.Table.from_batches(parts, schema=table.schema).combine_chunks()


def _gather_mapped(path: str, table: pa.Table, rows: np.ndarray, base: int,
                   size: int) -> pa.Table:
    """``rows`` (increasing) of a memory-mapped IPC table.

    Fixed-width list columns (the embeddings, most of the bytes) are read from the file with
    ``pread`` (:func:`_read_runs`) instead of through the mapping: a bucket's rows lie in
    runs of one document spread over the whole file, and faulting them in maps far more of
    the file than is read
    (the kernel maps whole folios around each fault: measured on the 250k-row benchmark file,
    one bucket's 25 MB of embeddings mapped 180 MB), all of it resident until the run ends.
    The other columns are taken from the mapping batch by batch (:func:`_take_rows`).
    """
    direct = _direct_columns(table, base, size)
    part = _take_rows(table.drop_columns(list(direct)) if direct else table, rows)
    runs = {name: _runs(spans, rows) for name, spans in direct.items()}
    if any(offsets.size >= JIT_MIN_RUNS for offsets, _, _ in runs.values()):
        _load_reader()  # before the buffers are taken (see _load_reader)
    for name, column_runs in runs.items():
        field = table.schema.field(name)
        kind = field.type
        values = scratch.empty((rows.size, kind.list_size),
                               dtype=kind.value_type.to_pandas_dtype())
        _read_runs(path, column_runs, values)
        array = pa.FixedSizeListArray.from_arrays(
            pa.array(values.reshape(-1), type=kind.value_type), kind.list_size)
        part = part.add_column(table.column_names.index(name), field, array)
    return part


def _read_partition(path: str) -> pa.Table:
    """A partition file's rows, its embeddings read with ``pread`` as
    :func:`_gather_mapped` reads them: taken through the mapping, the pages of a large
    bucket's embeddings stayed resident beside the copy the bucket works on (146 MB of a
    150k-row document at 256 dimensions)."""
    table, base, size = _mapped_at(path, validate=False)
    if not size or not table.num_rows or not _direct_columns(table, base, size):
        return table
    return _gather_mapped(path, table, np.arange(table.num_rows, dtype=np.int64), base, size)


def _direct_columns(table: pa.Table, base: int, size: int) -> dict[str, list[tuple[int, int, int]]]:
    """The columns of a mapped table that are read with ``pread`` (:func:`_fixed_rows`), with
    their spans; none where ``os.preadv`` is missing (it is POSIX: Linux, macOS 11+, BSD)."""
    direct = {}
    for name in table.column_names if hasattr(os, "preadv") else ():
        spans = _fixed_rows(table.column(name), base, size)
        if spans is not None:
            direct[name] = spans
    return direct


def _first_reads(source: BucketSource, cache: SourceCache, buckets: int) -> list[int]:
    """The bytes of the ``pread`` buffers the first ``buckets`` buckets take, for the pool
    to prefault (one input file: the common case; none otherwise)."""
    if source.partitioned or len(source.files) != 1 or source.files[0].startswith("mem:"):
        return []
    path = source.files[0]
    table, base, size = cache.mapping(path)
    widths = [spans[0][2] for spans in _direct_columns(table, base, size).values()]
    counts = np.bincount(cache.ids[path], minlength=source.buckets)[:buckets]
    return [int(n) * w for n in counts for w in widths]


def _bucket_ids(table: pa.Table, buckets: int) -> np.ndarray:
    if "doc_id" not in table.column_names:
        raise SchemaError("required column 'doc_id' is missing; add it (the partition key)")
    ids = table.column("doc_id")
    if not pa.types.is_string(ids.type):
        ids = pc.cast(ids, pa.string())
    return bucket_of(ids, buckets)


@dataclasses.dataclass
class SourceCache:
    """What the buckets of one local run share of their input files: each file's mapping and
    the bucket of each of its rows. Mapped once per run, the pages of a file's non-embedding
    columns fault in once, not once per bucket (a bucket's rows are spread over the whole
    file, so each fresh mapping faulted nearly all of them in again)."""

    mapped: dict[str, tuple[pa.Table, int, int]] = dataclasses.field(default_factory=dict)
    ids: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    # The buckets' large arrays (read embeddings, kept embeddings), reused (scratch).
    pool: scratch.ScratchPool = dataclasses.field(default_factory=scratch.ScratchPool)

    def mapping(self, path: str) -> tuple[pa.Table, int, int]:
        found = self.mapped.get(path)
        if found is None:
            found = self.mapped[path] = _mapped_at(path)
        return found


@dataclasses.dataclass(frozen=True)
class BucketSource:
    """Where the rows of each bucket come from (picklable, for Ray tasks).

    ``partitioned``: ``files[b]`` holds bucket ``b`` alone ("" when empty); otherwise every
    file is read (memory-mapped) and filtered to the bucket.
    """

    files: tuple[str, ...]
    buckets: int
    partitioned: bool
    total_rows: int = 0  # rows of the whole input (the kernels are chosen for it)
    # In-memory inputs of the local engine ("mem:<i>" in ``files``).
    tables: tuple[pa.Table, ...] = dataclasses.field(default=(), compare=False, repr=False)

    def open(self, key: str) -> pa.Table:
        if key.startswith("mem:"):
            return self.tables[int(key[4:])]
        return _mapped(key, validate=not self.partitioned)

    def table_of(self, path: str, cache: SourceCache | None = None
                 ) -> tuple[pa.Table, int, int]:
        """One input's table, the address of its file mapping and the mapping's size (0, 0
        for an in-memory table); files are mapped through ``cache`` when one is given."""
        if path.startswith("mem:"):
            return self.open(path), 0, 0
        return cache.mapping(path) if cache is not None else _mapped_at(path)

    def read(self, bucket: int, cache: SourceCache | None = None) -> pa.Table | None:
        return self.read_numbered(bucket, cache)[0]

    def read_numbered(self, bucket: int, cache: SourceCache | None = None
                      ) -> tuple[pa.Table | None, np.ndarray | None]:
        """Bucket ``bucket``'s rows (``None`` when it has none) and the input row number of
        each (0-based, counted across the inputs in order), for refusals that name rows."""
        if self.partitioned:
            path = self.files[bucket]
            if not path:
                return None, None
            saved = Path(_row_numbers_file(path))
            return _read_partition(path), np.load(saved) if saved.exists() else None
        parts: list[pa.Table] = []
        numbers: list[np.ndarray] = []
        offset = 0
        for path in self.files:
            table, base, size = self.table_of(path, cache)
            ids = cache.ids.get(path) if cache is not None else None
            if ids is None:
                ids = _bucket_ids(table, self.buckets)
                if cache is not None:
                    cache.ids[path] = ids
            rows = np.flatnonzero(ids == bucket)
            first, offset = offset, offset + table.num_rows
            if rows.size == table.num_rows:
                parts.append(table)
            elif rows.size and size:
                parts.append(_gather_mapped(path, table, rows, base, size))
            elif rows.size:
                parts.append(_take_rows(table, rows))
            else:
                continue
            numbers.append(rows + first)
        if not parts:
            return None, None
        return (pa.concat_tables(parts) if len(parts) > 1 else parts[0]), np.concatenate(numbers)

    def empty(self) -> pa.Table:
        """A zero-row table with the input schema (an empty corpus still gets a store)."""
        for path in self.files:
            if path:
                return self.open(path).slice(0, 0)
        raise InputError("no input rows and no schema; pass a non-empty segments table")


def _parquet_bytes_uncompressed(path: Path) -> int | None:
    try:
        with path.open("rb") as fh:
            if fh.read(4) != b"PAR1":
                return None
        meta = pq.ParquetFile(path).metadata
    except (pa.ArrowException, OSError):
        return None  # read_table_file reports the damage clearly
    return sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))


def _check_schemas(schemas: list[pa.Schema], names: Sequence[Any]) -> None:
    for schema, name in zip(schemas[1:], names[1:], strict=True):
        if not schema.equals(schemas[0]):
            raise SchemaError(
                f"the input files do not share one schema ({names[0]} vs {name}); "
                "write them with the same columns and types")


def _arrow_of(table: TableLike) -> pa.Table:
    from ..schema import read_segments

    frame = read_segments(table)
    return frame.to_arrow()


@contextlib.contextmanager
def bucket_source(inputs: Sequence[Path] | Sequence[pa.Table] | BatchStream, buckets: int,
                  workdir: Path, memory_budget: int = 0, *, in_memory: bool = True
                  ) -> Iterator[BucketSource]:
    """The :class:`BucketSource` of ``inputs`` (paths, Arrow tables already in memory, or a
    :class:`BatchStream`, always partitioned);
    partition files live under ``workdir`` and are removed afterwards. Parquet inputs whose
    uncompressed size is at most ``memory_budget`` bytes in total are read into memory
    instead of partitioned; ``in_memory=False`` (Ray) partitions in-memory tables too."""
    if isinstance(inputs, BatchStream):
        with _partitioned([(inputs.schema, inputs.batches, inputs.name)], buckets,
                          workdir) as source:
            yield source
        return
    if inputs and all(isinstance(t, pa.Table) for t in inputs):
        tables = [t for t in inputs if isinstance(t, pa.Table)]
        _check_schemas([t.schema for t in tables], [f"table {i}" for i in range(len(tables))])
        if in_memory:
            yield BucketSource(tuple(f"mem:{i}" for i in range(len(tables))), buckets, False,
                               sum(t.num_rows for t in tables), tuple(tables))
            return
        batches = [(t.schema, iter(t.to_batches(PARTITION_BATCH)), f"table {i}")
                   for i, t in enumerate(tables)]
        with _partitioned(batches, buckets, workdir) as source:
            yield source
        return
    paths = [Path(p) for p in inputs]  # type: ignore[arg-type]
    check_inputs(paths)
    if all(_is_ipc_file(p) for p in paths):
        mapped = [_mapped(str(p)) for p in paths]
        _check_schemas([t.schema for t in mapped], paths)
        yield BucketSource(tuple(str(p) for p in paths), buckets, False,
                           sum(t.num_rows for t in mapped))
        return
    sizes = [_parquet_bytes_uncompressed(p) for p in paths]
    if memory_budget > 0 and all(n is not None for n in sizes) and \
            sum(n or 0 for n in sizes) <= memory_budget:
        tables = [_read_parquet(p) for p in paths]
        _check_schemas([t.schema for t in tables], paths)
        yield BucketSource(tuple(f"mem:{i}" for i in range(len(tables))), buckets, False,
                           sum(t.num_rows for t in tables), tuple(tables))
        return
    with _partitioned([(*_batches(p), str(p)) for p in paths], buckets, workdir) as source:
        yield source


def _read_parquet(path: Path) -> pa.Table:
    """A whole Parquet file as an Arrow table, read by Polars: on the 1M benchmark file it is
    the faster reader and its peak memory is about the data (pyarrow's ``read_table`` peaked
    at ~3.5x the data at 200k segments: 1.16 GB against Polars' 0.57 GB)."""
    try:
        return pl.read_parquet(path).to_arrow()
    except (pl.exceptions.PolarsError, pa.ArrowException, OSError) as err:
        raise InputError(f"{path} is truncated or corrupted and cannot be read ({err}); "
                         "re-export the file") from err


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


@contextlib.contextmanager
def _partitioned(inputs: Iterable[tuple[pa.Schema, Iterator[pa.RecordBatch], str]],
                 buckets: int, workdir: Path) -> Iterator[BucketSource]:
    tmp = workdir / f".partition-{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    try:
        yield _partition(inputs, buckets, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _row_numbers_file(partition_file: str) -> str:
    """Beside each partition file: the input row number of each of its rows (.npy)."""
    return partition_file.removesuffix(".arrow") + ".rows.npy"


def _partition(inputs: Iterable[tuple[pa.Schema, Iterator[pa.RecordBatch], str]],
               buckets: int, tmp: Path) -> BucketSource:
    writers: dict[int, ipc.RecordBatchFileWriter] = {}
    numbers: dict[int, list[np.ndarray]] = {}
    schema0: pa.Schema | None = None
    first = ""
    total = 0
    try:
        for schema, batches, name in inputs:
            if schema0 is None:
                schema0, first = schema, name
            elif not schema.equals(schema0):
                raise SchemaError(
                    f"the input files do not share one schema ({first} vs {name}); "
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
                        numbers.setdefault(b, []).append(rows + total)
                    total += batch.num_rows
            except (pa.ArrowException, OSError) as err:
                raise InputError(f"{name} is truncated or corrupted and cannot be read "
                                 f"({err}); re-export the file") from err
        if schema0 is not None and not writers:  # no rows at all: keep the schema
            ipc.new_file(str(tmp / "b-00000.arrow"), schema0).close()
            return BucketSource(tuple(str(tmp / "b-00000.arrow") if b == 0 else ""
                                      for b in range(buckets)), buckets, True, 0)
    finally:
        for w in writers.values():
            w.close()
    for b, parts in numbers.items():
        save_npy(_row_numbers_file(str(tmp / f"b-{b:05d}.arrow")), np.concatenate(parts))
    return BucketSource(tuple(str(tmp / f"b-{b:05d}.arrow") if b in writers else ""
                              for b in range(buckets)), buckets, True, total)


# ----------------------------------------------------------------------------- buckets


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


def _driver_node() -> str | None:
    """The Ray node this driver runs on; None through Ray Client (``ray://``), whose driver
    process and files are on a machine that is no node of the cluster."""
    import ray
    from ray.util.client import ray as client

    if client.is_connected():
        return None
    return str(ray.get_runtime_context().get_node_id())


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


# The SourceCache of the Ray worker process this module runs in: the tasks a worker runs in
# one job share its input mappings and bucket numbers, as the local engine's threads do (each
# task used to map the file afresh and hash every doc_id of it, ~0.06 s per bucket at 1M).
_WORKER_CACHE: tuple[tuple[Any, ...], SourceCache] | None = None


def _source_identity(source: BucketSource) -> tuple[Any, ...]:
    """What a cached mapping is valid for: the input files as they are on disk now (a file
    replaced or rewritten since gets a fresh mapping) and the bucket count."""
    files = []
    for path in source.files:
        st = os.stat(path) if path and not path.startswith("mem:") else None
        files.append((path, None if st is None else
                      (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)))
    return (source.buckets, source.partitioned, tuple(files))


def _ray_task(source: BucketSource, bucket: int, job: BucketJob
              ) -> tuple[BucketOutput, BucketSummary] | None:
    """One bucket in a Ray worker, through the worker's cache of the source (one source at a
    time is kept: a worker serves one driver's job, and Ray ends it with that job)."""
    global _WORKER_CACHE
    key = _source_identity(source)
    if _WORKER_CACHE is None or _WORKER_CACHE[0] != key:
        _WORKER_CACHE = None  # the old mappings go before the new ones are made
        _WORKER_CACHE = (key, SourceCache())
    return process_bucket(source, bucket, job, _WORKER_CACHE[1])


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


def buckets_in_flight(threads: int | None) -> int:
    """Buckets the local engine works on at once: ``LOCAL_AHEAD + 1``, each with ``threads``
    kernel threads; one when ``threads`` is 1, so that one thread means one thread. (Giving
    two buckets in flight one kernel thread each by default instead measured the same on 2
    cores: 3.62 against 3.59 s at 1M, four fresh runs each.)"""
    return 1 if threads == 1 else LOCAL_AHEAD + 1


def bucket_ids(source: BucketSource, cache: SourceCache) -> None:
    """The bucket of every row of each unpartitioned input, into ``cache`` (part of
    partitioning)."""
    for path in () if source.partitioned else source.files:
        if path not in cache.ids:
            cache.ids[path] = _bucket_ids(source.table_of(path, cache)[0], source.buckets)


def _local(source: BucketSource, job: BucketJob, cache: SourceCache | None = None,
           alone_bytes: int | None = None
           ) -> Iterator[tuple[BucketOutput, BucketSummary]]:
    """Buckets in order; ``LOCAL_AHEAD + 1`` buckets are read and ingested on worker threads
    while the caller writes the previous one (Polars, Arrow, Numba and BLAS release the GIL),
    so at most ``LOCAL_AHEAD + 2`` buckets are in memory (one when ``job.threads`` is 1). A
    bucket of more than ``alone_bytes`` input bytes (:func:`bucket_bytes`; default
    :data:`ALONE_BYTES`) is worked on alone: it starts once the buckets before it are done,
    and the next starts once it is written.
    ``cache``: the run's :class:`SourceCache` (with the bucket ids, :func:`bucket_ids`)."""
    from concurrent.futures import Future, ThreadPoolExecutor

    cache = cache if cache is not None else SourceCache()
    bucket_ids(source, cache)
    if source.buckets == 1:
        done = process_bucket(source, 0, job, cache)
        if done is not None:
            yield done
        return
    in_flight = buckets_in_flight(job.threads)
    prefault = None
    if in_flight > 1:
        # The first buckets' read buffers, written ahead on a thread of their own while the
        # workers load their code (below), and as many again for the kept rows they gather
        # (a kept set fits in its bucket's read size).
        sizes = _first_reads(source, cache, in_flight)
        if sizes:
            prefault = threading.Thread(target=cache.pool.prefault, args=(sizes * 2,),
                                        name="arrowdedup-prefault", daemon=True)
            prefault.start()
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(max_workers=in_flight) as pool:
        if prefault is not None:
            stack.callback(prefault.join)
        pending: dict[int, Future[Any]] = {}
        nxt = 0
        inputs = bucket_bytes(source, cache)
        limit = ALONE_BYTES if alone_bytes is None else alone_bytes
        alone = [n > limit for n in inputs]
        # The most any bucket after b may ask of the pool (a buffer holds its embeddings read,
        # or kept, which are fewer bytes than its input).
        later = np.maximum.accumulate(np.array([0, *inputs[::-1]], dtype=np.int64))[-2::-1]

        def refill() -> None:
            nonlocal nxt
            while nxt < source.buckets and len(pending) < in_flight:
                if pending and (alone[nxt] or any(alone[b] for b in pending)):
                    break
                pending[nxt] = pool.submit(process_bucket, source, nxt, job, cache,
                                           alone=alone[nxt])
                nxt += 1

        for b in range(source.buckets):
            refill()
            done = pending.pop(b).result()
            # Refilled before the caller writes this bucket: refilling only on the next
            # iteration left one worker idle during every write (0.06-0.08 s a bucket at 1M;
            # the job took 2.89 s against 3.17 s, medians of 7-8 alternating fresh runs).
            # With one thread nothing runs beside the write, nor beside a bucket that runs
            # alone: its output (the kept rows, the file images) is as large as its working
            # set, and the next buckets started under it (the CSV document's write beside
            # the two buckets after it: 1.66 GB).
            if in_flight > 1 and not alone[b]:
                refill()
            if done is not None:
                yield done
            # Not held while the next bucket runs: a large bucket's output (its file images
            # and kept rows, on pool buffers) stayed alive under the next one's working set.
            done = None
            cache.pool.trim(int(later[b]))
            if alone[b] or (b + 1 < source.buckets and alone[b + 1]):
                # Arrow's allocator (mimalloc) keeps the pages it freed for reuse, and no
                # other allocator reuses them: after the CSV document's bucket of the corpus
                # + four large files run it held 0.3 GB beside the 0.03 GB Arrow had in use,
                # under every bucket after it. Only around a bucket that runs alone: handing
                # pages back costs a page fault each when Arrow takes them again.
                pa.default_memory_pool().release_unused()


# The thread pools of a Ray worker sized to the one CPU each task reserves (``num_cpus=1``),
# as Ray itself sizes OpenMP's: left at the machine's core count, every worker ran Polars' and
# Numba's pools beside the others' on the same cores. A 1M run on 2 cores, seconds after
# ray.init: 4.63 against 5.55 with the fact guard off (medians of 5, pools at their defaults
# for the second); 5.13 against 5.68 with the default config (medians of 4, alternating).
ONE_CPU_POOLS = {"POLARS_MAX_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
# Ray starts its workers at nice 15, below its own daemons and the driver, to keep a shared
# node's raylet responsive. In a cluster started for one run the workers are the run's
# compute, and the local engine runs at the caller's priority, so they get the caller's
# priority too. Measured (1M IPC, fact guard off, 2 cores, whole call with ray.init, 13
# alternating pairs of fresh runs): 8 of 13 pairs faster, median pair gain 0.62 s; a first
# batch of 7 gained 0.80 s, a second of 6 nothing (0.03 s), so the speed-up is not firm.
LOCAL_CLUSTER_ENV = {**ONE_CPU_POOLS, "RAY_worker_niceness": "0"}


@contextlib.contextmanager
def _worker_environment(names: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``names`` set where the user has not set them, then restored: the
    processes a local ``ray.init`` spawns (raylet, and the workers it starts) inherit it; this
    process's own pools are built already or read it later, after the restore."""
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update({name: value for name, value in names.items() if saved[name] is None})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def ray_start(address: str | None) -> bool:
    """Start (or join) Ray; True when this call started it. Timed by the benchmarks. A cluster
    this call starts gives its workers one-thread pools and the caller's priority
    (:data:`LOCAL_CLUSTER_ENV`); a cluster it joins keeps the environment its workers were
    started with."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "ray", "--engine ray") from None
    if ray.is_initialized():
        return False
    # Not through runtime_env's env_vars: a job-level runtime env made Ray start workers for it
    # instead of using the ones it prestarts (6.24 s after ray.init, median of 5).
    with _worker_environment(LOCAL_CLUSTER_ENV if address is None else {}):
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    return True


def _stop_monitor() -> None:
    """End the autoscaler monitor of the Ray cluster this process started, before
    ``ray.shutdown``. Ray 2.60 stops the GCS first and then sends the monitor SIGTERM; the
    monitor's handler then waits on the stopped GCS to report its own exit, until Ray kills it
    one second later (1.0 of the 1.4 s a shutdown took, measured). A local cluster started for
    one run has nothing for the monitor to report. This reaches into Ray's node object, so any
    layout other than the one described leaves the monitor to ``ray.shutdown`` as before."""
    try:
        from ray._private import ray_constants
        from ray._private import worker as ray_worker
    except ImportError:
        return
    node = getattr(ray_worker, "_global_node", None)
    processes = getattr(node, "all_processes", None)
    if node is None or not isinstance(processes, dict) or not node.is_head():
        return
    for info in processes.get(getattr(ray_constants, "PROCESS_TYPE_MONITOR", "monitor"), []):
        process = getattr(info, "process", None)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=5)


def stop_ray() -> None:
    """Stop the Ray cluster this process started, as a run does. Timed by the benchmarks."""
    import ray

    _stop_monitor()
    ray.shutdown()


class RaySession:
    """Ray for one run: started (or joined) on entry; on exit, stopped when this run started
    it. ``stop_soon`` starts that stop on a thread once the last bucket is in, so that Ray's
    shutdown (about 0.4 s, see :func:`_stop_monitor`) overlaps the commit; the exit waits for
    it. A run that fails stops Ray before its exit returns, so no task of it can
    still be writing when the writer removes the staging directory."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        self.started = False
        self._stopping: threading.Thread | None = None
        self._error: BaseException | None = None

    def __enter__(self) -> RaySession:
        self.started = ray_start(self.address)
        return self

    def stop_soon(self) -> None:
        if self.started and self._stopping is None:
            self._stopping = threading.Thread(target=self._stop, name="arrowdedup-ray-stop",
                                              daemon=True)
            self._stopping.start()

    def _stop(self) -> None:
        try:
            stop_ray()
        except BaseException as err:  # raised by __exit__, in the caller's thread
            self._error = err

    def __exit__(self, kind: object, *_: object) -> None:
        if not self.started:
            return
        if self._stopping is None:
            stop_ray()
        else:
            self._stopping.join()
        self.started = False
        if self._error is not None and kind is None:  # never hides the run's own error
            raise self._error


def _ray_result(ray: Any, ref: Any) -> Any:
    """``ray.get(ref)``; a refusal raised inside the task (bad input, a full disk) is raised
    as itself, as the local engine raises it, not as Ray's wrapper that prints the worker's
    colored traceback before the message."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, ArrowDedupError):
            raise cause from None
        raise


def _ray(source: BucketSource, job: BucketJob, session: RaySession,
         staging: Path | None = None) -> Iterator[tuple[BucketOutput, BucketSummary]]:
    """Buckets as Ray tasks, in order. Tasks on the driver's node write their files into
    ``staging`` (the writer's version directory) themselves; on other nodes they return the
    bytes, which the driver writes. Ray stops (``session.stop_soon``) once every bucket is in.
    """
    import ray

    pending: dict[int, Any] = {}
    try:
        task = ray.remote(num_cpus=1)(_ray_task)
        # A bounded window of tasks in flight keeps the driver's memory near a few buckets.
        window = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        nxt = 0
        node = _driver_node() if staging is not None else None
        one_thread = dataclasses.replace(job, threads=1, node=node,
                                         staging=str(staging) if staging is not None else None)
        for b in range(source.buckets):
            while nxt < source.buckets and len(pending) < window:
                pending[nxt] = task.remote(source, nxt, one_thread)
                nxt += 1
            done = _ray_result(ray, pending.pop(b))
            if done is not None:
                yield done
        # Every bucket is in and written: the commit runs beside Ray's shutdown. (Not before
        # the last bucket was written: a result can hold buffers in Ray's shared memory.)
        session.stop_soon()
    finally:
        # A run that stops early leaves no task writing into a staging directory that the
        # writer is about to remove.
        for ref in pending.values():
            ray.cancel(ref, force=True)  # our tasks hold nothing a killed worker could lose


# ----------------------------------------------------------------------------- documents


def check_store_model(out: str | Path, model: str, dim: int) -> None:
    """Refuse, before any embedding work, a store built with another embedding model."""
    try:
        previous = current_manifest(Path(out))
    except StoreError:
        return  # a damaged store is reported by the writer with its own message
    if previous is None:
        return
    old = previous.get("embedding") or {}
    old_model, old_dim = old.get("model"), old.get("dim")
    if old_model and old_model != model:
        raise StoreError(
            f"store {out} was built with embedding model {old_model!r}, this run uses "
            f"{model!r}; embeddings of two models must not mix (SPEC §9): re-ingest everything "
            f"into a new store, or pass the store's embedder (--embedder)"
        )
    if old_dim and old_dim != dim:
        raise StoreError(
            f"store {out} holds {old_dim}-d embeddings, the embedder {model!r} gives {dim}-d; "
            "write to a new store, or use the store's embedder"
        )


def extract_segments(
    paths: Sequence[str | Path],
    *,
    language_from_path: str | None = None,
    key_columns: Sequence[str] | None = None,
    skip_bad_files: bool = False,
    root: str | Path | None = None,
    detect_keys: bool = True,
    doc_version_from_path: str | None = None,
    limits: ExtractLimits | None = None,
    follow_external_symlinks: bool = False,
) -> Any:
    """Run the extractors (``doc_id`` relative to ``root``, default each folder argument)."""
    from ..extract import extract_documents

    return extract_documents(
        [Path(p) for p in paths], root=root,
        key_columns=list(key_columns) if key_columns else None,
        language_from_path=language_from_path, skip_bad_files=skip_bad_files,
        detect_keys=detect_keys, doc_version_from_path=doc_version_from_path, limits=limits,
        follow_external_symlinks=follow_external_symlinks,
    )


def refuse_embedder_for_tables(embedder: str | Embedder | None) -> None:
    """A segments table is never embedded (SPEC §3), so an embedder given with one would be
    silently unused: its near duplicates would go unseen while the run looked embedded."""
    if embedder is not None:
        raise InputError(
            "an embedder embeds document files only; a segments table is never embedded "
            "(rows without an embedding get exact dedup only): add an 'embedding' column and "
            "name its model with --embedding-model (embedding_model=), or ingest the document "
            "files instead")


def choose_embedder(out: str | Path, embedder: str | Embedder | None) -> str | Embedder:
    """The embedder of a run: the one given, else the one the store records (MiniLM on the
    store's runtime), else MiniLM. A spec given by name is checked against the store before
    anything is loaded."""
    from ..embed.embedders import recorded_spec, spec_model_name

    try:
        previous = current_manifest(Path(out))
    except StoreError:
        previous = None
    if embedder is None:
        spec = recorded_spec(previous, f"store {out}", same_runtime=True) if previous else None
        return spec or "minilm"
    if isinstance(embedder, str) and previous is not None:
        dim = (previous.get("embedding") or {}).get("dim")
        # The dimension is only known once loaded; the name check is the one that saves time.
        check_store_model(out, spec_model_name(embedder), dim or 0)
    return embedder


def with_embeddings(frame: pl.DataFrame, vectors: np.ndarray) -> pl.DataFrame:
    """``frame`` plus an ``embedding`` column of fixed-size float32 lists."""
    return frame.with_columns(pl.Series("embedding", np.ascontiguousarray(vectors, np.float32)))


@dataclasses.dataclass
class Documents:
    """Extracted and embedded documents: the segments (without embeddings), the vectors of
    their distinct embedding texts and each row's index into them (``vectors[inverse]``),
    the model name and the manifest extras."""

    frame: pl.DataFrame
    vectors: np.ndarray
    inverse: np.ndarray
    model: str
    extra: dict[str, Any]

    def table(self) -> pl.DataFrame:
        """The segments table with its ``embedding`` column."""
        return with_embeddings(self.frame, self.vectors[self.inverse])

    def table_bytes(self) -> int:
        """About what the segments table with its embeddings takes in memory."""
        row = self.vectors.shape[1] * self.vectors.itemsize
        return int(self.frame.estimated_size()) + self.inverse.size * row


def _documents(
    inputs: Sequence[Path], store_root: Path, *, embedder: str | Embedder | None,
    language_from_path: str | None, key_columns: Sequence[str] | None,
    skip_bad_files: bool, root: str | Path | None, quiet: bool, timings: dict[str, float],
    detect_keys: bool = True, doc_version_from_path: str | None = None,
    limits: ExtractLimits | None = None, follow_external_symlinks: bool = False,
) -> Documents:
    """Extract and embed documents (through the store's embedding cache)."""
    from .. import progress
    from ..embed.cache import EmbeddingCache, embed_distinct
    from ..embed.embedders import embedder_record, embedder_runtime, get_embedder
    from . import precompile

    embedder = choose_embedder(store_root, embedder)
    precompile.for_extract(inputs, timings, quiet=quiet)
    start = time.perf_counter()
    with progress.spinner("extracting", quiet=quiet):
        extracted = extract_segments(inputs, language_from_path=language_from_path,
                                     key_columns=key_columns, skip_bad_files=skip_bad_files,
                                     root=root, detect_keys=detect_keys,
                                     doc_version_from_path=doc_version_from_path,
                                     limits=limits,
                                     follow_external_symlinks=follow_external_symlinks)
    frame = extracted.segments.drop("embedding", strict=False)
    timings["extract"] = timings.get("extract", 0.0) + time.perf_counter() - start

    start = time.perf_counter()
    with progress.spinner("loading the embedder", quiet=quiet):
        model = get_embedder(embedder)
    if isinstance(embedder, str):
        timings["embedder_load"] = timings.get("embedder_load", 0.0) + \
            time.perf_counter() - start
    start = time.perf_counter()  # the embed stage is the embedding alone, not the load
    check_store_model(store_root, model.name, model.dim)
    cache = EmbeddingCache(store_root / "cache", model.name, model.dim,
                           runtime=embedder_runtime(model))
    code = frame.get_column("segment_type").cast(pl.String).eq("code").fill_null(False)
    vectors, inverse, cache_stats = embed_distinct(
        frame.get_column("text").to_arrow(), model, cache=cache, quiet=quiet,
        verbatim=code.to_numpy())
    timings["embed"] = timings.get("embed", 0.0) + time.perf_counter() - start
    extra = {
        "skipped_files": [dataclasses.asdict(f) for f in extracted.skipped],
        "extract": {k: v for k, v in extracted.manifest().items() if k != "skipped_files"},
        "embedding_cache": cache_stats.to_dict(),
        "embedder": embedder_record(model),
        "source": "documents",
    }
    return Documents(frame, vectors, inverse, model.name, extra)


@dataclasses.dataclass
class BatchStream:
    """Segments that arrive batch by batch, read once (a large documents run): always
    partitioned to disk, so the run never holds them whole."""

    schema: pa.Schema
    batches: Iterator[pa.RecordBatch]
    rows: int
    name: str = "<documents>"


def documents_stream(docs: Documents) -> BatchStream:
    """``docs`` as Arrow batches with their embeddings gathered batch by batch. The stream
    takes ``docs``' data over: it is released as the stream is consumed, the caller keeps
    no reference. The batches carry exactly the schema :func:`with_embeddings` gives, so a
    streamed run writes the same store as one held in memory."""
    frame, vectors, inverse = docs.frame, docs.vectors, docs.inverse
    docs.frame, docs.vectors, docs.inverse = frame.clear(), np.empty((0, 0)), np.empty(0)
    dim = vectors.shape[1]
    head = with_embeddings(frame.head(0), np.zeros((0, dim), np.float32)).to_arrow()
    field = head.schema.field("embedding")
    # Converted slice by slice (a whole-frame conversion held a second copy of every text
    # beside the frame), unless a column is dictionary-encoded (a passthrough table's
    # categorical): the partition files take one dictionary per column.
    whole = frame.to_arrow() if any(pa.types.is_dictionary(t) for t in head.schema.types) \
        else None
    schema = (whole.schema if whole is not None else head.schema.remove(
        head.schema.get_field_index("embedding"))).append(field)

    def batches(frame: pl.DataFrame, whole: pa.Table | None, vectors: np.ndarray,
                inverse: np.ndarray) -> Iterator[pa.RecordBatch]:
        for start in range(0, frame.height, DOCUMENTS_BATCH):
            part = frame.slice(start, DOCUMENTS_BATCH).to_arrow() if whole is None \
                else whole.slice(start, DOCUMENTS_BATCH)
            rows = inverse[start: start + part.num_rows]
            values = pa.array(vectors[rows].reshape(-1), type=field.type.value_type)
            column = pa.FixedSizeListArray.from_arrays(values, type=field.type)
            columns = [part.column(i).combine_chunks() for i in range(part.num_columns)]
            yield pa.RecordBatch.from_arrays([*columns, column], schema=schema)

    return BatchStream(schema, batches(frame, whole, vectors, inverse), frame.height)


# Documents whose segments and vectors take more than this are partitioned to disk batch by
# batch instead of held in memory for the whole job: the four-large-files run of
# benchmarks/hostile_input (311k segments, a 0.5 GB table) peaked at 2.17 GB held in memory
# and at 1.60 GB streamed (with the pool and partition reads of the same commit). Small
# runs stay in memory, where partitioning would only add file writes.
STREAM_DOCUMENTS_BYTES = 128 << 20
# Rows of a streamed documents batch. Each batch is built (its texts converted, its vectors
# gathered) while the previous one is still being partitioned, beside every segment and
# vector of the run: at PARTITION_BATCH (64k) rows that phase peaked at 1.60 GB for the
# corpus + four large files run of benchmarks/hostile_input, at 16k rows 1.36 GB. The batch
# size does not reach the store: a bucket is read back as one table.
DOCUMENTS_BATCH = 16 * 1024


# ----------------------------------------------------------------------------- the job


def _as_inputs(source: Source, columns: Mapping[str, str] | None = None
               ) -> tuple[list[pa.Table], list[Path]]:
    from ..schema import dataset_segments, is_dataset

    if columns is not None or is_dataset(source):
        return [dataset_segments(source, columns)], []
    if isinstance(source, (pl.DataFrame, pl.LazyFrame, pa.Table)):
        return [_arrow_of(source)], []
    if isinstance(source, (str, Path)):
        return [], [Path(source)]
    if isinstance(source, Sequence) and source and all(
            isinstance(s, (pl.DataFrame, pl.LazyFrame, pa.Table)) for s in source):
        return [_arrow_of(s) for s in source], []  # type: ignore[arg-type]
    if isinstance(source, Sequence) and all(isinstance(s, (str, Path)) for s in source):
        return [], [Path(s) for s in source]  # type: ignore[arg-type]
    raise InputError(
        f"cannot ingest a {type(source).__name__}; pass a polars DataFrame or LazyFrame, a "
        "pyarrow Table, Parquet / Arrow IPC file path(s), or document files / folders")


def ingest_to_store(
    source: Source,
    out: str | Path,
    *,
    config: DedupConfig | None = None,
    threads: int | None = None,
    buckets: int = DEFAULT_BUCKETS,
    engine: str = "local",
    ray_address: str | None = None,
    embedder: str | Embedder | None = None,
    embedding_model: str | None = None,
    language_from_path: str | None = None,
    key_columns: Sequence[str] | None = None,
    skip_bad_files: bool = False,
    root: str | Path | None = None,
    detect_keys: bool = True,
    doc_version_from_path: str | None = None,
    scorer: SalienceScorer | None = None,
    quiet: bool = False,
    indexes: bool | Sequence[IndexBuilder] = True,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    replace: bool = False,
    keep_versions: int = KEEP_VERSIONS,
    extract_limits: ExtractLimits | None = None,
    follow_external_symlinks: bool = False,
    columns: Mapping[str, str] | None = None,
) -> JobResult:
    """Deduplicate ``source`` inside each document and write it as a new version of the store
    at ``out``, switched to atomically; returns the :class:`JobResult` of that version.

    ``source``: a segments table (DataFrame, LazyFrame, Arrow table), Parquet / Arrow IPC
    segments files, or document files and folders (Markdown, text, HTML, CSV/TSV, JSONL),
    which are extracted (``language_from_path``, ``key_columns``, ``skip_bad_files``;
    ``doc_id`` relative to ``root``) and embedded with ``embedder`` through the store's
    embedding cache first. Tables are never embedded (SPEC §3); ``embedding_model`` names the
    model their embeddings came from. Salience is scored (``scorer``, default SPEC §3) when
    the input has none. ``indexes``: the index builders (default: BM25), or False for none.
    ``memory_budget``: Parquet inputs up to this many uncompressed bytes are read whole
    instead of partitioned to disk first (local engine; 0 always partitions).
    ``replace``: write over a store built from other inputs (refused otherwise, naming
    ``--update`` and ``--replace``); ``keep_versions``: versions kept after the switch.
    ``extract_limits``: what one document file may cost to extract (``ExtractLimits``);
    ``follow_external_symlinks``: read links in a folder that point outside it.
    ``source`` may be a Hugging Face ``datasets.Dataset``, whose columns ``columns`` maps onto
    the segments table (:mod:`arrowdedup.integrations.datasets`).
    """
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose 'local' or 'ray'")
    if buckets < 1:
        raise StoreError(f"buckets must be >= 1, got {buckets}")
    start = time.perf_counter()
    cfg = resolve_config(config)
    store_root = Path(out)
    tables, paths = _as_inputs(source, columns)
    timings: dict[str, float] = {}
    extra: dict[str, Any] = {"engine": engine}
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
        docs = _documents(
            paths, store_root, embedder=embedder, language_from_path=language_from_path,
            key_columns=key_columns, skip_bad_files=skip_bad_files, root=root, quiet=quiet,
            timings=timings, detect_keys=detect_keys,
            doc_version_from_path=doc_version_from_path, limits=extract_limits,
            follow_external_symlinks=follow_external_symlinks)
        model = docs.model
        extra.update(docs.extra)
        from ..store.source_files import file_records

        # Each file's size, mtime and hash: a later --update re-extracts the changed ones only.
        extra["source_files"] = file_records(
            paths, root, docs.frame.get_column("doc_id").cast(pl.String).unique().to_list())
        extra["extract_options"] = {
            "language_from_path": language_from_path,
            "key_columns": list(key_columns) if key_columns else None,
            "detect_keys": detect_keys, "doc_version_from_path": doc_version_from_path}
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
    job = BucketJob(cfg, threads, tuple(_encoder_of(b) for b in builders), scorer)
    writer = StoreWriter(store_root, buckets=buckets, config=cfg, inputs=names,
                         embedding_model=model, extra=extra, indexes=builders,
                         keep_versions=keep_versions)
    inputs: Sequence[Path] | Sequence[pa.Table] | BatchStream = \
        streamed or (tables if tables else paths)
    del streamed, tables  # a stream's data goes as it is partitioned
    budget = memory_budget if engine == "local" else 0  # Ray tasks read files
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
                                                    in_memory=engine == "local"))
            cache = SourceCache()
            if engine == "local":  # the bucket of every input row
                bucket_ids(src, cache)
        timings["partition"] = time.perf_counter() - t
        precompile.for_buckets(src, cache, job, timings, quiet=quiet)
        t = time.perf_counter()
        if engine == "local":
            stream = _local(src, job, cache)
        else:
            session = stack.enter_context(RaySession(ray_address))
            stream = _ray(src, job, session, writer.staging)
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
    return JobResult(open_store(store_root), _timings(timings), cfg)


# ----------------------------------------------------------------------------- helpers


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
    extra: Mapping[str, Any] | None = None,
    hooks: Sequence[Callable[[Path, pl.DataFrame], Any]] = (),
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

    def __init__(self, hook: Callable[[Path, pl.DataFrame], Any]) -> None:
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
