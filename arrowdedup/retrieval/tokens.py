"""The one tokenizer of BM25: the same rules index the segments and tokenize queries.

Text is lower-cased (Polars' Unicode ``to_lowercase``), then scanned left to right. Characters
fall in three classes:

- *word*: ASCII letters, digits and ``_``, and every non-ASCII character except the
  punctuation ranges below (so accented words and CJK runs are words);
- *joiner*: ``.`` ``-`` ``:`` ``/`` — part of a token only between two word characters (and
  ``-`` / ``--`` just before one, as the prefix of a flag);
- *separator*: everything else, plus U+0080–U+00BF, U+2000–U+207F (quotes, dashes, ellipsis,
  spaces), U+3000–U+303F (CJK punctuation), U+FF00–U+FF0F, U+FF1A–U+FF20 and U+FEFF.

A *token* is an optional ``-``/``--`` prefix (when the dash run starts outside a word and has at
most two dashes), a run of word characters, then any number of (joiner, run of word
characters). So ``3.5``, ``v3.5``, ``10.0.0.1``, ``--max-request-bytes``, ``config.yaml`` and
``http_server_requests_total`` each stay one token, and a sentence's final period is dropped.

Each token is emitted unless it is a single ASCII letter or ``_`` or a stop word. A token that
has a joiner, an ``_`` or a dash prefix also emits its *parts* — the runs of characters
between joiners and ``_`` — that are neither a single ASCII character, all digits nor a stop
word (``--max-request-bytes`` also gives ``max``, ``request``, ``bytes``; ``3.5`` gives no
parts, so numbers stay whole). A token ``v`` + digit … with a ``.`` also emits itself without
the ``v`` (``v3.5`` also gives ``3.5``). Duplicates count (term frequency).

Two implementations follow these rules: :func:`tokens_of` (Python, one string at a time: the
query path and small indexes, no JIT to load) and a Numba scanner over the UTF-8 buffer of a
whole Arrow column (:mod:`._tokens_jit`, index builds). A test asserts they agree.
"""

from __future__ import annotations

import polars as pl

# bm25s' English stop-word list (bm25s.stopwords.STOPWORDS_EN), copied so that tokenizing a
# query does not import bm25s (and SciPy behind it).
STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
))
JOINERS = frozenset(".-:/")
# Inclusive code point ranges of non-ASCII characters that separate tokens.
SEPARATOR_RANGES = ((0x80, 0xBF), (0x2000, 0x207F), (0x3000, 0x303F), (0xFF00, 0xFF0F),
                    (0xFF1A, 0xFF20), (0xFEFF, 0xFEFF))
_ASCII_WORD = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
_SINGLE_DROPPED = frozenset("abcdefghijklmnopqrstuvwxyz_")
_DIGITS = frozenset("0123456789")
WORD, JOINER, SEPARATOR = 0, 1, 2
# Below this many texts an index is tokenized in Python (no Numba code to load).
JIT_MIN_TEXTS = 500


def char_class(ch: str) -> int:
    o = ord(ch)
    if o < 0x80:
        if ch in _ASCII_WORD:
            return WORD
        return JOINER if ch in JOINERS else SEPARATOR
    for lo, hi in SEPARATOR_RANGES:
        if lo <= o <= hi:
            return SEPARATOR
    return WORD


def _keep(token: str) -> bool:
    return not (len(token) == 1 and token in _SINGLE_DROPPED) and token not in STOPWORDS


def _emit(token: str, out: list[str]) -> None:
    if _keep(token):
        out.append(token)
    core = token.lstrip("-")
    compound = core != token or "_" in core or any(c in JOINERS for c in core)
    if not compound:
        return
    part: list[str] = []
    for ch in (*core, "."):
        if ch in JOINERS or ch == "_":
            if part:
                p = "".join(part)
                if not (len(p) == 1 and ord(p) < 0x80) and not all(c in _DIGITS for c in p) \
                        and p not in STOPWORDS:
                    out.append(p)
                part = []
        else:
            part.append(ch)
    if len(core) > 2 and core[0] == "v" and core[1] in _DIGITS and "." in core:
        out.append(core[1:])


def tokens_of(lowered: str) -> list[str]:
    """The tokens of one already lower-cased text (see the module docstring)."""
    out: list[str] = []
    n = len(lowered)
    cls = [char_class(c) for c in lowered]
    i = 0
    while i < n:
        start = i
        if cls[i] != WORD:
            if lowered[i] != "-":
                i += 1
                continue
            d = i
            while d < n and lowered[d] == "-":
                d += 1
            if d - i > 2 or d >= n or cls[d] != WORD:
                i = d
                continue
            i = d
        while i < n and cls[i] == WORD:
            i += 1
        while i + 1 < n and cls[i] == JOINER and cls[i + 1] == WORD:
            i += 1
            while i < n and cls[i] == WORD:
                i += 1
        _emit(lowered[start:i], out)
    return out


def lowercase(texts: pl.Series) -> pl.Series:
    """The lower-casing both implementations start from (nulls become empty texts)."""
    return texts.cast(pl.String).fill_null("").str.to_lowercase()


def tokenize(texts: pl.Series | list[str] | str) -> pl.Series:
    """A list of tokens per text (index and queries alike)."""
    if isinstance(texts, str):
        texts = [texts]
    series = texts if isinstance(texts, pl.Series) else pl.Series("text", texts, dtype=pl.String)
    lowered = lowercase(series)
    return pl.Series("tokens", [tokens_of(t) for t in lowered.to_list()],
                     dtype=pl.List(pl.String))
