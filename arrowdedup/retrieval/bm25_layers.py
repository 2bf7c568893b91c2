"""BM25 over a version with deltas: one index per layer, statistics merged at query time.

Each layer (the base and every delta) has its own ``bm25/`` index with the raw term
frequencies and document lengths beside the precomputed scores. A query reads, for each of its
tokens, the postings of every layer, drops the rows later layers replaced or deleted, and
scores them with the statistics of the live rows only (``N``, each token's ``df``, the mean
length), in the same float32 steps as :class:`arrowdedup.retrieval.bm25.Bm25Builder`: the
scores equal those of a store built from scratch from the same corpus, so an update never
rebuilds the index. ``compact`` folds the layers back into one precomputed index.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from ..errors import StoreError
from ..store import Store
from ..store.integrity import CheckedArray, check_parquet, load_npy, read_text
from ..store.layout import PART_GLOB, SEGMENTS
from .bm25 import BM25_DIR, FILES, K1, RAW_FILES, B, Bm25Index, load_bm25, tokenize

__all__ = ["LayeredBm25", "load_store_bm25"]


@dataclasses.dataclass
class _Layer:
    rows: np.ndarray  # store row of each stored row of the layer, -1 where not live
    vocab: dict[str, int]
    indptr: np.ndarray
    indices: np.ndarray | CheckedArray
    tf: np.ndarray | CheckedArray
    doc_len: np.ndarray


def _layer_rows(store: Store, path: Path, dead: frozenset[str]) -> np.ndarray:
    """A live mask of the layer's stored rows (segments part order)."""
    masks = []
    for part in sorted((path / SEGMENTS).glob(PART_GLOB)):
        if dead:
            ids = store.read_parquet(part, ["doc_id"]).get_column("doc_id")
            masks.append(~ids.cast(pl.String).is_in(sorted(dead)).to_numpy())
        else:
            guard = store.guard(part)
            if guard is not None:
                check_parquet(guard, [])  # the footer, whose row count is read
            masks.append(np.ones(pq.ParquetFile(part).metadata.num_rows, dtype=bool))
    return np.concatenate(masks) if masks else np.zeros(0, dtype=bool)


class LayeredBm25:
    """The BM25 scores of a layered version's live rows (store order), like
    :class:`Bm25Index`: ``size`` and ``scores(query)``."""

    def __init__(self, store: Store) -> None:
        self.layers: list[_Layer] = []
        offset = 0
        total_len = 0.0
        for layer in store.layers():
            live = _layer_rows(store, layer.path, layer.dead)
            rows = np.full(live.shape[0], -1, dtype=np.int64)
            rows[live] = offset + np.arange(int(live.sum()), dtype=np.int64)
            offset += int(live.sum())
            index = layer.path / BM25_DIR
            if (index / FILES["params"]).exists():
                if not (index / RAW_FILES["tf"]).exists():
                    raise StoreError(f"the BM25 index at {index} has no term frequencies "
                                     "(written before deltas); run `arrowdedup compact` or "
                                     "re-ingest with --replace")
                try:
                    vocab = json.loads(read_text(index / FILES["vocab"],
                                                 store.guard(index / FILES["vocab"])))
                    indptr = load_npy(index / FILES["indptr"],
                                      store.guard(index / FILES["indptr"]))
                    indices = load_npy(index / FILES["indices"],
                                       store.guard(index / FILES["indices"]), mmap=True)
                    tf = load_npy(index / RAW_FILES["tf"], store.guard(index / RAW_FILES["tf"]),
                                  mmap=True)
                    doc_len = load_npy(index / RAW_FILES["doc_len"],
                                       store.guard(index / RAW_FILES["doc_len"])
                                       ).astype(np.float64)
                except (OSError, ValueError) as err:
                    raise StoreError(f"the BM25 index at {index} cannot be read ({err}); "
                                     "run `arrowdedup verify`, then compact or re-ingest") \
                        from err
            else:  # no kept text with a token in this layer
                vocab, indptr = {}, np.zeros(1, np.int64)
                indices = CheckedArray(np.zeros(0, np.int32), None, 0)
                tf = CheckedArray(np.zeros(0, np.int32), None, 0)
                doc_len = np.zeros(live.shape[0], np.float64)
            if doc_len.shape[0] != live.shape[0]:
                raise StoreError(f"the BM25 index at {index} covers {doc_len.shape[0]} rows, "
                                 f"the layer holds {live.shape[0]}; run `arrowdedup verify`")
            total_len += float(doc_len[live].sum())
            self.layers.append(_Layer(rows, vocab, indptr, indices, tf, doc_len))
        self.size = offset
        avg = total_len / offset if offset else 0.0
        self.avg = avg if avg > 0 else 1.0

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every live segment for one query (0 where no query term occurs)."""
        tokens = tokenize([query]).to_list()[0]
        all_rows: list[np.ndarray] = []
        all_weights: list[np.ndarray] = []
        n = np.float64(self.size)
        for token in tokens:
            rows_t: list[np.ndarray] = []
            tf_t: list[np.ndarray] = []
            len_t: list[np.ndarray] = []
            for layer in self.layers:
                i = layer.vocab.get(token)
                if i is None:
                    continue
                a, b = int(layer.indptr[i]), int(layer.indptr[i + 1])
                local = np.asarray(layer.indices[a:b], dtype=np.int64)
                store_rows = layer.rows[local]
                live = store_rows >= 0
                rows_t.append(store_rows[live])
                tf_t.append(np.asarray(layer.tf[a:b])[live])
                len_t.append(layer.doc_len[local[live]])
            if not rows_t:
                continue
            rows = np.concatenate(rows_t)
            if rows.size == 0:
                continue
            tf64 = np.concatenate(tf_t).astype(np.float64)
            df = np.float64(rows.size)
            idf = np.float32(np.log1p((n - df + 0.5) / (df + 0.5)))
            norm = K1 * ((1.0 - B) + B * np.concatenate(len_t) / self.avg)
            tfc = (tf64 / (norm + tf64)).astype(np.float32)
            all_rows.append(rows)
            all_weights.append((idf * tfc).astype(np.float32).astype(np.float64))
        if not all_rows:
            return np.zeros(self.size, dtype=np.float32)
        return np.bincount(np.concatenate(all_rows), weights=np.concatenate(all_weights),
                           minlength=self.size).astype(np.float32)


def load_store_bm25(store: Store) -> Bm25Index | LayeredBm25 | None:
    """The BM25 index of a version: the precomputed one of a single layer, merged layers for
    a version with deltas; ``None`` when the version has none."""
    if not store.is_layered:
        return load_bm25(store.version, store)
    if not any((layer.path / BM25_DIR / FILES["params"]).exists() for layer in store.layers()):
        return None
    return LayeredBm25(store)
