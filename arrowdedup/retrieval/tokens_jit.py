"""The Numba twin of :func:`arrowdedup.retrieval.tokens.tokens_of`, over a whole Arrow column.

It walks the offsets and UTF-8 bytes of a lower-cased ``large_string`` array twice: once to
find the byte span of every token occurrence (with the parts and ``v`` variants of compound
tokens), once to turn each span into a bucket-local id through a hash table keyed on a hash
of the token's bytes (:func:`_token_hash`), each hit confirmed on the bytes, so ids come in
order of first appearance; only the first occurrence of each token is
kept as a byte span, which becomes the vocabulary. Only the spans are materialised per
token, no strings or hashes. A test asserts the vocabulary spells exactly the tokens of the Python
implementation. Imported only by index builds of ``JIT_MIN_TEXTS`` texts or more.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from ..arrays.hashing import string_buffers, xxh64
from ..arrays.hashing_jit import xxh64_inline
from ..jit.intrinsics_jit import load_u64
from ..jit.runtime import numba
from .tokens import STOPWORDS, lowercase

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
def _slot(h: np.uint64, mask: int) -> np.int64:
    return np.int64((h ^ (h >> np.uint64(31))) & np.uint64(mask))


@numba.njit(inline="always")
def _same(data: np.ndarray, a: int, b: int, length: int) -> bool:
    for q in range(length):
        if data[a + q] != data[b + q]:
            return False
    return True


_LOW32 = np.uint64(0xFFFFFFFF)


@numba.njit(inline="always")
def _prefix(data: np.ndarray, s: int, length: int) -> np.uint64:
    """The first ``min(length, 8)`` bytes of the token at ``s`` as a little-endian uint64,
    zero above them (with the length beside it, equal prefixes of tokens of up to 8 bytes
    mean equal tokens)."""
    if s + 8 <= data.shape[0]:
        v = load_u64(data, s)
        if length < 8:
            v &= (np.uint64(1) << np.uint64(8 * length)) - np.uint64(1)
        return v
    v = np.uint64(0)
    for q in range(min(length, 8)):
        v |= np.uint64(data[s + q]) << np.uint64(8 * q)
    return v


_MIX1 = np.uint64(0x9E3779B97F4A7C15)
_MIX2 = np.uint64(0xC2B2AE3D27D4EB4F)


@numba.njit(inline="always")
def _token_hash(data: np.ndarray, s: int, e: int, pre: np.uint64) -> np.uint64:
    """The table's hash of the token ``data[s:e]`` whose first 8 bytes are ``pre``: for
    tokens of up to 16 bytes (almost all) a multiply-xorshift of their two 8-byte words and
    length, a few cycles against XXH64's chain of a dozen multiplies; XXH64 above. It only
    places entries (a hit is confirmed on the bytes), so it never changes an id."""
    length = e - s
    if length > 16:
        return xxh64_inline(data, s, e)
    h = (pre ^ np.uint64(length)) * _MIX1
    if length > 8:
        h ^= _prefix(data, s + 8, length - 8) * _MIX2
    return h ^ (h >> np.uint64(29))


@numba.njit(nogil=True, cache=True)
def _grow(slots: np.ndarray, first: np.ndarray, m: int, need: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """The table re-made with room for ``need`` entries at most half load."""
    cap = slots.shape[0]
    while cap < 2 * need:
        cap *= 2
    new_slots = np.zeros((cap, 4), np.uint64)
    mask = cap - 1
    for j in range(slots.shape[0]):
        if slots[j, 3] != 0:
            slot = _slot(slots[j, 0], mask)
            while new_slots[slot, 3] != 0:
                slot = (slot + 1) & mask
            new_slots[slot] = slots[j]
    new_first = np.empty((cap // 2, 2), np.int64)
    new_first[:m] = first[:m]
    return new_slots, new_first


@numba.njit(nogil=True, cache=True)
def _spans(offsets: np.ndarray, data: np.ndarray, r0: int, r1: int, starts: np.ndarray,
           ends: np.ndarray, span_rows: np.ndarray) -> int:
    """The byte span and row of every token occurrence of rows ``r0`` to ``r1``, in text
    order: each token, then, for a compound one (a dash prefix, a joiner or an ``_``), its
    parts and its ``v`` variant. Returns the occurrence count."""
    n = 0
    for r in range(r0, r1):
        i = offsets[r]
        end = offsets[r + 1]
        while i < end:
            b = data[i]
            # ASCII bytes by table, without decoding: separators skipped at once.
            if b < 0x80:
                c, w = _ASCII[b], 1
                if c == _SEP:
                    i += 1
                    continue
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
                if data[i] < 0x80 and not _is_joiner(np.int64(data[i])):
                    break  # an ASCII word byte cannot follow a word: a separator
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
            b0 = np.int64(data[start])
            if not (i - start == 1 and ((97 <= b0 <= 122) or b0 == 95)):
                starts[n], ends[n], span_rows[n] = start, i, r
                n += 1
            if not compound:
                continue
            ps = core
            for j in range(core, i + 1):
                if j == i or _is_joiner(np.int64(data[j])) or data[j] == 95:
                    if j > ps:
                        single = j - ps == 1 and data[ps] < 0x80
                        digits = True
                        for q in range(ps, j):
                            if not (48 <= data[q] <= 57):
                                digits = False
                                break
                        if not single and not digits:
                            starts[n], ends[n], span_rows[n] = ps, j, r
                            n += 1
                    ps = j + 1
            if i - core > 2 and data[core] == 118 and 48 <= data[core + 1] <= 57 and has_dot:
                starts[n], ends[n], span_rows[n] = core + 1, i, r
                n += 1
    return n


@numba.njit(nogil=True, cache=True)
def _intern(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, span_rows: np.ndarray,
            n_spans: int, stop: np.ndarray, ids: np.ndarray, rows: np.ndarray,
            slots: np.ndarray, first: np.ndarray, j0: int, k: int, ne: int,
            m: int) -> tuple[int, int, int, int]:
    """Give the occurrences from span ``j0`` on their ids until the table would pass half
    load; returns the span it stopped at (``n_spans`` when done) and the counters.

    ``slots`` (open addressing on :func:`_token_hash`) holds, per distinct token seen, all a
    lookup reads in one place: the hash, the first 8 bytes, the first occurrence's start,
    and the token's id in the bucket's vocabulary (ids in first-seen order; 0 in the slot
    for a stop word, id + 1 otherwise) beside its length. So each distinct token is looked up
    in the stop words once, and a token of up to 8 bytes is confirmed without reading the
    text again; a longer one compares its other bytes with its first occurrence's. Ids are
    exact. (With the hash, the entry and its span in three arrays, a lookup touched three
    places: the 1M benchmark's 16 buckets took 0.32-0.37 s to scan, against 0.28-0.32 s
    now, fastest of 5 in interleaved fresh processes.) ``first[id]`` is the first span of
    vocabulary entry ``id``. The lookup is written out here rather
    than in an inlined helper: Numba's inlining of a helper taking the arrays made this loop
    3x slower (measured)."""
    mask = slots.shape[0] - 1
    for j in range(j0, n_spans):
        if 2 * (ne + 1) > slots.shape[0]:
            return j, k, ne, m
        s, e = starts[j], ends[j]
        length = e - s
        pre = _prefix(data, s, length)
        h = _token_hash(data, s, e, pre)
        slot = _slot(h, mask)
        while True:
            packed = slots[slot, 3]
            if packed == 0:
                # The stop words are known by XXH64, computed for new short entries only.
                v = -1 if length <= STOP_MAX_BYTES and _is_stop(
                    stop, xxh64_inline(data, s, e), length) else m
                if v >= 0:
                    first[v, 0] = s
                    first[v, 1] = e
                    m += 1
                slots[slot, 0] = h
                slots[slot, 1] = pre
                slots[slot, 2] = np.uint64(s)
                slots[slot, 3] = (np.uint64(v + 1) << np.uint64(32)) | np.uint64(length)
                ne += 1
                break
            if slots[slot, 0] == h and (packed & _LOW32) == np.uint64(length) \
                    and slots[slot, 1] == pre and (length <= 8 or _same(
                        data, int(slots[slot, 2]) + 8, s + 8, length - 8)):
                v = int(packed >> np.uint64(32)) - 1
                break
            slot = (slot + 1) & mask
        if v >= 0:
            ids[k] = v
            rows[k] = span_rows[j]
            k += 1
    return n_spans, k, ne, m


# Rows are tokenized this many bytes at a time (at least one row), each chunk's spans
# interned before the next chunk is cut: the spans of a chunk (at most one per byte) stay in
# cache and are rewritten in place, instead of 20 bytes per occurrence of the whole bucket
# going out to fresh memory and back. Chunks are driven from Python (see _scan): 128 KiB
# chunks scanned 200k rows in 0.259 s of CPU against 0.267 s for 8 KiB chunks in one jitted
# loop; 8 KiB chunks from Python took 0.331 s (a call per chunk).
SPAN_CHUNK_BYTES = 131072


def _scan(offsets: np.ndarray, data: np.ndarray, stop: np.ndarray, ids: np.ndarray,
          rows: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Tokenize every row; fills ``ids`` and ``rows`` (one entry per token occurrence) and
    returns the occurrence count and the first byte span (start, end) of each id.

    Two passes per chunk of rows, the spans of its occurrences, then their ids: one loop
    doing both ran 3x slower (measured). A text of b bytes has at most b occurrences. The
    chunks are driven from here, not from a jitted loop: a jitted caller is compiled with
    its callees as one unit, and compiling the three together took twice the CPU time of
    compiling each apart (27.2 s against 12.7-14.3 s from an empty cache, busy machine)."""
    n_rows = offsets.shape[0] - 1
    cap_spans = SPAN_CHUNK_BYTES + 1
    starts = np.empty(cap_spans, np.int64)
    ends = np.empty(cap_spans, np.int64)
    span_rows = np.empty(cap_spans, np.int32)
    cap = 1 << 12
    slots = np.zeros((cap, 4), np.uint64)
    first = np.empty((cap // 2, 2), np.int64)
    k, ne, m = 0, 0, 0
    r0 = 0
    while r0 < n_rows:
        # The last row whose end lies within SPAN_CHUNK_BYTES of the chunk's start, and at
        # least one row.
        limit = int(offsets[r0]) + SPAN_CHUNK_BYTES
        r1 = max(r0 + 1, min(int(np.searchsorted(offsets, limit, side="right")) - 1, n_rows))
        need = int(offsets[r1] - offsets[r0]) + 1
        if need > cap_spans:  # one row longer than a chunk
            cap_spans = need
            starts = np.empty(cap_spans, np.int64)
            ends = np.empty(cap_spans, np.int64)
            span_rows = np.empty(cap_spans, np.int32)
        n_spans = _spans(offsets, data, r0, r1, starts, ends, span_rows)
        j = 0
        while True:
            j, k, ne, m = _intern(data, starts, ends, span_rows, n_spans, stop, ids, rows,
                                  slots, first, j, k, ne, m)
            if j >= n_spans:
                break
            slots, first = _grow(slots, first, m, ne + 1)
        r0 = r1
    return k, first[:m, 0].copy(), first[:m, 1].copy()


def load_growth() -> None:
    """Load (or compile) the table's growth, which :func:`_scan` reaches only past 2048
    distinct tokens in a bucket, so a small warm-up bucket may not: for the compile stage
    (:mod:`arrowdedup.pipeline.precompile`)."""
    _grow(np.zeros((8, 4), np.uint64), np.empty((4, 2), np.int64), 0, 8)


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
def row_lengths(rows: np.ndarray, n_rows: int) -> np.ndarray:
    """Token occurrences per row: ``np.bincount(rows, minlength=n_rows)`` (int64), without
    its cast of ``rows`` to a fresh int64 array."""
    out = np.zeros(n_rows, np.int64)
    for r in rows:
        out[r] += 1
    return out


@numba.njit(nogil=True, cache=True)
def place_postings(at: np.ndarray, indptr: np.ndarray, rows: np.ndarray, tf: np.ndarray,
                   first: int, out_rows: np.ndarray, out_tf: np.ndarray) -> None:
    """Copy one bucket's postings into the merged ones: the block of its token ``t`` (rows
    moved by ``first``, the store row of the bucket's row 0) goes to ``at[t]``."""
    for t in range(at.shape[0]):
        d = at[t]
        for k in range(indptr[t], indptr[t + 1]):
            out_rows[d] = rows[k] + first
            out_tf[d] = tf[k]
            d += 1


# Postings are scored in blocks of this many, the blocks spread over Numba's threads.
SCORE_BLOCK = 1 << 16


@numba.njit(nogil=True, cache=True, parallel=True)
def bm25_scores(indptr: np.ndarray, doc_rows: np.ndarray, tf: np.ndarray,
                doc_len: np.ndarray, avg: float, n_docs: int, k1: float, b: float,
                out: np.ndarray) -> None:
    """The Lucene BM25 score of every posting into ``out`` (float32), in float64 then
    float32 (as the NumPy path). ``out`` may be ``tf``'s own buffer viewed as float32: each
    posting's term frequency is read before its score is written over it.

    The length norm of each document and the idf of each token are computed once (the same
    expressions, so the same bits as per posting), then the postings in blocks of
    ``SCORE_BLOCK`` on Numba's threads, each block starting at the token that holds its
    first posting: every score is computed alone, so the bits do not depend on the thread
    count."""
    n_vocab = indptr.shape[0] - 1
    norm = np.empty(doc_len.shape[0], np.float64)
    for d in range(doc_len.shape[0]):
        norm[d] = k1 * ((1.0 - b) + b * doc_len[d] / avg)
    idf = np.empty(n_vocab, np.float32)
    for v in range(n_vocab):
        df = np.float64(indptr[v + 1] - indptr[v])
        idf[v] = np.float32(np.log1p((n_docs - df + 0.5) / (df + 0.5)))
    total = indptr[n_vocab]
    n_blocks = (total + SCORE_BLOCK - 1) // SCORE_BLOCK
    for blk in numba.prange(n_blocks):
        lo = blk * SCORE_BLOCK
        hi = min(lo + SCORE_BLOCK, total)
        v = int(np.searchsorted(indptr, lo, side="right")) - 1
        for j in range(lo, hi):
            while j >= indptr[v + 1]:
                v += 1
            t = np.float64(tf[j])
            out[j] = idf[v] * np.float32(t / (norm[doc_rows[j]] + t))


_STOP: np.ndarray | None = None


def stop_hashes() -> np.ndarray:
    global _STOP
    if _STOP is None:
        _STOP = np.sort(xxh64(pa.array(sorted(STOPWORDS), type=pa.large_string())))
    return _STOP


_ONES = np.uint64(0x0101010101010101)
_HIGH = np.uint64(0x8080808080808080)
_LOWER_BLOCK = 1 << 20  # bytes per parallel task, a multiple of 8


@numba.njit(inline="always")
def _lower_word(w: np.uint64) -> np.uint64:
    """The 8 bytes of ``w`` with ``A``-``Z`` lower-cased (bytes of 0x80 and more unchanged):
    per byte, bit 7 of ``low7 + (0x7F - 0x40)`` says >= 'A' and of ``low7 + (0x7F - 0x5A)``
    says > 'Z', with no carry between bytes (each low 7 bits plus at most 0x3F fits in 8)."""
    low7 = w & ~_HIGH
    ge_a = low7 + np.uint64(0x3F) * _ONES
    gt_z = low7 + np.uint64(0x25) * _ONES
    upper = ge_a & ~gt_z & ~w & _HIGH
    return w | (upper >> np.uint64(2))


@numba.njit(nogil=True, cache=True, parallel=True)
def _ascii_lower(data: np.ndarray, lo: int, hi: int, out: np.ndarray) -> bool:
    """``out[:] = data[lo:hi]`` with ``A``-``Z`` lower-cased, 8 bytes at a time; False
    (``out`` then incomplete) when those bytes hold one outside ASCII. ``out`` is a fresh
    (8-byte aligned) array of ``hi - lo`` bytes."""
    n = hi - lo
    words = out[: n - n % 8].view(np.uint64)
    blocks = (n + _LOWER_BLOCK - 1) // _LOWER_BLOCK
    clean = np.ones(blocks, dtype=np.bool_)
    for k in numba.prange(blocks):
        start = k * _LOWER_BLOCK
        end = min(n, start + _LOWER_BLOCK)
        seen = np.uint64(0)
        i = start
        while i + 8 <= end:
            w = load_u64(data, lo + i)
            seen |= w
            words[i // 8] = _lower_word(w)
            i += 8
        while i < end:
            b = np.uint64(data[lo + i])
            seen |= b
            out[i] = np.uint8(_lower_word(b) & np.uint64(0xFF))
            i += 1
        clean[k] = (seen & _HIGH) == 0
    return bool(clean.all())


def lower(texts: pl.Series) -> pa.Array:
    """:func:`arrowdedup.retrieval.tokens.lowercase` as a ``large_string`` array: for ASCII
    texts (where Unicode lower-casing is ``A``-``Z`` → ``a``-``z``, nothing else) one
    parallel pass over the bytes; otherwise Polars' ``to_lowercase``."""
    arr = texts.cast(pl.String).fill_null("").to_arrow()
    offsets, data = string_buffers(arr)
    lo, hi = int(offsets[0]), int(offsets[-1])
    out = np.empty(hi - lo, dtype=np.uint8)
    if _ascii_lower(data, lo, hi, out):
        return pa.LargeStringArray.from_buffers(
            offsets.shape[0] - 1, pa.py_buffer(offsets - lo if lo else offsets),
            pa.py_buffer(out))
    return lowercase(texts).to_arrow()


def scan(lowered: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """(ids, rows, vocabulary) of a lower-cased string column: for every token occurrence in
    text order its id (int32) and row (int32), and the vocabulary (``large_string``, ids in
    order of first appearance).

    One pass: a text of b bytes has at most b tokens (each token, part and ``v`` variant
    covers bytes no other token of its kind does), so arrays of that length are reserved
    (virtual memory: only the pages written are touched) and trimmed."""
    offsets, data = string_buffers(lowered)
    cap = int(offsets[-1] - offsets[0]) + 1
    ids = np.empty(cap, np.int32)
    rows = np.empty(cap, np.int32)
    n, first_s, first_e = _scan(offsets, data, stop_hashes(), ids, rows)
    # Views, not trimmed copies: the pages past ``n`` were never touched (no memory), and
    # the bucket's postings are laid out from these and then dropped.
    return ids[:n], rows[:n], spans_to_strings(data, first_s, first_e)


def spans_to_strings(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The byte spans as an Arrow ``large_string`` array."""
    offsets, chars = _gather(data, starts, ends)
    return pa.LargeStringArray.from_buffers(starts.shape[0], pa.py_buffer(offsets),
                                            pa.py_buffer(chars))
