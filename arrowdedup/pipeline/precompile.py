"""The ``compile`` stage: the jitted kernels a run will use, loaded from Numba's cache or
compiled, before the work that uses them, and timed apart from it.

Without it the first run of a process compiles inside whichever stage first calls a kernel:
the fact scanner's compilation showed as ``extract``, the BM25 tokenizer's as ``index``. Here
each phase of a job asks, before it starts, for what it will run (:func:`for_extract`,
:func:`for_partition`, :func:`for_buckets`); each warm-up runs the package's own code on a
small input that takes the same jitted paths as the run (so the same Numba signatures: the
real input's own rows and column types, under the run's size hint), and its seconds go to
``timings["compile"]``. A warm cache makes this the cache load alone.

A run compiles only what it uses: the choices between a jitted kernel and its twin depend on
sizes (rows of a bucket, rows of the input, text bytes), and each warm-up is sized so that it
makes the same choices, or takes the kernels outright when the run will (the fact scanner
and the guard, whose twins give the kernels' bits: :func:`arrowdedup.jit.interpreted.module`).
Two sizes are estimated, not known, before the work: the text bytes that extraction will hand
the fact scanner (the documents' file bytes), and whether a bucket holds a group of
``BlockMinSegments`` (or ``LshMinSegments``) rows (its largest document's rows). A kernel the
estimate misses is compiled where it is first called, inside that stage.
With the Ray engine the driver compiles into Numba's cache and each worker process loads
from it on its first bucket, inside that bucket's stages.
"""

from __future__ import annotations

import contextlib
import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from .. import progress
from ..timings import add

if TYPE_CHECKING:
    from ..config import DedupConfig
    from .bucket import BucketJob
    from .inputs import BatchStream, BucketSource, SourceCache

NOTE = "compiling kernels, first run only"
STAGE = "compile"


def _loaded() -> frozenset[str]:
    from ..jit.interpreted import taken_modules

    return frozenset(name for name in sys.modules if name.startswith("arrowdedup.")) | {
        f"taken:{name}" for name in taken_modules()}


def _timed(timings: dict[str, float], quiet: bool, work: Callable[[], Any]) -> None:
    """``work`` under the progress note, its seconds added to ``compile``. It runs again
    while it loads or takes more of the package: a twin is taken over its jitted module
    only while that module is not taken yet (:func:`arrowdedup.jit.interpreted.module`), so a
    module that a later step of the warm-up takes changes what an earlier step runs in the
    job."""
    start = time.perf_counter()
    with progress.spinner(NOTE, quiet=quiet):
        for _ in range(3):
            before = _loaded()
            work()
            if _loaded() <= before:
                break
    add(timings, STAGE, time.perf_counter() - start)


def _quiet_numpy() -> Any:
    return np.errstate(all="ignore")


# ----------------------------------------------------------------------------- extraction


def _text_size(paths: Sequence[Path], bound: int) -> int:
    """What extraction will hand the fact scanner, in the unit of its choice
    (:func:`arrowdedup.facts.guard.scan_size`), estimated from the files: a text file's bytes,
    those outside ASCII three times over, any other file's bytes. Files are read only until
    the total passes ``bound``."""
    from ..extract.discover import EXTENSIONS
    from ..facts.guard import scan_size

    total = 0
    for path in paths:
        files: Iterator[Path] = path.rglob("*") if path.is_dir() else iter([path])
        for f in files:
            if total > bound:
                return total
            try:
                if not f.is_file():
                    continue
                size = f.stat().st_size
                if EXTENSIONS.get(f.suffix.lower()) in _TEXT_FORMATS and total + size <= bound:
                    size = scan_size(np.fromfile(f, dtype=np.uint8))
            except OSError:
                continue
            total += size
    return total


# Formats whose file bytes are (nearly) the text extraction takes from them.
_TEXT_FORMATS = frozenset({"markdown", "text", "html", "csv", "tsv"})


def _warm_scanner() -> None:
    """The jitted fact scanner and guard (never their twins), with the columns extraction
    gives them: segment types (a heading with a name, table rows, code), languages, inline
    code terms and sections (their texts' forms)."""
    from ..arrays.hashing import JIT_MIN_ROWS
    from ..facts.guard import fact_signatures
    from ..jit import interpreted

    # Distinct words past JIT_MIN_ROWS: the content words of a large text are hashed jitted.
    words = " ".join("".join("abcdefghijklmnopqrstuvwxyz"[i // 26**k % 26] for k in range(4))
                     for i in range(2 * JIT_MIN_ROWS))
    texts = ['Version 2.4 of "the API" allows 10 MB/s, not 20; see `retry_policy` at 09:30. '
             + words, "Install on Linux", "Plan: Pro\nPrice: 20 EUR", "x = 1"]
    with interpreted.forced(interpreted.KERNEL):
        fact_signatures(pl.Series("text", texts, dtype=pl.String),
                        segment_type=pl.Series(["paragraph", "heading", "table_row", "code"],
                                               dtype=pl.String),
                        language=pl.Series(["en"] * 4, dtype=pl.String),
                        code_terms=pl.Series([["retry_policy"], [], [], []],
                                             dtype=pl.List(pl.String)),
                        sections=(pl.Series(["doc"] * 4, dtype=pl.String),
                                  pl.Series(["Guide > Setup", "Guide", None, "Guide > Plans"],
                                            dtype=pl.String)))


def _warm_text_hashes() -> None:
    """The jitted hashing of ``JIT_MIN_ROWS`` segments' texts: extraction's content hashes
    (:func:`arrowdedup.extract.core.with_content_hash`) and the embedding cache's keys."""
    from ..arrays.hashing import JIT_MIN_ROWS
    from ..embed.cache import text_hashes
    from ..extract.core import with_content_hash

    frame = pl.DataFrame({"text": [f"segment {i}" for i in range(JIT_MIN_ROWS)],
                          "segment_type": ["paragraph"] * JIT_MIN_ROWS})
    with_content_hash(frame)
    text_hashes(frame.get_column("text").to_arrow())


def for_extract(paths: Sequence[Path], timings: dict[str, float], *, quiet: bool) -> None:
    """Before extracting ``paths``: the jitted fact scanner when their text exceeds what its
    interpreted twin takes (:data:`arrowdedup.facts.guard.TWIN_MAX_BYTES`; estimated from the
    files, :func:`_text_size`: only extraction knows the text), and with it the hashing of
    ``JIT_MIN_ROWS`` segments' texts (which that much text makes at 64 bytes a segment)."""
    from ..facts.tables import TWIN_MAX_BYTES
    from ..jit import interpreted

    if interpreted.taken("arrowdedup.facts.scan_jit") or \
            _text_size(paths, TWIN_MAX_BYTES) <= TWIN_MAX_BYTES:
        return

    def work() -> None:
        _warm_scanner()
        _warm_text_hashes()

    _timed(timings, quiet, work)


# ----------------------------------------------------------------------------- partitioning


def _hash_type(arrow_type: pa.DataType) -> None:
    from ..arrays.hashing import JIT_MIN_ROWS, xxh64

    xxh64(pa.array([f"doc-{i}" for i in range(JIT_MIN_ROWS)], type=arrow_type))


def _doc_id_types(inputs: Sequence[Path] | Sequence[pa.Table] | BatchStream
                  ) -> tuple[int, list[pa.DataType]]:
    """(rows, doc_id types) of the inputs, from their metadata."""
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    from .inputs import BatchStream

    if isinstance(inputs, BatchStream):
        index = inputs.schema.get_field_index("doc_id")
        return inputs.rows, [inputs.schema.field(index).type] if index >= 0 else []
    rows, kinds = 0, list[pa.DataType]()
    for item in inputs:
        if isinstance(item, pa.Table):
            rows += item.num_rows
            schema = item.schema
        else:
            try:
                meta = pq.ParquetFile(item)
                rows += meta.metadata.num_rows
                schema = meta.schema_arrow
            except (pa.ArrowInvalid, OSError):
                try:
                    with pa.memory_map(str(item)) as source:
                        reader = ipc.open_file(source)
                        rows += sum(reader.get_batch(i).num_rows
                                    for i in range(reader.num_record_batches))
                        schema = reader.schema
                except (pa.ArrowInvalid, OSError):
                    return rows, kinds  # a stream or unreadable file: the partition reports it
        index = schema.get_field_index("doc_id")
        if index >= 0:
            kinds.append(schema.field(index).type)
    return rows, kinds


def for_partition(inputs: Sequence[Path] | Sequence[pa.Table] | BatchStream,
                  timings: dict[str, float], *,
                  quiet: bool) -> None:
    """Before the bucket of every row is computed: the jitted XXH64 for a ``doc_id`` column
    of ``JIT_MIN_ROWS`` rows or more, for each of the inputs' string types."""
    from ..arrays.hashing import JIT_MIN_ROWS

    rows, kinds = _doc_id_types(inputs)
    kinds = [t for t in dict.fromkeys(kinds) if pa.types.is_string(t)
             or pa.types.is_large_string(t) or pa.types.is_string_view(t)]
    if rows < JIT_MIN_ROWS or not kinds:
        return
    def work() -> None:
        for kind in kinds:
            _hash_type(kind)

    _timed(timings, quiet, work)


# ----------------------------------------------------------------------------- buckets


def _rows_needed(dim: int) -> int:
    """Rows of a warm-up bucket that reach every row threshold of the kernels' choices."""
    from ..arrays.hashing import JIT_MIN_ROWS
    from ..arrays.vectors import JIT_MIN_VALUES
    from ..retrieval.tokens import JIT_MIN_TEXTS

    rows = max(JIT_MIN_ROWS, JIT_MIN_TEXTS)
    return max(rows, math.ceil(JIT_MIN_VALUES / dim)) if dim else rows


def _tables_of(source: BucketSource, cache: SourceCache) -> list[pa.Table]:
    if source.partitioned:
        return [source.open(f) for f in source.files if f]
    return [source.table_of(f, cache)[0] for f in source.files]


def _bucket_rows(source: BucketSource, cache: SourceCache) -> np.ndarray:
    """Rows per bucket (the bucket ids of unpartitioned inputs are computed into ``cache``
    unless there already, where the run reads them)."""
    from .inputs import row_buckets

    counts = np.zeros(source.buckets, dtype=np.int64)
    if source.partitioned:
        for b, f in enumerate(source.files):
            if f:
                counts[b] = source.open(f).num_rows
        return counts
    for f in source.files:
        ids = cache.ids.get(f)
        if ids is None:
            ids = cache.ids[f] = row_buckets(source.table_of(f, cache)[0], source.buckets)
        counts += np.bincount(ids, minlength=source.buckets)
    return counts


def _head(tables: list[pa.Table], rows: int) -> pa.Table:
    parts, left = [], rows
    for t in tables:
        if left <= 0:
            break
        part = t.slice(0, left)
        parts.append(part)
        left -= part.num_rows
    head = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    return head.combine_chunks()


def _largest_document(tables: list[pa.Table]) -> int:
    counts: dict[Any, int] = {}
    for t in tables:
        if "doc_id" not in t.column_names or t.num_rows == 0:
            continue
        vc = pc.value_counts(t.column("doc_id"))
        for value, count in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist(),
                                strict=True):
            counts[value] = counts.get(value, 0) + count
    return max(counts.values(), default=0)


def _one_group(head: pa.Table) -> pa.Table:
    """``head`` as one document of one segment type (one group of all its rows)."""
    first = pa.array(np.zeros(head.num_rows, dtype=np.int64))
    for name in ("doc_id", "segment_type", "language"):
        if name in head.column_names:
            i = head.column_names.index(name)
            head = head.set_column(i, head.field(i), head.column(i).take(first))
    return head


def _warm_bucket(table: pa.Table, total_rows: int, job: BucketJob) -> None:
    """One bucket through the worker's path (ingest, encoding, the index builders' parts and
    finish), its output dropped. An input the run will refuse is left to the run to refuse,
    with its own rows named."""
    import dataclasses

    from ..errors import ArrowDedupError
    from .bucket import process_bucket
    from .inputs import BucketSource

    cfg = job.config
    silent = dataclasses.replace(cfg, analytics=dataclasses.replace(
        cfg.analytics, enable_logging=False))
    job = dataclasses.replace(job, config=silent)
    source = BucketSource(("mem:0",), 1, False, total_rows, (table,))
    try:
        done = process_bucket(source, 0, job)
    except ArrowDedupError:
        return
    tokens = sys.modules.get("arrowdedup.retrieval.tokens_jit")
    if tokens is not None:
        tokens.load_growth()
    if done is None:
        return
    from ..retrieval.bm25 import Bm25Builder

    # Only the package's own index is finished here: another builder's finish may do more
    # than compute (a hook's does).
    builders = [Bm25Builder() for b in job.indexes if isinstance(b, Bm25Builder)]
    postings = 0
    for builder in builders:
        part = done[0].index_parts.get(builder.name)
        builder.add(part, done[0].kept_rows)
        postings += part.doc_rows.shape[0] if part is not None else 0
    if builders:
        from ..dedup.ingest import numba_threads
        from ..jit import interpreted
        from ..retrieval.bm25 import JIT_MIN_POSTINGS

        # The finish takes its kernels by the postings of the whole index: estimated from
        # this bucket's, per row.
        whole = postings * total_rows // max(1, table.num_rows)
        kernels = whole >= JIT_MIN_POSTINGS and "numba" in sys.modules
        with tempfile.TemporaryDirectory(prefix="arrowdedup-compile-") as tmp, \
                numba_threads(job.threads), \
                interpreted.forced(interpreted.KERNEL) if kernels else contextlib.nullcontext():
            for builder in builders:
                builder.finish(Path(tmp))


def _uses_jit(rows: int, total_rows: int, dim: int, text_bytes: int, job: BucketJob) -> bool:
    """Whether a bucket of ``rows`` rows (of an input of ``total_rows``) runs any jitted
    kernel; False keeps a small run from loading Numba at all."""
    from ..arrays.hashing import JIT_MIN_ROWS
    from ..arrays.vectors import JIT_MIN_VALUES
    from ..dedup.ingest import SMALL_INPUT_ROWS
    from ..facts.tables import TWIN_MAX_BYTES
    from ..retrieval.tokens import JIT_MIN_TEXTS

    return (max(rows, total_rows) >= SMALL_INPUT_ROWS or rows >= JIT_MIN_ROWS
            or rows * dim >= JIT_MIN_VALUES or (bool(job.indexes) and rows >= JIT_MIN_TEXTS)
            or text_bytes > TWIN_MAX_BYTES or "numba" in sys.modules)


def _dim(table: pa.Table) -> int:
    if "embedding" not in table.column_names:
        return 0
    column = table.column("embedding")
    kind = column.type
    if pa.types.is_fixed_size_list(kind):
        return int(kind.list_size)
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        return 0
    lengths = pc.list_value_length(column).drop_null()
    return int(lengths[0].as_py()) if len(lengths) else 0


def _text_bytes(table: pa.Table) -> int:
    if "text" not in table.column_names:
        return 0
    try:
        return int(pc.sum(pc.binary_length(table.column("text"))).as_py() or 0)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # not text: the run refuses it
        return 0


def for_buckets(source: BucketSource, cache: SourceCache, job: BucketJob,
                timings: dict[str, float], *, quiet: bool) -> None:
    """Before the pass over the buckets: what the largest bucket will run, by running a
    bucket of its size (at most :func:`_rows_needed` rows) made of the input's first rows
    through the same path, plus the blocked (or LSH) kernel when a document reaches
    ``BlockMinSegments`` (``LshMinSegments`` in LSH mode)."""
    tables = [t for t in _tables_of(source, cache) if t.num_rows]
    if not tables:
        return
    largest = int(_bucket_rows(source, cache).max())
    dim = _dim(tables[0])
    rows = min(largest, _rows_needed(dim))
    head = _head(tables, rows)
    if not _uses_jit(rows, source.total_rows, dim, _text_bytes(head), job):
        return
    # Unpartitioned files only: a partition file is read in one run per batch
    # (job.read_partition), one batch per 64K input rows, so the jitted reader
    # (job.JIT_MIN_RUNS) is reached only past about 4M rows; and the warm-up's cached
    # mapping of a partition file would stay resident for the whole run.
    paths = [] if source.partitioned else [f for f in source.files if not f.startswith("mem:")]

    def work() -> None:
        from .bucket import BucketJob

        with _quiet_numpy():
            _warm_bucket(head, source.total_rows, job)
            if paths:
                _warm_mapped_read(source, paths[0], cache)
            groups = _group_warm_up(tables, largest, job.config)
            if groups is not None:
                bare = BucketJob(job.config, job.threads, (), job.scorer)
                _warm_bucket(groups, source.total_rows, bare)

    _timed(timings, quiet, work)


def _group_warm_up(tables: list[pa.Table], largest: int, cfg: DedupConfig) -> pa.Table | None:
    from ..config import Mode

    ing = cfg.ingestion
    if not ing.enabled:
        return None
    need = ing.block_min_segments
    if ing.mode is Mode.LSH:
        need = min(need, ing.lsh_min_segments)
    if largest < need:
        return None
    biggest = _largest_document(tables)
    if biggest < need:
        return None
    rows = ing.lsh_min_segments if ing.mode is Mode.LSH and biggest >= ing.lsh_min_segments \
        else need
    return _one_group(_head(tables, rows))


def _warm_mapped_read(source: BucketSource, path: str, cache: SourceCache) -> None:
    """The ``pread`` of a memory-mapped input's embeddings (a bucket's rows of an IPC file)."""
    from .inputs import gather_mapped

    table, base, size = source.table_of(path, cache)
    if size and table.num_rows > 1:
        gather_mapped(path, table, np.array([0], dtype=np.int64), base, size)


def for_update(frame: pl.DataFrame, total_rows: int, cfg: DedupConfig, threads: int | None,
               timings: dict[str, float], *, quiet: bool) -> None:
    """Before an update ingests ``frame`` (its new and changed documents) as one bucket."""
    from .bucket import BucketJob, default_indexes

    if frame.height == 0:
        return
    job = BucketJob(cfg, threads, tuple(default_indexes()))
    table = frame.to_arrow()
    dim = _dim(table)
    rows = min(frame.height, _rows_needed(dim))
    head = _head([table], rows)
    if not _uses_jit(rows, total_rows, dim, _text_bytes(head), job):
        return

    def work() -> None:
        with _quiet_numpy():
            _warm_bucket(head, total_rows, job)
            groups = _group_warm_up([table], frame.height, cfg)
            if groups is not None:
                _warm_bucket(groups, total_rows, BucketJob(cfg, threads, ()))

    _timed(timings, quiet, work)
