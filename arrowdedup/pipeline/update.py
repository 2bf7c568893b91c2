"""A store's life through the job path: update it, delete from it, compact it.

- :func:`update_store` (``arrowdedup ingest INPUT --out STORE --update``): documents of the
  input replace theirs by ``doc_id``; a document whose input rows are byte-equal (its
  fingerprint, :mod:`arrowdedup.store.fingerprint`) is not touched; new documents are added;
  documents absent from the input stay unless ``delete_missing``. Only the new and changed
  documents are deduplicated (dedup is per document, so nothing else can change) and written
  as one delta layer (:mod:`arrowdedup.store.delta`).
- :func:`delete_documents` (``arrowdedup delete``): a delta of tombstones only.
- :func:`compact_store` (``arrowdedup compact``): folds the deltas into a fresh base.
- :func:`prune` (``arrowdedup prune``): folds the current version's deltas (as compact does)
  and removes all but the newest versions, so the rows the deltas replaced leave the disk.

Each returns the job path's :class:`arrowdedup.pipeline.run.JobResult`; ``changes`` on it counts the
documents added, changed, removed and unchanged, and ``dry_run`` says nothing was written.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from ..config import DedupConfig
from ..errors import InputError, SchemaError, StoreError
from ..extract.options import ExtractOptions
from ..store import DEFAULT_BUCKETS, Store, StoreWriter, bucket_of, encode_bucket, open_store
from ..store.delta import DeltaWriter
from ..store.encode import parquet_bytes
from ..store.fingerprint import FINGERPRINT_KIND, document_fingerprints, empty_fingerprints
from ..store.layout import FINGERPRINTS, HISTORY, KEEP_VERSIONS, UPDATABLE_FORMAT, part_file
from ..store.reader import reads_store
from .bucket import default_indexes
from .documents import load_documents, refuse_embedder_for_tables
from .inputs import Source, is_documents_input
from .options import RunOptions, with_legacy
from .run import JobResult, as_inputs, result_timings

if TYPE_CHECKING:
    from ..dedup.salience import SalienceScorer
    from ..embed.embedders import Embedder

__all__ = ["Plan", "PruneResult", "compact_store", "delete_documents", "prune", "update_store"]

COUNT_COLUMNS = ("original_count", "final_count", "exact_count", "near_count",
                 "filtered_count")


@dataclasses.dataclass(frozen=True)
class Plan:
    """What an update or delete changes, by doc_id (each list sorted)."""

    added: list[str]
    changed: list[str]
    removed: list[str]
    unchanged: int

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed)

    def counts(self) -> dict[str, int]:
        return {"added": len(self.added), "changed": len(self.changed),
                "removed": len(self.removed), "unchanged": self.unchanged}

    def changes_frame(self) -> pl.DataFrame:
        rows = [(d, "added") for d in self.added] + [(d, "changed") for d in self.changed] \
            + [(d, "removed") for d in self.removed]
        rows.sort()
        return pl.DataFrame({"doc_id": [r[0] for r in rows], "change": [r[1] for r in rows]},
                            schema={"doc_id": pl.String, "change": pl.String})


def _refuse_replace(store: Store, why: str) -> StoreError:
    return StoreError(f"store {store.root}: {why}; a store never mixes them: pass --replace "
                      "to rebuild it from this input (or write to a new store)")


def check_updatable(store: Store) -> None:
    """Refuse an update of a store written before deltas existed."""
    fmt = int(store.manifest.get("format_version") or 0)
    if fmt < UPDATABLE_FORMAT or not store.manifest.get("fingerprints"):
        raise _refuse_replace(store, f"it was written by an older arrowdedup (format {fmt}, "
                                     "no document fingerprints) and cannot take an update")


def check_same_rules(store: Store, cfg: DedupConfig, *, model: str | None,
                     extract_options: dict[str, Any] | None) -> None:
    """Refuse an update whose rules, config, embedder or extraction options differ from the
    store's."""
    from ..facts.rules import RULES_VERSION

    if store.manifest.get("rules") != RULES_VERSION:
        raise _refuse_replace(store, f"it was decided under rules version "
                                     f"{store.manifest.get('rules')!r}, this arrowdedup "
                                     f"decides under {RULES_VERSION!r}")
    # Compared as parsed, so a key added since the store was written counts at its default.
    new = cfg.to_dict()["Deduplication"]
    old = store.config.to_dict()["Deduplication"]
    if new != old:
        keys = sorted(f"{section}.{key}" for section in new
                      for key in set(new[section]) | set(old.get(section) or {})
                      if new[section].get(key) != (old.get(section) or {}).get(key))
        raise _refuse_replace(store, f"this update's config differs from the store's "
                                     f"(in {', '.join(keys) or 'its values'})")
    old_model = store.embedding_model
    if model is not None and old_model is not None and model != old_model:
        raise _refuse_replace(store, f"this update's embedder {model!r} differs from the "
                                     f"store's {old_model!r}")
    recorded = store.manifest.get("extract_options")
    if extract_options is not None and recorded is not None and recorded != extract_options:
        raise _refuse_replace(store, f"this update's extraction options {extract_options} "
                                     f"differ from the store's {recorded}")


def check_same_runtime(store: Store, embedder: Any) -> None:
    """Refuse an update whose embedder computes on another runtime than the store's (MiniLM
    on ONNX Runtime against torch): their vectors differ by float noise, and an update must
    equal a full ingest."""
    from ..embed.embedders import embedder_runtime, recorded_runtime

    new = embedder_runtime(embedder)
    old = recorded_runtime(store.manifest)
    if new is not None and old is not None and new != old:
        raise _refuse_replace(store, f"it was embedded on the {old} runtime, this update's "
                                     f"embedder runs on {new} (--embedder minilm:{old} keeps "
                                     "the store's)")


def corpus_rows(store: Store, plan: Plan, new_rows: int) -> int:
    """Segments a full ingest of the corpus after ``plan`` would read: the store's documents
    that stay as they are, plus ``new_rows`` (the added and changed documents' rows)."""
    gone = [*plan.changed, *plan.removed]
    kept = (store.documents().select("doc_id", "original_count")
            .filter(~pl.col("doc_id").cast(pl.String).is_in(gone))
            .select(pl.col("original_count").sum()).collect().item())
    return int(kept or 0) + new_rows


def plan_update(store: Store, fps: pl.DataFrame, *, delete_missing: bool,
                present: Sequence[str] = ()) -> Plan:
    """Compare the input's document fingerprints with the store's; ``present``: documents of
    the input known unchanged without being read (their files did not change)."""
    stored = store.fingerprints()
    old = stored.collect() if stored is not None else empty_fingerprints()
    if store.manifest.get("fingerprints") != FINGERPRINT_KIND:
        # Fingerprints of another Polars version cannot be compared: every document counts
        # as changed (correct, only slower).
        old = old.with_columns(pl.lit(0, pl.UInt64).alias("fp_a"),
                               pl.lit(0, pl.UInt64).alias("fp_b"), pl.lit(0, pl.UInt32)
                               .alias("rows"))
    joined = fps.join(old, on="doc_id", how="full", suffix="_old", coalesce=True)
    is_new = pl.col("fp_a_old").is_null()
    is_gone = pl.col("fp_a").is_null()
    same = (pl.col("fp_a") == pl.col("fp_a_old")) & (pl.col("fp_b") == pl.col("fp_b_old")) \
        & (pl.col("rows") == pl.col("rows_old"))
    ids = pl.col("doc_id")
    added = joined.filter(is_new).get_column("doc_id").sort().to_list()
    changed = joined.filter(~is_new & ~is_gone & ~same).get_column("doc_id").sort().to_list()
    kept = set(present)
    removed = [d for d in joined.filter(is_gone).get_column("doc_id").sort().to_list()
               if d not in kept] if delete_missing else []
    unchanged = joined.filter(~is_new & ~is_gone & same).select(ids).height + len(kept)
    return Plan(added, changed, removed, unchanged)


def _input_table(
    store: Store, source: Source, timings: dict[str, float], *, embedder: Any,
    quiet: bool, extract: ExtractOptions, allow_moved_sources: bool = False,
) -> tuple[pa.Table, str | None, dict[str, Any]]:
    """The update's input as one segments table (documents are extracted and embedded through
    the store's cache), the embedding model, and the manifest extras it brings."""
    from ..schema import read_table_file

    tables, paths = as_inputs(source)
    if paths and any(is_documents_input(p) for p in paths):
        for p in paths:
            if not p.exists():
                raise InputError(f"input {p} does not exist; check the path")
        recorded = store.manifest.get("source_files")
        if recorded is None:  # no file record: extract everything
            docs = load_documents(
                paths, store.root, embedder=embedder, extract=extract, quiet=quiet,
                timings=timings)
            return docs.table().to_arrow(), docs.model, docs.extra
        return _changed_files_table(store, paths, recorded, timings, embedder=embedder,
                                    quiet=quiet, extract=extract,
                                    allow_moved_sources=allow_moved_sources)
    refuse_embedder_for_tables(embedder)
    if paths:
        tables = [read_table_file(p) for p in paths]
    if not tables:
        raise InputError("no input given; pass a segments table or files")
    try:
        table = pa.concat_tables(tables, promote_options="none") if len(tables) > 1 \
            else tables[0]
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise SchemaError(f"the inputs do not share one schema ({err}); write them with the "
                          "same columns and types") from err
    return table, None, {}


def _changed_files_table(
    store: Store, paths: list[Path], recorded: dict[str, Any], timings: dict[str, float], *,
    embedder: Any, quiet: bool, extract: ExtractOptions, allow_moved_sources: bool = False,
) -> tuple[pa.Table, str | None, dict[str, Any]]:
    """Extract and embed only the files whose size, mtime or hash changed since the store
    recorded them; the documents of the others are reported as present and unchanged.
    Refuses, before anything is read, to take a document of the store from another file than
    the recorded one, unless ``allow_moved_sources``."""
    from ..extract.discover import discover_files
    from ..extract.sheets import SHEET_FORMATS
    from ..store.source_files import file_records, forget_moved, moved_summary, split_files

    live = set(store.documents().select(pl.col("doc_id").cast(pl.String)).collect()
               .get_column("doc_id").to_list())
    found = discover_files(list(paths), extract.root,
                           follow_external_symlinks=extract.follow_external_symlinks)
    split = split_files(found, recorded, live, sheet_formats=SHEET_FORMATS)
    if split.moved and not allow_moved_sources:
        raise StoreError(
            f"store {store.root}: {moved_summary(split.moved)}; nothing was changed: check "
            "that INPUT is the folder the store was built from, or pass "
            "--allow-moved-sources (allow_moved_sources=True) if the files moved")
    frames: list[pl.DataFrame] = []
    records = {k: dict(v) for k, v in recorded.items() if k not in split.seen}
    records.update(split.unchanged)
    forget_moved(records, split.moved)
    model: str | None = None
    extra: dict[str, Any] = {}
    n_files = 0
    for base, files in sorted(split.changed.items()):
        docs = load_documents(files, store.root, embedder=embedder, quiet=quiet, timings=timings,
                              extract=dataclasses.replace(extract, root=base))
        frame, model, extra = docs.table(), docs.model, docs.extra
        records.update(file_records(discover_files(list(files), base),
                                    frame.get_column("doc_id").cast(pl.String).unique().to_list()))
        frames.append(frame)
        n_files += len(files)
    extra = {**extra, "source_files": records, "present": sorted(split.unchanged_ids),
             "moved_sources": len(split.moved),
             "extract": {**(extra.get("extract") or {}), "files": n_files}}
    if not frames:
        return pa.table({"doc_id": pa.array([], pa.string())}), model, extra
    return pl.concat(frames, how="diagonal_relaxed").to_arrow(), model, extra


def _check_ids(store: Store, frame: pl.DataFrame, subset: pl.DataFrame) -> None:
    """segment_id stays unique across the store: the input's, and the new rows' against the
    documents the update leaves as they are."""
    if "segment_id" not in frame.columns or "doc_id" not in frame.columns:
        raise SchemaError("required columns 'doc_id' and 'segment_id' are missing; add them")
    ids = frame.get_column("segment_id").cast(pl.String)
    if ids.is_duplicated().any():
        dup = ids.filter(ids.is_duplicated()).unique().sort().head(5).to_list()
        raise SchemaError(f"column 'segment_id' has duplicate values across documents "
                          f"(first: {dup}); make segment_id unique in the whole input")
    if subset.height == 0:
        return
    clash = (store.decisions().select(pl.col("doc_id").cast(pl.String),
                                      pl.col("segment_id").cast(pl.String))
             .filter(~pl.col("doc_id").is_in(frame.get_column("doc_id").cast(pl.String)
                                             .unique().to_list()))
             .filter(pl.col("segment_id").is_in(subset.get_column("segment_id")
                                                .cast(pl.String).to_list()))
             .select("segment_id").unique().sort("segment_id").head(5).collect())
    if clash.height:
        raise SchemaError(f"segment_id values {clash.get_column('segment_id').to_list()} "
                          "already belong to other documents of the store; make segment_id "
                          "unique across the store")


def _counts(parent: Store, plan: Plan, documents: pl.DataFrame | None) -> dict[str, int]:
    dead = [*plan.changed, *plan.removed]
    old = parent.documents().select(pl.col("doc_id").cast(pl.String), *COUNT_COLUMNS) \
        .filter(~pl.col("doc_id").is_in(dead)).collect()
    frames = [old]
    if documents is not None and documents.height:
        frames.append(documents.select(pl.col("doc_id").cast(pl.String), *COUNT_COLUMNS))
    docs = pl.concat(frames, how="vertical_relaxed")
    s = {c: int(docs.get_column(c).sum()) if docs.height else 0 for c in COUNT_COLUMNS}
    return {"documents": docs.height, "segments_in": s["original_count"],
            "segments_kept": s["final_count"], "kept": s["final_count"],
            "dropped_exact": s["exact_count"], "merged_near": s["near_count"],
            "filtered_low_salience": s["filtered_count"]}


def _result(store: Store, timings: dict[str, float], cfg: DedupConfig, plan: Plan,
            start: float, *, dry_run: bool = False) -> JobResult:
    timings["total"] = time.perf_counter() - start
    return JobResult(store, result_timings(timings), cfg, changes=plan.counts(), dry_run=dry_run,
                     change_ids={"added": tuple(plan.added), "changed": tuple(plan.changed),
                                 "removed": tuple(plan.removed)})


@reads_store
def update_store(
    store: str | Path | Store,
    inputs: Source,
    *,
    config: DedupConfig | None = None,
    delete_missing: bool = False,
    dry_run: bool = False,
    embedder: str | Embedder | None = None,
    embedding_model: str | None = None,
    extract: ExtractOptions | None = None,
    run: RunOptions | None = None,
    scorer: SalienceScorer | None = None,
    allow_moved_sources: bool = False,
    **legacy: object,
) -> JobResult:
    """Bring ``inputs`` into the store as one delta version (see the module); ``config``
    defaults to the store's own. Refuses (naming ``--replace``) a store written before
    deltas, and a config, embedder or extraction options other than the store's. Refuses too
    (naming ``--allow-moved-sources``) a document file at another path than the one the store
    recorded for that document (another folder's file of the same doc_id, a moved
    checkout), unless ``allow_moved_sources``. ``extract`` and ``run`` as for
    ``ingest_to_store`` (of ``run``, an update uses ``threads``, ``keep_versions`` and
    ``quiet``, which defaults to True here); the old keywords warn, as there."""
    ex, ro = with_legacy("update_store", legacy, extract, run,
                         run_keywords=("threads", "keep_versions", "quiet"),
                         default_run=RunOptions(quiet=True))
    threads, keep_versions, quiet = ro.threads, ro.keep_versions, ro.quiet
    from ..arrays.vectors import input_rows
    from ..dedup.ingest import ingest, numba_threads
    from . import precompile

    start = time.perf_counter()
    timings: dict[str, float] = {}
    current = open_store(store)
    check_updatable(current)
    cfg = current.config if config is None else config
    options = {"language_from_path": ex.language_from_path,
               "key_columns": list(ex.key_columns) if ex.key_columns else None,
               "skip_bad_files": ex.skip_bad_files, "root": str(ex.root) if ex.root else None,
               "detect_keys": ex.detect_keys, "doc_version_from_path": ex.doc_version_from_path}
    check_same_rules(current, cfg, model=embedding_model, extract_options=None)
    check_same_runtime(current, embedder)
    _, paths = as_inputs(inputs)
    if paths and any(is_documents_input(p) for p in paths):
        check_same_rules(current, cfg, model=None, extract_options=extraction_record(options))
    t = time.perf_counter()
    before = sum(timings.values())  # the extraction's own stages are timed inside
    table, model, extra = _input_table(
        current, inputs, timings, embedder=embedder, quiet=quiet,
        extract=ex,
        allow_moved_sources=allow_moved_sources)
    check_same_rules(current, cfg, model=model or embedding_model, extract_options=None)
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    if "doc_id" not in frame.columns:
        raise SchemaError("required column 'doc_id' is missing; add it (the partition key)")
    fps = document_fingerprints(frame)
    # Opening the input and fingerprinting its documents is this update's partitioning.
    timings["partition"] = time.perf_counter() - t - (sum(timings.values()) - before)
    present = list(extra.pop("present", []))
    moved = int(extra.pop("moved_sources", 0))
    if dry_run:
        return _result(current, timings, cfg, plan_update(
            current, fps, delete_missing=delete_missing, present=present), start, dry_run=True)
    current.close()
    # The delta's BM25 build (parallel lower-casing, scoring and merge) keeps to `threads`
    # as the ingest does: one thread means one thread.
    with (numba_threads(threads),
          DeltaWriter(current.root, keep_versions=keep_versions,
                      indexes=default_indexes()) as writer):
        parent = writer.parent
        assert parent is not None
        t = time.perf_counter()
        plan = plan_update(parent, fps, delete_missing=delete_missing, present=present)
        # Nothing to write, the current version stays; unless files moved (allowed): their
        # new paths are recorded in a version without document changes.
        if plan.empty and not moved:
            timings["partition"] += time.perf_counter() - t
            return _result(open_store(parent.root), timings, cfg, plan, start)
        todo = pl.Series([*plan.added, *plan.changed], dtype=pl.String)
        subset = frame.filter(pl.col("doc_id").cast(pl.String).is_in(todo.to_list()))
        _check_ids(parent, frame, subset)
        timings["partition"] += time.perf_counter() - t
        # Size-dependent choices (jitted kernel or twin) are made as for a full ingest of the
        # corpus after this update, not for this input: the kernel and the NumPy twin may
        # differ in a similarity's last bits, and an update must equal a full ingest.
        full_rows = corpus_rows(parent, plan, subset.height)
        precompile.for_update(subset, full_rows, cfg, threads, timings, quiet=quiet)
        t = time.perf_counter()
        result = None
        if subset.height:
            with input_rows(full_rows):
                result = ingest(subset, cfg, threads=threads, scorer=scorer)
            dim = parent.embedding_dim
            if dim and result.embedding_dim and dim != result.embedding_dim:
                raise _refuse_replace(parent, f"this update's embeddings are "
                                              f"{result.embedding_dim}-d, the store's {dim}-d")
            for key, value in result.timings.items():
                timings[key] = timings.get(key, 0.0) + value
        writer.write(result=result, inputs=subset, tombstones=[*plan.changed, *plan.removed],
                     changes=plan.changes_frame())
        timings["buckets"] = time.perf_counter() - t  # one bucket: the layer's rows
        life = {k: v for k, v in plan.counts().items() if k != "unchanged"}
        embedding = dict(parent.manifest.get("embedding") or {})
        if result is not None and result.embedding_dim and not embedding.get("dim"):
            embedding["dim"] = result.embedding_dim
        writer.commit(counts=_counts(parent, plan, result.documents if result else None),
                      life=life, timings=timings, started=start,
                      extra={"embedding": embedding,
                             **{k: v for k, v in extra.items()
                                if k in ("embedding_cache", "source_files", "extract")}})
    timings.update({k: timings.get(k, 0.0) + v for k, v in writer.timings.items()})
    return _result(open_store(current.root), timings, cfg, plan, start)


def extraction_record(extract: dict[str, Any]) -> dict[str, Any]:
    """The extraction options a store records (and an update must repeat)."""
    return {k: extract.get(k) for k in ("language_from_path", "key_columns", "detect_keys",
                                        "doc_version_from_path")}


@reads_store
def delete_documents(
    store: str | Path | Store, doc_ids: Iterable[str], *, dry_run: bool = False,
    keep_versions: int = KEEP_VERSIONS,
) -> JobResult:
    """Remove documents by id as one delta version; an id the store does not hold is an
    error naming it, and nothing is deleted."""
    start = time.perf_counter()
    wanted = sorted({str(d) for d in doc_ids})
    if not wanted:
        raise InputError("no doc_id given; name the documents to delete (or --from-file F)")
    current = open_store(store)
    check_updatable(current)

    def plan_of(st: Store) -> Plan:
        live = set(st.documents().select(pl.col("doc_id").cast(pl.String)).collect()
                   .get_column("doc_id").to_list())
        unknown = [d for d in wanted if d not in live]
        if unknown:
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise StoreError(f"store {st.root} has no document {unknown[0]!r}"
                             + (f" (unknown: {unknown[:5]}{more})" if len(unknown) > 1 else "")
                             + "; nothing was deleted: check the ids (`arrowdedup stats` or "
                             "the documents view lists them)")
        return Plan([], [], wanted, len(live) - len(wanted))

    timings: dict[str, float] = {}
    if dry_run:
        return _result(current, timings, current.config, plan_of(current), start, dry_run=True)
    current.close()
    with DeltaWriter(current.root, keep_versions=keep_versions) as writer:
        assert writer.parent is not None
        t = time.perf_counter()
        plan = plan_of(writer.parent)
        timings["partition"] = time.perf_counter() - t
        t = time.perf_counter()
        writer.write(result=None, inputs=None, tombstones=plan.removed,
                     changes=plan.changes_frame())
        timings["buckets"] = time.perf_counter() - t
        writer.commit(counts=_counts(writer.parent, plan, None),
                      life={"added": 0, "changed": 0, "removed": len(plan.removed)},
                      timings=timings, started=start)
        cfg = writer.parent.config
    timings.update({k: timings.get(k, 0.0) + v for k, v in writer.timings.items()})
    return _result(open_store(current.root), timings, cfg, plan, start)


@reads_store
def compact_store(store: str | Path | Store, *, keep_versions: int = KEEP_VERSIONS
                  ) -> JobResult:
    """Fold the current version's deltas into one base, written as a new version (the same
    data, row for row); a version without deltas is left as it is."""
    start = time.perf_counter()
    current = open_store(store)
    cfg = current.config
    empty = Plan([], [], [], 0)
    if not current.is_layered:
        return _result(current, {}, cfg, empty, start)
    check_updatable(current)
    m = current.manifest
    buckets = int(m.get("buckets") or DEFAULT_BUCKETS)
    carried = ("fingerprints", "extract_options", "source", "embedder", "input_key", "engine",
               "source_files", "rules")
    keep: dict[str, Any] = {k: m[k] for k in carried if k in m}
    builders = default_indexes()
    writer = StoreWriter(current.root, buckets=buckets, config=cfg, inputs=m.get("inputs", []),
                         embedding_model=current.embedding_model, indexes=builders,
                         keep_versions=keep_versions,
                         extra={**keep, "life": {"added": 0, "changed": 0, "removed": 0},
                                "compacted_from": current.run_id})
    # The folded layers' change lists are carried, so the `changes` view keeps the history.
    history = current.change_history()
    seqs = history.get_column("seq").to_numpy()
    writer.extra["history_layers"] = int(seqs.max()) + 1 if seqs.size else \
        current.history_offset()
    t = time.perf_counter()
    kept = current.segments().collect()
    decisions = current.decisions().collect()
    documents = current.documents().collect()
    fps_lf = current.fingerprints()
    fps = fps_lf.collect() if fps_lf is not None else empty_fingerprints()
    dim = current.embedding_dim
    current.close()

    def split(frame: pl.DataFrame) -> list[np.ndarray]:
        b = bucket_of(frame.get_column("doc_id").cast(pl.String).to_arrow(), buckets)
        order = np.argsort(b, kind="stable")
        bounds = np.searchsorted(b[order], np.arange(buckets + 1))
        return [order[bounds[i]:bounds[i + 1]] for i in range(buckets)]

    parts = [split(f) for f in (kept, decisions, documents, fps)]
    # Reading the current version and splitting it into buckets is this run's partitioning.
    timings = {"partition": time.perf_counter() - t}
    with writer:
        t = time.perf_counter()
        written = 0
        for b in range(buckets):
            k, d, doc, fp = (p[b] for p in parts)
            if d.size == 0 and not (b == buckets - 1 and written == 0):
                continue
            out = encode_bucket(b, kept[k], decisions[d], documents[doc], dim, builders)
            for key, value in out.timings.items():
                timings[key] = timings.get(key, 0.0) + value
            fp_frame = fps[fp]
            out.files.append((part_file(FINGERPRINTS, b),
                              parquet_bytes(fp_frame.to_arrow()), fp_frame.height))
            writer.add(out)
            written += 1
        writer.add_file(HISTORY, parquet_bytes(history.to_arrow()), history.height)
        timings["buckets"] = time.perf_counter() - t
        writer.commit(timings=timings, started=start)
    timings.update({k: timings.get(k, 0.0) + v for k, v in writer.timings.items()})
    return _result(open_store(current.root), timings, cfg, empty, start)


@dataclasses.dataclass(frozen=True)
class PruneResult:
    """What :func:`prune` did (or, with ``dry_run``, would do): the version ids ``removed``,
    those ``held`` by a reader (removed by a later prune), and the compacted version written
    by folding the current version's ``folded_deltas`` deltas (``folded``; ``None`` when
    there was nothing to fold or with ``dry_run``)."""

    removed: list[str]
    held: list[str]
    folded: str | None
    folded_deltas: int
    dry_run: bool = False


def prune(store: str | Path | Store, *, keep: int = KEEP_VERSIONS, fold: bool = True,
          dry_run: bool = False) -> PruneResult:
    """Remove all but the newest ``keep`` versions (never the current one, never one a
    reader holds open). With ``fold`` (the default) the current version's deltas are first
    folded into a compacted version, which becomes current: a delta keeps the rows it
    replaced on disk for as long as its base is kept, so pruning alone would not give them
    back."""
    from ..store.lock import store_lock
    from ..store.versions import check_keep, prune_plan, remove_versions, version_dirs

    root = Path(store.root if isinstance(store, Store) else store)
    check_keep(keep)  # before a fold, not only at the removal
    current = open_store(root)
    deltas = len(current.layers()) - 1 if fold else 0
    current.close()
    if dry_run:
        plan_remove, plan_held = prune_plan(root, keep, folding=bool(deltas))
        return PruneResult([p.name for p in plan_remove], [p.name for p in plan_held], None,
                           deltas, dry_run=True)
    folded = None
    if deltas:
        # The writer removes nothing itself here: the removal below reports what it held.
        folded = compact_store(root, keep_versions=len(version_dirs(root)) + 1).version_id
    with store_lock(root):
        removed, held = remove_versions(root, keep)
    return PruneResult(removed, held, folded, deltas)
