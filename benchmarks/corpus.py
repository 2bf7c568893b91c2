"""Seeded synthetic segments tables with planted near and exact duplicates.

Each document has ``segments`` rows: a set of *base* segments (random unit vectors, random
12-word texts) and, for ``near_fraction`` of the rows, copies of a random base of the same
document: mostly near duplicates (vector = base + noise, cosine ~0.97 to the base and ~0.94
between two copies; one word of the text changed) and a few exact copies (same text, same
vector). Unrelated vectors in 384-d have cosine ~N(0, 0.05), far from 0.90, so float rounding
can never flip a decision and every exact kernel must agree with every other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

WORDS_PER_TEXT = 12
VOCABULARY = 5000
NOISE = 0.25  # noise norm relative to the unit base vector


@dataclass(frozen=True)
class Corpus:
    table: pa.Table  # the segments table (embedding: fixed_size_list<float32>[dim])
    matrix: np.ndarray  # (n, dim) float32, the same values as the embedding column
    source: np.ndarray | None = None  # (n,) the base row each row copies (itself for bases)

    @property
    def n(self) -> int:
        return self.table.num_rows


def _vocabulary(rng: np.random.Generator) -> pl.Series:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 9, size=VOCABULARY)
    chars = rng.choice(letters, size=(VOCABULARY, 8))
    return pl.Series("w", ["".join(c[:n]) for c, n in zip(chars, lengths, strict=True)])


def make_corpus(
    docs: int,
    segments: int,
    dim: int = 384,
    *,
    near_fraction: float = 0.5,
    exact_share: float = 0.1,
    seed: int = 0,
) -> Corpus:
    """``docs`` documents × ``segments`` segments; ``exact_share`` of the copies are exact."""
    rng = np.random.default_rng(seed)
    n = docs * segments
    n_copies = round(segments * near_fraction)
    n_base = segments - n_copies
    slot = np.tile(np.arange(segments), docs)
    doc = np.repeat(np.arange(docs), segments)
    is_copy = slot >= n_base
    # Each copy points at a random base row of its own document.
    source = np.arange(n)
    copies = np.flatnonzero(is_copy)
    source[copies] = doc[copies] * segments + rng.integers(0, n_base, size=copies.size)
    exact = np.zeros(n, dtype=bool)
    exact[copies] = rng.random(copies.size) < exact_share

    matrix = np.empty((n, dim), dtype=np.float32)
    chunk = 1 << 16
    for lo in range(0, n, chunk):
        block = rng.standard_normal((min(chunk, n - lo), dim), dtype=np.float32)
        matrix[lo:lo + block.shape[0]] = block
    bases = ~is_copy
    matrix[bases] /= np.linalg.norm(matrix[bases], axis=1, keepdims=True)
    near = is_copy & ~exact
    noise = matrix[near]
    noise *= NOISE / np.linalg.norm(noise, axis=1, keepdims=True)
    matrix[near] = matrix[source[near]] + noise
    matrix[exact] = matrix[source[exact]]

    vocab = _vocabulary(rng)
    words = rng.integers(0, VOCABULARY, size=(n, WORDS_PER_TEXT))
    words[is_copy] = words[source[is_copy]]
    changed = np.flatnonzero(near)
    words[changed, rng.integers(0, WORDS_PER_TEXT, size=changed.size)] = rng.integers(
        0, VOCABULARY, size=changed.size)
    text = (
        pl.DataFrame({"w": vocab.gather(words.ravel())})
        .select(pl.col("w").reshape((n, WORDS_PER_TEXT)).arr.join(" "))
        .to_series()
    )
    # Shuffle the order of the segments inside each document (copies are not always last).
    position = np.argsort(rng.random((docs, segments)), axis=1).ravel().astype(np.int32)
    salience = rng.uniform(0.1, 1.0, size=n).astype(np.float32)

    width = len(str(max(docs - 1, 0)))
    doc_ids = pl.Series(np.arange(docs)).cast(pl.String).str.zfill(width)
    doc_col = ("d" + doc_ids).gather(doc)
    seg_col = doc_col + "-" + pl.Series(slot).cast(pl.String)
    embedding = pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), dim)
    table = pa.table({
        "doc_id": doc_col.to_arrow(),
        "segment_id": seg_col.to_arrow(),
        "text": text.to_arrow(),
        "segment_type": pa.array(["paragraph"]).take(pa.array(np.zeros(n, dtype=np.int64))),
        "position": pa.array(position),
        "salience": pa.array(salience),
        "embedding": embedding,
    })
    return Corpus(table, matrix, source)


def make_hard_corpus(
    n: int,
    *,
    mean: np.ndarray | None = None,
    spectrum: np.ndarray | None = None,
    dim: int = 384,
    copy_fraction: float = 0.5,
    cos_range: tuple[float, float] = (0.88, 0.92),
    seed: int = 0,
) -> Corpus:
    """One document of ``n`` segments that is hard for LSH and for rounding.

    Base vectors are *anisotropic*: drawn with the covariance spectrum (and offset by the mean
    direction) of real embeddings — ``mean`` and ``spectrum`` measured by the caller, else a
    power-law spectrum and a common mean giving cosines of about 0.3 between unrelated rows.
    A ``copy_fraction`` of the rows are copies of a random base at an exact cosine drawn
    uniformly from ``cos_range`` (0.88–0.92 by default: on both sides of the 0.90 threshold).
    """
    rng = np.random.default_rng(seed)
    if spectrum is not None:
        dim = spectrum.shape[0]
    else:
        spectrum = 1.0 / np.arange(1, dim + 1) ** 1.1
        spectrum = spectrum / spectrum.sum() * 0.7
    if mean is None:
        direction = rng.standard_normal(dim)
        mean = 0.55 * direction / np.linalg.norm(direction)
    rotation, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    n_copies = round(n * copy_fraction)
    n_base = n - n_copies
    z = rng.standard_normal((n_base, dim)) * np.sqrt(np.clip(spectrum, 0, None))
    base = z @ rotation.T + mean
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    src = rng.integers(0, n_base, size=n_copies)
    cos = rng.uniform(*cos_range, size=n_copies)
    noise = rng.standard_normal((n_copies, dim)) * np.sqrt(np.clip(spectrum, 0, None))
    noise = noise @ rotation.T
    b = base[src]
    noise -= (noise * b).sum(axis=1, keepdims=True) * b  # orthogonal to the base
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    copies = cos[:, None] * b + np.sqrt(1 - cos[:, None] ** 2) * noise
    matrix = np.concatenate([base, copies]).astype(np.float32)
    order = rng.permutation(n)
    matrix = np.ascontiguousarray(matrix[order])
    vocab = _vocabulary(rng)
    words = rng.integers(0, VOCABULARY, size=(n, WORDS_PER_TEXT))
    text = (
        pl.DataFrame({"w": vocab.gather(words.ravel())})
        .select(pl.col("w").reshape((n, WORDS_PER_TEXT)).arr.join(" "))
        .to_series()
    )
    embedding = pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), dim)
    table = pa.table({
        "doc_id": pa.array(["hard"] * n),
        "segment_id": pa.array([f"h-{i}" for i in range(n)]),
        "text": text.to_arrow(),
        "segment_type": pa.array(["paragraph"] * n),
        "position": pa.array(np.arange(n, dtype=np.int32)),
        "salience": pa.array(rng.uniform(0.1, 1.0, size=n).astype(np.float32)),
        "embedding": embedding,
    })
    return Corpus(table, matrix)
