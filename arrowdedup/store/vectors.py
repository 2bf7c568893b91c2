"""A store's embeddings as one float32 matrix (:class:`StoredVectors`): memory-mapped from
each layer's Arrow IPC parts, checked block by block as rows are read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from .integrity import BLOCK_SIZE, FileGuard
from .layout import (
    INV_NORM,
)


def _mapped_table(path: Path) -> pa.Table:
    with pa.memory_map(str(path), "r") as source:
        return ipc.open_file(source).read_all()


class RowGuard:
    """Checks the blocks of a memory-mapped embeddings file that rows of its matrix lie in,
    before they are read (the rest of the file is checked when it is opened)."""

    def __init__(self, guard: FileGuard, start: int, row_bytes: int) -> None:
        self.guard = guard
        self.start = start
        self.row_bytes = row_bytes

    def span(self, a: int, b: int) -> None:
        """Rows ``a`` to ``b`` (exclusive)."""
        self.guard.check(self.start + a * self.row_bytes, self.start + b * self.row_bytes)

    def rows(self, rows: np.ndarray) -> None:
        """Scattered rows: each block that holds one is checked once."""
        if rows.size == 0 or self.guard.complete:
            return
        first = (self.start + rows * self.row_bytes) // BLOCK_SIZE
        last = (self.start + (rows + 1) * self.row_bytes - 1) // BLOCK_SIZE
        blocks = np.unique(np.concatenate([first, last]))
        for block in blocks.tolist():
            self.guard.check(block * BLOCK_SIZE, block * BLOCK_SIZE + 1)


def _mapped_checked(path: Path, guard: FileGuard | None
                    ) -> tuple[pa.Table, RowGuard | None]:
    """The memory-mapped table of an embeddings file and the guard of its matrix rows: every
    block but those wholly inside the embedding values is checked here (the footer, the
    schema, the inverse norms), the values' blocks when rows are read."""
    if guard is None:
        return _mapped_table(path), None
    guard.check(max(0, guard.size - 10), guard.size)  # footer length and magic
    with pa.memory_map(str(path), "r") as source:
        table = ipc.open_file(source).read_all()
        source.seek(0)
        base = source.read_buffer(1).address if guard.size else 0
    column = table.column("embedding")
    values = None
    if column.num_chunks == 1 and pa.types.is_fixed_size_list(column.type):
        buffers = column.chunks[0].values.buffers()
        values = buffers[1] if len(buffers) > 1 else None
    if values is None or table.num_rows == 0:
        guard.check_all()
        return table, None
    start = values.address - base
    end = start + values.size
    row_bytes = column.type.list_size * column.type.value_type.bit_width // 8
    if not (0 < start <= end <= guard.size) or row_bytes <= 0:
        guard.check_all()
        return table, None
    inner_first = -(-start // BLOCK_SIZE)  # first block wholly inside the values
    inner_end = end // BLOCK_SIZE  # one past the last block wholly inside
    guard.check(0, inner_first * BLOCK_SIZE)
    guard.check(max(inner_end * BLOCK_SIZE, inner_first * BLOCK_SIZE), guard.size)
    return table, RowGuard(guard, start, row_bytes)


class StoredVectors:
    """The kept embeddings of one version as stored — one memory-mapped matrix per bucket
    file, in store order — with their inverse norms.

    ``scores(q)`` is the cosine of every stored row with each unit query (``E @ q`` times the
    inverse norm: the speed of stored unit vectors without storing them twice); ``unit(rows)``
    gives unit vectors of a few rows (zero rows where a segment has no usable embedding).
    """

    def __init__(self, parts: list[np.ndarray], inv_norm: np.ndarray,
                 live: np.ndarray | None = None,
                 guards: list[RowGuard | None] | None = None) -> None:
        self.parts = parts
        # Per part, the check of the stored bytes of its rows before they are read (None:
        # a store without block checksums, or a matrix in memory).
        self.guards = guards if guards is not None else [None] * len(parts)
        self.offsets = np.concatenate([[0], np.cumsum([p.shape[0] for p in parts])]) \
            .astype(np.int64)
        # ``live``: the stored row behind each row of this version (a version with deltas
        # skips the rows its later layers replaced or deleted); ``None``: every stored row.
        self.live = live
        self.inv_norm = inv_norm if live is None else inv_norm[live]
        self.dim = int(parts[0].shape[1]) if parts else 0
        # Rows without a usable embedding, found once: ``scores`` zeroes them on every query.
        self._null = np.flatnonzero(self.inv_norm == 0)

    def contiguous(self) -> StoredVectors:
        """These vectors with the live rows copied once into one in-memory matrix (itself
        when every stored row is live).

        A version with deltas otherwise multiplies the replaced and deleted rows too, and
        gathers the live scores out of them, on every query: after 10 updates that made its
        dense scan ~1.3x a compacted store's. The copy costs one pass at load and the live
        rows' bytes in memory; the values are the stored ones, so the cosines are the same.
        """
        if self.live is None:
            return self
        self._check_all()
        out = np.empty((self.live.shape[0], self.dim), dtype=np.float32)
        part = np.searchsorted(self.offsets, self.live, side="right") - 1
        bounds = np.searchsorted(part, np.arange(len(self.parts) + 1))
        for p in range(len(self.parts)):
            a, b = int(bounds[p]), int(bounds[p + 1])
            if a < b:
                out[a:b] = self.parts[p][self.live[a:b] - self.offsets[p]]
        return StoredVectors([out], self.inv_norm)

    @property
    def shape(self) -> tuple[int, int]:
        return len(self), self.dim

    def __len__(self) -> int:
        return int(self.offsets[-1]) if self.live is None else int(self.live.shape[0])

    # Array-like access to the *unit* vectors (what format 1 stored in vectors.npy): an index,
    # a slice, a list or an array of rows, a boolean mask; ``np.asarray`` gives all of them.
    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, (int, np.integer)):
            i = int(key) + (len(self) if key < 0 else 0)
            if not 0 <= i < len(self):
                raise IndexError(f"row {key} out of range for {len(self)} vectors")
            return self.unit(np.array([i]))[0]
        if isinstance(key, slice):
            return self.unit(np.arange(len(self))[key])
        rows = np.asarray(key)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return self.unit(rows.astype(np.int64))

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.unit(np.arange(len(self)))
        return out if dtype is None else out.astype(dtype)

    def scores(self, queries: np.ndarray) -> np.ndarray:
        """(n, m) cosines of every stored row with each unit query (rows without a usable
        embedding score 0)."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        self._check_all()
        pieces = [np.asarray(p @ q.T, dtype=np.float32) for p in self.parts]
        out = np.concatenate(pieces) if pieces else np.zeros((0, q.shape[0]), np.float32)
        if self.live is not None:
            out = out[self.live]
        out *= self.inv_norm[:, None]
        out[self._null] = 0.0  # a null slot's values are unspecified (may be NaN)
        return out

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """The stored embeddings of ``rows`` as float32 (as given)."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.live is not None:
            rows = self.live[rows]
        out = np.zeros((rows.shape[0], self.dim), dtype=np.float32)
        part = np.searchsorted(self.offsets, rows, side="right") - 1
        for p in np.unique(part).tolist():
            hit = part == p
            local = rows[hit] - self.offsets[p]
            guard = self.guards[p]
            if guard is not None:
                guard.rows(local)
            out[hit] = self.parts[p][local]
        return out

    def _check_all(self) -> None:
        for part, guard in zip(self.parts, self.guards, strict=True):
            if guard is not None:
                guard.span(0, part.shape[0])

    def unit(self, rows: np.ndarray) -> np.ndarray:
        """Unit float32 vectors of ``rows`` (zero rows where not usable)."""
        rows = np.asarray(rows, dtype=np.int64)
        inv = self.inv_norm[rows]
        out = self.rows(rows) * inv[:, None]
        out[inv == 0] = 0.0
        return out


def part_vectors(path: Path, guard: FileGuard | None = None
                  ) -> tuple[np.ndarray, np.ndarray, RowGuard | None]:
    """(matrix as stored, inverse norms, the guard of its rows) of one embeddings file; the
    matrix is a zero-copy memory map when the column is a fixed-size list without nulls
    inside its values."""
    from ..arrays.vectors import embeddings_from, fixed_size_values, inverse_norms

    table, rows_guard = _mapped_checked(path, guard)
    column = table.column("embedding")
    matrix = fixed_size_values(column)
    if rows_guard is not None and (matrix is None or column.null_count):
        rows_guard.span(0, table.num_rows)  # read whole below (copied or normed)
        rows_guard = None
    inv: np.ndarray | None = None
    if INV_NORM in table.column_names:
        inv = np.asarray(table.column(INV_NORM).to_numpy(), dtype=np.float32)
    if matrix is None:
        frame = pl.from_arrow(table.select(["embedding"]))
        assert isinstance(frame, pl.DataFrame)
        emb = embeddings_from(frame)
        assert emb is not None
        matrix = emb.matrix
        if inv is None:
            inv = inverse_norms(matrix, emb.sq_norm)
            inv[~emb.usable] = 0.0
    if inv is None:  # format 1: no stored inverse norms
        if rows_guard is not None:
            rows_guard.span(0, table.num_rows)
        inv = inverse_norms(matrix)
        if column.null_count:
            inv[~np.asarray(column.is_valid().to_numpy(zero_copy_only=False), bool)] = 0.0
    return matrix, inv, rows_guard
