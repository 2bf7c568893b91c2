"""One atomic-write helper for every file arrowdedup replaces or adds in place.

A file is written under a temporary name in its own directory (never matching the reader's
``*.parquet`` / ``*.arrow`` globs), flushed to disk, renamed over its final name and the
directory entry synced: a reader or a crash sees the old file or the new one, never half of
one. The store's versions, the embedding cache, the retrieval log and ``arrowdedup extract``
all write through it.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path


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
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str, *, durable: bool = True) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), durable=durable)
