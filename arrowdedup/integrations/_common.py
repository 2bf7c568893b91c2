"""What every framework adapter shares, free of any framework: embedding, the table the library
reads, and the library's answer as plain lists.

An adapter reads each item's text, id, document id and (when the item has one) embedding into
Python lists, which is the least a framework object allows; everything after that is columnar:
one segments table, one :func:`arrowdedup.ingest` or :func:`arrowdedup.dedupe_ranked` call, and
the answer as lists aligned with the kept items, from which the adapter builds its objects.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import polars as pl

from ..config import DedupConfig
from ..embed.embedders import DEFAULT_EMBEDDER, Embedder, get_embedder
from ..errors import EmbedderError, InputError

# Every item is one paragraph of its document: the frameworks carry no segment type.
SEGMENT_TYPE = "paragraph"
ROW = "__row"  # each ranked row's index in the list, to map dedupe_ranked's answer back

EmbedFn = Callable[[list[str]], np.ndarray]


@functools.lru_cache(maxsize=4)
def _named(spec: str) -> Embedder:
    # A model loads in seconds: one per spec and process, as search does.
    return get_embedder(spec)


def bundled(embedder: str | Embedder | None) -> EmbedFn:
    """Texts -> vectors with arrowdedup's own embedder (``"minilm"`` when None), loaded on the
    first call, so items that carry embeddings never load a model. Embedded as the job path
    embeds (:func:`arrowdedup.embed_texts`: each distinct text once, its visible words)."""

    def encode(texts: list[str]) -> np.ndarray:
        from ..embed.cache import embed_texts

        if embedder is None or isinstance(embedder, str):
            model = _named(embedder or DEFAULT_EMBEDDER)
        else:
            model = get_embedder(embedder)
        return embed_texts(texts, model)[0]

    return encode


def foreign(fn: Callable[[list[str]], Any], what: str) -> EmbedFn:
    """Texts -> vectors with a framework's embedding call (``embed_documents``,
    ``get_text_embedding_batch``), whose lists of floats become one float32 matrix."""

    def encode(texts: list[str]) -> np.ndarray:
        try:
            out = np.asarray(fn(texts), dtype=np.float32)
        except ValueError as err:
            raise EmbedderError(f"{what} returned vectors of different lengths ({err}); "
                                "use an embedding model with one dimension") from err
        if out.ndim != 2 or out.shape[0] != len(texts):
            raise EmbedderError(f"{what} returned {out.shape} for {len(texts)} texts; it must "
                                "return one vector per text")
        return out

    return encode


def embed_choice(embedder: str | Embedder | None, native: Callable[[list[str]], Any] | None,
                 native_name: str) -> EmbedFn:
    """The one embedder an adapter was given: ``embedder=`` (arrowdedup's) or the framework's
    own object (``native``, passed as ``native_name=``); both at once is refused."""
    if embedder is not None and native is not None:
        raise InputError(f"give embedder= or {native_name}=, not both: {native_name}= embeds "
                         "with the framework's model, embedder= with arrowdedup's")
    if native is not None:
        return foreign(native, native_name)
    return bundled(embedder)


def matrix_of(texts: list[str], given: Sequence[Sequence[float] | None] | None,
              embed: EmbedFn) -> np.ndarray:
    """One (n, d) float32 matrix: each item's own embedding where it has one (never
    recomputed), the embedder's for the others."""
    n = len(texts)
    if given is None:
        return embed(texts) if n else np.zeros((0, 1), np.float32)
    missing = [i for i, v in enumerate(given) if v is None]
    if not missing:
        return _stack(given)
    if len(missing) == n:
        return embed(texts)
    computed = embed([texts[i] for i in missing])
    own = [i for i, v in enumerate(given) if v is not None]
    mine = _stack([given[i] for i in own])
    if mine.shape[1] != computed.shape[1]:
        raise EmbedderError(
            f"the items' own embeddings have {mine.shape[1]} dimensions, the embedder gives "
            f"{computed.shape[1]}; embed every item with one model (or none of them)")
    out = np.empty((n, mine.shape[1]), dtype=np.float32)
    out[own] = mine
    out[missing] = computed
    return out


def _stack(vectors: Sequence[Sequence[float] | None]) -> np.ndarray:
    # Each row packed by struct straight into the matrix: about half the time of np.asarray
    # on a list of lists (~9 ns a float against 16-20 here), which walks the floats twice,
    # for the shape and then to copy. struct's C cast to float is numpy's. A row struct
    # refuses (another length, not a number) leaves it to np.asarray, which converts or
    # names the problem as before.
    dim = len(vectors[0]) if vectors and isinstance(vectors[0], list | tuple) else 0
    if dim:
        out = np.empty((len(vectors), dim), dtype=np.float32)
        pack = struct.Struct(f"{dim}f").pack_into
        buffer = out.data.cast("B")
        offset, step = 0, 4 * dim
        try:
            for vector in vectors:
                if vector is None:
                    break  # left to np.asarray, which names the problem
                pack(buffer, offset, *vector)
                offset += step
            else:
                return out
        except (struct.error, TypeError, OverflowError):
            pass
    try:
        out = np.asarray(vectors, dtype=np.float32)
    except ValueError as err:
        raise EmbedderError(f"the items' embeddings have different lengths ({err}); embed "
                            "every item with one model") from err
    if out.ndim != 2:
        raise EmbedderError(f"the items' embeddings form an array of shape {out.shape}; each "
                            "must be a flat list of floats")
    return out


def missing_doc_ids(doc_ids: Sequence[str | None], key: str, keys_of: Callable[[int], Any],
                    kind: str) -> None:
    """Refuse items without a document id, naming the key, the first such item and the keys
    it has."""
    bad = [i for i, d in enumerate(doc_ids) if d is None]
    if not bad:
        return
    keys = sorted(str(k) for k in keys_of(bad[0]))
    raise InputError(
        f"{len(bad)} {kind}(s) have no metadata {key!r} to name their document (first: item "
        f"{bad[0]}, metadata keys: {', '.join(keys) or 'none'}); set doc_id_key= to the key "
        f"that names the document, or add {key!r} to their metadata")


def default_ids(ids: Sequence[str | None], doc_ids: Sequence[str | None]) -> list[str]:
    """Each item's id: its own, else ``{doc_id}#{index in the list}``."""
    if all(ids):  # the frameworks' items mostly carry one: no id is None or empty
        return cast("list[str]", list(ids))
    return [i if i else f"{d or ''}#{n}" for n, (i, d) in enumerate(zip(ids, doc_ids,
                                                                          strict=True))]


def unique_ids(ids: Sequence[str]) -> pl.Series:
    """The items' ids as the table's ``segment_id``: an id the list repeats (Haystack names a
    document by the hash of its content, so exact copies share one) gets ``#{index in the
    list}`` from its second occurrence on, so every item can be named."""
    series = pl.Series("segment_id", ids, dtype=pl.String)
    if len(set(ids)) == len(ids):  # the usual case, told in microseconds for 100 results
        return series
    repeated = ~series.is_first_distinct()
    index = pl.Series(np.arange(len(ids))).cast(pl.String)
    return pl.select(pl.when(repeated).then(series + "#" + index).otherwise(series)
                     ).to_series().alias("segment_id")


def segments_table(doc_ids: Sequence[str], ids: Sequence[str], texts: Sequence[str],
                   matrix: np.ndarray) -> pl.DataFrame:
    """The segments table of SPEC §1 for a list of items: the list order is the position."""
    n = len(texts)
    return pl.DataFrame({
        "doc_id": pl.Series(doc_ids, dtype=pl.String),
        "segment_id": unique_ids(ids),
        "text": pl.Series(texts, dtype=pl.String),
        "segment_type": pl.repeat(SEGMENT_TYPE, n, dtype=pl.String, eager=True),
        "position": np.arange(n, dtype=np.int32),
        "embedding": _embedding_column(matrix, n),
    })


def ranked_table(ids: Sequence[str], texts: Sequence[str], matrix: np.ndarray) -> pl.DataFrame:
    """The ranked results :func:`arrowdedup.dedupe_ranked` reads, best first, with each row's
    index in the list (``__row``) to map the answer back."""
    n = len(texts)
    return pl.DataFrame({
        "segment_id": unique_ids(ids),
        "text": pl.Series(texts, dtype=pl.String),
        "embedding": _embedding_column(matrix, n),
        ROW: np.arange(n, dtype=np.int64),
    })


def _embedding_column(matrix: np.ndarray, n: int) -> pl.Series:
    if n == 0:
        return pl.Series("embedding", [], dtype=pl.Array(pl.Float32, max(matrix.shape[1], 1)))
    return pl.Series("embedding", np.ascontiguousarray(matrix, dtype=np.float32))


INGESTION_KEYS = ("salience", "near_duplicate_count", "merged_ids")
RANKED_KEYS = ("displaced_ids",)


@dataclasses.dataclass(frozen=True)
class Kept:
    """The library's answer for the kept items, in output order: ``rows`` are their indices
    in the input list; ``metadata`` is each one's metadata with the keys arrowdedup adds
    (``keys``), a new dict, so the caller's items are left as they were."""

    rows: list[int]
    keys: tuple[str, ...]
    metadata: list[dict[str, Any]]


def ingest_kept(table: pl.DataFrame, config: DedupConfig | None,
                metadata: Sequence[Mapping[str, Any]]) -> Kept:
    """:func:`arrowdedup.ingest` over ``table`` (whose rows are the items, ``metadata`` theirs):
    the kept rows with their ``salience``, ``near_duplicate_count`` and ``merged_ids`` (the ids
    of the items each one stands for: its near duplicates and exact copies, in input order)."""
    from ..dedup.ingest import ingest

    result = ingest(table, config)
    decisions = result.decisions
    rows = np.flatnonzero(
        (decisions.get_column("action").cast(pl.String) == "kept").to_numpy()).tolist()
    removed = decisions.filter(pl.col("representative_id").is_not_null())
    # Few items are removed: their ids are grouped in Python, a fresh list per representative.
    merged: dict[str, list[str]] = {}
    for segment, representative in zip(removed.get_column("segment_id").to_list(),
                                       removed.get_column("representative_id").to_list(),
                                       strict=True):
        merged.setdefault(representative, []).append(segment)
    kept = result.kept
    # One dict per kept item, the item's keys then arrowdedup's (a key of the same name is
    # replaced, in its place).
    return Kept(rows=rows, keys=INGESTION_KEYS, metadata=[
        {**metadata[row], "salience": salience, "near_duplicate_count": count,
         "merged_ids": merged.get(segment) or []}
        for row, salience, count, segment in zip(
            rows, kept.get_column("salience").cast(pl.Float64).to_list(),
            kept.get_column("near_duplicate_count").to_list(),
            kept.get_column("segment_id").to_list(), strict=True)])


def ranked_kept(table: pl.DataFrame, config: DedupConfig | None,
                metadata: Sequence[Mapping[str, Any]]) -> Kept:
    """:func:`arrowdedup.dedupe_ranked` over ``table`` (whose rows are the items, ``metadata``
    theirs): the kept rows (rank order) with the ids each one displaced."""
    from ..retrieval.crossdoc import dedupe_ranked

    out = dedupe_ranked(table, config)
    if "displaced_ids" not in out.columns:  # Retrieval.Enabled = false: nothing is decided
        rows = list(range(table.height))
        return Kept(rows=rows, keys=RANKED_KEYS,
                    metadata=[{**metadata[row], "displaced_ids": []} for row in rows])
    rows = out.get_column(ROW).to_list()
    return Kept(rows=rows, keys=RANKED_KEYS, metadata=[
        {**metadata[row], "displaced_ids": displaced}
        for row, displaced in zip(rows, out.get_column("displaced_ids").to_list(),
                                  strict=True)])


class QueryEmbedder:
    """A text query embedded by a framework's model, offered to :func:`arrowdedup.search` as
    an :class:`~arrowdedup.embed.embedders.Embedder` so the query keeps its words for BM25.

    ``name`` is the framework model's name (its ``model_name`` or ``model`` attribute, else
    its class name): search compares it, and the dimension, with the store's model and
    refuses vectors of another model (SPEC §9)."""

    def __init__(self, name: str, vector: Sequence[float]) -> None:
        self.name = name
        self._vector = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        self.dim = int(self._vector.shape[1])

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.repeat(self._vector, len(texts), axis=0)


def model_name(obj: object) -> str:
    """The name a framework's embedding object gives its model."""
    for attr in ("model_name", "model", "model_id"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(obj).__name__


def search_kwargs(k: int, mode: str, where: str | None, min_cosine: float | None,
                  config: DedupConfig | None) -> dict[str, Any]:
    """The options a store retriever passes to :func:`arrowdedup.search` as they are."""
    return {"k": k, "mode": mode, "where": where, "min_cosine": min_cosine, "config": config}


def result_rows(results: pl.DataFrame) -> list[dict[str, Any]]:
    """One dict per search result: what a retriever puts in each item's metadata."""
    return results.select("doc_id", "segment_id", "rank", "score", "cosine",
                          "displaced_ids").to_dicts()
