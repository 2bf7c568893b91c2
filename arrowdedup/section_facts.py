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
  punctuation, markup and white space made one space), unless the text introduces what
  follows it (it ends with a colon, or says "the following", "below", "siguientes", "以下",
  ...: :data:`LEAD_IN`): a lead-in is about the list or code under it, which differs from
  section to section.

The guard (:func:`arrowdedup._facts_jit.conflict`) refuses a merge, reason ``section``, when both
segments have a section in the same document and neither one's path is a prefix of the other's
(the leaf of one is not among the prefixes of the other), unless the two texts have the same
form: the same words in the same order, layout aside, which is what a repeated notice or a
navigation line is (a lead-in has no form: on the judged pairs, the lead-ins repeated across
sibling sections, "... the following permissions via a ClusterRole.", all introduced
different things). Running headers and footers are ``page_furniture``, which the guard never
looks at, and exact copies drop before any guard. Equal content tokens are not enough: "debe
otorgar" and "debes otorgar" (one stem) under two components' sections, or "Replace index.php"
and "Replace the index.php file" introducing two sections' code, are statements about two
things. Headings are compared by level, letter case and runs of white space folded.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from .facts import KIND_SHIFT, LOW_BITS

# The signature kind of the section tokens (top four bits; the last kind, so they sort last).
SECTION = 15
LEVEL_SEPARATOR = " > "
# Bits 58-59 of a section token: which of the four it is.
ROOT, PREFIX, LEAF, FORM = 0, 1, 2, 3
ROLE_SHIFT = 58
_HASH_MASK = np.uint64((1 << ROLE_SHIFT) - 1)
_UNIT = "\x1f"  # joins the document and the levels in a hashed key: no heading holds it
# Words that say a text introduces what follows it, in the languages of the function-word
# lists (whole words; the scripts without spaces as substrings).
LEAD_IN = r"(?i)(?:\b(?:following|below|as follows|siguientes?|a continuación|seguintes?|abaixo|" \
    r"suivante?s?|ci-dessous|folgenden?|folgendes|nachstehend|seguenti|seguente|volgende|" \
    r"poniższ\w*|następując\w*|următoare\w*|наступн\w*|следующ\w*|নিম্নলিখিত)\b" \
    r"|以下|次の|下面|如下|다음)|:\s*$"


def _token(hashes: np.ndarray, role: int) -> np.ndarray:
    return ((hashes & _HASH_MASK) | np.uint64(role << ROLE_SHIFT)
            | (np.uint64(SECTION) << KIND_SHIFT)).astype(np.uint64)


def section_facts(doc_id: pl.Series, section: pl.Series, text: pl.Series | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(row, token) pairs of the section tokens of each row whose ``section`` is set (rows in
    row order, each row's tokens in any order; rows without a section have none); with
    ``text``, each such row's form token too."""
    from .hashing import xxh64

    assert LOW_BITS >= _HASH_MASK  # the role bits sit inside the hash part of a value
    n = section.len()
    frame = pl.DataFrame({
        "doc": doc_id.cast(pl.String).fill_null(""),
        "levels": section.cast(pl.String).str.to_lowercase()
        .str.replace_all(r"\s+", " ").str.strip_chars()
        .str.split(LEVEL_SEPARATOR.strip()).list.eval(pl.element().str.strip_chars()
                                                      .filter(pl.element() != "")),
    }).with_row_index("row").filter(pl.col("levels").list.len() > 0)
    if frame.height == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
    frame = frame.with_columns(key=pl.concat_str(pl.col("doc"), pl.col("levels").list.join(_UNIT),
                                                 separator=_UNIT))
    # The tokens of each distinct (document, path) once: a document's segments share a few paths.
    paths = frame.select("key", "doc", "levels").unique("key", maintain_order=True)
    depth = paths.get_column("levels").list.len().to_numpy()
    owners, parts = [np.arange(paths.height, dtype=np.int64)], [
        _token(xxh64(paths.get_column("doc")), ROOT)]
    for k in range(1, int(depth.max()) + 1):
        at = np.flatnonzero(depth >= k)
        keys = paths[at].select(pl.concat_str(
            pl.col("doc"), pl.col("levels").list.slice(0, k).list.join(_UNIT),
            separator=_UNIT)).to_series()
        hashes = xxh64(keys)
        owners.append(at.astype(np.int64))
        parts.append(_token(hashes, PREFIX))
        last = depth[at] == k
        owners.append(at[last].astype(np.int64))
        parts.append(_token(hashes[last], LEAF))
    owner = np.concatenate(owners)
    by_path = np.argsort(owner, kind="stable")
    tokens = np.concatenate(parts)[by_path]
    starts = np.searchsorted(owner[by_path], np.arange(paths.height + 1))
    # Each row takes its path's tokens.
    row_path = frame.select("key").join(paths.select("key").with_row_index("path"), on="key",
                                        how="left", maintain_order="left"
                                        ).get_column("path").to_numpy().astype(np.int64)
    counts = np.diff(starts)[row_path]
    rows = np.repeat(frame.get_column("row").to_numpy().astype(np.int64), counts)
    ends = np.cumsum(counts)
    take = np.repeat(starts[row_path] - (ends - counts), counts) + np.arange(ends[-1])
    rows, tokens = rows, tokens[take]
    if text is None:
        return rows, tokens
    at = frame.get_column("row").to_numpy().astype(np.int64)
    texts = text.gather(at).cast(pl.String).fill_null("")
    keep = ~texts.str.contains(LEAD_IN).fill_null(False).to_numpy().astype(bool)
    forms = texts.filter(pl.Series(keep)).str.to_lowercase() \
        .str.replace_all(r"[\W_]+", " ").str.strip_chars()
    return (np.concatenate([rows, at[keep]]),
            np.concatenate([tokens, _token(xxh64(forms), FORM)]))
