"""The content tokenizer's word level (jitted): where a word or a symbol ends, its FNV hash per
language, and the growth of the intern table's arrays. :mod:`.content_jit` holds the passes.
"""

from __future__ import annotations

import numpy as np

from ..jit.runtime import njit, numba
from .scan_text_jit import decode_utf8


@numba.njit(inline="always")
def is_letter(cp: int, letters: np.ndarray) -> bool:
    """A letter or mark of a script with case (below U+0800): ``content_words._TOKEN``'s
    ``[\\p{L}\\p{M}&&[\\x{0}-\\x{7FF}]]``, as the regex engine's own table says."""
    return cp < 0x800 and letters[cp] != 0


@njit(nogil=True, cache=True, _nrt=False)
def word_end(data: np.ndarray, i: int, e: int, letters: np.ndarray) -> int:
    """End of the word starting at the letter at ``i``: letters, and an apostrophe (``'``,
    ``’``) only when a letter follows it (``content_words._TOKEN``, greedy)."""
    while i < e:
        cp, ln = decode_utf8(data, i, e)
        if is_letter(cp, letters):
            i += ln
        elif cp == 0x27 or cp == 0x2019:
            if i + ln >= e:
                return i
            cp2, ln2 = decode_utf8(data, i + ln, e)
            if not is_letter(cp2, letters):
                return i
            i += ln + ln2
        else:
            return i
    return i


@njit(nogil=True, cache=True, _nrt=False)
def symbol_end(data: np.ndarray, i: int, e: int, cp: int, ln: int) -> int:
    """End of the arrow or comparison at ``i`` (code point ``cp`` of ``ln`` bytes), or ``i``
    when none starts there: the alternatives of ``content_words._TOKEN`` after the word, in
    their order (``->``, ``=>``, ``→⇒⟶``, ``!=``, ``==``, ``<=``, ``>=``, ``=<>≠≤≥``)."""
    nxt = int(data[i + 1]) if i + 1 < e else 0
    if cp == 0x2D:  # -
        return i + 2 if nxt == 0x3E else i
    if cp == 0x3D:  # =
        return i + 2 if nxt == 0x3E or nxt == 0x3D else i + 1
    if cp == 0x21:  # !
        return i + 2 if nxt == 0x3D else i
    if cp == 0x3C or cp == 0x3E:  # < >
        return i + 2 if nxt == 0x3D else i + 1
    if cp == 0x2192 or cp == 0x21D2 or cp == 0x27F6 or cp == 0x2260 or cp == 0x2264 or \
            cp == 0x2265:  # → ⇒ ⟶ ≠ ≤ ≥
        return i + ln
    return i


@numba.njit(inline="always")
def _fnv_start(lang: int) -> int:
    return (0x811C9DC5 ^ lang) & 0xFFFFFFFF


@numba.njit(inline="always")
def _fnv_step(h: int, b: int) -> int:
    return ((h ^ b) * 0x01000193) & 0xFFFFFFFF


@numba.njit(inline="always")
def word_hash(data: np.ndarray, s: int, e: int, lang: int) -> int:
    """FNV-1a (32 bits) of a word's bytes and its language: the intern table's slot. Python
    ints in the twin, int64 in Numba: the product stays below 2⁵⁷, so both agree."""
    h = _fnv_start(lang)
    for i in range(s, e):
        h = _fnv_step(h, int(data[i]))
    return h


@numba.njit(inline="always")
def ascii_word(data: np.ndarray, i: int, e: int, letters: np.ndarray, lang: int
                ) -> tuple[int, int]:
    """End of the run of ASCII letters at ``i``, and its :func:`word_hash` (the common word)."""
    h = _fnv_start(lang)
    while i < e:
        b = int(data[i])
        if b >= 0x80 or letters[b] == 0:
            break
        h = _fnv_step(h, b)
        i += 1
    return i, h


@numba.njit(inline="always")
def same_word(data: np.ndarray, s: int, e: int, arena: np.ndarray, t: int, u: int) -> bool:
    """Are ``data[s:e]`` and ``arena[t:u]`` the same bytes?"""
    if e - s != u - t:
        return False
    for k in range(e - s):
        if data[s + k] != arena[t + k]:
            return False
    return True


@numba.njit(nogil=True, cache=True)
def _grown(table: np.ndarray, entries: np.ndarray, n_entries: int, size: int) -> np.ndarray:
    """The intern table at ``size`` slots (a power of two), the entries placed again."""
    grown = np.full(size, EMPTY, dtype=np.int64)
    mask = size - 1
    for k in range(n_entries):
        slot = entries[k, E_HASH] & mask
        while grown[slot] != EMPTY:
            slot = (slot + 1) & mask
        grown[slot] = k
    return grown


@numba.njit(nogil=True, cache=True)
def _longer(values: np.ndarray, size: int) -> np.ndarray:
    """``values`` in a new array of ``size`` values, the rest left unset."""
    out = np.empty(size, dtype=values.dtype)
    out[:values.shape[0]] = values
    return out


@numba.njit(nogil=True, cache=True)
def _taller(values: np.ndarray, size: int) -> np.ndarray:
    """The 2-d ``values`` in a new array of ``size`` rows, the rest left unset."""
    out = np.empty((size, values.shape[1]), dtype=values.dtype)
    out[:values.shape[0]] = values
    return out


@numba.njit(nogil=True, cache=True)
def reserve(vocab: tuple[np.ndarray, np.ndarray, np.ndarray], counts: np.ndarray, more: int,
             more_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``vocab`` grown, where needed, to take ``more`` new entries of ``more_bytes`` bytes
    in all, and its intern table to be at most half full with :data:`TABLE_SLACK` more, so
    that no array moves while a row is read."""
    table, entries, arena = vocab
    k = counts[0]
    if k + more > entries.shape[0]:
        entries = _taller(entries, max(2 * entries.shape[0], k + more))
    if counts[1] + more_bytes > arena.shape[0]:
        arena = _longer(arena, max(2 * arena.shape[0], counts[1] + more_bytes))
    if 2 * (k + TABLE_SLACK) > table.shape[0]:
        # Half full at most (:func:`_intern_row` stops there): a larger table reached for a
        # long row's worst case would leave the cache.
        table = _grown(table, entries, k, 2 * table.shape[0])
    return table, entries, arena


# An empty slot of the intern table, and the columns of its entries.
EMPTY = -1


E_START, E_STOP, E_LANG, E_HASH = 0, 1, 2, 3


# New entries an intern table takes before it must grow (it grows when half full).
TABLE_SLACK = 1024
