"""The fact guard of SPEC section 2 step 4: a segment merges only into a representative that
states every fact it states, and contradicts none.

Cosine measures topic and wording, not facts: on real technical documents most cosine-only
merges dropped a flag, a number or an identifier. So each segment gets a *fact signature*, the
set of tokens an answer can hinge on, and every decision path checks it after the cosine test.

The signature (column ``fact_signature``, Arrow ``list<uint64>``) is the sorted, unique list of
64-bit fact hashes of the segment. The top three bits of a hash are its kind
(:data:`KIND_NAMES`), the low 61 bits the XXH64 of the normalised token:

- ``number``: numbers with a unit from a closed list (``217MB`` = ``217 mb``), thousands
  separators removed by the language's convention (``10,000`` = ``10000``; German ``10.000``,
  decimal comma ``1,5`` = ``1.5``), leading zeros dropped, small number words as digits; a
  sign in front (``#3``, ``~26%``, ``$5``) is not part of the number;
- ``date``: month and weekday names of the supported languages, clock times (``10:30``);
- ``version``: dotted numbers, which keep their form (``3.5`` ≠ ``3.50``; ``v3.5`` = ``3.5``);
- ``identifier``: flags, paths, URLs, IP addresses, ``snake_case``, ``camelCase`` /
  ``PascalCase``, dotted names, words with digits (``node0``), backticked or quoted terms,
  acronyms of three letters or more (``TCP``, ``GET``, ``MUST``; ``APIs`` = ``API``; hashed
  as the capitalised word, so ``WARNING`` is found as ``Warning`` in the other segment), and
  in ``code`` segments every token. In scripts without case (Han, kana, Hangul, Bengali,
  Devanagari, ...) the terms: each pair of adjacent Han characters or Hangul syllables, each
  katakana word and each word of the other scripts (:func:`fact_scan.wide_terms` says why);
- ``name``: a capitalised word that does not start a sentence, in languages that do not
  capitalise ordinary words (German does: there, capitalised words are never names), and not
  in a Title Case text (most words capitalised); all-caps acronyms are not names;
- ``opposite``: a word of the closed list :data:`OPPOSITES` (enable/disable, min/max,
  leader/follower, odd/even, incoming/outgoing, single/multiple, old/new, …, in the languages
  of the shared corpus); it refuses a merge when the other segment says its antonym (a
  contradiction), or, for the strict types, when the other segment does not say it too;
- ``negation``: one token for "the segment negates" (``not``, ``n't``, ``never``, ``nicht``,
  ``kein``, ``ne … pas``, ``不``, …): ``do not`` and ``don't`` are the same fact.

A hyphenated word that no list knows whole states the number words, opposites and dates of its
parts: "four-stage" the number 4 (as "four stage" does), "server-side" the opposite "server",
"read-only" the opposite "read" (merge audits of the shared corpus found "a four-stage
pipeline" merged into "a three-stage pipeline", and server-side into client-side metrics).

Two facts come from outside the text scanner: each line of a ``table_row`` segment (a row is a
record, "column: value" per line; lower case, white space folded) is an ``identifier``, and so
is each inline code term that extraction passes beside the text (``code_terms``: Markdown drops
the backticks from the visible text).

Kind 0 (``mention``) is not a fact: a capitalised word at a sentence start. It lets a name of one
segment be found in the other when it starts a sentence there ("Obama met Putin" states the name
"Putin", which "Putin met Obama" mentions). A word in capitals is found the same way, as a
mention, a name or an identifier of the same word capitalised ("WARNING" = "Warning").

The rule (:func:`arrowdedup.facts.conflict_jit.conflict`), for a segment ``a`` absorbed by a
representative ``b``:

- ``heading`` segments (the *strict* types): the two fact sets are equal, and so are their
  words (:mod:`arrowdedup.facts.content`);
- ``code`` segments: compared by line, white space aside: every line of ``a`` is a line of
  ``b``, which adds only comment or output lines (:mod:`arrowdedup.facts.content`);
- other types: every fact of ``a`` is in ``b`` (``b`` may say more), ``b`` negates only if
  ``a`` does, and ``b`` covers ``a``'s content (its content words, the places of its
  opposites and negations, its orders: :mod:`arrowdedup.facts.content`; names are found in any
  case there, since letter case is layout);
- ``page_furniture`` (running headers and footers): no guard;
- then, for every guarded type, section context: two segments of one document in sibling
  sections (neither heading path starts the other) merge only if their texts are the same
  apart from layout (letter case, punctuation, markup, white space)
  (:mod:`arrowdedup.facts.sections`; the signatures computed for a frame with ``doc_id`` and
  ``section`` hold its section tokens; :func:`fact_conflict`, given two texts, has none).

The reason a merge is refused is the kind of the first fact that fails, in kind order, then
``content``, then ``section``. List markers and markup never reach the scanner (layout is not
content).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays.hashing import string_buffers
from ..errors import SchemaError
from ..jit import interpreted
from .tables import (
    CAPITALISED_NOUNS,
    CJK_NEGATIONS,
    CODE,
    CODE_TYPES,
    DATE,
    DATE_WORDS,
    DECIMAL_COMMA,
    EQUAL,
    FACT_COLUMN,
    IDENTIFIER,
    KIND_NAMES,
    KIND_SHIFT,
    LOW_BITS,
    MODE_OF,
    NAME,
    NEGATION,
    NEGATIONS,
    NUMBER_WORDS,
    OFF,
    OPPOSITE,
    POLAR_SIDES,
    POLAR_WORDS,
    STRICT_TYPES,
    SUBSET,
    TWIN_MAX_BYTES,
    TWIN_MAX_FACTS,
    UNGUARDED_TYPES,
    UNIT_CANON,
    UNITS,
)


def scan_size(data: np.ndarray) -> int:
    """The size of ``data`` for the scanner's choice: bytes, those of characters outside
    ASCII three times over."""
    return int(data.shape[0] + 2 * np.count_nonzero(data >= 0x80))


def _scanner(size: int) -> types.ModuleType:
    """The fact scanner for a text of ``size`` (:func:`scan_size`): jitted, or its twin."""
    return interpreted.module("arrowdedup.facts.scan_jit", size, TWIN_MAX_BYTES)


def _guard(size: int) -> types.ModuleType:
    """:mod:`arrowdedup.facts.conflict_jit` for ``size`` values, or its interpreted twin."""
    return interpreted.module("arrowdedup.facts.conflict_jit", size, TWIN_MAX_FACTS)


def __getattr__(name: str) -> Any:
    # The jitted guard, for the kernels' Numba code (``from .facts import conflict``).
    if name in ("conflict", "_conflict_many"):
        from . import conflict_jit as _facts_jit

        return getattr(_facts_jit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _hash_str(word: str) -> int:
    # xxhash itself: what :func:`arrowdedup.arrays.hashing.xxh64` computes, without an Arrow array
    # per word (the tables hash ~800 words in a fresh process).
    import xxhash

    return int(xxhash.xxh64_intdigest(word.encode()))


def _fact_hash(kind: int, body: str) -> int:
    return (_hash_str(body) & int(LOW_BITS)) | (kind << int(KIND_SHIFT))


@functools.cache
def _tables() -> tuple[np.ndarray, ...]:
    """The scanner's sorted lookup tables (built once per process)."""
    words: dict[int, int] = {}
    for form, digits in NUMBER_WORDS.items():
        words[_hash_str(form)] = int(digits)  # kind 0: a number word's value
    for form in NEGATIONS:
        words[_hash_str(form)] = _fact_hash(NEGATION, "not")
    for form, (pair_id, side_id) in POLAR_SIDES.items():
        words[_hash_str(form)] = (OPPOSITE << int(KIND_SHIFT)) | (pair_id << 1) | side_id
    for form, canon in DATE_WORDS.items():
        words[_hash_str(form)] = _fact_hash(DATE, canon)
    keys = np.array(sorted(words), dtype=np.uint64)
    values = np.array([words[int(k)] for k in keys], dtype=np.uint64)
    canon_units = sorted({UNIT_CANON.get(u, u) for u in UNITS})
    unit_pos = {u: i for i, u in enumerate(canon_units)}
    units = {_hash_str(u): unit_pos[UNIT_CANON.get(u, u)] for u in UNITS}
    unit_keys = np.array(sorted(units), dtype=np.uint64)
    unit_index = np.array([units[int(k)] for k in unit_keys], dtype=np.int64)
    unit_bytes, unit_offsets = _packed(canon_units)
    neg_bytes, neg_offsets = _packed(CJK_NEGATIONS)
    # The scanner's cheap tests before it hashes a word, on every lower-case form: bit 1 marks
    # its (byte length, first byte, last byte), bit 2 its (byte length, second byte, last but
    # one byte).
    word_filter = np.zeros((48, 256, 256), dtype=np.uint8)
    for form in [*NUMBER_WORDS, *NEGATIONS, *POLAR_WORDS, *DATE_WORDS]:
        raw = form.encode()
        if len(raw) < word_filter.shape[0]:
            word_filter[len(raw), raw[0], raw[-1]] |= 1
            if len(raw) >= 2:
                word_filter[len(raw), raw[1], raw[-2]] |= 2
    # The list words of unsegmented scripts, looked for inside a wide piece.
    wide = sorted(form for form in POLAR_SIDES if _unsegmented(form))
    wide_bytes, wide_offsets = _packed(wide)
    wide_values = np.array([words[_hash_str(w)] for w in wide], dtype=np.uint64)
    return (keys, values, unit_keys, unit_index, unit_offsets, unit_bytes, neg_bytes,
            neg_offsets, word_filter, wide_bytes, wide_offsets, wide_values)


def _packed(words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``words`` as the scanner reads a list of forms: their UTF-8 bytes one after another,
    and the offsets where each starts (one past the last at the end)."""
    raw = [w.encode() for w in words]
    offsets = np.cumsum([0] + [len(x) for x in raw]).astype(np.int64)
    return np.frombuffer(b"".join(raw), dtype=np.uint8).copy(), offsets


def _unsegmented(form: str) -> bool:
    """Is ``form`` written in a script without spaces between words (kana, Han, Hangul)?"""
    return any("\u3040" <= ch <= "\u30ff" or "\u3400" <= ch <= "\u9fff" or
               "\uac00" <= ch <= "\ud7af" for ch in form)


_SIGNATURE_TYPE = pl.List(pl.UInt64)


def fact_modes(segment_type: pl.Series | None, n: int) -> np.ndarray:
    """The guard mode of each row (``SUBSET``, ``EQUAL`` or ``OFF``) from its segment type."""
    if segment_type is None:
        return np.zeros(n, dtype=np.int8)
    if n <= 4096:
        # A ranked list of ~100 results: a Python pass costs less than one Polars call.
        names = segment_type if segment_type.dtype == pl.String else \
            segment_type.cast(pl.String)
        return np.array([MODE_OF.get(t, int(SUBSET)) for t in names.to_list()],
                        dtype=np.int8).reshape(n)
    types = segment_type.cast(pl.String)
    modes = (
        pl.select(
            pl.when(types.is_in(sorted(STRICT_TYPES))).then(pl.lit(int(EQUAL)))
            .when(types.is_in(sorted(CODE_TYPES))).then(pl.lit(int(CODE)))
            .when(types.is_in(sorted(UNGUARDED_TYPES))).then(pl.lit(int(OFF)))
            .otherwise(pl.lit(int(SUBSET))).cast(pl.Int8)
        ).to_series()
    )
    return modes.to_numpy().astype(np.int8)


def _language_flags(language: pl.Series | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: decimal-comma convention, and capitalised ordinary words."""
    if language is None:
        return np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    primary = language.cast(pl.String).str.to_lowercase().str.split("-").list.first()
    comma = primary.is_in(sorted(DECIMAL_COMMA)).fill_null(False).to_numpy()
    nouns = primary.is_in(sorted(CAPITALISED_NOUNS)).fill_null(False).to_numpy()
    return comma.astype(bool), nouns.astype(bool)


def fact_signatures(text: pl.Series, *, segment_type: pl.Series | None = None,
                    language: pl.Series | None = None,
                    code_terms: pl.Series | None = None,
                    sections: tuple[pl.Series, pl.Series] | None = None) -> pl.Series:
    """The ``fact_signature`` column (``list<uint64>``) of a text column, vectorised.

    ``code_terms`` (``list<str>`` per row, optional) are inline code spans that the text no
    longer marks (extraction drops the backticks of Markdown ``code``): each is an
    ``identifier``, as if it were still backticked in the text. ``sections`` are the rows'
    ``doc_id`` and ``section`` columns, whose section tokens join the signature
    (:mod:`arrowdedup.facts.sections`).
    """
    return signature_series(*signature_arrays(text, segment_type=segment_type,
                                              language=language, code_terms=code_terms,
                                              sections=sections))


def signature_arrays(text: pl.Series, *, segment_type: pl.Series | None = None,
                     language: pl.Series | None = None,
                     code_terms: pl.Series | None = None,
                     sections: tuple[pl.Series, pl.Series] | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """CSR form of the signatures: row ``r`` has ``values[offsets[r]:offsets[r + 1]]``: the
    facts of the scanner, the line facts of table rows and code terms, the content tokens
    of :mod:`arrowdedup.facts.content` and, given ``sections`` (``doc_id``, ``section``), the
    section tokens of :mod:`arrowdedup.facts.sections`."""
    n = text.len()
    comma, nouns = _language_flags(language, n)
    kinds = segment_type.cast(pl.String) if segment_type is not None else None
    code = (
        kinds.eq("code").fill_null(False).to_numpy().astype(bool)
        if kinds is not None else np.zeros(n, dtype=bool)
    )
    if n == 0:
        return np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.uint64)
    text = text.cast(pl.String)
    plain = without_layout(text, code)
    offsets, data = string_buffers(plain.to_arrow())
    scanner = _scanner(scan_size(data[offsets[0]:offsets[-1]]))
    with interpreted.quiet():
        # The scanner sorts and uniques each row's facts as it ends the row.
        ends, values = scanner.scan(offsets, data, code, comma, nouns, *_tables())
    if kinds is not None:
        ends, values = _heading_names_as_mentions(ends, values, kinds)
    modes = fact_modes(kinds, n)
    from .content import content_parts

    extra = [part for part in (_cell_facts(offsets, data, kinds, scanner),
                               _term_facts(code_terms, n)) if part is not None]
    extra += content_parts(text, segment_type=kinds, language=language, skip=modes == OFF)
    from .entries import entry_parts
    from .sections import lead_ins

    unguarded = (modes == OFF) | code
    lead = lead_ins(plain).to_numpy().astype(bool)
    extra.append(_lead_part(plain, lead & ~unguarded))
    extra.append(entry_parts(plain, kinds, unguarded, lead))
    if sections is not None:
        from .sections import section_facts

        extra.append(section_facts(*sections, text))
    if not extra:
        return ends, values
    return _with_facts(ends, values, n, extra)


# List markers and their numbers, and markup, are layout (SPEC §2): "2. Create a bucket"
# states no number, "<b>setup</b>" no path.
_LIST_MARKER = r"(?m)^[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+"


def without_layout(text: pl.Series, code: np.ndarray) -> pl.Series:
    """``text`` with list markers at line starts and markup (:data:`content_words.MARKUP`)
    removed, except in code: what the scanner reads."""
    from .content import MARKUP, word_tokenizer

    # The regex runs only where it may match: a line that may start with a list marker
    # (a jitted pass), or markup's first characters ("{{", "<").
    offsets, data = string_buffers(text.to_arrow())
    with interpreted.quiet():
        maybe = word_tokenizer(int(offsets[-1] - offsets[0])).list_marker_candidates(offsets, data)
    maybe |= text.str.contains_any(["{{", "<"]).fill_null(False).to_numpy()
    maybe &= ~code
    rows = np.flatnonzero(maybe)
    if rows.shape[0] == 0:
        return text
    layout = f"{_LIST_MARKER}|{MARKUP}"
    rows = rows[text.gather(rows).str.contains(layout).fill_null(False).to_numpy()]
    if rows.shape[0] == 0:
        return text
    return text.scatter(rows, text.gather(rows).str.replace_all(_LIST_MARKER, "")
                        .str.replace_all(MARKUP, " "))


def _heading_names_as_mentions(ends: np.ndarray, values: np.ndarray, kinds: pl.Series
                               ) -> tuple[np.ndarray, np.ndarray]:
    """In headings, capitals are style (Title Case comes and goes), not names: a heading's
    names become mentions, so that "tool import" and "tool import Command Reference" differ
    only in content (SPEC §2, "letter case in any word that is not an identifier")."""
    heading = kinds.is_in(sorted(STRICT_TYPES)).fill_null(False).to_numpy()
    if not heading.any():
        return ends, values
    row_of = np.repeat(np.arange(heading.shape[0]), np.diff(ends))
    name = (values >> KIND_SHIFT) == np.uint64(NAME)
    change = name & heading[row_of]
    if not change.any():
        return ends, values
    values = values.copy()
    values[change] &= LOW_BITS
    guard = _guard(values.shape[0])
    with interpreted.quiet():
        return guard._sorted_unique_csr(ends, values)


# A table row is a record: each "column: value" line is a fact of it, so two rows of one
# table that differ in any cell ("Service: Shipping" / "Service: Checkout") do not merge, while
# a row repeated with other spacing or case still does. Measured on the shared corpus: of the
# table-row merges the guard let through, most paired rows with different cell values.
TABLE_ROW = "table_row"
# The scanner's limit for a backticked span (bytes of content): longer spans are prose.
CODE_TERM_MAX_BYTES = 80


def _line_facts(rows: pl.Series, lines: pl.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """(row, identifier fact) for each non-empty normalised line; None when there is none."""
    frame = pl.DataFrame({"row": rows, "line": lines}).filter(pl.col("line").str.len_bytes() > 0)
    if frame.height == 0:
        return None
    from ..arrays.hashing import xxh64

    hashes = xxh64(frame.get_column("line"))
    facts = (hashes & LOW_BITS) | (np.uint64(IDENTIFIER) << KIND_SHIFT)
    return frame.get_column("row").to_numpy().astype(np.int64), facts


def _cell_facts(offsets: np.ndarray, data: np.ndarray, segment_types: pl.Series | None,
                scanner: types.ModuleType) -> tuple[np.ndarray, np.ndarray] | None:
    """The line facts of the ``table_row`` rows: lower case, white space folded."""
    if segment_types is None:
        return None
    rows = np.flatnonzero(segment_types.eq(TABLE_ROW).fill_null(False).to_numpy())
    if rows.shape[0] == 0:
        return None
    with interpreted.quiet():
        return scanner.line_facts(
            offsets, data, rows.astype(np.int64), IDENTIFIER)


def _term_facts(terms: pl.Series | None, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Identifier facts of inline code terms, hashed as the scanner hashes a backticked span
    (white space folded to one space, trimmed)."""
    if terms is None or terms.null_count() == n:
        return None
    exploded = pl.DataFrame({
        "row": pl.int_range(n, dtype=pl.Int64, eager=True), "term": terms.cast(pl.List(pl.String)),
    }).explode("term").drop_nulls("term")
    folded = exploded.get_column("term").str.replace_all(r"\s+", " ").str.strip_chars()
    folded = folded.set(folded.str.len_bytes() > CODE_TERM_MAX_BYTES, "")
    return _line_facts(exploded.get_column("row"), folded)


def _with_facts(offsets: np.ndarray, values: np.ndarray, n: int,
                extra: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The CSR signatures with further (row, fact) pairs, each row sorted and unique again."""
    extra = [(np.ascontiguousarray(r, dtype=np.int64), np.ascontiguousarray(f, dtype=np.uint64))
             for r, f in extra]
    total = sum(r.shape[0] for r, _ in extra)
    guard = _guard(int(values.shape[0] + total))
    with interpreted.quiet():
        # Grouped by row by a counting sort over the parts as they are (an argsort of the
        # joined parts, ~15 content tokens a row, cost more than the merge).
        extra_offsets = np.zeros(n + 1, dtype=np.int64)
        for r, _ in extra:
            guard._count_rows(r, extra_offsets)
        np.cumsum(extra_offsets, out=extra_offsets)
        at = extra_offsets[:n].copy()
        grouped = np.empty(total, dtype=np.uint64)
        for r, f in extra:
            guard._place(r, f, at, grouped)
        return guard._merge_csr(
            offsets, values, extra_offsets, grouped)


def conflict_reasons(offsets: np.ndarray, values: np.ndarray, modes: np.ndarray,
                     a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`conflict` for pairs of rows (int8 kind codes)."""
    a = np.asarray(a, np.int64)
    with interpreted.quiet():
        return _guard(a.shape[0])._conflict_many(
            offsets, values, modes, a, np.asarray(b, np.int64))


def fact_conflict(a: str, b: str, *, segment_type: str | None = None,
                  language: str | None = None) -> str | None:
    """The reason segment ``a`` may not merge into representative ``b`` under the fact guard
    (``"number"``, ``"date"``, ``"version"``, ``"identifier"``, ``"name"``, ``"negation"``,
    ``"opposite"``), or None when ``b`` states every fact of ``a`` and contradicts none.

    ``segment_type`` is the type of both segments (``code`` and ``heading`` need equal fact
    sets); ``language`` a BCP-47 tag (number conventions, which capitalised words are names).
    """
    text = pl.Series([a, b], dtype=pl.String)
    types = pl.Series([segment_type] * 2, dtype=pl.String) if segment_type else None
    langs = pl.Series([language] * 2, dtype=pl.String) if language else None
    offsets, values = signature_arrays(text, segment_type=types, language=langs)
    modes = fact_modes(types, 2)
    kind = int(conflict_reasons(offsets, values, modes, np.zeros(1), np.ones(1))[0])
    return KIND_NAMES[kind] if kind else None


def signatures_of(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """CSR signatures of a segments frame: its ``fact_signature`` column when present (any
    order; sorted here), used as it is; else computed from ``text``, with the section tokens
    of its ``doc_id`` and ``section`` columns when it has both (:mod:`arrowdedup.facts.sections`).
    A stored signature holds its section tokens already (extraction and ingestion write them),
    so retrieval reads them and never computes them per query."""
    if FACT_COLUMN in frame.columns:
        return signature_column_arrays(frame.get_column(FACT_COLUMN))
    sections = (frame.get_column("doc_id"), frame.get_column("section")) \
        if "section" in frame.columns and "doc_id" in frame.columns else None
    return signature_arrays(
        frame.get_column("text"),
        segment_type=frame.get_column("segment_type") if "segment_type" in frame.columns
        else None,
        language=frame.get_column("language") if "language" in frame.columns else None,
        sections=sections)


def _lead_part(text: pl.Series, lead: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lead-in token of each guarded prose row that introduces what follows it (``lead``,
    :func:`arrowdedup.facts.sections.lead_ins`): kind 12 and the form of its text
    (:func:`arrowdedup.facts.sections.forms`), so that two lead-ins that differ only in layout
    ("- Update Pip:" and "1. Update pip:") are the same statement."""
    from .sections import forms
    from .tables import LEAD

    rows = np.flatnonzero(lead).astype(np.int64)
    kind = np.uint64(LEAD) << KIND_SHIFT
    return rows, forms(text.fill_null(""), rows) | kind


def signature_column_arrays(column: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """CSR form of a ``fact_signature`` column (a list of 64-bit integers per row; null is no
    fact). Refuses any other type with the fix."""
    if column.dtype != _SIGNATURE_TYPE:
        inner = column.dtype.inner if isinstance(column.dtype, (pl.List, pl.Array)) else None
        if inner not in (pl.UInt64, pl.Int64):
            raise SchemaError(
                f"column {FACT_COLUMN!r} has type {column.dtype}, expected a list of uint64 "
                "fact hashes; drop the column to have it computed from the text"
            )
        column = column.cast(_SIGNATURE_TYPE)
    arr = column.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count == 0 and (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        # The list offsets as they are (a slice starts past 0), no per-row work in Python.
        raw = arr.offsets.to_numpy().astype(np.int64)
        values = arr.values.to_numpy()[raw[0] : raw[-1]]
    else:
        lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
        raw = np.zeros(len(arr) + 1, dtype=np.int64)
        np.cumsum(lengths, out=raw[1:])
        values = arr.flatten().to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
    if rows_sorted_unique(raw, values):
        # What the scanner and the store write: checked with NumPy, since for ~100 ranked
        # results the interpreted twin's row loop cost as much as the rest of dedupe_ranked.
        return raw - raw[0], values.copy()
    guard = _guard(values.shape[0])
    if guard.__name__ == "arrowdedup.facts.conflict_jit":
        # ~100 ranked results: the warning filter of quiet() would cost as much as the call.
        return guard._sorted_unique_csr(raw, np.ascontiguousarray(values))
    with interpreted.quiet():
        return guard._sorted_unique_csr(
            raw, np.ascontiguousarray(values))


def rows_sorted_unique(offsets: np.ndarray, values: np.ndarray) -> bool:
    """Whether each CSR row of ``values`` (``values[offsets[r] - offsets[0]:...]``) is
    strictly increasing: the case in which ``_sorted_unique_csr`` only copies."""
    if values.shape[0] < 2:
        return True
    rising = values[1:] > values[:-1]
    starts = offsets[1:-1] - offsets[0]
    # A row's first value need not exceed the previous row's last one.
    rising[starts[(starts > 0) & (starts < values.shape[0])] - 1] = True
    return bool(rising.all())


def signature_series(offsets: np.ndarray, values: np.ndarray) -> pl.Series:
    """The ``fact_signature`` column of CSR signatures."""
    arr = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()),
                                        pa.array(values, pa.uint64()))
    return pl.Series(FACT_COLUMN, arr.cast(pa.list_(pa.uint64())))
