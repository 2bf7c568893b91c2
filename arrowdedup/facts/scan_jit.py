"""The fact tokenizer: one Numba pass over the UTF-8 buffer of a text column.

A regex per fact kind costs a pass over the text each, and one alternation of them all makes
the regex engine fall back to its slow path; a hand-written scanner reads each byte once.

For each row it walks whitespace-separated chunks, strips wrapping punctuation, splits a chunk
where a wide script (CJK, kana, Hangul, Indic: characters of three or more UTF-8 bytes) meets a
narrow one, and classifies each piece by its characters (see :mod:`arrowdedup.facts.guard` for the
kinds). Each fact is written as ``(XXH64(normalised bytes) & LOW_BITS) | kind << 60``.
Word lists (negations, opposites, dates, number words, units) are looked up by the XXH64 of
the lower-cased word in sorted tables built once in Python.

The chunk loop also finds the quoted spans (no pass of their own), a piece's character
statistics are counted while its extent is found, and a row's facts are
sorted and made unique as the row ends, so the scan writes the CSR signature column itself.

The scan is a chain of small jitted functions, each compiled and cached on its own: Numba's
compile time grows faster than a function's length, and ``inline="always"`` copies a helper
into every caller before compiling it, so one function of all the rules took minutes.
:func:`_scan` loops over rows; :func:`_row` walks a row's chunks (:func:`chunk_end` finds a
chunk's end and its quoted spans, :func:`quoted_at`; :func:`strip_chunk` its wrapping
punctuation), splits each into pieces (:func:`piece_extent` counts a piece's characters),
writes the common plain word itself (:func:`plain_word`) and hands any other piece to the
handler of its kind: :func:`wide_piece` (list words, :func:`_wide_words`, :func:`_wide_negation`,
:func:`wide_terms`) or, as :func:`narrow_route` says, none (an identifier: URL, flag, path,
...), :func:`number_piece` (:func:`_parse_number`, :func:`_number_fact`) or
:func:`word_piece` (list words, acronyms, names, :func:`hyphen_parts`, negation by affix);
:func:`settle`
writes the piece's own fact and settles a number waiting for its unit, and :func:`end_row`
sorts the row's facts. The handlers share the row's state in one small array (``ST_*``) and
take the word tables, the unit tables and the wide negations as three tuples. The piece
loop stays in :func:`_row`, and the common chunk and word are read there before any call:
a call per piece or chunk, with the tables' arrays as arguments, cost more than reading
most of them. Only leaf helpers of a few lines are ``inline="always"``
(``tests/facts/test_fact_scan.py`` holds both bounds). A rule change stays in one handler, but
Numba's cache is per source file: an edit anywhere here recompiles every function of the
file (tens of CPU seconds, not minutes).
"""

from __future__ import annotations

import numpy as np

from ..arrays.hashing_jit import xxh64_plain as _xxh64_one
from ..jit.runtime import njit, numba
from .scan_facts_jit import (
    R_NUMBER,
    R_WORD,
    alnum,
    cased_run,
    end_row,
    narrow_route,
    number_piece,
    plain_word,
    settle,
    type_name_end,
    word_piece,
)
from .scan_pieces_jit import (
    S_ALPHA,
    S_CHARS,
    S_FIRST,
    S_LOWER,
    S_SECOND,
    S_UPPER,
    S_UPPER_AFTER_LOWER,
    ST_SIZE,
    chunk_end,
    is_marker,
    piece_extent,
    strip_chunk,
    wide_piece,
)
from .scan_text_jit import (
    ASCII_CLASSES,
    C_PUNCT,
    C_SPACE,
    C_WIDE,
    CHUNK_BREAK,
    K_IDENT,
    K_NUMBER,
    KIND_SHIFT,
    LOW,
    ROW_FACTS_PER_BYTE,
    ST_COMMA,
    ST_LOWER_WORDS,
    ST_NOUNS,
    ST_PEND_KIND,
    ST_PEND_NUM,
    ST_SENTENCE_START,
    ST_TITLE_WORDS,
    char_class,
    decode_utf8,
    encode_utf8,
    lower_cp,
    push_fact,
    sign_before_digit,
    wide_full_stop,
    word_index,
)

CHUNK_BREAK[96] = 2
CHUNK_BREAK[34] = 2


@njit(nogil=True, cache=True, _nrt=False)
def _row(data: np.ndarray, s: int, e: int, code: bool, out: np.ndarray, n_out: int,
         bufs: tuple[np.ndarray, ...], st: np.ndarray,
         tables: tuple[tuple[np.ndarray, ...], ...]) -> int:
    """The facts of the row ``data[s:e]`` appended to ``out`` from ``n_out`` on, sorted and
    unique; the new fact count. Walks the whitespace-separated chunks: a code row's chunks are
    identifiers; any other's are split into pieces where a wide script meets a narrow one, at
    '=' and at inner punctuation of wide scripts, and each piece goes to the handler of its
    kind. Only the first piece of a chunk starts a sentence, or one after a wide full stop:
    Chinese and Japanese put no space between a sentence and a name in it
    ("詳細はJavaエージェント"). The piece loop is part of this function: a call per chunk
    with the tables' arrays as arguments cost more than the scan of most chunks."""
    words, units, wide_neg = tables
    row_first = n_out
    st[ST_PEND_NUM] = -1
    st[ST_PEND_KIND] = K_NUMBER
    st[ST_TITLE_WORDS] = 0
    st[ST_LOWER_WORDS] = 0
    st[ST_SENTENCE_START] = 1
    quote_from = s  # quoted spans are looked for from here on
    i = s
    while i < e:
        b0 = data[i]
        if b0 < 0x80:
            if ASCII_CLASSES[b0] == C_SPACE:
                if b0 == 10:
                    st[ST_SENTENCE_START] = 1
                i += 1
                continue
        else:
            cp, ln = decode_utf8(data, i, e)
            if char_class(cp) == C_SPACE:
                i += ln
                continue
        cs = i
        while i < e and data[i] < 0x80 and CHUNK_BREAK[data[i]] == 0:
            i += 1  # the common bytes of a chunk, read before any call
        if i < e and not (data[i] < 0x80 and CHUNK_BREAK[data[i]] == 1):
            i, n_out, quote_from = chunk_end(data, i, e, quote_from, out, n_out, bufs[0])
        ce = i
        ends_sentence = False
        money = False
        if not (alnum(data[cs]) and alnum(data[ce - 1])):
            cs, ce, ends_sentence, money = strip_chunk(data, cs, ce)
        if cs >= ce:
            if ends_sentence:
                st[ST_SENTENCE_START] = 1
            continue
        if is_marker(data, cs, ce):
            continue
        if code:
            n_out = push_fact(out, n_out, _xxh64_one(data, cs, ce), K_IDENT)
            continue
        p = cs
        next_start = st[ST_SENTENCE_START] != 0
        while p < ce:
            cp, ln = decode_utf8(data, p, ce)
            if p > cs and sign_before_digit(cp, data, p, ce):
                # "、#1744", "で$5": a sign after a wide piece, as at a chunk's start.
                money = cp == 36
                p += 1
                cp, ln = decode_utf8(data, p, ce)
            wide = char_class(cp) == C_WIDE
            ps = p
            if not wide and st[ST_PEND_NUM] < 0:
                pe = cased_run(data, p, ce)
                if pe > ps and (pe == ce or data[pe] == 61) and \
                        word_index(data, ps, pe, bufs[0], words[0], words[2]) < 0:
                    # The common piece, read without a call: a word of ASCII letters, lower
                    # case after an optional capital, that no list knows (the fast path below,
                    # for these).
                    p = pe + 1 if pe < ce else pe  # past a '='
                    piece_start = next_start
                    next_start = False
                    n_out = plain_word(data, ps, pe, int(data[ps]), 1 if data[ps] <= 90 else 0,
                                        pe - ps, piece_start, out, n_out, st)
                    continue
            p, stats = piece_extent(data, p, ce, wide)
            pe = p
            if p < ce and ps == pe:
                next_start = next_start or wide_full_stop(cp)
                p += ln  # a lone separator
                continue
            piece_start = next_start
            next_start = False
            if p < ce:
                cp2, ln2 = decode_utf8(data, p, ce)
                if cp2 == 61 or (wide and char_class(cp2) == C_PUNCT):
                    next_start = wide_full_stop(cp2)
                    p += ln2
            n_upper = stats[S_UPPER]
            if not wide and st[ST_PEND_NUM] < 0 and n_upper + stats[S_LOWER] == stats[S_CHARS] \
                    and n_upper <= 1 and stats[S_UPPER_AFTER_LOWER] == 0:
                # Fast path for the most common piece: a word of cased letters, all lower case
                # or with one capital in front, and no number waiting for a unit. None of the
                # checks of the other pieces can fire on it (they need a digit, a '-', '_',
                # '.', '/', ':', an apostrophe or two capitals).
                if word_index(data, ps, pe, bufs[0], words[0], words[2]) < 0:
                    n_out = plain_word(data, ps, pe, stats[S_FIRST], n_upper, stats[S_ALPHA],
                                        piece_start, out, n_out, st)
                    continue
            hash_e = pe
            if wide:
                n_out, kind, use_scratch = wide_piece(data, ps, pe, out, n_out, bufs[0], words,
                                                       wide_neg)
                is_num = False
            else:
                route = narrow_route(data, ps, pe, stats)
                cut = -1
                if route == R_NUMBER:
                    kind, use_scratch, is_num, cut = number_piece(
                        data, ps, pe, stats[S_FIRST], stats[S_SECOND], money,
                        st[ST_COMMA] != 0, bufs[0], bufs[2], units)
                elif route == R_WORD:
                    n_out, kind, use_scratch, is_num = word_piece(
                        data, ps, pe, stats, piece_start, out, n_out, bufs[0], st, words)
                else:
                    kind, use_scratch, is_num = K_IDENT, -1, False
                    hash_e = type_name_end(data, ps, pe, stats)
                if cut >= 0:
                    p = cut + 1  # the rest is read as its own piece
                    pe = cut
            if st[ST_PEND_NUM] < 0 and not is_num:
                if kind != 0:  # what settle does when no number waits or may wait
                    h = _xxh64_one(bufs[0], 0, use_scratch) if use_scratch >= 0 else \
                        _xxh64_one(data, ps, hash_e)
                    n_out = push_fact(out, n_out, h, kind)
            else:
                n_out = settle(data, ps, pe, hash_e, wide, kind, use_scratch, is_num, out,
                                n_out, bufs, st, units)
        st[ST_SENTENCE_START] = 1 if ends_sentence else 0
    return end_row(out, row_first, n_out, bufs[1], st)


@njit(nogil=True, cache=True, _nrt=False)
def _scan(offsets: np.ndarray, data: np.ndarray, flags: tuple[np.ndarray, ...], first: int,
          out: np.ndarray, ends: np.ndarray, n_out: int, bufs: tuple[np.ndarray, ...],
          st: np.ndarray, tables: tuple[tuple[np.ndarray, ...], ...]) -> tuple[int, int]:
    """Facts of rows ``first, first + 1, ...`` appended to ``out`` from ``n_out`` on, each
    row's sorted and unique; ``ends[r]`` is where row ``r``'s facts end. Returns (next row,
    fact count): it stops before a row whose worst case (:data:`ROW_FACTS_PER_BYTE` facts per
    byte) might not fit, so that the caller grows the buffers and calls again from there.
    ``flags`` are the rows' (code, decimal comma, capitalised nouns) flags, ``bufs`` the work
    buffers (scratch, pending number, number parse, unit), ``st`` the row state (``ST_*``),
    ``tables`` the word, unit and wide-negation tables (see :func:`_scan_rows`).

    Compiled without Numba's reference counting (``_nrt=False``), as are the functions it
    calls, and no array is allocated here: with reference counting, the atomic increments of
    array variables took about a third of the scan."""
    code, comma, nouns = flags
    n = offsets.shape[0] - 1
    cap = out.shape[0]
    for r in range(first, n):
        s = offsets[r]
        e = offsets[r + 1]
        if e - s > 1_000_000:
            e = s + 1_000_000  # facts of a huge text beyond 1 MB are not read
        if n_out + ROW_FACTS_PER_BYTE * (e - s) + 16 > cap:
            return r, n_out
        st[ST_COMMA] = 1 if comma[r] else 0
        st[ST_NOUNS] = 1 if nouns[r] else 0
        n_out = _row(data, s, e, code[r], out, n_out, bufs, st, tables)
        ends[r] = n_out
    return n, n_out


@numba.njit(nogil=True, cache=True)
def line_facts(offsets: np.ndarray, data: np.ndarray, rows: np.ndarray, kind: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """One fact of ``kind`` per non-empty line of each row in ``rows`` (ascending): the line
    lower-cased, runs of white space folded to one space, trimmed. Returns (row of each
    fact, facts), in row order."""
    n_lines = 0
    longest = 0
    for r in rows:
        lo, hi = offsets[r], offsets[r + 1]
        longest = max(longest, hi - lo)
        n_lines += 1
        for i in range(lo, hi):
            if data[i] == 10:
                n_lines += 1
    row_of = np.empty(n_lines, dtype=np.int64)
    facts = np.empty(n_lines, dtype=np.uint64)
    # A lower-cased code point is never more than one byte longer than the original.
    scratch = np.empty(2 * longest + 8, dtype=np.uint8)
    bits = np.uint64(kind) << KIND_SHIFT
    k = 0
    for r in rows:
        i, hi = offsets[r], offsets[r + 1]
        w = 0
        pending_space = False
        while i <= hi:
            cp, ln = (10, 1) if i == hi else decode_utf8(data, i, hi)
            if cp == 10:
                if w > 0:
                    row_of[k] = r
                    facts[k] = (_xxh64_one(scratch, 0, w) & LOW) | bits
                    k += 1
                w = 0
                pending_space = False
            elif char_class(cp) == C_SPACE:
                pending_space = w > 0
            else:
                if pending_space:
                    scratch[w] = 32
                    w += 1
                    pending_space = False
                w = encode_utf8(lower_cp(cp), scratch, w)
            i += ln
    return row_of[:k], facts[:k]


def _scan_rows(offsets: np.ndarray, data: np.ndarray, code: np.ndarray, comma: np.ndarray,
               nouns: np.ndarray, tables: tuple[np.ndarray, ...]
               ) -> tuple[np.ndarray, np.ndarray]:
    """CSR signatures (offsets from 0, values) of the rows of ``offsets``: :func:`_scan`
    called again with a grown buffer until every row is read."""
    n = offsets.shape[0] - 1
    cap = max(1024, n * 8)
    out = np.empty(cap, dtype=np.uint64)
    ends = np.zeros(n + 1, dtype=np.int64)
    # Work buffers: scratch, a number waiting for its unit, a number being parsed, a unit.
    bufs = (np.empty(4096, dtype=np.uint8), np.empty(128, dtype=np.uint8),
            np.empty(128, dtype=np.uint8), np.empty(4096, dtype=np.uint8))
    st = np.zeros(ST_SIZE, dtype=np.int64)
    (word_keys, word_values, unit_keys, unit_index, unit_offsets, unit_bytes, wide_neg,
     wide_neg_offsets, word_filter, wide_forms, wide_form_offsets, wide_form_values) = tables
    grouped = ((word_keys, word_values, word_filter),
               (unit_keys, unit_index, unit_offsets, unit_bytes),
               (wide_neg, wide_neg_offsets, wide_forms, wide_form_offsets, wide_form_values))
    row, n_out = 0, 0
    while True:
        # ends[1:] is row r's end at index r + 1: the CSR offsets with a leading 0.
        row, n_out = _scan(offsets, data, (code, comma, nouns), row, out, ends[1:], n_out, bufs,
                           st, grouped)
        if row >= n:
            return ends, out[:n_out]
        need = n_out + ROW_FACTS_PER_BYTE * min(int(offsets[row + 1] - offsets[row]),
                                                1_000_000) + 16
        cap = max(2 * cap, need)
        out = np.concatenate([out[:n_out], np.empty(cap - n_out, dtype=np.uint64)])


def scan(offsets: np.ndarray, data: np.ndarray, code: np.ndarray, comma: np.ndarray,
         nouns: np.ndarray, *tables: np.ndarray, threads: int = 2
         ) -> tuple[np.ndarray, np.ndarray]:
    """CSR fact signatures ``(offsets, values)`` of the rows of ``offsets``: row ``r`` has the
    sorted, unique ``values[offsets[r]:offsets[r + 1]]``. :func:`_scan` runs over row blocks
    in parallel threads (it releases the GIL); blocks are joined in row order, so the result
    does not depend on the thread count."""
    n = offsets.shape[0] - 1
    blocks = max(1, min(threads * 4, n // 2048))
    if blocks == 1:
        return _scan_rows(offsets, data, code, comma, nouns, tables)
    bounds = np.linspace(0, n, blocks + 1).astype(np.int64)

    def run(b: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = int(bounds[b]), int(bounds[b + 1])
        return _scan_rows(offsets[lo : hi + 1], data, code[lo:hi], comma[lo:hi], nouns[lo:hi],
                          tables)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=threads) as pool:
        parts = list(pool.map(run, range(blocks)))
    ends = np.empty(n + 1, dtype=np.int64)
    ends[0] = 0
    base = 0
    for b, (part_ends, values) in enumerate(parts):
        ends[bounds[b] + 1 : bounds[b + 1] + 1] = part_ends[1:] + base
        base += values.shape[0]
    return ends, np.concatenate([p[1] for p in parts])
