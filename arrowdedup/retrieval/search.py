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
- a multi-query search hashes its texts joined by newlines for the log's ``query_hash``;
- freshness without ``created_at`` compares ``doc_version`` as a version (``3.10`` > ``3.9``),
  so of two copies of a page in ``docs/v3.5`` and ``docs/v3.6`` the newer one wins the tie;
- ``where`` (a DuckDB SQL predicate over the segment columns) is evaluated once per version
  and predicate into the set of allowed rows; the dense scan and the BM25 scores are then read
  only at those rows, so a filter narrows the candidates before anything is ranked;
- each result carries ``cosine``, its dense cosine to the query (the best over several
  queries): RRF scores say only how the ranks compare, the cosine says how close it is.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import logging
import re
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from ..arrays.vectors import dense_codes, language_codes
from ..config import DedupConfig, resolve_config
from ..embed.embedders import Embedder, get_embedder, recorded_spec
from ..embed.view import embedding_text
from ..errors import EmbedderError, InputError, StoreError
from ..facts.rules import signatures_current
from ..store import Store, atomic_path, open_store
from ..store.reader import reads_store
from .bm25 import Bm25Index
from .bm25_layers import LayeredBm25
from .dense import cosine_scores, top_n, unit_queries
from .fusion import SearchMode, competition_rank, group_rank, mode_weights, rrf, score_order
from .ranked_dedup import displaced_lists, duplicate_of
from .ranked_lists import FactArrays, fact_arrays
from .rerank import Reranker, rerank_order
from .where import filter_rows

log = logging.getLogger("arrowdedup.retrieval")

RESULT_COLUMNS = ("rank", "doc_id", "segment_id", "text", "rrf", "score", "cosine",
                  "rank_dense", "rank_bm25", "rank_salience", "rank_freshness", "rank_rerank",
                  "displaced_ids")
VIEW_COLUMNS = ("doc_id", "segment_id", "text", "segment_type", "position", "salience",
                "created_at", "doc_version", "language", "section", "heading_level",
                "code_language", "page_start", "page_end", "neighbours_before",
                "neighbours_after", "title", "doc_type", "fact_signature")
# Below this share of the rows a filtered dense scan gathers the allowed vectors (in blocks of
# GATHER_BLOCK rows, so no large copy is made) and multiplies only those; above it one product
# over all rows is cheaper than the gather (copying a row costs about what its dot product does).
GATHER_SHARE = 0.2
GATHER_BLOCK = 8192
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


@dataclasses.dataclass(frozen=True)
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
    where: str | None = None  # the SQL predicate the candidates had to satisfy

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
        columns = [c for c in VIEW_COLUMNS if c in names]
        if not signatures_current(store.manifest):
            # Signatures of older rules have another layout (rules 18.0 widened the kind field
            # for content words): the guard computes them from the text instead.
            columns = [c for c in columns if c != "fact_signature"]
        self.frame = lf.select(columns).collect().rechunk()
        vectors = store.vectors()
        # A version with deltas: its live rows copied once into one matrix, so a query scans
        # what a compacted store scans (no replaced rows multiplied, no per-query gather).
        self.vectors = None if vectors is None else vectors.contiguous()
        self._bm25: Bm25Index | LayeredBm25 | Literal[False] | None = False
        if self.vectors is not None and self.vectors.shape[0] != self.frame.height:
            raise StoreError(
                f"store {store.root}: the embeddings have {self.vectors.shape[0]} rows, the "
                f"segments {self.frame.height}; the version is damaged: run `arrowdedup verify`, "
                "re-ingest"
            )
        ids = self.frame.get_column("segment_id").cast(pl.String)
        self.segment_ids = ids.to_numpy()
        # Each row's place in segment_id order: candidates tied at the top-N boundary are
        # taken in it, so equal stores whose rows are ordered differently (a version with
        # deltas, its compaction, a rebuild) return the same results.
        self.id_rank = ids.rank("ordinal").to_numpy().astype(np.int64)
        # Arrow's encoder alone (the same codes): the run-scan kernel's load would cost a fresh
        # process more than it saves on one column.
        self.doc_codes, _ = dense_codes(self.frame.get_column("doc_id"), jit=False)
        self.lang = language_codes(self.frame)
        # Result columns as one Arrow table: a single-threaded take of ~10 rows per search.
        self.core = self.frame.select(
            pl.col("doc_id").cast(pl.String), pl.col("segment_id").cast(pl.String),
            pl.col("text").cast(pl.String)).to_arrow().combine_chunks()
        self.salience, self.salience_known = self._salience()
        self.fresh, self.fresh_known = self._freshness()
        # Page furniture (running headers, footers) is kept out of search by default.
        self.furniture = (self.frame.get_column("segment_type").cast(pl.String)
                          == "page_furniture").to_numpy() \
            if "segment_type" in self.frame.columns else np.zeros(self.frame.height, bool)
        self._row_of: dict[str, int] | None = None
        self._store = store
        self._allowed: dict[str, np.ndarray | None] = {}

    @property
    def bm25(self) -> Bm25Index | LayeredBm25 | None:
        if self._bm25 is False:
            from .bm25_layers import load_store_bm25

            # One precomputed index, or (a version with deltas) the layers merged per query.
            self._bm25 = load_store_bm25(self._store)
        return self._bm25

    def fact_arrays(self, rows: np.ndarray) -> FactArrays | None:
        """The fact guard's inputs for store rows ``rows`` (stored signatures, or computed from
        the text for stores written before the guard)."""
        return fact_arrays(self.frame[np.asarray(rows, dtype=np.int64)])

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
        """A "newer is larger" value per row: ``created_at`` first, ``doc_version`` (compared as
        a version) where the time is absent or equal. Returned as the dense ordinal of that
        pair, so both fit one float and the ranks are exact."""
        n = self.frame.height
        times = self._times()
        versions = version_keys(self.frame.get_column("doc_version")) \
            if "doc_version" in self.frame.columns else None
        if times is None and versions is None:
            return np.zeros(n), np.zeros(n, dtype=bool)
        t = times if times is not None else np.full(n, np.nan)
        v = versions if versions is not None else np.full(n, np.nan)
        known = ~np.isnan(t) | ~np.isnan(v)
        return np.where(known, dense_ordinal(t, v), np.nan), known

    def _times(self) -> np.ndarray | None:
        if "created_at" not in self.frame.columns:
            return None
        col = self.frame.get_column("created_at")
        if not col.dtype.is_temporal():
            col = col.cast(pl.String).str.to_datetime(strict=False, time_zone="UTC")
        col = col.cast(pl.Datetime("us")) if col.dtype == pl.Date else col
        values = col.dt.epoch("us").cast(pl.Float64)
        if values.is_null().all():
            return None
        return values.fill_null(np.nan).to_numpy()

    def allowed_rows(self, where: str | None, timeout_ms: int | None = None
                     ) -> np.ndarray | None:
        """Sorted store rows that satisfy ``where`` (None: every row), evaluated within
        ``timeout_ms`` (default: the store's ``Retrieval.WhereTimeoutMs``). Cached per
        predicate."""
        if where is None or not where.strip():
            return None
        key = where.strip()
        if key not in self._allowed:
            limit = self.config.retrieval.where_timeout_ms if timeout_ms is None else timeout_ms
            rows: np.ndarray | None = filter_rows(self._store, key, limit)
            if rows is not None and rows.size == self.frame.height:
                rows = None  # every row passes: the unfiltered path, without gathers
            while len(self._allowed) >= 16:
                self._allowed.pop(next(iter(self._allowed)))
            self._allowed[key] = rows
        return self._allowed[key]


def dense_ordinal(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """0, 1, 2, … of each row's (primary, secondary) pair in ascending order, equal pairs
    sharing one number; NaN sorts lowest."""
    a = np.where(np.isnan(primary), -np.inf, primary)
    b = np.where(np.isnan(secondary), -np.inf, secondary)
    order = np.lexsort((b, a))
    if order.size == 0:
        return np.zeros(0)
    sa, sb = a[order], b[order]
    step = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
    ranks = np.empty(order.size)
    ranks[order] = np.concatenate([[0], np.cumsum(step)])
    return ranks


def version_keys(versions: pl.Series) -> np.ndarray:
    """A float per row that orders version strings as versions (``3.9`` < ``3.10`` <
    ``3.10.1``; ``v2`` = ``2``); NaN where there is none. Sorts the distinct values only."""
    values = versions.cast(pl.String)
    distinct = [v for v in values.unique().to_list() if v is not None and v.strip()]
    order = {v: float(i) for i, v in enumerate(sorted(distinct, key=_version_tuple))}
    codes = values.replace_strict(order, default=None, return_dtype=pl.Float64)
    return codes.fill_null(np.nan).to_numpy()


def _version_tuple(version: str) -> tuple[tuple[int, int | str], ...]:
    # Numbers compare as numbers, other parts as text ("rc1" < "rc2"); ints sort before text
    # so 3.10 > 3.10-rc1 is not claimed, but 3.10 > 3.9 always holds.
    parts = re.findall(r"\d+|[A-Za-z]+", re.sub(r"^\D+(?=\d)", "", version.strip()))
    return tuple((0, int(p)) if p.isdigit() else (1, p.lower()) for p in parts)


MAX_K = 2**31 - 1  # results are indexed with 32-bit integers downstream (Arrow, Polars)
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
    """The embedder for text queries: ``embedder=`` or the one the store's manifest records."""
    model = store.embedding_model
    if embedder is not None:
        emb = _named_embedder(embedder) if isinstance(embedder, str) else get_embedder(embedder)
    else:
        spec = recorded_spec(store.manifest, f"store {store.root}")
        if spec is None:
            raise EmbedderError(
                f"store {store.root} records no embedding model, so a text query cannot be "
                "embedded; pass embedder=... (CLI --embedder) or a query vector"
            )
        emb = _named_embedder(spec)
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


@reads_store
def search(
    store: str | Path | Store,
    query: Query,
    *,
    k: int = 10,
    mode: str | SearchMode = "hybrid",
    config: DedupConfig | None = None,
    embedder: str | Embedder | None = None,
    where: str | None = None,
    min_cosine: float | None = None,
    reranker: Reranker | None = None,
    include_page_furniture: bool = False,
) -> SearchResult:
    """Search a store: RRF over dense, BM25, salience and freshness ranks, cross-doc dedup, top K.

    ``query`` is a string, a list of strings (fused: each signal keeps its best score), or a
    1-D vector of the store's dimension. ``config=None`` uses the store's recorded config; text
    queries are embedded with the store's model or ``embedder``. ``where`` is a DuckDB SQL
    predicate over the segment columns (``"doc_id LIKE 'docs/v3.6/%'"``, ``"language = 'de'"``):
    only rows that satisfy it are candidates, in the dense scan and in BM25 alike. It runs on
    a DuckDB connection that sees the segments and nothing else (no file access).
    ``min_cosine`` (default ``Retrieval.MinDenseSimilarity``, 0 = off) drops candidates whose
    dense cosine to the query is below it. ``reranker``: see
    :mod:`arrowdedup.retrieval.rerank` (reorders the candidates that pass the floor, before
    dedup). Page furniture is left out unless ``include_page_furniture``.
    """
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    st = open_store(store)
    view = store_view(st)
    cfg = view.config if config is None else resolve_config(config)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InputError(f"k = {k!r} is invalid: ask for at least 1 result")
    if k > MAX_K:
        raise InputError(f"k = {k} is too large: ask for at most {MAX_K:,} results")
    floor = cfg.retrieval.min_dense_similarity if min_cosine is None else float(min_cosine)
    if not -1.0 <= floor <= 1.0 or floor != floor:
        raise InputError(f"min_cosine = {min_cosine!r} is invalid: give a cosine in [-1, 1] "
                         "(0 = off)")
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
    if floor > 0 and view.vectors is None:
        raise InputError(f"store {st.root} has no embeddings, so a cosine floor "
                         "(min_cosine / MinDenseSimilarity) cannot apply; drop it")
    weights = {s: w for s, w in weights.items()
               if not ((s == "dense" and not use_dense) or (s == "bm25" and not use_bm25))}

    t = time.perf_counter()
    allowed = view.allowed_rows(where, cfg.retrieval.where_timeout_ms)
    if allowed is not None:
        timings["where"] = time.perf_counter() - t

    parts: list[np.ndarray] = []
    dense_all: np.ndarray | None = None
    if view.vectors is not None and (use_dense or floor > 0):
        t = time.perf_counter()
        if vector is not None:
            q = unit_queries(vector, view.vectors.shape[1])
        else:
            q = unit_queries(resolve_embedder(st, embedder).encode(
                                 [embedding_text(t) for t in texts]),
                             view.vectors.shape[1])
        timings["embed"] = time.perf_counter() - t
        t = time.perf_counter()
        dense_all = dense_scores(view.vectors, q, allowed)
        if use_dense:
            parts.extend(top_within(dense_all[:, j], n_cand, allowed, tie_key=view.id_rank)
                         for j in range(q.shape[0]))
        timings["dense"] = time.perf_counter() - t
    bm25_all: list[np.ndarray] = []
    if use_bm25:
        assert view.bm25 is not None
        t = time.perf_counter()
        for text in texts:
            s = view.bm25.scores(text)
            bm25_all.append(s)
            parts.append(top_within(s, n_cand, allowed, positive_only=True,
                                    tie_key=view.id_rank))
        timings["bm25"] = time.perf_counter() - t

    t = time.perf_counter()
    cand = np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)
    if not include_page_furniture:
        cand = cand[~view.furniture[cand]]
    ranks: dict[str, np.ndarray] = {}
    unit = np.zeros((cand.size, 0), np.float32)
    usable = np.zeros(cand.size, dtype=bool)
    cosine = np.full(cand.size, np.nan)
    if dense_all is not None and view.vectors is not None:
        unit = np.asarray(view.vectors[cand], dtype=np.float32)
        usable = np.linalg.norm(unit, axis=1) > 0
        best_cos = dense_all[cand].max(axis=1) if cand.size else np.zeros(0, np.float32)
        cosine = np.where(usable, best_cos, np.nan)
        if use_dense:
            ranks["dense"] = competition_rank(best_cos, usable)
    if bm25_all:
        best = np.max(np.stack([s[cand] for s in bm25_all]), axis=0)
        ranks["bm25"] = competition_rank(best, best > 0)
    ranks["salience"] = competition_rank(view.salience[cand], view.salience_known[cand])
    ranks["freshness"] = group_rank(view.fresh[cand], view.fresh_known[cand],
                                    view.doc_codes[cand])
    raw, norm = rrf(ranks, weights, k=cfg.rrf.k)
    ok = norm >= cfg.retrieval.min_relevance_score
    if floor > 0:
        ok &= np.nan_to_num(cosine, nan=-np.inf) >= floor
    passed = np.flatnonzero(ok)
    order = passed[score_order(raw[passed], view.segment_ids[cand[passed]])]
    timings["fuse"] = time.perf_counter() - t
    rerank_rank: np.ndarray | None = None
    if reranker is not None and order.size:
        if not texts:
            raise InputError("a reranker needs a text query (it scores the query against the "
                             "texts); pass the text, or search without reranker=")
        t = time.perf_counter()
        texts_in_order = view.core.column("text").take(pa.array(cand[order])).to_pylist()
        order = order[rerank_order(reranker, "\n".join(texts), texts_in_order)]
        rerank_rank = np.arange(1, order.size + 1)
        timings["rerank"] = time.perf_counter() - t

    t = time.perf_counter()
    ranked_rows = cand[order]
    ids = pa.array(view.segment_ids[ranked_rows].astype(str), type=pa.string())
    if cfg.retrieval.enabled and order.size:
        rep = duplicate_of(unit[order] if unit.shape[1] else unit[:order.size],
                           usable[order], view.lang[ranked_rows],
                           cfg.retrieval.similarity_threshold,
                           view.fact_arrays(ranked_rows) if cfg.retrieval.fact_guard else None)
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
        pl.Series("cosine", cosine[order[top]], dtype=pl.Float64).fill_nan(None),
        rank_col("dense"), rank_col("bm25"), rank_col("salience"), rank_col("freshness"),
        pl.Series("rank_rerank", [None] * top.size if rerank_rank is None else rerank_rank[top],
                  dtype=pl.Int32),
        pl.Series("displaced_ids", displaced[: top.size]),
    ])
    timings["total"] = time.perf_counter() - t_start
    result = SearchResult(results=results, before=int(order.size), after=int(kept.size),
                          timings=timings, mode=mode_name, k=k,
                          query_hash=query_hash(texts, vector), rows=rows,
                          where=where.strip() if where and where.strip() else None)
    if cfg.analytics.enable_logging:
        log.info(result.summary())
    if cfg.analytics.enable_metrics:
        append_retrieval_log(st, result)
    return result


def dense_scores(vectors: Any, queries: np.ndarray,
                 allowed: np.ndarray | None) -> np.ndarray:
    """(n, m) cosines; with a filter only the allowed rows are computed when they are few
    (the others stay NaN and are never read: candidates come from the allowed rows)."""
    if allowed is None or allowed.size >= GATHER_SHARE * vectors.shape[0]:
        return cosine_scores(vectors, queries)
    out = np.full((vectors.shape[0], queries.shape[0]), np.nan, dtype=np.float32)
    for start in range(0, allowed.size, GATHER_BLOCK):
        rows = allowed[start:start + GATHER_BLOCK]
        out[rows] = cosine_scores(np.asarray(vectors[rows]), queries)
    return out


def top_within(scores: np.ndarray, n: int, allowed: np.ndarray | None, *,
               positive_only: bool = False, tie_key: np.ndarray | None = None) -> np.ndarray:
    """Rows of the ``n`` best scores among the allowed rows (all rows without a filter);
    ties at the boundary in ``tie_key`` order (see :func:`.dense.top_n`)."""
    if allowed is None:
        return top_n(scores, n, positive_only=positive_only, tie_key=tie_key)
    return allowed[top_n(scores[allowed], n, positive_only=positive_only,
                         tie_key=None if tie_key is None else tie_key[allowed])]


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
