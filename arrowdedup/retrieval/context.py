"""Context for a language model (SPEC §4.7): search, expand each result with neighbours from
its section, dedupe again, render Markdown grouped by document.

Neighbours come from the ``neighbours_before`` / ``neighbours_after`` list columns (segment ids
of the same section, nearest first on both sides, as the extractor writes them); only segments
kept in the store can be added; a table without those columns simply has no expansion. Up to
``expand`` neighbours per result are taken nearest first, alternating before / after. The
retrieved results and then the expansions are deduplicated in that order with the retrieval
threshold, so an expansion that repeats anything already in the context is left out.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ..config import DedupConfig, resolve_config
from ..embed import Embedder
from ..errors import InputError
from ..store import Store, open_store
from .crossdoc import duplicate_of
from .keys import linked_rows
from .search import Query, SearchResult, StoreView, search, store_view


@dataclasses.dataclass
class Context:
    """The segments of a context (``segments``: doc_id, segment_id, text, position, section,
    origin 'retrieved' | 'expanded' | 'linked', rank, linked_by (the shared key of a linked
    segment, else null)) and its Markdown rendering."""

    query: str
    segments: pl.DataFrame
    search: SearchResult
    dropped: int  # expansions left out as duplicates of something already in the context

    def markdown(self) -> str:
        return render_markdown(self.query, self.segments)


def _nearest(before: list[Any] | None, after: list[Any] | None, limit: int) -> list[str]:
    b = [str(x) for x in (before or [])]  # the extractor lists both sides nearest first
    a = [str(x) for x in (after or [])]
    out: list[str] = []
    i = 0
    while len(out) < limit and (i < len(b) or i < len(a)):
        if i < len(b):
            out.append(b[i])
        if i < len(a) and len(out) < limit:
            out.append(a[i])
        i += 1
    return out


def _expansions(view: StoreView, rows: np.ndarray, expand: int) -> list[tuple[int, int]]:
    """(store row, rank of the result it expands) of the neighbours to add, in order."""
    frame = view.frame
    if expand <= 0 or not rows.size or ("neighbours_before" not in frame.columns \
            and "neighbours_after" not in frame.columns):
        return []
    picked = frame[rows.tolist()]
    before = picked.get_column("neighbours_before").to_list() \
        if "neighbours_before" in frame.columns else [None] * rows.size
    after = picked.get_column("neighbours_after").to_list() \
        if "neighbours_after" in frame.columns else [None] * rows.size
    out: list[tuple[int, int]] = []
    # A Python loop over K results x N neighbours (tens of items), not over a column.
    for rank, (b, a) in enumerate(zip(before, after, strict=True), start=1):
        for sid in _nearest(b, a, expand):
            row = view.row_of(sid)
            if row is not None:
                out.append((row, rank))
    return out


def build_context(
    store: str | Path | Store,
    query: Query,
    k: int = 5,
    *,
    expand: int = 0,
    mode: str = "hybrid",
    config: DedupConfig | None = None,
    embedder: str | Embedder | None = None,
    expand_keys: bool = False,
    key_limit: int = 5,
) -> Context:
    """Search, then expand each result with up to ``expand`` neighbours and, with
    ``expand_keys``, up to ``key_limit`` segments of other documents per key it shares
    (:mod:`.keys`); dedupe again."""
    if expand < 0:
        raise InputError(f"expand = {expand} is invalid: give 0 or more neighbours")
    st = open_store(store)
    view = store_view(st)
    cfg = view.config if config is None else resolve_config(config)
    result = search(st, query, k=k, mode=mode, config=cfg, embedder=embedder)
    rows = [int(r) for r in result.rows]
    origin = ["retrieved"] * len(rows)
    rank = list(range(1, len(rows) + 1))
    linked_by: list[str | None] = [None] * len(rows)
    seen = set(rows)
    for row, r in _expansions(view, result.rows, expand):
        if row not in seen:
            seen.add(row)
            rows.append(row)
            origin.append("expanded")
            rank.append(r)
            linked_by.append(None)
    if expand_keys:
        for row, r, key in linked_rows(st, result.rows, key_limit):
            if row not in seen:
                seen.add(row)
                rows.append(row)
                origin.append("linked")
                rank.append(r)
                linked_by.append(key)
    idx = np.asarray(rows, dtype=np.int64)
    dropped = 0
    if cfg.retrieval.enabled and view.vectors is not None and idx.size:
        unit = np.asarray(view.vectors[idx], dtype=np.float32)
        usable = np.linalg.norm(unit, axis=1) > 0
        lang = view.lang[idx]
        keep = duplicate_of(unit, usable, lang, cfg.retrieval.similarity_threshold,
                            view.fact_arrays(idx) if cfg.retrieval.fact_guard else None) < 0
        # Retrieved results were deduped already; only expansions can fall out here.
        keep[: result.rows.size] = True
        dropped = int((~keep).sum())
        idx = idx[keep]
        origin = [o for o, kk in zip(origin, keep, strict=True) if kk]
        rank = [r for r, kk in zip(rank, keep, strict=True) if kk]
        linked_by = [k for k, kk in zip(linked_by, keep, strict=True) if kk]
    cols = [c for c in ("doc_id", "segment_id", "text", "position", "section", "title")
            if c in view.frame.columns]
    segments = view.frame[idx.tolist()].select(cols) if idx.size else view.frame.select(cols) \
        .clear()
    segments = segments.with_columns(pl.Series("origin", origin, dtype=pl.String),
                                     pl.Series("rank", rank, dtype=pl.Int32),
                                     pl.Series("linked_by", linked_by, dtype=pl.String))
    text = query if isinstance(query, str) else \
        " | ".join(query) if isinstance(query, list) else "(vector query)"
    return Context(query=text, segments=segments, search=result, dropped=dropped)


def render_markdown(query: str, segments: pl.DataFrame) -> str:
    """Markdown grouped by document (best-ranked document first), segments in document order;
    each segment is marked ``retrieved #rank`` or ``expanded (for #rank)``."""
    lines = [f"# Context for: {query}", ""]
    if segments.height == 0:
        lines.append("_No segment passed the relevance floor._")
        return "\n".join(lines) + "\n"
    order_cols = ["position"] if "position" in segments.columns else []
    docs = segments.group_by("doc_id", maintain_order=True).agg(pl.col("rank").min()) \
        .sort(["rank", "doc_id"])
    for doc_id in docs.get_column("doc_id").to_list():
        part = segments.filter(pl.col("doc_id") == doc_id)
        if order_cols:
            part = part.sort([*order_cols, "segment_id"])
        title = part.get_column("title")[0] if "title" in part.columns else None
        lines.append(f"## {title} ({doc_id})" if title else f"## {doc_id}")
        lines.append("")
        for r in part.iter_rows(named=True):
            mark = f"retrieved #{r['rank']}" if r["origin"] == "retrieved" else \
                f"linked by `{r['linked_by']}`, context for #{r['rank']}" \
                if r["origin"] == "linked" else f"expanded, context for #{r['rank']}"
            where = f" · {r['section']}" if r.get("section") else ""
            lines.append(f"**[{mark}]** `{r['segment_id']}`{where}")
            lines.append("")
            lines.append(str(r["text"]).strip())
            lines.append("")
    return "\n".join(lines)
