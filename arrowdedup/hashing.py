"""XXH64 over whole Arrow string columns at once.

A Numba transcription of XXH64 (seed 0) that walks the offsets and data buffers of a
``large_string`` array, so 1M texts hash in milliseconds instead of a Python loop. The result
equals ``xxhash.xxh64_intdigest`` (tested), and ``to_hex`` gives the lowercase hex digest.
"""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)


@numba.njit(inline="always")
def _rotl(x: np.uint64, r: int) -> np.uint64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@numba.njit(inline="always")
def _read64(data: np.ndarray, i: int) -> np.uint64:
    v = np.uint64(0)
    for k in range(8):
        v |= np.uint64(data[i + k]) << np.uint64(8 * k)
    return v


@numba.njit(inline="always")
def _read32(data: np.ndarray, i: int) -> np.uint64:
    v = np.uint64(0)
    for k in range(4):
        v |= np.uint64(data[i + k]) << np.uint64(8 * k)
    return v


@numba.njit(inline="always")
def _round(acc: np.uint64, lane: np.uint64) -> np.uint64:
    acc = acc + lane * _P2
    acc = _rotl(acc, 31)
    return acc * _P1


@numba.njit(inline="always")
def _merge(acc: np.uint64, val: np.uint64) -> np.uint64:
    acc = acc ^ _round(np.uint64(0), val)
    return acc * _P1 + _P4


@numba.njit(nogil=True, cache=True)
def _xxh64_one(data: np.ndarray, start: int, end: int) -> np.uint64:
    length = end - start
    i = start
    if length >= 32:
        v1 = _P1 + _P2
        v2 = _P2
        v3 = np.uint64(0)
        v4 = np.uint64(0) - _P1
        limit = end - 32
        while i <= limit:
            v1 = _round(v1, _read64(data, i))
            v2 = _round(v2, _read64(data, i + 8))
            v3 = _round(v3, _read64(data, i + 16))
            v4 = _round(v4, _read64(data, i + 24))
            i += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = _P5
    h = h + np.uint64(length)
    while i + 8 <= end:
        h = h ^ _round(np.uint64(0), _read64(data, i))
        h = _rotl(h, 27) * _P1 + _P4
        i += 8
    if i + 4 <= end:
        h = h ^ (_read32(data, i) * _P1)
        h = _rotl(h, 23) * _P2 + _P3
        i += 4
    while i < end:
        h = h ^ (np.uint64(data[i]) * _P5)
        h = _rotl(h, 11) * _P1
        i += 1
    h = h ^ (h >> np.uint64(33))
    h = h * _P2
    h = h ^ (h >> np.uint64(29))
    h = h * _P3
    h = h ^ (h >> np.uint64(32))
    return h


@numba.njit(nogil=True, cache=True, parallel=True)
def _xxh64_many(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for r in numba.prange(n):
        out[r] = _xxh64_one(data, offsets[r], offsets[r + 1])
    return out


def _buffers(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
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


def xxh64(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """XXH64 (seed 0) of each string's raw UTF-8 bytes, as uint64."""
    if len(array) == 0:
        return np.empty(0, dtype=np.uint64)
    offsets, data = _buffers(array)
    return _xxh64_many(offsets, data)  # type: ignore[no-any-return]


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


@numba.njit(nogil=True, cache=True, parallel=True)
def _hex_many(hashes: np.ndarray, table: np.ndarray) -> np.ndarray:
    n = hashes.shape[0]
    out = np.empty(n * 16, dtype=np.uint8)
    for r in numba.prange(n):
        h = hashes[r]
        for k in range(16):
            out[r * 16 + 15 - k] = table[np.intp(h & np.uint64(0xF))]
            h = h >> np.uint64(4)
    return out


def to_hex(hashes: np.ndarray) -> pa.Array:
    """Lowercase 16-character hex digests, as an Arrow string array (vectorised)."""
    n = hashes.shape[0]
    chars = _hex_many(np.ascontiguousarray(hashes, dtype=np.uint64), _HEX) if n else b""
    offsets = np.arange(0, 16 * (n + 1), 16, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars))
