"""Writing a store version bucket by bucket, then switching ``current`` to it atomically.

A run builds a new version beside the old one and switches ``current`` with one rename, so a
reader sees the old or the new version, never a mix, and a killed run leaves the old one.
Each document lives wholly in one bucket (``xxh64(doc_id) % buckets``); rows keep input
order inside a bucket, so identical runs write identical bytes.

The writer knows nothing of ingestion or retrieval: it writes encoded buckets
(:func:`encode_bucket`, pure, run by the job's workers) and runs the *index builders* the job
path registers (objects with a ``name``, ``add(part, rows)`` per bucket and
``finish(version_dir)``; their per-bucket ``part`` is computed by the worker and carried in
:attr:`BucketOutput.index_parts`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from ..arrays.scratch import ScratchPool
from ..errors import SchemaError, StoreError
from .atomic import (
    fsync_dir,
    fsync_file,
)
from .encode import (
    WINDOW_BYTES,
    BucketOutput,
    IndexBuilder,
    StagedFile,
    encode_bucket,
    parquet_bytes,
    write_into,
)
from .integrity import (
    BLOCK_INFO,
    BLOCK_KEY,
    BLOCK_SIZE,
    CHECKSUM,
    checksum_bytes,
    checksum_file,
    file_digests,
    manifest_text,
    sha256_file,
)
from .layout import (
    CURRENT,
    DECISIONS,
    DEFAULT_BUCKETS,
    DOCUMENTS,
    FORMAT_VERSION,
    KEEP_VERSIONS,
    MANIFEST,
    READABLE_FORMATS,
    VERSIONS,
)
from .lock import LOCK, store_lock
from .manifest import current_manifest

if TYPE_CHECKING:
    from ..config import DedupConfig

__all__ = ["CHECKSUM", "DEFAULT_BUCKETS", "PAUSE_ENV", "BucketOutput", "IndexBuilder",
           "StoreWriter", "checksum_bytes", "checksum_file", "encode_bucket", "prepare_root",
           "sha256_file"]

# A test-only hook for the crash tests (issue 8): with ARROWDEDUP_TEST_PAUSE_AT=<point> in the
# environment, the writer announces the point on stderr and sleeps there (60 s at most), so a
# test can SIGKILL it at a known step. Points, in order: locked, files-written,
# manifest-written, renamed, switched. Unset (always, outside tests) it costs one dict lookup.
PAUSE_ENV = "ARROWDEDUP_TEST_PAUSE_AT"


def pause_point(point: str) -> None:
    if os.environ.get(PAUSE_ENV) == point:
        import sys

        print(f"arrowdedup-test-pause {point}", file=sys.stderr, flush=True)
        time.sleep(60)


def new_run_id() -> str:
    """A version's id: its UTC start time (so ids sort by age) and a random suffix."""
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


def end_run(root: Path, tmp: Path | None, stack: contextlib.ExitStack, err: Any) -> None:
    """Leave a write: remove its unfinished version, release the lock, and turn an OS error
    into a StoreError that says the previous version is intact and what to fix."""
    try:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        stack.close()
    if isinstance(err, OSError):
        hint = "free some disk space" if err.errno == errno.ENOSPC else \
            "check the permissions and free space of the store location"
        raise StoreError(f"writing the store {root} failed ({err.strerror or err}); "
                         f"the previous version is intact; {hint}") from err


def index_file_entry(path: Path) -> dict[str, Any]:
    """The manifest entry (:func:`file_entry`) of a file already on disk, read once."""
    digest, blocks, size = file_digests(path, CHECKSUM)
    return {CHECKSUM: digest, "bytes": size, "blocks": blocks}


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


def check_compatible(previous: Mapping[str, Any], dim: int | None,
                     model: str | None, root: Path) -> None:
    """Refuse a run whose embeddings cannot live beside the store's (SPEC §9)."""
    fmt = previous.get("format_version")
    if fmt not in READABLE_FORMATS:
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


def publish_version(root: Path, tmp: Path, final: Path, manifest: Mapping[str, Any]) -> None:
    """The commit of a version whose files are written and synced in ``tmp``: its manifest
    (synced), one rename to ``final``, and the atomic switch of ``current``. A crash before the
    switch leaves the previous version current and whole."""
    mpath = tmp / MANIFEST
    mpath.write_text(manifest_text(manifest), encoding="utf-8")
    fsync_file(mpath)
    fsync_dir(tmp)
    pause_point("manifest-written")
    os.rename(tmp, final)
    pause_point("renamed")
    _switch_current(root, final)
    pause_point("switched")


def _switch_current(root: Path, version: Path) -> None:
    from .versions import switch_current

    switch_current(root, version)


def _collect_garbage(root: Path, keep: Path, keep_versions: int = KEEP_VERSIONS) -> None:
    from .versions import remove_versions

    del keep  # the current version is never removed
    remove_versions(root, keep_versions)


assert WINDOW_BYTES % BLOCK_SIZE == 0


class StoreWriter:
    """Write one new store version bucket by bucket, then switch to it atomically.

    Use as a context manager: ``__enter__`` takes the lock and creates the temporary version
    directory; :meth:`add` writes one encoded bucket (increasing bucket order) and hands its
    index parts to the builders; :meth:`commit` writes ``documents.parquet``, finishes the
    indexes, checksums and fsyncs everything, writes the manifest, renames the directory into
    place and switches ``current``. Leaving the block without a commit (an error, a signal)
    removes the temporary directory and keeps the previous version. Data files are hashed from
    memory as they are written.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        buckets: int = DEFAULT_BUCKETS,
        config: DedupConfig,
        inputs: Sequence[str] = (),
        embedding_model: str | None = None,
        extra: Mapping[str, object] | None = None,
        indexes: Sequence[IndexBuilder] = (),
        keep_versions: int = KEEP_VERSIONS,
    ) -> None:
        if buckets < 1:
            raise StoreError(f"buckets must be >= 1, got {buckets}")
        self.root = Path(root)
        self.buckets = buckets
        self.config = config
        self.inputs = list(inputs)
        self.embedding_model = embedding_model
        self.extra = dict(extra or {})
        self.indexes = tuple(indexes)
        if keep_versions < 1:
            raise StoreError(f"--keep-versions must be at least 1, got {keep_versions}")
        self.keep_versions = keep_versions
        self.files: dict[str, dict[str, Any]] = {}
        self.counts: dict[str, int] = {}
        self.documents: list[pa.Table] = []
        self.written: list[Path] = []
        self.dim: int | None = None
        self.kept_rows = 0
        self.timings: dict[str, float] = {"write": 0.0, "index": 0.0, "commit": 0.0}
        self.started = time.perf_counter()
        self._last_bucket = -1
        self._id_hashes: list[np.ndarray] = []
        # Each data file is fsynced on a background thread as soon as it is written, so the
        # disk writes back while the next buckets are computed instead of all at the commit
        # (the executor starts its thread at the first file).
        self._syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arrowdedup-fsync")
        # The page-aligned images the large files are assembled in, reused from bucket to
        # bucket (one is in use at a time: the writer writes one file at a time).
        self._images = ScratchPool(max_free=1)
        self._synced: list[Future[None]] = []
        self._stack = contextlib.ExitStack()
        self.tmp: Path | None = None
        self.final: Path | None = None
        self.previous: dict[str, Any] | None = None
        self.run_id = ""

    def __enter__(self) -> StoreWriter:
        prepare_root(self.root)
        self._stack.enter_context(store_lock(self.root))
        try:
            pause_point("locked")
            self.previous = current_manifest(self.root)
            if self.previous is not None:
                check_compatible(self.previous, None, self.embedding_model, self.root)
            self.run_id = new_run_id()
            self.tmp = self.root / VERSIONS / f".tmp-{self.run_id}"
            self.final = self.root / VERSIONS / self.run_id
            self.tmp.mkdir()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, kind: Any, err: Any, tb: Any) -> None:
        # No fsync may still run on the files removed next.
        self._syncer.shutdown(wait=True, cancel_futures=True)
        end_run(self.root, self.tmp, self._stack, err)

    @property
    def staging(self) -> Path:
        """The directory this version is written into until the commit renames it (inside
        the block only): where :func:`write_staged` puts a worker's files."""
        if self.tmp is None:
            raise StoreError("the store writer has no staging directory outside its block")
        return self.tmp

    def _write(self, rel: str, data: bytes | pa.Buffer | pa.Table | StagedFile,
               rows: int | None) -> None:
        assert self.tmp is not None
        path = self.tmp / rel
        if isinstance(data, StagedFile):
            if not path.is_file():
                raise StoreError(f"{rel} was reported written into {self.tmp} but is not there; "
                                 "the staging directory must be on the driver's file system "
                                 "(run the job again)")
            entry = data.entry()
        else:
            entry = write_into(self.tmp, rel, data, self._images)
        self.written.append(path)
        self._synced.append(self._syncer.submit(fsync_file, path))
        self.files[rel] = {"rows": rows, **entry}

    def add_file(self, rel: str, data: bytes | pa.Buffer, rows: int | None) -> None:
        """Write one more file of the version (listed and checksummed like the buckets')."""
        t0 = time.perf_counter()
        self._write(rel, data, rows)
        self.timings["write"] += time.perf_counter() - t0

    def add(self, out: BucketOutput) -> None:
        """Write one encoded bucket (buckets in increasing order, each at most once)."""
        if out.bucket <= self._last_bucket:
            raise StoreError(f"bucket {out.bucket} written out of order (after "
                             f"{self._last_bucket})")
        self._last_bucket = out.bucket
        t0 = time.perf_counter()
        for rel, data, rows in out.files:
            self._write(rel, data, rows)
        self.timings["write"] += time.perf_counter() - t0
        if out.embedding_dim:
            if self.dim is None:
                self.dim = int(out.embedding_dim)
            elif out.embedding_dim != self.dim:
                raise StoreError(f"bucket embeddings are {out.embedding_dim}-d, earlier "
                                 f"buckets {self.dim}-d; every segment of one store needs "
                                 "one dimension")
        t0 = time.perf_counter()
        for builder in self.indexes:
            builder.add(out.index_parts.get(builder.name), out.kept_rows)
        self.timings["index"] += time.perf_counter() - t0
        self.kept_rows += out.kept_rows
        if out.documents is not None:
            self.documents.append(out.documents)
        for key, value in out.counts.items():
            self.counts[key] = self.counts.get(key, 0) + value
        self._id_hashes.append(out.segment_id_hashes)

    def commit(
        self,
        *,
        documents: pl.DataFrame | None = None,
        timings: Mapping[str, float] | None = None,
        counts: Mapping[str, int] | None = None,
        started: float | None = None,
    ) -> Path:
        """Finish the version and switch ``current`` to it; returns the version directory.

        ``documents`` (default: the buckets' document tables, in bucket order) can be given
        by a caller that holds them whole. ``timings``: the caller's stages so far, recorded
        in the manifest with this writer's own (:func:`manifest_timings`); ``started``: the
        ``time.perf_counter()`` the job started at (default: this writer's creation).
        """
        assert self.tmp is not None and self.final is not None
        t_commit = time.perf_counter()
        _check_unique_ids(self._id_hashes, self.tmp)
        if self._last_bucket < 0:  # an empty input still gets an (empty) bucket 0
            raise StoreError("no bucket was written; nothing to commit")
        if self.previous is not None:
            check_compatible(self.previous, self.dim, self.embedding_model, self.root)
        doc_table = documents.to_arrow() if documents is not None else (
            pa.concat_tables(self.documents) if self.documents else None)
        if doc_table is not None:
            self._write(DOCUMENTS, parquet_bytes(doc_table), doc_table.num_rows)
        t0 = time.perf_counter()
        for builder in self.indexes:
            builder.finish(self.tmp)
        t_index = time.perf_counter() - t0
        self.timings["index"] += t_index
        ours = set(self.written)
        indexed = sorted(p for p in self.tmp.rglob("*") if p.is_file() and p not in ours)
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(fsync_file, indexed))  # the data files are synced in the background
            for done in self._synced:  # raises the first fsync error of the background
                done.result()
            # Files the builders wrote (the BM25 index) are checksummed like the data files,
            # so `verify` notices a damaged index too; they have no row count.
            for path, entry in zip(indexed, pool.map(index_file_entry, indexed), strict=True):
                self.files[path.relative_to(self.tmp).as_posix()] = {"rows": None, **entry}
        manifest_counts = dict(counts) if counts is not None else {
            "documents": doc_table.num_rows if doc_table is not None else 0,
            "segments_in": int(sum(h.shape[0] for h in self._id_hashes)),
            "segments_kept": self.counts.get("kept", 0),
        }
        manifest_counts.update(self.counts)
        manifest = {
            "buckets": self.buckets, "files": dict(sorted(self.files.items())),
            "checksum": CHECKSUM,
            BLOCK_KEY: dict(BLOCK_INFO),
            "counts": manifest_counts,
            "format_version": FORMAT_VERSION,
            "run_id": self.run_id,
            "created_at": dt.datetime.now(dt.UTC).isoformat(),
            "config": self.config.to_dict(),
            "embedding": {"dim": self.dim, "model": self.embedding_model},
            "indexes": [b.name for b in self.indexes],
            "timings": manifest_timings(timings, self.timings, t_commit + t_index,
                                        self.started if started is None else started),
            "inputs": self.inputs,
            "parent": self.previous.get("run_id") if self.previous else None,
            "base": self.run_id,  # the version that wrote the base layer
            "layers": [""],
            "life": {"added": manifest_counts.get("documents", 0), "changed": 0,
                     "removed": 0},
            **self.extra,
        }
        pause_point("files-written")
        for sub in {p.parent for p in (*self.written, *indexed)}:
            fsync_dir(sub)
        publish_version(self.root, self.tmp, self.final, manifest)
        self.tmp = None
        _collect_garbage(self.root, self.final, self.keep_versions)
        self.timings["commit"] += time.perf_counter() - t_commit - t_index
        return self.final


def manifest_timings(caller: Mapping[str, float] | None, own: Mapping[str, float],
                     commit_start: float, started: float) -> Mapping[str, float]:
    """The manifest's ``timings`` (every key of :data:`arrowdedup.timings.STAGES`): the
    caller's stages plus a writer's ``own`` (file writes, index work), ``commit`` from
    ``commit_start`` (a ``perf_counter`` reading, the index finish left out) and ``total``
    from ``started``, both up to now, the manifest being written."""
    from ..timings import complete

    now = time.perf_counter()
    values = dict(caller or {})
    for key, seconds in own.items():  # its writes, index work and encoding; not the commit
        if key != "commit":
            values[key] = float(values.get(key, 0.0)) + seconds
    values["commit"] = now - commit_start
    values["total"] = now - started
    return dict(complete(values))


def _check_unique_ids(hashes: list[np.ndarray], tmp: Path) -> None:
    """segment_id must be unique across the whole input, not only inside one bucket."""
    if not hashes:
        return
    allh = np.sort(np.concatenate(hashes))
    if allh.shape[0] < 2 or not (allh[1:] == allh[:-1]).any():
        return
    ids = pl.read_parquet(sorted((tmp / DECISIONS).glob("part-*.parquet")),
                          columns=["segment_id"]).get_column("segment_id")
    dup = ids.filter(ids.is_duplicated()).unique().sort().head(5).to_list()
    if dup:
        raise SchemaError(f"column 'segment_id' has duplicate values across documents "
                          f"(first: {dup}); make segment_id unique in the whole input")
