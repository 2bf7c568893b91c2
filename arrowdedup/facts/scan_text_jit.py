"""The fact scanner's character level (jitted): UTF-8 decoding, character classes and letter
case, word hashes and lookups, and the small readers of a piece's text (number words, hyphenated
parts, initials, quotes, runs without spaces). :mod:`.scan_jit` holds the row loop.
"""

from __future__ import annotations

import numpy as np

from ..arrays.hashing_jit import xxh64_plain as _xxh64_one
from ..jit.runtime import njit, numba

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
def decode_utf8(data: np.ndarray, i: int, end: int) -> tuple[int, int]:
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


ASCII_CLASSES = _ascii_classes()


# The chunk loop's view of an ASCII byte: 0 part of a chunk, 1 white space, 2 a quote that may
# open a quoted span (backtick, double quote).
CHUNK_BREAK = np.where(ASCII_CLASSES == C_SPACE, 1, 0).astype(np.int8)


@numba.njit(inline="always")
def char_class(cp: int) -> int:
    if cp < 0x80:
        return int(ASCII_CLASSES[cp])
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
def is_upper(cp: int) -> bool:
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
def is_lower(cp: int) -> bool:
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
def lower_cp(cp: int) -> int:
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
def encode_utf8(cp: int, out: np.ndarray, w: int) -> int:
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
def table_lookup(keys: np.ndarray, h: np.uint64) -> int:
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
        cp, ln = decode_utf8(data, i, e)
        w = encode_utf8(lower_cp(cp), scratch, w)
        i += ln
    return w


@njit(nogil=True, cache=True, _nrt=False)
def lower_hash(data: np.ndarray, s: int, e: int, scratch: np.ndarray) -> np.uint64:
    """XXH64 of the lower-cased bytes (a piece longer than the scratch is hashed as its
    prefix)."""
    return _xxh64_one(scratch, 0, _lower_into(data, s, e, scratch, 0))


@njit(nogil=True, cache=True, _nrt=False)
def title_hash(data: np.ndarray, s: int, e: int, scratch: np.ndarray) -> np.uint64:
    """XXH64 of the word with its first letter as written and the rest lower-cased: an
    acronym ("WARNING", "JSON") is hashed as the capitalised word ("Warning", "Json"), so
    the same word capitalised in the other segment (a mention or a name) covers it."""
    cp, ln = decode_utf8(data, s, e)
    w = _lower_into(data, s + ln, e, scratch, encode_utf8(cp, scratch, 0))
    return _xxh64_one(scratch, 0, w)


@numba.njit(inline="always")
def sign_before_digit(cp: int, data: np.ndarray, i: int, e: int) -> bool:
    """``cp`` at byte ``i`` is a '#', '~' or '$' in front of a digit ("#123", "~26%", "$5"):
    the number is the fact, not the sign."""
    return (cp == 35 or cp == 126 or cp == 36) and i + 1 < e and 48 <= data[i + 1] <= 57


@numba.njit(inline="always")
def wide_full_stop(cp: int) -> bool:
    """。！？: the end of a Chinese or Japanese sentence."""
    return cp == 0x3002 or cp == 0xFF01 or cp == 0xFF1F


@numba.njit(inline="always")
def push_fact(out: np.ndarray, n_out: int, h: np.uint64, kind: int) -> int:
    """Append fact ``(h, kind)``; :func:`_scan` keeps room for a row's worst case before it
    reads the row."""
    out[n_out] = (h & LOW) | (np.uint64(kind) << KIND_SHIFT)
    return n_out + 1


@numba.njit(inline="always")
def _lower_byte(b: int) -> int:
    return b + 32 if 65 <= b <= 90 else b


@numba.njit(inline="always")
def word_index(data: np.ndarray, s: int, e: int, scratch: np.ndarray, word_keys: np.ndarray,
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
    return table_lookup(word_keys, lower_hash(data, s, e, scratch))


@njit(nogil=True, cache=True, _nrt=False)
def number_word_digits(value: int, out: np.ndarray) -> int:
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


@njit(nogil=True, cache=True, _nrt=False)
def _push_number_word(out: np.ndarray, n_out: int, value: int, scratch: np.ndarray) -> int:
    nd = number_word_digits(value, scratch)
    return push_fact(out, n_out, _xxh64_one(scratch, 0, nd), K_NUMBER)


@numba.njit(inline="always")
def _is_one(data: np.ndarray, s: int, e: int) -> bool:
    """``data[s:e]`` is "one" in any case (no number word alone: "one of the ..." is no
    number, but the units of "twenty-one" are)."""
    return e - s == 3 and (data[s] | 32) == 111 and (data[s + 1] | 32) == 110 and \
        (data[s + 2] | 32) == 101


@njit(nogil=True, cache=True, _nrt=False)
def hyphen_parts(data: np.ndarray, s: int, e: int, out: np.ndarray, n_out: int,
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
            idx = word_index(data, q, r, scratch, word_keys, word_filter)
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
                n_out = push_fact(out, n_out, val, kind)
        q = r + 1
    if tens >= 0:
        n_out = _push_number_word(out, n_out, tens, scratch)
    return n_out


@numba.njit(inline="always")
def leading_chars(n_chars: int, cp: int, first: int, second: int, third: int
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


@njit(nogil=True, cache=True, _nrt=False)
def is_initials(data: np.ndarray, s: int, e: int) -> bool:
    """``e.g``, ``U.S``, ``i.e``: every dot-separated part is one letter."""
    run = 0
    i = s
    while i < e:
        cp, ln = decode_utf8(data, i, e)
        if cp == 46:
            if run != 1:
                return False
            run = 0
        else:
            run += 1
        i += ln
    return run <= 1


@numba.njit(inline="always")
def opens_quote(cp: int) -> bool:
    """Can a quoted span start at ``cp`` (backtick, straight, curly or CJK quotes, guillemet)?"""
    return cp == 96 or cp == 34 or cp == 0x201C or cp == 0xAB or cp == 0x201E or cp == 0x300C


@njit(nogil=True, cache=True, _nrt=False)
def quoted_at(data: np.ndarray, i: int, e: int, out: np.ndarray, n_out: int,
               scratch: np.ndarray) -> tuple[int, int]:
    """A backticked or quoted span opening at byte ``i`` (a code point for which
    :func:`opens_quote` holds) of a row ending at ``e``: its content is one identifier.
    Returns (fact count, byte after the closing quote), or (fact count, -1) without a close
    in reach. Spans do not nest: the chunk loop of :func:`chunk_end` looks for the next opener from
    the byte after a close."""
    cp, ln = decode_utf8(data, i, e)
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
        cq, lq = decode_utf8(data, j, e)
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
        ck, lk = decode_utf8(data, k, e)
        if char_class(ck) == C_SPACE:
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
        n_out = push_fact(out, n_out, h, K_IDENT)
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
    """The script of a wide code point, for :func:`wide_terms`."""
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


@njit(nogil=True, cache=True, _nrt=False)
def wide_terms(data: np.ndarray, ps: int, pe: int, out: np.ndarray, n_out: int,
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
            cp, ln = decode_utf8(data, i, pe)
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
                n_out = push_fact(out, n_out, _xxh64_one(data, run_s, i), K_IDENT)
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
            n_out = push_fact(out, n_out, _xxh64_one(scratch, 0, w), K_IDENT)
        prev_s = i
        prev_e = i + ln
        run_chars += 1
        i += ln


@njit(nogil=True, cache=True, _nrt=False)
def sort_unique(out: np.ndarray, lo: int, hi: int) -> int:
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
