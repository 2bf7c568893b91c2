"""Reads that notice damage: block checksums of every store file, checked for the bytes a read
touches, and a checksum of the manifest itself.

Each file a version lists gets, beside its whole-file checksum (what ``verify`` compares), the
XXH3-64 of every :data:`BLOCK_SIZE` block of its bytes (``blocks``, hex digests concatenated)
and its size (``bytes``). A read checks only the blocks of the byte ranges it is about to hand
to a reading library, once per process and file: a Parquet read its footer and the column
chunks of the columns it projects (:func:`check_parquet`), a dense scan the blocks of the
memory-mapped embedding rows it multiplies, a BM25 query the postings of its tokens. That
holds for memory-mapped and for ranged reads (an object store reads the same ranges), never
hashes a whole file up front, and works under any reader: Polars, pyarrow and DuckDB all read
the bytes as they are (none of the three verifies Parquet's own page checksums, measured).

A block that fails its checksum raises one :class:`StoreError` line that names the file and
points at ``verify`` and ``rollback``: damaged bytes are never returned as data. Stores written
before block checksums have none; they are read as before (``verify`` still checks their
files whole).

The manifest carries ``manifest_checksum``, the XXH3-128 of its own bytes (the digest's place
zeroed): a changed count, config value, file name or even whitespace fails the read of the
manifest the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import xxhash

from ..errors import StoreError

BLOCK_SIZE = 1 << 18  # 256 KiB: the unit a ranged read checks
BLOCK_ALGO = "xxh3_64"
DIGEST_CHARS = 16  # hex characters of one XXH3-64 digest
MANIFEST_CHECKSUM = "manifest_checksum"
# The top-level manifest key that says how the per-file ``blocks`` were computed.
BLOCK_KEY = "block_checksum"
BLOCK_INFO = {"algo": BLOCK_ALGO, "size": BLOCK_SIZE}

# Off only for the benchmark that measures what the checks cost (never a default).
CHECKS_ENV = "ARROWDEDUP_BENCH_NO_READ_CHECKS"


def checks_enabled() -> bool:
    return os.environ.get(CHECKS_ENV) != "1"


def block_digests(data: Any) -> str:
    """The hex XXH3-64 of every ``BLOCK_SIZE`` block of ``data`` (any buffer), concatenated."""
    view = memoryview(data).cast("B")
    return "".join(xxhash.xxh3_64_hexdigest(view[i:i + BLOCK_SIZE])
                   for i in range(0, view.nbytes, BLOCK_SIZE))


def file_digests(path: Path, algo: str) -> tuple[str, str, int]:
    """(whole-file digest with ``algo``, block digests, size) of a file, read once."""
    whole = hasher(algo)
    blocks = []
    size = 0
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(BLOCK_SIZE), b""):
            whole.update(block)
            blocks.append(xxhash.xxh3_64_hexdigest(block))
            size += len(block)
    return str(whole.hexdigest()), "".join(blocks), size


# ----------------------------------------------------------------------------- manifest


_PLACEHOLDER = "0" * 32  # as long as an XXH3-128 hex digest


def _field(value: str) -> bytes:
    return f'"{MANIFEST_CHECKSUM}": "{value}"'.encode("ascii")


def manifest_text(manifest: Mapping[str, Any]) -> str:
    """The manifest file's text: ``manifest`` as indented JSON with its ``manifest_checksum``,
    the XXH3-128 of these very bytes with the digest's place filled with zeros (so any
    changed byte, whitespace included, fails the check)."""
    body = {k: v for k, v in manifest.items() if k != MANIFEST_CHECKSUM}
    text = json.dumps({**body, MANIFEST_CHECKSUM: _PLACEHOLDER}, indent=2, sort_keys=True)
    digest = xxhash.xxh3_128_hexdigest(text.encode("utf-8"))
    return text.replace(_field(_PLACEHOLDER).decode("ascii"), _field(digest).decode("ascii"), 1)


def manifest_problem(raw: bytes, manifest: Mapping[str, Any]) -> str | None:
    """Why the manifest file ``raw`` (parsed: ``manifest``) fails its own checksum, or None
    (sound, or written before the checksum existed)."""
    if MANIFEST_CHECKSUM not in manifest:
        if BLOCK_KEY in manifest:  # every writer of block checksums also writes the checksum
            return "it has block checksums but no manifest_checksum"
        return None
    recorded = manifest[MANIFEST_CHECKSUM]
    field = _field(str(recorded)) if isinstance(recorded, str) and recorded.isascii() else b""
    if not field or raw.count(field) != 1:
        return f"its manifest_checksum {str(recorded)[:12]}… is not where it was written"
    actual = xxhash.xxh3_128_hexdigest(raw.replace(field, _field(_PLACEHOLDER), 1))
    if recorded != actual:
        return (f"its manifest_checksum {str(recorded)[:12]}… differs from its bytes' "
                f"{actual[:12]}…: the manifest changed after it was written")
    return None


# ----------------------------------------------------------------------------- files


def damaged_file(root: Path | str, rel: str, what: str) -> StoreError:
    return StoreError(
        f"store file {rel} of {root} is damaged ({what}); its data is not returned: "
        f"`arrowdedup verify {root}` lists the damage, `arrowdedup rollback {root} VERSION` "
        "makes a sound version current (or ingest again)")


# Blocks already checked in this process, per file (device, inode, size, mtime, ctime) and
# recorded digests: a version's files never change, so each block is hashed once.
_CHECKED: dict[tuple[Any, ...], np.ndarray] = {}
_LOCK = threading.Lock()


def forget_checked() -> None:
    """Forget which blocks this process has checked (the next reads check them again)."""
    with _LOCK:
        _CHECKED.clear()


class FileGuard:
    """The block checksums of one store file and the blocks of it this process has checked."""

    def __init__(self, root: Path, path: Path, rel: str, entry: Mapping[str, Any]) -> None:
        self.root = root
        self.path = path
        self.rel = rel
        digests = entry.get("blocks")
        size = entry.get("bytes")
        if not isinstance(digests, str) or not isinstance(size, int):
            raise damaged_file(root, rel, "its manifest entry has no usable block checksums")
        self.size = size
        self.digests = digests
        blocks = -(-size // BLOCK_SIZE)
        if len(digests) != blocks * DIGEST_CHARS:
            raise damaged_file(root, rel, "its manifest entry lists "
                               f"{len(digests) // DIGEST_CHARS} block checksums for "
                               f"{size} bytes")
        try:
            st = os.stat(path)
        except OSError as err:
            raise damaged_file(root, rel, f"it cannot be opened: {err.strerror or err}") \
                from err
        if st.st_size != size:
            raise damaged_file(root, rel, f"{st.st_size} bytes, the manifest says {size}")
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
               digests)
        with _LOCK:
            done = _CHECKED.get(key)
            if done is None:
                done = np.zeros(blocks, dtype=bool)
                _CHECKED[key] = done
        self._done = done
        # Every block checked: later reads of the file cost one attribute test.
        self.complete = bool(done.all())

    def check(self, start: int, end: int) -> None:
        """Check the blocks holding bytes ``[start, end)`` (clipped to the file)."""
        if self.complete:
            return
        start, end = max(0, int(start)), min(self.size, int(end))
        if end <= start:
            return
        first, last = start // BLOCK_SIZE, (end - 1) // BLOCK_SIZE
        todo = np.flatnonzero(~self._done[first:last + 1]) + first
        if todo.size == 0:
            return
        try:
            with open(self.path, "rb") as fh:
                for block in todo.tolist():
                    fh.seek(block * BLOCK_SIZE)
                    data = fh.read(BLOCK_SIZE)
                    want = self.digests[block * DIGEST_CHARS:(block + 1) * DIGEST_CHARS]
                    if xxhash.xxh3_64_hexdigest(data) != want:
                        raise damaged_file(self.root, self.rel,
                                           f"block {block} at byte {block * BLOCK_SIZE} fails "
                                           f"its {BLOCK_ALGO} checksum")
                    self._done[block] = True
            self.complete = bool(self._done.all())
        except OSError as err:
            raise damaged_file(self.root, self.rel,
                               f"it cannot be read: {err.strerror or err}") from err

    def check_all(self) -> None:
        self.check(0, self.size)

    def check_ranges(self, ranges: Iterable[tuple[int, int]]) -> None:
        for start, end in ranges:
            self.check(start, end)


def guard_for(root: Path, version: Path, manifest: Mapping[str, Any],
              path: Path) -> FileGuard | None:
    """The guard of ``path`` (a file of ``version``), or None when the version predates block
    checksums (or the checks are off for a benchmark). A file the version does not list is
    refused: it is not part of the version."""
    if not checks_enabled() or BLOCK_KEY not in manifest:
        return None
    info = manifest.get(BLOCK_KEY)
    if info != BLOCK_INFO:
        raise StoreError(f"the manifest of {version} records block checksums as {info!r}; "
                         "this arrowdedup reads "
                         f"{BLOCK_INFO!r}: `arrowdedup verify {root}`, or ingest again")
    try:
        rel = path.relative_to(version).as_posix()
    except ValueError:
        rel = path.name
    files = manifest.get("files") or {}
    entry = files.get(rel) if isinstance(files, Mapping) else None
    if not isinstance(entry, Mapping):
        raise damaged_file(root, rel, "the manifest does not list it (a foreign or "
                           "half-written file, or a damaged manifest)")
    return FileGuard(root, path, rel, entry)


# ----------------------------------------------------------------------------- Parquet


def parquet_footer_range(guard: FileGuard) -> tuple[int, int]:
    """Check and return the byte range of a Parquet file's footer (metadata, its length and
    the magic); the last block is always among the checked ones."""
    size = guard.size
    guard.check(max(0, size - 8), size)
    with open(guard.path, "rb") as fh:
        fh.seek(max(0, size - 8))
        tail = fh.read(8)
    length = int.from_bytes(tail[:4], "little") if len(tail) == 8 else size
    start = max(0, size - 8 - length)
    guard.check(start, size)
    guard.check(0, 4)  # the leading magic
    return start, size


def check_parquet(guard: FileGuard, columns: Iterable[str] | None) -> None:
    """Check the footer of a Parquet file and the column chunks of ``columns`` (all when
    None) in every row group: the bytes a reader of those columns touches."""

    parquet_footer_range(guard)
    meta = pq.read_metadata(guard.path)
    wanted = None if columns is None else set(columns)
    ranges = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            if wanted is not None and not _wanted(chunk.path_in_schema, wanted):
                continue
            offsets = [o for o in (chunk.dictionary_page_offset, chunk.data_page_offset)
                       if o is not None and o > 0]
            start = min(offsets) if offsets else 0
            ranges.append((start, start + int(chunk.total_compressed_size)))
    guard.check_ranges(ranges)


def _wanted(path_in_schema: str, wanted: set[str]) -> bool:
    return path_in_schema in wanted or any(path_in_schema.startswith(name + ".")
                                           for name in wanted)


# ----------------------------------------------------------------------------- NumPy files


class CheckedArray:
    """A memory-mapped 1-D ``.npy`` array whose slices check their bytes before they are
    read (a BM25 query reads the postings of its tokens only)."""

    def __init__(self, array: np.ndarray, guard: FileGuard | None, offset: int) -> None:
        self.array = array
        self.guard = guard
        self.offset = offset
        self.shape = array.shape

    def __getitem__(self, key: slice) -> np.ndarray:
        if self.guard is not None:
            start, stop, _ = key.indices(self.array.shape[0])
            item = self.array.itemsize
            self.guard.check(self.offset + start * item, self.offset + max(start, stop) * item)
        return self.array[key]


def load_npy(path: Path, guard: FileGuard | None, *, mmap: bool = False) -> Any:
    """``np.load`` of a store's ``.npy`` file after checking its bytes: all of them, or
    (``mmap``) its header now and each slice when it is read (:class:`CheckedArray`)."""
    if guard is None or not mmap:
        if guard is not None:
            guard.check_all()
        array = np.load(path, mmap_mode="r" if mmap else None)
        return CheckedArray(array, None, 0) if mmap else array
    guard.check(0, min(guard.size, 4096))  # the header (format, dtype, shape)
    array = np.load(path, mmap_mode="r")
    return CheckedArray(array, guard, int(getattr(array, "offset", 0)))


def read_text(path: Path, guard: FileGuard | None) -> str:
    """A small text file of the store (a JSON index file), checked whole."""
    if guard is not None:
        guard.check_all()
    return path.read_text(encoding="utf-8")


def hasher(algo: str) -> Any:
    if algo == "sha256":
        return hashlib.sha256()
    if algo == "xxh3_128":
        import xxhash

        return xxhash.xxh3_128()
    raise StoreError(f"unknown checksum algorithm {algo!r} in the manifest; re-ingest")


# The manifest's file checksums: XXH3-128 (about 6x faster than SHA-256 here; a checksum
# against damage, not a signature). Format 1 stores used SHA-256 ("checksum" absent).
CHECKSUM = "xxh3_128"


def checksum_bytes(data: Any, algo: str = CHECKSUM) -> str:
    h = hasher(algo)
    h.update(data)
    return str(h.hexdigest())


def checksum_file(path: Path, algo: str = CHECKSUM) -> str:
    """Hex digest of a file, read in 4 MiB blocks."""
    h = hasher(algo)
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return str(h.hexdigest())


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file (the checksums of format 1 stores)."""
    return checksum_file(path, "sha256")
