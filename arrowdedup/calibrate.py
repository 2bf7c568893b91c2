"""Quality calibration of the near-duplicate threshold on labelled sentence pairs.

The "merge" decision of ingestion is ``cosine(a, b) >= t``. On a set of pairs labelled
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
aside only because of case are counted separately.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .embed import Embedder, get_embedder
from .errors import ConfigError, InputError
from .vectors import unit_rows

DEFAULT_THRESHOLDS = tuple(round(0.80 + 0.01 * i, 2) for i in range(19))
DEFAULT_POSITIVE_MIN = 4.8
DEFAULT_NEGATIVE_MAX = 3.0
DEFAULT_TARGET_PRECISION = 0.99
# Everything that is not a letter or a combining mark: digits, punctuation, symbols, spaces.
_NON_LETTERS = r"[\p{N}\p{P}\p{S}\p{Z}\s]"
_TEXT_COLUMN_PAIRS = (("sentence1", "sentence2"), ("text_en", "text_xx"), ("text1", "text2"),
                      ("left", "right"))
_GROUP_COLUMNS = ("lang", "language")


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

    @property
    def n(self) -> int:
        return len(self.left)

    @property
    def positives(self) -> int:
        return int(self.labels.sum())

    @property
    def negatives(self) -> int:
        return self.n - self.positives


@dataclasses.dataclass(frozen=True)
class CalibrationResult:
    """Per-threshold quality of the merge decision on one pair set, with one embedder."""

    pairs: PairSet
    embedder: str
    cosine: np.ndarray
    table: pl.DataFrame
    target_precision: float
    recommended_threshold: float | None
    default_threshold: float
    embed_seconds: float

    def row_at(self, threshold: float) -> dict[str, Any]:
        """The metrics row of a threshold (computed on the fly when off the grid)."""
        return metrics_at(self.cosine, self.pairs.labels, [threshold]).row(0, named=True)

    def false_merges_by_group(self, threshold: float) -> dict[str, int]:
        if self.pairs.groups is None:
            return {}
        frame = pl.DataFrame({
            "g": self.pairs.groups,
            "fp": (self.cosine >= np.float32(threshold)) & ~self.pairs.labels,
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

    def false_merge_ids(self, threshold: float, limit: int = 50) -> list[str]:
        """Ids (with the group, e.g. ``pt:train-12``) of negatives merged at ``threshold``,
        highest cosine first, so a reader can look them up in the pair file."""
        hits = np.flatnonzero((self.cosine >= np.float32(threshold)) & ~self.pairs.labels)
        hits = hits[np.argsort(-self.cosine[hits], kind="stable")][:limit]
        ids = self.pairs.ids or [str(i) for i in range(self.pairs.n)]
        groups = self.pairs.groups
        return [f"{groups[i]}:{ids[i]}" if groups else str(ids[i]) for i in hits.tolist()]

    def to_dict(self) -> dict[str, Any]:
        negatives = self.cosine[~self.pairs.labels]
        at_default = self.row_at(self.default_threshold)
        return {
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
            "sampled_from": self.pairs.sampled_from,
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
            "thresholds": self.table.to_dicts(),
        }


def read_pair_file(path: str | Path) -> pl.DataFrame:
    """Read a TSV/CSV pair file verbatim (no quote handling: sentences contain quotes)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"pair file {p} does not exist; pass a TSV with two text columns")
    separator = "," if p.suffix.lower() == ".csv" else "\t"
    try:
        return pl.read_csv(p, separator=separator, quote_char=None, infer_schema_length=0)
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
    )


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
    vectors = unit_rows(np.asarray(embedder.encode(unique), dtype=np.float32))
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
) -> CalibrationResult:
    """Embed the pairs and measure the merge decision at every threshold."""
    if not 0.0 < target_precision <= 1.0:
        raise ConfigError(f"target precision must be in (0, 1], got {target_precision}")
    if pairs.n == 0:
        raise InputError(f"{pairs.name} has no usable pairs after labelling")
    model = get_embedder(embedder)
    start = time.perf_counter()
    cosine = pair_cosines(pairs, model)
    seconds = time.perf_counter() - start
    table = metrics_at(cosine, pairs.labels, thresholds)
    return CalibrationResult(
        pairs=pairs,
        embedder=model.name,
        cosine=cosine,
        table=table,
        target_precision=target_precision,
        recommended_threshold=recommend(table, target_precision, pairs.positives > 0),
        default_threshold=default_threshold,
        embed_seconds=seconds,
    )


def precision_recall_curve(result: CalibrationResult, step: float = 0.005
                           ) -> pl.DataFrame:
    """Metrics on a fine grid from 0.5 to 1.0, for plots."""
    grid = np.round(np.arange(0.5, 1.0 + step / 2, step), 4).tolist()
    return metrics_at(result.cosine, result.pairs.labels, grid)
