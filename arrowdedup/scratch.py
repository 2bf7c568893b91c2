"""Large arrays reused from bucket to bucket instead of asked of the OS each time.

A job allocates two large arrays per bucket: the bucket's embeddings read from the input and
the kept rows' embeddings gathered for the store (together ~145 MB per 62,500-row bucket at
384 dimensions). Fresh memory costs a page fault per page when first written, and on these
virtual machines, which hand freed memory back to the host, that cost was the largest
variable part of a job: the in-memory gather of 500,000 kept rows took 0.9 s into fresh
memory and 0.1 s into memory the process had already touched (measured at 1M rows).

A :class:`ScratchPool` hands out NumPy arrays carved from buffers it owns and takes a buffer
back on its own once nothing else refers to it (no NumPy view, no Arrow buffer, no Polars
column built on it: the buffer's reference count says so), so no caller has to say when it
is done and no array can be overwritten while something still reads it. Outside a
:func:`scratch_pool` block, :func:`empty` is ``np.empty``.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
from collections.abc import Iterator

import numpy as np

__all__ = ["ScratchPool", "empty", "scratch_pool"]

# A buffer is allocated with this much room above the request, so a later bucket a little
# larger than the first ones still fits in it.
HEADROOM = 1.125
# Requests below this many bytes are left to NumPy (the allocator reuses small blocks).
MIN_BYTES = 1 << 22


class ScratchPool:
    """Buffers lent out as arrays and reclaimed once unreferenced (thread-safe)."""

    def __init__(self, max_free: int = 8, min_bytes: int = MIN_BYTES) -> None:
        self._lent: list[np.ndarray] = []
        self._min_bytes = min_bytes
        self._free: list[np.ndarray] = []
        self._max_free = max_free
        self._lock = threading.Lock()
        self.allocated = 0  # buffers allocated (the rest of the requests were reuses)
        self.reused = 0

    def _reclaim(self) -> None:
        # A lent buffer referenced only by ``_lent`` and by getrefcount's own argument has no
        # user left: every array carved from it holds it as its ``base``.
        still: list[np.ndarray] = []
        for buf in self._lent:
            (self._free if sys.getrefcount(buf) <= 3 else still).append(buf)
        self._lent = still
        if len(self._free) > self._max_free:
            self._free.sort(key=lambda b: b.nbytes)
            del self._free[: len(self._free) - self._max_free]

    def empty(self, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
        """An uninitialised array, from a reclaimed buffer when one is large enough."""
        kind = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * kind.itemsize
        if nbytes < self._min_bytes:
            return np.empty(shape, dtype=kind)
        with self._lock:
            self._reclaim()
            # (Positions, not ``list.remove``: arrays compare element-wise.)
            fits = [i for i, b in enumerate(self._free) if b.nbytes >= nbytes]
            if fits:
                buf = self._free.pop(min(fits, key=lambda i: self._free[i].nbytes))
                self.reused += 1
            else:
                buf = np.empty(int(nbytes * HEADROOM) + 64, dtype=np.uint8)
                self.allocated += 1
            self._lent.append(buf)
        # The first aligned byte (NumPy's allocation is 16-byte aligned; 64 keeps SIMD rows
        # on cache lines), viewed as the request.
        start = (-buf.ctypes.data) % 64
        return buf[start:start + nbytes].view(kind).reshape(shape)


_POOL: contextvars.ContextVar[ScratchPool | None] = contextvars.ContextVar(
    "arrowdedup_scratch_pool", default=None)


@contextlib.contextmanager
def scratch_pool(pool: ScratchPool | None) -> Iterator[None]:
    """Within the block, :func:`empty` lends from ``pool`` (``None``: plain ``np.empty``)."""
    token = _POOL.set(pool)
    try:
        yield
    finally:
        _POOL.reset(token)


def empty(shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """``np.empty(shape, dtype)``, lent from the pool of the enclosing :func:`scratch_pool`."""
    pool = _POOL.get()
    if pool is None:
        return np.empty(shape, dtype=dtype)
    return pool.empty(shape, dtype)
