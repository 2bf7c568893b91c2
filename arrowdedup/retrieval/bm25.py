"""The BM25 index of a store version, built at ingest time (a ``write_store`` hook) with bm25s.

Tokenizer (the same function indexes the segments and tokenizes queries): Unicode lower-case,
then every run of two or more word characters (regex ``\\w{2,}``, Unicode-aware, run in Polars'
Rust regex engine so 1M segments tokenize without a Python loop), minus bm25s' English
stop-word list; no stemming. Scripts without spaces (Japanese, Chinese) therefore index whole
runs of characters as one token: BM25 finds exact runs there, the dense signal does the rest.

The vocabulary is sorted, so identical inputs write identical index files. Scoring is BM25
(Lucene variant, k1 = 1.5, b = 0.75, bm25s defaults). Files live in ``<version>/bm25/``.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ..errors import MissingDependencyError, StoreError

BM25_DIR = "bm25"
TOKEN_PATTERN = r"\w{2,}"


def _bm25s() -> Any:
    try:
        import bm25s
    except ImportError as err:
        raise MissingDependencyError("bm25s", "bm25", "the BM25 index") from err
    # bm25s reports each index build on its own logger; that is noise on our command line.
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


@functools.cache
def stopwords() -> frozenset[str]:
    """bm25s' English stop-word list."""
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def tokenize(texts: pl.Series | list[str]) -> pl.Series:
    """A list of tokens per text (see the module docstring for the rules)."""
    series = texts if isinstance(texts, pl.Series) else pl.Series("text", texts, dtype=pl.String)
    stop = pl.Series(sorted(stopwords()), dtype=pl.String)
    return (series.cast(pl.String).fill_null("").str.to_lowercase()
            .str.extract_all(TOKEN_PATTERN)
            .list.eval(pl.element().filter(~pl.element().is_in(stop.implode()))))


def token_ids(texts: pl.Series) -> tuple[list[list[int]], dict[str, int]]:
    """Token ids per text and the sorted vocabulary (token → id)."""
    tokens = tokenize(texts)
    flat = pl.DataFrame({"row": pl.int_range(0, tokens.len(), eager=True, dtype=pl.Int64),
                         "tok": tokens}).explode("tok").drop_nulls("tok")
    vocab_tokens = flat.get_column("tok").unique().sort()
    vocab = {t: i for i, t in enumerate(vocab_tokens.to_list())}
    ids = flat.join(pl.DataFrame({"tok": vocab_tokens,
                                  "id": pl.int_range(0, vocab_tokens.len(), eager=True,
                                                     dtype=pl.Int64)}),
                    on="tok", how="left", maintain_order="left")
    rows = ids.get_column("row").to_numpy()
    values = ids.get_column("id").to_numpy()
    counts = np.bincount(rows, minlength=tokens.len())
    splits = np.split(values, np.cumsum(counts)[:-1]) if tokens.len() else []
    return [s.tolist() for s in splits], vocab


def build_bm25_index(version_dir: Path, kept: pl.DataFrame) -> None:
    """``write_store`` hook: index ``kept.text`` (store row order) into ``<version>/bm25/``."""
    if kept.height == 0 or "text" not in kept.columns:
        return
    bm25s = _bm25s()
    from .keys import indexed_text

    corpus_ids, vocab = token_ids(indexed_text(kept))  # the text plus its key values
    if not vocab:
        # No text has a single indexable token (bm25s fails on an empty vocabulary): the
        # store simply has no BM25 index, as a store without text would not.
        return
    model = bm25s.BM25()
    model.index((corpus_ids, vocab), show_progress=False)
    model.save(str(Path(version_dir) / BM25_DIR), show_progress=False)


class Bm25Index:
    """A loaded (memory-mapped) BM25 index of one store version."""

    def __init__(self, path: Path) -> None:
        bm25s = _bm25s()
        try:
            self._model = bm25s.BM25.load(str(path), mmap=True, show_progress=False,
                                          verbosity=0)
        except (OSError, ValueError) as err:
            raise StoreError(f"the BM25 index at {path} cannot be read ({err}); re-ingest "
                             "the store") from err
        self._vocab: dict[str, int] = self._model.vocab_dict
        self.size = int(self._model.scores["num_docs"])

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed segment for one query (0 where no query term occurs)."""
        tokens = tokenize([query]).to_list()[0]
        ids = [self._vocab[t] for t in tokens if t in self._vocab]
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._model.get_scores_from_ids(ids), dtype=np.float32)


def load_bm25(version_dir: Path) -> Bm25Index | None:
    """The index of a version, or ``None`` when it has none (no text, or an older writer)."""
    path = Path(version_dir) / BM25_DIR
    if not (path / "params.index.json").exists():
        return None
    return Bm25Index(path)
