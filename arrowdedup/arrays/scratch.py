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
from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["ScratchPool", "empty", "scratch_pool", "small_pages"]

# A buffer is allocated with this much room above the request, so a later bucket a little
# larger than the first ones still fits in it.
HEADROOM = 1.125
# Requests below this many bytes are left to NumPy (the allocator reuses small blocks).
MIN_BYTES = 1 << 22
# Where lent arrays start by default (NumPy's allocation is 16-byte aligned; 64 keeps SIMD
# rows on cache lines).
ALIGN = 64


def _aligned(buf: np.ndarray, nbytes: int, align: int) -> np.ndarray:
    """The ``nbytes`` of ``buf`` (uint8) from its first byte at a multiple of ``align``."""
    start = (-buf.ctypes.data) % align
    return buf[start:start + nbytes]


def _buffer(nbytes: int, align: int) -> np.ndarray:
    """A fresh buffer for a request of ``nbytes`` starting at a multiple of ``align``, with
    :data:`HEADROOM` for later, slightly larger requests."""
    return np.empty(int(nbytes * HEADROOM) + align, dtype=np.uint8)


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
        self.prefaulted = 0  # buffers allocated and written ahead by prefault

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

    def empty(self, shape: tuple[int, ...], dtype: np.dtype | type,
              align: int = ALIGN) -> np.ndarray:
        """An uninitialised array starting at a multiple of ``align`` bytes (a power of two),
        from a reclaimed buffer when one is large enough."""
        kind = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * kind.itemsize
        if nbytes < self._min_bytes:
            if align <= ALIGN:
                return np.empty(shape, dtype=kind)
            return _aligned(np.empty(nbytes + align, dtype=np.uint8), nbytes, align) \
                .view(kind).reshape(shape)
        with self._lock:
            self._reclaim()
            # (Positions, not ``list.remove``: arrays compare element-wise.)
            fits = [i for i, b in enumerate(self._free)
                    if b.nbytes - (-b.ctypes.data) % align >= nbytes]
            if fits:
                buf = self._free.pop(min(fits, key=lambda i: self._free[i].nbytes))
                self.reused += 1
            else:
                # The free buffers are all too small for this request: they go before the
                # new one comes, not beside it. Kept, they held the memory of a smaller
                # bucket on top of every larger one (the two arrays of a 110k-row document
                # under the next 150k-row one: 0.2 GB of a 1.6 GB peak).
                self._free.clear()
                buf = _buffer(nbytes, align)
                self.allocated += 1
            self._lent.append(buf)
        return _aligned(buf, nbytes, align).view(kind).reshape(shape)

    def trim(self, largest: int) -> None:
        """Drop the free buffers larger than a request of ``largest`` bytes takes (the job
        knows what its remaining buckets can ask for). Kept, the two buffers of a large
        bucket stayed under every smaller bucket after it: 0.34 GB under the buckets after
        the 150k-row CSV document of benchmarks/hostile_input's corpus + four large files."""
        with self._lock:
            self._reclaim()
            self._free = [b for b in self._free if b.nbytes <= int(largest * HEADROOM) + ALIGN]

    def prefault(self, sizes: Sequence[int]) -> None:
        """Allocate a buffer for a request of each of ``sizes`` bytes, write every page of it
        (NumPy's fill holds no GIL) and only then add it to the free buffers: run on a thread
        of its own while the job's workers load their code, so their first buffers come
        already faulted in (a first touch is the costly part of fresh memory here, see the
        module docstring). A request arriving before a buffer is ready allocates its own, as
        without this; no buffer is ever lent while it is being written. Writing ahead is only
        a head start: short of memory for it, it stops, and the job allocates as it goes."""
        for nbytes in sizes:
            if nbytes < self._min_bytes:
                continue
            try:
                buf = _buffer(nbytes, ALIGN)
                buf.fill(0)
            except MemoryError:
                return
            with self._lock:
                self._free.append(buf)
                self.prefaulted += 1


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


# NumPy asks the kernel for transparent huge pages on every large allocation (madvise), so
# each first write to such an array zeroes 2 MB at once. On these virtual machines, which
# hand freed memory back to the host, a fresh huge page costs about 4.5x its 4 KiB pages:
# touching 1 GB took 2.7 s as huge pages and 0.6 s as small ones, and a job's buffers are
# written once and read once, so it gains nothing from the larger TLB reach. Measured at
# 1M segments: 3.48 s against 4.08 s (medians of 4 fresh runs, alternating; system time
# 2.5 against 3.1 s). Counted, because jobs may overlap in one process and the flag is
# NumPy's, for the whole process.
_SMALL_PAGES_LOCK = threading.Lock()
_SMALL_PAGES_DEPTH = 0
_SMALL_PAGES_SAVED = True


def _set_madvise_hugepage(enabled: bool) -> bool:
    """Set NumPy's huge-page advice; the previous setting (True where NumPy has no switch)."""
    from numpy._core import multiarray

    switch = getattr(multiarray, "_set_madvise_hugepage", None)
    if switch is None:  # not every NumPy has the switch: nothing to change
        return True
    return bool(switch(enabled))


@contextlib.contextmanager
def small_pages() -> Iterator[None]:
    """Within the block (a job's run), NumPy's large arrays are not advised as huge pages;
    the setting the process had is restored when the last such block ends."""
    global _SMALL_PAGES_DEPTH, _SMALL_PAGES_SAVED
    with _SMALL_PAGES_LOCK:
        if _SMALL_PAGES_DEPTH == 0:
            _SMALL_PAGES_SAVED = _set_madvise_hugepage(False)
        _SMALL_PAGES_DEPTH += 1
    try:
        yield
    finally:
        with _SMALL_PAGES_LOCK:
            _SMALL_PAGES_DEPTH -= 1
            if _SMALL_PAGES_DEPTH == 0:
                _set_madvise_hugepage(_SMALL_PAGES_SAVED)
