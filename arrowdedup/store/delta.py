"""Writing a delta version: the parent's layers (hard-linked, never copied) plus one new layer.

A delta layer (``deltas/<run_id>/``) holds the rows of the new and changed documents (the
same files as a base: ``segments/``, ``decisions/``, ``embeddings/``, ``fingerprints/``
``part-00000``, ``documents.parquet``, ``bm25/``), ``tombstones.parquet`` (the doc_ids of the
replaced and deleted documents, which it removes from every earlier layer) and
``changes.parquet`` (``doc_id``, ``change``: added / changed / removed). Its version directory
hard-links every file of the parent (falling back to a copy where the file system has no hard
links), so each version is whole by itself, its manifest lists (and checksums) every file it
reads, and removing another version never touches it.

:class:`DeltaWriter` takes the store lock on entry, so the caller decides what changed against
the parent it holds (:attr:`DeltaWriter.parent`) and no other writer can move ``current``
meanwhile; the version is written in a temporary directory, renamed into place and switched to
with the same pause points as :class:`.writer.StoreWriter` (the crash tests kill it there).
Like the base writer it builds the indexes its caller registers (the job path's BM25), and
imports neither ingestion nor retrieval.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from ..errors import StoreError
from .atomic import fsync_dir, fsync_file
from .fingerprint import FINGERPRINT_KIND, document_fingerprints
from .integrity import BLOCK_INFO, BLOCK_KEY
from .layout import (
    CHANGES,
    DELTAS,
    DOCUMENTS,
    FINGERPRINTS,
    KEEP_VERSIONS,
    MANIFEST,
    TOMBSTONES,
    VERSIONS,
    part_name,
)
from .lock import store_lock
from .reader import Store, open_store

if TYPE_CHECKING:
    from .encode import IndexBuilder

__all__ = ["DeltaWriter", "fingerprint_file"]


def fingerprint_file(bucket: int, table: pa.Table | pl.DataFrame) -> tuple[str, Any, int]:
    """The ``fingerprints/part-*.parquet`` file of one bucket's input rows."""
    from .encode import parquet_bytes

    fps = document_fingerprints(table)
    return f"{FINGERPRINTS}/{part_name(bucket)}.parquet", parquet_bytes(fps.to_arrow()), \
        fps.height


def _link_tree(src: Path, dst: Path) -> None:
    """Hard-link every file under ``src`` (but its manifest) into ``dst``."""
    for path in sorted(src.rglob("*")):
        if not path.is_file() or (path.name == MANIFEST and path.parent == src):
            continue
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError as err:
            if err.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                raise
            shutil.copy2(path, target)


class DeltaWriter:
    """Write one delta version on top of the current one and switch to it (see module)."""

    def __init__(self, root: str | Path, *, keep_versions: int = KEEP_VERSIONS,
                 indexes: Sequence[IndexBuilder] = ()) -> None:
        if keep_versions < 1:
            raise StoreError(f"--keep-versions must be at least 1, got {keep_versions}")
        self.root = Path(root)
        self.keep_versions = keep_versions
        self.indexes = tuple(indexes)
        self._stack = contextlib.ExitStack()
        self.parent: Store | None = None
        self.tmp: Path | None = None
        self.final: Path | None = None
        self.run_id = ""
        self.layer = ""
        self.files: dict[str, dict[str, Any]] = {}
        self.timings: dict[str, float] = {"write": 0.0, "index": 0.0, "commit": 0.0}
        self.started = time.perf_counter()

    def __enter__(self) -> DeltaWriter:
        from .writer import new_run_id, pause_point

        self._stack.enter_context(store_lock(self.root))
        try:
            pause_point("locked")
            self.parent = open_store(self.root)
            self._stack.callback(self.parent.close)
            self.run_id = new_run_id()
            self.tmp = self.root / VERSIONS / f".tmp-{self.run_id}"
            self.final = self.root / VERSIONS / self.run_id
            self.layer = f"{DELTAS}/{self.run_id}"
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, kind: Any, err: Any, tb: Any) -> None:
        from .writer import end_run

        end_run(self.root, self.tmp, self._stack, err)

    def _write(self, rel: str, data: Any, rows: int | None) -> None:
        from .encode import write_data_entry

        assert self.tmp is not None
        path = self.tmp / self.layer / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = write_data_entry(path, data)
        fsync_file(path)
        self.files[f"{self.layer}/{rel}"] = {"rows": rows, **entry}

    def write(
        self,
        *,
        result: Any | None,
        inputs: pl.DataFrame | None,
        tombstones: list[str],
        changes: pl.DataFrame,
    ) -> None:
        """Link the parent's files and write the new layer: ``result`` (an
        :class:`arrowdedup.dedup.ingest.IngestionResult` of the new and changed documents, or
        ``None`` for a delete), their ``inputs`` rows (fingerprints), the ``tombstones`` and
        the ``changes`` rows; the registered indexes are built over the layer's kept rows."""
        from .encode import encode_bucket, parquet_bytes
        from .writer import index_file_entry

        assert self.tmp is not None and self.parent is not None
        t0 = time.perf_counter()
        self.tmp.mkdir()
        _link_tree(self.parent.version, self.tmp)
        self.files = dict(self.parent.manifest.get("files") or {})
        layer_dir = self.tmp / self.layer
        layer_dir.mkdir(parents=True)
        if result is not None and result.decisions.height:
            out = encode_bucket(0, result.kept, result.decisions, None, result.embedding_dim,
                                self.indexes)
            for key, seconds in out.timings.items():  # encode, and the index's tokenizing
                self.timings[key] = self.timings.get(key, 0.0) + seconds
                t0 += seconds
            for rel, data, rows in out.files:
                self._write(rel, data, rows)
            self._write(DOCUMENTS, parquet_bytes(result.documents.to_arrow()),
                        result.documents.height)
            assert inputs is not None
            rel, data, rows = fingerprint_file(0, inputs)
            self._write(rel, data, rows)
            ti = time.perf_counter()
            ours = set(self.files)
            for builder in self.indexes:
                builder.add(out.index_parts.get(builder.name), out.kept_rows)
                builder.finish(layer_dir)
            # Files the builders wrote (the BM25 index) are synced and checksummed like the
            # data files; they have no row count.
            for path in sorted(p for p in layer_dir.rglob("*") if p.is_file()):
                rel_path = path.relative_to(self.tmp).as_posix()
                if rel_path not in ours:
                    fsync_file(path)
                    self.files[rel_path] = {"rows": None, **index_file_entry(path)}
            index_s = time.perf_counter() - ti
            self.timings["index"] += index_s
            t0 += index_s  # the index's time is its own stage, not the write's
        stones = pa.table({"doc_id": pa.array(sorted(tombstones), type=pa.string())})
        self._write(TOMBSTONES, parquet_bytes(stones), stones.num_rows)
        self._write(CHANGES, parquet_bytes(changes.to_arrow()), changes.height)
        self.timings["write"] += time.perf_counter() - t0

    def commit(self, *, counts: dict[str, int], life: dict[str, int],
               timings: dict[str, float] | None = None, extra: dict[str, Any] | None = None,
               started: float | None = None) -> Path:
        """Write the manifest, rename the version into place and switch ``current``;
        ``timings`` and ``started`` as for :meth:`StoreWriter.commit`."""
        from .versions import remove_versions
        from .writer import manifest_timings, pause_point, publish_version

        assert self.tmp is not None and self.final is not None and self.parent is not None
        t0 = time.perf_counter()
        previous = self.parent.manifest
        manifest = {
            **previous,
            **(extra or {}),
            "files": dict(sorted(self.files.items())),
            "run_id": self.run_id,
            "parent": previous.get("run_id", self.parent.version.name),
            "created_at": dt.datetime.now(dt.UTC).isoformat(),
            "layers": [*(previous.get("layers") or [""]), self.layer],
            "counts": counts,
            "life": life,
            "timings": manifest_timings(timings, self.timings, t0,
                                        self.started if started is None else started),
            "fingerprints": FINGERPRINT_KIND,
        }
        if not all("blocks" in e for e in self.files.values() if isinstance(e, dict)):
            # A parent written before block checksums: its files have none, so the version
            # says it has none and is read as before (``verify`` checks its files whole).
            manifest.pop(BLOCK_KEY, None)
        else:
            manifest[BLOCK_KEY] = dict(BLOCK_INFO)
        pause_point("files-written")
        for sub in {self.tmp / self.layer, *(self.tmp / self.layer).rglob("*")}:
            if sub.is_dir():
                fsync_dir(sub)
        publish_version(self.root, self.tmp, self.final, manifest)
        self.tmp = None
        self.parent.close()  # our own pin must not keep the parent from being pruned
        remove_versions(self.root, self.keep_versions)
        self.timings["commit"] += time.perf_counter() - t0
        return self.final

