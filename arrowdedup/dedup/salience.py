"""The default salience scorer of SPEC section 3 (used only when the input has no salience).

score = centrality × type weight × length factor × section factor, then divided by the largest
score of the document, so its most valuable segment has 1.0. It measures value, not rank: a
document of uniformly good segments keeps them all above the noise filter.

The scorer is pluggable: anything with ``score(frame, embeddings) -> np.ndarray`` works.
"""

from __future__ import annotations

import re
from typing import Protocol

import numpy as np
import polars as pl

from ..arrays.vectors import dense_codes, dictionary_codes, input_rows, input_rows_hint, unit_rows
from ..schema import Embeddings

TYPE_WEIGHTS: dict[str, float] = {
    "title": 2.0,
    "heading": 1.1,
    "quote": 1.1,
    "list_item": 1.05,
    "code": 0.9,
}
# Ordered: the first matching class wins inside one section name.
SECTION_FACTORS: tuple[tuple[str, float], ...] = (
    (r"abstract", 2.5),
    (r"introduction|conclusions?", 1.8),
    (r"summary|overview", 1.6),
    (r"results|discussion", 1.3),
    (r"references|bibliography", 0.1),
    (r"appendix|appendices", 0.2),
)


class SalienceScorer(Protocol):
    def score(self, frame: pl.DataFrame, embeddings: Embeddings | None) -> np.ndarray:
        """Salience in [0, 1] per row of ``frame`` (float32)."""
        ...


def length_factor(length: np.ndarray) -> np.ndarray:
    """0.3 under 20 characters, up to 1.1 at 80, 1.1 to 500, down to 0.8 at 2,000, then 0.8."""
    x = length.astype(np.float64)
    return np.interp(x, [20.0, 80.0, 500.0, 2000.0], [0.3, 1.1, 1.1, 0.8])


def section_factor(section: str | None) -> float:
    """Factor of the deepest component of a heading path ("A > B") that names a known part."""
    if not section:
        return 1.0
    for part in reversed(section.split(">")):
        name = part.strip().lower()
        for pattern, factor in SECTION_FACTORS:
            if re.search(rf"\b(?:{pattern})\b", name):
                return factor
    return 1.0


def title_mask(frame: pl.DataFrame) -> np.ndarray:
    """Rows that are the document's title: segment_type 'title', a heading equal to the
    document's ``title`` column, or else the document's first level-1 heading."""
    seg_type = frame.get_column("segment_type").cast(pl.String)
    is_title = (seg_type == "title").to_numpy().copy()
    is_heading = (seg_type == "heading").to_numpy()
    if "title" in frame.columns:
        same = (frame.get_column("text") == frame.get_column("title").cast(pl.String))
        is_title |= is_heading & same.fill_null(False).to_numpy()
    if "heading_level" in frame.columns:
        level1 = (frame.get_column("heading_level") == 1).fill_null(False).to_numpy() & is_heading
        # Only documents without a title so far get their first level-1 heading as title.
        marks = pl.DataFrame({
            "doc_id": frame.get_column("doc_id").cast(pl.String),
            "position": frame.get_column("position").cast(pl.Int64),
            "row": np.arange(frame.height),
            "titled": is_title,
            "level1": level1,
        })
        titled_docs = marks.filter(pl.col("titled")).get_column("doc_id").unique()
        first = (
            marks.filter(pl.col("level1") & ~pl.col("doc_id").is_in(titled_docs.implode()))
            .sort(["doc_id", "position", "row"])
            .unique("doc_id", keep="first", maintain_order=True)
            .get_column("row")
            .to_numpy()
        )
        is_title[first] = True
    return is_title


def centrality(doc_codes: np.ndarray, n_docs: int, embeddings: Embeddings | None) -> np.ndarray:
    """max(0, cosine to the document's mean unit vector); 1.0 without a usable embedding."""
    n = doc_codes.shape[0]
    out = np.ones(n, dtype=np.float64)
    if embeddings is None or not embeddings.usable.any():
        return out
    # In row chunks: float64 copies of a whole table's vectors would double a large
    # document's peak memory. Rows are summed in the same order, and each chunk's norms take
    # the path the whole usable matrix would (vectors.row_stats chooses by size), so the
    # values are those of one pass over it.
    with input_rows(max(int(embeddings.usable.sum()), input_rows_hint())):
        return _centrality(doc_codes, n_docs, embeddings.matrix, embeddings.usable, out)


def _centrality(doc_codes: np.ndarray, n_docs: int, matrix: np.ndarray, usable: np.ndarray,
                out: np.ndarray) -> np.ndarray:
    n = doc_codes.shape[0]
    sums = np.zeros((n_docs, matrix.shape[1]), dtype=np.float64)
    for start in range(0, n, _CHUNK_ROWS):
        rows = slice(start, start + _CHUNK_ROWS)
        ok = usable[rows]
        np.add.at(sums, doc_codes[rows][ok], unit_rows(matrix[rows][ok], dtype=np.float64))
    norms = np.linalg.norm(sums, axis=1)
    mean_unit = np.divide(sums, norms[:, None], out=np.zeros_like(sums), where=norms[:, None] > 0)
    for start in range(0, n, _CHUNK_ROWS):
        rows = slice(start, start + _CHUNK_ROWS)
        ok = usable[rows]
        unit = unit_rows(matrix[rows][ok], dtype=np.float64)
        cos = np.einsum("ij,ij->i", unit, mean_unit[doc_codes[rows][ok]])
        out[start:start + ok.shape[0]][ok] = np.maximum(0.0, cos)
    return out


# 4k rows: a chunk's float64 unit rows and their gathered document means were ~100 MB of
# transient memory at 16k rows (256 dimensions), and the two largest buckets of
# benchmarks/hostile_input's corpus + four large files run score their salience at once.
# The values do not depend on it (rows are summed in order; each row's cosine is its own).
_CHUNK_ROWS = 4_096


class DefaultSalience:
    """SPEC section 3's scorer.

    ``floor`` is the noise filter's ``SalienceThreshold``: a segment that holds a fact found
    nowhere else in its document (a flag heading, a sentence that states a value), or says
    eight or more words, is never scored below it, because the filter is for noise.
    """

    def __init__(self, floor: float = 0.05) -> None:
        self.floor = float(floor)

    def score(self, frame: pl.DataFrame, embeddings: Embeddings | None) -> np.ndarray:
        n = frame.height
        if n == 0:
            return np.zeros(0, dtype=np.float32)
        doc_codes, n_docs = dense_codes(frame.get_column("doc_id"), null_code=False)
        types, type_codes = _unique_map(frame.get_column("segment_type"))
        type_w = np.array([TYPE_WEIGHTS.get(t, 1.0) for t in types])[type_codes]
        type_w = np.where(title_mask(frame), TYPE_WEIGHTS["title"], type_w)
        lengths = frame.get_column("text").str.len_chars().to_numpy()
        if "section" in frame.columns:
            sections = frame.get_column("section").cast(pl.String)
            uniq, inverse = _unique_map(sections.fill_null(""))
            sec_f = np.array([section_factor(s) for s in uniq])[inverse]
        else:
            sec_f = np.ones(n)
        score = centrality(doc_codes, n_docs, embeddings) * type_w * length_factor(lengths) * sec_f
        best = np.zeros(n_docs, dtype=np.float64)
        np.maximum.at(best, doc_codes, score)
        doc_best = best[doc_codes]
        salience = np.divide(score, doc_best, out=np.zeros(n), where=doc_best > 0)
        low = (salience > 0.0) & (salience < self.floor)
        if low.any():
            keep = low & (unique_facts(frame, doc_codes) | (word_counts(frame) >= 8))
            salience[keep] = self.floor
        return np.clip(salience, 0.0, 1.0).astype(np.float32)


def word_counts(frame: pl.DataFrame) -> np.ndarray:
    """Words (runs of non-space characters) per segment."""
    return frame.get_column("text").cast(pl.String).fill_null("").str.count_matches(
        r"\S+").to_numpy()


def unique_facts(frame: pl.DataFrame, doc_codes: np.ndarray) -> np.ndarray:
    """Rows holding a fact (SPEC §2's fact guard: number, identifier, …) that no other segment
    of the same document holds."""
    from ..facts.guard import signatures_of
    from ..facts.tables import CONTENT, KIND_SHIFT, MENTION

    offsets, values = signatures_of(frame)
    rows = np.repeat(np.arange(frame.height, dtype=np.int64), np.diff(offsets))
    facts = pl.DataFrame({"r": rows, "d": doc_codes[rows], "h": values})
    # Facts only: mentions are no facts, and content words (kinds above the facts') are not
    # what the noise filter protects.
    facts = facts.filter(pl.col("h").is_between((MENTION + 1) << int(KIND_SHIFT),
                                                 (CONTENT << int(KIND_SHIFT)) - 1))
    single = (
        facts.with_columns(pl.len().over("d", "h").alias("n"))
        .filter(pl.col("n") == 1).get_column("r").unique().to_numpy()
    )
    out = np.zeros(frame.height, dtype=bool)
    out[single] = True
    return out


def _unique_map(values: pl.Series) -> tuple[list[str], np.ndarray]:
    """Distinct values and each row's index into them (the Python work is per distinct value).
    Each value reads as it did through a NumPy ``str`` array (null as "None", trailing NULs
    dropped), so the factors are those it always had. Not through such an array: it is as
    wide as the longest value in every row, and the heading paths of one bucket of
    benchmarks/hostile_input's corpus + four large files made it 0.43 GB (its peak)."""
    codes, _, names = dictionary_codes(values)
    keys = [str(v).rstrip("\x00") for v in names.to_pylist()]
    return [*keys, "None"], codes  # null's code is the last one
