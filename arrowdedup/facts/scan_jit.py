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
:func:`_scan` loops over rows; :func:`_row` walks a row's chunks (:func:`_chunk_end` finds a
chunk's end and its quoted spans, :func:`_quoted_at`; :func:`_strip` its wrapping
punctuation), splits each into pieces (:func:`_piece_extent` counts a piece's characters),
writes the common plain word itself (:func:`_plain_word`) and hands any other piece to the
handler of its kind: :func:`_wide_piece` (list words, :func:`_wide_words`, :func:`_wide_negation`,
:func:`_wide_terms`) or, as :func:`_narrow_route` says, none (an identifier: URL, flag, path,
...), :func:`_number_piece` (:func:`_parse_number`, :func:`_number_fact`) or
:func:`_word_piece` (list words, acronyms, names, :func:`_hyphen_parts`, negation by affix);
:func:`_settle`
writes the piece's own fact and settles a number waiting for its unit, and :func:`_end_row`
sorts the row's facts. The handlers share the row's state in one small array (``ST_*``) and
take the word tables, the unit tables and the wide negations as three tuples. The piece
loop stays in :func:`_row`, and the common chunk and word are read there before any call:
a call per piece or chunk, with the tables' arrays as arguments, cost more than reading
most of them. Only leaf helpers of a few lines are ``inline="always"``
(``tests/test_fact_scan.py`` holds both bounds). A rule change stays in one handler, but
Numba's cache is per source file: an edit anywhere here recompiles every function of the
file (tens of CPU seconds, not minutes).
"""

from __future__ import annotations

import numpy as np

from ..arrays.hashing_jit import xxh64_plain as _xxh64_one
from ..jit.runtime import numba

# The top four bits of a value are its kind (facts.KIND_NAMES); the low 60 its hash.
KIND_SHIFT = np.uint64(60)
LOW = np.uint64((1 << 60) - 1)

# Character classes of the scanner.
C_SPACE, C_PUNCT, C_LETTER, C_DIGIT, C_WIDE, C_APOS = 0, 1, 2, 3, 4, 5

# At most this many facts per byte of a row: a piece (one byte or more) yields at most three
# (a waiting number, a word or mention, its own fact), plus one per part of a hyphenated piece
# (a part that states a fact has three letters or more, and a hyphen), and a quoted span (two
# bytes or more) one.
ROW_FACTS_PER_BYTE = 4

# Word-table values: a negative value marks a unit (index into the unit table).
K_NUMBER, K_DATE, K_VERSION, K_IDENT, K_NAME, K_OPPOSITE, K_NEGATION = 1, 2, 3, 4, 5, 6, 7


@numba.njit(inline="always")
def _decode(data: np.ndarray, i: int, end: int) -> tuple[int, int]:
    """(code point, byte length) at ``i``; malformed bytes read as one U+FFFD each."""
    b0 = int(data[i])
    if b0 < 0x80:
        return b0, 1
    if b0 >= 0xC0 and b0 < 0xE0 and i + 1 < end:
        return ((b0 & 0x1F) << 6) | (int(data[i + 1]) & 0x3F), 2
    if b0 >= 0xE0 and b0 < 0xF0 and i + 2 < end:
        return ((b0 & 0x0F) << 12) | ((int(data[i + 1]) & 0x3F) << 6) | (
            int(data[i + 2]) & 0x3F), 3
    if b0 >= 0xF0 and i + 3 < end:
        return ((b0 & 0x07) << 18) | ((int(data[i + 1]) & 0x3F) << 12) | (
            (int(data[i + 2]) & 0x3F) << 6) | (int(data[i + 3]) & 0x3F), 4
    return 0xFFFD, 1


def _ascii_classes() -> np.ndarray:
    table = np.full(128, C_PUNCT, dtype=np.int8)
    for c in (9, 10, 11, 12, 13, 32):
        table[c] = C_SPACE
    table[48:58] = C_DIGIT
    table[65:91] = C_LETTER
    table[97:123] = C_LETTER
    table[39] = C_APOS
    return table


_ASCII = _ascii_classes()
# The chunk loop's view of an ASCII byte: 0 part of a chunk, 1 white space, 2 a quote that may
# open a quoted span (backtick, double quote).
_CHUNK = np.where(_ASCII == C_SPACE, 1, 0).astype(np.int8)
_CHUNK[96] = 2
_CHUNK[34] = 2


@numba.njit(inline="always")
def _cls(cp: int) -> int:
    if cp < 0x80:
        return int(_ASCII[cp])
    if cp == 0xA0 or cp == 0x202F or cp == 0x3000 or (0x2000 <= cp <= 0x200B):
        return C_SPACE
    if cp == 0x2019:
        return C_APOS
    if cp < 0xC0 or cp == 0xD7 or cp == 0xF7:
        return C_PUNCT
    if (0x2010 <= cp <= 0x206F) or (0x3001 <= cp <= 0x303F) or (0xFF01 <= cp <= 0xFF0F) or (
            0xFF1A <= cp <= 0xFF20) or (0x2190 <= cp <= 0x2BFF) or (0xFE30 <= cp <= 0xFE4F):
        return C_PUNCT
    if cp < 0x800:
        return C_LETTER
    return C_WIDE


@numba.njit(inline="always")
def _ext_a_case(cp: int) -> int:
    """Latin Extended-A (U+0100-U+017F): 1 for a capital, 2 for a small letter. Pairs
    alternate capital first, except where a lone letter shifts them: from U+0139 (Ĺ ... Ł ł
    Ń ń, Polish and Slovak) and from U+0179 (Ź ź Ż ż Ž ž) the capital is odd."""
    if cp == 0x138 or cp == 0x149 or cp == 0x17F:
        return 2  # ĸ, ŉ, ſ: small letters without a capital
    if cp == 0x178:
        return 1  # Ÿ (its small letter is ÿ, U+00FF)
    odd_upper = (0x139 <= cp <= 0x148) or (0x179 <= cp <= 0x17E)
    return 1 if (cp % 2 == 1) == odd_upper else 2


@numba.njit(inline="always")
def _is_upper(cp: int) -> bool:
    if cp < 0x80:
        return 65 <= cp <= 90
    if 0xC0 <= cp <= 0xDE:
        return cp != 0xD7
    if 0x100 <= cp <= 0x17F:
        return _ext_a_case(cp) == 1
    if 0x391 <= cp <= 0x3A9:
        return True
    return 0x400 <= cp <= 0x42F


@numba.njit(inline="always")
def _is_lower(cp: int) -> bool:
    if cp < 0x80:
        return 97 <= cp <= 122
    if 0xDF <= cp <= 0xFF:
        return cp != 0xF7
    if 0x100 <= cp <= 0x17F:
        return _ext_a_case(cp) == 2
    if 0x3AC <= cp <= 0x3CE:
        return True
    return 0x430 <= cp <= 0x45F


@numba.njit(inline="always")
def _lower(cp: int) -> int:
    if 65 <= cp <= 90:
        return cp + 32
    if 0xC0 <= cp <= 0xDE and cp != 0xD7:
        return cp + 32
    if 0x100 <= cp <= 0x17F and _ext_a_case(cp) == 1:
        return 0xFF if cp == 0x178 else cp + 1
    if 0x391 <= cp <= 0x3A9:
        return cp + 32
    if 0x410 <= cp <= 0x42F:
        return cp + 32
    if 0x400 <= cp <= 0x40F:
        return cp + 80
    return cp


@numba.njit(inline="always")
def _encode(cp: int, out: np.ndarray, w: int) -> int:
    if cp < 0x80:
        out[w] = cp
        return w + 1
    if cp < 0x800:
        out[w] = 0xC0 | (cp >> 6)
        out[w + 1] = 0x80 | (cp & 0x3F)
        return w + 2
    if cp < 0x10000:
        out[w] = 0xE0 | (cp >> 12)
        out[w + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[w + 2] = 0x80 | (cp & 0x3F)
        return w + 3
    out[w] = 0xF0 | (cp >> 18)
    out[w + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[w + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[w + 3] = 0x80 | (cp & 0x3F)
    return w + 4


@numba.njit(inline="always")
def find(values: np.ndarray, lo: int, hi: int, x: np.uint64) -> int:
    """Index of ``x`` in the sorted ``values[lo:hi]`` (binary search), or -1."""
    while lo < hi:
        mid = (lo + hi) >> 1
        v = values[mid]
        if v == x:
            return mid
        if v < x:
            lo = mid + 1
        else:
            hi = mid
    return -1


@numba.njit(inline="always")
def _lookup(keys: np.ndarray, h: np.uint64) -> int:
    return find(keys, 0, keys.shape[0], h)


@numba.njit(inline="always")
def _lower_into(data: np.ndarray, i: int, e: int, scratch: np.ndarray, w: int) -> int:
    """Append the lower-cased bytes ``data[i:e]`` to ``scratch`` from ``w`` on; returns the
    new end (a text longer than the scratch is cut: no word of any list is that long)."""
    limit = scratch.shape[0] - 4
    while i < e and w < limit:
        b0 = data[i]
        if b0 < 0x80:
            scratch[w] = b0 + 32 if 65 <= b0 <= 90 else b0
            w += 1
            i += 1
            continue
        cp, ln = _decode(data, i, e)
        w = _encode(_lower(cp), scratch, w)
        i += ln
    return w


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _lower_hash(data: np.ndarray, s: int, e: int, scratch: np.ndarray) -> np.uint64:
    """XXH64 of the lower-cased bytes (a piece longer than the scratch is hashed as its
    prefix)."""
    return _xxh64_one(scratch, 0, _lower_into(data, s, e, scratch, 0))


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _title_hash(data: np.ndarray, s: int, e: int, scratch: np.ndarray) -> np.uint64:
    """XXH64 of the word with its first letter as written and the rest lower-cased: an
    acronym ("WARNING", "JSON") is hashed as the capitalised word ("Warning", "Json"), so
    the same word capitalised in the other segment (a mention or a name) covers it."""
    cp, ln = _decode(data, s, e)
    w = _lower_into(data, s + ln, e, scratch, _encode(cp, scratch, 0))
    return _xxh64_one(scratch, 0, w)


@numba.njit(inline="always")
def _sign_before_digit(cp: int, data: np.ndarray, i: int, e: int) -> bool:
    """``cp`` at byte ``i`` is a '#', '~' or '$' in front of a digit ("#123", "~26%", "$5"):
    the number is the fact, not the sign."""
    return (cp == 35 or cp == 126 or cp == 36) and i + 1 < e and 48 <= data[i + 1] <= 57


@numba.njit(inline="always")
def _wide_full_stop(cp: int) -> bool:
    """。！？: the end of a Chinese or Japanese sentence."""
    return cp == 0x3002 or cp == 0xFF01 or cp == 0xFF1F


@numba.njit(inline="always")
def _push(out: np.ndarray, n_out: int, h: np.uint64, kind: int) -> int:
    """Append fact ``(h, kind)``; :func:`_scan` keeps room for a row's worst case before it
    reads the row."""
    out[n_out] = (h & LOW) | (np.uint64(kind) << KIND_SHIFT)
    return n_out + 1


@numba.njit(inline="always")
def _lower_byte(b: int) -> int:
    return b + 32 if 65 <= b <= 90 else b


@numba.njit(inline="always")
def _word_index(data: np.ndarray, s: int, e: int, scratch: np.ndarray, word_keys: np.ndarray,
                word_filter: np.ndarray) -> int:
    """Index of the lower-cased word ``data[s:e]`` in the word table, or -1. Most words are in
    no list: filters reject them before any hashing, bit 1 of ``word_filter`` on (length, first
    byte, last byte), bit 2 on (length, second byte, last but one), the latter only where both
    bytes are ASCII (there lower-casing maps a byte to a byte)."""
    length = e - s
    if length >= word_filter.shape[0] or not (word_filter[
            length, _lower_byte(int(data[s])), _lower_byte(int(data[e - 1]))] & 1):
        return -1
    if length >= 2:
        b1 = int(data[s + 1])
        b2 = int(data[e - 2])
        if b1 < 0x80 and b2 < 0x80 and not (word_filter[
                length, _lower_byte(b1), _lower_byte(b2)] & 2):
            return -1
    return _lookup(word_keys, _lower_hash(data, s, e, scratch))


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _number_word_digits(value: int, out: np.ndarray) -> int:
    """Write a number word's value into ``out`` in decimal digits, as a number in digits is
    hashed; the digit count."""
    nd = 0
    while True:
        out[nd] = 48 + value % 10
        nd += 1
        value //= 10
        if value == 0:
            break
    for z in range(nd // 2):
        t = out[z]
        out[z] = out[nd - 1 - z]
        out[nd - 1 - z] = t
    return nd


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _push_number_word(out: np.ndarray, n_out: int, value: int, scratch: np.ndarray) -> int:
    nd = _number_word_digits(value, scratch)
    return _push(out, n_out, _xxh64_one(scratch, 0, nd), K_NUMBER)


@numba.njit(inline="always")
def _is_one(data: np.ndarray, s: int, e: int) -> bool:
    """``data[s:e]`` is "one" in any case (no number word alone: "one of the ..." is no
    number, but the units of "twenty-one" are)."""
    return e - s == 3 and (data[s] | 32) == 111 and (data[s + 1] | 32) == 110 and \
        (data[s + 2] | 32) == 101


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _hyphen_parts(data: np.ndarray, s: int, e: int, out: np.ndarray, n_out: int,
                  scratch: np.ndarray, word_keys: np.ndarray, word_values: np.ndarray,
                  word_filter: np.ndarray) -> int:
    """The facts of the parts of the hyphenated word ``data[s:e]`` that no word list knows
    whole: a number word, an opposite or a date among its parts is stated as the part alone
    would state it ("four-stage" the number 4 as "four stage" does, "server-side" the opposite
    "server", "read-only" the opposite "read"), and tens joined to units are one number
    ("twenty-five" is 25, as "25" is). A negation word is not ("no-op", "non-empty" negate
    nothing of the sentence)."""
    tens = -1  # a tens word ("twenty") waiting for the units that may follow it
    q = s
    while q < e:
        r = q
        while r < e and data[r] != 45:
            r += 1
        if r > q and (q > s or r < e):
            value = -1
            kind = 0
            val = np.uint64(0)
            idx = _word_index(data, q, r, scratch, word_keys, word_filter)
            if idx >= 0:
                val = word_values[idx]
                kind = int(val >> KIND_SHIFT)
                if kind == 0:
                    value = int(val & np.uint64(0xFFFFFFFF))
            elif tens >= 0 and _is_one(data, q, r):
                value = 1
            if tens >= 0:
                if 1 <= value <= 9:
                    n_out = _push_number_word(out, n_out, tens + value, scratch)
                    tens = -1
                    q = r + 1
                    continue
                n_out = _push_number_word(out, n_out, tens, scratch)
                tens = -1
            if value >= 20 and value <= 90 and value % 10 == 0:
                tens = value
            elif value >= 0:
                n_out = _push_number_word(out, n_out, value, scratch)
            elif idx >= 0 and kind != K_NEGATION:
                n_out = _push(out, n_out, val, kind)
        q = r + 1
    if tens >= 0:
        n_out = _push_number_word(out, n_out, tens, scratch)
    return n_out


@numba.njit(inline="always")
def _leading(n_chars: int, cp: int, first: int, second: int, third: int
             ) -> tuple[int, int, int]:
    """A piece's first three code points, once ``cp`` (its character number ``n_chars``) is
    read: the classification looks at nothing further in."""
    if n_chars == 0:
        return cp, second, third
    if n_chars == 1:
        return first, cp, third
    if n_chars == 2:
        return first, second, cp
    return first, second, third


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _is_initials(data: np.ndarray, s: int, e: int) -> bool:
    """``e.g``, ``U.S``, ``i.e``: every dot-separated part is one letter."""
    run = 0
    i = s
    while i < e:
        cp, ln = _decode(data, i, e)
        if cp == 46:
            if run != 1:
                return False
            run = 0
        else:
            run += 1
        i += ln
    return run <= 1


@numba.njit(inline="always")
def _opens_quote(cp: int) -> bool:
    """Can a quoted span start at ``cp`` (backtick, straight, curly or CJK quotes, guillemet)?"""
    return cp == 96 or cp == 34 or cp == 0x201C or cp == 0xAB or cp == 0x201E or cp == 0x300C


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _quoted_at(data: np.ndarray, i: int, e: int, out: np.ndarray, n_out: int,
               scratch: np.ndarray) -> tuple[int, int]:
    """A backticked or quoted span opening at byte ``i`` (a code point for which
    :func:`_opens_quote` holds) of a row ending at ``e``: its content is one identifier.
    Returns (fact count, byte after the closing quote), or (fact count, -1) without a close
    in reach. Spans do not nest: the chunk loop of :func:`_chunk_end` looks for the next opener from
    the byte after a close."""
    cp, ln = _decode(data, i, e)
    close = -1
    limit = 0
    if cp == 96:
        close = 96
        limit = 80
    elif cp == 34:
        close = 34
        limit = 60
    elif cp == 0x201C:
        close = 0x201D
        limit = 60
    elif cp == 0xAB:
        close = 0xBB
        limit = 60
    elif cp == 0x201E:
        close = 0x201C
        limit = 60
    elif cp == 0x300C:
        close = 0x300D
        limit = 60
    if close < 0:
        return n_out, -1
    j = i + ln
    found = -1
    while j < e and j - i <= limit + 4:
        cq, lq = _decode(data, j, e)
        if cq == 10:
            break
        if cq == close or (close == 0x201C and cq == 0x201D):
            found = j
            break
        j += lq
    if found < 0:
        return n_out, -1
    # Content with runs of white space folded to one space, trimmed.
    w = 0
    k = i + ln
    pending_space = False
    while k < found and w < 4000:
        ck, lk = _decode(data, k, e)
        if _cls(ck) == C_SPACE:
            pending_space = w > 0
        else:
            if pending_space:
                scratch[w] = 32
                w += 1
                pending_space = False
            for q in range(lk):
                scratch[w] = data[k + q]
                w += 1
        k += lk
    if w > 0:
        h = _xxh64_one(scratch, 0, w)
        n_out = _push(out, n_out, h, K_IDENT)
    return n_out, found + (1 if close < 0x80 else (2 if close < 0x800 else 3))


W_OTHER, W_KANA, W_HAN, W_HANGUL, W_KATAKANA = 0, 1, 2, 3, 4


@numba.njit(inline="always")
def _is_han_particle(cp: int) -> bool:
    """的 吗 呢 吧 和 与 及 或: Chinese function characters, which Japanese writes in hiragana.
    A pair with one of them is no term: "链路的" and "链路功能的" say the same 链路 (a reader
    judged such definitions genuine duplicates that the pairs 路的 and 能的 kept apart)."""
    return cp == 0x7684 or cp == 0x5417 or cp == 0x5462 or cp == 0x5427 or cp == 0x548C \
        or cp == 0x4E0E or cp == 0x53CA or cp == 0x6216


@numba.njit(inline="always")
def _wide_class(cp: int) -> int:
    """The script of a wide code point, for :func:`_wide_terms`."""
    if 0x3040 <= cp <= 0x309F:
        return W_KANA  # hiragana: particles and endings, which join the terms
    if (0x30A1 <= cp <= 0x30FA) or cp == 0x30FC or (0xFF66 <= cp <= 0xFF9F) \
            or (0x31F0 <= cp <= 0x31FF):
        return W_KATAKANA
    if _is_han_particle(cp):
        return W_KANA  # a Chinese particle or conjunction joins terms, as hiragana does
    if (0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or (0xF900 <= cp <= 0xFAFF) \
            or (0x20000 <= cp <= 0x3FFFF):
        return W_HAN
    if (0xAC00 <= cp <= 0xD7AF) or (0x1100 <= cp <= 0x11FF) or (0x3130 <= cp <= 0x318F):
        return W_HANGUL
    if cp == 0x30FB:
        return W_KANA  # the katakana middle dot separates two terms
    return W_OTHER


@numba.njit(inline="always")
def _is_han_negation(cp: int) -> bool:
    """不 没 沒 未 無 无 非 别: a negation fact of their own (``_CJK_NEGATIONS``), so the
    term pairs read through them ("不支持" and "支持" share 支持)."""
    return cp == 0x4E0D or cp == 0x6CA1 or cp == 0x6C92 or cp == 0x672A or cp == 0x7121 \
        or cp == 0x65E0 or cp == 0x975E or cp == 0x522B


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _wide_terms(data: np.ndarray, ps: int, pe: int, out: np.ndarray, n_out: int,
                scratch: np.ndarray) -> int:
    """The terms of a wide piece (a run of scripts without case and, for Chinese and
    Japanese, without spaces between words), each an identifier: every pair of adjacent
    Han characters or Hangul syllables, every katakana word (Japanese writes loanwords and
    technical terms in katakana: エクスポーター, トレース) and every word of another
    such script (Bengali, Devanagari, Thai, ...), of two characters or more. Capitals
    mark names in Latin text; these scripts have none, and the bundled embedders, trained on
    English, place unrelated texts in them close together (measured on the shared corpus:
    most cosine merges of Japanese, Chinese, Korean and Bengali paragraphs joined different
    texts), so the guard has only their words to go by. Hiragana (particles and endings)
    separate terms and are no facts."""
    i = ps
    run_s = ps  # start of the current run
    run_chars = 0
    run_cls = -1
    prev_s = ps  # the previous character of the run: its bytes [prev_s, prev_e)
    prev_e = ps
    while True:
        if i < pe:
            cp, ln = _decode(data, i, pe)
            c = _wide_class(cp)
            if c == W_HAN and run_cls == W_HAN and _is_han_negation(cp):
                i += ln  # read through: the pair spans it
                continue
        else:
            ln = 0
            c = -2
        if c != run_cls or c == W_KANA:
            # The run [run_s, i) ends.
            if (run_chars >= 2 and (run_cls == W_KATAKANA or run_cls == W_OTHER)) or \
                    (run_chars == 1 and run_cls == W_HAN):
                # A lone Han character between kana is a word of its own (何, 他, 例).
                n_out = _push(out, n_out, _xxh64_one(data, run_s, i), K_IDENT)
            run_s = i
            run_chars = 0
            run_cls = c
        if i >= pe:
            return n_out
        if (c == W_HAN or c == W_HANGUL) and run_chars >= 1:
            w = 0
            for q in range(prev_s, prev_e):
                scratch[w] = data[q]
                w += 1
            for q in range(i, i + ln):
                scratch[w] = data[q]
                w += 1
            n_out = _push(out, n_out, _xxh64_one(scratch, 0, w), K_IDENT)
        prev_s = i
        prev_e = i + ln
        run_chars += 1
        i += ln


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _sort_unique(out: np.ndarray, lo: int, hi: int) -> int:
    """Sort ``out[lo:hi]`` and drop repeats in place; returns the new end. Rows hold a
    handful of facts (insertion sort); a long row is Shell-sorted first."""
    if hi - lo > 32:
        gap = 1
        while gap < (hi - lo) // 3:
            gap = 3 * gap + 1
        while gap > 1:
            gap //= 3
            for i in range(lo + gap, hi):
                x = out[i]
                k = i
                while k - gap >= lo and out[k - gap] > x:
                    out[k] = out[k - gap]
                    k -= gap
                out[k] = x
    w = lo
    for i in range(lo, hi):
        x = out[i]
        k = w
        while k > lo and out[k - 1] > x:
            k -= 1
        if not (k > lo and out[k - 1] == x):
            for z in range(w, k, -1):
                out[z] = out[z - 1]
            out[k] = x
            w += 1
    return w


# The row state the handlers share, one int64 array per scanning thread: a number in
# ``num_buf`` waiting for a unit word (its length, or -1, and its kind), the Title Case counts,
# the row's language flags, and whether the next chunk starts a sentence. Flags passed as
# arguments instead would reach a handler as the literal ``True`` of their first assignment
# while Numba infers the caller's types, and Numba would compile the handler twice, once for
# that literal.
(ST_PEND_NUM, ST_PEND_KIND, ST_TITLE_WORDS, ST_LOWER_WORDS, ST_COMMA, ST_NOUNS,
 ST_SENTENCE_START) = range(7)
ST_SIZE = 7

# A narrow piece's character statistics, as :func:`_piece_extent` returns them (one tuple).
(S_UPPER, S_LOWER, S_DIGIT, S_ALPHA, S_CHARS, S_UPPER_AFTER_LOWER, S_LEAD_UPPER, S_US, S_DOT,
 S_SLASH, S_DASH, S_FIRST, S_SECOND, S_THIRD) = range(14)


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _chunk_end(data: np.ndarray, i: int, e: int, quote_from: int, out: np.ndarray, n_out: int,
               scratch: np.ndarray) -> tuple[int, int, int]:
    """The end of the chunk from byte ``i`` (the next white space), with the facts of the
    quoted spans that open in it at or after ``quote_from``. Returns (chunk end, fact count,
    where quoted spans are looked for next)."""
    while i < e:
        b0 = data[i]
        if b0 < 0x80:
            t = _CHUNK[b0]
            if t == 0:
                i += 1
                continue
            if t == 1:
                break
            if i >= quote_from:
                n_out, after = _quoted_at(data, i, e, out, n_out, scratch)
                if after >= 0:
                    quote_from = after
            i += 1
            continue
        cp, ln = _decode(data, i, e)
        if _cls(cp) == C_SPACE:
            break
        if i >= quote_from and _opens_quote(cp):
            n_out, after = _quoted_at(data, i, e, out, n_out, scratch)
            if after >= 0:
                quote_from = after
        i += ln
    return i, n_out, quote_from


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _strip(data: np.ndarray, cs: int, ce: int) -> tuple[int, int, bool, bool]:
    """Chunk ``[cs, ce)`` without its wrapping punctuation (never a leading '-': flags and
    negative numbers). Returns (start, end, whether a stripped mark ends a sentence, whether
    the chunk's number follows a "$": an amount, never a version). Most chunks begin and end
    with an ASCII letter or digit: that ends a strip loop before any decoding."""
    ends_sentence = False
    money = False
    while cs < ce:
        b0 = int(data[cs])
        if b0 < 0x80:
            c = int(_ASCII[b0])
            if c == C_LETTER or c == C_DIGIT:
                break
            cp, ln = b0, 1
        else:
            cp, ln = _decode(data, cs, ce)
            c = _cls(cp)
        if _sign_before_digit(cp, data, cs, ce):
            money = cp == 36
            cs += 1
            continue
        if (c == C_PUNCT or c == C_APOS) and cp != 45 and cp != 46 and cp != 47 \
                and cp != 126 and cp != 36 and cp != 64 and cp != 35:
            cs += ln
        else:
            break
    while ce > cs:
        b = ce - 1
        b0 = int(data[b])
        if b0 < 0x80:
            c = int(_ASCII[b0])
            if c == C_LETTER or c == C_DIGIT:
                break
            cp = b0
        else:
            # Step back one code point.
            while b > cs and (int(data[b]) & 0xC0) == 0x80:
                b -= 1
            cp, ln = _decode(data, b, ce)
            c = _cls(cp)
        if (c == C_PUNCT or c == C_APOS) and cp != 47 and cp != 37 and cp != 45:
            if cp == 46 or cp == 33 or cp == 63 or cp == 58 or cp == 59 or cp == 0x3002:
                ends_sentence = True
            ce = b
        else:
            break
    return cs, ce, ends_sentence, money


@numba.njit(inline="always")
def _is_marker(data: np.ndarray, cs: int, ce: int) -> bool:
    """Markdown markers, which keep the sentence start: '#', '>', '*', '-', '+', '|' runs."""
    for k in range(cs, ce):
        b0 = int(data[k])
        if not (b0 == 35 or b0 == 62 or b0 == 42 or b0 == 45 or b0 == 43 or b0 == 124):
            return False
    return True


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _piece_extent(data: np.ndarray, p: int, ce: int, wide: bool
                  ) -> tuple[int, tuple[int, ...]]:
    """The end of the piece from byte ``p`` of a chunk ending at ``ce`` and, for a narrow
    piece, its character statistics (positions ``S_*``), counted as its extent is found. A
    wide piece ends at any other class (wide punctuation is C_PUNCT), a narrow one at '=' or
    a wide character (letter or punctuation)."""
    n_upper = 0
    n_lower = 0
    n_digit = 0
    n_alpha = 0
    n_chars = 0
    upper_after_lower = False
    lead_upper = 0
    still_lead = True
    has_us = False
    has_dot = False
    has_slash = False
    has_dash = False
    prev_lower = False
    first_cp = -1
    second_cp = -1
    third_cp = -1
    if wide:
        while p < ce:
            cp, ln = _decode(data, p, ce)
            if _cls(cp) != C_WIDE:
                break
            p += ln
    while not wide and p < ce:
        b0 = data[p]
        if b0 < 0x80:
            cq = int(b0)
            if 97 <= cq <= 122:
                # A lowercase letter, most bytes of a text: tested first.
                first_cp, second_cp, third_cp = _leading(
                    n_chars, cq, first_cp, second_cp, third_cp)
                n_chars += 1
                n_alpha += 1
                n_lower += 1
                prev_lower = True
                still_lead = False
                p += 1
                continue
            if cq == 61:
                break
            first_cp, second_cp, third_cp = _leading(
                n_chars, cq, first_cp, second_cp, third_cp)
            n_chars += 1
            c = _ASCII[cq]
            if c == C_LETTER:
                n_alpha += 1
                n_upper += 1  # the lowercase letters were taken above
                if prev_lower:
                    upper_after_lower = True
                if still_lead:
                    lead_upper += 1
                prev_lower = False
            elif c == C_DIGIT:
                n_digit += 1
                prev_lower = False
                still_lead = False
            else:
                still_lead = False
                prev_lower = False
                if cq == 95:
                    has_us = True
                elif cq == 46:
                    has_dot = True
                elif cq == 47:
                    has_slash = True
                elif cq == 45:
                    has_dash = True
            p += 1
            continue
        # A character of two or more bytes: never white space ('=', digits, '_', '.' and '/'
        # are ASCII), and a wide one ends the piece, letter or punctuation: the fullwidth
        # colon of "TracerProvider：链路" ends the name as the ASCII one would end a chunk.
        cq, lq = _decode(data, p, ce)
        c = _cls(cq)
        if c == C_WIDE or (c == C_PUNCT and lq >= 3):
            break
        first_cp, second_cp, third_cp = _leading(n_chars, cq, first_cp, second_cp, third_cp)
        n_chars += 1
        if c == C_LETTER:
            n_alpha += 1
            if _is_upper(cq):
                n_upper += 1
                if prev_lower:
                    upper_after_lower = True
                if still_lead:
                    lead_upper += 1
                prev_lower = False
            else:
                if _is_lower(cq):
                    n_lower += 1
                prev_lower = True
                still_lead = False
        else:
            still_lead = False
            prev_lower = False
        p += lq
    return p, (n_upper, n_lower, n_digit, n_alpha, n_chars, int(upper_after_lower), lead_upper,
               int(has_us), int(has_dot), int(has_slash), int(has_dash), first_cp, second_cp,
               third_cp)


@numba.njit(inline="always")
def _write_not(scratch: np.ndarray) -> int:
    """A negation's normalised form, "not", in ``scratch``; its length."""
    scratch[0] = 110
    scratch[1] = 111
    scratch[2] = 116
    return 3


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _wide_negation(data: np.ndarray, ps: int, pe: int, wide_neg: np.ndarray,
                   wide_neg_offsets: np.ndarray) -> bool:
    """Does the wide piece ``[ps, pe)`` hold a negation of an unsegmented script (Chinese,
    Japanese, Korean: ``wide_neg``, the UTF-8 forms one after another)?"""
    for t in range(wide_neg_offsets.shape[0] - 1):
        if _holds(data, ps, pe, wide_neg, wide_neg_offsets[t], wide_neg_offsets[t + 1]):
            return True
    return False


@numba.njit(inline="always")
def _holds(data: np.ndarray, ps: int, pe: int, forms: np.ndarray, a0: int, a1: int) -> bool:
    """Do the bytes ``[ps, pe)`` of ``data`` hold ``forms[a0:a1]`` anywhere?"""
    width = a1 - a0
    q = ps
    while q + width <= pe:
        same = True
        for z in range(width):
            if data[q + z] != forms[a0 + z]:
                same = False
                break
        if same:
            return True
        q += 1
    return False


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _wide_words(data: np.ndarray, ps: int, pe: int, forms: np.ndarray, form_offsets: np.ndarray,
                form_values: np.ndarray, out: np.ndarray, n_out: int) -> int:
    """The facts of the list words of unsegmented scripts that the wide piece ``[ps, pe)``
    holds anywhere (``forms``, the UTF-8 forms one after another, each with its fact in
    ``form_values``): "すべての" and "所有" state "all" inside a run without spaces."""
    for t in range(form_offsets.shape[0] - 1):
        if _holds(data, ps, pe, forms, form_offsets[t], form_offsets[t + 1]):
            n_out = _push(out, n_out, form_values[t], int(form_values[t] >> KIND_SHIFT))
    return n_out


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _wide_piece(data: np.ndarray, ps: int, pe: int, out: np.ndarray, n_out: int,
                scratch: np.ndarray, words: tuple[np.ndarray, ...],
                wide_neg: tuple[np.ndarray, ...]) -> tuple[int, int, int]:
    """The facts of the wide piece ``[ps, pe)``: a word of a list, its terms
    (:func:`_wide_terms`) and a negation. Returns (fact count, kind of the piece's own fact,
    its length in ``scratch``), the kind 0 for none."""
    word_keys, word_values, word_filter = words
    kind = 0
    use_scratch = -1
    idx = _word_index(data, ps, pe, scratch, word_keys, word_filter)
    if idx >= 0 and word_values[idx] >> KIND_SHIFT != 0:
        # Word-table values are whole fact hashes.
        n_out = _push(out, n_out, word_values[idx], int(word_values[idx] >> KIND_SHIFT))
    # The terms reuse ``scratch``, so they come first: the negation's fact is hashed from it
    # afterwards, and must read "not" (before rules 18.0 it read the last term's bytes, so
    # 不支持 and 支持しない stated different negations).
    n_out = _wide_terms(data, ps, pe, out, n_out, scratch)
    n_out = _wide_words(data, ps, pe, wide_neg[2], wide_neg[3], wide_neg[4], out, n_out)
    if _wide_negation(data, ps, pe, wide_neg[0], wide_neg[1]):
        kind = K_NEGATION
        use_scratch = _write_not(scratch)
    return n_out, kind, use_scratch


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _parse_number(data: np.ndarray, q: int, pe: int, parse_buf: np.ndarray, w: int
                  ) -> tuple[int, int, int, int, int, int, int, bool]:
    """Read the digits from byte ``q``: groups of digits split by single '.', ',' or ':',
    copied to ``parse_buf`` from ``w`` on. Returns (bytes in ``parse_buf``, byte after the
    number, separators, dots, commas, colons, length of the first group, whether a group after
    a separator is not 3 digits long)."""
    groups = 0
    dots = 0
    commas = 0
    colons = 0
    first_len = 0
    bad_group = False
    cur = 0
    while q < pe and w < 60:
        b0 = int(data[q])
        if 48 <= b0 <= 57:
            parse_buf[w] = b0
            w += 1
            cur += 1
            q += 1
        elif (b0 == 46 or b0 == 44 or b0 == 58) and q + 1 < pe and \
                48 <= int(data[q + 1]) <= 57:
            if groups == 0:
                first_len = cur
            elif cur != 3:
                bad_group = True
            groups += 1
            cur = 0
            if b0 == 46:
                dots += 1
            elif b0 == 44:
                commas += 1
            else:
                colons += 1
            parse_buf[w] = b0
            w += 1
            q += 1
        else:
            break
    if groups == 0:
        first_len = cur
    elif cur != 3:
        bad_group = True
    return w, q, groups, dots, commas, colons, first_len, bad_group


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _normalise_number(parse_buf: np.ndarray, w: int, thousands: int, decimal: int,
                      scratch: np.ndarray) -> int:
    """The number of ``parse_buf[:w]`` into ``scratch``: thousands separators dropped, a
    decimal comma made a point, the leading zeros of an integer dropped. Its length."""
    z2 = 0
    saw_point = False
    for z in range(w):
        b0 = parse_buf[z]
        if thousands != 0 and b0 == thousands:
            continue
        if decimal != 0 and b0 == decimal:
            scratch[z2] = 46
            saw_point = True
        else:
            if b0 == 46:
                saw_point = True
            scratch[z2] = b0
        z2 += 1
    if not saw_point:
        lead = 1 if (z2 > 0 and scratch[0] == 45) else 0
        zs = lead
        while zs < z2 - 1 and scratch[zs] == 48:
            zs += 1
        if zs > lead:
            for z in range(zs, z2):
                scratch[lead + z - zs] = scratch[z]
            z2 -= zs - lead
    return z2


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _number_fact(parse_buf: np.ndarray, w: int, dots: int, commas: int, colons: int,
                 sep_thousands: bool, v_num: bool, money: bool, unit_at: int, comma: bool,
                 scratch: np.ndarray, units: tuple[np.ndarray, ...]) -> tuple[int, int, bool]:
    """The fact of a number read into ``parse_buf[:w]`` with a unit (``unit_at``, -1 for
    none) attached: an IP address, a clock time, a version or a quantity, normalised into
    ``scratch``. Returns (kind, length in ``scratch``, whether it waits for a unit word)."""
    _, unit_index, unit_offsets, unit_bytes = units
    if dots == 3 and commas == 0 and not v_num and unit_at < 0:
        for z in range(w):
            scratch[z] = parse_buf[z]
        return K_IDENT, w, False  # an IP address
    if colons > 0:
        for z in range(w):
            scratch[z] = parse_buf[z]
        return K_DATE, w, False  # a clock time
    thousands = 0
    decimal = 0
    if comma:
        if dots > 0 and commas <= 1 and sep_thousands:
            thousands = 46
            decimal = 44
        elif commas == 1 and dots == 0:
            decimal = 44
    else:
        if commas > 0 and dots <= 1 and sep_thousands:
            thousands = 44
            decimal = 46
    use_scratch = _normalise_number(parse_buf, w, thousands, decimal, scratch)
    is_version = v_num or (unit_at < 0 and dots > 0 and thousands == 0 and (
        decimal != 46 or dots > 1))
    if comma and dots > 0 and thousands == 0:
        is_version = unit_at < 0
    kind = K_VERSION if is_version and not money else K_NUMBER
    is_num = False
    if unit_at >= 0:
        u = unit_index[unit_at]
        for z in range(unit_offsets[u], unit_offsets[u + 1]):
            scratch[use_scratch] = unit_bytes[z]
            use_scratch += 1
    elif kind == K_NUMBER or (dots == 1 and not v_num and commas == 0):
        # "1.5 GB" is a quantity, "1.5" alone a version.
        is_num = True
    return kind, use_scratch, is_num


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _number_piece(data: np.ndarray, ps: int, pe: int, first_cp: int, second_cp: int,
                  money: bool, comma: bool, scratch: np.ndarray, parse_buf: np.ndarray,
                  units: tuple[np.ndarray, ...]) -> tuple[int, int, bool, int]:
    """The fact of a piece that starts with a number (digits, "-" and a digit, "v" and a
    digit). Returns (kind, length in ``scratch`` or -1 to hash the piece itself, whether it
    waits for a unit word, byte where the piece is cut or -1): at a '-' or '/' after the
    number ("1-2", "3/4") the piece ends and the rest is read as its own piece."""
    signed = first_cp == 45 and 48 <= second_cp <= 57
    v_num = (first_cp == 118 or first_cp == 86) and 48 <= second_cp <= 57
    q = ps + 1 if (signed or v_num) else ps
    w = 0
    if signed:
        parse_buf[0] = 45
        w = 1
    w, q, groups, dots, commas, colons, first_len, bad_group = _parse_number(
        data, q, pe, parse_buf, w)
    # Unit directly attached, or nothing, or a range/date ("1-2").
    unit_at = -1
    cut = -1
    if q < pe:
        b0 = int(data[q])
        if b0 == 45 or b0 == 47:
            cut = q
        else:
            unit_at = _lookup(units[0], _lower_hash(data, q, pe, scratch))
            if unit_at < 0:
                return K_IDENT, -1, False, -1
    sep_thousands = (not bad_group) and first_len <= 3 and groups > 0
    kind, use_scratch, is_num = _number_fact(parse_buf, w, dots, commas, colons,
                                             sep_thousands, v_num, money, unit_at, comma,
                                             scratch, units)
    return kind, use_scratch, is_num, cut


@numba.njit(inline="always")
def _affix_negation(data: np.ndarray, ps: int, we: int) -> bool:
    """"don't", "n'est", with a straight or a curly apostrophe: negation by affix."""
    if we - ps >= 3 and data[we - 1] == 116 and data[we - 2] == 39 and data[we - 3] == 110:
        return True
    if we - ps >= 5 and data[we - 1] == 116 and data[we - 2] == 0x99 \
            and data[we - 3] == 0x80 and data[we - 5] == 110:
        return True
    if we - ps >= 3 and (data[ps] == 110 or data[ps] == 78) and data[ps + 1] == 39:
        return True
    return we - ps >= 5 and (data[ps] == 110 or data[ps] == 78) and \
        data[ps + 1] == 0xE2 and data[ps + 3] == 0x99


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _word_piece(data: np.ndarray, ps: int, pe: int, stats: tuple[int, ...], piece_start: bool,
                out: np.ndarray, n_out: int, scratch: np.ndarray, st: np.ndarray,
                words: tuple[np.ndarray, ...]) -> tuple[int, int, int, bool]:
    """The facts of a word: a word of a list (number word, negation, opposite, date), an
    acronym, a name, the parts of a hyphenated word, a negation by affix. Counts the row's
    Title Case words. Returns (fact count, kind of the piece's own fact, its length in
    ``scratch``, whether it is a number word waiting for a unit)."""
    word_keys, word_values, word_filter = words
    n_upper = stats[S_UPPER]
    n_lower = stats[S_LOWER]
    n_alpha = stats[S_ALPHA]
    first_cp = stats[S_FIRST]
    # Strip a possessive "'s" / "’s".
    we = pe
    if we - ps > 3:
        if data[we - 1] == 115 and data[we - 2] == 39:
            we -= 2
        elif data[we - 1] == 115 and data[we - 2] == 0x99 and \
                data[we - 3] == 0x80 and data[we - 4] == 0xE2:
            we -= 4
    idx = _word_index(data, ps, we, scratch, word_keys, word_filter)
    title = n_upper == 1 and _is_upper(first_cp) and n_alpha >= 2
    # An acronym of three letters or more ("TCP", "JSON"; "APIs" as "API"). Two-letter ones
    # stay words: SPEC's own example merges "ML systems need data for training" into "Machine
    # learning models require training data".
    poss = 1 if we < pe else 0  # the "s" of a possessive "'s"
    plural = poss == 0 and n_lower == 1 and n_upper >= 3 \
        and data[we - 1] == 115 and n_upper + 1 == n_alpha
    acronym = plural or (n_alpha - poss >= 3 and n_lower == poss
                         and n_upper == n_alpha - poss)
    acronym_e = we - 1 if plural else we
    if title:
        st[ST_TITLE_WORDS] += 1
    elif _is_lower(first_cp):
        st[ST_LOWER_WORDS] += 1
    if idx >= 0:
        val = word_values[idx]
        vk = int(val >> KIND_SHIFT)
        if vk == 0:
            # A number word: its digits wait for a unit like a number.
            return n_out, K_NUMBER, _number_word_digits(int(val & np.uint64(0xFFFFFFFF)),
                                                        scratch), True
        n_out = _push(out, n_out, val, vk)
        if acronym and vk != K_NEGATION:
            # "GET", "TRUE": the word's fact and the acronym's.
            n_out = _push(out, n_out, _title_hash(data, ps, acronym_e, scratch), K_IDENT)
        return n_out, 0, -1, False
    if acronym:
        # A term an answer hinges on, wherever it stands in a sentence.
        n_out = _push(out, n_out, _title_hash(data, ps, acronym_e, scratch), K_IDENT)
    elif title:
        # A mention (kind 0) is written too: it lets a name of the other segment be found
        # here.
        kind = 0 if (piece_start or st[ST_NOUNS] != 0) else K_NAME
        n_out = _push(out, n_out, _xxh64_one(data, ps, we), kind)
    if stats[S_DASH] != 0:
        n_out = _hyphen_parts(data, ps, we, out, n_out, scratch, word_keys, word_values,
                              word_filter)
    if _affix_negation(data, ps, we):
        return n_out, K_NEGATION, _write_not(scratch), False
    return n_out, 0, -1, False


# The handler a narrow piece goes to (:func:`_narrow_route`).
R_IDENT, R_NUMBER, R_WORD = 0, 1, 2


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _narrow_route(data: np.ndarray, ps: int, pe: int, stats: tuple[int, ...]) -> int:
    """What the narrow piece ``[ps, pe)`` is, by its character statistics: an identifier (a
    URL, flag or path; ``_``, ``.``, camelCase, letters and digits: ``R_IDENT``, the piece is
    its own fact), a number (``R_NUMBER``) or a word (``R_WORD``)."""
    n_lower = stats[S_LOWER]
    n_alpha = stats[S_ALPHA]
    first_cp = stats[S_FIRST]
    second_cp = stats[S_SECOND]
    third_cp = stats[S_THIRD]
    is_flag = first_cp == 45 and (
        _cls(second_cp) == C_LETTER or (second_cp == 45 and _cls(third_cp) == C_LETTER))
    is_url = pe - ps > 8 and data[ps] == 104 and data[ps + 1] == 116 and \
        data[ps + 2] == 116 and data[ps + 3] == 112 and (
            data[ps + 4] == 58 or (data[ps + 4] == 115 and data[ps + 5] == 58))
    if is_url or is_flag or (stats[S_SLASH] != 0 and n_alpha > 0):
        return R_IDENT
    if 48 <= first_cp <= 57 or (
            (first_cp == 45 or first_cp == 118 or first_cp == 86) and 48 <= second_cp <= 57):
        return R_NUMBER  # digits, "-" and a digit, "v" and a digit
    if stats[S_US] != 0 and n_alpha > 0:
        return R_IDENT
    if stats[S_DOT] != 0 and n_alpha > 0 and not _is_initials(data, ps, pe):
        return R_IDENT
    if stats[S_UPPER_AFTER_LOWER] != 0 or (stats[S_LEAD_UPPER] >= 2 and n_lower > 0 and not (
            n_lower == 1 and data[pe - 1] == 115)):
        return R_IDENT
    if n_alpha > 0 and stats[S_DIGIT] > 0:
        return R_IDENT
    return R_WORD


@numba.njit(inline="always")
def _type_name_end(data: np.ndarray, ps: int, pe: int, stats: tuple[int, ...]) -> int:
    """Where the identifier ``[ps, pe)`` ends for its hash: before the plural ``s`` of a type
    name (PascalCase letters, ``SpanProcessors`` as ``SpanProcessor``, as "APIs" is read as
    "API"; :func:`arrowdedup.facts.entries.defined_type` drops it alike), else at ``pe``.
    Identifiers with digits, ``_``, ``.``, ``/`` or ``-`` keep it."""
    if stats[S_UPPER_AFTER_LOWER] == 0 or stats[S_DIGIT] != 0 or stats[S_US] != 0 or \
            stats[S_DOT] != 0 or stats[S_SLASH] != 0 or stats[S_DASH] != 0 or \
            stats[S_ALPHA] != stats[S_CHARS] or not (65 <= data[ps] <= 90) or pe - ps < 4:
        return pe
    before = data[pe - 2]
    # "OpenCensus", "Redis", "SubClass": an "s" after "u", "i" or "s" is not a plural.
    if data[pe - 1] == 115 and 97 <= before <= 122 and before != 115 and before != 117 \
            and before != 105:
        return pe - 1
    return pe


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _settle(data: np.ndarray, ps: int, pe: int, hash_e: int, wide: bool, kind: int,
            use_scratch: int, is_num: bool, out: np.ndarray, n_out: int,
            bufs: tuple[np.ndarray, ...], st: np.ndarray, units: tuple[np.ndarray, ...]
            ) -> int:
    """Write the classified piece's own fact: a number waiting for its unit is settled first
    (this piece is the unit, or it is not), a number that may take a unit waits, any other
    fact is hashed from ``scratch`` (``use_scratch`` bytes) or from the piece
    ``[ps, hash_e)``. Returns the fact count."""
    scratch, num_buf, _, unit_buf = bufs
    unit_keys, unit_index, unit_offsets, unit_bytes = units
    pend_num = st[ST_PEND_NUM]
    if pend_num >= 0:
        attached = False
        if not wide and not is_num:
            u_at = _lookup(unit_keys, _lower_hash(data, ps, pe, unit_buf))
            if u_at >= 0:
                u = unit_index[u_at]
                w2 = pend_num
                for z in range(unit_offsets[u], unit_offsets[u + 1]):
                    num_buf[w2] = unit_bytes[z]
                    w2 += 1
                n_out = _push(out, n_out, _xxh64_one(num_buf, 0, w2), K_NUMBER)
                attached = True
                kind = 0
        if not attached:
            n_out = _push(out, n_out, _xxh64_one(num_buf, 0, pend_num), st[ST_PEND_KIND])
        st[ST_PEND_NUM] = -1
    if is_num and use_scratch > 0:
        for z in range(use_scratch):
            num_buf[z] = scratch[z]
        st[ST_PEND_NUM] = use_scratch
        st[ST_PEND_KIND] = kind
        kind = 0
    if kind != 0:
        if use_scratch >= 0:
            h = _xxh64_one(scratch, 0, use_scratch)
        else:
            h = _xxh64_one(data, ps, hash_e)
        n_out = _push(out, n_out, h, kind)
    return n_out


@numba.njit(inline="always")
def _alnum(b: int) -> bool:
    """Is byte ``b`` an ASCII letter or digit?"""
    return b < 0x80 and (_ASCII[b] == C_LETTER or _ASCII[b] == C_DIGIT)


@numba.njit(inline="always")
def _cased_run(data: np.ndarray, p: int, ce: int) -> int:
    """The end of the ASCII letters from byte ``p``: an optional capital, then lower case."""
    if p < ce and 65 <= data[p] <= 90:
        p += 1
    while p < ce and 97 <= data[p] <= 122:
        p += 1
    return p


@numba.njit(inline="always")
def _plain_word(data: np.ndarray, ps: int, pe: int, first_cp: int, n_upper: int,
                n_alpha: int, piece_start: bool, out: np.ndarray, n_out: int,
                st: np.ndarray) -> int:
    """A word of cased letters that no word table knows: it counts for the Title Case test
    and is written if it is a name (a mention, kind 0, at a sentence start or where the
    language capitalises its nouns)."""
    if n_upper == 1 and _is_upper(first_cp) and n_alpha >= 2:
        st[ST_TITLE_WORDS] += 1
        kind = 0 if (piece_start or st[ST_NOUNS] != 0) else K_NAME
        n_out = _push(out, n_out, _xxh64_one(data, ps, pe), kind)
    elif _is_lower(first_cp):
        st[ST_LOWER_WORDS] += 1
    return n_out


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _end_row(out: np.ndarray, row_first: int, n_out: int, num_buf: np.ndarray,
             st: np.ndarray) -> int:
    """Close the row whose facts start at ``row_first``: write a number still waiting for
    its unit, drop the names of a Title Case row, sort the facts and drop repeats. Returns
    the fact count."""
    if st[ST_PEND_NUM] >= 0:
        n_out = _push(out, n_out, _xxh64_one(num_buf, 0, st[ST_PEND_NUM]), st[ST_PEND_KIND])
    if st[ST_TITLE_WORDS] >= 3 and st[ST_TITLE_WORDS] > st[ST_LOWER_WORDS]:
        # Title Case ("Chicago Shooting Shows Gap"): capitals say nothing about names.
        for k in range(row_first, n_out):
            if out[k] >> KIND_SHIFT == np.uint64(K_NAME):
                out[k] = out[k] & LOW
    return _sort_unique(out, row_first, n_out)


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
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
            if _ASCII[b0] == C_SPACE:
                if b0 == 10:
                    st[ST_SENTENCE_START] = 1
                i += 1
                continue
        else:
            cp, ln = _decode(data, i, e)
            if _cls(cp) == C_SPACE:
                i += ln
                continue
        cs = i
        while i < e and data[i] < 0x80 and _CHUNK[data[i]] == 0:
            i += 1  # the common bytes of a chunk, read before any call
        if i < e and not (data[i] < 0x80 and _CHUNK[data[i]] == 1):
            i, n_out, quote_from = _chunk_end(data, i, e, quote_from, out, n_out, bufs[0])
        ce = i
        ends_sentence = False
        money = False
        if not (_alnum(data[cs]) and _alnum(data[ce - 1])):
            cs, ce, ends_sentence, money = _strip(data, cs, ce)
        if cs >= ce:
            if ends_sentence:
                st[ST_SENTENCE_START] = 1
            continue
        if _is_marker(data, cs, ce):
            continue
        if code:
            n_out = _push(out, n_out, _xxh64_one(data, cs, ce), K_IDENT)
            continue
        p = cs
        next_start = st[ST_SENTENCE_START] != 0
        while p < ce:
            cp, ln = _decode(data, p, ce)
            if p > cs and _sign_before_digit(cp, data, p, ce):
                # "、#1744", "で$5": a sign after a wide piece, as at a chunk's start.
                money = cp == 36
                p += 1
                cp, ln = _decode(data, p, ce)
            wide = _cls(cp) == C_WIDE
            ps = p
            if not wide and st[ST_PEND_NUM] < 0:
                pe = _cased_run(data, p, ce)
                if pe > ps and (pe == ce or data[pe] == 61) and \
                        _word_index(data, ps, pe, bufs[0], words[0], words[2]) < 0:
                    # The common piece, read without a call: a word of ASCII letters, lower
                    # case after an optional capital, that no list knows (the fast path below,
                    # for these).
                    p = pe + 1 if pe < ce else pe  # past a '='
                    piece_start = next_start
                    next_start = False
                    n_out = _plain_word(data, ps, pe, int(data[ps]), 1 if data[ps] <= 90 else 0,
                                        pe - ps, piece_start, out, n_out, st)
                    continue
            p, stats = _piece_extent(data, p, ce, wide)
            pe = p
            if p < ce and ps == pe:
                next_start = next_start or _wide_full_stop(cp)
                p += ln  # a lone separator
                continue
            piece_start = next_start
            next_start = False
            if p < ce:
                cp2, ln2 = _decode(data, p, ce)
                if cp2 == 61 or (wide and _cls(cp2) == C_PUNCT):
                    next_start = _wide_full_stop(cp2)
                    p += ln2
            n_upper = stats[S_UPPER]
            if not wide and st[ST_PEND_NUM] < 0 and n_upper + stats[S_LOWER] == stats[S_CHARS] \
                    and n_upper <= 1 and stats[S_UPPER_AFTER_LOWER] == 0:
                # Fast path for the most common piece: a word of cased letters, all lower case
                # or with one capital in front, and no number waiting for a unit. None of the
                # checks of the other pieces can fire on it (they need a digit, a '-', '_',
                # '.', '/', ':', an apostrophe or two capitals).
                if _word_index(data, ps, pe, bufs[0], words[0], words[2]) < 0:
                    n_out = _plain_word(data, ps, pe, stats[S_FIRST], n_upper, stats[S_ALPHA],
                                        piece_start, out, n_out, st)
                    continue
            hash_e = pe
            if wide:
                n_out, kind, use_scratch = _wide_piece(data, ps, pe, out, n_out, bufs[0], words,
                                                       wide_neg)
                is_num = False
            else:
                route = _narrow_route(data, ps, pe, stats)
                cut = -1
                if route == R_NUMBER:
                    kind, use_scratch, is_num, cut = _number_piece(
                        data, ps, pe, stats[S_FIRST], stats[S_SECOND], money,
                        st[ST_COMMA] != 0, bufs[0], bufs[2], units)
                elif route == R_WORD:
                    n_out, kind, use_scratch, is_num = _word_piece(
                        data, ps, pe, stats, piece_start, out, n_out, bufs[0], st, words)
                else:
                    kind, use_scratch, is_num = K_IDENT, -1, False
                    hash_e = _type_name_end(data, ps, pe, stats)
                if cut >= 0:
                    p = cut + 1  # the rest is read as its own piece
                    pe = cut
            if st[ST_PEND_NUM] < 0 and not is_num:
                if kind != 0:  # what _settle does when no number waits or may wait
                    h = _xxh64_one(bufs[0], 0, use_scratch) if use_scratch >= 0 else \
                        _xxh64_one(data, ps, hash_e)
                    n_out = _push(out, n_out, h, kind)
            else:
                n_out = _settle(data, ps, pe, hash_e, wide, kind, use_scratch, is_num, out,
                                n_out, bufs, st, units)
        st[ST_SENTENCE_START] = 1 if ends_sentence else 0
    return _end_row(out, row_first, n_out, bufs[1], st)


@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
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
            cp, ln = (10, 1) if i == hi else _decode(data, i, hi)
            if cp == 10:
                if w > 0:
                    row_of[k] = r
                    facts[k] = (_xxh64_one(scratch, 0, w) & LOW) | bits
                    k += 1
                w = 0
                pending_space = False
            elif _cls(cp) == C_SPACE:
                pending_space = w > 0
            else:
                if pending_space:
                    scratch[w] = 32
                    w += 1
                    pending_space = False
                w = _encode(_lower(cp), scratch, w)
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
