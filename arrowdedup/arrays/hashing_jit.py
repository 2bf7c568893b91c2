"""The Numba XXH64 of :mod:`arrowdedup.arrays.hashing` (imported for columns of ``JIT_MIN_ROWS``
rows or more, and by the tokenizer)."""

from __future__ import annotations

import numpy as np

from ..jit.intrinsics_jit import load_u32, load_u64
from ..jit.runtime import njit, numba

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)


@numba.njit(inline="always")
def _rotl(x: np.uint64, r: int) -> np.uint64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@numba.njit(inline="always")
def _round(acc: np.uint64, lane: np.uint64) -> np.uint64:
    acc = acc + lane * _P2
    acc = _rotl(acc, 31)
    return acc * _P1


@numba.njit(inline="always")
def _merge(acc: np.uint64, val: np.uint64) -> np.uint64:
    acc = acc ^ _round(np.uint64(0), val)
    return acc * _P1 + _P4


@numba.njit(inline="always")
def xxh64_inline(data: np.ndarray, start: int, end: int) -> np.uint64:
    """XXH64 of ``data[start:end]`` (the body of :func:`_xxh64_one` and :func:`xxh64_plain`)."""
    length = end - start
    i = start
    if length >= 32:
        v1 = _P1 + _P2
        v2 = _P2
        v3 = np.uint64(0)
        v4 = np.uint64(0) - _P1
        limit = end - 32
        while i <= limit:
            v1 = _round(v1, load_u64(data, i))
            v2 = _round(v2, load_u64(data, i + 8))
            v3 = _round(v3, load_u64(data, i + 16))
            v4 = _round(v4, load_u64(data, i + 24))
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
        h = h ^ _round(np.uint64(0), load_u64(data, i))
        h = _rotl(h, 27) * _P1 + _P4
        i += 8
    if i + 4 <= end:
        h = h ^ (load_u32(data, i) * _P1)
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


@numba.njit(nogil=True, cache=True)
def _xxh64_one(data: np.ndarray, start: int, end: int) -> np.uint64:
    return xxh64_inline(data, start, end)


@njit(nogil=True, cache=True, _nrt=False)
def xxh64_plain(data: np.ndarray, start: int, end: int) -> np.uint64:
    """:func:`_xxh64_one` compiled without reference counting, for the fact scanner (a
    function with reference counting increments its array arguments on every call)."""
    return xxh64_inline(data, start, end)


@numba.njit(nogil=True, cache=True, parallel=True)
def xxh64_many(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for r in numba.prange(n):
        out[r] = _xxh64_one(data, offsets[r], offsets[r + 1])
    return out


@numba.njit(nogil=True, cache=True, parallel=True)
def xxh64_views(views: np.ndarray, data: np.ndarray, bases: np.ndarray) -> np.ndarray:
    """XXH64 of each string of an Arrow ``string_view`` array: a view is 16 bytes, the length
    (int32) then either the string itself (up to 12 bytes) or a 4-byte prefix, the buffer
    index and the offset in that buffer; the buffers lie end to end in ``data``, buffer ``b``
    from ``bases[b]``."""
    n = views.shape[0] // 16
    out = np.empty(n, dtype=np.uint64)
    for r in numba.prange(n):
        at = 16 * r
        length = int(load_u32(views, at))
        if length <= 12:
            out[r] = _xxh64_one(views, at + 4, at + 4 + length)
        else:
            start = bases[int(load_u32(views, at + 8))] + int(load_u32(views, at + 12))
            out[r] = _xxh64_one(data, start, start + length)
    return out


@numba.njit(nogil=True, cache=True, parallel=True)
def hex_many(hashes: np.ndarray, table: np.ndarray) -> np.ndarray:
    n = hashes.shape[0]
    out = np.empty(n * 16, dtype=np.uint8)
    for r in numba.prange(n):
        h = hashes[r]
        for k in range(16):
            out[r * 16 + 15 - k] = table[np.intp(h & np.uint64(0xF))]
            h = h >> np.uint64(4)
    return out


_HIGH_BITS = np.uint64(0x8080808080808080)
_ASCII_BLOCK = 1 << 20


@numba.njit(nogil=True, cache=True, parallel=True)
def ascii_column(offsets: np.ndarray, data: np.ndarray) -> bool:
    """True when the offsets start at 0 or more, never decrease, stay inside ``data``, and
    every byte they cover is ASCII: then every string is valid UTF-8."""
    n = offsets.shape[0] - 1
    if n < 0 or offsets[0] < 0 or offsets[n] > data.shape[0]:
        return False
    for r in range(n):
        if offsets[r + 1] < offsets[r]:
            return False
    lo, hi = int(offsets[0]), int(offsets[n])
    blocks = (hi - lo + _ASCII_BLOCK - 1) // _ASCII_BLOCK
    clean = np.ones(blocks, dtype=np.bool_)
    for b in numba.prange(blocks):
        i = lo + b * _ASCII_BLOCK
        end = min(i + _ASCII_BLOCK, hi)
        seen = np.uint64(0)
        while i + 8 <= end:
            seen |= load_u64(data, i)
            i += 8
        while i < end:
            seen |= np.uint64(data[i])
            i += 1
        clean[b] = (seen & _HIGH_BITS) == 0
    return bool(clean.all())


@numba.njit(inline="always")
def _low_bytes(v: np.uint64, k: int) -> np.uint64:
    """The low ``k`` bytes of ``v`` (0 <= k <= 8), zero above."""
    if k >= 8:
        return v
    return v & ((np.uint64(1) << np.uint64(8 * k)) - np.uint64(1))


@numba.njit(nogil=True, cache=True, parallel=True)
def view_run_heads(views: np.ndarray, data: np.ndarray, bases: np.ndarray) -> np.ndarray:
    """Per string of a ``string_view`` array (laid out as for :func:`xxh64_views`): True
    where it differs from the string before it (always for the first)."""
    n = views.shape[0] // 16
    out = np.empty(n, dtype=np.bool_)
    if n:
        out[0] = True
    for r in numba.prange(1, n):
        a, b = 16 * r, 16 * (r - 1)
        length = int(load_u32(views, a))
        if length != int(load_u32(views, b)):
            out[r] = True
        elif length <= 12:
            # Inline: compared as 8 + 4 bytes, only the string's own (the padding after a
            # short string is not read as part of it).
            lo = min(length, 8)
            differ = _low_bytes(load_u64(views, a + 4), lo) != _low_bytes(
                load_u64(views, b + 4), lo)
            if length > 8:
                differ = differ or _low_bytes(load_u32(views, a + 12), length - 8) != \
                    _low_bytes(load_u32(views, b + 12), length - 8)
            out[r] = differ
        elif load_u32(views, a + 4) != load_u32(views, b + 4):  # the 4-byte prefixes
            out[r] = True
        else:
            sa = bases[int(load_u32(views, a + 8))] + int(load_u32(views, a + 12))
            sb = bases[int(load_u32(views, b + 8))] + int(load_u32(views, b + 12))
            differ = False
            if sa != sb:
                q = 0
                while q + 8 <= length:
                    if load_u64(data, sa + q) != load_u64(data, sb + q):
                        differ = True
                        break
                    q += 8
                while not differ and q < length:
                    differ = data[sa + q] != data[sb + q]
                    q += 1
            out[r] = differ
    return out
