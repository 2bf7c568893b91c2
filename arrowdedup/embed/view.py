"""The text an embedder reads: a segment's visible words, without Markdown emphasis markers
and with each run of whitespace collapsed to one space.

Formatting says nothing about meaning, yet a subword embedder reads ``_word_`` as three
tokens: on the shared corpus, MiniLM put one formatting-only variant in twenty below the
0.90 threshold, every one of them because of ``_`` emphasis. The view removes that noise
before embedding, and only there: the stored text, its content hash and its fact signature
are those of the text as given. ``code`` segments are embedded as they are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa

# "**x**", "__x__", "*x*", "_x_" around a word or a phrase, as CommonMark reads emphasis: not
# inside a word (snake_case, a*b), never opened before or closed after a space (2 * 3), and
# never opened by a doubled marker of its own kind (the "**/*" of a glob).
# A code span (`x`) is matched first and kept whole: markers inside it are code ("`__init__`").
_EMPHASIS = re.compile(
    r"(`[^`]*`)|(?<![\w*])(\*\*|__|\*|_)(?!\s|\2)((?:`[^`]*`|.)+?)(?<=\S)\2(?![\w*])", re.S)
_SPACES = re.compile(r"\s+")
# Every character but " " that Python's \s matches (str.isspace), written out: the Polars
# (Rust) regex's \s leaves out some of them (\x1c-\x1f), and the check below must flag every
# text that embedding_text would change.
_OTHER_SPACE = ("\t\n\v\f\r\x1c\x1d\x1e\x1f\x85\xa0\u1680"
                + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000")
# Rows the view may change: an emphasis character or whitespace other than single spaces.
# Checked vectorised first, so a corpus of plain texts never enters the Python pass below.
_MAY_CHANGE = f"[*_]|  |^ | $|[{_OTHER_SPACE}]"


def _unwrap(m: re.Match[str]) -> str:
    return m.group(1) or m.group(3)


def embedding_text(text: str) -> str:
    """``text`` as the embedder reads it."""
    out = _SPACES.sub(" ", text).strip()
    # Nested emphasis ("**_x_**") unwraps one layer per pass; each pass that changes the text
    # shortens it, so this ends.
    while True:
        stripped = _EMPHASIS.sub(_unwrap, out)
        if stripped == out:
            return out
        out = stripped


def embedding_texts(texts: pa.Array | pa.ChunkedArray | Sequence[str],
                    verbatim: np.ndarray | None = None) -> pa.Array:
    """The embedder's view of each text (a large_string array); rows where ``verbatim`` is
    True (code) are kept as they are, and so are nulls."""
    if not isinstance(texts, (pa.Array, pa.ChunkedArray)):
        texts = pa.array(list(texts), type=pa.large_string())
    series = pl.Series(texts).cast(pl.String)
    may = series.str.contains(_MAY_CHANGE).fill_null(False).to_numpy()
    if verbatim is not None:
        may &= ~np.asarray(verbatim, dtype=bool)
    rows = np.flatnonzero(may)
    if rows.size:
        changed = pl.Series([embedding_text(t) for t in series.gather(rows).to_list()],
                            dtype=pl.String)
        series = series.scatter(rows, changed)
    return series.to_arrow().cast(pa.large_string())
