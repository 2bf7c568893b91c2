"""One atomic-write helper for every file arrowdedup replaces or adds in place.

A file is written under a temporary name in its own directory (never matching the reader's
``*.parquet`` / ``*.arrow`` globs), flushed to disk, renamed over its final name and the
directory entry synced: a reader or a crash sees the old file or the new one, never half of
one. The store's versions, the embedding cache, the retrieval log and ``arrowdedup extract``
all write through it.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

# The most bytes handed to one ``write`` call. One 48 MB write (a bucket's embeddings) cost
# the kernel 4-8x the system time of the same bytes in writes of 8 MB or less (16 such files:
# 1.1-1.8 s against 0.2 s, measured on these machines), and the store's writes are on a
# job's path.
WRITE_CHUNK = 4 << 20


def write_chunked(fh: Any, data: Any) -> int:
    """Write ``data`` (bytes or any buffer) to the binary file ``fh`` in ``WRITE_CHUNK``
    pieces; the byte count."""
    view = memoryview(data).cast("B")
    for start in range(0, view.nbytes, WRITE_CHUNK):
        piece = view[start:start + WRITE_CHUNK]
        while piece.nbytes:
            piece = piece[fh.write(piece):]
    return view.nbytes


# Data files of at least this many bytes are written around the page cache (O_DIRECT) where
# the file system allows it. On these virtual machines, which hand freed memory back to the
# host, copying a file into fresh page cache cost 0.2-2.5 s of system time per 800 MB (16
# files of 48 MB written and fsynced: 0.5-2.8 s of wall time), while the same bytes written
# with O_DIRECT took 0.58-0.61 s of wall time and 0.1 s of CPU, run after run; on the
# job's writer thread that wait overlaps the buckets still being deduplicated.
DIRECT_MIN_BYTES = 8 << 20
# O_DIRECT wants the buffer, the file offset and the length aligned to the device's logical
# block (512 B or 4 KiB): the staging buffer is page-aligned (an anonymous mapping) and
# every write but the last is a whole number of stages; the last is padded to a block and
# the file truncated back to its length.
DIRECT_BLOCK = 4096
DIRECT_STAGE = 4 << 20
# Staging buffers kept for the next DirectFile (a job writes one large file per bucket). A
# fresh 4 MB mapping is 1,024 page faults on its first fill, and on these virtual machines,
# which hand freed memory back to the host, those were 7 % of a 1M-segment job's page
# faults (16 buckets); a kept stage is written over, never faulted in again.
MAX_FREE_STAGES = 4
_free_stages: list[np.ndarray] = []
_stages_lock = threading.Lock()


def _take_stage() -> np.ndarray:
    """A page-aligned staging buffer of ``DIRECT_STAGE`` bytes (its contents are stale)."""
    with _stages_lock:
        if _free_stages:
            return _free_stages.pop()
    # Staged with NumPy, which copies without holding the GIL (a memoryview assignment
    # holds it: 0.12 s of a 1M job's writes, while the bucket workers wanted it). The array
    # keeps the anonymous mapping alive; the mapping goes with the array's last reference.
    return np.frombuffer(mmap.mmap(-1, DIRECT_STAGE), dtype=np.uint8)


def _give_stage(stage: np.ndarray) -> None:
    """Keep ``stage`` for the next file, unless something still holds a view of it (an
    error's traceback may hold a slice: then it goes with its last reference)."""
    # References: the caller's name, this parameter and getrefcount's argument.
    if sys.getrefcount(stage) > 3:
        return
    with _stages_lock:
        if len(_free_stages) < MAX_FREE_STAGES:
            _free_stages.append(stage)


class DirectFile:
    """A new binary file written with O_DIRECT through an aligned staging buffer (``write``,
    ``tell``, ``flush``, ``close``, and a context manager). Where the file system refuses
    O_DIRECT (tmpfs, some network or overlay file systems), on open or on the first write,
    the same bytes are written through the page cache instead."""

    def __init__(self, path: str | Path) -> None:
        self.path = os.fspath(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        direct = getattr(os, "O_DIRECT", 0)
        self.direct = bool(direct)
        try:
            self.fd = os.open(self.path, flags | direct, 0o666)
        except OSError as err:
            if not direct or err.errno != errno.EINVAL:
                raise
            self.direct = False
            self.fd = os.open(self.path, flags, 0o666)
        self._array: np.ndarray | None = _take_stage()
        self._fill = 0  # bytes staged, not yet written
        self._written = 0  # bytes of the file written so far
        self.closed = False

    def write(self, data: Any) -> int:
        assert self._array is not None, "write to a closed DirectFile"
        src = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        size = src.shape[0]
        if not self.direct and not self._fill:
            # Through the page cache (O_DIRECT refused): no alignment to keep, so no copy
            # into the stage.
            _write_all(self.fd, src)
            self._written += size
            return size
        done = 0
        while done < size:
            take = min(size - done, DIRECT_STAGE - self._fill)
            np.copyto(self._array[self._fill:self._fill + take], src[done:done + take])
            self._fill += take
            done += take
            if self._fill == DIRECT_STAGE:
                self._drain(DIRECT_STAGE)
        return size

    def _drain(self, length: int) -> None:
        """Write the staged bytes (``length`` of the stage: ``_fill`` rounded up to a block
        when direct) at the end of the file."""
        assert self._array is not None
        try:
            _write_all(self.fd, self._array[:length if self.direct else self._fill])
        except OSError as err:
            if not (self.direct and err.errno == errno.EINVAL and self._written == 0):
                raise
            # Opened with O_DIRECT, refused on write (a block size above DIRECT_BLOCK, or a
            # file system that accepts the flag only to refuse the I/O): nothing is written
            # yet, so the file starts again through the page cache.
            os.close(self.fd)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_TRUNC)
            self.direct = False
            _write_all(self.fd, self._array[:self._fill])
        self._written += self._fill
        self._fill = 0

    def tell(self) -> int:
        return self._written + self._fill

    def flush(self) -> None:
        """Nothing to do before :meth:`close`: a partial block cannot be written directly."""

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            if self._fill:
                assert self._array is not None
                padded = -(-self._fill // DIRECT_BLOCK) * DIRECT_BLOCK
                self._array[self._fill:padded] = 0
                size = self._written + self._fill
                self._drain(padded)
                if self.direct:
                    os.ftruncate(self.fd, size)
        finally:
            os.close(self.fd)
            stage, self._array = self._array, None
            if stage is not None:
                _give_stage(stage)

    def __enter__(self) -> DirectFile:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _write_all(fd: int, data: np.ndarray) -> None:
    """``os.write`` until every byte of ``data`` is written, at most ``WRITE_CHUNK`` bytes a
    call (as :func:`write_chunked` does for file objects)."""
    view = data.data  # the array's bytes, as a memoryview
    while view.nbytes:
        view = view[os.write(fd, view[:WRITE_CHUNK]):]


def open_data_file(path: str | Path, nbytes: int) -> Any:
    """A new binary file for ``nbytes`` of data: a :class:`DirectFile` from
    ``DIRECT_MIN_BYTES`` up, a plain buffered file below (small files gain nothing)."""
    if nbytes >= DIRECT_MIN_BYTES:
        return DirectFile(path)
    return open(path, "wb")  # the caller closes it


def save_npy(path: str | Path, array: np.ndarray) -> None:
    """``np.save(path, array)`` (byte for byte for a C-ordered array), its data written by
    :func:`write_chunked` (``np.save`` hands a whole array to one ``write``)."""
    array = np.ascontiguousarray(array)
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, np.lib.format.header_data_from_array_1_0(array))
        # Flat: a memoryview cannot cast an N-d array with a zero in its shape to bytes.
        write_chunked(fh, array.reshape(-1))


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temporary_name(path: Path) -> Path:
    """A fresh temporary path beside ``path`` (hidden, ``.tmp`` suffix)."""
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")


@contextlib.contextmanager
def atomic_path(path: str | Path, *, durable: bool = True) -> Iterator[Path]:
    """Yield a temporary path to write; on a clean exit it replaces ``path`` atomically.

    ``durable``: fsync the file before the rename and the directory after it (a power cut
    then keeps the new file). On an error the temporary file is removed and ``path`` is left
    as it was.
    """
    final = Path(path)
    tmp = temporary_name(final)
    try:
        yield tmp
        if durable:
            fsync_file(tmp)
        os.replace(tmp, final)
        if durable:
            fsync_dir(final.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def atomic_write_bytes(path: str | Path, data: bytes, *, durable: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path, durable=durable) as tmp, open(tmp, "wb") as fh:
        write_chunked(fh, data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str, *, durable: bool = True) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), durable=durable)
