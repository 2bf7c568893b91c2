"""Content coverage (SPEC §2 step 4, "Content, not only facts" and "Layout is not content"):
the tokens of a segment's signature beyond its facts.

The fact guard alone let through merges that keep every number and name but lose meaning: the
same template with another content word ("the token *issued*" / "the token *to refresh*"), a
clause the representative lacks, opposites that swap places, an order that is the point. So a
segment's signature also holds, as kinds above the fact kinds of :mod:`arrowdedup.facts.guard`:

- ``content`` (:data:`CONTENT`): each content word, lower-cased and stemmed (Snowball, in the
  segment's language; ``configured`` = ``configuration``), spelling variants and a short list
  of true synonyms folded to one form (``grey`` = ``gray``, ``need`` = ``require``). Function
  words (:mod:`arrowdedup.facts.function_words`) and layout are not content, nor is a two-letter
  acronym (``ML``: the facts' acronyms start at three letters, and a short one usually
  abbreviates words the representative spells out). A segment's content word must be stated by
  its representative (the representative may say more);
- ``role`` (:data:`ROLE`): an opposite (``enable``, ``deny``, ...) with the content word before
  it, and with the one after it. The merge is refused when the representative puts the
  antonym in the same place and not the word itself ("A enabled, B disabled" against "A
  disabled, B enabled"); a negation with the content word after it, asked for when both texts
  negate (the negation must stand on the same thing);
- ``order`` (:data:`ORDER`): an order word (``over``, ``than``, ``instead``, ``vs``, arrows)
  with the content words on each side. The merge is refused when the representative states the
  same relation reversed ("prefer a file over flags" against "prefer flags over a file";
  "parse → verify" against "verify → parse");
- ``code line`` (:data:`CODE_COMMAND`, :data:`CODE_NOTE`): each line of a ``code`` segment,
  white space removed. Code is compared by line: the segment's every line is in the
  representative, which may add only comment or output lines (:func:`code_line_kinds` says
  which lines are which).

Layout is never content (SPEC §2): list markers and their numbers, heading markers, indentation
and white space inside code, Markdown, HTML and shortcode markup, and letter case.

All of it is computed once per segment, with the facts, and stored in the ``fact_signature``
column, so every decision path (the Numba kernel, its NumPy twin, the blocked kernel, both LSH
methods, retrieval's cross-document dedup) applies the same rule by the same check
(:func:`arrowdedup.facts.conflict_jit.conflict`), and retrieval reads it from the store.

How the prose tokens are computed (:func:`content_parts`; issue 44, item 6: a million
segments hold ~2.5·10⁷ words but only ~10⁵ distinct ones): layout is stripped by the patterns
of :func:`strip_layout`; a jitted tokenizer (:mod:`arrowdedup.facts.content_jit`) cuts the words
:data:`_TOKEN` matches and numbers each distinct (language, word) once; each distinct word is
classified and stemmed once, in Python (:func:`_word_info`: function words, synonyms,
Snowball stems, by the rules of :func:`word_table`); a jitted pass writes each row's content,
role and order tokens from the words' numbers. :func:`word_table`, which keeps every word as
a string, serves :mod:`arrowdedup.facts.detail` (the words a refusal names), and the tests
hold the fast path to it bit for bit.
"""

from __future__ import annotations

import functools
import itertools
import types
from collections.abc import Callable
from typing import Protocol

import numpy as np
import polars as pl

from ..arrays.hashing import string_buffers
from ..jit import interpreted
from . import tables as fact_tables
from .code_lines import code_facts
from .function_words import BY_LANGUAGE, DEFAULT_LANGUAGE
from .tables import (
    ORDER,
    ORDER_WORDS,
    STEMMERS,
    SYNONYM_OF,
)

# A lead-in's token (kind LEAD, its text's form below): a text that introduces the list,
# table or code after it (section_facts.LEAD_IN; facts._lead_part).
KIND_SHIFT = int(fact_tables.KIND_SHIFT)
LOW = int(fact_tables.LOW_BITS)
# Inside a role value: bit 59 the side of the neighbour (0 before, 1 after); bits 44..58 the
# opposite's (pair << 1 | side), or NEGATED for a negation; bits 0..43 the neighbour's hash.
ROLE_AFTER_BIT = 59
ROLE_PAIR_SHIFT = 44
ROLE_HASH_BITS = (1 << ROLE_PAIR_SHIFT) - 1
NEGATED = (1 << 15) - 1
# Inside an order value: bit 59 set on the reversed relation.
ORDER_REVERSED_BIT = 59

# Markup that is layout wherever it stands (SPEC §2): Hugo shortcodes and HTML tags of text
# (a placeholder such as ``<dir>`` is not a tag: it is the scanner's identifier).
MARKUP = (r"\{\{[<%].*?[%>]\}\}|(?i:</?(?:b|i|em|strong|code|span|div|p|br|a|sup|sub|u|small"
          r"|kbd|mark|del|ins|s|strike|tt|var|abbr|cite|q|font|center|hr|img|details|summary)"
          r"(?:\s[^<>\n]{0,200})?/?>)")
# Each layout pattern with the literals a text must hold for it to match: a pattern runs only
# on the rows that hold one (a regex pass over every row cost more than the rest together).
# Each layout pattern with the literals a text must hold for it to match: a pattern runs only
# on the rows that hold one (a regex pass over every row cost more than the rest together).
# List and heading markers need no pattern here: they hold no letters, so no word.
_LAYOUT: tuple[tuple[str, tuple[str, ...]], ...] = (
    (MARKUP, ("{{", "<")),
    (r"\]\([^)\s]*\)", ("](",)),  # Markdown link targets (a URL is a fact of its own)
    (r"(?m)^[ \t]*>[ \t]?", (">",)),  # quote markers (">" is a comparison elsewhere)
    # A number written in words is a number fact ("twenty-one" is 21), not the word "one".
    (r"(?i)\b(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)-\w+", ("-",)),
)
# A word: letters and marks of the scripts with case (below U+0800; wider scripts are the fact
# scanner's terms), an arrow, or a comparison ("= 0" is not "!= 0").
_TOKEN = (r"[\p{L}\p{M}&&[\x{0}-\x{7FF}]]+(?:['’][\p{L}\p{M}&&[\x{0}-\x{7FF}]]+)*"
          r"|->|=>|[→⇒⟶]|!=|==|<=|>=|[=<>≠≤≥]")
# Apostrophes: a contracted negation ("doesn't") is a negation; an elided article or
# preposition ("l'exportateur", "dell'agente") and a possessive ("Santa's") are not content.
_NEGATED_CONTRACTION = r"n['’]t$"
_ELISION = r"^(?:l|d|j|m|n|s|t|c|qu|dell|all|nell|sull|dall|un)['’]"
_POSSESSIVE = r"['’]s$"
# Comparisons written two ways.
_COMPARISONS = {"≠": "!=", "≤": "<=", "≥": ">="}


class _Stemmer(Protocol):
    """What stem_words uses of a PyStemmer ``Stemmer``."""

    def stemWords(self, words: list[str]) -> list[str]: ...


@functools.cache
def _stemmer(lang: str) -> _Stemmer | None:
    name = STEMMERS.get(lang)
    if name is None:
        return None
    import Stemmer

    return Stemmer.Stemmer(name)


def stem_words(words: list[str], lang: str) -> list[str]:
    """Lower-case ``words`` folded to their synonym group's first word (or, for a word of the
    closed list of opposites, to its side's first form: ``sent`` = ``send``), then stemmed."""
    polar = fact_tables.POLAR_WORDS
    folded = [SYNONYM_OF.get(w) or polar.get(w, w) for w in words]
    stemmer = _stemmer(lang)
    if stemmer is None:
        return folded
    return list(stemmer.stemWords(folded))


# A noun that names the kind of the identifier beside it ("the config.yaml file", "the flag
# --all", "the `send` method") repeats what the identifier says: filler, not content.
_IDENTIFIER = (r"(?:`[^`\n]+`|--?[A-Za-z][\w-]*|[\w-]+(?:[./][\w-]+)+|\w*[a-z][A-Z]\w*"
               r"|\w+_\w+)")
_TYPE_NOUN = (r"(?i:files?|flags?|options?|commands?|parameters?|variables?|functions?"
              r"|methods?|class(?:es)?|fields?|keys?|settings?|propert(?:y|ies)|attributes?"
              r"|director(?:y|ies)|folders?|modules?|packages?|librar(?:y|ies)|endpoints?"
              r"|arguments?|values?|fil|fichier|archivo|arquivo|opción|opção|comando|commande)")
_TYPED = (rf"(?P<i1>{_IDENTIFIER})[ \t]+{_TYPE_NOUN}\b"
          rf"|\b{_TYPE_NOUN}[ \t]+(?P<i2>{_IDENTIFIER})")


_TYPE_NOUN_WORDS = ("file", "flag", "option", "command", "parameter", "variable", "function",
                    "method", "class", "field", "key", "setting", "propert", "attribute",
                    "director", "folder", "module", "package", "librar", "endpoint", "argument",
                    "value", "fil", "fichier", "archivo", "arquivo", "opción", "opção", "comando",
                    "commande")


# Every word _TYPE_NOUN matches (in some letter case).
_TYPE_NOUN_FORMS = (
    "file", "files", "flag", "flags", "option", "options", "command", "commands", "parameter",
    "parameters", "variable", "variables", "function", "functions", "method", "methods",
    "class", "classes", "field", "fields", "key", "keys", "setting", "settings", "property",
    "properties", "attribute", "attributes", "directory", "directories", "folder", "folders",
    "module", "modules", "package", "packages", "library", "libraries", "endpoint",
    "endpoints", "argument", "arguments", "value", "values", "fil", "fichier", "archivo",
    "arquivo", "opción", "opção", "comando", "commande")


@functools.cache
def _type_nouns() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The type nouns for :func:`arrowdedup.facts.content_jit.typed_candidates`: ``firsts[a, b]``
    and ``lasts[a, b]`` set for the ASCII codes of a noun's first two and last two characters
    (0 for a letter outside ASCII), and the nouns' code points (a row each) and lengths."""
    firsts = np.zeros((128, 128), dtype=np.uint8)
    lasts = np.zeros((128, 128), dtype=np.uint8)

    def code(c: str) -> int:
        return ord(c) if c.isascii() else 0

    longest = max(len(form) for form in _TYPE_NOUN_FORMS)
    forms = np.zeros((len(_TYPE_NOUN_FORMS), longest), dtype=np.int64)
    lengths = np.array([len(form) for form in _TYPE_NOUN_FORMS], dtype=np.int64)
    for f, form in enumerate(_TYPE_NOUN_FORMS):
        firsts[code(form[0]), code(form[1])] = 1
        lasts[code(form[-2]), code(form[-1])] = 1
        forms[f, :len(form)] = [ord(c) for c in form]
    return firsts, lasts, forms, lengths


def strip_layout(text: pl.Series) -> pl.Series:
    """``text`` without layout (markers, markup) and without the nouns that only name an
    identifier's kind: what a reader reads."""
    for pattern, literals in _LAYOUT:
        text = _replace_where(text, text.str.contains_any(list(literals)), pattern, " ")
    # The typed pattern is the slow one: it runs only where an identifier and a type noun
    # may stand side by side (a jitted pass over the bytes), and a type noun's letters are
    # there.
    offsets, data = string_buffers(text.to_arrow())
    with interpreted.quiet():
        maybe = word_tokenizer(int(offsets[-1] - offsets[0])).typed_candidates(
            offsets, data, *_type_nouns())
    rows = np.flatnonzero(maybe)
    if rows.shape[0] == 0:
        return text
    nouns = text.gather(rows).str.contains_any(list(_TYPE_NOUN_WORDS),
                                               ascii_case_insensitive=True)
    rows = rows[nouns.fill_null(False).to_numpy()]
    if rows.shape[0] == 0:
        return text
    return text.scatter(rows, text.gather(rows).str.replace_all(_TYPED, "${i1}${i2}"))


def _replace_where(text: pl.Series, mask: pl.Series, pattern: str, by: str) -> pl.Series:
    rows = np.flatnonzero(mask.fill_null(False).to_numpy())
    if rows.shape[0] == 0:
        return text
    return text.scatter(rows, text.gather(rows).str.replace_all(pattern, by))


def _hash(column: pl.Series) -> np.ndarray:
    from ..arrays.hashing import xxh64

    return np.asarray(xxh64(column), dtype=np.uint64)


def _hash_words(words: list[str]) -> np.ndarray:
    import xxhash

    return np.fromiter((xxhash.xxh64_intdigest(w.encode()) for w in words), dtype=np.uint64,
                       count=len(words))


@functools.cache
def _word_lists() -> tuple[frozenset[str], dict[str, int], frozenset[str]]:
    """The negation words, each opposite form's ``pair << 1 | side``, and the words that are
    numbers or units (facts of their own: "three" is the number 3, "seconds" the unit s)."""
    sides = {f: (p << 1) | side for f, (p, side) in fact_tables.POLAR_SIDES.items()}
    return (frozenset(fact_tables.NEGATIONS), sides,
            frozenset(fact_tables.NUMBER_WORDS) | frozenset(fact_tables.UNITS))


# What a word is (per distinct word and language).
_FUNCTION, _NEGATION_WORD, _ORDER_WORD, _CONTENT_WORD = 0, 1, 2, 3


def _words_of(text: pl.Series, lang: pl.Series, rows: np.ndarray) -> pl.DataFrame:
    """One row per token of the prose rows, in text order: row, token, lower case, language."""
    frame = pl.DataFrame({"row": rows, "text": strip_layout(text.fill_null("")), "lang": lang})
    frame = frame.select(
        "row", "lang", tok=pl.col("text").str.extract_all(_TOKEN)
    ).explode("tok").drop_nulls("tok")
    return frame.with_columns(low=_lowered(frame.get_column("tok")))


def _lowered(tok: pl.Series) -> pl.Series:
    """Each token as the word lists know it: lower case, a comparison in one spelling, a
    contracted negation as "not", without an elided article or a possessive."""
    low = tok.str.to_lowercase().replace(_COMPARISONS)
    quoted = low.str.contains_any(["'", "’"])
    rows_q = np.flatnonzero(quoted.to_numpy())
    if rows_q.shape[0] == 0:
        return low
    few = low.gather(rows_q)
    fixed = pl.select(
        pl.when(few.str.contains(_NEGATED_CONTRACTION)).then(pl.lit("not"))
        .otherwise(few.str.replace(_ELISION, "").str.replace(_POSSESSIVE, ""))).to_series()
    return low.scatter(rows_q, fixed)


def _short_words(tok: pl.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per token: a single character, a label (a single capital or comparison: "mode A"),
    a two-letter acronym ("ML")."""
    length = tok.str.len_chars().to_numpy()
    single = length == 1
    label = np.zeros(length.shape[0], dtype=bool)
    acronym = np.zeros(length.shape[0], dtype=bool)
    short = np.flatnonzero(length <= 2)
    if short.shape[0]:
        few = tok.gather(short)
        label[short] = few.str.contains(r"^[\p{Lu}=<>]$").to_numpy()
        acronym[short] = few.str.contains(r"^\p{Lu}\p{Lu}$").to_numpy()
    return single, label, acronym


def _classify(words: list[str], langs: list[str]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct (word, language): its class, its opposite's ``pair << 1 | side`` (-1 if
    none) and the hash of its stem (or of its order word's canonical form)."""
    negations, polar, numeric = _word_lists()
    klass = np.full(len(words), _CONTENT_WORD, dtype=np.int8)
    pair = np.full(len(words), -1, dtype=np.int64)
    stems = list(words)
    by_lang: dict[str, list[int]] = {}
    for i, (w, lang) in enumerate(zip(words, langs, strict=True)):
        if w in negations:
            klass[i] = _NEGATION_WORD
        elif w in ORDER_WORDS:
            klass[i] = _ORDER_WORD
            stems[i] = ORDER_WORDS[w]
        else:
            if w in BY_LANGUAGE[lang] or w in numeric:
                klass[i] = _FUNCTION
            # Function words are stemmed too: in a heading every word counts.
            by_lang.setdefault(lang, []).append(i)
        if w in polar:
            pair[i] = polar[w]
    for lang, idx in by_lang.items():
        for i, stem in zip(idx, stem_words([words[i] for i in idx], lang), strict=True):
            stems[i] = stem
    return klass, pair, _hash_words(stems)


def _mix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """An order-sensitive 64-bit combination of two hash arrays (splitmix64 finaliser)."""
    with np.errstate(over="ignore"):
        x = a * np.uint64(0x9E3779B97F4A7C15) + b
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


_WORD_SCHEMA = {"row": pl.Int64, "lang": pl.String, "tok": pl.String, "low": pl.String,
                "klass": pl.Int8, "pair": pl.Int64, "stem": pl.UInt64, "content": pl.Boolean,
                "marked": pl.Boolean}


def word_table(text: pl.Series, lang: pl.Series, rows: np.ndarray,
               every_word: np.ndarray | None = None) -> pl.DataFrame:
    """Every word of the prose ``text``, in text order: its ``row``, the token, its class, its
    opposite's ``pair`` (-1 if none), its ``stem`` hash, whether it is a ``content`` word, and
    whether it is ``marked`` (an opposite, negation or order word, whose place counts).

    ``every_word`` (bool per text) marks texts in which every word is content: headings, where
    "What is sampling?" is another section than "Sampling"."""
    frame = _words_of(text, lang, rows)
    if frame.height == 0:
        return pl.DataFrame(schema=_WORD_SCHEMA)
    # Classify each distinct (language, word) once: a corpus has ~10⁵ of them in ~10⁷ words.
    distinct = frame.select("lang", "low").unique(maintain_order=True)
    klass_u, pair_u, stem_u = _classify(distinct.get_column("low").to_list(),
                                        distinct.get_column("lang").to_list())
    info = distinct.with_columns(pl.Series("klass", klass_u), pl.Series("pair", pair_u),
                                 pl.Series("stem", stem_u))
    frame = frame.join(info, on=["lang", "low"], how="left", maintain_order="left")
    klass = frame.get_column("klass").to_numpy()
    pair = frame.get_column("pair").to_numpy()
    # A single character is content only as a capital (a label: "mode A") or a comparison; a
    # two-letter acronym ("ML") is left to the facts (they start at three letters), so that an
    # abbreviation and its expansion ("machine learning") are the same content.
    single, label, acronym = _short_words(frame.get_column("tok"))
    content = (klass == _CONTENT_WORD) & (~single | label) & ~acronym
    if every_word is not None and every_word.any():
        position = np.searchsorted(rows, frame.get_column("row").to_numpy())
        content |= every_word[position] & (klass != _NEGATION_WORD) & ~acronym
    return frame.with_columns(
        pl.Series("content", content),
        pl.Series("marked", (pair >= 0) | (klass == _NEGATION_WORD) | (klass == _ORDER_WORD)),
    )


@functools.cache
def _letters() -> np.ndarray:
    """uint8 per code point below U+0800: 1 for a letter or mark (``\\p{L}``, ``\\p{M}``), as
    the regex engine that ran :data:`_TOKEN` says (its Unicode tables, not Python's)."""
    chars = pl.Series([chr(c) for c in range(0x800)], dtype=pl.String)
    return chars.str.contains(r"^[\p{L}\p{M}]$").to_numpy().astype(np.uint8)


# The function-word lists' languages, as the tokenizer numbers them.
_LANGUAGES = tuple(sorted(BY_LANGUAGE))


def _word_info(words: list[str], langs: list[str]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct (word, language), for :func:`arrowdedup.facts.content_jit.row_tokens`: whether
    it is content (in a row of prose, and in a row where every word counts: a heading),
    whether it is marked (an opposite, negation or order word, whose place counts), its
    class, its opposite's ``pair << 1 | side`` (-1 if none) and its stem's hash. The rules
    of :func:`word_table`, applied to each distinct word once."""
    tok = pl.Series(words, dtype=pl.String)
    klass, pair, stem = _classify(_lowered(tok).to_list(), langs)
    single, label, acronym = _short_words(tok)
    content = (klass == _CONTENT_WORD) & (~single | label) & ~acronym
    content_every = content | ((klass != _NEGATION_WORD) & ~acronym)
    marked = (pair >= 0) | (klass == _NEGATION_WORD) | (klass == _ORDER_WORD)
    return content, content_every, marked, klass, pair, stem


class _Vocabulary:
    """The distinct words met so far by one :func:`content_facts` call, and what each is: the
    tokenizer's intern table (:func:`arrowdedup.facts.content_jit.intern_words`) and the columns
    of :func:`_word_info`, which grow as pieces of the text bring new words."""

    def __init__(self, kernel: types.ModuleType) -> None:
        self.kernel = kernel
        self.state, self.counts = kernel.new_vocabulary()
        self.info: list[np.ndarray] = [np.empty(0, dtype=t) for t in
                                       (bool, bool, bool, np.int8, np.int64, np.uint64)]

    def words(self, text: pl.Series, lang: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The word ids of each text (CSR: ends, ids), the new words classified."""
        offsets, data = string_buffers(text.to_arrow())
        known = int(self.counts[0])
        ends, ids, self.state = self.kernel.intern_words(offsets, data, lang, _letters(),
                                                         self.state, self.counts)
        total = int(self.counts[0])
        if total > known:
            _, entries, arena = self.state
            raw = arena[:int(self.counts[1])].tobytes()
            new = entries[known:total]
            words = [raw[a:b].decode() for a, b in zip(new[:, 0].tolist(), new[:, 1].tolist(),
                                                        strict=True)]
            info = _word_info(words, [_LANGUAGES[x] for x in new[:, 2].tolist()])
            self.info = [np.concatenate((old, part)) for old, part in
                         zip(self.info, info, strict=True)]
        return ends, ids


def _prose_facts(text: pl.Series, lang: np.ndarray, rows: np.ndarray, every_word: np.ndarray,
                 vocabulary: _Vocabulary) -> list[tuple[np.ndarray, np.ndarray]]:
    """(row, token) of the content, role and order tokens of the prose ``text`` (row
    ``rows[i]``, language ``_LANGUAGES[lang[i]]``)."""
    ends, ids = vocabulary.words(strip_layout(text.fill_null("")), lang)
    if ids.shape[0] == 0:
        return []
    with interpreted.quiet():
        tok_rows, tokens, order_rows, sides, pivots = vocabulary.kernel.row_tokens(
            ends, ids, rows, every_word, *vocabulary.info)
    parts = [(tok_rows, tokens)]
    if order_rows.shape[0]:
        parts.extend(_order_tokens(order_rows, sides[:, 0], pivots, sides[:, 1]))
    return parts


def _order_tokens(rows: np.ndarray, before: np.ndarray, pivot: np.ndarray, after: np.ndarray
                  ) -> list[tuple[np.ndarray, np.ndarray]]:
    """The order tokens of order words (``pivot``, the hash of their canonical form) between
    the content words hashed ``before`` and ``after``: the relation, and the reversed one
    (bit 59) that a representative may not state."""
    forward = _mix(_mix(before, pivot), after)
    backward = _mix(_mix(after, pivot), before)
    low = np.uint64((1 << ORDER_REVERSED_BIT) - 1)
    kind = np.uint64(ORDER) << np.uint64(KIND_SHIFT)
    return [(rows, kind | (forward & low)),
            (rows, kind | np.uint64(1 << ORDER_REVERSED_BIT) | (backward & low))]


CHUNK_BYTES = 8 << 20


def word_tokenizer(size: int) -> types.ModuleType:
    """:mod:`arrowdedup.facts.content_jit` for ``size`` bytes of prose, or its interpreted twin:
    the fact scanner's bound (:data:`arrowdedup.facts.guard.TWIN_MAX_BYTES`; the tokenizer's twin
    reads ~1 µs a byte, a fifth of the scanner's), so that the compile stage, which warms the
    scanner past that bound, warms the tokenizer with it."""
    return interpreted.module("arrowdedup.facts.content_jit", size, fact_tables.TWIN_MAX_BYTES)


def _runs(keys: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) of each run of equal values in the non-decreasing ``keys``."""
    edges = np.flatnonzero(np.diff(keys)) + 1
    bounds = [0, *edges.tolist(), int(keys.shape[0])]
    return list(itertools.pairwise(bounds))


def language_keys(language: pl.Series | None, n: int) -> pl.Series:
    """The function-word list of each row (:func:`arrowdedup.facts.function_words.language_key`)."""
    if language is None:
        return pl.Series("lang", [DEFAULT_LANGUAGE] * n, dtype=pl.String)
    primary = language.cast(pl.String).str.to_lowercase().str.split("-").list.first() \
        .str.split("_").list.first()
    listed = sorted(BY_LANGUAGE)
    return pl.select(
        pl.when(primary.is_in(listed)).then(primary).otherwise(pl.lit(DEFAULT_LANGUAGE))
    ).to_series().alias("lang")


_JITTED = "arrowdedup.facts.content_jit"


def _in_threads(read: Callable[[list[np.ndarray]], list[tuple[np.ndarray, np.ndarray]]],
                pieces: list[np.ndarray], threads: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``read`` of the pieces in ``threads`` runs of consecutive pieces, each in a thread of
    its own (the jitted passes release the GIL), each with its own vocabulary; the parts in
    piece order, whatever the thread count."""
    groups = [g.tolist() for g in np.array_split(np.arange(len(pieces)), min(threads,
                                                                               len(pieces)))]
    runs = [[pieces[i] for i in g] for g in groups if g]
    if len(runs) <= 1:
        return read(pieces)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        return [part for done in pool.map(read, runs) for part in done]


def content_facts(text: pl.Series, *, segment_type: pl.Series | None,
                  language: pl.Series | None, skip: np.ndarray | None = None,
                  threads: int = 2) -> tuple[np.ndarray, np.ndarray] | None:
    """(row, value) of every content-coverage token of ``text``; None when there is none.

    ``skip`` (bool per row) marks rows that need none (unguarded segment types). Pieces of
    the prose are read in up to ``threads`` threads (the result does not depend on it).
    """
    parts = content_parts(text, segment_type=segment_type, language=language, skip=skip,
                          threads=threads)
    if not parts:
        return None
    return (np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False),
            np.concatenate([p[1] for p in parts]).astype(np.uint64, copy=False))


def content_parts(text: pl.Series, *, segment_type: pl.Series | None,
                  language: pl.Series | None, skip: np.ndarray | None = None,
                  threads: int = 2) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`content_facts` as the (rows, values) parts it joins, none of them empty (the
    signatures join them with the scanner's facts without a copy of their own)."""
    n = text.len()
    if n == 0:
        return []
    text = text.cast(pl.String).fill_null("")
    kinds = segment_type.cast(pl.String) if segment_type is not None else None
    is_code = (kinds.eq("code").fill_null(False).to_numpy().astype(bool)
               if kinds is not None else np.zeros(n, dtype=bool))
    wanted = np.ones(n, dtype=bool) if skip is None else ~skip
    langs = language_keys(language, n)
    code_rows = np.flatnonzero(is_code & wanted)
    prose_rows = np.flatnonzero(~is_code & wanted)
    if code_rows.shape[0] == 0:
        return _prose_parts(text, kinds, langs, prose_rows, threads)

    def code() -> list[tuple[np.ndarray, np.ndarray]]:
        return code_facts(text.gather(code_rows), code_rows.astype(np.int64))

    if threads < 2 or prose_rows.shape[0] == 0 or n < 4096:
        return [p for p in code() if p[0].shape[0]] + _prose_parts(text, kinds, langs,
                                                                     prose_rows, threads)
    from concurrent.futures import ThreadPoolExecutor

    # The code lines (Polars expressions, which release the GIL) beside the prose.
    with ThreadPoolExecutor(max_workers=1) as pool:
        coded = pool.submit(code)
        prose = _prose_parts(text, kinds, langs, prose_rows, threads)
        return [p for p in coded.result() if p[0].shape[0]] + prose


def _prose_parts(text: pl.Series, kinds: pl.Series | None, langs: pl.Series,
                 prose_rows: np.ndarray, threads: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`content_parts` of the prose rows ``prose_rows`` of ``text``."""
    n = text.len()
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    if prose_rows.shape[0]:
        # Headings and titles (the guard's strict types) compare every word, both ways.
        strict_types = sorted(fact_tables.STRICT_TYPES)
        strict = (kinds.is_in(strict_types).fill_null(False).to_numpy().astype(bool)
                  if kinds is not None else np.zeros(n, dtype=bool))
        # In pieces of at most CHUNK_BYTES of text: a piece's word ids and tokens cost up to
        # ~20 bytes a byte of text, so memory stays bounded whatever the input (a 100 MB table
        # file included). The pieces a thread reads share one vocabulary: each word is
        # classified once a thread.
        sizes = text.gather(prose_rows).str.len_bytes().fill_null(0).to_numpy()
        piece = np.cumsum(sizes) // CHUNK_BYTES
        lang = langs.cast(pl.Enum(list(_LANGUAGES))).to_physical().to_numpy().astype(np.int64)
        kernel = word_tokenizer(int(sizes.sum()))
        pieces = [prose_rows[start:stop] for start, stop in _runs(piece)]

        def read(group: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
            vocabulary = _Vocabulary(kernel)
            return [part for rows in group for part in _prose_facts(
                text.gather(rows), lang[rows], rows.astype(np.int64), strict[rows],
                vocabulary)]

        parts.extend(_in_threads(read, pieces, threads if kernel.__name__ == _JITTED else 1))
    return [p for p in parts if p[0].shape[0]]
