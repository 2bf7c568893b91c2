"""A bucket's files as the store writes them: Parquet and Arrow IPC bytes with their checksums
(:func:`encode_bucket`, run by every engine's workers), staged into a version directory by a
worker on the driver's node, or written by the writer (:mod:`.writer`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ..arrays.scratch import ScratchPool
from .atomic import (
    DIRECT_MIN_BYTES,
    WindowedFile,
    image_buffer,
    write_chunked,
    write_image,
)
from .integrity import (
    CHECKSUM,
    block_digests,
    checksum_bytes,
    hasher,
)
from .layout import (
    DECISIONS,
    EMBEDDINGS,
    INV_NORM,
    SEGMENTS,
    part_name,
)


@dataclasses.dataclass
class BucketOutput:
    """One bucket, encoded and ready to write: what a worker (thread or Ray task) returns."""

    bucket: int
    # (path in the version, file bytes or buffer or a table written as IPC, rows)
    files: list[tuple[str, Any, int]]
    kept_rows: int
    embedding_dim: int | None
    documents: pa.Table | None
    counts: dict[str, int]
    segment_id_hashes: np.ndarray  # XXH64 of every input segment_id (global uniqueness)
    index_parts: dict[str, Any] = dataclasses.field(default_factory=dict)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class StagedFile:
    """A file of a bucket that a worker already wrote into the writer's staging directory
    (:attr:`StoreWriter.staging`), and its checksum: in place of the file's bytes in
    :attr:`BucketOutput.files`."""

    checksum: str
    size: int | None = None  # None: a writer that predates block checksums
    blocks: str | None = None

    def entry(self) -> dict[str, Any]:
        out: dict[str, Any] = {CHECKSUM: self.checksum}
        if self.size is not None and self.blocks is not None:
            out.update(bytes=self.size, blocks=self.blocks)
        return out


def write_staged(staging: str | Path, out: BucketOutput,
                 pool: ScratchPool | None = None) -> BucketOutput:
    """``out`` with its files written under ``staging`` by this process, as :class:`StagedFile`
    entries. A Ray task on the driver's machine does this, so its bucket reaches the disk
    without travelling through Ray's object store to the driver (which held every bucket in
    flight in shared memory: 0.7 GB of the driver's 1 GB at 1M rows). The writer still fsyncs
    each file and lists it in the manifest; a run that fails removes the directory as before.
    ``pool`` lends the images of the large files (a Ray worker's, reused across its tasks).
    """
    files = []
    for rel, data, rows in out.files:
        entry = write_into(Path(staging), rel, data, pool)
        files.append((rel, StagedFile(entry[CHECKSUM], entry["bytes"], entry["blocks"]), rows))
    return dataclasses.replace(out, files=files)


# Columns whose values repeat across many rows: only these are dictionary-encoded. For a
# column of unique values (segment_id, text) the writer would build a dictionary and then
# fall back to plain pages, which costs time and bytes (measured on a 62,500-row bucket of
# the 1M benchmark: the decisions file 15 % smaller, the segments file 8 %, both written
# faster).
DICTIONARY_COLUMNS = frozenset({"doc_id", "segment_type", "language", "doc_type", "action",
                                "guard_reason"})


def parquet_bytes(table: pa.Table) -> pa.Buffer:
    """The Parquet file of ``table`` in memory (an Arrow buffer: written and hashed through
    the buffer protocol, without a copy into a bytes object)."""
    sink = pa.BufferOutputStream()
    dictionary = [name for name, field in zip(table.column_names, table.schema, strict=True)
                  if name in DICTIONARY_COLUMNS or pa.types.is_dictionary(field.type)]
    pq.write_table(table, sink, compression="zstd", row_group_size=128 * 1024,
                   use_dictionary=dictionary, write_statistics=True, store_schema=True)
    return sink.getvalue()


def write_into(version: Path, rel: str, data: bytes | pa.Buffer | pa.Table,
               pool: ScratchPool | None = None) -> dict[str, Any]:
    """Write file ``rel`` of the version being built in ``version``; its manifest entry
    (checksum, size, block checksums: :func:`write_data_entry`). Only the
    file's own directory is created, never ``version`` itself: when that is gone the run has
    ended, and a late writer (a Ray task) must fail instead of leaving a directory behind."""
    path = version / rel
    path.parent.mkdir(exist_ok=True)
    return write_data_entry(path, data, pool)


def _ipc_into(sink: Any, table: pa.Table) -> None:
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def write_data_file(path: Path, data: bytes | pa.Buffer | pa.Table,
                    pool: ScratchPool | None = None) -> str:
    """Write one file of a version and return its checksum (see :func:`write_data_entry`)."""
    return str(write_data_entry(path, data, pool)[CHECKSUM])


def file_entry(data: Any) -> dict[str, Any]:
    """The manifest entry of a file's bytes but its row count: checksum, size and the block
    checksums reads check (:mod:`.integrity`)."""
    return {CHECKSUM: checksum_bytes(data), "bytes": memoryview(data).nbytes,
            "blocks": block_digests(data)}


def write_data_entry(path: Path, data: bytes | pa.Buffer | pa.Table,
                     pool: ScratchPool | None = None) -> dict[str, Any]:
    """Write one file of a version and return its manifest entry (:func:`file_entry`). Bytes
    and buffers are written as they are, a table as an Arrow IPC file.

    From ``DIRECT_MIN_BYTES`` up, the file is assembled in a page-aligned image (``pool``
    lends it; a table is serialised straight into it, its size known from a dry run) and
    written around the page cache in one call (:func:`atomic.write_image`); the checksum is
    taken from the image. A table from ``WINDOWED_MIN_BYTES`` up is written through a window
    instead (:func:`_ipc_windowed`): the same bytes and entry.
    """
    if isinstance(data, pa.Table) and data.nbytes < DIRECT_MIN_BYTES:
        sink = pa.BufferOutputStream()
        _ipc_into(sink, data)
        data = sink.getvalue()
    size = _ipc_size(data) if isinstance(data, pa.Table) else memoryview(data).nbytes
    if size < DIRECT_MIN_BYTES:
        with open(path, "wb") as fh:
            write_chunked(fh, data)
        return file_entry(data)
    if isinstance(data, pa.Table) and size >= WINDOWED_MIN_BYTES:
        return _ipc_windowed(path, data, pool)
    image = image_buffer(size, pool)
    if isinstance(data, pa.Table):
        _ipc_into(pa.FixedSizeBufferWriter(pa.py_buffer(image)), data)
    else:
        np.copyto(image[:size], np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8))
    write_image(path, image, size)
    return file_entry(image[:size])


# Tables whose IPC file takes at least this many bytes are written through a window of
# WINDOW_BYTES instead of a whole image: the image of a 150k-row document's embeddings (165 MB
# at 256 dimensions) sat beside the bucket's two other copies of them at the peak of the
# hostile_input benchmark's large-files runs, and the writer's pool kept the largest image
# for the rest of the job. Smaller files keep the one-call write (see atomic.write_image:
# every piece waits for the GIL again), the 1M benchmark's 96 MB buckets among them.
WINDOWED_MIN_BYTES = 100 << 20


# A whole number of integrity blocks (each window's block digests are the file's) and of
# O_DIRECT blocks.
WINDOW_BYTES = 32 << 20


def _ipc_windowed(path: Path, table: pa.Table, pool: ScratchPool | None) -> dict[str, Any]:
    """Write ``table`` as an Arrow IPC file through a :class:`WindowedFile`, its manifest
    entry (:func:`file_entry`) taken window by window."""
    whole = hasher(CHECKSUM)
    blocks: list[str] = []

    def seen(window: np.ndarray) -> None:
        whole.update(window)
        blocks.append(block_digests(window))

    sink = WindowedFile(path, WINDOW_BYTES, seen, pool)
    try:
        _ipc_into(pa.PythonFile(sink, mode="w"), table)
    finally:
        sink.close()
    return {CHECKSUM: str(whole.hexdigest()), "bytes": sink.tell(), "blocks": "".join(blocks)}


def _ipc_size(table: pa.Table) -> int:
    """The bytes of ``table`` as an Arrow IPC file (a dry run: nothing is copied)."""
    mock = pa.MockOutputStream()
    _ipc_into(mock, table)
    return int(mock.size())


def embeddings_table(kept: pl.DataFrame) -> tuple[pa.Table, int | None]:
    """The kept embedding column as given (one chunk) and its float32 inverse norms."""
    from ..arrays.vectors import embeddings_from, fixed_size_values, inverse_norms

    column = kept.get_column("embedding").rechunk().to_arrow()
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    # float32 without nulls: the values embeddings_from would copy, read in place (other
    # types go through it, so every bucket computes its norms from the same float32 values).
    view = fixed_size_values(column) if column.null_count == 0 else None
    if view is not None and view.dtype != np.float32:
        view = None
    dim: int | None
    if view is not None:  # the common case: norms straight off the Arrow buffer, no copy
        inv = inverse_norms(view)
        dim = int(view.shape[1])
    else:
        emb = embeddings_from(kept.select("embedding"))
        if emb is None or emb.dim == 0:
            inv = np.zeros(kept.height, dtype=np.float32)
            dim = None
        else:
            inv = inverse_norms(emb.matrix, emb.sq_norm)
            inv[~emb.usable] = 0.0
            dim = emb.dim
    table = pa.table({"embedding": column, INV_NORM: pa.array(inv, type=pa.float32())})
    return table, dim


def encode_bucket(
    bucket: int,
    kept: pl.DataFrame,
    decisions: pl.DataFrame,
    documents: pl.DataFrame | None,
    embedding_dim: int | None,
    indexes: Sequence[IndexBuilder] = (),
) -> BucketOutput:
    """Serialise one bucket's kept rows and decisions (rows in input order inside the bucket)
    and the builders' parts; pure: equal inputs give equal bytes, in any process."""
    from ..arrays.hashing import xxh64
    from ..arrays.vectors import without_column

    t0 = time.perf_counter()
    name = part_name(bucket)
    has_embedding = "embedding" in kept.columns
    seg = without_column(kept, "embedding") if has_embedding else kept
    files = [(f"{SEGMENTS}/{name}.parquet", parquet_bytes(seg.to_arrow()), kept.height),
             (f"{DECISIONS}/{name}.parquet", parquet_bytes(decisions.to_arrow()),
              decisions.height)]
    dim = None
    if has_embedding:
        table, dim = embeddings_table(kept)
        files.append((f"{EMBEDDINGS}/{name}.arrow", table, kept.height))
    counts = {str(a): int(c) for a, c in
              decisions.get_column("action").value_counts().iter_rows()}
    timings = {"encode": time.perf_counter() - t0}
    t0 = time.perf_counter()
    parts = {builder.name: builder.encode(seg) for builder in indexes}
    timings["index"] = time.perf_counter() - t0
    return BucketOutput(
        bucket=bucket, files=files, kept_rows=kept.height,
        embedding_dim=dim or embedding_dim,
        documents=documents.to_arrow() if documents is not None else None, counts=counts,
        segment_id_hashes=xxh64(decisions.get_column("segment_id").cast(pl.String)),
        index_parts=parts, timings=timings,
    )


class IndexBuilder(Protocol):
    """An index built while a version is written (registered by the job path)."""

    name: str

    def encode(self, kept: pl.DataFrame) -> Any: ...

    def add(self, part: Any, rows: int) -> None: ...

    def finish(self, version_dir: Path) -> Any: ...
