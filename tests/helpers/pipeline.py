"""Builders for the pipeline tests: a corpus of documents with planted near and exact copies,
and the data files of a store's current version (to compare two runs byte for byte)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from tests.helpers import segments_frame, spacing, word


def corpus(docs: int = 30, per_doc: int = 40, dim: int = 16, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    texts, embs, doc_ids = [], [], []
    for d in range(docs):
        half = per_doc // 2
        base = rng.standard_normal((half, dim)).astype(np.float32)
        source = rng.integers(0, half, per_doc - half)
        copies = base[source]
        copies = copies + 0.05 * rng.standard_normal(copies.shape).astype(np.float32)
        x = np.concatenate([base, copies])
        for i in range(per_doc):
            # A copy says what its source says, in other spacing (layout: rules 18.0 merge it);
            # the last three copy it exactly.
            src = i if i < half else int(source[i - half])
            layout = "" if i < half or i >= per_doc - 3 else spacing(i)
            texts.append(f"doc {word(d)} text {word(src)}{layout}")
            embs.append(x[i])
            doc_ids.append(f"doc-{d}")
    frame = segments_frame(texts, embs, doc_id=doc_ids,
                           salience=list(rng.uniform(0.1, 1.0, len(texts)).astype(float)))
    return frame.with_columns((pl.col("doc_id") + ":" + pl.col("segment_id")).alias("segment_id"))


def data_files(root: Path) -> dict[str, bytes]:
    version = (root / "current").resolve()
    return {str(p.relative_to(version)): p.read_bytes() for p in sorted(version.rglob("*"))
            if p.is_file() and p.name != "manifest.json"}
