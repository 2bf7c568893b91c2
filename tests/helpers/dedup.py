"""Builders for the kernel and LSH tests: planted near copies, the kernel's raw inputs, random
segment tables with exact and near duplicates, and the LSH corpus and config."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl

from arrowdedup import DedupConfig, LshMethod, Mode
from arrowdedup.dedup import kernels
from tests.helpers import segments_frame, spacing, word

THR = 0.9  # the cosine threshold the planted vectors keep clear of


def planted(m: int, d: int, seed: int, dup: float, noise: float = 0.08) -> np.ndarray:
    """Random vectors (pairwise cosines far below 0.9) plus near copies of some of them."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, d)).astype(np.float32)
    k = int(m * dup)
    if k:
        src = rng.integers(0, m - k, k)
        x[m - k :] = x[src] + noise * rng.standard_normal((k, d)).astype(np.float32)
    return x[rng.permutation(m)]


def clear_of_band(x: np.ndarray, band: float = 1e-4) -> bool:
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    c = u.astype(np.float64) @ u.T.astype(np.float64)
    return not bool((np.abs(c - THR) < band).any())


def inputs(x: np.ndarray, seed: int, exact: float, filt: float, unusable: float):
    m = x.shape[0]
    rng = np.random.default_rng(seed + 1)
    usable = rng.random(m) >= unusable
    inv = kernels.inverse_norms(x, usable)
    # Hash classes: most rows unique, some share a class with an earlier row.
    hc = np.arange(m, dtype=np.int64)
    dup_rows = np.flatnonzero(rng.random(m) < exact)
    dup_rows = dup_rows[dup_rows > 0]
    hc[dup_rows] = rng.integers(0, dup_rows, dup_rows.shape[0])
    _, hc = np.unique(hc, return_inverse=True)
    filtered = rng.random(m) < filt
    order = rng.permutation(m).astype(np.int64)  # greedy order is any permutation
    return order, usable, inv, hc.astype(np.int64), filtered


def random_table(seed: int, n: int) -> pl.DataFrame:
    """Documents with planted exact and near duplicates, null and zero vectors, low salience."""
    rng = np.random.default_rng(seed)
    d = 8
    bases = rng.standard_normal((max(2, n // 3), d))
    docs = rng.integers(0, 3, n)
    types = rng.choice(["paragraph", "heading"], n, p=[0.8, 0.2])
    langs = rng.choice(["en", "de"], n, p=[0.85, 0.15])
    base_idx = rng.integers(0, bases.shape[0], n)
    noise = rng.uniform(0.0, 0.5, n)[:, None] * rng.standard_normal((n, d))
    vectors = bases[base_idx] + noise * np.linalg.norm(bases[base_idx], axis=1, keepdims=True) / 3
    # Distinct texts whose facts overlap: a shared step number, sometimes a negation; the
    # plain words that make them distinct are no facts.
    words = ["".join("abcdefghij"[int(c)] for c in str(i)) for i in range(n)]
    texts = [f"step {rng.integers(0, 3)} {'not ' if rng.random() < 0.2 else ''}word{w}"
             .replace("word", "") for w in words]
    texts = [f"{t} {w}x" for t, w in zip(texts, words, strict=True)]
    for i in range(n):  # exact copies: same text (and usually the same vector)
        if i and rng.random() < 0.2:
            j = int(rng.integers(0, i))
            texts[i] = texts[j]
            if rng.random() < 0.7:
                vectors[i] = vectors[j]
    emb: list[list[float] | None] = []
    for i in range(n):
        r = rng.random()
        if r < 0.08:
            emb.append(None)
        elif r < 0.12:
            emb.append([0.0] * d)
        else:
            emb.append(vectors[i].astype(np.float32).tolist())
    salience = rng.choice([0.0, 0.02, 0.3, 0.5, 0.5, 0.8, 1.0], n).astype(np.float32)
    return pl.DataFrame({
        "doc_id": [f"d{x}" for x in docs],
        "segment_id": [f"s{i}" for i in range(n)],
        "text": texts,
        "segment_type": types,
        "language": langs,
        "position": pl.Series(rng.permutation(n), dtype=pl.Int32),
        "salience": pl.Series(salience, dtype=pl.Float32),
        "embedding": pl.Series(emb, dtype=pl.List(pl.Float32)).cast(pl.Array(pl.Float32, d)),
    })


def lsh_config(method: LshMethod, min_segments: int = 1, **kw) -> DedupConfig:
    base = DedupConfig()
    return dataclasses.replace(base, ingestion=dataclasses.replace(
        base.ingestion, mode=Mode.LSH, lsh_method=method, lsh_min_segments=min_segments, **kw))


def lsh_corpus(m: int, seed: int) -> pl.DataFrame:
    """Planted near duplicates whose texts share most words with their source."""
    rng = np.random.default_rng(seed)
    x = planted(m, 32, seed, 0.3, noise=0.1)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    # Text of a row: words drawn from the nearest "cluster" so duplicates overlap in text.
    anchor = np.argmax(u @ u[: m // 2].T, axis=1) if m > 1 else np.zeros(m, int)
    vocab = np.array([word(i) for i in range(5000)])  # plain words: no facts
    texts = []
    for i in range(m):
        base = np.random.default_rng(int(anchor[i])).choice(vocab, 12)
        # A near copy differs from its source in layout only (spacing): a changed word would
        # be content the representative lacks, which the guard refuses (rules 18.0).
        texts.append(" ".join(base) + spacing(i))
    return segments_frame(texts, list(x), salience=list(rng.uniform(0.1, 1, m).astype(float)))
