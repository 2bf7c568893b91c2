"""The inputs of a job: segments files and tables, read and partitioned into buckets.

Arrow IPC files are memory-mapped and each bucket gathers its rows from them; Parquet up to the
memory budget is read whole; anything else goes through one partitioning pass to disk. See
:mod:`arrowdedup.pipeline.run` for the whole job path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ..arrays import scratch
from ..errors import InputError, SchemaError
from ..schema import read_table_file
from ..store import (
    bucket_of,
)
from ..store.atomic import save_npy

if TYPE_CHECKING:
    from datasets import Dataset



PARTITION_BATCH = 64 * 1024


DEFAULT_MEMORY_BUDGET = 2 << 30


# Suffixes that are segments tables, not documents.
TABLE_SUFFIXES = frozenset({".parquet", ".arrow", ".ipc", ".feather"})


TableLike: TypeAlias = pl.DataFrame | pl.LazyFrame | pa.Table


# A Hugging Face datasets.Dataset is a source too (arrowdedup.integrations.datasets).
Source: TypeAlias = "TableLike | str | Path | Sequence[str | Path] | Dataset"


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


def gather_mapped(path: str, table: pa.Table, rows: np.ndarray, base: int,
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


def read_partition(path: str) -> pa.Table:
    """A partition file's rows, its embeddings read with ``pread`` as
    :func:`gather_mapped` reads them: taken through the mapping, the pages of a large
    bucket's embeddings stayed resident beside the copy the bucket works on (146 MB of a
    150k-row document at 256 dimensions)."""
    table, base, size = _mapped_at(path, validate=False)
    if not size or not table.num_rows or not _direct_columns(table, base, size):
        return table
    return gather_mapped(path, table, np.arange(table.num_rows, dtype=np.int64), base, size)


def _direct_columns(table: pa.Table, base: int, size: int) -> dict[str, list[tuple[int, int, int]]]:
    """The columns of a mapped table that are read with ``pread`` (:func:`_fixed_rows`), with
    their spans; none where ``os.preadv`` is missing (it is POSIX: Linux, macOS 11+, BSD)."""
    direct = {}
    for name in table.column_names if hasattr(os, "preadv") else ():
        spans = _fixed_rows(table.column(name), base, size)
        if spans is not None:
            direct[name] = spans
    return direct


def first_reads(source: BucketSource, cache: SourceCache, buckets: int) -> list[int]:
    """The bytes of the ``pread`` buffers the first ``buckets`` buckets take, for the pool
    to prefault (one input file: the common case; none otherwise)."""
    if source.partitioned or len(source.files) != 1 or source.files[0].startswith("mem:"):
        return []
    path = source.files[0]
    table, base, size = cache.mapping(path)
    widths = [spans[0][2] for spans in _direct_columns(table, base, size).values()]
    counts = np.bincount(cache.ids[path], minlength=source.buckets)[:buckets]
    return [int(n) * w for n in counts for w in widths]


def row_buckets(table: pa.Table, buckets: int) -> np.ndarray:
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
            return read_partition(path), np.load(saved) if saved.exists() else None
        parts: list[pa.Table] = []
        numbers: list[np.ndarray] = []
        offset = 0
        for path in self.files:
            table, base, size = self.table_of(path, cache)
            ids = cache.ids.get(path) if cache is not None else None
            if ids is None:
                ids = row_buckets(table, self.buckets)
                if cache is not None:
                    cache.ids[path] = ids
            rows = np.flatnonzero(ids == bucket)
            first, offset = offset, offset + table.num_rows
            if rows.size == table.num_rows:
                parts.append(table)
            elif rows.size and size:
                parts.append(gather_mapped(path, table, rows, base, size))
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


def arrow_of(table: TableLike) -> pa.Table:
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
    paths = [Path(p) for p in inputs]
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
                    ids = row_buckets(pa.Table.from_batches([batch]), buckets)
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


@dataclasses.dataclass
class BatchStream:
    """Segments that arrive batch by batch, read once (a large documents run): always
    partitioned to disk, so the run never holds them whole."""

    schema: pa.Schema
    batches: Iterator[pa.RecordBatch]
    rows: int
    name: str = "<documents>"
