"""Phase 1 of SPEC section 2: dedup inside each document, as named and timed stages.

read → validate → salience → hash → plan → kernel → boost → output. The plan sorts a row
permutation (never the vectors) by group, salience and position; the kernels read the
embedding matrix through it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterator, Mapping

import numpy as np
import polars as pl
import pyarrow as pa

from ..arrays import scratch
from ..arrays.hashing import JIT_MIN_ROWS, xxh64
from ..arrays.vectors import (
    JIT_MIN_VALUES,
    dense_codes,
    dictionary_codes,
    input_rows_hint,
    without_column,
)
from ..config import DecayMode, DedupConfig, Mode, resolve_config
from ..facts import guard as facts
from ..facts import tables as fact_tables
from ..schema import Embeddings, SegmentsInput, read_segments, validate
from . import kernels
from .salience import DefaultSalience, SalienceScorer

log = logging.getLogger("arrowdedup")

OUTPUT_COLUMNS = ("salience_original", "salience_boost", "near_duplicate_count",
                  "exact_duplicate_count")
ACTION_DTYPE = pl.Enum(list(kernels.ACTION_NAMES))
# Inputs of fewer rows run the small groups with the NumPy twin (no jitted code to load). A
# job that ingests bucket by bucket declares the size of its whole input
# (``vectors.input_rows``), so the kernel, and so every bit of every similarity, never depends
# on the bucket count.
SMALL_INPUT_ROWS = 512


class Timer:
    """Wall-clock seconds per named stage."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start


@dataclasses.dataclass(frozen=True)
class IngestionResult:
    """What :func:`ingest` returns: kept segments, one decision per input row, per-document
    statistics and stage timings."""

    kept: pl.DataFrame
    decisions: pl.DataFrame
    documents: pl.DataFrame
    timings: dict[str, float]
    config: DedupConfig
    embedding_dim: int | None = None

    @property
    def original_count(self) -> int:
        return self.decisions.height

    @property
    def final_count(self) -> int:
        return self.kept.height

    @property
    def dedup_ratio(self) -> float:
        n = self.original_count
        return (n - self.final_count) / n if n else 0.0

    def summary(self) -> str:
        # From the per-document counts (one row per document, not per segment).
        exact, near, filtered = (int(self.documents.get_column(c).sum()) for c in (
            "exact_count", "near_count", "filtered_count"))
        return (
            f"{log_line(self.original_count, self.final_count)} in {self.documents.height} "
            f"documents (exact {exact}, near {near}, filtered {filtered}; dedup ratio "
            f"{self.dedup_ratio:.1%})"
        )


def log_line(before: int, after: int) -> str:
    return f"Deduplication: {before} → {after} segments"


@dataclasses.dataclass(frozen=True)
class Plan:
    """The row permutation and group layout the kernels walk, and the fact signatures the
    guard reads (CSR; empty when the guard is off)."""

    order: np.ndarray  # int64 (n,)
    offsets: np.ndarray  # int64 (G + 1,)
    hash_class: np.ndarray  # int64 (n,)
    n_classes: int
    filtered: np.ndarray  # bool (n,)
    fact_offsets: np.ndarray | None = None  # int64 (n + 1,)
    fact_values: np.ndarray | None = None  # uint64
    fact_modes: np.ndarray | None = None  # int8 (n,)

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)


def ingest(
    segments: SegmentsInput,
    config: DedupConfig | None = None,
    *,
    threads: int | None = None,
    scorer: SalienceScorer | None = None,
    columns: Mapping[str, str] | None = None,
) -> IngestionResult:
    """Deduplicate a segments table inside each (doc_id, segment_type, language) group.

    Never embeds: rows without an embedding get hash dedup only. When the table has no
    ``salience`` column, ``scorer`` (default: SPEC section 3) computes one. ``segments`` may
    be a Hugging Face ``datasets.Dataset``, whose columns ``columns`` maps onto the segments
    table (``{"doc_id": "url", "text": "content"}``; see
    :mod:`arrowdedup.integrations.datasets`).
    """
    cfg = resolve_config(config)
    timer = Timer()
    with timer.stage("read"):
        frame = read_segments(segments, columns=columns)
    with timer.stage("validate"):
        emb = validate(frame, cfg.ingestion.max_segments_per_document)
    with timer.stage("salience"):
        if "salience" not in frame.columns:
            values = (scorer or DefaultSalience(cfg.ingestion.salience_threshold)).score(frame, emb)
            frame = frame.with_columns(pl.Series("salience", values, dtype=pl.Float32))
        salience = frame.get_column("salience").cast(pl.Float64).fill_null(0.0).to_numpy()
    with timer.stage("hash"):
        hashes = content_hash_codes(frame)
    with timer.stage("facts"):
        signature = None
        if cfg.ingestion.fact_guard:
            signature = facts.signatures_of(frame)
            if fact_tables.FACT_COLUMN not in frame.columns:
                # Kept with the segments, so retrieval reads it instead of recomputing it.
                frame = frame.with_columns(facts.signature_series(*signature))
    with timer.stage("plan"):
        docs = doc_codes(frame)
        plan = make_plan(frame, salience, hashes, cfg, signature, docs)
    with timer.stage("kernel"):
        texts = frame.get_column("text").to_arrow() if cfg.ingestion.mode is Mode.LSH else None
        out = run_kernels(plan, emb, cfg, threads, texts=texts)
    with timer.stage("output"):
        result = build_result(frame, salience, out, cfg, timer.timings, emb, docs)
    if cfg.analytics.enable_logging:
        log.info(result.summary())
        if log.isEnabledFor(logging.DEBUG):
            for doc_id, before, after in result.documents.select(
                "doc_id", "original_count", "final_count"
            ).iter_rows():
                log.debug("%s: %s", doc_id, log_line(before, after))
    return result


def content_hash_codes(frame: pl.DataFrame) -> np.ndarray:
    """Integer keys equal exactly when content hashes are equal (int64)."""
    if "content_hash" in frame.columns:
        codes, _ = dense_codes(frame.get_column("content_hash"))
        return codes
    return xxh64(frame.get_column("text")).view(np.int64)


def doc_codes(frame: pl.DataFrame) -> tuple[np.ndarray, pa.Array]:
    """Dense document codes in order of first appearance, and the doc_id of each code."""
    codes, _, names = dictionary_codes(frame.get_column("doc_id"))
    return codes, names


def group_codes(frame: pl.DataFrame, docs: tuple[np.ndarray, pa.Array] | None = None
                ) -> tuple[np.ndarray, int]:
    """One int64 code per (doc_id, segment_type[, language]) group, and the bound on codes."""
    code, names = docs if docs is not None else doc_codes(frame)
    bound = len(names) + 1
    keys = ["segment_type"] + (["language"] if "language" in frame.columns else [])
    for key in keys:
        sub, width = dense_codes(frame.get_column(key))
        code = code * width + sub
        bound *= width
    return code, bound


def make_plan(
    frame: pl.DataFrame, salience: np.ndarray, hashes: np.ndarray, cfg: DedupConfig,
    signature: tuple[np.ndarray, np.ndarray] | None = None,
    docs: tuple[np.ndarray, pa.Array] | None = None,
) -> Plan:
    n = frame.height
    groups, bound = group_codes(frame, docs)
    # + 0.0 makes -0.0 equal to 0.0 for both paths' comparisons.
    salience = salience + 0.0
    position = frame.get_column("position").cast(pl.Int64).to_numpy()
    if n >= JIT_MIN_ROWS and bound <= 4 * n:
        # A counting sort by group and a parallel sort inside each group: the same order
        # as the Polars sort below, at a fraction of its time (classes named differently,
        # equal for the same rows).
        from .plan_jit import group_order, sort_and_classify

        order, offsets = group_order(groups, bound)
        hash_class = sort_and_classify(order, offsets, salience, position, hashes)
        n_classes = n
    else:
        order, offsets, hash_class, n_classes = _sorted_plan(groups, salience, position, hashes)
    ing = cfg.ingestion
    filtered = (salience > 0.0) & (salience < ing.salience_threshold)
    if signature is None:
        return Plan(order, offsets, hash_class, n_classes, filtered)
    modes = facts.fact_modes(
        frame.get_column("segment_type") if "segment_type" in frame.columns else None, n)
    return Plan(order, offsets, hash_class, n_classes, filtered, signature[0], signature[1],
                modes)


def _sorted_plan(groups: np.ndarray, salience: np.ndarray, position: np.ndarray,
                 hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The plan's order, offsets and hash classes by Polars sorts (small inputs, or group
    codes too sparse for a counting sort)."""
    n = groups.shape[0]
    keys = pl.DataFrame({"g": groups, "s": salience, "p": position, "h": hashes})
    order = keys.select(
        pl.arg_sort_by(["g", "s", "p"], descending=[False, True, False], maintain_order=True)
    ).to_series().to_numpy().astype(np.int64)
    g_sorted = groups[order]
    starts = np.flatnonzero(np.diff(g_sorted)) + 1 if n else np.empty(0, np.int64)
    offsets = np.concatenate([[0], starts, [n]]).astype(np.int64) if n else np.zeros(1, np.int64)
    hash_class = (
        keys.select(pl.struct("g", "h").rank("dense")).to_series().to_numpy().astype(np.int64) - 1
    )
    return order, offsets, hash_class, int(hash_class.max()) + 1 if n else 0


@contextlib.contextmanager
def numba_threads(threads: int | None) -> Iterator[None]:
    if threads is None:
        yield
        return
    from ..jit.runtime import numba

    previous = numba.get_num_threads()
    # Numba's config module sets NUMBA_NUM_THREADS through globals(), out of the checker's sight.
    limit = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    numba.set_num_threads(max(1, min(threads, limit)))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def kernel_plan(plan: Plan, emb: Embeddings | None, cfg: DedupConfig) -> kernels.KernelPlan:
    """The struct every kernel reads, from the plan and the embeddings."""
    n = plan.order.shape[0]
    if emb is None or emb.dim == 0:
        matrix = np.zeros((n, 1), dtype=np.float32)
        usable = np.zeros(n, dtype=bool)
    else:
        matrix, usable = emb.matrix, emb.usable
    if emb is not None and emb.sq_norm is not None:
        inv_norm = np.zeros(n, dtype=np.float32)
        inv_norm[usable] = (1.0 / np.sqrt(emb.sq_norm[usable])).astype(np.float32)
    elif not usable.any():
        inv_norm = np.zeros(n, dtype=np.float32)
    else:
        from ..arrays.vectors import inverse_norms

        inv_norm = np.where(usable, inverse_norms(matrix), np.float32(0.0))
    guard = cfg.ingestion.fact_guard and plan.fact_offsets is not None
    if guard:
        assert plan.fact_offsets is not None and plan.fact_values is not None
        assert plan.fact_modes is not None
        f_off, f_val, f_mode = plan.fact_offsets, plan.fact_values, plan.fact_modes
    else:
        f_off, f_val, f_mode = kernels.no_facts(n)
    return kernels.KernelPlan(
        plan.order, plan.offsets, matrix, inv_norm, usable, plan.hash_class, plan.n_classes,
        plan.filtered, kernels.effective_threshold(cfg.ingestion.similarity_threshold),
        f_off, f_val, f_mode, guard,
        kernels.lone_of(plan.order, plan.offsets, f_off, f_val, f_mode, guard),
    )


def run_kernels(
    plan: Plan,
    emb: Embeddings | None,
    cfg: DedupConfig,
    threads: int | None,
    *,
    texts: pa.Array | pa.ChunkedArray | None = None,
) -> kernels.Outputs:
    """Run the kernel each group needs: the Numba scan for small groups (in parallel), the
    BLAS-blocked kernel for groups of ``BlockMinSegments`` or more, LSH for groups of
    ``LshMinSegments`` or more in LSH mode (``texts``: the text column, for MinHash)."""
    n = plan.order.shape[0]
    out = kernels.new_outputs(n)
    if not cfg.ingestion.enabled or n == 0:
        return out
    p = kernel_plan(plan, emb, cfg)
    ing = cfg.ingestion
    sizes = plan.sizes
    use_lsh = (sizes >= ing.lsh_min_segments) if ing.mode is Mode.LSH else np.zeros_like(
        sizes, dtype=bool)
    large = (sizes >= ing.block_min_segments) | use_lsh
    small = np.flatnonzero(~large).astype(np.int64)
    # A small input takes the NumPy twin: loading the jitted kernels (and Numba) costs more
    # than it saves (cold start). The choice depends on the size of the whole input only;
    # the decisions agree outside SPEC §5's 1e-5 band (tested).
    if max(n, input_rows_hint()) < SMALL_INPUT_ROWS and not large.any():
        kernels.greedy_numpy(p, small, out)
        return out
    from . import blocked as kernels_blocked
    from . import lsh

    with numba_threads(threads), kernels_blocked.blas_threads(threads):
        kernels.greedy_numba(p, small, out)
        sel_of_class = np.full(plan.n_classes, -1, dtype=np.int64)
        for g in np.flatnonzero(large).tolist():
            rows = plan.order[plan.offsets[g] : plan.offsets[g + 1]]
            if use_lsh[g]:
                # The bucket tables go as soon as they are laid out, before the scan
                # allocates its selected vectors (peak memory).
                layout = lsh.ScanLayout.of(
                    lsh.candidate_buckets(rows, p.matrix, p.inv_norm, p.usable, texts, ing))
                lsh.greedy_lsh_group(rows, p, sel_of_class, out, layout)
                del layout
            else:
                kernels_blocked.greedy_blocked_group(rows, p, sel_of_class, out)
    return out


def boost_fraction(near_counts: np.ndarray, cfg: DedupConfig) -> np.ndarray:
    """Nominal boost of SPEC section 2.6 (before the cap); 0 without near duplicates."""
    ing = cfg.ingestion
    if not ing.enable_salience_boost or near_counts.size == 0:
        return np.zeros(near_counts.shape, dtype=np.float64)
    # The counts are small integers: the formula runs once per possible count and each row
    # looks its value up (a log1p per row cost ~15 ms at 1M rows).
    top = int(near_counts.max())
    c = np.arange(top + 1, dtype=np.float64)
    if ing.boost_decay_mode is DecayMode.LINEAR:
        boost = ing.boost_per_near_duplicate * c
    else:
        boost = ing.boost_per_near_duplicate * np.log1p(c) / np.log(ing.log_base)
    table = np.where(c > 0, boost, 0.0)
    return table[near_counts]


def _ids_at(seg_ids: pl.Series, rows: np.ndarray, name: str) -> pl.Series:
    """The value of ``seg_ids`` at each row index in ``rows`` (null where it is -1)."""
    has = rows >= 0
    if not has.any():
        return pl.repeat(None, rows.shape[0], dtype=pl.String, eager=True).alias(name)
    return (
        pl.DataFrame({"m": has})
        .select(pl.when(pl.col("m")).then(seg_ids.gather(np.where(has, rows, 0))))
        .to_series()
        .alias(name)
    )


def kept_rows(frame: pl.DataFrame, mask: np.ndarray, emb: Embeddings | None) -> pl.DataFrame:
    """``frame.filter(mask)``, the same frame bit for bit; a large float32 embedding column
    without nulls is gathered by the parallel row copy (Polars' filter copies it on one
    thread and dominated the output stage) from ``emb``'s matrix (validate's float32 view of
    that column), and wrapped without another copy."""
    column = "embedding"
    dtype = frame.schema.get(column)
    if (emb is None or not isinstance(dtype, pl.Array) or dtype.inner != pl.Float32
            or frame.height == 0 or not emb.present.all()
            or frame.height * int(dtype.size) < JIT_MIN_VALUES):
        return frame.filter(pl.Series(mask))
    from ..arrays.vectors_jit import gather_rows_numba

    matrix = emb.matrix
    if mask.all():
        # Every row kept: the matrix holds the column's values already. A copy of it was a
        # third copy of a large document's embeddings at its bucket's peak (with the rows
        # read and the file written).
        values = matrix
    else:
        rows = np.flatnonzero(mask)
        # Allocated by NumPy, which asks the kernel for huge pages on large arrays (Numba's
        # allocator does not): a fraction of the page faults of the ~0.8 GB buffer; inside a
        # job, lent from its scratch pool (no fresh pages after the first buckets).
        values = scratch.empty((rows.shape[0], matrix.shape[1]), dtype=np.float32)
        gather_rows_numba(matrix, rows, values)
    embedding = pl.Series(column, pa.FixedSizeListArray.from_arrays(
        pa.array(values.reshape(-1)), int(dtype.size)))
    index = frame.columns.index(column)
    return without_column(frame, column).filter(pl.Series(mask)).insert_column(index, embedding)


def build_result(
    frame: pl.DataFrame,
    salience: np.ndarray,
    out: kernels.Outputs,
    cfg: DedupConfig,
    timings: dict[str, float],
    emb: Embeddings | None,
    docs: tuple[np.ndarray, pa.Array] | None = None,
) -> IngestionResult:
    action, rep, sim = out.action, out.rep, out.sim
    n = frame.height
    near = action == kernels.MERGED_NEAR
    exact = action == kernels.DROPPED_EXACT
    near_count = np.bincount(rep[near], minlength=n).astype(np.int64)
    exact_count = np.bincount(rep[exact], minlength=n).astype(np.int64)
    boost = boost_fraction(near_count, cfg)
    kept_mask = action == kernels.KEPT

    original = frame.get_column("salience")
    boosted_rows = kept_mask & (boost > 0)
    new_values = np.minimum(salience * (1.0 + boost), cfg.ingestion.max_salience_boost)
    out_dtype = original.dtype if original.dtype.is_float() else pl.Float64
    new_salience = (
        pl.DataFrame({"orig": original, "new": new_values, "hit": boosted_rows})
        .select(
            pl.when(pl.col("hit") & pl.col("orig").is_not_null())
            .then(pl.col("new").cast(out_dtype))
            .otherwise(pl.col("orig").cast(out_dtype))
        )
        .to_series()
        .alias("salience")
    )
    kept = kept_rows(frame.with_columns(
        new_salience,
        original.alias("salience_original"),
        pl.Series("salience_boost", boost, dtype=pl.Float64),
        pl.Series("near_duplicate_count", near_count, dtype=pl.Int64),
        pl.Series("exact_duplicate_count", exact_count, dtype=pl.Int64),
    ), kept_mask, emb)

    seg_ids = frame.get_column("segment_id").cast(pl.String)
    if out.reason.any():
        reasons = pl.Series("guard_reason", out.reason).replace_strict(
            {i + 1: name for i, name in enumerate(fact_tables.REASONS)}, default=None,
            return_dtype=fact_tables.REASON_DTYPE)
    else:  # no refusal (always without the guard): nothing to look up
        reasons = pl.repeat(None, n, dtype=fact_tables.REASON_DTYPE, eager=True) \
            .alias("guard_reason")
    decisions = pl.DataFrame({
        "doc_id": frame.get_column("doc_id").cast(pl.String),
        "segment_id": seg_ids,
        "action": pl.Series(action).replace_strict(
            dict(enumerate(kernels.ACTION_NAMES)), return_dtype=ACTION_DTYPE),
        "representative_id": _ids_at(seg_ids, rep, "representative_id"),
        "similarity": pl.Series(np.where(near, sim, np.nan), dtype=pl.Float32),
        "guard_refused_id": _ids_at(seg_ids, out.refused, "guard_refused_id"),
        "guard_reason": reasons,
        "guard_detail": _guard_detail(frame, out.refused, reasons),
        # What was removed, beside what stands for it (null for kept segments).
        "text": pl.select(pl.when(pl.Series(~kept_mask)).then(
            frame.get_column("text").cast(pl.String))).to_series().alias("text"),
    }).with_columns(pl.col("similarity").fill_nan(None))
    if "language" in frame.columns:
        # Removed rows are not in the kept segments, so per-language analytics
        # (metrics view `dedup_by_language`) need the language on every decision.
        decisions = decisions.with_columns(frame.get_column("language").cast(pl.String))

    documents = document_stats(frame, action, boost, kept_mask, docs)
    # The same dict: the "output" stage closes after this returns and lands in it too.
    return IngestionResult(kept, decisions, documents, timings, cfg,
                           emb.dim if emb is not None else None)


def _guard_detail(frame: pl.DataFrame, refused: np.ndarray, reasons: pl.Series) -> pl.Series:
    """The words behind each guard refusal (:mod:`arrowdedup.facts.detail`); null elsewhere."""
    rows = np.flatnonzero(refused >= 0)
    detail = pl.Series("guard_detail", [None] * frame.height, dtype=pl.String)
    if rows.shape[0] == 0:
        return detail
    from ..facts.detail import guard_details

    text = frame.get_column("text").cast(pl.String)
    types = frame.get_column("segment_type").gather(rows) \
        if "segment_type" in frame.columns else None
    langs = frame.get_column("language").gather(rows) if "language" in frame.columns else None
    sections = None
    if "section" in frame.columns:
        section = frame.get_column("section").cast(pl.String)
        sections = (section.gather(rows), section.gather(refused[rows]))
    found = guard_details(text.gather(rows), text.gather(refused[rows]), reasons.gather(rows),
                          segment_type=types, language=langs, sections=sections)
    return detail.scatter(rows, found)


def document_stats(
    frame: pl.DataFrame, action: np.ndarray, boost: np.ndarray, kept_mask: np.ndarray,
    docs: tuple[np.ndarray, pa.Array] | None = None,
) -> pl.DataFrame:
    """One row per document, in order of first appearance (counted with bincounts over
    the dense document codes, which follow first appearance; a group_by on the doc_id
    strings cost about twice as much, measured at 1M rows)."""
    codes, names = docs if docs is not None else doc_codes(frame)  # doc_id has no nulls
    n_docs = len(names)
    n_actions = len(kernels.ACTION_NAMES)
    if codes.shape[0] >= JIT_MIN_ROWS:
        from .plan_jit import document_counts

        counts, boost_sum, boost_max = document_counts(codes, action, boost, kept_mask,
                                                       n_docs, n_actions)
    else:
        counts = np.bincount(codes * n_actions + action.astype(np.int64),
                             minlength=n_actions * n_docs).reshape(n_docs, n_actions)
        # Boosts are >= 0 (BoostPerNearDuplicate is), so zeroing the removed rows' leaves
        # every sum and maximum as over the kept rows.
        kept_boost = np.where(kept_mask, boost, 0.0)
        boost_sum = np.bincount(codes, weights=kept_boost, minlength=n_docs)
        boost_max = np.zeros(n_docs, dtype=np.float64)
        np.maximum.at(boost_max, codes, kept_boost)
    original = counts.sum(axis=1)
    final = counts[:, kernels.KEPT]
    boost_avg = np.where(final > 0, boost_sum / np.maximum(final, 1), 0.0)
    ratio = (original - final) / original  # every document has a row
    if "doc_type" in frame.columns:
        # The first non-null doc_type of each document.
        types = frame.get_column("doc_type").cast(pl.String)
        rows = np.flatnonzero(types.is_not_null().to_numpy())
        first = np.full(n_docs, frame.height, dtype=np.int64)
        np.minimum.at(first, codes[rows], rows)
        doc_type = _ids_at(types, np.where(first < frame.height, first, -1), "doc_type")
    else:
        doc_type = pl.Series([None] * n_docs, dtype=pl.String)
    return pl.DataFrame({
        "doc_id": pl.Series(names).cast(pl.String),
        "doc_type": doc_type.alias("doc_type").cast(pl.String),
        "original_count": original.astype(np.int64),
        "final_count": final.astype(np.int64),
        "exact_count": counts[:, kernels.DROPPED_EXACT].astype(np.int64),
        "near_count": counts[:, kernels.MERGED_NEAR].astype(np.int64),
        "filtered_count": counts[:, kernels.FILTERED].astype(np.int64),
        "dedup_ratio": ratio.astype(np.float64),
        "avg_salience_boost": boost_avg.astype(np.float64),
        "max_salience_boost": boost_max,
    })
