"""The Numba twin of :func:`arrowdedup.retrieval.tokens.tokens_of`, over a whole Arrow column.

It walks the offsets and UTF-8 bytes of a lower-cased ``large_string`` array once to count
the tokens and once to record them: for each token its row, its byte span and its XXH64 (the
same hash as :mod:`arrowdedup.hashing`). A test asserts the spans spell exactly the tokens
of the Python implementation. Imported only by index builds of ``JIT_MIN_TEXTS`` texts or more.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import pyarrow as pa

from .._hashing_jit import _xxh64_one
from ..hashing import _buffers, xxh64
from .tokens import STOPWORDS

_WORD, _JOINER, _SEP = 0, 1, 2
STOP_MAX_BYTES = max(len(w.encode()) for w in STOPWORDS)


@numba.njit(inline="always")
def _is_joiner(b: Any) -> bool:
    return b == 46 or b == 45 or b == 58 or b == 47  # . - : /


def _ascii_table() -> np.ndarray:
    table = np.full(128, _SEP, dtype=np.int64)
    for c in b"abcdefghijklmnopqrstuvwxyz0123456789_":
        table[c] = _WORD
    for c in b".-:/":
        table[c] = _JOINER
    return table


_ASCII = _ascii_table()


@numba.njit(inline="always")
def _cls(data: np.ndarray, i: int, end: int) -> tuple[int, int]:
    """(class, width in bytes) of the character starting at byte ``i``."""
    b = np.int64(data[i])
    if b < 0x80:
        return _ASCII[b], 1
    if b >= 0xF0:
        w = 4
        cp = b & 0x07
    elif b >= 0xE0:
        w = 3
        cp = b & 0x0F
    elif b >= 0xC0:
        w = 2
        cp = b & 0x1F
    else:  # a stray continuation byte (not valid UTF-8): a word byte, as Python sees U+FFFD
        return _WORD, 1
    if i + w > end:
        return _WORD, end - i
    for k in range(1, w):
        cp = (cp << 6) | (np.int64(data[i + k]) & 0x3F)
    if (0x80 <= cp <= 0xBF or 0x2000 <= cp <= 0x207F or 0x3000 <= cp <= 0x303F
            or 0xFF00 <= cp <= 0xFF0F or 0xFF1A <= cp <= 0xFF20 or cp == 0xFEFF):
        return _SEP, w
    return _WORD, w


@numba.njit(inline="always")
def _is_stop(stop: np.ndarray, h: np.uint64, length: int) -> bool:
    """Binary search of the sorted stop-word hashes (only short tokens can be stop words)."""
    if length > STOP_MAX_BYTES:
        return False
    lo, hi = 0, stop.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if stop[mid] < h:
            lo = mid + 1
        else:
            hi = mid
    return lo < stop.shape[0] and stop[lo] == h


@numba.njit(inline="always")
def _put(fill: bool, k: int, r: int, s: int, e: int, h: np.uint64, rows: np.ndarray,
         starts: np.ndarray, ends: np.ndarray, hashes: np.ndarray) -> int:
    if fill:
        rows[k] = r
        starts[k] = s
        ends[k] = e
        hashes[k] = h
    return k + 1


@numba.njit(inline="always")
def _emit(data: np.ndarray, r: int, s: int, cs: int, e: int, compound: bool, has_dot: bool,
          stop: np.ndarray, fill: bool, k: int, rows: np.ndarray, starts: np.ndarray,
          ends: np.ndarray, hashes: np.ndarray) -> int:
    """Emit the token ``data[s:e]`` (``cs``: after its dash prefix; ``compound``: it has a
    prefix, a joiner or an ``_``), then its parts and its ``v`` variant."""
    b0 = np.int64(data[s])
    if not (e - s == 1 and ((97 <= b0 <= 122) or b0 == 95)):
        h = _xxh64_one(data, s, e)
        if not _is_stop(stop, h, e - s):
            k = _put(fill, k, r, s, e, h, rows, starts, ends, hashes)
    if not compound:
        return k
    ps = cs
    for j in range(cs, e + 1):
        if j == e or _is_joiner(np.int64(data[j])) or data[j] == 95:
            if j > ps:
                single = j - ps == 1 and data[ps] < 0x80
                digits = True
                for q in range(ps, j):
                    if not (48 <= data[q] <= 57):
                        digits = False
                        break
                if not single and not digits:
                    h = _xxh64_one(data, ps, j)
                    if not _is_stop(stop, h, j - ps):
                        k = _put(fill, k, r, ps, j, h, rows, starts, ends, hashes)
            ps = j + 1
    if e - cs > 2 and data[cs] == 118 and 48 <= data[cs + 1] <= 57 and has_dot:
        k = _put(fill, k, r, cs + 1, e, _xxh64_one(data, cs + 1, e), rows, starts, ends,
                 hashes)
    return k


@numba.njit(nogil=True, cache=True)
def _scan(offsets: np.ndarray, data: np.ndarray, stop: np.ndarray, fill: bool,
          rows: np.ndarray, starts: np.ndarray, ends: np.ndarray, hashes: np.ndarray) -> int:
    k = 0
    for r in range(offsets.shape[0] - 1):
        i = offsets[r]
        end = offsets[r + 1]
        while i < end:
            b = data[i]
            # ASCII word bytes first: the common case, without decoding.
            if (97 <= b <= 122) or (48 <= b <= 57) or b == 95:
                c, w = _WORD, 1
            else:
                c, w = _cls(data, i, end)
            start = i
            compound = False
            has_dot = False
            if c != _WORD:
                if b != 45:
                    i += w
                    continue
                d = i
                while d < end and data[d] == 45:
                    d += 1
                if d - i > 2 or d >= end:
                    i = d
                    continue
                c2, _ = _cls(data, d, end)
                if c2 != _WORD:
                    i = d
                    continue
                i = d
                compound = True
            core = i
            while i < end:
                b = data[i]
                if (97 <= b <= 122) or (48 <= b <= 57):
                    i += 1
                    continue
                if b == 95:
                    compound = True
                    i += 1
                    continue
                c, w = _cls(data, i, end)
                if c != _WORD:
                    break
                i += w
            while i < end:
                c, w = _cls(data, i, end)
                if c != _JOINER or i + w >= end:
                    break
                c2, _ = _cls(data, i + w, end)
                if c2 != _WORD:
                    break
                compound = True
                if data[i] == 46:
                    has_dot = True
                i += w
                while i < end:
                    b = data[i]
                    if (97 <= b <= 122) or (48 <= b <= 57):
                        i += 1
                        continue
                    if b == 95:
                        i += 1
                        continue
                    c, w = _cls(data, i, end)
                    if c != _WORD:
                        break
                    i += w
            k = _emit(data, r, start, core, i, compound, has_dot, stop, fill, k, rows,
                      starts, ends, hashes)
    return k


@numba.njit(nogil=True, cache=True)
def dense_ids(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense int32 ids of uint64 keys in order of first appearance, and the index of each
    id's first appearance (an open-addressing table that doubles at half load)."""
    n = hashes.shape[0]
    cap = 1 << 10
    keys = np.zeros(cap, np.uint64)
    vals = np.full(cap, -1, np.int64)
    ids = np.empty(n, np.int32)
    first = np.empty(n, np.int64)
    m = 0
    for t in range(n):
        h = hashes[t]
        mask = cap - 1
        slot = np.int64((h ^ (h >> np.uint64(31))) & np.uint64(mask))
        while True:
            v = vals[slot]
            if v < 0:
                vals[slot] = m
                keys[slot] = h
                ids[t] = m
                first[m] = t
                m += 1
                break
            if keys[slot] == h:
                ids[t] = v
                break
            slot = (slot + 1) & mask
        if 2 * m > cap:  # grow: re-insert every key into a table twice the size
            old_keys, old_vals = keys, vals
            cap *= 2
            mask = cap - 1
            keys = np.zeros(cap, np.uint64)
            vals = np.full(cap, -1, np.int64)
            for j in range(old_vals.shape[0]):
                if old_vals[j] >= 0:
                    kk = old_keys[j]
                    s2 = np.int64((kk ^ (kk >> np.uint64(31))) & np.uint64(mask))
                    while vals[s2] >= 0:
                        s2 = (s2 + 1) & mask
                    vals[s2] = old_vals[j]
                    keys[s2] = kk
    return ids, first[:m]


@numba.njit(nogil=True, cache=True)
def _gather(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray,
                                                                                np.ndarray]:
    n = starts.shape[0]
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + (ends[i] - starts[i])
    out = np.empty(offsets[n], np.uint8)
    for i in range(n):
        out[offsets[i]:offsets[i + 1]] = data[starts[i]:ends[i]]
    return offsets, out


@numba.njit(nogil=True, cache=True)
def postings(tokens: np.ndarray, rows: np.ndarray, n_vocab: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column-major postings of token occurrences (``rows`` non-decreasing): ``indptr``
    (n_vocab + 1), the row of each posting (ascending inside a token) and its term
    frequency; a counting sort, linear in the occurrences."""
    count = np.zeros(n_vocab + 1, np.int64)
    for t in tokens:
        count[t + 1] += 1
    for v in range(n_vocab):
        count[v + 1] += count[v]
    pos = count[:-1].copy()
    sorted_rows = np.empty(tokens.shape[0], np.int32)
    for i in range(tokens.shape[0]):
        t = tokens[i]
        sorted_rows[pos[t]] = rows[i]
        pos[t] += 1
    indptr = np.zeros(n_vocab + 1, np.int64)
    out_rows = np.empty(tokens.shape[0], np.int32)
    tf = np.empty(tokens.shape[0], np.int32)
    k = 0
    for v in range(n_vocab):
        lo, hi = count[v], count[v + 1]
        i = lo
        while i < hi:
            r = sorted_rows[i]
            j = i + 1
            while j < hi and sorted_rows[j] == r:
                j += 1
            out_rows[k] = r
            tf[k] = j - i
            k += 1
            i = j
        indptr[v + 1] = k
    return indptr, out_rows[:k], tf[:k]


@numba.njit(nogil=True, cache=True)
def bm25_scores(indptr: np.ndarray, doc_rows: np.ndarray, tf: np.ndarray,
                doc_len: np.ndarray, avg: float, n_docs: int, k1: float, b: float
                ) -> np.ndarray:
    """The Lucene BM25 score of every posting, in float64 then float32 (as the NumPy path)."""
    out = np.empty(doc_rows.shape[0], np.float32)
    for v in range(indptr.shape[0] - 1):
        lo, hi = indptr[v], indptr[v + 1]
        df = np.float64(hi - lo)
        idf = np.float32(np.log1p((n_docs - df + 0.5) / (df + 0.5)))
        for j in range(lo, hi):
            t = np.float64(tf[j])
            norm = k1 * ((1.0 - b) + b * doc_len[doc_rows[j]] / avg)
            out[j] = idf * np.float32(t / (norm + t))
    return out


_STOP: np.ndarray | None = None


def stop_hashes() -> np.ndarray:
    global _STOP
    if _STOP is None:
        _STOP = np.sort(xxh64(pa.array(sorted(STOPWORDS), type=pa.large_string())))
    return _STOP


def scan(lowered: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                       np.ndarray, np.ndarray]:
    """(rows, starts, ends, hashes, data) of every token of a lower-cased string column.

    One pass: a text of b bytes has at most b tokens (each token, part and ``v`` variant
    covers bytes no other token of its kind does), so arrays of that length are reserved
    (virtual memory: only the pages written are touched) and trimmed."""
    offsets, data = _buffers(lowered)
    stop = stop_hashes()
    cap = int(offsets[-1] - offsets[0]) + 1
    rows = np.empty(cap, np.int64)
    starts = np.empty(cap, np.int64)
    ends = np.empty(cap, np.int64)
    hashes = np.empty(cap, np.uint64)
    n = _scan(offsets, data, stop, True, rows, starts, ends, hashes)
    return rows[:n].copy(), starts[:n].copy(), ends[:n].copy(), hashes[:n].copy(), data


def spans_to_strings(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The byte spans as an Arrow ``large_string`` array."""
    offsets, chars = _gather(data, starts, ends)
    return pa.LargeStringArray.from_buffers(starts.shape[0], pa.py_buffer(offsets),
                                            pa.py_buffer(chars))
