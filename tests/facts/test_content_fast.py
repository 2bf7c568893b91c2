"""The content tokens of the jitted tokenizer (:mod:`arrowdedup.facts.content_jit`) and of its
interpreted twin are those of the word table (:func:`arrowdedup.facts.content.word_table`,
Polars expressions over every word), on generated text and on every language of the shared
corpus. The oracle below is the implementation the tokenizer replaced (issue 44, item 6),
kept here to hold it to the same bits."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from arrowdedup.facts import content as cw
from arrowdedup.facts import guard as F
from arrowdedup.facts import tables as fact_tables
from arrowdedup.jit import interpreted
from tests.helpers import OTEL_CONTENT, need


def _relation_facts(row: np.ndarray, content: np.ndarray, stem: np.ndarray, klass: np.ndarray,
                    pair: np.ndarray, marked: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Role and order tokens of the marked words, from the content words beside them."""
    n = row.shape[0]
    index = np.arange(n)
    last = np.maximum.accumulate(np.where(content, index, -1))
    nxt = np.minimum.accumulate(np.where(content, index, n)[::-1])[::-1]
    before = np.concatenate(([-1], last[:-1]))[marked]
    after = np.concatenate((nxt[1:], [n]))[marked]
    rows = row[marked]
    before = np.where((before >= 0) & (row[np.maximum(before, 0)] == rows), before, -1)
    after = np.where((after < n) & (row[np.minimum(after, n - 1)] == rows), after, -1)
    none = np.uint64(0)
    h_before = np.where(before >= 0, stem[np.maximum(before, 0)], none)
    h_after = np.where(after >= 0, stem[np.maximum(after, 0)], none)
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    role = np.uint64(fact_tables.ROLE) << np.uint64(cw.KIND_SHIFT)
    polar = pair[marked] >= 0
    if polar.any():
        p = pair[marked][polar].astype(np.uint64) << np.uint64(cw.ROLE_PAIR_SHIFT)
        for h, bit in ((h_before, 0), (h_after, 1)):
            side = np.uint64(bit) << np.uint64(cw.ROLE_AFTER_BIT)
            parts.append((rows[polar],
                          role | side | p | (h[polar] & np.uint64(cw.ROLE_HASH_BITS))))
    negated = (klass[marked] == cw._NEGATION_WORD) & (after >= 0)
    if negated.any():
        value = role | (np.uint64(1) << np.uint64(cw.ROLE_AFTER_BIT)) | (
            np.uint64(cw.NEGATED) << np.uint64(cw.ROLE_PAIR_SHIFT))
        parts.append((rows[negated], value | (h_after[negated] & np.uint64(cw.ROLE_HASH_BITS))))
    ordered = (klass[marked] == cw._ORDER_WORD) & (before >= 0) & (after >= 0)
    if ordered.any():
        pivot = stem[marked][ordered]
        forward = cw._mix(cw._mix(h_before[ordered], pivot), h_after[ordered])
        backward = cw._mix(cw._mix(h_after[ordered], pivot), h_before[ordered])
        low = np.uint64((1 << cw.ORDER_REVERSED_BIT) - 1)
        kind = np.uint64(fact_tables.ORDER) << np.uint64(cw.KIND_SHIFT)
        parts.append((rows[ordered], kind | (forward & low)))
        parts.append((rows[ordered],
                      kind | np.uint64(1 << cw.ORDER_REVERSED_BIT) | (backward & low)))
    return parts


def oracle(text: pl.Series, segment_type: pl.Series | None, language: pl.Series | None
           ) -> set[tuple[int, int]]:
    """(row, token) of every prose row's content, role and order tokens, by the word table
    (code rows are left out: both paths take them from :func:`content_words._code_facts`)."""
    n = text.len()
    text = text.cast(pl.String).fill_null("")
    kinds = segment_type.cast(pl.String) if segment_type is not None else None
    modes = F.fact_modes(kinds, n)
    is_code = kinds.eq("code").fill_null(False).to_numpy().astype(bool) if kinds is not None \
        else np.zeros(n, dtype=bool)
    rows = np.flatnonzero(~is_code & (modes != fact_tables.OFF)).astype(np.int64)
    strict_types = sorted(fact_tables.STRICT_TYPES)
    strict = kinds.is_in(strict_types).fill_null(False).to_numpy().astype(bool) \
        if kinds is not None else np.zeros(n, dtype=bool)
    words = cw.word_table(text.gather(rows), cw.language_keys(language, n).gather(rows), rows,
                          strict[rows])
    if words.height == 0:
        return set()
    row = words.get_column("row").to_numpy()
    stem = words.get_column("stem").to_numpy()
    content = words.get_column("content").to_numpy()
    kind = np.uint64(fact_tables.CONTENT) << np.uint64(cw.KIND_SHIFT)
    parts = [(row[content], (stem[content] & np.uint64(cw.LOW)) | kind)]
    marked = np.flatnonzero(words.get_column("marked").to_numpy())
    if marked.shape[0]:
        parts.extend(_relation_facts(row, content, stem, words.get_column("klass").to_numpy(),
                                     words.get_column("pair").to_numpy(), marked))
    return {(int(r), int(v)) for rs, vs in parts for r, v in zip(rs, vs, strict=True)}


def fast(text: pl.Series, segment_type: pl.Series | None, language: pl.Series | None
         ) -> set[tuple[int, int]]:
    n = text.len()
    kinds = segment_type.cast(pl.String) if segment_type is not None else None
    modes = F.fact_modes(kinds, n)
    got = cw.content_facts(text, segment_type=kinds, language=language,
                           skip=modes == fact_tables.OFF)
    if got is None:
        return set()
    code = np.uint64(fact_tables.CODE_COMMAND) << np.uint64(cw.KIND_SHIFT)
    return {(int(r), int(v)) for r, v in zip(*got, strict=True) if v < code}


def check(values: list[str], types: list[str | None] | None, langs: list[str | None] | None
          ) -> None:
    text = pl.Series(values, dtype=pl.String)
    kinds = pl.Series(types, dtype=pl.String) if types is not None else None
    language = pl.Series(langs, dtype=pl.String) if langs is not None else None
    expected = oracle(text, kinds, language)
    for kind in (interpreted.KERNEL, interpreted.TWIN):
        with interpreted.forced(kind):
            assert fast(text, kinds, language) == expected, kind


# Words and marks the rules treat specially, mixed with arbitrary text.
PIECES = [
    "enable", "Disabled", "not", "don't", "doesn’t", "l'exportateur", "dell'agente", "Santa's",
    "over", "than", "instead", "vs", "versus", "->", "=>", "→", "⇒", "⟶", "!=", "==", "<=", ">=",
    "=", "<", ">", "≠", "≤", "≥", "==>", "<=>", "!==", "-->", "mode A", "ML", "Ab", "x", "I",
    "allow-widget-type", "tool deny-x", "twenty-one", "Forty-Two", "the config.yaml file",
    "the flag --all", "the `send` method", "file `a b`", "snake_case value", "camelCase key",
    "<b>bold</b>", "{{< note >}}", "[link](https://x.org/a)", "> quoted", "- item", "1. step",
    "$ make install", "# comment", "Straße", "ÉTÉ", "façade", "naïve", "ΟΔΟΣ", "Σίσυφος",
    "İstanbul", "Жук", "не", "东京", "不", "ない", "한국어", "বাংলা", "\u0301a", "e\u0301",
    "\x00", "\x07", "\t", "\n", "\r\n", "\u00a0", "\u200b", "\u3000", "🙂", "ſixty-one",
    "KEY", "grey", "colour", "children", "ran", "built", "\u07fa", "\u07ff", "\u0800",
]
texts = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=10)), max_size=14).map(
    lambda xs: " ".join(xs))
TYPES = [None, "paragraph", "heading", "title", "code", "page_furniture", "table_row",
         "list_item"]
LANGS = [None, "en", "de", "fr-CA", "es", "pt_BR", "ru", "uk", "pl", "zh", "xx"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(texts, st.sampled_from(TYPES), st.sampled_from(LANGS)), min_size=1,
                max_size=8))
def test_the_tokenizer_gives_the_word_tables_tokens(rows) -> None:
    values, types, langs = (list(x) for x in zip(*rows, strict=True))
    check(values, types, langs)


def test_the_tokenizer_on_every_piece_and_without_types_or_languages() -> None:
    check(PIECES, None, None)
    check([" ".join(PIECES)] * 3, ["paragraph", "heading", "code"], ["en", "de", "fr"])


def test_every_letter_below_u0800_and_around_it() -> None:
    chars = [chr(c) for c in range(1, 0x820) if not 0xD800 <= c < 0xE000]
    words = ["a" + c + "b" for c in chars] + ["A'" + c for c in chars] + [c + "’s" for c in chars]
    check([" ".join(words[i:i + 64]) for i in range(0, len(words), 64)], None, None)


def corpus_pages(per_language: int = 12) -> tuple[list[str], list[str]]:
    texts: list[str] = []
    langs: list[str] = []
    for folder in sorted(p for p in need(OTEL_CONTENT).iterdir() if p.is_dir()):
        pages = sorted(folder.rglob("*.md"))[:per_language]
        texts += [p.read_text(encoding="utf-8", errors="replace") for p in pages]
        langs += [folder.name] * len(pages)
    return texts, langs


def test_the_tokenizer_on_pages_of_every_language_of_the_shared_corpus() -> None:
    texts, langs = corpus_pages()
    assert len(set(langs)) >= 5
    # Whole pages, and their blocks as headings and paragraphs.
    blocks = [b for t in texts for b in t.split("\n\n") if b.strip()]
    block_langs = [lang for t, lang in zip(texts, langs, strict=True)
                   for b in t.split("\n\n") if b.strip()]
    text = pl.Series(texts + blocks, dtype=pl.String)
    types = ["paragraph"] * len(texts) + [("heading" if b.startswith("#") else "paragraph")
                                          for b in blocks]
    language = pl.Series(langs + block_langs, dtype=pl.String)
    kinds = pl.Series(types, dtype=pl.String)
    expected = oracle(text, kinds, language)
    assert len(expected) > 10_000
    with interpreted.forced(interpreted.KERNEL):
        assert fast(text, kinds, language) == expected


def test_a_vocabulary_carried_across_pieces(monkeypatch) -> None:
    """Pieces of the text (``CHUNK_BYTES``) share one vocabulary: words met in an earlier
    piece keep their ids and classes."""
    texts, langs = corpus_pages(4)
    monkeypatch.setattr(cw, "CHUNK_BYTES", 2048)
    text = pl.Series(texts, dtype=pl.String)
    language = pl.Series(langs, dtype=pl.String)
    expected = oracle(text, None, language)
    with interpreted.forced(interpreted.KERNEL):
        assert fast(text, None, language) == expected


def old_strip_layout(text: pl.Series) -> pl.Series:
    """:func:`content_words.strip_layout` as it was before the typed pattern ran only on the
    candidate rows of :func:`arrowdedup.facts.content_jit.typed_candidates`."""
    for pattern, literals in cw._LAYOUT:
        text = cw._replace_where(text, text.str.contains_any(list(literals)), pattern, " ")
    nouns = text.str.contains_any(list(cw._TYPE_NOUN_WORDS), ascii_case_insensitive=True)
    return cw._replace_where(text, nouns, cw._TYPED, "${i1}${i2}")


def check_strip(values: list[str]) -> None:
    text = pl.Series(values, dtype=pl.String)
    # Each on a copy: Series.scatter writes in place.
    expected = old_strip_layout(text.clone()).to_list()
    for kind in (interpreted.KERNEL, interpreted.TWIN):
        with interpreted.forced(kind):
            assert cw.strip_layout(text.clone()).to_list() == expected, kind
    assert text.to_list() == values


def test_type_noun_forms_are_what_the_pattern_matches() -> None:
    forms = pl.Series(cw._TYPE_NOUN_FORMS, dtype=pl.String)
    assert forms.str.contains(f"^{cw._TYPE_NOUN}$").all()
    near = pl.Series([f + x for f in cw._TYPE_NOUN_FORMS for x in ("s", "es", "x")]
                     + [f[:-1] for f in cw._TYPE_NOUN_FORMS], dtype=pl.String)
    matched = set(near.filter(near.str.contains(f"^{cw._TYPE_NOUN}$")).to_list())
    assert matched <= set(cw._TYPE_NOUN_FORMS)


NOUNISH = [*cw._TYPE_NOUN_FORMS, "FILE", "Flags", "ſettings", "claſs", "\u212aeys", "\u212aey",
           "OPCIÓN", "Opção", "ARCHIVO", "filename", "profile", "keyboard", "valued", "Fil"]
IDENTS = ["config.yaml", "--all", "-v", "`send`", "`a b`", "snake_case", "camelCase", "a/b",
          "x.y.z", "node0", "e.g.", "end.", "(foo.bar", "`x`,", "aB", "über_x", "ñ-x", "a-",
          "_", "-", ".", "`"]
GLUE = [" ", "  ", "\t", " \t ", "\n", "\r\n", "", "\u00a0", "\u3000", ",", ". ", ": ", "'",
        "(", ")", "!", "the", "a"]
layout_texts = st.lists(st.one_of(st.sampled_from(NOUNISH), st.sampled_from(IDENTS),
                                  st.sampled_from(GLUE), st.sampled_from(PIECES),
                                  st.text(max_size=6)), max_size=16).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(layout_texts, min_size=1, max_size=6))
def test_strip_layout_runs_the_typed_pattern_wherever_it_matches(values) -> None:
    check_strip(values)


def test_strip_layout_of_the_shared_corpus() -> None:
    texts, _ = corpus_pages()
    blocks = [b for t in texts for b in t.split("\n\n") if b.strip()]
    glued = [f"{a} {b}" for a in IDENTS for b in NOUNISH] + [
        f"{b}\t{a}" for a in IDENTS for b in NOUNISH]
    # With a noun the prefilter knows elsewhere in the row (it misses "ſ" and "K").
    glued += [f"{g} and the file" for g in glued]
    check_strip(texts + blocks + glued)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 30))
def test_extra_facts_join_each_row_sorted_and_unique(seed: int, n: int) -> None:
    """``facts._with_facts``: the extras grouped by row (``_count_rows``, ``_place``) and
    merged into the scanner's sorted rows (``_merge_csr``), kernel and twin, as a sort of
    each row would."""
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 2**64 - 1, 12, dtype=np.uint64, endpoint=True)
    rows = [np.unique(rng.choice(pool, rng.integers(0, 6))) for _ in range(n)]
    offsets = np.concatenate(([0], np.cumsum([r.shape[0] for r in rows]))).astype(np.int64)
    values = np.concatenate(rows).astype(np.uint64)
    m = int(rng.integers(0, 40))
    extra_rows = rng.integers(0, n, m).astype(np.int64)
    extra = rng.choice(pool, m).astype(np.uint64)
    expected = [np.unique(np.concatenate((rows[r], extra[extra_rows == r]))) for r in range(n)]
    half = m // 2
    parts = [(extra_rows[:half], extra[:half]), (extra_rows[half:], extra[half:])]
    for kind in (interpreted.KERNEL, interpreted.TWIN):
        with interpreted.forced(kind):
            got_offsets, got = F._with_facts(offsets, values, n, parts)
        for r in range(n):
            np.testing.assert_array_equal(got[got_offsets[r]:got_offsets[r + 1]], expected[r])


def test_the_thread_count_does_not_change_the_tokens(monkeypatch) -> None:
    texts, langs = corpus_pages(3)
    monkeypatch.setattr(cw, "CHUNK_BYTES", 4096)
    text = pl.Series(texts, dtype=pl.String)
    language = pl.Series(langs, dtype=pl.String)
    with interpreted.forced(interpreted.KERNEL):
        runs = [cw.content_facts(text, segment_type=None, language=language, threads=t)
                for t in (1, 2, 3)]
    for rows, values in runs[1:]:
        np.testing.assert_array_equal(rows, runs[0][0])
        np.testing.assert_array_equal(values, runs[0][1])


def old_without_layout(text: pl.Series, code: np.ndarray) -> pl.Series:
    """``facts.without_layout`` as it was before its regex ran only on candidate rows."""
    layout = f"{F._LIST_MARKER}|{cw.MARKUP}"
    marked = text.str.contains(layout).fill_null(False).to_numpy() & ~code
    if not marked.any():
        return text
    rows = np.flatnonzero(marked)
    return text.scatter(rows, text.gather(rows).str.replace_all(F._LIST_MARKER, "")
                        .str.replace_all(cw.MARKUP, " "))


MARKERS = ["- ", "-\t", "* ", "+ ", "• ", "•\t", "1. ", "12) ", "123. ", "1234. ", "٣. ",
           "१२) ", "a. ", "1.", "-", " ", "\t", "  - ", "\n", "\r\n", "<b>", "</i>", "{{< x >}}",
           "{{% y %}}", "<dir>", "x", "word", "2.5", "•", "‣ "]
marked_texts = st.lists(st.one_of(st.sampled_from(MARKERS), st.text(max_size=4)),
                        max_size=14).map("".join)


def check_without_layout(values: list[str | None], code: list[bool]) -> None:
    text = pl.Series(values, dtype=pl.String)
    flags = np.array(code, dtype=bool)
    expected = old_without_layout(text.clone(), flags).to_list()
    for kind in (interpreted.KERNEL, interpreted.TWIN):
        with interpreted.forced(kind):
            assert F.without_layout(text.clone(), flags).to_list() == expected, kind


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), marked_texts), st.booleans()), min_size=1,
                max_size=6))
def test_without_layout_runs_its_regex_wherever_it_matches(rows) -> None:
    values, code = (list(x) for x in zip(*rows, strict=True))
    check_without_layout(values, code)


def test_without_layout_of_the_shared_corpus() -> None:
    texts, _ = corpus_pages()
    blocks = [b for t in texts for b in t.split("\n\n") if b.strip()]
    values = texts + blocks + [a + b + c for a in MARKERS for b in MARKERS for c in ("x", "")]
    check_without_layout(values, [False] * len(values))


def test_a_row_longer_than_a_section_with_more_words_than_the_table_holds() -> None:
    """One row past ``_content_jit._SECTION`` bytes whose distinct words pass the intern
    table's first sizes: the row is read in sections, the table grows between them."""
    from arrowdedup.facts import content_jit as _content_jit

    letters = "abcdefghijklmnopqrstuvwxyzéàçñ"
    words = ["".join(letters[i // len(letters) ** k % len(letters)] for k in range(4))
             for i in range(30_000)]
    row = " ".join(w if i % 7 else f"not {w} -> {w.upper()}" for i, w in enumerate(words))
    assert len(row.encode()) > 2 * _content_jit._SECTION
    text = pl.Series([row, "the same words: " + row[:5000], ""], dtype=pl.String)
    expected = oracle(text, None, None)
    with interpreted.forced(interpreted.KERNEL):
        assert fast(text, None, None) == expected
