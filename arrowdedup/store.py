"""The Parquet store: versioned, bucketed by a hash of ``doc_id``, swapped in atomically.

Layout of a store directory::

    STORE/
      current -> versions/<run_id>     symlink, replaced by an atomic rename (the pointer)
      versions/<run_id>/
        manifest.json                   written last inside the version
        documents.parquet
        segments/part-00003.parquet     kept segments, every column but the embedding
        embeddings/part-00003.arrow     the embedding column as given (uncompressed Arrow IPC)
        decisions/part-00003.parquet    one row per input segment
        vectors.npy                     unit float32 vectors of the kept rows (retrieval, mmap)
      cache/                            embedding cache (kept across versions)
      retrieval_log/                    one Parquet file per search batch (kept across versions)
      .lock                             the writer's pid while a run writes

A run builds a new version beside the old one and switches ``current`` with one rename, so a
reader sees the old or the new version, never a mix, and a killed run leaves the old one. Each
document lives wholly in one bucket (``xxh64(doc_id) % buckets``); rows keep input order inside
a bucket, so identical runs write identical bytes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from .errors import SchemaError, StoreError
from .hashing import xxh64
from .ingest import IngestionResult
from .schema import embeddings_from

FORMAT_VERSION = 1
DEFAULT_BUCKETS = 16
KEEP_VERSIONS = 2
CURRENT = "current"
VERSIONS = "versions"
LOCK = ".lock"


# A test-only hook for the crash tests (issue 8): with ARROWDEDUP_TEST_PAUSE_AT=<point> in the
# environment, the writer announces the point on stderr and sleeps there (60 s at most), so a
# test can SIGKILL it at a known step. Points, in order: locked, files-written,
# manifest-written, renamed, switched. Unset (always, outside tests) it costs one dict lookup.
PAUSE_ENV = "ARROWDEDUP_TEST_PAUSE_AT"


def _pause_point(point: str) -> None:
    if os.environ.get(PAUSE_ENV) == point:
        import sys
        import time

        print(f"arrowdedup-test-pause {point}", file=sys.stderr, flush=True)
        time.sleep(60)


def bucket_of(doc_ids: pa.Array | pa.ChunkedArray, buckets: int) -> np.ndarray:
    """The bucket of each row: XXH64 of the doc id modulo the bucket count."""
    return (xxh64(doc_ids) % np.uint64(buckets)).astype(np.int64)


# ----------------------------------------------------------------------------- locking


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def store_lock(root: Path) -> Iterator[None]:
    """Hold ``root/.lock`` (with this pid) for the duration; recover a dead holder's lock."""
    path = root / LOCK
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(path.read_text().strip() or "0")
            except (OSError, ValueError):
                holder = 0
            if _pid_alive(holder) and holder != os.getpid():
                raise StoreError(
                    f"store {root} is being written by process {holder} (lock file {path}); "
                    "wait for it to finish, or remove the lock file if that process is gone"
                ) from None
            # Stale: move it aside atomically so two recoverers cannot both win.
            stale = path.with_name(f"{LOCK}.stale.{uuid.uuid4().hex}")
            with contextlib.suppress(FileNotFoundError):
                os.replace(path, stale)
                stale.unlink(missing_ok=True)
            continue
        except OSError as err:
            # Read-only, unwritable or full location: a clean refusal, not an OSError.
            raise StoreError(
                f"cannot create the lock file {path} ({err.strerror or err}); the store "
                "location must be writable: check its permissions, free space and mount"
            ) from err
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(f"{os.getpid()}\n")
        except OSError as err:
            with contextlib.suppress(OSError):
                path.unlink()
            raise StoreError(
                f"cannot write the lock file {path} ({err.strerror or err}); free some disk "
                "space or choose a writable location"
            ) from err
        break
    else:
        raise StoreError(f"could not take the lock {path}; remove it if no run is writing")
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


# ----------------------------------------------------------------------------- writing


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks (the manifest's checksums)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, compression="zstd", row_group_size=128 * 1024,
                   write_statistics=True, store_schema=True)


def _write_ipc(table: pa.Table, path: Path) -> None:
    with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def prepare_root(root: Path) -> None:
    """Create the store directory, refusing a path that cannot be a store."""
    if root.exists() and not root.is_dir():
        raise StoreError(f"store path {root} is a file; choose a directory path for --out")
    if root.is_dir() and any(root.iterdir()) and not (root / VERSIONS).is_dir() \
            and not (root / CURRENT).exists() and not (root / LOCK).exists():
        raise StoreError(
            f"{root} is a non-empty directory that is not an arrowdedup store; choose an empty "
            "or new directory, or an existing store"
        )
    try:
        (root / VERSIONS).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StoreError(f"cannot create the store at {root}: {err.strerror}; "
                         "choose a writable location") from err


def default_hooks() -> tuple[Any, ...]:
    """What every version gets at ingest time unless ``indexes=False``: the BM25 index that
    retrieval reads (``<version>/bm25/``)."""
    from .retrieval.bm25 import build_bm25_index

    return (build_bm25_index,)


def write_store(
    result: IngestionResult,
    root: str | Path,
    *,
    buckets: int = DEFAULT_BUCKETS,
    inputs: Sequence[str] = (),
    embedding_model: str | None = None,
    extra: Mapping[str, Any] | None = None,
    hooks: Sequence[Any] = (),
    indexes: bool = True,
) -> Path:
    """Write ``result`` as a new version of the store at ``root`` and switch to it atomically.

    ``hooks`` are callables ``hook(version_dir, kept_table)`` run before the manifest is written
    (for indexes built at ingest time); :func:`default_hooks` (the BM25 index) run first unless
    ``indexes=False``. Returns the new version directory. A whole result is split into its
    buckets and written through :class:`StoreWriter`, the bucket-at-a-time writer.
    """
    if buckets < 1:
        raise StoreError(f"buckets must be >= 1, got {buckets}")
    kept, decisions = result.kept, result.decisions
    kept_bucket = bucket_of(kept.get_column("doc_id").cast(pl.String).to_arrow(), buckets)
    dec_bucket = bucket_of(decisions.get_column("doc_id").cast(pl.String).to_arrow(), buckets)
    kept_order = np.argsort(kept_bucket, kind="stable")
    dec_order = np.argsort(dec_bucket, kind="stable")
    kept_bounds = np.searchsorted(kept_bucket[kept_order], np.arange(buckets + 1))
    dec_bounds = np.searchsorted(dec_bucket[dec_order], np.arange(buckets + 1))
    writer = StoreWriter(root, buckets=buckets, config=result.config, inputs=inputs,
                         embedding_model=embedding_model, extra=extra, hooks=hooks,
                         indexes=indexes)
    with writer:
        store_order: list[np.ndarray] = []
        for b in range(buckets):
            k_rows = kept_order[kept_bounds[b]:kept_bounds[b + 1]]
            d_rows = dec_order[dec_bounds[b]:dec_bounds[b + 1]]
            if k_rows.size == 0 and d_rows.size == 0 and not (b == 0 and kept.height == 0):
                continue
            writer.add(encode_bucket(b, kept[k_rows], decisions[d_rows], None,
                                     result.embedding_dim))
            store_order.append(k_rows)
        order = np.concatenate(store_order) if store_order else np.empty(0, np.int64)
        return writer.commit(
            documents=result.documents, timings=result.timings,
            hook_frame=kept[order] if kept.height else kept,
            counts={"documents": result.documents.height,
                    "segments_in": result.original_count, "segments_kept": result.final_count},
        )


def _check_compatible(previous: Mapping[str, Any], dim: int | None,
                      model: str | None, root: Path) -> None:
    fmt = previous.get("format_version")
    if fmt != FORMAT_VERSION:
        raise StoreError(
            f"store {root} has format version {fmt}, this arrowdedup writes {FORMAT_VERSION}; "
            "write to a new store directory"
        )
    old = previous.get("embedding") or {}
    old_model, old_dim = old.get("model"), old.get("dim")
    if old_model and model and old_model != model:
        raise StoreError(
            f"store {root} was built with embedding model {old_model!r}, this run uses "
            f"{model!r}; embeddings of two models must not mix (SPEC §9): re-ingest everything "
            "into a new store, or use the same embedder"
        )
    if old_dim and dim and old_dim != dim:
        raise StoreError(
            f"store {root} holds {old_dim}-d embeddings, this run has {dim}-d; "
            "write to a new store, or use the store's embedder"
        )


def _switch_current(root: Path, version: Path) -> None:
    link = root / CURRENT
    tmp_link = root / f".{CURRENT}.{uuid.uuid4().hex}"
    os.symlink(Path(VERSIONS) / version.name, tmp_link)
    os.replace(tmp_link, link)
    _fsync_dir(root)


def _collect_garbage(root: Path, keep: Path) -> None:
    versions = sorted(
        (p for p in (root / VERSIONS).iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.name,
    )
    for old in versions[:-KEEP_VERSIONS]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)
    for tmp in (root / VERSIONS).glob(".tmp-*"):
        # Left by a killed run; ours are renamed away already.
        shutil.rmtree(tmp, ignore_errors=True)


@dataclasses.dataclass
class BucketOutput:
    """One bucket, encoded and ready to write: what a worker (thread or Ray task) returns."""

    bucket: int
    files: list[tuple[str, bytes, int]]  # (path in the version, file bytes, rows)
    vectors: np.ndarray | None  # unit float32 vectors of the kept rows, bucket order
    has_embedding: bool
    embedding_dim: int | None
    documents: pa.Table | None
    counts: dict[str, int]
    segment_id_hashes: np.ndarray  # XXH64 of every input segment_id (global uniqueness)


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", row_group_size=128 * 1024,
                   write_statistics=True, store_schema=True)
    return sink.getvalue().to_pybytes()


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def unit_vectors(kept: pl.DataFrame) -> tuple[np.ndarray | None, int | None]:
    """Unit float32 vectors of ``kept`` rows (zero rows where unusable), and the dimension."""
    if "embedding" not in kept.columns:
        return None, None
    emb = embeddings_from(kept.select("embedding"))
    if emb is None or emb.dim == 0:
        return np.zeros((kept.height, 0), dtype=np.float32), None
    unit = np.array(emb.matrix, dtype=np.float32, copy=True)
    norms = np.linalg.norm(unit, axis=1, keepdims=True)
    np.divide(unit, norms, out=unit, where=norms > 0)
    unit[~np.isfinite(unit).all(axis=1)] = 0.0
    return unit, emb.dim


def encode_bucket(
    bucket: int,
    kept: pl.DataFrame,
    decisions: pl.DataFrame,
    documents: pl.DataFrame | None,
    embedding_dim: int | None,
) -> BucketOutput:
    """Serialise one bucket's kept rows and decisions (rows in input order inside the bucket);
    pure: equal inputs give equal bytes, in any process."""
    name = f"part-{bucket:05d}"
    has_embedding = "embedding" in kept.columns
    seg = kept.drop("embedding") if has_embedding else kept
    files = [(f"segments/{name}.parquet", _parquet_bytes(seg.to_arrow()), kept.height),
             (f"decisions/{name}.parquet", _parquet_bytes(decisions.to_arrow()),
              decisions.height)]
    if has_embedding:
        files.append((f"embeddings/{name}.arrow", _ipc_bytes(kept.select("embedding").to_arrow()),
                      kept.height))
    vectors, dim = unit_vectors(kept) if has_embedding else (None, None)
    counts = {str(a): int(c) for a, c in
              decisions.get_column("action").value_counts().iter_rows()}
    return BucketOutput(
        bucket=bucket, files=files, vectors=vectors, has_embedding=has_embedding,
        embedding_dim=dim or embedding_dim,
        documents=documents.to_arrow() if documents is not None else None, counts=counts,
        segment_id_hashes=xxh64(decisions.get_column("segment_id").cast(pl.String).to_arrow()),
    )


VECTOR_HEADER = 128  # bytes reserved for the .npy header, written once the row count is known


class StoreWriter:
    """Write one new store version bucket by bucket, then switch to it atomically.

    Use as a context manager: ``__enter__`` takes the lock and creates the temporary version
    directory; :meth:`add` writes one encoded bucket (increasing bucket order) and appends its
    unit vectors to ``vectors.npy`` in place; :meth:`commit` writes ``documents.parquet``, runs
    the hooks, fsyncs, writes the manifest last, renames the version into place and replaces
    ``current``. Leaving the block without a commit (or with an error) removes the temporary
    directory and leaves the previous version intact. Checksums are computed from the bytes in
    memory as they are written (``vectors.npy`` is hashed in a thread while the hooks run).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        buckets: int,
        config: Any,
        inputs: Sequence[str] = (),
        embedding_model: str | None = None,
        extra: Mapping[str, Any] | None = None,
        hooks: Sequence[Any] = (),
        indexes: bool = True,
    ) -> None:
        if buckets < 1:
            raise StoreError(f"buckets must be >= 1, got {buckets}")
        self.root = Path(root)
        self.buckets = buckets
        self.config = config
        self.inputs = list(inputs)
        self.embedding_model = embedding_model
        self.extra = dict(extra or {})
        self.hooks = (*default_hooks(), *hooks) if indexes else tuple(hooks)
        self.files: dict[str, dict[str, Any]] = {}
        self.counts: dict[str, int] = {}
        self.documents: list[pa.Table] = []
        self.written: list[Path] = []
        self.dim: int | None = None
        self.vector_rows = 0
        self._pending_zero_rows = 0
        self._vec: Any = None
        self._vec_hash: hashlib._Hash | None = None
        self._last_bucket = -1
        self._id_hashes: list[np.ndarray] = []
        self._stack = contextlib.ExitStack()
        self.tmp: Path | None = None
        self.final: Path | None = None
        self.run_id = ""

    def __enter__(self) -> StoreWriter:
        prepare_root(self.root)
        self._stack.enter_context(store_lock(self.root))
        try:
            _pause_point("locked")
            self.previous = current_manifest(self.root)
            if self.previous is not None:
                _check_compatible(self.previous, None, self.embedding_model, self.root)
            self.run_id = (dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S") + "-"
                           + uuid.uuid4().hex[:8])
            self.tmp = self.root / VERSIONS / f".tmp-{self.run_id}"
            self.final = self.root / VERSIONS / self.run_id
            self.tmp.mkdir()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, kind: Any, err: Any, tb: Any) -> None:
        try:
            if self._vec is not None:
                # Closing flushes; on a full disk that fails too, and the version is dropped.
                with contextlib.suppress(OSError):
                    self._vec.close()
                self._vec = None
            if self.tmp is not None and self.tmp.exists():
                shutil.rmtree(self.tmp, ignore_errors=True)
        finally:
            self._stack.close()
        if isinstance(err, OSError):
            hint = "free some disk space" if err.errno == errno.ENOSPC else \
                "check the permissions and free space of the store location"
            raise StoreError(f"writing the store {self.root} failed ({err.strerror or err}); "
                             f"the previous version is intact; {hint}") from err

    def _write(self, rel: str, data: bytes, rows: int) -> None:
        assert self.tmp is not None
        path = self.tmp / rel
        path.parent.mkdir(exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
        self.written.append(path)
        self.files[rel] = {"rows": rows, "sha256": hashlib.sha256(data).hexdigest()}

    def _append_vectors(self, vectors: np.ndarray, dim: int | None) -> None:
        assert self.tmp is not None
        if dim is None or vectors.shape[1] == 0:
            if self.dim is None:
                self._pending_zero_rows += vectors.shape[0]
                return
            vectors = np.zeros((vectors.shape[0], self.dim), dtype=np.float32)
        if self.dim is None:
            self.dim = int(vectors.shape[1])
        elif vectors.shape[1] != self.dim:
            raise StoreError(f"bucket embeddings are {vectors.shape[1]}-d, earlier buckets "
                             f"{self.dim}-d; every segment of one store needs one dimension")
        if self._vec is None:
            self._vec = open(self.tmp / "vectors.npy", "wb")
            self._vec.write(b"\0" * VECTOR_HEADER)
        if self._pending_zero_rows:
            self._vec.write(bytes(self._pending_zero_rows * self.dim * 4))
            self.vector_rows += self._pending_zero_rows
            self._pending_zero_rows = 0
        self._vec.write(np.ascontiguousarray(vectors, dtype="<f4").data)
        self.vector_rows += int(vectors.shape[0])

    def add(self, out: BucketOutput) -> None:
        """Write one encoded bucket (buckets in increasing order, each at most once)."""
        if out.bucket <= self._last_bucket:
            raise StoreError(f"bucket {out.bucket} written out of order (after "
                             f"{self._last_bucket})")
        self._last_bucket = out.bucket
        for rel, data, rows in out.files:
            self._write(rel, data, rows)
        if out.vectors is not None:
            self._append_vectors(out.vectors, out.embedding_dim)
        if out.documents is not None:
            self.documents.append(out.documents)
        for key, value in out.counts.items():
            self.counts[key] = self.counts.get(key, 0) + value
        self._id_hashes.append(out.segment_id_hashes)

    def _finish_vectors(self) -> Path | None:
        assert self.tmp is not None
        if self._vec is None:
            return None
        header = _npy_header((self.vector_rows, int(self.dim or 0)))
        if len(header) != VECTOR_HEADER:  # a shape too long for the reserved bytes
            self._vec.close()
            self._vec = None
            raw = np.fromfile(self.tmp / "vectors.npy", dtype="<f4", offset=VECTOR_HEADER)
            np.save(self.tmp / "vectors.npy", raw.reshape(self.vector_rows, -1))
        else:
            self._vec.seek(0)
            self._vec.write(header)
            self._vec.close()
            self._vec = None
        path = self.tmp / "vectors.npy"
        self.written.append(path)
        return path

    def commit(
        self,
        *,
        documents: pl.DataFrame | None = None,
        timings: Mapping[str, float] | None = None,
        hook_frame: pl.DataFrame | None = None,
        counts: Mapping[str, int] | None = None,
    ) -> Path:
        """Finish the version and switch ``current`` to it; returns the version directory.

        ``documents`` (default: the buckets' document tables, in bucket order) and
        ``hook_frame`` (default: the written kept segments read back, without embeddings) can
        be given by a caller that holds them whole.
        """
        assert self.tmp is not None and self.final is not None
        from concurrent.futures import ThreadPoolExecutor

        _check_unique_ids(self._id_hashes, self.tmp)
        if self._last_bucket < 0:  # an empty input still gets an (empty) bucket 0
            raise StoreError("no bucket was written; nothing to commit")
        if self.previous is not None:
            _check_compatible(self.previous, self.dim, self.embedding_model, self.root)
        doc_table = documents.to_arrow() if documents is not None else (
            pa.concat_tables(self.documents) if self.documents else None)
        if doc_table is not None:
            self._write("documents.parquet", _parquet_bytes(doc_table), doc_table.num_rows)
        vec_path = self._finish_vectors()
        with ThreadPoolExecutor(max_workers=4) as pool:
            vec_hash = pool.submit(sha256_file, vec_path) if vec_path is not None else None
            if self.hooks:
                frame = hook_frame if hook_frame is not None else self._kept_frame()
                for hook in self.hooks:
                    hook(self.tmp, frame)
            ours = set(self.written)  # the data files and vectors.npy
            indexed = sorted(p for p in self.tmp.rglob("*") if p.is_file() and p not in ours)
            list(pool.map(_fsync_file, [*self.written, *indexed]))
            # Files the hooks wrote (the BM25 index) are checksummed like the data files, so
            # `verify` notices a damaged index too; they have no row count.
            for path, digest in zip(indexed, pool.map(sha256_file, indexed), strict=True):
                self.files[path.relative_to(self.tmp).as_posix()] = {"rows": None,
                                                                     "sha256": digest}
            if vec_path is not None and vec_hash is not None:
                self.files["vectors.npy"] = {"rows": self.vector_rows,
                                             "sha256": vec_hash.result()}
        manifest_counts = dict(counts) if counts is not None else {
            "documents": doc_table.num_rows if doc_table is not None else 0,
            "segments_in": int(sum(h.shape[0] for h in self._id_hashes)),
            "segments_kept": self.counts.get("kept", 0),
        }
        manifest_counts.update(self.counts)
        manifest = {
            "buckets": self.buckets, "files": dict(sorted(self.files.items())),
            "counts": manifest_counts,
            "format_version": FORMAT_VERSION,
            "run_id": self.run_id,
            "created_at": dt.datetime.now(dt.UTC).isoformat(),
            "config": self.config.to_dict(),
            "embedding": {"dim": self.dim, "model": self.embedding_model},
            "timings": dict(timings or {}),
            "inputs": self.inputs,
            **self.extra,
        }
        _pause_point("files-written")
        for sub in {p.parent for p in (*self.written, *indexed)}:
            _fsync_dir(sub)
        mpath = self.tmp / "manifest.json"
        mpath.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
        _fsync_file(mpath)
        _fsync_dir(self.tmp)
        _pause_point("manifest-written")
        os.rename(self.tmp, self.final)
        self.tmp = None
        _pause_point("renamed")
        _switch_current(self.root, self.final)
        _pause_point("switched")
        _collect_garbage(self.root, self.final)
        return self.final

    def _kept_frame(self) -> pl.DataFrame:
        assert self.tmp is not None
        parts = sorted((self.tmp / "segments").glob("part-*.parquet"))
        return pl.read_parquet(parts) if parts else pl.DataFrame()


def _npy_header(shape: tuple[int, int]) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _check_unique_ids(hashes: list[np.ndarray], tmp: Path) -> None:
    """segment_id must be unique across the whole input, not only inside one bucket."""
    if not hashes:
        return
    allh = np.sort(np.concatenate(hashes))
    if allh.shape[0] < 2 or not (allh[1:] == allh[:-1]).any():
        return
    ids = pl.read_parquet(sorted((tmp / "decisions").glob("part-*.parquet")),
                          columns=["segment_id"]).get_column("segment_id")
    dup = ids.filter(ids.is_duplicated()).unique().sort().head(5).to_list()
    if dup:
        raise SchemaError(f"column 'segment_id' has duplicate values across documents "
                          f"(first: {dup}); make segment_id unique in the whole input")


# ----------------------------------------------------------------------------- reading


def current_version(root: Path) -> Path | None:
    link = root / CURRENT
    if not link.exists():
        return None
    return (root / os.readlink(link)).resolve() if link.is_symlink() else link.resolve()


def current_manifest(root: Path) -> dict[str, Any] | None:
    version = current_version(root)
    if version is None:
        return None
    return _read_manifest(version)


def _read_manifest(version: Path) -> dict[str, Any]:
    try:
        data = json.loads((version / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise StoreError(f"manifest of {version} is missing or damaged ({err}); "
                         "run `arrowdedup verify` or re-ingest") from err
    if not isinstance(data, dict):
        raise StoreError(f"manifest of {version} is not a JSON object; re-ingest")
    return data


class Store:
    """One version of a store, pinned at open time (a later ingest does not change it)."""

    def __init__(self, root: Path, version: Path, manifest: dict[str, Any]) -> None:
        self.root = root
        self.version = version
        self.manifest = manifest
        fmt = manifest.get("format_version")
        if fmt != FORMAT_VERSION:
            raise StoreError(
                f"store {root} has format version {fmt}; this arrowdedup reads version "
                f"{FORMAT_VERSION}: re-ingest with this version"
            )

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r}, run_id={self.manifest.get('run_id')!r})"

    @property
    def config(self) -> Any:
        from .config import DedupConfig

        return DedupConfig.from_json(self.manifest["config"])

    @property
    def embedding_model(self) -> str | None:
        return (self.manifest.get("embedding") or {}).get("model")

    @property
    def embedding_dim(self) -> int | None:
        return (self.manifest.get("embedding") or {}).get("dim")

    def _files(self, sub: str, ext: str) -> list[Path]:
        return sorted((self.version / sub).glob(f"part-*.{ext}"))

    def segments(self, *, with_embeddings: bool = True) -> pl.LazyFrame:
        """Kept segments (embeddings joined back when stored), in store order."""
        parts = self._files("segments", "parquet")
        if not parts:
            raise StoreError(f"store {self.root} has no segment files; re-ingest")
        frames = []
        for path in parts:
            lf = pl.scan_parquet(path)
            emb_path = self.version / "embeddings" / (path.stem + ".arrow")
            if with_embeddings and emb_path.exists():
                lf = pl.concat([lf, pl.scan_ipc(emb_path)], how="horizontal")
            frames.append(lf)
        return pl.concat(frames, how="vertical")

    def decisions(self) -> pl.LazyFrame:
        return pl.scan_parquet(self._files("decisions", "parquet"))

    def documents(self) -> pl.LazyFrame:
        return pl.scan_parquet(self.version / "documents.parquet")

    def vectors(self) -> np.ndarray | None:
        """Unit float32 vectors of the kept rows in store order, memory-mapped (zero rows
        where a segment has no usable embedding); ``None`` without embeddings."""
        path = self.version / "vectors.npy"
        if not path.exists():
            return None
        return np.load(path, mmap_mode="r")

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def retrieval_log_dir(self) -> Path:
        return self.root / "retrieval_log"


def open_store(path: str | Path | Store) -> Store:
    """Open the current version of the store at ``path``."""
    if isinstance(path, Store):
        return path
    root = Path(path)
    if not root.exists():
        raise StoreError(
            f"no store at {root}; create one with `arrowdedup ingest ... --out {root}`")
    version = current_version(root)
    if version is None or not version.is_dir():
        raise StoreError(
            f"{root} is not an arrowdedup store (no '{CURRENT}' version); "
            f"create one with `arrowdedup ingest ... --out {root}`"
        )
    return Store(root, version, _read_manifest(version))
