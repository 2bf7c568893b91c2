"""Quality calibration of the near-duplicate threshold on labelled sentence pairs.

The "merge" decision of ingestion is ``cosine(a, b) >= t`` and, with the fact guard (SPEC
section 2 step 4, on by default), ``fact_conflict(a, b) is None``: text ``a`` merges into
representative ``b`` only when ``b`` states every fact of ``a``. Both decisions are measured
side by side; ``fact_guard`` says which one drives the recommendation. On a set of pairs labelled
duplicate / not duplicate this module measures, for every threshold of a grid (0.80–0.98 by
default), precision, recall and F1 of that decision and the false-merge rate on the negatives,
and recommends the lowest threshold that reaches a target precision (highest recall under a
precision floor: we prefer precision, SPEC section 9).

Pair files are TSV (or CSV) with two text columns and either a 0/1 label column, a graded score
column (positives: score >= ``positive_min``, negatives: score < ``negative_max``, the pairs in
between are left out), or no label at all (every pair is a negative, e.g. a sentence and its
translation, which must never merge). For all-negative sets, pairs whose two texts are identical
or differ only in digits, punctuation, symbols and spaces are set aside (names and numbers are
not translated, so such pairs are not cross-lingual) and counted; by default letter case is
ignored too (an untranslated headline often differs only in capitalisation), and the pairs set
aside only because of case are counted separately. Pairs whose word tokens are the same up to
one token (one word left out, added or swapped: a headline the translation left in English) are
*barely translated*: they are set aside too and counted on their own.

The guard reads each text's language: ``language`` for both texts when given, else a text
column named ``text_<code>`` (``text_en``) is in that language and any other text column in the
pair's ``lang`` / ``language`` column, when the file has one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .arrays.vectors import unit_rows
from .embed.embedders import Embedder, get_embedder
from .embed.view import embedding_text
from .errors import ConfigError, InputError

DEFAULT_THRESHOLDS = tuple(round(0.80 + 0.01 * i, 2) for i in range(19))
DEFAULT_POSITIVE_MIN = 4.8
DEFAULT_NEGATIVE_MAX = 3.0
DEFAULT_TARGET_PRECISION = 0.99
# Everything that is not a letter or a combining mark: digits, punctuation, symbols, spaces.
_NON_LETTERS = r"[\p{N}\p{P}\p{S}\p{Z}\s]"
_TEXT_COLUMN_PAIRS = (("sentence1", "sentence2"), ("text_en", "text_xx"), ("text1", "text2"),
                      ("left", "right"))
_GROUP_COLUMNS = ("lang", "language")
_WORD = r"[\p{L}\p{M}\p{N}_]+"


@dataclasses.dataclass(frozen=True)
class PairSet:
    """Labelled pairs ready to embed: ``labels`` is True for a duplicate (should merge)."""

    name: str
    left: list[str]
    right: list[str]
    labels: np.ndarray
    groups: list[str] | None
    text_columns: tuple[str, str]
    labelling: str
    total_rows: int
    left_out: int  # graded pairs between negative_max and positive_min
    set_aside: int  # trivial pairs of an all-negative set
    sampled_from: int | None = None
    set_aside_case_only: int = 0  # of set_aside: equal only once case is ignored
    ids: list[str] | None = None
    set_aside_barely_translated: int = 0  # all-negative pairs equal up to one word token
    # Language (BCP-47) of each left and right text, for the fact guard; None: unknown.
    left_languages: list[str | None] | None = None
    right_languages: list[str | None] | None = None

    @property
    def n(self) -> int:
        return len(self.left)

    @property
    def positives(self) -> int:
        return int(self.labels.sum())

    @property
    def negatives(self) -> int:
        return self.n - self.positives


GUARD_MODES = ("on", "off")


@dataclasses.dataclass(frozen=True)
class CalibrationResult:
    """Per-threshold quality of the merge decision on one pair set, with one embedder, with the
    fact guard and without it.

    ``guard_reasons`` holds, per pair, the :data:`arrowdedup.facts.guard.KIND_NAMES` index of the
    fact that keeps the left text from merging into the right one (0: none). ``fact_guard``
    picks the decision of ``table`` and of the recommendation; ``tables`` has both.
    """

    pairs: PairSet
    embedder: str
    cosine: np.ndarray
    table: pl.DataFrame
    target_precision: float
    recommended_threshold: float | None
    default_threshold: float
    embed_seconds: float
    guard_reasons: np.ndarray | None = None
    fact_guard: bool = False
    tables: dict[str, pl.DataFrame] = dataclasses.field(default_factory=dict)
    guard_seconds: float = 0.0

    def scores(self, guard: bool | None = None) -> np.ndarray:
        """The score that is compared with the threshold: the cosine, or with the guard the
        cosine of the pairs the guard lets merge and -inf for the others."""
        use = self.fact_guard if guard is None else guard
        if not use or self.guard_reasons is None:
            return self.cosine
        return np.where(self.guard_reasons == 0, self.cosine, np.float32(-np.inf))

    def row_at(self, threshold: float, guard: bool | None = None) -> dict[str, Any]:
        """The metrics row of a threshold (computed on the fly when off the grid)."""
        return metrics_at(self.scores(guard), self.pairs.labels, [threshold]).row(0, named=True)

    def false_merges_by_group(self, threshold: float, guard: bool | None = None
                              ) -> dict[str, int]:
        if self.pairs.groups is None:
            return {}
        frame = pl.DataFrame({
            "g": self.pairs.groups,
            "fp": (self.scores(guard) >= np.float32(threshold)) & ~self.pairs.labels,
        })
        agg = frame.group_by("g").agg(pl.col("fp").sum()).sort("g")
        return {str(g): int(c) for g, c in agg.iter_rows()}

    def best_precision(self) -> dict[str, float] | None:
        """The highest precision on the grid and the lowest threshold reaching it (for when no
        threshold meets the target)."""
        rows = self.table.filter(pl.col("precision").is_not_null())
        if rows.height == 0:
            return None
        top = rows.sort(["precision", "threshold"], descending=[True, False]).row(0, named=True)
        return {"threshold": top["threshold"], "precision": top["precision"],
                "recall": top["recall"]}

    def false_merge_ids(self, threshold: float, limit: int = 50, guard: bool | None = None
                        ) -> list[str]:
        """Ids (with the group, e.g. ``pt:train-12``) of negatives merged at ``threshold``,
        highest cosine first, so a reader can look them up in the pair file."""
        hits = np.flatnonzero((self.scores(guard) >= np.float32(threshold)) & ~self.pairs.labels)
        hits = hits[np.argsort(-self.cosine[hits], kind="stable")][:limit]
        ids = self.pairs.ids or [str(i) for i in range(self.pairs.n)]
        groups = self.pairs.groups
        return [f"{groups[i]}:{ids[i]}" if groups else str(ids[i]) for i in hits.tolist()]

    def guard_refusals(self, threshold: float) -> dict[str, dict[str, int]]:
        """Pairs at or above ``threshold`` that the guard refuses, by reason, split into
        positives (merges lost) and negatives (false merges prevented)."""
        out: dict[str, dict[str, int]] = {"positives": {}, "negatives": {}}
        if self.guard_reasons is None:
            return out
        from .facts.tables import KIND_NAMES

        above = (self.cosine >= np.float32(threshold)) & (self.guard_reasons != 0)
        for key, mask in (("positives", self.pairs.labels), ("negatives", ~self.pairs.labels)):
            kinds, counts = np.unique(self.guard_reasons[above & mask], return_counts=True)
            out[key] = {KIND_NAMES[int(k)]: int(c) for k, c in zip(kinds, counts, strict=True)}
        return out

    def side_by_side(self) -> pl.DataFrame:
        """One row per threshold: the metrics with the guard and without it, side by side."""
        if not self.tables:
            return self.table
        cols = ["precision", "recall", "f1", "fp", "false_merge_rate", "tp"]
        on = self.tables["on"].select("threshold", *[pl.col(c).alias(f"{c}_guard_on")
                                                     for c in cols])
        off = self.tables["off"].select(*[pl.col(c).alias(f"{c}_guard_off") for c in cols])
        return pl.concat([on, off], how="horizontal")

    def to_dict(self) -> dict[str, Any]:
        negatives = self.cosine[~self.pairs.labels]
        at_default = self.row_at(self.default_threshold)
        out: dict[str, Any] = {
            "pairs": self.pairs.name,
            "embedder": self.embedder,
            "labelling": self.pairs.labelling,
            "text_columns": list(self.pairs.text_columns),
            "rows": self.pairs.total_rows,
            "pairs_used": self.pairs.n,
            "positives": self.pairs.positives,
            "negatives": self.pairs.negatives,
            "left_out_between_thresholds": self.pairs.left_out,
            "set_aside_trivial": self.pairs.set_aside,
            "set_aside_case_only": self.pairs.set_aside_case_only,
            "set_aside_barely_translated": self.pairs.set_aside_barely_translated,
            "sampled_from": self.pairs.sampled_from,
            "fact_guard": "on" if self.fact_guard else "off",
            "target_precision": self.target_precision,
            "recommended_threshold": self.recommended_threshold,
            "best_precision": self.best_precision(),
            "default_threshold": self.default_threshold,
            "at_default": at_default,
            "false_merges_by_group_at_default": self.false_merges_by_group(
                self.default_threshold),
            "max_negative_cosine": float(negatives.max()) if negatives.size else None,
            "false_merge_ids_at_default": self.false_merge_ids(self.default_threshold),
            "embed_seconds": self.embed_seconds,
            "guard_seconds": self.guard_seconds,
            "thresholds": self.table.to_dicts(),
        }
        if self.guard_reasons is not None:
            has_pos = self.pairs.positives > 0
            for mode in GUARD_MODES:
                guard = mode == "on"
                out[f"guard_{mode}"] = {
                    "at_default": self.row_at(self.default_threshold, guard),
                    "recommended_threshold": recommend(self.tables[mode],
                                                       self.target_precision, has_pos),
                    "false_merges_by_group_at_default": self.false_merges_by_group(
                        self.default_threshold, guard),
                    "false_merge_ids_at_default": self.false_merge_ids(
                        self.default_threshold, guard=guard),
                    "thresholds": self.tables[mode].to_dicts(),
                }
            out["guard_refusals_at_default"] = self.guard_refusals(self.default_threshold)
        return out


def read_pair_file(path: str | Path) -> pl.DataFrame:
    """Read a TSV/CSV pair file verbatim (no quote handling: sentences contain quotes)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"pair file {p} does not exist; pass a TSV with two text columns")
    separator = "," if p.suffix.lower() == ".csv" else "\t"
    try:
        # glob=False: a file name holding "[" or "*" is a name, not a pattern.
        return pl.read_csv(p, separator=separator, quote_char=None, infer_schema_length=0,
                           glob=False)
    except pl.exceptions.PolarsError as err:
        raise InputError(f"cannot read the pair file {p}: {err}") from err


def load_pairs(
    path: str | Path,
    *,
    text_columns: Sequence[str] | None = None,
    label_column: str | None = None,
    positive_min: float = DEFAULT_POSITIVE_MIN,
    negative_max: float = DEFAULT_NEGATIVE_MAX,
    group_column: str | None = None,
    set_aside_trivial: bool = True,
    ignore_case: bool = True,
    sample: int | None = None,
    seed: int = 0,
    language: str | None = None,
) -> PairSet:
    """Load labelled pairs; see the module docstring for the labelling rules.

    ``label_column`` defaults to ``label`` (0/1) or ``score`` (graded) when present, else every
    pair is a negative. ``sample`` keeps a seeded sample of that many pairs per group (or in
    total without a group column) after labelling.
    """
    frame = read_pair_file(path)
    columns = frame.columns
    a, b = _text_columns(frame, text_columns, path)
    label = label_column or next((c for c in ("label", "score") if c in columns), None)
    if label is not None and label not in columns:
        raise ConfigError(
            f"label column {label!r} is not in {path} (columns: {', '.join(columns)}); "
            "pass --label-column with one of them, or none for an all-negative set"
        )
    group = group_column or next((c for c in _GROUP_COLUMNS if c in columns), None)
    if group is not None and group not in columns:
        raise ConfigError(f"group column {group!r} is not in {path}; columns: {columns}")
    total = frame.height
    frame = frame.filter(pl.col(a).is_not_null() & pl.col(b).is_not_null())

    left_out = 0
    set_aside = 0
    case_only = 0
    barely = 0
    if label is None:
        labelling = "all negative"
        frame = frame.with_columns(pl.lit(False).alias("_positive"))
        if set_aside_trivial:
            la = pl.col(a).str.replace_all(_NON_LETTERS, "")
            lb = pl.col(b).str.replace_all(_NON_LETTERS, "")
            strict = la == lb
            trivial = (la.str.to_lowercase() == lb.str.to_lowercase()) if ignore_case else strict
            counts = frame.select(trivial.sum().alias("t"), (trivial & ~strict).sum().alias("c"))
            set_aside, case_only = (int(v) for v in counts.row(0))
            frame = frame.filter(~trivial)
            near_copy = _barely_translated(pl.col(a), pl.col(b), ignore_case)
            barely = int(frame.select(near_copy.sum()).item())
            frame = frame.filter(~near_copy)
    else:
        values = frame.get_column(label).cast(pl.Float64, strict=False)
        if values.null_count():
            bad = np.flatnonzero(values.is_null().to_numpy())[:5].tolist()
            raise InputError(f"label column {label!r} of {path} has non-numeric values at rows "
                             f"{bad}; fix the file or pass another --label-column")
        distinct = set(values.unique().to_list())
        if distinct <= {0.0, 1.0}:
            labelling = f"{label} == 1"
            frame = frame.with_columns((values == 1.0).alias("_positive"))
        else:
            if not negative_max <= positive_min:
                raise ConfigError(
                    f"negative_max ({negative_max}) must not exceed positive_min ({positive_min})")
            labelling = f"{label} >= {positive_min} positive, < {negative_max} negative"
            keep = (values >= positive_min) | (values < negative_max)
            left_out = int((~keep).sum())
            frame = frame.with_columns((values >= positive_min).alias("_positive")).filter(keep)

    sampled_from = None
    if sample is not None:
        if sample < 1:
            raise ConfigError(f"sample must be >= 1, got {sample}")
        sampled_from = frame.height
        frame = frame.with_row_index("_row")
        if group is not None:
            frame = frame.filter(
                pl.int_range(pl.len()).shuffle(seed=seed).over(group) < sample
            )
        elif frame.height > sample:
            frame = frame.sample(n=sample, seed=seed)
        frame = frame.sort("_row")

    id_column = next((c for c in ("pair_id", "id") if c in columns), None)
    group_values = frame.get_column(group).to_list() if group is not None else None
    left_lang, right_lang = (_side_language(col, language, group_values, frame.height)
                             for col in (a, b))
    return PairSet(
        name=Path(path).name,
        left=frame.get_column(a).to_list(),
        right=frame.get_column(b).to_list(),
        labels=frame.get_column("_positive").to_numpy().astype(bool),
        groups=frame.get_column(group).to_list() if group is not None else None,
        text_columns=(a, b),
        labelling=labelling,
        total_rows=total,
        left_out=left_out,
        set_aside=set_aside,
        sampled_from=sampled_from,
        set_aside_case_only=case_only,
        ids=frame.get_column(id_column).to_list() if id_column is not None else None,
        set_aside_barely_translated=barely,
        left_languages=left_lang,
        right_languages=right_lang,
    )


def _barely_translated(a: pl.Expr, b: pl.Expr, ignore_case: bool) -> pl.Expr:
    """True when the two texts' word tokens are the same up to one token: at most one token of
    each side is missing from the other, and the token counts differ by at most one."""
    def words(col: pl.Expr) -> pl.Expr:
        return (col.str.to_lowercase() if ignore_case else col).str.extract_all(_WORD)

    wa, wb = words(a), words(b)
    only_a = wa.list.set_difference(wb).list.len()
    only_b = wb.list.set_difference(wa).list.len()
    lengths = (wa.list.len() - wb.list.len()).abs()
    return (only_a <= 1) & (only_b <= 1) & (lengths <= 1) & (wa.list.len() > 0)


def _side_language(column: str, language: str | None, groups: list[str] | None, n: int
                   ) -> list[str | None] | None:
    """The language of each text of one side (see the module docstring)."""
    if language is not None:
        return [language] * n
    prefix, _, code = column.rpartition("_")
    if prefix == "text" and len(code) == 2 and code.isalpha() and code != "xx":
        return [code] * n
    return list(groups) if groups is not None else None


def _text_columns(
    frame: pl.DataFrame, text_columns: Sequence[str] | None, path: str | Path
) -> tuple[str, str]:
    if text_columns is not None:
        cols = list(text_columns)
        if len(cols) != 2:
            raise ConfigError(f"--text-columns takes two names (a,b), got {cols}")
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ConfigError(
                f"text column(s) {missing} not in {path}; columns: {', '.join(frame.columns)}")
        return cols[0], cols[1]
    for pair in _TEXT_COLUMN_PAIRS:
        if all(c in frame.columns for c in pair):
            return pair
    raise ConfigError(
        f"cannot tell the two text columns of {path} (columns: {', '.join(frame.columns)}); "
        "pass --text-columns a,b"
    )


def pair_cosines(pairs: PairSet, embedder: Embedder) -> np.ndarray:
    """Cosine of each pair, embedding every distinct text once."""
    unique = sorted(set(pairs.left) | set(pairs.right))
    # The texts as the job's embedding step reads them, so the cosines are the job's.
    vectors = unit_rows(np.asarray(embedder.encode([embedding_text(t) for t in unique]),
                                   dtype=np.float32))
    index = {t: i for i, t in enumerate(unique)}
    li = np.fromiter((index[t] for t in pairs.left), dtype=np.int64, count=pairs.n)
    ri = np.fromiter((index[t] for t in pairs.right), dtype=np.int64, count=pairs.n)
    return np.einsum("ij,ij->i", vectors[li], vectors[ri]).astype(np.float32)


def metrics_at(cosine: np.ndarray, labels: np.ndarray, thresholds: Sequence[float]
               ) -> pl.DataFrame:
    """Confusion counts, precision, recall, F1 and false-merge rate per threshold.

    Precision is null when nothing merges; recall null without positives; the false-merge rate
    (merged negatives / negatives) null without negatives.
    """
    t = np.asarray(thresholds, dtype=np.float32)
    merged = cosine[None, :] >= t[:, None]
    pos = labels[None, :]
    tp = (merged & pos).sum(axis=1)
    fp = (merged & ~pos).sum(axis=1)
    fn = (~merged & pos).sum(axis=1)
    tn = (~merged & ~pos).sum(axis=1)
    frame = pl.DataFrame({
        "threshold": np.asarray(thresholds, dtype=np.float64),
        "tp": tp.astype(np.int64), "fp": fp.astype(np.int64),
        "fn": fn.astype(np.int64), "tn": tn.astype(np.int64),
    })

    def ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
        return pl.when(den > 0).then(num / den).otherwise(None)

    frame = frame.with_columns(
        ratio(pl.col("tp"), pl.col("tp") + pl.col("fp")).alias("precision"),
        ratio(pl.col("tp"), pl.col("tp") + pl.col("fn")).alias("recall"),
        ratio(pl.col("fp"), pl.col("fp") + pl.col("tn")).alias("false_merge_rate"),
    )
    f1 = ratio(2 * pl.col("precision") * pl.col("recall"),
               pl.col("precision") + pl.col("recall"))
    if labels.any():
        # With positives, no merge at all (precision null) still means F1 = 0.
        f1 = f1.fill_null(0.0)
    return frame.with_columns(f1.alias("f1")).select(
        "threshold", "tp", "fp", "fn", "tn", "precision", "recall", "f1", "false_merge_rate")


def recommend(table: pl.DataFrame, target_precision: float, has_positives: bool) -> float | None:
    """Lowest threshold of the grid whose precision reaches the target (the most recall).

    Without positives every merge is false, so the recommendation is the lowest threshold with
    no false merge. None when no threshold of the grid qualifies.
    """
    if has_positives:
        ok = table.filter(pl.col("precision") >= target_precision)
    else:
        ok = table.filter(pl.col("fp") == 0)
    return float(ok.get_column("threshold").min()) if ok.height else None  # type: ignore[arg-type]


def calibrate(
    pairs: PairSet,
    embedder: str | Embedder | None = None,
    *,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    target_precision: float = DEFAULT_TARGET_PRECISION,
    default_threshold: float = 0.90,
    fact_guard: bool = True,
    segment_type: str | None = None,
) -> CalibrationResult:
    """Embed the pairs and measure the merge decision at every threshold, with the fact guard
    and without it; ``fact_guard`` picks the one behind ``table`` and the recommendation.
    ``segment_type`` is the type of every text for the guard (``code`` and ``heading`` need
    equal fact sets; default: ordinary text)."""
    if not 0.0 < target_precision <= 1.0:
        raise ConfigError(f"target precision must be in (0, 1], got {target_precision}")
    if pairs.n == 0:
        raise InputError(f"{pairs.name} has no usable pairs after labelling")
    model = get_embedder(embedder)
    start = time.perf_counter()
    cosine = pair_cosines(pairs, model)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    reasons = pair_guard_reasons(pairs.left, pairs.right, left_languages=pairs.left_languages,
                                 right_languages=pairs.right_languages,
                                 segment_type=segment_type)
    guard_seconds = time.perf_counter() - start
    guarded = np.where(reasons == 0, cosine, np.float32(-np.inf))
    tables = {"on": metrics_at(guarded, pairs.labels, thresholds),
              "off": metrics_at(cosine, pairs.labels, thresholds)}
    table = tables["on" if fact_guard else "off"]
    return CalibrationResult(
        pairs=pairs,
        embedder=model.name,
        cosine=cosine,
        table=table,
        target_precision=target_precision,
        recommended_threshold=recommend(table, target_precision, pairs.positives > 0),
        default_threshold=default_threshold,
        embed_seconds=seconds,
        guard_reasons=reasons,
        fact_guard=fact_guard,
        tables=tables,
        guard_seconds=guard_seconds,
    )


def pair_guard_reasons(
    left: Sequence[str],
    right: Sequence[str],
    *,
    left_languages: Sequence[str | None] | None = None,
    right_languages: Sequence[str | None] | None = None,
    segment_type: str | None = None,
) -> np.ndarray:
    """For each pair, the fact kind (index into :data:`arrowdedup.facts.guard.KIND_NAMES`) that
    keeps ``left[i]`` from merging into ``right[i]``, 0 when the guard lets it: the vectorised
    :func:`arrowdedup.fact_conflict` (one signature pass over all texts, one kernel call)."""
    from .facts.guard import conflict_reasons, fact_modes, signature_arrays

    n = len(left)
    if len(right) != n:
        raise ConfigError(f"{n} left texts but {len(right)} right texts")
    text = pl.Series("text", [*left, *right], dtype=pl.String)
    languages = None
    if left_languages is not None or right_languages is not None:
        languages = pl.Series("language", [*(left_languages or [None] * n),
                                           *(right_languages or [None] * n)], dtype=pl.String)
    types = pl.Series("segment_type", [segment_type] * (2 * n), dtype=pl.String) \
        if segment_type else None
    offsets, values = signature_arrays(text, segment_type=types, language=languages)
    modes = fact_modes(types, 2 * n)
    rows = np.arange(n, dtype=np.int64)
    return np.asarray(conflict_reasons(offsets, values, modes, rows, rows + n), dtype=np.int8)


def precision_recall_curve(result: CalibrationResult, step: float = 0.005,
                           guard: bool | None = None) -> pl.DataFrame:
    """Metrics on a fine grid from 0.5 to 1.0, for plots (``guard``: default the result's)."""
    grid = np.round(np.arange(0.5, 1.0 + step / 2, step), 4).tolist()
    return metrics_at(result.scores(guard), result.pairs.labels, grid)
