"""The fact scanner's facts (jitted): a piece read as a number (with its unit, decimal and
thousands marks), as a word, name or identifier, settled into the row's facts, and the row's
facts sorted at its end. :mod:`.scan_jit` holds the row loop.
"""

from __future__ import annotations

import numpy as np

from ..arrays.hashing_jit import xxh64_plain as _xxh64_one
from ..jit.runtime import njit, numba
from .scan_pieces_jit import (
    S_ALPHA,
    S_CHARS,
    S_DASH,
    S_DIGIT,
    S_DOT,
    S_FIRST,
    S_LEAD_UPPER,
    S_LOWER,
    S_SECOND,
    S_SLASH,
    S_THIRD,
    S_UPPER,
    S_UPPER_AFTER_LOWER,
    S_US,
    write_not,
)
from .scan_text_jit import (
    ASCII_CLASSES,
    C_DIGIT,
    C_LETTER,
    K_DATE,
    K_IDENT,
    K_NAME,
    K_NEGATION,
    K_NUMBER,
    K_VERSION,
    KIND_SHIFT,
    LOW,
    ST_LOWER_WORDS,
    ST_NOUNS,
    ST_PEND_KIND,
    ST_PEND_NUM,
    ST_TITLE_WORDS,
    char_class,
    hyphen_parts,
    is_initials,
    is_lower,
    is_upper,
    lower_hash,
    number_word_digits,
    push_fact,
    sort_unique,
    table_lookup,
    title_hash,
    word_index,
)


@njit(nogil=True, cache=True, _nrt=False)
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


@njit(nogil=True, cache=True, _nrt=False)
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


@njit(nogil=True, cache=True, _nrt=False)
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


@njit(nogil=True, cache=True, _nrt=False)
def number_piece(data: np.ndarray, ps: int, pe: int, first_cp: int, second_cp: int,
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
            unit_at = table_lookup(units[0], lower_hash(data, q, pe, scratch))
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


@njit(nogil=True, cache=True, _nrt=False)
def word_piece(data: np.ndarray, ps: int, pe: int, stats: tuple[int, ...], piece_start: bool,
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
    idx = word_index(data, ps, we, scratch, word_keys, word_filter)
    title = n_upper == 1 and is_upper(first_cp) and n_alpha >= 2
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
    elif is_lower(first_cp):
        st[ST_LOWER_WORDS] += 1
    if idx >= 0:
        val = word_values[idx]
        vk = int(val >> KIND_SHIFT)
        if vk == 0:
            # A number word: its digits wait for a unit like a number.
            return n_out, K_NUMBER, number_word_digits(int(val & np.uint64(0xFFFFFFFF)),
                                                        scratch), True
        n_out = push_fact(out, n_out, val, vk)
        if acronym and vk != K_NEGATION:
            # "GET", "TRUE": the word's fact and the acronym's.
            n_out = push_fact(out, n_out, title_hash(data, ps, acronym_e, scratch), K_IDENT)
        return n_out, 0, -1, False
    if acronym:
        # A term an answer hinges on, wherever it stands in a sentence.
        n_out = push_fact(out, n_out, title_hash(data, ps, acronym_e, scratch), K_IDENT)
    elif title:
        # A mention (kind 0) is written too: it lets a name of the other segment be found
        # here.
        kind = 0 if (piece_start or st[ST_NOUNS] != 0) else K_NAME
        n_out = push_fact(out, n_out, _xxh64_one(data, ps, we), kind)
    if stats[S_DASH] != 0:
        n_out = hyphen_parts(data, ps, we, out, n_out, scratch, word_keys, word_values,
                              word_filter)
    if _affix_negation(data, ps, we):
        return n_out, K_NEGATION, write_not(scratch), False
    return n_out, 0, -1, False


# The handler a narrow piece goes to (:func:`narrow_route`).
R_IDENT, R_NUMBER, R_WORD = 0, 1, 2


@njit(nogil=True, cache=True, _nrt=False)
def narrow_route(data: np.ndarray, ps: int, pe: int, stats: tuple[int, ...]) -> int:
    """What the narrow piece ``[ps, pe)`` is, by its character statistics: an identifier (a
    URL, flag or path; ``_``, ``.``, camelCase, letters and digits: ``R_IDENT``, the piece is
    its own fact), a number (``R_NUMBER``) or a word (``R_WORD``)."""
    n_lower = stats[S_LOWER]
    n_alpha = stats[S_ALPHA]
    first_cp = stats[S_FIRST]
    second_cp = stats[S_SECOND]
    third_cp = stats[S_THIRD]
    is_flag = first_cp == 45 and (
        char_class(second_cp) == C_LETTER or (second_cp == 45 and char_class(third_cp) == C_LETTER))
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
    if stats[S_DOT] != 0 and n_alpha > 0 and not is_initials(data, ps, pe):
        return R_IDENT
    if stats[S_UPPER_AFTER_LOWER] != 0 or (stats[S_LEAD_UPPER] >= 2 and n_lower > 0 and not (
            n_lower == 1 and data[pe - 1] == 115)):
        return R_IDENT
    if n_alpha > 0 and stats[S_DIGIT] > 0:
        return R_IDENT
    return R_WORD


@numba.njit(inline="always")
def type_name_end(data: np.ndarray, ps: int, pe: int, stats: tuple[int, ...]) -> int:
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


@njit(nogil=True, cache=True, _nrt=False)
def settle(data: np.ndarray, ps: int, pe: int, hash_e: int, wide: bool, kind: int,
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
            u_at = table_lookup(unit_keys, lower_hash(data, ps, pe, unit_buf))
            if u_at >= 0:
                u = unit_index[u_at]
                w2 = pend_num
                for z in range(unit_offsets[u], unit_offsets[u + 1]):
                    num_buf[w2] = unit_bytes[z]
                    w2 += 1
                n_out = push_fact(out, n_out, _xxh64_one(num_buf, 0, w2), K_NUMBER)
                attached = True
                kind = 0
        if not attached:
            n_out = push_fact(out, n_out, _xxh64_one(num_buf, 0, pend_num), st[ST_PEND_KIND])
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
        n_out = push_fact(out, n_out, h, kind)
    return n_out


@numba.njit(inline="always")
def alnum(b: int) -> bool:
    """Is byte ``b`` an ASCII letter or digit?"""
    return b < 0x80 and (ASCII_CLASSES[b] == C_LETTER or ASCII_CLASSES[b] == C_DIGIT)


@numba.njit(inline="always")
def cased_run(data: np.ndarray, p: int, ce: int) -> int:
    """The end of the ASCII letters from byte ``p``: an optional capital, then lower case."""
    if p < ce and 65 <= data[p] <= 90:
        p += 1
    while p < ce and 97 <= data[p] <= 122:
        p += 1
    return p


@numba.njit(inline="always")
def plain_word(data: np.ndarray, ps: int, pe: int, first_cp: int, n_upper: int,
                n_alpha: int, piece_start: bool, out: np.ndarray, n_out: int,
                st: np.ndarray) -> int:
    """A word of cased letters that no word table knows: it counts for the Title Case test
    and is written if it is a name (a mention, kind 0, at a sentence start or where the
    language capitalises its nouns)."""
    if n_upper == 1 and is_upper(first_cp) and n_alpha >= 2:
        st[ST_TITLE_WORDS] += 1
        kind = 0 if (piece_start or st[ST_NOUNS] != 0) else K_NAME
        n_out = push_fact(out, n_out, _xxh64_one(data, ps, pe), kind)
    elif is_lower(first_cp):
        st[ST_LOWER_WORDS] += 1
    return n_out


@njit(nogil=True, cache=True, _nrt=False)
def end_row(out: np.ndarray, row_first: int, n_out: int, num_buf: np.ndarray,
             st: np.ndarray) -> int:
    """Close the row whose facts start at ``row_first``: write a number still waiting for
    its unit, drop the names of a Title Case row, sort the facts and drop repeats. Returns
    the fact count."""
    if st[ST_PEND_NUM] >= 0:
        n_out = push_fact(out, n_out, _xxh64_one(num_buf, 0, st[ST_PEND_NUM]), st[ST_PEND_KIND])
    if st[ST_TITLE_WORDS] >= 3 and st[ST_TITLE_WORDS] > st[ST_LOWER_WORDS]:
        # Title Case ("Chicago Shooting Shows Gap"): capitals say nothing about names.
        for k in range(row_first, n_out):
            if out[k] >> KIND_SHIFT == np.uint64(K_NAME):
                out[k] = out[k] & LOW
    return sort_unique(out, row_first, n_out)
