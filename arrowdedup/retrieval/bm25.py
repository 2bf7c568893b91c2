"""The BM25 index of a store version, built while the job writes it, queried with NumPy.

Tokens come from :mod:`arrowdedup.retrieval.tokens`, the one tokenizer that indexes segments
and tokenizes queries (numbers, versions, flags and identifiers stay whole). Building is
columnar: each bucket's kept texts are tokenized in one pass over their UTF-8 buffer and
reduced to bucket-local token ids (:meth:`Bm25Builder.encode`, run where the bucket is
deduplicated, so it overlaps the next bucket's work); at commit the bucket vocabularies merge
into one sorted vocabulary, a counting sort lays out the postings column by column, and the
scores are computed for all postings at once (:meth:`Bm25Builder.finish`). No Python loop
runs per document.

Scoring is BM25, Lucene variant (k1 = 1.5, b = 0.75): ``idf = ln(1 + (N − df + 0.5) /
(df + 0.5))`` and ``tf / (tf + k1·(1 − b + b·|d| / avg|d|))``, the defaults of bm25s. The files
in ``<version>/bm25/`` are the sparse score matrix in bm25s' layout (CSC ``data``, ``indices``,
``indptr`` as ``.npy``, ``vocab.index.json``, ``params.index.json``), so ``bm25s.BM25.load``
reads them too (a test checks both give the same scores). A query sums the score columns of
its tokens with one ``bincount``. The vocabulary is sorted, so identical inputs write
identical index files.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import pyarrow as pa

from ..errors import StoreError
from ..store.atomic import save_npy

if TYPE_CHECKING:
    from ..store import Store
    from ..store.integrity import FileGuard
from .tokens import JIT_MIN_TEXTS, STOPWORDS, lowercase, tokenize, tokens_of

__all__ = ["BM25_DIR", "STOPWORDS", "Bm25Builder", "Bm25Index", "build_bm25_index",
           "load_bm25", "tokenize"]

BM25_DIR = "bm25"
K1 = 1.5
B = 0.75
PARAMS = {"k1": K1, "b": B, "delta": 0.5, "method": "lucene", "idf_method": "lucene",
          "dtype": "float32", "int_dtype": "int32", "backend": "numpy"}
FILES = {"data": "data.csc.index.npy", "indices": "indices.csc.index.npy",
         "indptr": "indptr.csc.index.npy", "vocab": "vocab.index.json",
         "params": "params.index.json"}
RAW_FILES = {"tf": "tf.csc.index.npy", "doc_len": "doc_len.index.npy"}
# From this many token occurrences (postings) on, postings and scores come from Numba.
JIT_MIN_POSTINGS = 50_000


@dataclasses.dataclass(frozen=True)
class BucketTokens:
    """One bucket's postings over its own vocabulary (first-seen order): column-major,
    ``indptr`` per token, the bucket-local row of each posting (ascending inside a token)
    and its term frequency, beside the token count of every row."""

    vocab: pa.Array  # large_string
    indptr: np.ndarray  # int64 (len(vocab) + 1)
    doc_rows: np.ndarray  # int32
    tf: np.ndarray  # int32
    doc_len: np.ndarray  # int64 (n_rows)
    n_rows: int


def bucket_tokens(texts: pl.Series) -> BucketTokens:
    """Tokenize one bucket's texts and lay out its postings: the Numba scanner from
    ``JIT_MIN_TEXTS`` texts on, the Python twin below (no JIT code loaded for small
    stores)."""
    n = texts.len()
    if n >= JIT_MIN_TEXTS:
        from . import tokens_jit as jit

        ids, rows, vocab = jit.scan(jit.lower(texts))
    else:
        per_row = [tokens_of(t) for t in lowercase(texts).to_list()]
        flat = [t for toks in per_row for t in toks]
        index: dict[str, int] = {}
        ids = np.asarray([index.setdefault(t, len(index)) for t in flat], dtype=np.int32)
        rows = np.repeat(np.arange(n, dtype=np.int32), [len(t) for t in per_row])
        vocab = pa.array(list(index), type=pa.large_string())
    indptr, doc_rows, tf = _postings(ids, rows, len(vocab))
    if rows.shape[0] >= JIT_MIN_POSTINGS:
        from .tokens_jit import row_lengths

        doc_len = row_lengths(rows, n)
    else:
        doc_len = np.bincount(rows, minlength=n).astype(np.int64)
    return BucketTokens(vocab, indptr, doc_rows, tf, doc_len, n)


def _postings(ids: np.ndarray, rows: np.ndarray, n_vocab: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if ids.shape[0] >= JIT_MIN_POSTINGS:
        from .tokens_jit import postings

        return postings(ids, rows, n_vocab)
    width = int(rows.max()) + 1 if rows.size else 1
    uniq, counts = np.unique(ids.astype(np.int64) * width + rows, return_counts=True)
    tok = uniq // width
    indptr = np.zeros(n_vocab + 1, np.int64)
    np.cumsum(np.bincount(tok, minlength=n_vocab), out=indptr[1:])
    return indptr, (uniq % width).astype(np.int32), counts.astype(np.int32)


def _merge_postings(parts: list[tuple[BucketTokens, int]], gids: list[np.ndarray],
                    n_vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The postings of every token of the merged vocabulary, from the buckets' own (each
    with the store row of its row 0, and the merged id of each of its tokens): per token,
    its block of postings from every bucket that has it, in store order, so rows stay
    ascending inside a token. Blocks are placed, not postings sorted; each bucket's
    destinations are known before any is placed, so large merges place the buckets on
    Numba's thread count of Python threads (the kernel releases the GIL)."""
    indptr = np.zeros(n_vocab + 1, np.int64)
    for (part, _), gid in zip(parts, gids, strict=True):
        indptr[gid + 1] += np.diff(part.indptr)  # a bucket names each merged id once
    np.cumsum(indptr, out=indptr)
    total = int(indptr[-1])
    # Where each bucket's block of each of its tokens starts: after the earlier buckets'.
    pos = indptr[:-1].copy()
    starts = []
    for (part, _), gid in zip(parts, gids, strict=True):
        starts.append(pos[gid])
        pos[gid] += np.diff(part.indptr)
    # Allocated by NumPy (huge pages on large arrays; Numba's allocator faults 4 KiB pages).
    out_rows = np.empty(total, np.int32)
    out_tf = np.empty(total, np.int32)
    if _finish_jitted(total):
        from concurrent.futures import ThreadPoolExecutor

        from .tokens_jit import place_postings

        def place(i: int) -> None:
            (part, first), at = parts[i], starts[i]
            place_postings(at, part.indptr, part.doc_rows, part.tf, first, out_rows, out_tf)

        workers = min(len(parts), _threads())
        if workers > 1:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(place, range(len(parts))))
        else:
            for i in range(len(parts)):
                place(i)
        return indptr, out_rows, out_tf
    for (part, first), at in zip(parts, starts, strict=True):
        lens = np.diff(part.indptr)
        dest = np.repeat(at - part.indptr[:-1], lens) + np.arange(part.doc_rows.shape[0])
        out_rows[dest] = part.doc_rows + np.int32(first)
        out_tf[dest] = part.tf
    return indptr, out_rows, out_tf


def _finish_jitted(postings: int) -> bool:
    """Whether the commit's merge and scores take the jitted kernels: from
    ``JIT_MIN_POSTINGS`` postings on, in a process that has Numba loaded already (the local
    engine's, whose workers tokenised the buckets with it). A Ray driver has not: loading Numba
    for this one pass cost it more than the NumPy twin (at 1M, 0.64-0.67 s with Numba's load
    against 0.33-0.55 s for NumPy in fresh processes; 0.12 s once Numba is loaded). Both write
    the same bytes (a test holds them to it), so the engine does not show in the index, and
    :func:`arrowdedup.jit.interpreted.forced` makes the choice (the compile stage's warm-up)."""
    from ..jit.interpreted import KERNEL, forced_kind

    forced = forced_kind()
    if forced is not None:
        return forced == KERNEL
    return postings >= JIT_MIN_POSTINGS and "numba" in sys.modules


def _threads() -> int:
    """Numba's thread count for the calling thread (a job with ``threads=1`` sets one):
    what the large merges also spread their Python threads over."""
    from ..jit.runtime import numba

    return int(numba.get_num_threads())


class Bm25Builder:
    """An index builder of the job path: ``encode`` a bucket's kept rows (in the worker,
    where its postings are laid out), ``add`` the encoded buckets in store order, ``finish``
    into a version directory (merging the buckets' postings token by token)."""

    name = "bm25"

    def encode(self, kept: pl.DataFrame) -> BucketTokens | None:
        if "text" not in kept.columns:
            return None
        from .keys import indexed_text

        return bucket_tokens(indexed_text(kept))  # the text plus its key values

    def __init__(self) -> None:
        self._parts: list[tuple[BucketTokens, int]] = []  # with the store row of each row 0
        self._rows = 0

    def encoder(self) -> Bm25Builder:
        """A stateless builder for workers (only its ``encode`` is called there)."""
        return Bm25Builder()

    def add(self, part: BucketTokens | None, rows: int) -> None:
        """Append a bucket's tokens; ``rows`` is its kept row count (store order)."""
        if part is not None:
            assert part.n_rows == rows, (part.n_rows, rows)
            self._parts.append((part, self._rows))
        self._rows += rows

    def finish(self, version_dir: Path) -> Path | None:
        """Write ``<version>/bm25/``; nothing when no kept text has a single token."""
        parts = [p for p, _ in self._parts]
        n_docs = self._rows
        if not parts or n_docs == 0 or sum(len(p.vocab) for p in parts) == 0:
            return None
        # One sorted vocabulary over the buckets' vocabularies; each bucket's local ids map
        # to positions in it.
        local = pl.DataFrame({
            "tok": pa.chunked_array([p.vocab for p in parts], type=pa.large_string()),
            "part": np.repeat(np.arange(len(parts)), [len(p.vocab) for p in parts]),
            "local": np.concatenate([np.arange(len(p.vocab)) for p in parts]),
        })
        vocab = local.get_column("tok").unique().sort()
        mapped = local.join(pl.DataFrame({"tok": vocab, "gid": pl.int_range(
            0, vocab.len(), eager=True, dtype=pl.Int32)}), on="tok", how="left")
        gid = mapped.sort("part", "local").get_column("gid").to_numpy()
        n_vocab = vocab.len()
        gids = np.split(gid.astype(np.int64), np.cumsum([len(p.vocab) for p in parts])[:-1])
        indptr, doc_rows, tf = _merge_postings(self._parts, gids, n_vocab)
        counts = np.zeros(n_docs, np.int64)
        for p, first in self._parts:
            counts[first:first + p.n_rows] = p.doc_len
        doc_len = counts.astype(np.float64)
        avg = float(doc_len.mean()) if n_docs else 0.0
        avg = avg if avg > 0 else 1.0
        tf_narrow = narrow_counts(tf)
        if np.shares_memory(tf_narrow, tf):  # int32 already: kept apart from the scores
            tf_narrow = tf_narrow.copy()
        jitted = _finish_jitted(doc_rows.shape[0])
        if jitted:
            from .tokens_jit import bm25_scores

            # The scores overwrite the int32 term frequencies (kept narrowed above): no
            # fresh 24 MB at 1M to fault in.
            data = tf.view(np.float32)
            bm25_scores(indptr, doc_rows, tf, doc_len, avg, n_docs, K1, B, data)
        else:
            df = np.diff(indptr).astype(np.float64)
            idf = np.log1p((n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
            tf64 = tf.astype(np.float64)
            # Each document's length norm once, then one gather per posting (the kernel's
            # order: the same expression per document, so the same bits), in place after.
            norm = (K1 * ((1.0 - B) + B * doc_len / avg))[doc_rows]
            norm += tf64
            np.divide(tf64, norm, out=norm)
            data = norm.astype(np.float32)
            data *= np.repeat(idf, np.diff(indptr))
        out = Path(version_dir) / BM25_DIR
        out.mkdir(parents=True, exist_ok=True)
        # np.asarray: no copy when the dtype already matches (the usual case). The two large
        # files are written side by side when Numba may use more than one thread (a write
        # releases the GIL): 24 MB each at 1M.
        arrays: list[tuple[Path, np.ndarray]] = [
            (out / FILES["data"], np.asarray(data, np.float32)),
            (out / FILES["indices"], np.asarray(doc_rows, np.int32)),
            (out / FILES["indptr"], np.asarray(indptr, np.int64))]
        if jitted and _threads() > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=2) as pool:
                list(pool.map(lambda item: save_npy(*item), arrays))
        else:
            for path, array in arrays:
                save_npy(path, array)
        words = vocab.to_list()
        (out / FILES["vocab"]).write_text(
            json.dumps(dict(zip(words, range(n_vocab), strict=True)), ensure_ascii=False),
            encoding="utf-8")
        # The raw statistics too, so a store with deltas can merge its layers' BM25 at query
        # time (retrieval.bm25_layers) without re-tokenizing them.
        save_npy(out / RAW_FILES["tf"], tf_narrow)
        save_npy(out / RAW_FILES["doc_len"], counts.astype(np.int32))
        (out / FILES["params"]).write_text(
            json.dumps({**PARAMS, "num_docs": n_docs, "version": "arrowdedup"}, indent=4),
            encoding="utf-8")
        return out


def narrow_counts(values: np.ndarray) -> np.ndarray:
    """Non-negative counts in the narrowest of uint8, uint16 and int32 that holds them
    (term frequencies are almost all small: a quarter of the bytes to write at 1M; readers
    take any integer dtype)."""
    top = int(values.max()) if values.size else 0
    for dtype in (np.uint8, np.uint16):
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return np.asarray(values, np.int32)


def build_bm25_index(version_dir: Path, kept: pl.DataFrame) -> None:
    """Index ``kept.text`` (store row order) into ``<version>/bm25/`` in one go
    (the text plus its key values, ``keys.indexed_text``)."""
    builder = Bm25Builder()
    builder.add(builder.encode(kept), kept.height)
    builder.finish(version_dir)


class Bm25Index:
    """A loaded (memory-mapped) BM25 index of one store version."""

    def __init__(self, path: Path, store: Store | None = None) -> None:
        from ..store.integrity import load_npy, read_text

        def guard(name: str) -> FileGuard | None:
            return None if store is None else store.guard(path / name)

        try:
            params = json.loads(read_text(path / FILES["params"], guard(FILES["params"])))
            self._vocab: dict[str, int] = json.loads(
                read_text(path / FILES["vocab"], guard(FILES["vocab"])))
            self._data = load_npy(path / FILES["data"], guard(FILES["data"]), mmap=True)
            self._indices = load_npy(path / FILES["indices"], guard(FILES["indices"]),
                                     mmap=True)
            self._indptr = load_npy(path / FILES["indptr"], guard(FILES["indptr"]))
        except (OSError, ValueError, KeyError) as err:
            raise StoreError(f"the BM25 index at {path} cannot be read ({err}); re-ingest "
                             "the store") from err
        self.size = int(params["num_docs"])
        if self._indptr.shape[0] != len(self._vocab) + 1:
            raise StoreError(f"the BM25 index at {path} is inconsistent (vocabulary "
                             f"{len(self._vocab)}, columns {self._indptr.shape[0] - 1}); "
                             "re-ingest the store")

    def token_ids(self, query: str) -> list[int]:
        """Ids of the query's indexed tokens (repeats count, as in bm25s)."""
        tokens = tokenize([query]).to_list()[0]
        return [self._vocab[t] for t in tokens if t in self._vocab]

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed segment for one query (0 where no query term occurs)."""
        ids = self.token_ids(query)
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        spans = [(int(self._indptr[i]), int(self._indptr[i + 1])) for i in ids]
        rows = np.concatenate([self._indices[a:b] for a, b in spans])
        weights = np.concatenate([self._data[a:b] for a, b in spans]).astype(np.float64)
        return np.bincount(rows, weights=weights, minlength=self.size).astype(np.float32)


def load_bm25(version_dir: Path, store: Store | None = None) -> Bm25Index | None:
    """The index of a version, or ``None`` when it has none (no text, or an older writer);
    with ``store`` (the version opened), each read checks the bytes it reads."""
    path = Path(version_dir) / BM25_DIR
    if not (path / FILES["params"]).exists():
        return None
    return Bm25Index(path, store)
