"""`verify`: check a written store against its manifest and against the guarantees of SPEC §5.

A store is trusted only after it has been checked from its files alone:

- **files**: every file the manifest lists exists, has the recorded row count and checksum
  (XXH3-128; SHA-256 in format 1 stores), and no unlisted part file sits beside them (a
  half-written or foreign file);
- **manifest**: it matches its own checksum (a manifest edited or damaged after it was written);
- **counts**: every count the manifest states (``counts``: documents, segments in and kept,
  each action; ``life``; ``history_layers``; the embedding dimension) equals what the files
  hold;
- **decisions**: one row per input segment with unique ids; the kept decisions are exactly the
  stored segments; every ``merged_near`` / ``dropped_exact`` decision names a representative
  that exists, is kept, and lies in the same document, segment type and language; the recorded
  duplicate counts of a kept segment equal the decisions that point at it;
- **buckets**: each document lives wholly in the bucket file its ``doc_id`` hashes to;
- **kept pairs**: in exact mode, no two kept segments of one group have cosine ≥ the threshold
  (beyond the 1e-5 tolerance SPEC §5 grants kernels that sum in different orders).

The LSH mode may miss merges by design (SPEC §5), so the kept-pair check is skipped there.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ..errors import ArrowDedupError, StoreError
from . import CURRENT, Store, bucket_of, checksum_file, open_store
from .integrity import manifest_problem
from .layout import CHANGES, HISTORY, MANIFEST, PART_DIRS

# SPEC §5: kernels may disagree on pairs within 1e-5 of the threshold.
TOLERANCE = 1e-5
# Rows of one GEMM block in the kept-pair check: bounds memory to BLOCK × group size floats.
BLOCK = 2048


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with a store: the check that failed, where, and what."""

    check: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.where}: {self.message}"


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify_store` found. ``ok`` is true when there is no problem."""

    root: Path
    run_id: str | None
    problems: tuple[Problem, ...]
    checked: dict[str, int]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        done = ", ".join(f"{k} {v}" for k, v in self.checked.items())
        verdict = "OK" if self.ok else f"{len(self.problems)} problem(s)"
        return f"store {self.root} (version {self.run_id}): {verdict}; checked {done}"


class _Collector:
    def __init__(self, limit: int) -> None:
        self.problems: list[Problem] = []
        self.limit = limit
        self.checked: dict[str, int] = {}

    def add(self, check: str, where: str, message: str) -> None:
        if len(self.problems) < self.limit:
            self.problems.append(Problem(check, where, message))

    def count(self, name: str, n: int) -> None:
        self.checked[name] = self.checked.get(name, 0) + int(n)


def verify_store(path: str | Path, *, max_problems: int = 100,
                 version: str | None = None) -> VerifyReport:
    """Check the current version (or the kept ``version``) of the store at ``path``, every
    file it reads included (those it shares with other versions too); never changes it.

    Raises :class:`StoreError` only when ``path`` is not a store at all; everything wrong
    inside a store is reported as a :class:`Problem`.
    """
    root = Path(path)
    out = _Collector(max_problems)
    try:
        store = _open_lenient(root, version)
    except StoreError as err:
        if version is not None or (not (root / CURRENT).exists()
                                   and not (root / CURRENT).is_symlink()):
            raise
        out.add("manifest", str(root / CURRENT), str(err))
        return VerifyReport(root, None, tuple(out.problems), out.checked)
    sealed = manifest_problem((store.version / MANIFEST).read_bytes(), store.manifest)
    if sealed is not None:
        out.add("manifest", "manifest.json", f"{sealed}; `arrowdedup rollback {root} VERSION` "
                "makes a sound version current, or ingest again")
    notes = tuple(
        f"leftover temporary version {p.name} (from a killed run; removed by the next ingest)"
        for p in sorted((store.version.parent).glob(".tmp-*"))
    )
    files_ok = _check_files(store, out)
    if files_ok:
        try:
            _check_contents(store, out)
        except (ArrowDedupError, pl.exceptions.PolarsError, pa.ArrowException, OSError,
                ValueError) as err:
            out.add("read", str(store.version), f"cannot read the data files: {err}")
    return VerifyReport(root, store.manifest.get("run_id"), tuple(out.problems), out.checked,
                        notes)


def _open_lenient(root: Path, version: str | None) -> Store:
    """The version to check, its manifest read even when it fails its own checksum (that is
    reported as a problem, and every other check still runs)."""
    from .manifest import current_version, read_manifest
    from .versions import resolve_version

    if version is None and current_version(root) is None:
        return open_store(root)  # raises: not a store, or a store without a current pointer
    chosen = resolve_version(root, version) if version is not None else current_version(root)
    assert chosen is not None
    if not chosen.is_dir():
        return open_store(root)
    return Store(root, chosen.resolve(), read_manifest(chosen, strict=False))


# ----------------------------------------------------------------------------- files


def _rows_of(path: Path) -> int:
    if path.suffix == ".parquet":
        return int(pq.ParquetFile(path).metadata.num_rows)
    if path.suffix == ".arrow":
        with pa.memory_map(str(path), "r") as source:
            return int(ipc.open_file(source).read_all().num_rows)
    if path.suffix == ".npy":
        return int(np.load(path, mmap_mode="r").shape[0])
    raise ValueError(f"unknown file type {path.suffix}")


def _check_files(store: Store, out: _Collector) -> bool:
    """Manifest against files; returns False when the contents cannot be trusted to read."""
    files = store.manifest.get("files")
    if not isinstance(files, dict):
        out.add("manifest", "manifest.json", "no 'files' map; the manifest is damaged, re-ingest")
        return False
    sound = True
    algo = str(store.manifest.get("checksum", "sha256"))  # format 1 stores: SHA-256
    for rel, entry in sorted(files.items()):
        path = store.version / rel
        out.count("files", 1)
        if not path.is_file():
            out.add("files", rel, "listed in the manifest but missing; re-ingest")
            sound = False
            continue
        if not isinstance(entry, dict):
            out.add("files", rel, "manifest entry is not an object; the manifest is damaged")
            continue
        digest = checksum_file(path, algo)
        if digest != entry.get(algo):
            out.add("files", rel, f"{algo} {digest[:12]}… differs from the manifest's "
                    f"{str(entry.get(algo))[:12]}…: the file changed after it was written; "
                    "re-ingest")
            sound = False
            continue
        if entry.get("rows") is None:  # an index file (BM25): its checksum is the check
            continue
        try:
            rows = _rows_of(path)
        except (pa.ArrowException, OSError, ValueError) as err:
            out.add("files", rel, f"cannot be read ({err}); re-ingest")
            sound = False
            continue
        if rows != entry.get("rows"):
            out.add("files", rel, f"{rows} rows, the manifest says {entry.get('rows')}")
            sound = False
    # Index directories are checked for foreign files only when the manifest lists some of
    # their files (stores written before index files were checksummed list none).
    listed_dirs = {rel.split("/")[0] for rel in files if "/" in rel}
    for sub in (*PART_DIRS, *sorted(listed_dirs - set(PART_DIRS))):
        # Recursive: a version with deltas lists the files of every layer (deltas/<id>/...).
        for path in sorted((store.version / sub).rglob("*")):
            if path.is_dir():
                continue
            rel = path.relative_to(store.version).as_posix()
            if rel not in files:
                out.add("files", rel, "not listed in the manifest (foreign or half-written "
                        "file); remove it or re-ingest")
                sound = False
    return sound


# ----------------------------------------------------------------------------- contents


def _check_contents(store: Store, out: _Collector) -> None:
    manifest = store.manifest
    segments = store.segments().collect()
    decisions = store.decisions().collect()
    counts = manifest.get("counts") or {}
    out.count("segments", segments.height)
    out.count("decisions", decisions.height)
    _count_problem(out, store, "counts.segments_kept", counts.get("segments_kept"),
                   segments.height, "the segment files hold")
    _count_problem(out, store, "counts.segments_in", counts.get("segments_in"),
                   decisions.height, "the decision files hold")
    _check_counts(store, decisions, out)
    _check_buckets(store, out)
    _check_decisions(segments, decisions, out)
    config = _config_of(store, out)
    if config is not None:
        _check_kept_pairs(store, segments, config, out)


# The counts a manifest states beside segments_in / segments_kept: each is recomputed from the
# files (an action count from the decisions' ``action`` column).
_FIX = "the manifest was edited or damaged: `arrowdedup rollback {root} VERSION` makes a " \
    "sound version current, or ingest again"


def _count_problem(out: _Collector, store: Store, key: str, stated: Any, actual: int,
                   what: str) -> None:
    if isinstance(stated, bool) or not isinstance(stated, int) or stated != actual:
        out.add("counts", f"manifest.{key}", f"states {stated!r}, {what} {actual}; "
                + _FIX.format(root=store.root))


def _check_counts(store: Store, decisions: pl.DataFrame, out: _Collector) -> None:
    """Every count of the manifest (``counts``, ``life``, ``history_layers``, the embedding
    dimension) against the files."""
    manifest = store.manifest
    counts = manifest.get("counts")
    if not isinstance(counts, dict):
        out.add("counts", "manifest.counts", f"{counts!r} is not a map of counts; "
                + _FIX.format(root=store.root))
        counts = {}
    documents = store.documents().select(pl.len()).collect().item()
    out.count("counts", 1)
    _count_problem(out, store, "counts.documents", counts.get("documents"), documents,
                   "the documents files hold")
    actions = {str(a): int(n) for a, n in
               decisions.get_column("action").cast(pl.String).value_counts().iter_rows()}
    for key in sorted(set(counts) | set(actions)):
        if key in ("documents", "segments_in", "segments_kept"):
            continue
        out.count("counts", 1)
        _count_problem(out, store, f"counts.{key}", counts.get(key, 0), actions.get(key, 0),
                       f"the decisions hold {key!r}")
    life = manifest.get("life")
    if isinstance(life, dict):
        expected = _life_of(store, documents)
        for key in sorted(set(life) | set(expected)):
            out.count("counts", 1)
            _count_problem(out, store, f"life.{key}", life.get(key, 0), expected.get(key, 0),
                           "the version's changes say")
    if "history_layers" in manifest and (store.version / HISTORY).exists():
        seqs = store.read_parquet(store.version / HISTORY, ["seq"]).get_column("seq")
        if seqs.len():
            out.count("counts", 1)
            top = cast(int, seqs.max())  # the history's seq column is Int64, as written
            _count_problem(out, store, "history_layers", manifest.get("history_layers"),
                           int(top) + 1, "the carried history holds layers")
    dim = (manifest.get("embedding") or {}).get("dim")
    vectors = store.vectors()
    if vectors is not None and len(vectors):
        out.count("counts", 1)
        _count_problem(out, store, "embedding.dim", dim, vectors.dim,
                       "the embedding files hold vectors of dimension")


def _life_of(store: Store, documents: int) -> dict[str, int]:
    """What ``life`` (the documents this version added, changed, removed) must say."""
    if store.is_layered:
        last = store.layers()[-1].path / CHANGES
        if not last.exists():
            return {"added": 0, "changed": 0, "removed": 0}
        changes = store.read_parquet(last, ["change"]).get_column("change").cast(pl.String)
        return {k: int((changes == k).sum()) for k in ("added", "changed", "removed")}
    if store.manifest.get("compacted_from"):
        return {"added": 0, "changed": 0, "removed": 0}
    return {"added": documents, "changed": 0, "removed": 0}


def _config_of(store: Store, out: _Collector) -> Any:
    try:
        return store.config
    except (ArrowDedupError, KeyError) as err:
        out.add("manifest", "manifest.config", f"the recorded config is unusable: {err}")
        return None


def _check_buckets(store: Store, out: _Collector) -> None:
    buckets = store.manifest.get("buckets")
    if not isinstance(buckets, int) or buckets < 1:
        out.add("manifest", "manifest.buckets", f"{buckets!r} is not a bucket count")
        return
    for sub in ("segments", "decisions"):
        for path in sorted((store.version / sub).glob("part-*.parquet")):
            try:
                expected = int(path.stem.split("-")[1])
            except (IndexError, ValueError):
                out.add("buckets", f"{sub}/{path.name}", "file name has no bucket number")
                continue
            docs = pq.read_table(path, columns=["doc_id"]).column("doc_id")
            got = bucket_of(docs.cast(pa.string()), buckets)
            wrong = np.flatnonzero(got != expected)
            if wrong.size:
                doc = docs[int(wrong[0])].as_py()
                out.add("buckets", f"{sub}/{path.name}",
                        f"document {doc!r} belongs to bucket {int(got[wrong[0]])}, not "
                        f"{expected} ({wrong.size} rows misplaced)")


def _group_keys(frame: pl.DataFrame) -> list[str]:
    return ["doc_id", "segment_type"] + (["language"] if "language" in frame.columns else [])


def _check_decisions(segments: pl.DataFrame, decisions: pl.DataFrame, out: _Collector) -> None:
    dup = decisions.filter(pl.col("segment_id").is_duplicated())
    if dup.height:
        out.add("decisions", "segment_id", f"{dup.height} decision rows share ids, e.g. "
                f"{dup.get_column('segment_id').head(3).to_list()}")
    seg_ids = segments.get_column("segment_id").cast(pl.String)
    if seg_ids.is_duplicated().any():
        out.add("segments", "segment_id", "kept segments with duplicate ids")
    action = decisions.get_column("action").cast(pl.String)
    kept_ids = decisions.filter(action == "kept").get_column("segment_id")
    stored = set(seg_ids.to_list())
    kept_set = set(kept_ids.to_list())
    if stored != kept_set:
        missing = sorted(kept_set - stored)[:3]
        extra = sorted(stored - kept_set)[:3]
        out.add("decisions", "kept", f"kept decisions and stored segments differ (kept but not "
                f"stored: {missing}; stored but not kept: {extra})")

    keys = [k for k in _group_keys(segments)]
    info = segments.select(
        pl.col("segment_id").cast(pl.String).alias("representative_id"),
        *[pl.col(k).cast(pl.String).alias(f"rep_{k}") for k in keys],
        pl.col("near_duplicate_count"), pl.col("exact_duplicate_count"),
    )
    removed = decisions.filter(action.is_in(["merged_near", "dropped_exact"]))
    out.count("representatives", removed.height)
    # The removed segment's own group keys are not stored (it is not kept): its doc_id is in
    # the decisions; segment_type/language are compared through the representative's decision.
    linked = removed.join(info, on="representative_id", how="left")
    orphan = linked.filter(pl.col("rep_doc_id").is_null())
    if orphan.height:
        row = orphan.row(0, named=True)
        out.add("decisions", f"segment {row['segment_id']!r}",
                f"{row['action']} but its representative {row['representative_id']!r} is not a "
                f"kept segment ({orphan.height} such decisions): a removed segment lost its "
                "concept")
    cross = linked.filter(pl.col("rep_doc_id").is_not_null()
                          & (pl.col("rep_doc_id") != pl.col("doc_id").cast(pl.String)))
    if cross.height:
        row = cross.row(0, named=True)
        out.add("decisions", f"segment {row['segment_id']!r}",
                f"document {row['doc_id']!r} is represented by {row['representative_id']!r} of "
                f"document {row['rep_doc_id']!r}: a decision crossed a document boundary")
    near = removed.filter(pl.col("action").cast(pl.String) == "merged_near")
    low = near.filter(pl.col("similarity").is_null() | pl.col("similarity").is_nan())
    if low.height:
        out.add("decisions", f"segment {low.get_column('segment_id')[0]!r}",
                f"{low.height} merged_near decisions without a similarity")
    other = decisions.filter(~action.is_in(["merged_near", "dropped_exact"])
                             & pl.col("representative_id").is_not_null())
    if other.height:
        out.add("decisions", f"segment {other.get_column('segment_id')[0]!r}",
                f"{other.height} kept/filtered decisions name a representative")

    tallies = (
        removed.group_by("representative_id")
        .agg((pl.col("action").cast(pl.String) == "merged_near").sum().alias("near"),
             (pl.col("action").cast(pl.String) == "dropped_exact").sum().alias("exact"))
    )
    compared = info.join(tallies, on="representative_id", how="left").with_columns(
        pl.col("near").fill_null(0), pl.col("exact").fill_null(0)
    ).filter((pl.col("near") != pl.col("near_duplicate_count"))
             | (pl.col("exact") != pl.col("exact_duplicate_count")))
    if compared.height:
        row = compared.row(0, named=True)
        out.add("counts", f"segment {row['representative_id']!r}",
                f"records {row['near_duplicate_count']} near / {row['exact_duplicate_count']} "
                f"exact duplicates, the decisions say {row['near']} / {row['exact']}")


def _check_kept_pairs(store: Store, segments: pl.DataFrame, config: Any,
                      out: _Collector) -> None:
    from ..arrays.vectors import embeddings_from, unit_rows
    from ..config import Mode

    ing = config.ingestion
    if not ing.enabled or ing.mode is not Mode.EXACT or "embedding" not in segments.columns:
        return
    emb = embeddings_from(segments)
    if emb is None or emb.dim == 0:
        return
    unit = unit_rows(emb.matrix, emb.usable)
    limit = float(ing.similarity_threshold) + TOLERANCE
    keys = _group_keys(segments)
    grouped = (
        segments.with_row_index("_row")
        .filter(pl.Series(emb.usable))
        .group_by([pl.col(k).cast(pl.String) for k in keys], maintain_order=True)
        .agg(pl.col("_row"))
        .filter(pl.col("_row").list.len() > 1)
    )
    from ..facts.rules import signatures_current

    if ing.fact_guard and not signatures_current(store.manifest):
        # Written under older rules, whose guard this code no longer has: its kept pairs
        # cannot be judged by it.
        return
    ids = segments.get_column("segment_id").cast(pl.String)
    guard = _guard_inputs(segments) if ing.fact_guard else None
    pairs = 0
    for rows_list in grouped.get_column("_row").to_list():
        rows = np.asarray(rows_list, dtype=np.int64)
        block_vectors = unit[rows]
        m = rows.size
        pairs += m * (m - 1) // 2
        for start in range(0, m, BLOCK):
            sims = block_vectors[start:start + BLOCK] @ block_vectors.T
            # Only pairs (i, j) with j > i: mask the lower triangle and the diagonal.
            local = np.arange(start, min(start + BLOCK, m))
            sims[np.arange(m)[None, :] <= local[:, None]] = -np.inf
            hit = np.argwhere(sims >= limit)
            if hit.size and guard is not None:
                hit = hit[_unrefused(rows[local[hit[:, 0]]], rows[hit[:, 1]], guard)]
            if hit.size:
                i, j = rows[local[hit[0, 0]]], rows[hit[0, 1]]
                out.add("kept-pairs", f"segments {ids[int(i)]!r} and {ids[int(j)]!r}",
                        f"both kept in one group with cosine {float(sims[tuple(hit[0])]):.6f} "
                        f">= Ingestion.SimilarityThreshold {ing.similarity_threshold}: one "
                        "should have been merged")
                break
    out.count("kept pairs", pairs)


def _guard_inputs(segments: pl.DataFrame) -> tuple[np.ndarray, ...]:
    """What the fact guard needs to re-check kept pairs: signatures, modes and each row's
    greedy rank (original salience descending, then position)."""
    from ..facts.guard import fact_modes, signatures_of

    f_off, f_val = signatures_of(segments)
    types = segments.get_column("segment_type") if "segment_type" in segments.columns else None
    sal = "salience_original" if "salience_original" in segments.columns else "salience"
    rank = segments.select(
        pl.struct(-pl.col(sal).cast(pl.Float64).fill_null(0.0),
                  pl.col("position").cast(pl.Int64)).rank("ordinal")
    ).to_series().to_numpy().astype(np.int64)
    return f_off, f_val, fact_modes(types, segments.height), rank


def _unrefused(a: np.ndarray, b: np.ndarray, guard: tuple[np.ndarray, ...]) -> np.ndarray:
    """Mask of kept pairs (a, b) that the fact guard would not have kept apart: the later of
    the two in greedy order is covered by the earlier."""
    from ..facts.guard import conflict_reasons

    f_off, f_val, modes, rank = guard
    later = np.where(rank[a] > rank[b], a, b)
    earlier = np.where(rank[a] > rank[b], b, a)
    return conflict_reasons(f_off, f_val, modes, later, earlier) == 0


def report_json(report: VerifyReport) -> str:
    """The report as JSON (for scripts)."""
    return json.dumps({
        "root": str(report.root), "run_id": report.run_id, "ok": report.ok,
        "problems": [dataclasses.asdict(p) for p in report.problems],
        "checked": report.checked, "notes": list(report.notes),
    }, indent=2)
