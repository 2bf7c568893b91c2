"""Documents to store: extract → embed (with the store's cache) → salience → dedup → write.

:func:`ingest_documents` is the path behind ``arrowdedup ingest DOCS/ --out STORE``. Each stage
is timed and the timings land in the manifest under ``stages`` (extract, embed, salience,
dedup, write), beside the skipped files and the embedding cache counts.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from . import progress
from .config import DedupConfig, resolve_config
from .embed import Embedder, embedder_record, get_embedder, recorded_spec, spec_model_name
from .embed_cache import EmbeddingCache, embed_texts
from .errors import StoreError
from .ingest import IngestionResult, ingest
from .salience import DefaultSalience, SalienceScorer
from .schema import embeddings_from
from .store import DEFAULT_BUCKETS, current_manifest, prepare_root, write_store

if TYPE_CHECKING:
    from .extract import ExtractResult

# Suffixes that are segments tables, not documents (the table path handles them).
TABLE_SUFFIXES = frozenset({".parquet", ".arrow", ".ipc", ".feather"})


def is_documents_input(path: str | Path) -> bool:
    """True when ``path`` goes through the documents pipeline (a folder or a document file);
    Parquet / Arrow IPC files are segments tables."""
    p = Path(path)
    return p.is_dir() or p.suffix.lower() not in TABLE_SUFFIXES


def check_store_model(out: str | Path, model: str, dim: int) -> None:
    """Refuse, before any embedding work, a store built with another embedding model."""
    try:
        previous = current_manifest(Path(out))
    except StoreError:
        return  # a damaged store is reported by write_store with its own message
    if previous is None:
        return
    old = previous.get("embedding") or {}
    old_model, old_dim = old.get("model"), old.get("dim")
    if old_model and old_model != model:
        raise StoreError(
            f"store {out} was built with embedding model {old_model!r}, this run uses "
            f"{model!r}; embeddings of two models must not mix (SPEC §9): re-ingest everything "
            f"into a new store, or pass the store's embedder (--embedder)"
        )
    if old_dim and old_dim != dim:
        raise StoreError(
            f"store {out} holds {old_dim}-d embeddings, the embedder {model!r} gives {dim}-d; "
            "write to a new store, or use the store's embedder"
        )


def extract_segments(
    paths: Sequence[str | Path],
    *,
    language_from_path: str | None = None,
    key_columns: Sequence[str] | None = None,
    skip_bad_files: bool = False,
    root: str | Path | None = None,
    detect_keys: bool = True,
    doc_version_from_path: str | None = None,
) -> ExtractResult:
    """Run the extractors (``doc_id`` relative to ``root``, default each folder argument)."""
    from .extract import extract_documents

    return extract_documents(
        [Path(p) for p in paths], root=root,
        key_columns=list(key_columns) if key_columns else None,
        language_from_path=language_from_path, skip_bad_files=skip_bad_files,
        detect_keys=detect_keys,
        doc_version_from_path=doc_version_from_path,
    )


def choose_embedder(out: str | Path, embedder: str | Embedder | None) -> str | Embedder:
    """The embedder of a run: the one given, else the one the store records, else MiniLM.
    A spec given by name is checked against the store before anything is loaded."""
    try:
        previous = current_manifest(Path(out))
    except StoreError:
        previous = None
    if embedder is None:
        spec = recorded_spec(previous, f"store {out}") if previous else None
        return spec or "minilm"
    if isinstance(embedder, str) and previous is not None:
        dim = (previous.get("embedding") or {}).get("dim")
        # The dimension is only known once loaded; the name check is the one that saves time.
        check_store_model(out, spec_model_name(embedder), dim or 0)
    return embedder


def with_embeddings(frame: pl.DataFrame, vectors: np.ndarray) -> pl.DataFrame:
    """``frame`` plus an ``embedding`` column of fixed-size float32 lists."""
    return frame.with_columns(pl.Series("embedding", np.ascontiguousarray(vectors, np.float32)))


def ingest_documents(
    paths: str | Path | Sequence[str | Path],
    out: str | Path,
    config: DedupConfig | None = None,
    *,
    embedder: str | Embedder | None = None,
    language_from_path: str | None = None,
    key_columns: Sequence[str] | None = None,
    skip_bad_files: bool = False,
    threads: int | None = None,
    buckets: int = DEFAULT_BUCKETS,
    quiet: bool = False,
    scorer: SalienceScorer | None = None,
    root: str | Path | None = None,
    detect_keys: bool = True,
    doc_version_from_path: str | None = None,
) -> tuple[IngestionResult, Path]:
    """Extract documents, embed them (through the store's cache), score salience when the input
    has none, dedup inside each document and write a new store version atomically.

    Returns the ingestion result and the new version directory. Refuses a store built with
    another embedding model before embedding anything. ``root``: ``doc_id`` is the path
    relative to it (default: each folder argument, or a file argument's folder).
    ``embedder=None``: the model the store records (how to load it is in its manifest), else
    MiniLM. ``doc_version_from_path``: e.g. ``"docs/v{version}/**"`` fills ``doc_version``.
    """
    cfg = resolve_config(config)
    inputs = [paths] if isinstance(paths, (str, Path)) else list(paths)
    stages: dict[str, float] = {}
    store_root = Path(out)
    prepare_root(store_root)
    embedder = choose_embedder(store_root, embedder)

    start = time.perf_counter()
    with progress.spinner("extracting", quiet=quiet):
        extracted = extract_segments(inputs, language_from_path=language_from_path,
                                     key_columns=key_columns, skip_bad_files=skip_bad_files,
                                     root=root, detect_keys=detect_keys,
                                     doc_version_from_path=doc_version_from_path)
    frame = extracted.segments
    stages["extract"] = time.perf_counter() - start

    start = time.perf_counter()
    with progress.spinner("loading the embedder", quiet=quiet):
        model = get_embedder(embedder)
    if isinstance(embedder, str):
        stages["embedder_load"] = time.perf_counter() - start
    check_store_model(store_root, model.name, model.dim)

    start = time.perf_counter()
    cache = EmbeddingCache(store_root / "cache", model.name, model.dim)
    vectors, cache_stats = embed_texts(frame.get_column("text").to_arrow(), model, cache,
                                       quiet=quiet)
    frame = with_embeddings(frame.drop("embedding", strict=False), vectors)
    stages["embed"] = time.perf_counter() - start

    start = time.perf_counter()
    if "salience" not in frame.columns:
        # A user salience column always wins; otherwise SPEC §3's scorer, on these embeddings.
        scorer = scorer or DefaultSalience(cfg.ingestion.salience_threshold)
        values = scorer.score(frame, embeddings_from(frame))
        frame = frame.with_columns(pl.Series("salience", values, dtype=pl.Float32))
    stages["salience"] = time.perf_counter() - start

    start = time.perf_counter()
    with progress.spinner("deduplicating", quiet=quiet):
        result = ingest(frame, cfg, threads=threads)
    stages["dedup"] = time.perf_counter() - start

    # write_store copies ``extra`` into the manifest after the data files and hooks are
    # written, so a hook can record the write time into the dict it will copy.
    write_start = time.perf_counter()

    def _time_write(_version_dir: Path, _kept: pl.DataFrame) -> None:
        stages["write"] = time.perf_counter() - write_start

    extra = {
        "stages": stages,
        "skipped_files": [dataclasses.asdict(f) for f in extracted.skipped],
        "extract": {k: v for k, v in extracted.manifest().items() if k != "skipped_files"},
        "embedding_cache": cache_stats.to_dict(),
        "embedder": embedder_record(model),
        "source": "documents",
    }
    with progress.spinner("writing the store", quiet=quiet):
        version = write_store(result, store_root, buckets=buckets,
                              inputs=[str(p) for p in inputs], embedding_model=model.name,
                              extra=extra, hooks=[_time_write])
    stages["write"] = time.perf_counter() - write_start
    result.timings.update({f"stage_{k}": v for k, v in stages.items()})
    return result, version

