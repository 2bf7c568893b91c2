"""The jitted parts of :mod:`arrowdedup.facts.content`: the word tokenizer, the pass that
turns a row's words into its content, role and order tokens, and the passes that say which
rows a layout regex may change (:func:`typed_candidates` for ``content_words._TYPED``,
:func:`list_marker_candidates` for ``facts._LIST_MARKER``: those regexes cost more than the
rest of the content pass on every row, and run only where these passes say they may match).

A text column of a million segments holds ~2.5·10⁷ words but only ~10⁵ distinct ones. So the
words are cut and interned here (:func:`intern_words`: one pass over the UTF-8 buffer, each
distinct (language, word) kept once in a hash table), the distinct words are classified and
stemmed once in Python (:func:`arrowdedup.facts.content._word_info`: the Polars expressions
and Snowball stemmers that the word table of :mod:`arrowdedup.facts.detail` uses), and
:func:`row_tokens` writes each row's signature tokens from the words' ids. Small inputs run
this module's interpreted twin (:mod:`arrowdedup.jit.interpreted`), which is this source run by
Python: its integer arithmetic stays below 2⁶³ (the intern hash is 32 bits wide), so both
give the same bits.

Each function is small and compiled and cached on its own (see :mod:`arrowdedup.facts.scan_jit`).
"""

from __future__ import annotations

import numpy as np

from ..jit.runtime import njit, numba
from .scan_text_jit import decode_utf8, sort_unique
from .words_jit import (
    E_HASH,
    E_LANG,
    E_START,
    E_STOP,
    EMPTY,
    ascii_word,
    is_letter,
    reserve,
    same_word,
    symbol_end,
    word_end,
    word_hash,
)

# The signature layout (:mod:`arrowdedup.facts.content`): the top four bits are the kind.
_CONTENT_KIND = np.uint64(8 << 60)
_ROLE_KIND = np.uint64(10 << 60)
_LOW = np.uint64((1 << 60) - 1)
_ROLE_AFTER = np.uint64(1 << 59)
_ROLE_PAIR_SHIFT = np.uint64(44)
_ROLE_HASH_BITS = np.uint64((1 << 44) - 1)
_NEGATED = np.uint64((1 << 15) - 1)
# Word classes (content_words._FUNCTION, ...): only these two are tested here.
_NEGATION_WORD, _ORDER_WORD = 1, 2
# A row is interned in sections of this many bytes: words that start in one are at most this
# many, which bounds the intern table's growth before the section (a 100 MB row included).
_SECTION = 1 << 16
def new_vocabulary() -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """An empty vocabulary for :func:`intern_words`: (intern table, entries, arena of the
    entries' bytes), and its counts (entries, arena bytes used)."""
    return ((np.full(2048, EMPTY, dtype=np.int64), np.empty((1024, 4), dtype=np.int64),
             np.empty(1 << 16, dtype=np.uint8)), np.zeros(2, dtype=np.int64))


@numba.njit(nogil=True, cache=True)
def intern_words(offsets: np.ndarray, data: np.ndarray, lang: np.ndarray, letters: np.ndarray,
                 vocab: tuple[np.ndarray, np.ndarray, np.ndarray], counts: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The words of each row ``r`` (``data[offsets[r]:offsets[r + 1]]``, language ``lang[r]``)
    in text order, as ids of the distinct (language, word) entries of ``vocab``
    (:func:`new_vocabulary`), which gains the new ones: a vocabulary carried from one call to
    the next numbers each word once, in order of first occurrence.

    Returns ``(ends, ids, vocab)``: row ``r``'s word ids are ``ids[ends[r]:ends[r + 1]]``;
    entry ``k`` is the bytes ``arena[entries[k, 0]:entries[k, 1]]`` in language
    ``entries[k, 2]``."""
    n = offsets.shape[0] - 1
    ends = np.zeros(n + 1, dtype=np.int64)
    # A word is one byte or more, so a row holds at most its bytes in words.
    ids = np.empty(max(offsets[n] - offsets[0], 1), dtype=np.int32)
    w = 0
    for r in range(n):
        i, e = offsets[r], offsets[r + 1]
        lg = lang[r]
        while i < e:
            # The vocabulary grows between rows (or between sections of a long row), not
            # word by word: the probe's arrays stay put while a row is read.
            vocab = reserve(vocab, counts, min(e - i, _SECTION), e - i)
            i, w = _intern_row(data, i, e, lg, letters, vocab, counts, ids, w)
        ends[r + 1] = w
    return ends, ids[:w], vocab


@numba.njit(nogil=True, cache=True)
def _intern_row(data: np.ndarray, i: int, e: int, lg: int, letters: np.ndarray,
                vocab: tuple[np.ndarray, np.ndarray, np.ndarray], counts: np.ndarray,
                ids: np.ndarray, w: int) -> tuple[int, int]:
    """:func:`intern_words` of the row ``data[i:e]`` from ``i`` on: its word ids written from
    ``w`` on. Stops before a word that starts :data:`_SECTION` bytes on or more (the
    vocabulary has room for that many new words, :func:`reserve`); returns where it
    stopped and the new end of ``ids``. Stops too once the intern table is half full."""
    table, entries, arena = vocab
    mask = table.shape[0] - 1
    full = table.shape[0] // 2
    stop = i + _SECTION
    while i < e and i < stop:
        b0 = int(data[i])
        if b0 < 0x80 and letters[b0] != 0:
            # An ASCII word is cut and hashed in one loop; one that goes on past ASCII
            # (a letter outside it, an apostrophe) is cut again by the full rule.
            j, h = ascii_word(data, i, e, letters, lg)
            if j < e and (data[j] >= 0x80 or data[j] == 0x27):
                j = word_end(data, j, e, letters)
                h = word_hash(data, i, j, lg)
        else:
            if b0 < 0x80:
                if b0 != 0x2D and b0 != 0x3D and b0 != 0x21 and b0 != 0x3C and b0 != 0x3E:
                    i += 1  # white space and most punctuation: no word, no symbol
                    continue
                cp, ln = b0, 1
            else:
                cp, ln = decode_utf8(data, i, e)
            if is_letter(cp, letters):
                j = word_end(data, i + ln, e, letters)
            else:
                j = symbol_end(data, i, e, cp, ln)
                if j == i:
                    i += ln
                    continue
            h = word_hash(data, i, j, lg)
        # The intern table's probe, here: a call per word cost a third of the pass.
        slot = h & mask
        while True:
            k = table[slot]
            if k == EMPTY:
                k = counts[0]
                table[slot] = k
                used = counts[1]
                arena[used:used + j - i] = data[i:j]
                entries[k, E_START] = used
                entries[k, E_STOP] = used + j - i
                entries[k, E_LANG] = lg
                entries[k, E_HASH] = h
                counts[0] = k + 1
                counts[1] = used + j - i
                if k + 1 >= full:
                    stop = 0  # the table must grow before the next word
                break
            if entries[k, E_LANG] == lg and same_word(data, i, j, arena, entries[k, E_START],
                                                   entries[k, E_STOP]):
                break
            slot = (slot + 1) & mask
        ids[w] = k
        w += 1
        i = j
    return i, w


@njit(nogil=True, cache=True, _nrt=False)
def _next_content(ids: np.ndarray, lo: int, hi: int, content: np.ndarray, nxt: np.ndarray
                  ) -> None:
    """``nxt[i - lo]``: the first content word after word ``i`` of the row ``ids[lo:hi]``
    (``hi`` if none)."""
    after = hi
    for i in range(hi - 1, lo - 1, -1):
        nxt[i - lo] = after
        if content[ids[i]]:
            after = i


@numba.njit(nogil=True, cache=True)
def row_tokens(ends: np.ndarray, ids: np.ndarray, rows: np.ndarray, every_word: np.ndarray,
               content: np.ndarray, content_every: np.ndarray, marked: np.ndarray,
               klass: np.ndarray, pair: np.ndarray, stem: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The content and role tokens of each row's words (``content_words._prose_tokens``), and
    its orders' parts, from the per-entry columns of :func:`content_words._word_info`.

    A row's content words are its entries with ``content`` set (``content_every`` in a row of
    ``every_word``). A marked word (an opposite, a negation, an order word) takes the content
    words before and after it in its row. Returns ``(token_rows, tokens, order_rows,
    order_parts, order_pivots)``: the rows are ``rows[r]``, each row's tokens sorted and
    unique, in row order; an order's parts are the hashes
    before and after it (one row of ``order_parts`` each), which
    :func:`content_words._order_tokens` mixes."""
    n = ends.shape[0] - 1
    # Tokens: one per content word, at most three per marked word (two sides and a negation).
    n_tok = 0
    n_marked = 0
    longest = 0
    for r in range(n):
        longest = max(longest, ends[r + 1] - ends[r])
        for i in range(ends[r], ends[r + 1]):
            if marked[ids[i]]:
                n_marked += 1
    n_tok = ends[n] - ends[0] + 3 * n_marked
    tok_rows = np.empty(n_tok, dtype=np.int64)
    tokens = np.empty(n_tok, dtype=np.uint64)
    order_rows = np.empty(n_marked, dtype=np.int64)
    order_parts = np.empty((n_marked, 2), dtype=np.uint64)
    order_pivots = np.empty(n_marked, dtype=np.uint64)
    nxt = np.empty(max(longest, 1), dtype=np.int64)
    w = 0
    o = 0
    for r in range(n):
        lo, hi = ends[r], ends[r + 1]
        flags = content_every if every_word[r] else content
        row = rows[r]
        _next_content(ids, lo, hi, flags, nxt)
        before = -1
        first = w
        for i in range(lo, hi):
            k = ids[i]
            if marked[k]:
                after = nxt[i - lo]
                h_before = stem[ids[before]] if before >= 0 else np.uint64(0)
                h_after = stem[ids[after]] if after < hi else np.uint64(0)
                w = _marked_tokens(klass[k], pair[k], row, h_before, h_after, after < hi,
                                   tok_rows, tokens, w)
                if klass[k] == _ORDER_WORD and before >= 0 and after < hi:
                    order_rows[o] = row
                    order_parts[o, 0] = h_before
                    order_parts[o, 1] = h_after
                    order_pivots[o] = stem[k]
                    o += 1
            if flags[k]:
                tok_rows[w] = row
                tokens[w] = (stem[k] & _LOW) | _CONTENT_KIND
                w += 1
                before = i
        # Each row's tokens sorted and unique here, in the reading threads: the join with
        # the scanner's facts (facts._with_facts) then merges sorted runs.
        w = sort_unique(tokens, first, w)
    return tok_rows[:w], tokens[:w], order_rows[:o], order_parts[:o], order_pivots[:o]


@njit(nogil=True, cache=True, _nrt=False)
def _marked_tokens(klass: int, pair: int, row: int, h_before: np.uint64, h_after: np.uint64,
                   has_after: bool, tok_rows: np.ndarray, tokens: np.ndarray, w: int) -> int:
    """The role tokens of one marked word, written at ``w``; returns the new end. An
    opposite gives the content word before it and the one after it (bit 59 the side, 0 for
    none); a negation the one after it, if any."""
    if pair >= 0:
        p = np.uint64(pair) << _ROLE_PAIR_SHIFT
        tok_rows[w] = row
        tokens[w] = _ROLE_KIND | p | (h_before & _ROLE_HASH_BITS)
        tok_rows[w + 1] = row
        tokens[w + 1] = _ROLE_KIND | _ROLE_AFTER | p | (h_after & _ROLE_HASH_BITS)
        w += 2
    if klass == _NEGATION_WORD and has_after:
        tok_rows[w] = row
        tokens[w] = _ROLE_KIND | _ROLE_AFTER | (_NEGATED << _ROLE_PAIR_SHIFT) | (
            h_after & _ROLE_HASH_BITS)
        w += 1
    return w


@numba.njit(inline="always")
def _folded(data: np.ndarray, i: int, e: int) -> int:
    """The character at ``i`` as ``(?i)`` compares it to an ASCII letter: the small ASCII
    letter for a letter of either case, ``ſ`` (U+017F) and the Kelvin sign (U+212A), the
    only other characters it takes for one (``s``, ``k``); 0 for any other character
    outside ASCII, the byte itself for any other ASCII one."""
    b = int(data[i])
    if b < 0x80:
        return b | 0x20 if 65 <= b <= 90 else b
    if b == 0xC5 and i + 1 < e and data[i + 1] == 0xBF:
        return 115
    if b == 0xE2 and i + 2 < e and data[i + 1] == 0x84 and data[i + 2] == 0xAA:
        return 107
    return 0


@numba.njit(inline="always")
def _char_start(data: np.ndarray, lo: int, j: int) -> int:
    """Start of the UTF-8 character whose last byte is at ``j`` (not before ``lo``)."""
    while j > lo and (int(data[j]) & 0xC0) == 0x80:
        j -= 1
    return j


@numba.njit(inline="always")
def _fold(cp: int) -> int:
    """A letter of a type noun as ``(?i)`` takes it: capitals of ASCII and Latin-1 as their
    small letters, ``ſ`` as ``s``, the Kelvin sign as ``k`` (the only characters outside
    ASCII that ``(?i)`` takes for an ASCII letter)."""
    if 65 <= cp <= 90 or (0xC0 <= cp <= 0xDE and cp != 0xD7):
        return cp + 32
    if cp == 0x17F:
        return 115
    if cp == 0x212A:
        return 107
    return cp


@njit(nogil=True, cache=True, _nrt=False)
def _noun_starts(data: np.ndarray, b: int, e: int, firsts: np.ndarray, forms: np.ndarray,
                 lengths: np.ndarray) -> bool:
    """Does a type noun (``forms``, folded, :func:`_fold`) start at ``b``? Its first two
    characters, folded (:func:`_folded`), are looked up first (``firsts``)."""
    c1 = _folded(data, b, e)
    if c1 == 0 or b + 1 >= e:
        return False
    step = 1 if data[b] < 0x80 else (2 if data[b] < 0xE0 else 3)
    if b + step >= e or firsts[c1, _folded(data, b + step, e)] == 0:
        return False
    for f in range(forms.shape[0]):
        if forms[f, 0] != c1:
            continue  # most forms, at the first letter
        i = b
        k = 0
        while k < lengths[f] and i < e:
            cp, ln = decode_utf8(data, i, e)
            if _fold(cp) != forms[f, k]:
                break
            i += ln
            k += 1
        if k == lengths[f]:
            return True
    return False


@njit(nogil=True, cache=True, _nrt=False)
def _noun_ends(data: np.ndarray, p: int, a: int, lasts: np.ndarray, forms: np.ndarray,
               lengths: np.ndarray) -> bool:
    """Does a type noun end at ``a`` (not starting before ``p``)? Its last two characters,
    folded (0 stands for a letter outside ASCII), are looked up first (``lasts``)."""
    j = _char_start(data, p, a - 1)
    if j <= p:
        return False
    last = _folded(data, j, a)
    if last == 0 or lasts[_folded(data, _char_start(data, p, j - 1), j), last] == 0:
        return False
    for f in range(forms.shape[0]):
        if forms[f, lengths[f] - 1] != last:
            continue  # most forms, at the last letter (always ASCII)
        i = a
        k = lengths[f] - 1
        while k >= 0 and i > p:
            c = _char_start(data, p, i - 1)
            cp, _ = decode_utf8(data, c, i)
            if _fold(cp) != forms[f, k]:
                break
            i = c
            k -= 1
        if k < 0:
            return True
    return False


def _run_classes() -> np.ndarray:
    """What :func:`_run_end` needs of a byte: 0 nothing, 1 ASCII white space (ends a run), 2
    a marker of an identifier, 3 a small ASCII letter (a marker before a capital)."""
    table = np.zeros(256, dtype=np.uint8)
    table[[9, 10, 11, 12, 13, 32]] = 1
    table[[ord(c) for c in "-./_`"]] = 2
    table[97:123] = 3
    return table


_RUN = _run_classes()


@njit(nogil=True, cache=True, _nrt=False)
def _run_end(data: np.ndarray, i: int, e: int) -> tuple[int, bool]:
    """End of the run of characters other than ASCII white space starting at ``i``, and
    whether it holds what every identifier of ``content_words._IDENTIFIER`` holds: a
    backtick, ``-``, ``.``, ``/``, ``_``, or a small ASCII letter before a capital."""
    marker = False
    while i < e:
        c = _RUN[data[i]]
        if c == 1:
            return i, marker
        if c == 2 or (c == 3 and i + 1 < e and 65 <= data[i + 1] <= 90):
            marker = True
        i += 1
    return i, marker


@numba.njit(nogil=True, cache=True)
def typed_candidates(offsets: np.ndarray, data: np.ndarray, firsts: np.ndarray,
                     lasts: np.ndarray, forms: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per row: may ``content_words._TYPED`` match in it? Every match is an identifier and a
    type noun on the two sides of a run of spaces and tabs; the identifier lies inside the
    run of characters other than ASCII white space on its side, and holds a marker
    (:func:`_run_end`). So a row is a candidate when two such runs with only spaces and
    tabs between them are a marked run and one a type noun starts (:func:`_noun_starts`),
    or one a type noun ends (:func:`_noun_ends`) and a marked run. False rows cannot match;
    true ones are left to the regex."""
    n = offsets.shape[0] - 1
    out = np.zeros(n, dtype=np.bool_)
    for r in range(n):
        s, e = offsets[r], offsets[r + 1]
        # The previous run, when only spaces and tabs (one or more) stand after it.
        prev_s, prev_e, prev_marker, joined = -1, -1, False, False
        i = s
        while i < e:
            b = data[i]
            if b == 32 or b == 9:
                joined = joined or prev_e == i
                i += 1
                continue
            if 10 <= b <= 13:
                joined = False
                prev_e = -1
                i += 1
                continue
            j, marker = _run_end(data, i, e)
            if joined and ((prev_marker and _noun_starts(data, i, j, firsts, forms, lengths))
                           or (marker and _noun_ends(data, prev_s, prev_e, lasts, forms,
                                                     lengths))):
                out[r] = True
                break
            prev_s, prev_e, prev_marker, joined = i, j, marker, False
            i = j
    return out


@numba.njit(inline="always")
def _list_marker_at(data: np.ndarray, i: int, e: int) -> bool:
    """May ``facts._LIST_MARKER`` match at the line start ``i``: white space and tabs, then
    ``-``, ``*``, ``+`` or ``•``, or one to three digits (any character outside ASCII may
    be one, for ``\\d``) and ``.`` or ``)``, then a space or a tab?"""
    while i < e and (data[i] == 32 or data[i] == 9):
        i += 1
    if i >= e:
        return False
    b = data[i]
    if b == 45 or b == 42 or b == 43:
        i += 1
    elif b == 0xE2 and i + 2 < e and data[i + 1] == 0x80 and data[i + 2] == 0xA2:
        i += 3
    else:
        digits = 0
        while i < e and digits < 3 and (48 <= data[i] <= 57 or data[i] >= 0x80):
            i += 1
            while i < e and (int(data[i]) & 0xC0) == 0x80:
                i += 1
            digits += 1
        if digits == 0 or i >= e or (data[i] != 46 and data[i] != 41):
            return False
        i += 1
    return i < e and (data[i] == 32 or data[i] == 9)


@numba.njit(nogil=True, cache=True)
def list_marker_candidates(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Per row: may ``facts._LIST_MARKER`` (multi-line: a line's start) match in it? False
    rows cannot match (:func:`_list_marker_at` at each line start); true ones are left to
    the regex."""
    n = offsets.shape[0] - 1
    out = np.zeros(n, dtype=np.bool_)
    for r in range(n):
        s, e = offsets[r], offsets[r + 1]
        if _list_marker_at(data, s, e):
            out[r] = True
            continue
        for i in range(s, e):
            if data[i] == 10 and _list_marker_at(data, i + 1, e):
                out[r] = True
                break
    return out


@numba.njit(inline="always")
def _form_step(h1: int, h2: int, b: int) -> tuple[int, int]:
    # Two 32-bit FNV-1a lanes with other primes: each product stays below 2⁶³, so the
    # interpreted twin (Python ints) and Numba (int64) agree.
    return ((h1 ^ b) * 0x01000193) & 0xFFFFFFFF, ((h2 ^ b) * 0x5BD1E995) & 0xFFFFFFFF


@numba.njit(nogil=True, cache=True)
def form_hashes(offsets: np.ndarray, data: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The form of each of ``rows`` (:mod:`arrowdedup.facts.sections`): a 58-bit hash of its
    text (lower-cased by the caller) with every run of ASCII characters other than letters
    and digits read as one space, and none at either end. Bytes outside ASCII are kept."""
    out = np.zeros(rows.shape[0], dtype=np.uint64)
    for k in range(rows.shape[0]):
        r = rows[k]
        h1 = 0x811C9DC5
        h2 = 0x9747B28C
        started = False
        gap = False
        for i in range(offsets[r], offsets[r + 1]):
            b = int(data[i])
            if b < 0x80 and not (48 <= b <= 57 or 65 <= b <= 90 or 97 <= b <= 122):
                gap = started
                continue
            if gap:
                h1, h2 = _form_step(h1, h2, 32)
                gap = False
            if 65 <= b <= 90:
                b += 32
            h1, h2 = _form_step(h1, h2, b)
            started = True
        out[k] = np.uint64((h1 << 26) ^ h2)
    return out
