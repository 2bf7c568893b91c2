"""``search``: dense + BM25 candidates → four-signal RRF → relevance floor → cross-doc dedup →
top K (SPEC §4), with one retrieval-log file per search.

Stages (timed, in ``SearchResult.timings``): ``embed`` (text queries only), ``dense`` (one BLAS
product over the memory-mapped unit vectors), ``bm25``, ``fuse`` (ranks, RRF, floor, order),
``dedup``. The small columns of a store version (ids, text, salience, time, language, links)
are loaded once per process and version and kept in memory: versions never change, so the
cache cannot go stale, and a search then only touches its ~100 candidates.

Choices the spec leaves open, made here:
- every candidate is scored on every signal (its true cosine and BM25 score, not only those
  of the list it came from); a "BM25 hit" is a positive BM25 score;
- a vector query has no words, so in hybrid mode the BM25 signal is left out (its weight and
  its share of the normaliser); keyword mode refuses a vector query;
- freshness ranks documents by their newest ``created_at`` among the candidates, and each
  segment takes its document's rank; without the column every row shares rank 1;
- a multi-query search hashes its texts joined by newlines for the log's ``query_hash``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import logging
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from ..config import DedupConfig, resolve_config
from ..embed import MINILM_NAME, Embedder, get_embedder
from ..errors import EmbedderError, InputError, StoreError
from ..store import Store, atomic_path, open_store
from ..vectors import language_codes
from .bm25 import Bm25Index, load_bm25
from .crossdoc import displaced_lists, duplicate_of
from .dense import cosine_scores, top_n, unit_queries
from .fusion import SearchMode, competition_rank, group_rank, mode_weights, rrf, score_order

log = logging.getLogger("arrowdedup.retrieval")

RESULT_COLUMNS = ("rank", "doc_id", "segment_id", "text", "rrf", "score", "rank_dense",
                  "rank_bm25", "rank_salience", "rank_freshness", "displaced_ids")
VIEW_COLUMNS = ("doc_id", "segment_id", "text", "segment_type", "position", "salience",
                "created_at", "language", "section", "neighbours_before", "neighbours_after",
                "title", "doc_type")
LOG_SCHEMA = pa.schema([
    ("time", pa.timestamp("us", tz="UTC")), ("run_id", pa.string()),
    ("query_hash", pa.string()), ("mode", pa.string()), ("k", pa.int32()),
    ("before", pa.int64()), ("after", pa.int64()), ("removed", pa.int64()),
    ("timings", pa.string()),
])

Query = str | Sequence[str] | np.ndarray


def log_line(before: int, after: int) -> str:
    """The SPEC §8 retrieval log line."""
    return (f"Post-ranking deduplication: {before} → {after} segments "
            f"(removed {before - after} cross-doc duplicates)")


@dataclasses.dataclass
class SearchResult:
    """What one search returns: the top-K ``results`` and the dedup counts behind them."""

    results: pl.DataFrame
    before: int
    after: int
    timings: dict[str, float]
    mode: str
    k: int
    query_hash: str
    rows: np.ndarray  # store row (``Store.segments()`` order) of each result

    @property
    def removed(self) -> int:
        return self.before - self.after

    def summary(self) -> str:
        return log_line(self.before, self.after)


class StoreView:
    """The in-memory part of one store version that retrieval reads on every search: the small
    columns (rechunked once), per-row signal arrays, the recorded config, the mmapped vectors
    and the BM25 index (loaded on first use)."""

    def __init__(self, store: Store) -> None:
        self.version = store.version
        self.config = store.config
        lf = store.segments(with_embeddings=False)
        names = lf.collect_schema().names()
        self.frame = lf.select([c for c in VIEW_COLUMNS if c in names]).collect().rechunk()
        self.vectors = store.vectors()
        self._bm25: Bm25Index | bool | None = False
        if self.vectors is not None and self.vectors.shape[0] != self.frame.height:
            raise StoreError(
                f"store {store.root}: the embeddings have {self.vectors.shape[0]} rows, the "
                f"segments {self.frame.height}; the version is damaged: run `arrowdedup verify`, "
                "re-ingest"
            )
        ids = self.frame.get_column("segment_id").cast(pl.String)
        self.segment_ids = ids.to_numpy()
        self.doc_codes = self.frame.get_column("doc_id").cast(pl.String).rank("dense") \
            .to_numpy().astype(np.int64)
        self.lang = language_codes(self.frame)
        # Result columns as one Arrow table: a single-threaded take of ~10 rows per search.
        self.core = self.frame.select(
            pl.col("doc_id").cast(pl.String), pl.col("segment_id").cast(pl.String),
            pl.col("text").cast(pl.String)).to_arrow().combine_chunks()
        self.salience, self.salience_known = self._salience()
        self.fresh, self.fresh_known = self._freshness()
        self._row_of: dict[str, int] | None = None

    @property
    def bm25(self) -> Bm25Index | None:
        if self._bm25 is False:
            self._bm25 = load_bm25(self.version)
        return self._bm25  # type: ignore[return-value]

    def row_of(self, segment_id: str) -> int | None:
        if self._row_of is None:
            self._row_of = {str(s): i for i, s in enumerate(self.segment_ids)}
        return self._row_of.get(segment_id)

    def _salience(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.frame.height
        if "salience" not in self.frame.columns:
            return np.zeros(n), np.zeros(n, dtype=bool)
        s = self.frame.get_column("salience")
        return s.cast(pl.Float64).fill_null(np.nan).to_numpy(), s.is_not_null().to_numpy()

    def _freshness(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.frame.height
        if "created_at" not in self.frame.columns:
            return np.zeros(n), np.zeros(n, dtype=bool)
        col = self.frame.get_column("created_at")
        if not col.dtype.is_temporal():
            col = col.cast(pl.String).str.to_datetime(strict=False, time_zone="UTC")
        col = col.cast(pl.Datetime("us")) if col.dtype == pl.Date else col
        values = col.dt.epoch("us").cast(pl.Float64)
        return values.fill_null(np.nan).to_numpy(), values.is_not_null().to_numpy()


_VIEWS: dict[str, StoreView] = {}
_MAX_VIEWS = 4


def store_view(store: Store) -> StoreView:
    """The cached view of a store version (keyed by its directory: versions are immutable)."""
    key = str(store.version)
    view = _VIEWS.get(key)
    if view is None:
        view = StoreView(store)
        while len(_VIEWS) >= _MAX_VIEWS:
            _VIEWS.pop(next(iter(_VIEWS)))
        _VIEWS[key] = view
    return view


@functools.lru_cache(maxsize=4)
def _named_embedder(spec: str) -> Embedder:
    return get_embedder(spec)


def resolve_embedder(store: Store, embedder: str | Embedder | None) -> Embedder:
    """The embedder for text queries: ``embedder=`` or the model recorded in the store."""
    model = store.embedding_model
    if embedder is not None:
        emb = _named_embedder(embedder) if isinstance(embedder, str) else get_embedder(embedder)
    elif model is None:
        raise EmbedderError(
            f"store {store.root} records no embedding model, so a text query cannot be "
            "embedded; pass embedder=... (CLI --embedder) or a query vector"
        )
    elif model in (MINILM_NAME, "minilm", "all-MiniLM-L6-v2"):
        emb = _named_embedder("minilm")
    elif model.startswith("model2vec:"):
        path = (store.manifest.get("embedding") or {}).get("path")
        if not path or not Path(path).is_dir():
            raise EmbedderError(
                f"store {store.root} was embedded with {model!r} and records no usable local "
                "path for it; pass embedder='model2vec:PATH' (CLI --embedder model2vec:PATH) "
                "with that model's directory"
            )
        emb = _named_embedder(f"model2vec:{path}")
    else:
        raise EmbedderError(
            f"store {store.root} was embedded with {model!r}, which this version cannot load; "
            "pass an embedder object of that model with embedder=..."
        )
    dim = store.embedding_dim
    if dim and emb.dim != dim:
        raise EmbedderError(
            f"embedder {emb.name!r} gives {emb.dim}-d vectors, store {store.root} holds "
            f"{dim}-d ({model!r}); use the store's embedder"
        )
    if model and emb.name != model:
        raise EmbedderError(
            f"embedder {emb.name!r} is not the store's model {model!r} (SPEC §9: vectors of two "
            "models must not be compared); use the store's embedder"
        )
    return emb


def _parse_query(query: Any) -> tuple[list[str], np.ndarray | None]:
    if isinstance(query, str):
        if not query.strip():
            raise InputError("the query is empty; give some words or a vector")
        return [query], None
    if isinstance(query, np.ndarray):
        if query.ndim not in (1, 2) or query.size == 0 or not np.issubdtype(query.dtype,
                                                                              np.number):
            raise InputError(f"a vector query must be a 1-D numeric array, got shape "
                             f"{query.shape} of {query.dtype}")
        return [], query
    if isinstance(query, Sequence) and query and all(isinstance(q, str) for q in query):
        texts = [q for q in query if q.strip()]
        if not texts:
            raise InputError("every query of the list is empty; give some words")
        return texts, None
    raise InputError(
        f"query must be a string, a non-empty list of strings or a 1-D NumPy vector, got "
        f"{type(query).__name__}"
    )


def query_hash(texts: list[str], vector: np.ndarray | None) -> str:
    """XXH64 (hex) of the query text (texts joined by newlines) or of the float32 vector bytes."""
    if vector is not None:
        data = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
    else:
        data = "\n".join(texts).encode("utf-8")
    return xxhash.xxh64_hexdigest(data)


def search(
    store: str | Path | Store,
    query: Query,
    k: int = 10,
    mode: str | SearchMode = "hybrid",
    config: DedupConfig | None = None,
    embedder: str | Embedder | None = None,
) -> SearchResult:
    """Search a store: RRF over dense, BM25, salience and freshness ranks, cross-doc dedup, top K.

    ``query`` is a string, a list of strings (fused: each signal keeps its best score), or a
    1-D vector of the store's dimension. ``config=None`` uses the store's recorded config; text
    queries are embedded with the store's model or ``embedder``.
    """
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    st = open_store(store)
    view = store_view(st)
    cfg = view.config if config is None else resolve_config(config)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InputError(f"k = {k!r} is invalid: ask for at least 1 result")
    weights = mode_weights(cfg.rrf, mode)
    mode_name = SearchMode(str(getattr(mode, "value", mode)).lower()).value
    texts, vector = _parse_query(query)
    n_cand = max(3 * k, 50)

    if vector is not None and mode_name == SearchMode.KEYWORD.value:
        raise InputError("keyword mode needs a text query (BM25 has no words to match in a "
                         "vector); use mode='hybrid' or 'semantic', or pass the text")
    use_dense = weights.get("dense", 0.0) > 0 and view.vectors is not None
    use_bm25 = weights.get("bm25", 0.0) > 0 and bool(texts) and view.bm25 is not None
    if mode_name == SearchMode.SEMANTIC.value and view.vectors is None:
        raise StoreError(f"store {st.root} has no embeddings, so semantic search cannot run; "
                         "use mode='keyword', or re-ingest with embeddings")
    if not use_dense and not use_bm25:
        raise StoreError(
            f"store {st.root} offers neither embeddings nor a BM25 index for this query; "
            "re-ingest it with this version of arrowdedup"
        )
    weights = {s: w for s, w in weights.items()
               if not ((s == "dense" and not use_dense) or (s == "bm25" and not use_bm25))}

    parts: list[np.ndarray] = []
    dense_all: np.ndarray | None = None
    if use_dense:
        assert view.vectors is not None
        t = time.perf_counter()
        if vector is not None:
            q = unit_queries(vector, view.vectors.shape[1])
        else:
            q = unit_queries(resolve_embedder(st, embedder).encode(texts),
                             view.vectors.shape[1])
        timings["embed"] = time.perf_counter() - t
        t = time.perf_counter()
        dense_all = cosine_scores(view.vectors, q)
        parts.extend(top_n(dense_all[:, j], n_cand) for j in range(q.shape[0]))
        timings["dense"] = time.perf_counter() - t
    bm25_all: list[np.ndarray] = []
    if use_bm25:
        assert view.bm25 is not None
        t = time.perf_counter()
        for text in texts:
            s = view.bm25.scores(text)
            bm25_all.append(s)
            parts.append(top_n(s, n_cand, positive_only=True))
        timings["bm25"] = time.perf_counter() - t

    t = time.perf_counter()
    cand = np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)
    ranks: dict[str, np.ndarray] = {}
    unit = np.zeros((cand.size, 0), np.float32)
    usable = np.zeros(cand.size, dtype=bool)
    if dense_all is not None and view.vectors is not None:
        unit = np.asarray(view.vectors[cand], dtype=np.float32)
        usable = np.linalg.norm(unit, axis=1) > 0
        ranks["dense"] = competition_rank(dense_all[cand].max(axis=1), usable)
    if bm25_all:
        best = np.max(np.stack([s[cand] for s in bm25_all]), axis=0)
        ranks["bm25"] = competition_rank(best, best > 0)
    ranks["salience"] = competition_rank(view.salience[cand], view.salience_known[cand])
    ranks["freshness"] = group_rank(view.fresh[cand], view.fresh_known[cand],
                                    view.doc_codes[cand])
    raw, norm = rrf(ranks, weights, k=cfg.rrf.k)
    passed = np.flatnonzero(norm >= cfg.retrieval.min_relevance_score)
    order = passed[score_order(raw[passed], view.segment_ids[cand[passed]])]
    timings["fuse"] = time.perf_counter() - t

    t = time.perf_counter()
    ranked_rows = cand[order]
    ids = pa.array(view.segment_ids[ranked_rows].astype(str), type=pa.string())
    if cfg.retrieval.enabled and order.size:
        rep = duplicate_of(unit[order] if unit.shape[1] else unit[:order.size],
                           usable[order], view.lang[ranked_rows],
                           cfg.retrieval.similarity_threshold)
    else:
        rep = np.full(order.size, -1, dtype=np.int64)
    kept, displaced = displaced_lists(ids, rep)
    timings["dedup"] = time.perf_counter() - t

    top = kept[:k]
    rows = cand[order[top]]
    picked = view.core.take(pa.array(rows, type=pa.int64()))

    def rank_col(name: str) -> pl.Series:
        if name not in ranks:
            return pl.Series(f"rank_{name}", [None] * top.size, dtype=pl.Int32)
        return pl.Series(f"rank_{name}", ranks[name][order[top]], dtype=pl.Int32)

    results = pl.DataFrame([
        pl.Series("rank", np.arange(1, top.size + 1), dtype=pl.Int32),
        pl.Series("doc_id", picked.column("doc_id")),
        pl.Series("segment_id", picked.column("segment_id")),
        pl.Series("text", picked.column("text")),
        pl.Series("rrf", raw[order[top]], dtype=pl.Float64),
        pl.Series("score", norm[order[top]], dtype=pl.Float64),
        rank_col("dense"), rank_col("bm25"), rank_col("salience"), rank_col("freshness"),
        pl.Series("displaced_ids", displaced[: top.size]),
    ])
    timings["total"] = time.perf_counter() - t_start
    result = SearchResult(results=results, before=int(order.size), after=int(kept.size),
                          timings=timings, mode=mode_name, k=k,
                          query_hash=query_hash(texts, vector), rows=rows)
    if cfg.analytics.enable_logging:
        log.info(result.summary())
    if cfg.analytics.enable_metrics:
        append_retrieval_log(st, result)
    return result


def append_retrieval_log(store: Store, result: SearchResult) -> Path:
    """Write one new Parquet file for this search under ``STORE/retrieval_log/``.

    Written to a temporary name (not matching ``*.parquet``) and renamed, so a reader or a
    crash never sees half a file and old files are never rewritten.
    """
    directory = store.retrieval_log_dir
    now = dt.datetime.now(dt.UTC)
    table = pa.table({
        "time": pa.array([now], type=pa.timestamp("us", tz="UTC")),
        "run_id": [str(store.manifest.get("run_id", store.version.name))],
        "query_hash": [result.query_hash],
        "mode": [result.mode],
        "k": pa.array([result.k], type=pa.int32()),
        "before": pa.array([result.before], type=pa.int64()),
        "after": pa.array([result.after], type=pa.int64()),
        "removed": pa.array([result.removed], type=pa.int64()),
        "timings": [json.dumps(result.timings, sort_keys=True)],
    }, schema=LOG_SCHEMA)
    name = f"{now:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}.parquet"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with atomic_path(directory / name, durable=False) as tmp:
            pq.write_table(table, tmp, compression="zstd")
    except OSError as err:
        raise StoreError(f"cannot append to the retrieval log {directory}: {err.strerror or err}; "
                         "check the permissions and free space, or set "
                         "Analytics.EnableMetrics = false") from err
    return directory / name
