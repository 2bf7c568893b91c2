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
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..arrays.scratch import ScratchPool

# The most bytes handed to one ``write`` call through the page cache. One 48 MB write (a
# bucket's embeddings) cost the kernel 4-8x the system time of the same bytes in writes of
# 8 MB or less (16 such files: 1.1-1.8 s against 0.2 s, measured on these machines), and the
# store's writes are on a job's path. (O_DIRECT writes, see write_image, go in one call.)
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
# block (512 B or 4 KiB): an image starts on a page and is padded to a whole block, and the
# file is truncated back to its length.
DIRECT_BLOCK = 4096


def padded_size(size: int) -> int:
    """``size`` rounded up to a whole :data:`DIRECT_BLOCK`."""
    return -(-size // DIRECT_BLOCK) * DIRECT_BLOCK


def image_buffer(size: int, pool: ScratchPool | None = None) -> np.ndarray:
    """A page-aligned uint8 array of ``padded_size(size)`` bytes (contents stale) to assemble
    a file of ``size`` bytes in for :func:`write_image`: lent from ``pool`` when given (a
    job's writer reuses one per bucket, where fresh memory costs a page fault per page),
    else an anonymous mapping of its own, unmapped with the array's last reference."""
    padded = padded_size(size)
    if pool is not None:
        return pool.empty((padded,), np.uint8, align=mmap.PAGESIZE)
    return np.frombuffer(mmap.mmap(-1, max(padded, 1)), dtype=np.uint8)[:padded]


def write_image(path: str | Path, image: np.ndarray, size: int) -> None:
    """Write ``image[:size]`` as the new file ``path``.

    ``image`` comes from :func:`image_buffer`. The file is written around the page cache
    (O_DIRECT) in one call, its last block padded with zeros and the file truncated back to
    ``size``; where O_DIRECT is refused (on open, as tmpfs does, or on the first write), the
    same bytes go through the page cache. One call, because a writer thread that hands the
    GIL back for every piece waits for it again each time the job's workers hold it: up to
    a switch interval (5 ms) per piece, which made a 1M job's embeddings writes 2.9 s of
    wall time for 0.23 s of CPU (48 MB files in 4 MB pieces).
    """
    padded = padded_size(size)
    if image.shape[0] < padded or (padded and image.ctypes.data % DIRECT_BLOCK):
        raise ValueError("write_image needs a page-aligned image of the padded size "
                         "(use image_buffer)")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    direct = getattr(os, "O_DIRECT", 0)
    if direct:
        try:
            fd = os.open(path, flags | direct, 0o666)
        except OSError as err:
            if err.errno != errno.EINVAL:
                raise
        else:
            try:
                image[size:padded] = 0
                if _write_direct(fd, image[:padded]):
                    os.ftruncate(fd, size)
                    return
            finally:
                os.close(fd)
    # Through the page cache (O_DIRECT missing or refused before any byte was written).
    fd = os.open(path, flags, 0o666)
    try:
        _write_all(fd, image[:size])
    finally:
        os.close(fd)


class WindowedFile:
    """A new file written in order through one page-aligned window (a sink for
    ``pa.PythonFile``): each full window goes out in one call around the page cache where
    the file system allows it, as :func:`write_image` writes a whole image. A file of any
    size costs one window of memory, not an image of its size. ``seen`` gets the file's
    bytes window by window, in order (for its checksums). Close it to write the rest."""

    def __init__(self, path: str | Path, window: int, seen: Callable[[np.ndarray], None],
                 pool: ScratchPool | None = None) -> None:
        if window <= 0 or window % DIRECT_BLOCK:
            raise ValueError(f"a window is a positive multiple of {DIRECT_BLOCK} bytes")
        self._path = path
        self._window = image_buffer(window, pool)[:window]
        self._seen = seen
        self._fill = 0
        self._written = 0  # bytes of the file already written
        self.closed = False
        self._direct = bool(getattr(os, "O_DIRECT", 0))
        self._fd = self._open()

    def _open(self) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        if self._direct:
            try:
                return os.open(self._path, flags | os.O_DIRECT, 0o666)
            except OSError as err:
                if err.errno != errno.EINVAL:
                    raise
                self._direct = False
        return os.open(self._path, flags, 0o666)

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._written + self._fill

    def flush(self) -> None:
        pass  # whole windows only: the rest goes out on close

    def write(self, data: Any) -> int:
        view = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        done = 0
        while done < view.shape[0]:
            take = min(view.shape[0] - done, self._window.shape[0] - self._fill)
            self._window[self._fill:self._fill + take] = view[done:done + take]
            self._fill += take
            done += take
            if self._fill == self._window.shape[0]:
                self._write_window()
        return done

    def _write_window(self) -> None:
        size = self._fill
        self._seen(self._window[:size])
        if self._direct:
            padded = padded_size(size)  # only the last window is short: padded, truncated
            self._window[size:padded] = 0
            if _write_direct(self._fd, self._window[:padded]):
                self._written += size
                self._fill = 0
                return
            if self._written:
                raise OSError(errno.EINVAL, f"O_DIRECT write refused mid-file: {self._path}")
            # Refused on the first write (nothing written): through the page cache.
            os.close(self._fd)
            self._direct = False
            self._fd = self._open()
        _write_all(self._fd, self._window[:size])
        self._written += size
        self._fill = 0

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._fill:
                self._write_window()
            if self._direct:
                os.ftruncate(self._fd, self._written)
        finally:
            os.close(self._fd)
            self.closed = True


def _write_direct(fd: int, data: np.ndarray) -> bool:
    """Write all of ``data`` to the O_DIRECT file ``fd``; False when the first write is
    refused as invalid (a block size above DIRECT_BLOCK, or a file system that accepts the
    flag on open only to refuse the I/O): nothing is written then."""
    view = data.data
    first = True
    while view.nbytes:
        try:
            done = os.write(fd, view)
        except OSError as err:
            if first and err.errno == errno.EINVAL:
                return False
            raise
        first = False
        view = view[done:]
    return True


def _write_all(fd: int, data: np.ndarray) -> None:
    """``os.write`` until every byte of ``data`` is written, at most ``WRITE_CHUNK`` bytes a
    call (as :func:`write_chunked` does for file objects)."""
    view = data.data  # the array's bytes, as a memoryview
    while view.nbytes:
        view = view[os.write(fd, view[:WRITE_CHUNK]):]


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
