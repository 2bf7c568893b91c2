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

from .errors import StoreError
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


def _sha256(path: Path) -> str:
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
    ``indexes=False``. Returns the new version directory.
    """
    if indexes:
        hooks = (*default_hooks(), *hooks)
    if buckets < 1:
        raise StoreError(f"buckets must be >= 1, got {buckets}")
    root = Path(root)
    prepare_root(root)
    with store_lock(root):
        _pause_point("locked")
        previous = current_manifest(root)
        if previous is not None:
            _check_compatible(previous, result, embedding_model, root)
        run_id = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        tmp = root / VERSIONS / f".tmp-{run_id}"
        final = root / VERSIONS / run_id
        try:
            tmp.mkdir()
            manifest = _write_version(result, tmp, buckets, hooks)
            _pause_point("files-written")
            manifest.update({
                "format_version": FORMAT_VERSION,
                "run_id": run_id,
                "created_at": dt.datetime.now(dt.UTC).isoformat(),
                "config": result.config.to_dict(),
                "embedding": {"dim": result.embedding_dim, "model": embedding_model},
                "timings": result.timings,
                "inputs": list(inputs),
                **dict(extra or {}),
            })
            mpath = tmp / "manifest.json"
            mpath.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
            _fsync_file(mpath)
            _fsync_dir(tmp)
            _pause_point("manifest-written")
            os.rename(tmp, final)
            _pause_point("renamed")
            _switch_current(root, final)
            _pause_point("switched")
        except OSError as err:
            shutil.rmtree(tmp, ignore_errors=True)
            hint = "free some disk space" if err.errno == errno.ENOSPC else \
                "check the permissions and free space of the store location"
            raise StoreError(f"writing the store {root} failed ({err.strerror or err}); the "
                             f"previous version is intact; {hint}") from err
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _collect_garbage(root, final)
    return final


def _check_compatible(previous: Mapping[str, Any], result: IngestionResult,
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
    if old_dim and result.embedding_dim and old_dim != result.embedding_dim:
        raise StoreError(
            f"store {root} holds {old_dim}-d embeddings, this run has {result.embedding_dim}-d; "
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


def _write_version(result: IngestionResult, out: Path, buckets: int,
                   hooks: Sequence[Any]) -> dict[str, Any]:
    files: dict[str, dict[str, Any]] = {}
    kept = result.kept
    decisions = result.decisions
    kept_bucket = bucket_of(kept.get_column("doc_id").cast(pl.String).to_arrow(), buckets)
    dec_bucket = bucket_of(decisions.get_column("doc_id").to_arrow(), buckets)
    has_embedding = "embedding" in kept.columns
    seg_frame = kept.drop("embedding") if has_embedding else kept
    seg_table = seg_frame.to_arrow()
    dec_table = decisions.to_arrow()
    emb_table = kept.select("embedding").to_arrow() if has_embedding else None
    for sub in ("segments", "decisions") + (("embeddings",) if has_embedding else ()):
        (out / sub).mkdir()

    kept_order = np.argsort(kept_bucket, kind="stable")
    dec_order = np.argsort(dec_bucket, kind="stable")
    kept_bounds = np.searchsorted(kept_bucket[kept_order], np.arange(buckets + 1))
    dec_bounds = np.searchsorted(dec_bucket[dec_order], np.arange(buckets + 1))
    store_order: list[np.ndarray] = []
    for b in range(buckets):
        k_rows = kept_order[kept_bounds[b]:kept_bounds[b + 1]]
        d_rows = dec_order[dec_bounds[b]:dec_bounds[b + 1]]
        if k_rows.size == 0 and d_rows.size == 0 and not (b == 0 and kept.height == 0):
            continue
        name = f"part-{b:05d}"
        take_k = pa.array(k_rows, type=pa.int64())
        parts = [("segments", f"{name}.parquet", seg_table.take(take_k), _write_parquet),
                 ("decisions", f"{name}.parquet", dec_table.take(pa.array(d_rows, pa.int64())),
                  _write_parquet)]
        if emb_table is not None:
            parts.append(("embeddings", f"{name}.arrow", emb_table.take(take_k), _write_ipc))
        for sub, fname, table, writer in parts:
            path = out / sub / fname
            writer(table, path)
            _fsync_file(path)
            files[f"{sub}/{fname}"] = {"rows": table.num_rows, "sha256": _sha256(path)}
        store_order.append(k_rows)
    order = np.concatenate(store_order) if store_order else np.empty(0, np.int64)

    _write_parquet(result.documents.to_arrow(), out / "documents.parquet")
    files["documents.parquet"] = {"rows": result.documents.height,
                                  "sha256": _sha256(out / "documents.parquet")}
    emb = embeddings_from(kept.select("embedding")) if has_embedding else None
    if emb is not None and emb.dim > 0:
        unit = emb.matrix[order].astype(np.float32, copy=True)
        norms = np.linalg.norm(unit, axis=1, keepdims=True)
        np.divide(unit, norms, out=unit, where=norms > 0)
        np.save(out / "vectors.npy", unit, allow_pickle=False)
        _fsync_file(out / "vectors.npy")
        files["vectors.npy"] = {"rows": int(unit.shape[0]), "sha256": _sha256(out / "vectors.npy")}
    if hooks:
        kept_in_store_order = kept[order] if kept.height else kept
        for hook in hooks:
            hook(out, kept_in_store_order)

    counts = {
        "documents": result.documents.height,
        "segments_in": result.original_count,
        "segments_kept": result.final_count,
    }
    counts.update({str(a): int(c) for a, c in
                   decisions.get_column("action").value_counts().iter_rows()})
    return {"buckets": buckets, "files": files, "counts": counts}


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
        raise StoreError(f"no store at {root}; create one with `arrowdedup ingest ... --out {root}`")
    version = current_version(root)
    if version is None or not version.is_dir():
        raise StoreError(
            f"{root} is not an arrowdedup store (no '{CURRENT}' version); "
            f"create one with `arrowdedup ingest ... --out {root}`"
        )
    return Store(root, version, _read_manifest(version))
