"""Section context for the fact guard (issue 44, item 4): where in its document a segment stands.

A statement is about the section it stands in. On the shared corpus, most of the near merges a
reader judged as losing something joined two *sibling* sections: the same sentence under two
providers, two servers, two counter kinds or two steps ("Supported protocols are A and B." under
five providers, removed into a sixth one's "A, B and C"). Deleting one copy deletes what the
document says about that section's subject. A merge between a section and one that contains it
(a heading's own section and its parent, a lead-in and its subsection) keeps its subject.

So each segment with a ``section`` (its heading path, levels joined by ``" > "``) carries, in its
signature, four kinds of section tokens (kind :data:`SECTION`, sorted after every fact and
content token; bits 58–59 tell them apart):

- its *root*: the document (``doc_id``), so the rule compares only segments of one document
  (retrieval meets results of many; a paragraph repeated in two documents is not a section
  question);
- each *prefix* of its path (the first level, the first two, ..., the whole path);
- its *leaf*: the whole path, flagged;
- its *form*: the hash of its text with layout removed (letter case folded, every run of
  ASCII punctuation, markup and white space made one space), when the document writes that
  form in :data:`BOILERPLATE_SECTIONS` sections or more, and in half of its sections at least
  (boilerplate is what a document repeats throughout: "See Distributed tracing." under three
  of a glossary's forty terms is a statement about each), and unless the text introduces
  what follows it (it ends with a colon, or with "as follows", "like this", "the following",
  ...: :data:`LEAD_IN`): a lead-in is about the list or code under it, which differs from
  section to section.

The guard (:func:`arrowdedup.facts.conflict_jit.conflict`) refuses a merge, reason ``section``,
when both segments have a section in the same document and neither one's path is a prefix of the
other's (the leaf of one is not among the prefixes of the other), unless the two texts have the
same form: the same words in the same order, layout aside, repeated throughout the document,
which is what a repeated notice or a navigation line is. A text said in two sibling sections is
a statement about each ("Select Create pull request." under the browser workflow and the local
one, "See Distributed tracing." under two glossary terms), and a lead-in has no form: on the
judged pairs, the lead-ins repeated across sibling sections ("... the following permissions via
a ClusterRole.") all introduced different things. Running headers and footers are
``page_furniture``, which the guard never looks at, and exact copies drop before any guard.
Equal content tokens are not enough: "debe otorgar" and "debes otorgar" (one stem) under two
components' sections, or "Replace index.php" and "Replace the index.php file" introducing two
sections' code, are statements about two things. Headings are compared by level, letter case and
runs of white space folded. One text is about the same thing in any section: a definition of a
type ("SpanProcessor: Processes spans ..."), which names its own subject; two segments that
define the same type are never apart (:mod:`arrowdedup.facts.entries`). """

from __future__ import annotations

import numpy as np
import polars as pl

from .tables import KIND_SHIFT, LOW_BITS

# The signature kind of the section tokens (top four bits; the last kind, so they sort last).
SECTION = 15
LEVEL_SEPARATOR = " > "
# Bits 58-59 of a section token: which of the four it is.
ROOT, PREFIX, LEAF, FORM = 0, 1, 2, 3
ROLE_SHIFT = 58
_HASH_MASK = np.uint64((1 << ROLE_SHIFT) - 1)
# A text written in this many sections of its document, or more, and in half of them at
# least, is boilerplate there.
BOILERPLATE_SECTIONS = 3
_UNIT = "\x1f"  # joins the document and the levels in a hashed key: no heading holds it
# A text that introduces what follows it: it ends with a colon, or with "as follows", "like
# this", "the following", "below", ... (in the languages of the function-word lists), or says
# "as follows" or "the following" in Japanese or Chinese, where the verb ends the sentence
# ("factory.go ファイルに次のコードを追加してください。": add the following code). Only at the
# end in the other languages: "fetch the following page" and "the loop below stops"
# introduce nothing.
LEAD_END = r"(?i)(?:[:：]|\b(?:as follows|like this|the following|below|siguientes?|" \
    r"a continuación|seguintes?|abaixo|suivante?s?|ci-dessous|folgenden?|folgendes|" \
    r"nachstehend|seguenti|seguente|volgende|poniższ\w*|następując\w*|următoare\w*|" \
    r"наступн\w*|следующ\w*|নিম্নলিখিত))[\s.。!]*$"
LEAD_PHRASES = ("次のように", "以下のように", "次のとおり", "如下", "次の", "以下の", "以下は",
                "以下是", "下面的", "下面是")
# The same test as one regular expression (for a single text: ``re.search(LEAD_IN, text)``).
LEAD_IN = LEAD_END + "|" + "|".join(LEAD_PHRASES)
# Over a column of this many texts or more, :func:`lead_ins` runs the end-anchored expression
# and a multi-string search: the regex engine then searches each text from its end (measured
# on 200,000 Markdown blocks: 0.05 s against 0.9 s for LEAD_IN, whose unanchored alternatives
# make it scan every text whole), but that search costs ~5 ms to set up on every call, which
# on 100 ranked results is most of a query's guard (LEAD_IN: 0.6 ms).
LEAD_SPLIT_MIN_TEXTS = 1_000


def lead_ins(texts: pl.Series) -> pl.Series:
    """Which of ``texts`` introduce what follows them (:data:`LEAD_IN`); null is False."""
    if texts.len() < LEAD_SPLIT_MIN_TEXTS:
        return texts.str.contains(LEAD_IN).fill_null(False)
    return (texts.str.contains(LEAD_END)
            | texts.str.contains_any(list(LEAD_PHRASES))).fill_null(False)


def _token(hashes: np.ndarray, role: int) -> np.ndarray:
    return ((hashes & _HASH_MASK) | np.uint64(role << ROLE_SHIFT)
            | (np.uint64(SECTION) << KIND_SHIFT)).astype(np.uint64)


def _mix(doc: np.ndarray, path: np.ndarray | np.uint64) -> np.ndarray:
    """One 64-bit hash of a document's hash and a path's (a SplitMix64 finaliser): the paths
    are hashed once per distinct section, not once per document."""
    x = doc ^ (path * np.uint64(0x9E3779B97F4A7C15))
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    return x ^ (x >> np.uint64(29))


def _codes(values: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """Each row's index into the distinct non-null values (first-seen order), and those
    values; a null row gets the index one past the last."""
    distinct = values.drop_nulls().unique(maintain_order=True)
    index = pl.DataFrame({"v": distinct}).with_row_index("i")
    codes = pl.DataFrame({"v": values}).join(index, on="v", how="left", maintain_order="left",
                                            nulls_equal=False).get_column("i")
    return codes.fill_null(distinct.len()).to_numpy().astype(np.int64), distinct


def section_facts(doc_id: pl.Series, section: pl.Series, text: pl.Series | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(row, token) pairs of the section tokens of each row whose ``section`` is set (in no
    particular order; rows without a section have none); with ``text``, each such row's form
    token too."""
    from ..arrays.hashing import xxh64

    assert LOW_BITS >= _HASH_MASK  # the role bits sit inside the hash part of a value
    ids, sections = _codes(section.cast(pl.String))
    levels = sections.str.to_lowercase().str.replace_all(r"\s+", " ") \
        .str.split(LEVEL_SEPARATOR.strip()) \
        .list.eval(pl.element().str.strip_chars().filter(pl.element() != ""))
    depth = np.append(levels.list.len().to_numpy().astype(np.int64), 0)[ids]
    rows = np.flatnonzero(depth > 0)
    if rows.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
    docs, doc_values = _codes(doc_id.cast(pl.String).fill_null("").gather(rows))
    doc_hash = xxh64(doc_values)[docs]
    # The hash of each distinct path's first k levels, one column per k.
    most = int(depth.max())
    prefix = np.zeros((sections.len() + 1, most), dtype=np.uint64)
    for k in range(1, most + 1):
        sliced = levels.list.slice(0, k)
        whole = (sliced.list.len() == k).to_numpy()
        prefix[np.flatnonzero(whole), k - 1] = xxh64(sliced.filter(pl.Series(whole))
                                                     .list.join(_UNIT))
    owners, parts = [rows], [_token(_mix(doc_hash, np.uint64(0)), ROOT)]
    sec, d = ids[rows], depth[rows]
    for k in range(1, most + 1):
        at = np.flatnonzero(d >= k)
        hashes = _mix(doc_hash[at], prefix[sec[at], k - 1])
        owners.append(rows[at])
        parts.append(_token(hashes, PREFIX))
        last = d[at] == k
        owners.append(rows[at][last])
        parts.append(_token(hashes[last], LEAF))
    rows_out, tokens = np.concatenate(owners), np.concatenate(parts)
    if text is None:
        return rows_out, tokens
    texts = text.cast(pl.String).fill_null("")
    plain = ~lead_ins(texts.gather(rows)).to_numpy().astype(bool)
    keep = rows[plain]
    form = forms(texts, keep)
    # Boilerplate is what a document repeats throughout: a form keeps its token only where
    # the document writes it in BOILERPLATE_SECTIONS sections or more.
    # Each path as the tokens fold it; a document's sections are those its rows stand in.
    leaf = prefix[ids[rows], depth[rows] - 1]
    spread = pl.DataFrame({"doc": docs[plain], "form": form, "section": leaf[plain]}).select(
        pl.col("section").n_unique().over("doc", "form")).to_series().to_numpy()
    sections = pl.DataFrame({"doc": docs, "section": leaf}).select(
        pl.col("section").n_unique().over("doc")).to_series().to_numpy()[plain]
    common = (spread >= BOILERPLATE_SECTIONS) & (2 * spread >= sections)
    return (np.concatenate([rows_out, keep[common]]),
            np.concatenate([tokens, _token(form[common], FORM)]))


def forms(texts: pl.Series, rows: np.ndarray) -> np.ndarray:
    """Form hashes of ``rows`` of ``texts`` (:func:`arrowdedup.facts.content_jit.form_hashes`)."""
    from ..arrays.hashing import string_buffers
    from ..jit import interpreted
    from .tables import TWIN_MAX_BYTES

    lowered = texts.gather(rows).str.to_lowercase()
    offsets, data = string_buffers(lowered.to_arrow())
    module = interpreted.module("arrowdedup.facts.content_jit", int(offsets[-1] - offsets[0]),
                                TWIN_MAX_BYTES)
    with interpreted.quiet():
        return module.form_hashes(offsets, data,
                                 np.arange(rows.shape[0], dtype=np.int64))
