"""The embedding cache of a store: vectors keyed by (model name, runtime, XXH64 of the text
the embedder read: its :mod:`~arrowdedup.embed.view`).

Layout (inside the store root, kept across versions)::

    STORE/cache/embeddings/<model-key>/run-<stamp>-<uuid>.arrow

The model key names the model and, for a model with a choice of runtimes (MiniLM on ONNX
Runtime or torch), the runtime: the same weights on two runtimes differ by float noise, and an
update must read back exactly the vectors a full ingest on its runtime would compute. The
torch runtime keeps the plain model key, which caches written before runtimes existed used.

Each run appends one uncompressed Arrow IPC file holding only the texts it had to embed
(columns ``content_hash: uint64`` and ``embedding: fixed_size_list<float32>[d]``), written to a
temporary name and renamed into place, so a killed run never leaves a half file and two runs
never write the same file. Reading concatenates the files and keeps the first vector of each
hash (files are read in name order, so the oldest wins and lookups are deterministic). The
model name, runtime and dimension are recorded in each file's schema metadata and checked on
read (a file without a runtime is of the torch runtime).
No pickles: everything is Arrow.

When a model directory holds more than ``COMPACT_AFTER`` files they are merged into one
(written first, then the old files removed), which keeps lookups to a few file opens.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from ..arrays.hashing import xxh64
from ..errors import EmbedderError, StoreError
from .embedders import Embedder

CACHE_SUBDIR = "embeddings"
COMPACT_AFTER = 32
# Texts handed to the embedder per call: small enough for a responsive progress bar, large
# enough that per-call overhead stays negligible.
DEFAULT_BATCH = 512

ProgressFn = Callable[[int], None]


def text_hashes(texts: pa.Array | pa.ChunkedArray | Sequence[str]) -> np.ndarray:
    """XXH64 (seed 0) of each text's UTF-8 bytes, as uint64 (the cache key)."""
    if not isinstance(texts, (pa.Array, pa.ChunkedArray)):
        texts = pa.array(list(texts), type=pa.large_string())
    return xxh64(texts)


# The runtime of cache files that record none (written before runtimes were recorded).
LEGACY_RUNTIME = "torch"


def model_key(model: str, runtime: str | None = None) -> str:
    """A file-system-safe directory name for a model name (and runtime), unique per pair; the
    torch runtime or none keeps the model's own key."""
    if runtime is not None and runtime != LEGACY_RUNTIME:
        model = f"{model} @{runtime}"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._")[:60] or "model"
    digest = hashlib.sha256(model.encode("utf-8")).hexdigest()[:10]
    return f"{slug}-{digest}"


@dataclasses.dataclass(frozen=True)
class CacheStats:
    """What one :func:`embed_texts` call did."""

    texts: int  # rows asked for
    unique: int  # distinct texts among them
    cached: int  # distinct texts found in the cache
    embedded: int  # distinct texts sent to the embedder

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


class EmbeddingCache:
    """The vectors of one model (on one runtime) in a store's cache directory."""

    def __init__(self, cache_dir: str | Path, model: str, dim: int, *,
                 runtime: str | None = None) -> None:
        if dim < 1:
            raise EmbedderError(f"embedder {model!r} reports dimension {dim}; it must be >= 1")
        self.model = model
        self.dim = dim
        self.runtime = runtime
        self.directory = Path(cache_dir) / CACHE_SUBDIR / model_key(model, runtime)

    def files(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.glob("run-*.arrow") if p.is_file())

    def _read_file(self, path: Path) -> pa.Table:
        try:
            with pa.memory_map(str(path), "r") as source:
                table = ipc.open_file(source).read_all()
        except FileNotFoundError:
            raise
        except (pa.ArrowException, OSError) as err:
            raise StoreError(
                f"embedding cache file {path} is damaged ({err}); delete it (the texts will be "
                "embedded again)"
            ) from err
        meta = table.schema.metadata or {}
        model = meta.get(b"model", b"").decode()
        dim = int(meta.get(b"dim", b"0") or 0)
        runtime = meta[b"runtime"].decode() if b"runtime" in meta else None
        if model != self.model or dim != self.dim or _runtime_of(runtime, self.runtime):
            raise StoreError(
                f"embedding cache file {path} holds {dim}-d vectors of {model!r} "
                f"(runtime {runtime or LEGACY_RUNTIME}), expected {self.dim}-d vectors of "
                f"{self.model!r} (runtime {self.runtime or LEGACY_RUNTIME}); delete the file"
            )
        return table

    def load(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted unique hashes uint64, matching float32 vectors (k, dim))."""
        tables: list[pa.Table] = []
        for attempt in range(3):
            try:
                tables = [self._read_file(p) for p in self.files()]
                break
            except FileNotFoundError:
                # A concurrent compaction removed a file between listing and reading: re-list.
                if attempt == 2:
                    raise StoreError(
                        f"the embedding cache {self.directory} keeps changing while being read; "
                        "retry when the other ingest has finished"
                    ) from None
        if not tables:
            return np.empty(0, np.uint64), np.empty((0, self.dim), np.float32)
        table = pa.concat_tables(tables)
        hashes = table.column("content_hash").to_numpy()
        values = table.column("embedding").combine_chunks().flatten().to_numpy()
        vectors = np.asarray(values, dtype=np.float32).reshape(-1, self.dim)
        # np.unique returns the first occurrence index; files are in name (= age) order.
        uniq, first = np.unique(hashes, return_index=True)
        return uniq.astype(np.uint64), np.ascontiguousarray(vectors[first])

    def lookup(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectors for ``hashes`` (zero rows where missing) and the found mask."""
        known, vectors = self.load()
        out = np.zeros((hashes.shape[0], self.dim), dtype=np.float32)
        if known.size == 0 or hashes.size == 0:
            return out, np.zeros(hashes.shape[0], dtype=bool)
        idx = np.searchsorted(known, hashes)
        idx_c = np.minimum(idx, known.size - 1)
        found = known[idx_c] == hashes
        out[found] = vectors[idx_c[found]]
        return out, found

    def add(self, hashes: np.ndarray, vectors: np.ndarray) -> Path | None:
        """Append one file with these vectors; returns its path (None when empty)."""
        if hashes.size == 0:
            return None
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape != (hashes.shape[0], self.dim):
            raise EmbedderError(
                f"embedder {self.model!r} returned an array of shape {vectors.shape}, expected "
                f"({hashes.shape[0]}, {self.dim}); fix the embedder's encode()"
            )
        table = _cache_table(hashes, vectors, self.model, self.dim, self.runtime)
        self.directory.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
        path = self.directory / f"run-{stamp}-{uuid.uuid4().hex[:8]}.arrow"
        _write_atomic(table, path)
        if len(self.files()) > COMPACT_AFTER:
            self.compact()
        return path

    def compact(self) -> None:
        """Merge all files into one (written before the old ones are removed)."""
        old = self.files()
        if len(old) < 2:
            return
        hashes, vectors = self.load()
        # The merged file sorts before any later run's file and after none of the merged ones.
        path = old[0].with_name(old[0].stem + "-compacted.arrow")
        _write_atomic(_cache_table(hashes, vectors, self.model, self.dim, self.runtime), path)
        for p in old:
            if p != path:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()

    def __len__(self) -> int:
        return int(self.load()[0].size)


def _runtime_of(found: str | None, expected: str | None) -> bool:
    """True when a file of runtime ``found`` does not belong to a cache of ``expected``
    (absent on either side reads as the torch runtime)."""
    return (found or LEGACY_RUNTIME) != (expected or LEGACY_RUNTIME)


def _cache_table(hashes: np.ndarray, vectors: np.ndarray, model: str, dim: int,
                 runtime: str | None = None) -> pa.Table:
    flat = pa.array(vectors.reshape(-1), type=pa.float32())
    emb = pa.FixedSizeListArray.from_arrays(flat, dim)
    metadata = {"model": model, "dim": str(dim)}
    if runtime is not None:
        metadata["runtime"] = runtime
    schema = pa.schema(
        [("content_hash", pa.uint64()), ("embedding", pa.list_(pa.float32(), dim))],
        metadata=metadata,
    )
    return pa.Table.from_arrays([pa.array(hashes, type=pa.uint64()), emb], schema=schema)


def _write_atomic(table: pa.Table, path: Path) -> None:
    from ..store.atomic import atomic_path

    try:
        with atomic_path(path, durable=False) as tmp, \
                pa.OSFile(str(tmp), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    except OSError as err:
        raise StoreError(
            f"cannot write the embedding cache file {path} ({err.strerror or err}); check the "
            "permissions and free space of the store"
        ) from err


def encode_batched(
    embedder: Embedder,
    texts: list[str],
    *,
    batch_size: int = DEFAULT_BATCH,
    progress: ProgressFn | None = None,
) -> np.ndarray:
    """``embedder.encode`` in batches, checked for shape, dtype and finiteness. An embedder
    with an ``encode_all(texts, progress)`` that does not return None gets all texts in one
    call (it batches them by length itself)."""
    encode_all = getattr(embedder, "encode_all", None)
    whole = encode_all(texts, progress) if encode_all is not None and texts else None
    if whole is not None:
        return _checked(embedder, np.asarray(whole, dtype=np.float32), len(texts), 0)
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    for start in range(0, len(texts), batch_size):
        chunk = texts[start:start + batch_size]
        vecs = _checked(embedder, np.asarray(embedder.encode(chunk), dtype=np.float32),
                        len(chunk), start)
        out[start:start + len(chunk)] = vecs
        if progress is not None:
            progress(len(chunk))
    return out


def _checked(embedder: Embedder, vecs: np.ndarray, n: int, start: int) -> np.ndarray:
    if vecs.shape != (n, embedder.dim):
        raise EmbedderError(
            f"embedder {embedder.name!r} returned shape {vecs.shape} for {n} texts, "
            f"expected ({n}, {embedder.dim}); fix its encode()"
        )
    if not np.isfinite(vecs).all():
        raise EmbedderError(
            f"embedder {embedder.name!r} returned NaN or infinite values for texts "
            f"{start}..{start + n - 1}; check the model files"
        )
    return vecs


def embed_texts(
    texts: pa.Array | pa.ChunkedArray | Sequence[str],
    embedder: Embedder,
    *,
    cache: EmbeddingCache | None = None,
    batch_size: int = DEFAULT_BATCH,
    quiet: bool = True,
    verbatim: np.ndarray | None = None,
) -> tuple[np.ndarray, CacheStats]:
    """Vectors for every text, embedding each distinct text once and only when not cached.

    The embedder reads each text's view (:func:`arrowdedup.embed.view.embedding_text`:
    emphasis markers dropped, whitespace collapsed), except rows where ``verbatim`` is True
    (code). Repeated views (boilerplate, formatting variants) are embedded once; with a cache,
    views embedded by an earlier run are read back instead, and the newly embedded ones are
    appended to it.
    """
    vectors, inverse, stats = embed_distinct(texts, embedder, cache=cache,
                                             batch_size=batch_size, quiet=quiet,
                                             verbatim=verbatim)
    return np.ascontiguousarray(vectors[inverse]), stats


def embed_distinct(
    texts: pa.Array | pa.ChunkedArray | Sequence[str],
    embedder: Embedder,
    *,
    cache: EmbeddingCache | None = None,
    batch_size: int = DEFAULT_BATCH,
    quiet: bool = True,
    verbatim: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, CacheStats]:
    """:func:`embed_texts` without the final gather: the vectors of the distinct views, the
    row of each text in them (``vectors[inverse]`` is :func:`embed_texts`' result) and the
    cache's counts. A large run gathers its rows batch by batch instead of holding every
    text's vector a second time."""
    from .view import embedding_texts

    texts = embedding_texts(texts, verbatim)
    n = len(texts)
    hashes = text_hashes(texts)
    uniq, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    vectors = np.zeros((uniq.size, embedder.dim), dtype=np.float32)
    found = np.zeros(uniq.size, dtype=bool)
    if cache is not None:
        vectors, found = cache.lookup(uniq)
    todo = np.flatnonzero(~found)
    if todo.size:
        # In first-appearance order, so batches (and any batch-dependent float noise) are
        # the same for the same input.
        todo = todo[np.argsort(first[todo], kind="stable")]
        todo_texts = texts.take(pa.array(first[todo])).to_pylist()
        with _progress(todo.size, embedder.name, quiet) as tick:
            new = encode_batched(embedder, todo_texts, batch_size=batch_size, progress=tick)
        del todo_texts
        if cache is not None:
            cache.add(uniq[todo], new)
        if todo.size == uniq.size:
            # Nothing was cached: the new vectors are the distinct ones, in first-appearance
            # order; the rows point into them instead of being copied into sorted order (a
            # second copy of every vector of a first run: 0.37 GB at 382k texts).
            place = np.empty(uniq.size, dtype=np.int64)
            place[todo] = np.arange(todo.size)
            vectors, inverse = new, place[inverse.reshape(-1)]
        else:
            vectors[todo] = new
    stats = CacheStats(texts=n, unique=int(uniq.size), cached=int(found.sum()),
                       embedded=int(todo.size))
    return vectors, inverse.reshape(-1), stats


@contextlib.contextmanager
def _progress(total: int, label: str, quiet: bool) -> Iterator[ProgressFn | None]:
    """Progress on a terminal (nothing when quiet or piped): a bar of texts, or a spinner for
    fewer than two batches (a bar that jumps once says nothing; MiniLM still takes seconds)."""
    from .. import progress

    if total < 2 * DEFAULT_BATCH:
        with progress.spinner(f"embedding ({label})", quiet=quiet):
            yield None
        return
    with progress.bar(f"embedding ({label})", total, quiet=quiet) as tick:
        yield tick
