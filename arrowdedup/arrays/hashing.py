"""XXH64 over whole Arrow string columns at once.

A Numba transcription of XXH64 (seed 0, :mod:`arrowdedup.arrays.hashing_jit`) walks the offsets and
data buffers of a ``large_string`` array, so 1M texts hash in milliseconds instead of a Python
loop. Columns under ``JIT_MIN_ROWS`` rows go through the ``xxhash`` package instead (no jitted
code to load for a small job). Both give ``xxhash.xxh64_intdigest`` (tested), and ``to_hex``
gives the lowercase hex digest.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import polars as pl

JIT_MIN_ROWS = 4096


def string_buffers(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (int64) and data (uint8) of a string column, nulls hashed as empty text."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if not pa.types.is_large_string(array.type):
        array = array.cast(pa.large_string())
    if array.null_count:
        array = array.fill_null("")
    _, offsets_buf, data_buf = array.buffers()
    start = array.offset
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[start : start + len(array) + 1]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(1, np.uint8)
    )
    return offsets, data


def string_views(array: pa.Array | pa.ChunkedArray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The views (uint8, 16 bytes per string), the data buffers end to end and where each
    buffer starts in them, of a ``string_view`` column without nulls; None when it is
    anything else (which is cast to ``large_string`` instead)."""
    if isinstance(array, pa.ChunkedArray):
        if array.num_chunks != 1:
            return None
        array = array.chunk(0)
    if not pa.types.is_string_view(array.type) or array.null_count:
        return None
    buffers = array.buffers()
    start = 16 * array.offset
    views = np.frombuffer(buffers[1], dtype=np.uint8)[start : start + 16 * len(array)]
    parts = [np.frombuffer(b, dtype=np.uint8) for b in buffers[2:] if b is not None]
    sizes = np.array([p.shape[0] for p in parts], dtype=np.int64)
    bases = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    # One buffer (an Arrow large_string converted by Polars) is used as it is; Polars' own
    # columns hold several, joined here: a copy of the text bytes, as the cast would make.
    data = parts[0] if len(parts) == 1 else (
        np.concatenate(parts) if parts else np.zeros(1, np.uint8))
    return views, data, bases


def xxh64(array: pa.Array | pa.ChunkedArray | pl.Series) -> np.ndarray:
    """XXH64 (seed 0) of each string's raw UTF-8 bytes (null as empty), as uint64.

    A Polars string column is taken as its string views (``CompatLevel.newest()``: no copy;
    the default level rebuilds the column as ``large_string`` first). A ``string_view`` column
    is hashed through its views; any other string type is cast to ``large_string``."""
    if not isinstance(array, (pa.Array, pa.ChunkedArray)):
        import polars as pl

        array = array.to_arrow(compat_level=pl.CompatLevel.newest())
    if len(array) == 0:
        return np.empty(0, dtype=np.uint64)
    if len(array) >= JIT_MIN_ROWS and (views := string_views(array)) is not None:
        from .hashing_jit import xxh64_views

        return xxh64_views(*views)
    offsets, data = string_buffers(array)
    if offsets.shape[0] - 1 < JIT_MIN_ROWS:
        import xxhash

        raw = memoryview(data.data)
        bounds = offsets.tolist()
        return np.fromiter(
            (xxhash.xxh64_intdigest(raw[a:b]) for a, b in itertools.pairwise(bounds)),
            dtype=np.uint64, count=len(bounds) - 1)
    from .hashing_jit import xxh64_many

    return xxh64_many(*_read_only(offsets, data))


def _read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """Read-only views of ``arrays``, whatever buffers they lie on: Numba compiles one
    overload per writability, and the compile stage warms the read-only one."""
    views = tuple(a.view() for a in arrays)
    for v in views:
        v.flags.writeable = False
    return views


def ascii_only(array: pa.Array) -> bool:
    """True when ``array`` (``string`` or ``large_string``, one chunk) has consistent offsets
    and only ASCII bytes, so it is valid UTF-8 without a check per string; False means "not
    shown here", for Arrow's full validation to decide. Arrays under ``JIT_MIN_ROWS`` rows
    always answer False (no jitted code to load). Raises ``pa.ArrowInvalid`` when the
    buffers are too short for the offsets (Arrow's structural check)."""
    if len(array) < JIT_MIN_ROWS or not (pa.types.is_string(array.type)
                                         or pa.types.is_large_string(array.type)):
        return False
    array.validate()  # buffer sizes, before the offsets are read from them
    _, offsets_buf, data_buf = array.buffers()
    width = np.int64 if pa.types.is_large_string(array.type) else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=width)[array.offset:array.offset + len(array) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(
        0, np.uint8)
    from .hashing_jit import ascii_column

    return bool(ascii_column(*_read_only(offsets.astype(np.int64, copy=False), data)))


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def to_hex(hashes: np.ndarray) -> pa.Array:
    """Lowercase 16-character hex digests, as an Arrow string array (vectorised)."""
    n = hashes.shape[0]
    chars: bytes | np.ndarray
    if n < JIT_MIN_ROWS:
        chars = "".join(f"{int(h):016x}" for h in hashes).encode("ascii")
    else:
        from .hashing_jit import hex_many

        chars = hex_many(np.ascontiguousarray(hashes, dtype=np.uint64), _HEX)
    offsets = np.arange(0, 16 * (n + 1), 16, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars))
