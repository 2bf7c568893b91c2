"""Documents into segments for a job: extract, embed (with the store's embedding cache) and
stream them to the job as Arrow batches.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from .. import progress
from ..errors import InputError, StoreError
from ..store import (
    current_manifest,
)
from .inputs import BatchStream

if TYPE_CHECKING:
    from ..embed.embedders import Embedder
    from ..extract.limits import ExtractLimits
    from ..extract.options import ExtractOptions


def check_store_model(out: str | Path, model: str, dim: int) -> None:
    """Refuse, before any embedding work, a store built with another embedding model."""
    try:
        previous = current_manifest(Path(out))
    except StoreError:
        return  # a damaged store is reported by the writer with its own message
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
    limits: ExtractLimits | None = None,
    follow_external_symlinks: bool = False,
) -> Any:
    """Run the extractors (``doc_id`` relative to ``root``, default each folder argument)."""
    from ..extract import extract_documents

    return extract_documents(
        [Path(p) for p in paths], root=root,
        key_columns=list(key_columns) if key_columns else None,
        language_from_path=language_from_path, skip_bad_files=skip_bad_files,
        detect_keys=detect_keys, doc_version_from_path=doc_version_from_path, limits=limits,
        follow_external_symlinks=follow_external_symlinks,
    )


def refuse_embedder_for_tables(embedder: str | Embedder | None) -> None:
    """A segments table is never embedded (SPEC §3), so an embedder given with one would be
    silently unused: its near duplicates would go unseen while the run looked embedded."""
    if embedder is not None:
        raise InputError(
            "an embedder embeds document files only; a segments table is never embedded "
            "(rows without an embedding get exact dedup only): add an 'embedding' column and "
            "name its model with --embedding-model (embedding_model=), or ingest the document "
            "files instead")


def choose_embedder(out: str | Path, embedder: str | Embedder | None) -> str | Embedder:
    """The embedder of a run: the one given, else the one the store records (MiniLM on the
    store's runtime), else MiniLM. A spec given by name is checked against the store before
    anything is loaded."""
    from ..embed.embedders import recorded_spec, spec_model_name

    try:
        previous = current_manifest(Path(out))
    except StoreError:
        previous = None
    if embedder is None:
        spec = recorded_spec(previous, f"store {out}", same_runtime=True) if previous else None
        return spec or "minilm"
    if isinstance(embedder, str) and previous is not None:
        dim = (previous.get("embedding") or {}).get("dim")
        # The dimension is only known once loaded; the name check is the one that saves time.
        check_store_model(out, spec_model_name(embedder), dim or 0)
    return embedder


def with_embeddings(frame: pl.DataFrame, vectors: np.ndarray) -> pl.DataFrame:
    """``frame`` plus an ``embedding`` column of fixed-size float32 lists."""
    return frame.with_columns(pl.Series("embedding", np.ascontiguousarray(vectors, np.float32)))


@dataclasses.dataclass
class Documents:
    """Extracted and embedded documents: the segments (without embeddings), the vectors of
    their distinct embedding texts and each row's index into them (``vectors[inverse]``),
    the model name and the manifest extras."""

    frame: pl.DataFrame
    vectors: np.ndarray
    inverse: np.ndarray
    model: str
    extra: dict[str, Any]

    def table(self) -> pl.DataFrame:
        """The segments table with its ``embedding`` column."""
        return with_embeddings(self.frame, self.vectors[self.inverse])

    def table_bytes(self) -> int:
        """About what the segments table with its embeddings takes in memory."""
        row = self.vectors.shape[1] * self.vectors.itemsize
        return int(self.frame.estimated_size()) + self.inverse.size * row


def load_documents(
    inputs: Sequence[Path], store_root: Path, *, embedder: str | Embedder | None,
    extract: ExtractOptions, quiet: bool, timings: dict[str, float],
) -> Documents:
    """Extract (as ``extract`` says) and embed documents (through the store's embedding
    cache)."""
    from ..embed.cache import EmbeddingCache, embed_distinct
    from ..embed.embedders import embedder_record, embedder_runtime, get_embedder
    from . import precompile

    embedder = choose_embedder(store_root, embedder)
    precompile.for_extract(inputs, timings, quiet=quiet)
    start = time.perf_counter()
    with progress.spinner("extracting", quiet=quiet):
        extracted = extract_segments(
            inputs, language_from_path=extract.language_from_path,
            key_columns=extract.key_columns, skip_bad_files=extract.skip_bad_files,
            root=extract.root, detect_keys=extract.detect_keys,
            doc_version_from_path=extract.doc_version_from_path, limits=extract.limits,
            follow_external_symlinks=extract.follow_external_symlinks)
    frame = extracted.segments.drop("embedding", strict=False)
    timings["extract"] = timings.get("extract", 0.0) + time.perf_counter() - start

    start = time.perf_counter()
    with progress.spinner("loading the embedder", quiet=quiet):
        model = get_embedder(embedder)
    if isinstance(embedder, str):
        timings["embedder_load"] = timings.get("embedder_load", 0.0) + \
            time.perf_counter() - start
    start = time.perf_counter()  # the embed stage is the embedding alone, not the load
    check_store_model(store_root, model.name, model.dim)
    cache = EmbeddingCache(store_root / "cache", model.name, model.dim,
                           runtime=embedder_runtime(model))
    code = frame.get_column("segment_type").cast(pl.String).eq("code").fill_null(False)
    vectors, inverse, cache_stats = embed_distinct(
        frame.get_column("text").to_arrow(), model, cache=cache, quiet=quiet,
        verbatim=code.to_numpy())
    timings["embed"] = timings.get("embed", 0.0) + time.perf_counter() - start
    extra = {
        "skipped_files": [dataclasses.asdict(f) for f in extracted.skipped],
        "extract": {k: v for k, v in extracted.manifest().items() if k != "skipped_files"},
        "embedding_cache": cache_stats.to_dict(),
        "embedder": embedder_record(model),
        "source": "documents",
    }
    return Documents(frame, vectors, inverse, model.name, extra)


def documents_stream(docs: Documents) -> BatchStream:
    """``docs`` as Arrow batches with their embeddings gathered batch by batch. The stream
    takes ``docs``' data over: it is released as the stream is consumed, the caller keeps
    no reference. The batches carry exactly the schema :func:`with_embeddings` gives, so a
    streamed run writes the same store as one held in memory."""
    frame, vectors, inverse = docs.frame, docs.vectors, docs.inverse
    docs.frame, docs.vectors, docs.inverse = frame.clear(), np.empty((0, 0)), np.empty(0)
    dim = vectors.shape[1]
    head = with_embeddings(frame.head(0), np.zeros((0, dim), np.float32)).to_arrow()
    field = head.schema.field("embedding")
    # Converted slice by slice (a whole-frame conversion held a second copy of every text
    # beside the frame), unless a column is dictionary-encoded (a passthrough table's
    # categorical): the partition files take one dictionary per column.
    whole = frame.to_arrow() if any(pa.types.is_dictionary(t) for t in head.schema.types) \
        else None
    schema = (whole.schema if whole is not None else head.schema.remove(
        head.schema.get_field_index("embedding"))).append(field)

    def batches(frame: pl.DataFrame, whole: pa.Table | None, vectors: np.ndarray,
                inverse: np.ndarray) -> Iterator[pa.RecordBatch]:
        for start in range(0, frame.height, DOCUMENTS_BATCH):
            part = frame.slice(start, DOCUMENTS_BATCH).to_arrow() if whole is None \
                else whole.slice(start, DOCUMENTS_BATCH)
            rows = inverse[start: start + part.num_rows]
            values = pa.array(vectors[rows].reshape(-1), type=field.type.value_type)
            column = pa.FixedSizeListArray.from_arrays(values, type=field.type)
            columns = [part.column(i).combine_chunks() for i in range(part.num_columns)]
            yield pa.RecordBatch.from_arrays([*columns, column], schema=schema)

    return BatchStream(schema, batches(frame, whole, vectors, inverse), frame.height)


# Rows of a streamed documents batch. Each batch is built (its texts converted, its vectors
# gathered) while the previous one is still being partitioned, beside every segment and
# vector of the run: at PARTITION_BATCH (64k) rows that phase peaked at 1.60 GB for the
# corpus + four large files run of benchmarks/hostile_input, at 16k rows 1.36 GB. The batch
# size does not reach the store: a bucket is read back as one table.
DOCUMENTS_BATCH = 16 * 1024
