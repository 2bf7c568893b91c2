"""The fact scanner's pieces (jitted): where a chunk and a piece end, layout stripped, and the
text without spaces (CJK) read for its negations, words and terms. :mod:`.scan_jit` holds the
row loop; the row's state is one small array indexed by the ``ST_*`` and ``S_*`` slots here.
"""

from __future__ import annotations

import numpy as np

from ..jit.runtime import njit, numba
from .scan_text_jit import (
    ASCII_CLASSES,
    C_APOS,
    C_DIGIT,
    C_LETTER,
    C_PUNCT,
    C_SPACE,
    C_WIDE,
    CHUNK_BREAK,
    K_NEGATION,
    KIND_SHIFT,
    char_class,
    decode_utf8,
    is_lower,
    is_upper,
    leading_chars,
    opens_quote,
    push_fact,
    quoted_at,
    sign_before_digit,
    wide_terms,
    word_index,
)

ST_SIZE = 7


# A narrow piece's character statistics, as :func:`piece_extent` returns them (one tuple).
(S_UPPER, S_LOWER, S_DIGIT, S_ALPHA, S_CHARS, S_UPPER_AFTER_LOWER, S_LEAD_UPPER, S_US, S_DOT,
 S_SLASH, S_DASH, S_FIRST, S_SECOND, S_THIRD) = range(14)


@njit(nogil=True, cache=True, _nrt=False)
def chunk_end(data: np.ndarray, i: int, e: int, quote_from: int, out: np.ndarray, n_out: int,
               scratch: np.ndarray) -> tuple[int, int, int]:
    """The end of the chunk from byte ``i`` (the next white space), with the facts of the
    quoted spans that open in it at or after ``quote_from``. Returns (chunk end, fact count,
    where quoted spans are looked for next)."""
    while i < e:
        b0 = data[i]
        if b0 < 0x80:
            t = CHUNK_BREAK[b0]
            if t == 0:
                i += 1
                continue
            if t == 1:
                break
            if i >= quote_from:
                n_out, after = quoted_at(data, i, e, out, n_out, scratch)
                if after >= 0:
                    quote_from = after
            i += 1
            continue
        cp, ln = decode_utf8(data, i, e)
        if char_class(cp) == C_SPACE:
            break
        if i >= quote_from and opens_quote(cp):
            n_out, after = quoted_at(data, i, e, out, n_out, scratch)
            if after >= 0:
                quote_from = after
        i += ln
    return i, n_out, quote_from


@njit(nogil=True, cache=True, _nrt=False)
def strip_chunk(data: np.ndarray, cs: int, ce: int) -> tuple[int, int, bool, bool]:
    """Chunk ``[cs, ce)`` without its wrapping punctuation (never a leading '-': flags and
    negative numbers). Returns (start, end, whether a stripped mark ends a sentence, whether
    the chunk's number follows a "$": an amount, never a version). Most chunks begin and end
    with an ASCII letter or digit: that ends a strip loop before any decoding."""
    ends_sentence = False
    money = False
    while cs < ce:
        b0 = int(data[cs])
        if b0 < 0x80:
            c = int(ASCII_CLASSES[b0])
            if c == C_LETTER or c == C_DIGIT:
                break
            cp, ln = b0, 1
        else:
            cp, ln = decode_utf8(data, cs, ce)
            c = char_class(cp)
        if sign_before_digit(cp, data, cs, ce):
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
            c = int(ASCII_CLASSES[b0])
            if c == C_LETTER or c == C_DIGIT:
                break
            cp = b0
        else:
            # Step back one code point.
            while b > cs and (int(data[b]) & 0xC0) == 0x80:
                b -= 1
            cp, ln = decode_utf8(data, b, ce)
            c = char_class(cp)
        if (c == C_PUNCT or c == C_APOS) and cp != 47 and cp != 37 and cp != 45:
            if cp == 46 or cp == 33 or cp == 63 or cp == 58 or cp == 59 or cp == 0x3002:
                ends_sentence = True
            ce = b
        else:
            break
    return cs, ce, ends_sentence, money


@numba.njit(inline="always")
def is_marker(data: np.ndarray, cs: int, ce: int) -> bool:
    """Markdown markers, which keep the sentence start: '#', '>', '*', '-', '+', '|' runs."""
    for k in range(cs, ce):
        b0 = int(data[k])
        if not (b0 == 35 or b0 == 62 or b0 == 42 or b0 == 45 or b0 == 43 or b0 == 124):
            return False
    return True


@njit(nogil=True, cache=True, _nrt=False)
def piece_extent(data: np.ndarray, p: int, ce: int, wide: bool
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
            cp, ln = decode_utf8(data, p, ce)
            if char_class(cp) != C_WIDE:
                break
            p += ln
    while not wide and p < ce:
        b0 = data[p]
        if b0 < 0x80:
            cq = int(b0)
            if 97 <= cq <= 122:
                # A lowercase letter, most bytes of a text: tested first.
                first_cp, second_cp, third_cp = leading_chars(
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
            first_cp, second_cp, third_cp = leading_chars(
                n_chars, cq, first_cp, second_cp, third_cp)
            n_chars += 1
            c = ASCII_CLASSES[cq]
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
        cq, lq = decode_utf8(data, p, ce)
        c = char_class(cq)
        if c == C_WIDE or (c == C_PUNCT and lq >= 3):
            break
        first_cp, second_cp, third_cp = leading_chars(n_chars, cq, first_cp, second_cp, third_cp)
        n_chars += 1
        if c == C_LETTER:
            n_alpha += 1
            if is_upper(cq):
                n_upper += 1
                if prev_lower:
                    upper_after_lower = True
                if still_lead:
                    lead_upper += 1
                prev_lower = False
            else:
                if is_lower(cq):
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
def write_not(scratch: np.ndarray) -> int:
    """A negation's normalised form, "not", in ``scratch``; its length."""
    scratch[0] = 110
    scratch[1] = 111
    scratch[2] = 116
    return 3


@njit(nogil=True, cache=True, _nrt=False)
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


@njit(nogil=True, cache=True, _nrt=False)
def _wide_words(data: np.ndarray, ps: int, pe: int, forms: np.ndarray, form_offsets: np.ndarray,
                form_values: np.ndarray, out: np.ndarray, n_out: int) -> int:
    """The facts of the list words of unsegmented scripts that the wide piece ``[ps, pe)``
    holds anywhere (``forms``, the UTF-8 forms one after another, each with its fact in
    ``form_values``): "すべての" and "所有" state "all" inside a run without spaces."""
    for t in range(form_offsets.shape[0] - 1):
        if _holds(data, ps, pe, forms, form_offsets[t], form_offsets[t + 1]):
            n_out = push_fact(out, n_out, form_values[t], int(form_values[t] >> KIND_SHIFT))
    return n_out


@njit(nogil=True, cache=True, _nrt=False)
def wide_piece(data: np.ndarray, ps: int, pe: int, out: np.ndarray, n_out: int,
                scratch: np.ndarray, words: tuple[np.ndarray, ...],
                wide_neg: tuple[np.ndarray, ...]) -> tuple[int, int, int]:
    """The facts of the wide piece ``[ps, pe)``: a word of a list, its terms
    (:func:`wide_terms`) and a negation. Returns (fact count, kind of the piece's own fact,
    its length in ``scratch``), the kind 0 for none."""
    word_keys, word_values, word_filter = words
    kind = 0
    use_scratch = -1
    idx = word_index(data, ps, pe, scratch, word_keys, word_filter)
    if idx >= 0 and word_values[idx] >> KIND_SHIFT != 0:
        # Word-table values are whole fact hashes.
        n_out = push_fact(out, n_out, word_values[idx], int(word_values[idx] >> KIND_SHIFT))
    # The terms reuse ``scratch``, so they come first: the negation's fact is hashed from it
    # afterwards, and must read "not" (before rules 18.0 it read the last term's bytes, so
    # 不支持 and 支持しない stated different negations).
    n_out = wide_terms(data, ps, pe, out, n_out, scratch)
    n_out = _wide_words(data, ps, pe, wide_neg[2], wide_neg[3], wide_neg[4], out, n_out)
    if _wide_negation(data, ps, pe, wide_neg[0], wide_neg[1]):
        kind = K_NEGATION
        use_scratch = write_not(scratch)
    return n_out, kind, use_scratch
