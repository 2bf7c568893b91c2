"""The jitted parts of :mod:`arrowdedup.facts.guard`: the signature sort and the guard's
coverage test (the kernels call :func:`conflict` from their Numba code). Small inputs run its
interpreted twin (:mod:`arrowdedup.jit.interpreted`), which is this source run by Python."""

from __future__ import annotations

import numpy as np

from ..jit.runtime import njit, numba
from .scan_text_jit import KIND_SHIFT, LOW, find, sort_unique


@numba.njit(nogil=True, cache=True)
def _sorted_unique_csr(offsets: np.ndarray, values: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """CSR (offsets, values) of the CSR rows ``values[offsets[r] - offsets[0]:...]``, each
    row's values sorted and unique (the scanner's :func:`sort_unique`). A column the scanner
    wrote is sorted and unique already: one pass checks that and copies."""
    n = offsets.shape[0] - 1
    base = offsets[0]
    ordered = True
    for r in range(n):
        for i in range(offsets[r] + 1 - base, offsets[r + 1] - base):
            if values[i - 1] >= values[i]:
                ordered = False
                break
        if not ordered:
            break
    if ordered:
        return offsets - base, values.copy()
    out = values.copy()
    ends = np.zeros(n + 1, dtype=np.int64)
    w = 0
    for r in range(n):
        lo = offsets[r] - base
        end = sort_unique(out, lo, offsets[r + 1] - base)
        for i in range(lo, end):  # w <= lo: the rows move forward, in place
            out[w] = out[i]
            w += 1
        ends[r + 1] = w
    return ends, out[:w]


@numba.njit(nogil=True, cache=True)
def _merge_csr(offsets: np.ndarray, values: np.ndarray, extra_offsets: np.ndarray,
               extra_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row ``r`` of the CSR ``(offsets, values)`` (each row sorted and unique) joined with
    row ``r`` of the extras, each row sorted and unique: one copy of the values; where a
    row gained facts, its extras are sorted (:func:`sort_unique`) and merged with it."""
    n = offsets.shape[0] - 1
    base = offsets[0]
    total = offsets[n] - base + extra_values.shape[0]
    out = np.empty(total, dtype=np.uint64)
    ends = np.zeros(n + 1, dtype=np.int64)
    most = 0
    for r in range(n):
        most = max(most, extra_offsets[r + 1] - extra_offsets[r])
    scratch = np.empty(max(most, 1), dtype=np.uint64)
    w = 0
    for r in range(n):
        k = 0
        for i in range(extra_offsets[r], extra_offsets[r + 1]):
            scratch[k] = extra_values[i]
            k += 1
        if k > 0:
            k = sort_unique(scratch, 0, k)
        w = _merge_sorted(values, offsets[r] - base, offsets[r + 1] - base, scratch, k, out, w)
        ends[r + 1] = w
    return ends, out[:w]


@njit(nogil=True, cache=True, _nrt=False)
def _merge_sorted(values: np.ndarray, lo: int, hi: int, extra: np.ndarray, k: int,
                  out: np.ndarray, w: int) -> int:
    """The sorted, unique ``values[lo:hi]`` and ``extra[:k]`` merged into ``out`` from ``w``
    on, each value once; returns the new end."""
    i = lo
    j = 0
    while i < hi or j < k:
        if j >= k or (i < hi and values[i] < extra[j]):
            x = values[i]
            i += 1
        elif i >= hi or extra[j] < values[i]:
            x = extra[j]
            j += 1
        else:
            x = values[i]
            i += 1
            j += 1
        out[w] = x
        w += 1
    return w


@numba.njit(nogil=True, cache=True)
def _count_rows(rows: np.ndarray, offsets: np.ndarray) -> None:
    """Add each row's count of ``rows`` to ``offsets[row + 1]`` (a counting sort's first
    pass: :func:`_place` is its second)."""
    for r in rows:
        offsets[r + 1] += 1


@numba.njit(nogil=True, cache=True)
def _place(rows: np.ndarray, values: np.ndarray, at: np.ndarray, out: np.ndarray) -> None:
    """Write each value at its row's next place (``at[row]``, advanced): the (row, value)
    pairs grouped by row, in their order (a stable counting sort's second pass)."""
    for i in range(rows.shape[0]):
        r = rows[i]
        out[at[r]] = values[i]
        at[r] += 1


@numba.njit(nogil=True, cache=True, inline="always")
def _has(values: np.ndarray, lo: int, hi: int, x: np.uint64) -> bool:
    """Is ``x`` in the sorted ``values[lo:hi]``?"""
    return find(values, lo, hi, x) >= 0


# The signature's layout (see :mod:`arrowdedup.facts.guard` and :mod:`arrowdedup.facts.content`):
# the top four bits of a value are its kind (the scanner's KIND_SHIFT and LOW).
_SHIFT = KIND_SHIFT
_LOW = LOW
_NEGATION = 7
_CONTENT, _ALIAS, _ROLE, _ORDER = 8, 9, 10, 11
_CODE_COMMAND, _CODE_NOTE = 13, 14
# Kind 12: the segment introduces what follows it; the value's low bits are its text's form.
# Bits 58-59 tell the lead-in (0) from the label, part and subject tokens of
# :mod:`arrowdedup.facts.entries` (the same layout: a form in the low 58 bits).
_LEAD = np.uint64(12 << 60)
_LABEL = np.uint64((12 << 60) | (1 << 58))
_PART = np.uint64((12 << 60) | (2 << 58))
_SUBJECT = np.uint64((12 << 60) | (3 << 58))
_ENTRY_ROLE = np.uint64(3 << 58)
_LEAD_END = np.uint64(13 << 60)
# Section tokens (:mod:`arrowdedup.facts.sections`): the last kind; bits 58-59 root, prefix,
# leaf, form.
_SECTION = 15
_SECTION_PREFIX = np.uint64((_SECTION << 60) | (1 << 58))
_SECTION_LEAF = np.uint64((_SECTION << 60) | (2 << 58))
_SECTION_FORM = np.uint64((_SECTION << 60) | (3 << 58))
_SECTION_ROLE = np.uint64(3 << 58)
_ROLE_SIDE = np.uint64(1 << 44)
_ROLE_PAIR_SHIFT = np.uint64(44)
_NEGATED = 0x7FFF
_ORDER_REVERSED = np.uint64(1 << 59)
# Guard modes (facts.SUBSET, EQUAL, OFF, CODE) and the reason code of a content failure.
_EQUAL, _OFF, _CODE = 1, 2, 3
CONTENT_REASON = 8
SECTION_REASON = 9


@numba.njit(nogil=True, cache=True, inline="always")
def _lower_bound(values: np.ndarray, lo: int, hi: int, x: np.uint64) -> int:
    """First index of the sorted ``values[lo:hi]`` whose value is >= ``x`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(nogil=True, cache=True, inline="always")
def _missing(values: np.ndarray, a0: int, a1: int, b0: int, b1: int, all_kinds: bool,
             strict: bool) -> int:
    """Kind of the first fact of ``values[a0:a1]`` absent from ``values[b0:b1]`` (0 if none);
    only negation is looked for unless ``all_kinds``. A name is found as a mention or as an
    identifier of the same bytes (an acronym, hashed capitalised), and an identifier as a
    mention or a name; an opposite counts as missing only where its antonym is there, unless
    ``strict``. Content tokens (kinds 8 and up, sorted after the facts) are not facts. Where
    ``a`` has content words, its names are left to them: a content word is found whatever its
    case, and letter case is layout (SPEC §2), so "Update Pip" is covered by "update pip"."""
    by_content = _lower_bound(values, a0, a1, np.uint64(_CONTENT) << _SHIFT) < a1
    for i in range(a0, a1):
        x = values[i]
        kind = int(x >> _SHIFT)
        if kind >= _CONTENT:
            break
        if kind == 0 or (not all_kinds and kind != _NEGATION) or (kind == 5 and by_content
                                                                 and not strict):
            continue
        if _has(values, b0, b1, x):
            continue
        if kind == 5 or kind == 4:
            # A name, or an acronym (hashed capitalised), is found as the same word written
            # capitalised: a mention, a name, or the acronym ("WARNING" = "Warning").
            low = x & _LOW
            if _has(values, b0, b1, low) or _has(values, b0, b1, low | (np.uint64(9 - kind)
                                                                        << _SHIFT)):
                continue
        if kind == 6 and not strict and not _has(values, b0, b1, x ^ np.uint64(1)):
            continue
        return kind
    return 0


@numba.njit(nogil=True, cache=True)
def _uncovered(values: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> bool:
    """Does prose ``values[a0:a1]`` say what ``values[b0:b1]`` does not (SPEC §2, "Content, not
    only facts")? A content word of ``a`` must be in ``b``, as itself or as an alias (the
    initials of words of ``b``); an opposite may not stand where ``b`` puts its antonym; a
    negation of ``a`` must negate the same word in ``b`` when ``b`` negates; an order of ``a``
    may not be reversed in ``b``."""
    negates = _lower_bound(values, b0, b1, np.uint64(_NEGATION) << _SHIFT) < _lower_bound(
        values, b0, b1, np.uint64(_CONTENT) << _SHIFT)
    for i in range(_lower_bound(values, a0, a1, np.uint64(_CONTENT) << _SHIFT), a1):
        x = values[i]
        kind = int(x >> _SHIFT)
        if kind == _CONTENT:
            if not _has(values, b0, b1, x) and not _has(
                    values, b0, b1, (x & _LOW) | (np.uint64(_ALIAS) << _SHIFT)):
                return True
        elif kind == _ROLE:
            pair = int((x >> _ROLE_PAIR_SHIFT) & np.uint64(0x7FFF))
            if pair == _NEGATED:
                if negates and not _has(values, b0, b1, x):
                    return True
            elif _has(values, b0, b1, x ^ _ROLE_SIDE) and not _has(values, b0, b1, x):
                return True
        elif kind == _ORDER:
            if x & _ORDER_REVERSED:
                forward = x ^ _ORDER_REVERSED
                if _has(values, b0, b1, forward) and not _has(values, a0, a1, forward):
                    return True
        elif kind > _ORDER:
            break
    return False


@numba.njit(nogil=True, cache=True)
def _code_differs(values: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> bool:
    """Code is compared by line (SPEC §2): every line of ``a`` is a line of ``b``, and ``b``
    adds only comment or output lines (its commands are all ``a``'s)."""
    command = np.uint64(_CODE_COMMAND) << _SHIFT
    note = np.uint64(_CODE_NOTE) << _SHIFT
    for i in range(_lower_bound(values, a0, a1, command),
                   _lower_bound(values, a0, a1, np.uint64(_SECTION) << _SHIFT)):
        low = values[i] & _LOW
        if not _has(values, b0, b1, low | command) and not _has(values, b0, b1, low | note):
            return True
    for j in range(_lower_bound(values, b0, b1, command), _lower_bound(values, b0, b1, note)):
        if not _has(values, a0, a1, values[j]):
            return True
    return False


@numba.njit(nogil=True, cache=True)
def _other_lead_in(values: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> bool:
    """Are ``a`` and ``b`` two lead-ins ("... as follows:") of other texts, layout aside? A
    lead-in says what the block after it says, which the pair does not show; a
    representative that goes on past the colon may hold it."""
    la = _lower_bound(values, a0, a1, _LEAD)
    lb = _lower_bound(values, b0, b1, _LEAD)
    return la < a1 and values[la] < _LABEL and lb < b1 and values[lb] < _LABEL \
        and values[la] != values[lb]


@numba.njit(nogil=True, cache=True)
def _other_name(values: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> bool:
    """Is ``a`` a list entry that is only a name (a label) which ``b`` does not write, layout
    aside, as its whole text or as one side of a ``key: value``? A name with a word added or
    inflected is another name."""
    la = _lower_bound(values, a0, a1, _LABEL)
    if la == a1 or values[la] >= _PART:
        return False
    return not _has(values, b0, b1, (values[la] & ~_ENTRY_ROLE) | _PART)


@numba.njit(nogil=True, cache=True)
def _same_subject(values: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> bool:
    """Do ``a`` and ``b`` both define the same type ("SpanProcessor: ...")?"""
    sa = _lower_bound(values, a0, a1, _SUBJECT)
    sb = _lower_bound(values, b0, b1, _SUBJECT)
    return sa < a1 and sb < b1 and values[sa] < _LEAD_END and values[sa] == values[sb]


@numba.njit(nogil=True, cache=True)
def _sections_apart(values: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> bool:
    """Do rows ``a`` and ``b`` stand in sibling sections of one document (SPEC §2, section
    context): both have a section there, and neither path is a prefix of the other? Rows
    without section tokens, or of two documents, are never apart."""
    sa = _lower_bound(values, a0, a1, np.uint64(_SECTION) << _SHIFT)
    sb = _lower_bound(values, b0, b1, np.uint64(_SECTION) << _SHIFT)
    if sa == a1 or sb == b1 or values[sa] != values[sb] or values[sa] >= _SECTION_PREFIX:
        return False  # a root sorts first: no section, or another document
    la = _lower_bound(values, sa, a1, _SECTION_LEAF)
    lb = _lower_bound(values, sb, b1, _SECTION_LEAF)
    if la == a1 or lb == b1 or values[la] >= _SECTION_FORM or values[lb] >= _SECTION_FORM:
        return False
    # A leaf, as a prefix: is the path of one among the prefixes of the other?
    if _has(values, sb, lb, (values[la] & ~_SECTION_ROLE) | _SECTION_PREFIX):
        return False
    return not _has(values, sa, la, (values[lb] & ~_SECTION_ROLE) | _SECTION_PREFIX)


@numba.njit(nogil=True, cache=True)
def _same_form(values: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> bool:
    """Do ``a`` and ``b`` write the same words in the same order, layout aside (their form
    tokens)?"""
    fa = _lower_bound(values, a0, a1, _SECTION_FORM)
    fb = _lower_bound(values, b0, b1, _SECTION_FORM)
    return fa < a1 and fb < b1 and values[fa] == values[fb]


@numba.njit(nogil=True, cache=True)
def conflict(offsets: np.ndarray, values: np.ndarray, modes: np.ndarray, a: int, b: int) -> int:
    """Why segment row ``a`` may not merge into representative row ``b``: 0 when it may, else
    the fact kind that fails (index into :data:`KIND_NAMES`; :data:`CONTENT_REASON` when the
    representative does not cover ``a``'s content)."""
    ma = modes[a]
    mb = modes[b]
    if ma == _OFF and mb == _OFF:
        return 0
    a0, a1 = offsets[a], offsets[a + 1]
    b0, b1 = offsets[b], offsets[b + 1]
    if ma == _CODE or mb == _CODE:
        if _code_differs(values, a0, a1, b0, b1):
            return CONTENT_REASON
        return _section_reason(values, a0, a1, b0, b1)
    strict = ma == _EQUAL or mb == _EQUAL
    if a1 - a0 == b1 - b0:
        # Equal signatures (a near copy, the common case of a cosine hit) never conflict:
        # one linear pass instead of a binary search per fact each way.
        same = True
        for i in range(a1 - a0):
            if values[a0 + i] != values[b0 + i]:
                same = False
                break
        if same:
            return 0
    k = _missing(values, a0, a1, b0, b1, True, strict)
    if k != 0:
        return k
    k = _missing(values, b0, b1, a0, a1, strict, strict)
    if k != 0:
        return k
    if _other_lead_in(values, a0, a1, b0, b1) or _other_name(values, a0, a1, b0, b1):
        return CONTENT_REASON
    if _uncovered(values, a0, a1, b0, b1) or (strict and _uncovered(values, b0, b1, a0, a1)):
        return CONTENT_REASON
    return _section_reason(values, a0, a1, b0, b1)


@numba.njit(nogil=True, cache=True)
def _section_reason(values: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> int:
    """:data:`SECTION_REASON` when ``a`` and ``b`` stand in sibling sections and their texts
    differ beyond layout (a repeated notice is the same text: it may merge), else 0."""
    if _sections_apart(values, a0, a1, b0, b1) and not _same_form(values, a0, a1, b0, b1) \
            and not _same_subject(values, a0, a1, b0, b1):
        return SECTION_REASON
    return 0


@numba.njit(nogil=True, cache=True)
def _conflict_many(offsets: np.ndarray, values: np.ndarray, modes: np.ndarray, a: np.ndarray,
                   b: np.ndarray) -> np.ndarray:
    out = np.zeros(a.shape[0], dtype=np.int8)
    for i in range(a.shape[0]):
        out[i] = conflict(offsets, values, modes, a[i], b[i])
    return out
