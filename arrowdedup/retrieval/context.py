"""Context for a language model (SPEC §4.7): search, expand each result with neighbours from
its section, dedupe again, render Markdown grouped by document.

Neighbours come from the ``neighbours_before`` / ``neighbours_after`` list columns (segment ids
of the same section, nearest first on both sides, as the extractor writes them); only segments
kept in the store can be added; a table without those columns simply has no expansion. Up to
``expand`` neighbours per result are taken nearest first, alternating before / after. The
retrieved results and then the expansions are deduplicated in that order with the retrieval
threshold, so an expansion that repeats anything already in the context is left out.

A segment that introduces code ("To unpack the tarball, run the following command:", "the loop
below stops") is useless without it, so the code segments that follow it in its section are
added (whatever ``expand`` is) right after it, marked expanded with ``introduced_by`` naming
it; they are packed before the other neighbours of the same result.

Expansions (neighbours, introduced code, key-linked segments) satisfy ``where`` like the
results do; ``min_cosine`` applies to the retrieved results only, because an expansion is
pulled in by its place or its key, not by its score (a command's cosine to a question is
usually low, and it is the very segment the result needs).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ..config import DedupConfig, resolve_config
from ..embed.embedders import Embedder
from ..errors import InputError
from ..store import Store, open_store
from ..store.reader import reads_store
from .keys import linked_rows
from .ranked_dedup import duplicate_of
from .search import Query, SearchResult, StoreView, search, store_view


@dataclasses.dataclass(frozen=True)
class Context:
    """The segments of a context (``segments``: doc_id, segment_id, text, position, section,
    origin 'retrieved' | 'expanded' | 'linked', rank, linked_by (the shared key of a linked
    segment, else null), introduced_by (the segment_id whose text introduces this code
    segment, else null), …) and its Markdown rendering."""

    query: str
    segments: pl.DataFrame
    search: SearchResult
    dropped: int  # expansions left out as duplicates of something already in the context
    left_out: int = 0  # segments that did not fit in ``max_chars``
    max_chars: int | None = None

    def markdown(self) -> str:
        return render_markdown(self.query, self.segments, budget=self.max_chars,
                               left_out=self.left_out)

    def tokens_estimate(self) -> int:
        """About how many tokens the Markdown costs a language model (~4 characters each)."""
        return estimate_tokens(self.markdown())


def estimate_tokens(text: str) -> int:
    """~4 characters per token, the usual rule of thumb for English text and code."""
    return (len(text) + 3) // 4


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


# A segment introduces the code after it when it ends with a colon (any script's colon), or
# names it as below / following ("the loop below stops", "the following command").
_CODE_NOUN = r"(?:commands?|code|snippets?|examples?|scripts?|loops?|configurations?|requests?)"
_INTRODUCES = re.compile(
    rf"[:：]\s*$|\bfollowing\s+(?:\w+\s+)?{_CODE_NOUN}\b|\b{_CODE_NOUN}\s+below\b",
    re.IGNORECASE)
MAX_INTRODUCED = 3  # code segments taken after one introduction ("run these commands:")


def introduces_code(text: str) -> bool:
    """True when ``text`` reads as the lead-in of a code block or command."""
    return bool(_INTRODUCES.search(text))


def _introduced(view: StoreView, rows: list[tuple[int, int]]) -> list[tuple[int, int, str]]:
    """(store row, rank, introducing segment_id) of the code segments that directly follow
    each introducing segment of ``rows`` ((store row, rank) pairs) in its section."""
    frame = view.frame
    if "segment_type" not in frame.columns or not rows:
        return []
    kinds, texts = frame.get_column("segment_type"), frame.get_column("text")
    out: list[tuple[int, int, str]] = []
    # A loop over the context's few segments, not over a column (rows read one by one).
    for row, rank in rows:
        if kinds[row] in ("code", "heading") or not introduces_code(str(texts[row])):
            continue
        for nxt in _following(view, row)[:MAX_INTRODUCED]:
            if kinds[nxt] != "code":
                break
            out.append((nxt, rank, str(view.segment_ids[row])))
    return out


def _following(view: StoreView, row: int) -> list[int]:
    """Store rows of the kept segments right after ``row`` in its section, in order: from
    ``neighbours_after`` (the extractor's same-section list), else by ``position`` within the
    document and section; a neighbour removed at ingest ends the run (what followed it is not
    what the text introduces)."""
    frame = view.frame
    if "neighbours_after" in frame.columns:
        out = []
        after = frame["neighbours_after"][row]
        for sid in [] if after is None else after.to_list():
            nxt = view.row_of(str(sid))
            if nxt is None:
                break
            out.append(nxt)
        return out
    if "position" not in frame.columns:
        return []
    doc, pos = frame["doc_id"][row], frame["position"][row]
    same = pl.col("doc_id") == doc
    if "section" in frame.columns:
        section = frame["section"][row]
        same &= pl.col("section").is_null() if section is None else pl.col("section") == section
    after = frame.with_row_index("__row").filter(same & (pl.col("position") > pos)) \
        .sort("position")
    rows = after.get_column("__row").to_list()
    positions = after.get_column("position").to_list()
    return [r for i, r in enumerate(rows) if positions[i] == pos + 1 + i]


def _satisfies(allowed: np.ndarray | None, row: int) -> bool:
    """True when store row ``row`` is among the sorted ``allowed`` rows (None: no filter)."""
    if allowed is None:
        return True
    i = int(np.searchsorted(allowed, row))
    return i < allowed.size and int(allowed[i]) == row


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


@reads_store
def build_context(
    store: str | Path | Store,
    query: Query,
    *,
    k: int = 5,
    expand: int = 0,
    mode: str = "hybrid",
    config: DedupConfig | None = None,
    embedder: str | Embedder | None = None,
    expand_keys: bool = False,
    key_limit: int = 5,
    where: str | None = None,
    min_cosine: float | None = None,
    max_chars: int | None = None,
) -> Context:
    """Search, then expand each result with up to ``expand`` neighbours and, with
    ``expand_keys``, up to ``key_limit`` segments of other documents per key it shares
    (:mod:`.keys`); dedupe again. Code that a context segment introduces ("run the following
    command:") is always added after it (``introduced_by``). Every expansion satisfies
    ``where``; ``min_cosine`` filters the retrieved results only (expansions are pulled by
    place or key, not by score).

    ``max_chars`` packs the rendered Markdown into that many characters: results are taken
    best first, each with its expansions, whole segments only; the first that does not fit
    ends the packing (``left_out`` counts what was dropped).
    """
    if expand < 0:
        raise InputError(f"expand = {expand} is invalid: give 0 or more neighbours")
    if max_chars is not None and max_chars < 200:
        raise InputError(f"max_chars = {max_chars} is too small for any context (the header "
                         "and one source line need ~200 characters); give 200 or more")
    st = open_store(store)
    view = store_view(st)
    cfg = view.config if config is None else resolve_config(config)
    result = search(st, query, k=k, mode=mode, config=cfg, embedder=embedder, where=where,
                    min_cosine=min_cosine)
    rows = [int(r) for r in result.rows]
    origin = ["retrieved"] * len(rows)
    rank = list(range(1, len(rows) + 1))
    linked_by: list[str | None] = [None] * len(rows)
    introduced_by: list[str | None] = [None] * len(rows)
    seen = set(rows)
    # Sorted rows that satisfy ``where`` (None: all).
    allowed = view.allowed_rows(where, cfg.retrieval.where_timeout_ms)

    def add(row: int, kind: str, r: int, key: str | None = None,
            intro: str | None = None) -> None:
        if row not in seen and _satisfies(allowed, row):
            seen.add(row)
            rows.append(row)
            origin.append(kind)
            rank.append(r)
            linked_by.append(key)
            introduced_by.append(intro)

    retrieved = list(zip(rows, rank, strict=True))
    for row, r, intro in _introduced(view, retrieved):  # before the neighbours: packed first
        add(row, "expanded", r, intro=intro)
    neighbours = _expansions(view, result.rows, expand)
    for row, r in neighbours:
        add(row, "expanded", r)
    for row, r, intro in _introduced(view, [(n, r) for n, r in neighbours if n in seen]):
        add(row, "expanded", r, intro=intro)
    if expand_keys:
        for row, r, key in linked_rows(st, result.rows, key_limit):
            add(row, "linked", r, key=key)
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
        introduced_by = [k for k, kk in zip(introduced_by, keep, strict=True) if kk]
    cols = [c for c in CONTEXT_COLUMNS if c in view.frame.columns]
    segments = view.frame[idx.tolist()].select(cols) if idx.size else view.frame.select(cols) \
        .clear()
    segments = segments.with_columns(pl.Series("origin", origin, dtype=pl.String),
                                     pl.Series("rank", rank, dtype=pl.Int32),
                                     pl.Series("linked_by", linked_by, dtype=pl.String),
                                     pl.Series("introduced_by", introduced_by, dtype=pl.String))
    text = query if isinstance(query, str) else \
        " | ".join(query) if isinstance(query, list) else "(vector query)"
    left_out = 0
    if max_chars is not None:
        segments, left_out = pack(text, segments, max_chars)
    return Context(query=text, segments=segments, search=result, dropped=dropped,
                   left_out=left_out, max_chars=max_chars)


CONTEXT_COLUMNS = ("doc_id", "segment_id", "text", "segment_type", "position", "section",
                   "heading_level", "code_language", "title", "doc_version", "page_start",
                   "page_end")


def pack(query: str, segments: pl.DataFrame, max_chars: int) -> tuple[pl.DataFrame, int]:
    """The best-ranked segments whose rendering fits in ``max_chars``: result #1 and its
    expansions, then #2, …; stops at the first segment that would overflow."""
    if segments.height == 0:
        return segments, 0
    # Priority: by the rank of the result a segment belongs to, the retrieved one first.
    order = segments.with_row_index("__i").sort(
        ["rank", pl.col("origin") != "retrieved", "__i"]).get_column("__i").to_list()
    chosen: list[int] = []
    for i in order:
        trial = segments[sorted([*chosen, i])]
        if len(render_markdown(query, trial, budget=max_chars,
                               left_out=segments.height - len(chosen) - 1)) > max_chars:
            break
        chosen.append(i)
    kept = segments[sorted(chosen)] if chosen else segments.clear()
    return kept, segments.height - len(chosen)


def render_markdown(query: str, segments: pl.DataFrame, *, budget: int | None = None,
                    left_out: int = 0) -> str:
    """Markdown grouped by document (best-ranked document first), segments in document order.

    Written to be pasted into a prompt: each document block (``##``) names its source (title,
    ``doc_id``, version); each segment says whether it was retrieved (``#rank``) or added as
    context for a result, and where it sits (section, page); headings of the document are
    rendered below the block's level (``###`` and deeper), so they never compete with it;
    code segments are fenced with their language; a prose line that starts with ``#`` is
    escaped, so it stays text.
    """
    lines = [f"# Context for: {query}", ""]
    if segments.height == 0:
        lines.append("_No segment passed the relevance floor._" if not left_out else
                     f"_No segment fits in {budget:,} characters ({left_out} left out)._")
        return "\n".join(lines) + "\n"
    order_cols = ["position"] if "position" in segments.columns else []
    docs = segments.group_by("doc_id", maintain_order=True).agg(pl.col("rank").min()) \
        .sort(["rank", "doc_id"])
    for doc_id in docs.get_column("doc_id").to_list():
        part = segments.filter(pl.col("doc_id") == doc_id)
        if order_cols:
            part = part.sort([*order_cols, "segment_id"])
        first = part.row(0, named=True)
        title = first.get("title")
        lines.append(f"## {_inline(title)}" if title else f"## {_inline(str(doc_id))}")
        source = [f"source: `{doc_id}`"]
        if first.get("doc_version"):
            source.append(f"version {first['doc_version']}")
        lines.append("_" + " · ".join(source) + "_")
        lines.append("")
        for r in part.iter_rows(named=True):
            mark = f"retrieved #{r['rank']}" if r["origin"] == "retrieved" else \
                f"linked by `{r['linked_by']}`: context for #{r['rank']}" \
                if r["origin"] == "linked" else \
                f"expanded: code introduced by `{r['introduced_by']}`, context for #{r['rank']}" \
                if r.get("introduced_by") else f"expanded: context for #{r['rank']}"
            where = [mark]
            if r.get("section"):
                where.append(f"section: {_inline(str(r['section']))}")
            page = _pages(r.get("page_start"), r.get("page_end"))
            if page:
                where.append(page)
            lines.append(f"_[{' · '.join(where)}]_ `{r['segment_id']}`")
            lines.append("")
            lines.extend(_block(r))
            lines.append("")
    if left_out:
        lines.append(f"_{left_out} more segment(s) left out to stay within {budget:,} "
                     "characters._")
        lines.append("")
    return "\n".join(lines)


def _inline(text: str) -> str:
    return " ".join(str(text).split())


def _pages(start: Any, end: Any) -> str | None:
    if start is None:
        return None
    if end is None or end == start:
        return f"page {start}"
    return f"pages {start}–{end}"


def _block(r: dict[str, Any]) -> list[str]:
    """One segment's body: a heading two levels below its own, code fenced, prose escaped."""
    text = str(r["text"]).strip("\n")
    kind = r.get("segment_type")
    if kind == "heading":
        level = r.get("heading_level") or 1
        return [f"{'#' * min(6, 2 + int(level))} {_inline(text)}"]
    if kind == "code":
        fence = "`" * max(3, _longest_run(text, "`") + 1)
        return [f"{fence}{r.get('code_language') or ''}", text, fence]
    # A prose line that would read as Markdown structure (a heading, a fence) is escaped.
    out = []
    for line in text.strip().split("\n"):
        stripped = line.lstrip()
        if stripped.startswith("#") or stripped.startswith("```") or stripped.startswith("~~~"):
            indent = line[: len(line) - len(stripped)]
            line = f"{indent}\\{stripped}"
        out.append(line)
    return out


def _longest_run(text: str, char: str) -> int:
    return max((len(m) for m in re.findall(re.escape(char) + "+", text)), default=0)
