"""Reading a store: the current version, pinned at open time, and its frames and vectors."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import polars as pl
from polars.io.plugins import register_io_source

from ..errors import ArrowDedupError, StoreError
from .integrity import FileGuard, check_parquet, guard_for
from .layout import (
    CHANGES,
    CURRENT,
    DECISIONS,
    DOCUMENTS,
    EMBEDDINGS,
    FINGERPRINTS,
    HISTORY,
    MANIFEST,
    READABLE_FORMATS,
    RETRIEVAL_LOG,
    SEGMENTS,
    TOMBSTONES,
)
from .manifest import current_version, read_manifest
from .vectors import RowGuard, StoredVectors, part_vectors

if TYPE_CHECKING:
    from ..config import DedupConfig


@dataclasses.dataclass(frozen=True)
class Layer:
    """One layer of a version: its directory and the doc_ids later layers removed."""

    name: str  # "" for the base, else "deltas/<run_id>"
    path: Path
    dead: frozenset[str]

    def live(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        if not self.dead:
            return frame
        return frame.filter(~pl.col("doc_id").cast(pl.String).is_in(sorted(self.dead)))


def _tombstones(layer: Path, guard: Callable[[Path], FileGuard | None]) -> set[str]:
    path = layer / TOMBSTONES
    if not path.exists():
        return set()
    frame = read_parquet_checked(path, guard(path), ["doc_id"])
    return set(frame.get_column("doc_id").cast(pl.String).to_list())


def read_parquet_checked(path: Path, guard: FileGuard | None,
                         columns: list[str] | None = None) -> pl.DataFrame:
    """``pl.read_parquet`` of a store file after checking the bytes it reads (when the
    version has block checksums)."""
    if guard is not None:
        check_parquet(guard, columns)
    return pl.read_parquet(path, columns=columns)


def scan_parquet_checked(path: Path, guard: FileGuard | None) -> pl.LazyFrame:
    """``pl.scan_parquet`` of a store file whose collect first checks the footer and the
    column chunks it reads (the projected and filtered columns only)."""
    if guard is None:
        return pl.scan_parquet(path)
    check_parquet(guard, [])  # the footer, before anything parses it
    schema = pl.scan_parquet(path).collect_schema()

    def source(with_columns: list[str] | None, predicate: pl.Expr | None,
               n_rows: int | None, batch_size: int | None) -> Any:
        del batch_size
        needed = None if with_columns is None else set(with_columns)
        if needed is not None and predicate is not None:
            needed |= set(predicate.meta.root_names())
        check_parquet(guard, needed)
        yield _pushed_down(pl.scan_parquet(path), with_columns, predicate, n_rows)

    return register_io_source(source, schema=schema)


def _pushed_down(lf: pl.LazyFrame, with_columns: list[str] | None, predicate: pl.Expr | None,
                 n_rows: int | None) -> pl.DataFrame:
    """What an IO plugin source yields: ``lf`` with the projection, filter and row limit Polars
    pushed down to it."""
    if predicate is not None:
        lf = lf.filter(predicate)
    if with_columns is not None:
        lf = lf.select(with_columns)
    if n_rows is not None:
        lf = lf.head(n_rows)
    return lf.collect()


def scan_ipc_checked(path: Path, guard: FileGuard | None) -> pl.LazyFrame:
    """``pl.scan_ipc`` of an embeddings file whose collect first checks the whole file (a
    read of its rows reads all of it; a query that does not use them does not read it)."""
    if guard is None:
        return pl.scan_ipc(path)
    # The schema is read from the file's footer and its first message: those blocks now,
    # the rest when rows are read.
    guard.check(max(0, guard.size - 10), guard.size)
    with open(path, "rb") as fh:
        fh.seek(max(0, guard.size - 10))
        tail = fh.read(4)
    footer = int.from_bytes(tail, "little", signed=True) if len(tail) == 4 else guard.size
    guard.check(max(0, guard.size - 10 - max(footer, 0)), guard.size)
    guard.check(0, 1)
    schema = pl.scan_ipc(path).collect_schema()

    def source(with_columns: list[str] | None, predicate: pl.Expr | None,
               n_rows: int | None, batch_size: int | None) -> Any:
        del batch_size
        guard.check_all()
        yield _pushed_down(pl.scan_ipc(path), with_columns, predicate, n_rows)

    return register_io_source(source, schema=schema)


def pin_version(version: Path) -> int | None:
    """Take a shared ``flock`` on ``version``'s manifest (``None`` when it cannot be opened:
    the read that follows reports it)."""
    try:
        fd = os.open(version / MANIFEST, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # being removed right now; reading reports what is missing
        pass
    return fd


def unpin(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


# The libraries that read a store's files (their own exception classes live in these
# packages; pyarrow's in pyarrow.lib, DuckDB's in _duckdb).
_READERS = ("polars", "pyarrow", "duckdb", "_duckdb")


def is_panic(err: BaseException) -> bool:
    """True for a Rust panic surfaced by PyO3 (``pyo3_runtime.PanicException``, a
    BaseException: ``except Exception`` misses it), matched by name, not imported."""
    return type(err).__name__ == "PanicException" or \
        type(err).__module__.split(".")[0] == "pyo3_runtime"


def read_failure(err: BaseException) -> bool:
    """True for an error a reading library raised on a store file's bytes (not ours),
    native panics included."""
    if isinstance(err, ArrowDedupError):
        return False
    if is_panic(err):
        return True
    if not isinstance(err, Exception):
        return False  # KeyboardInterrupt, SystemExit, ...
    module = type(err).__module__.split(".")[0]
    return module in _READERS or isinstance(err, UnicodeDecodeError)


def damaged(root: str | Path, err: BaseException) -> StoreError:
    """The refusal for a store whose files could not be read: what failed, and the way out."""
    return StoreError(
        f"the store at {root} could not be read ({type(err).__name__}: "
        f"{str(err).splitlines()[0] if str(err) else 'no detail'}); if a file of it is "
        f"damaged, `arrowdedup verify {root}` finds which: then `arrowdedup rollback {root}` "
        "to the previous version, or ingest again")


F = TypeVar("F", bound=Callable[..., Any])


def reads_store(func: F) -> F:
    """For a function whose first argument is a store (a path or a :class:`Store`): an error
    raised by the libraries reading its files becomes :func:`damaged`'s StoreError."""

    @functools.wraps(func)
    def wrapper(store: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return func(store, *args, **kwargs)
        except BaseException as err:
            if not read_failure(err):
                raise
            raise damaged(store.root if isinstance(store, Store) else store, err) from err

    return wrapper  # type: ignore[return-value]


class Store:
    """One version of a store, pinned at open time (a later ingest does not change it)."""

    def __init__(self, root: Path, version: Path, manifest: dict[str, Any]) -> None:
        self.root = root
        self.version = version
        self.manifest = manifest
        fmt = manifest.get("format_version")
        if fmt not in READABLE_FORMATS:
            raise StoreError(
                f"store {root} has format version {fmt}; this arrowdedup reads versions "
                f"{', '.join(map(str, READABLE_FORMATS))}: re-ingest with this version"
            )
        self._vectors: StoredVectors | bool | None = False
        self._layers: list[Layer] | None = None
        # A shared lock on the manifest: prune and the writer's clean-up skip a version a
        # reader holds, so a version opened here stays whole while this object lives.
        self._pin = pin_version(version)

    def close(self) -> None:
        """Release the pin on this version (also when the object is collected)."""
        unpin(self._pin)
        self._pin = None

    def __del__(self) -> None:
        unpin(getattr(self, "_pin", None))

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r}, run_id={self.run_id!r})"

    @property
    def run_id(self) -> str:
        """The id of this version (its directory name)."""
        return str(self.manifest.get("run_id", self.version.name))

    @property
    def config(self) -> DedupConfig:
        from ..config import DedupConfig

        return DedupConfig.from_json(self.manifest["config"])

    @property
    def embedding_model(self) -> str | None:
        return (self.manifest.get("embedding") or {}).get("model")

    @property
    def embedding_dim(self) -> int | None:
        return (self.manifest.get("embedding") or {}).get("dim")

    # A version is a base plus an ordered list of deltas (format 3); every layer is a
    # directory with the same files, and a layer's rows are live unless a later layer's
    # tombstones name their doc_id. Older versions are one layer, the version directory.
    def layers(self) -> list[Layer]:
        if self._layers is None:
            names = self.manifest.get("layers") or [""]
            dirs = [self.version / n if n else self.version for n in names]
            stones = [_tombstones(d, self.guard) for d in dirs]
            out: list[Layer] = []
            later: set[str] = set()
            for name, d, t in reversed(list(zip(names, dirs, stones, strict=True))):
                out.append(Layer(name, d, frozenset(later)))
                later |= t
            self._layers = out[::-1]
        return self._layers

    def guard(self, path: Path) -> FileGuard | None:
        """The block checksums of one file of this version (None: the version predates
        them); refuses a file the version does not list."""
        return guard_for(self.root, self.version, self.manifest, path)

    def scan_parquet(self, path: Path) -> pl.LazyFrame:
        """A lazy read of one Parquet file of this version that checks what it reads."""
        return scan_parquet_checked(path, self.guard(path))

    def read_parquet(self, path: Path, columns: list[str] | None = None) -> pl.DataFrame:
        """An eager read of one Parquet file of this version that checks what it reads."""
        return read_parquet_checked(path, self.guard(path), columns)

    @property
    def is_layered(self) -> bool:
        return len(self.layers()) > 1

    def _files(self, sub: str, ext: str) -> list[Path]:
        return sorted((self.version / sub).glob(f"part-*.{ext}"))

    def _scan(self, sub: str, *, required: bool = True) -> pl.LazyFrame | None:
        frames = []
        for layer in self.layers():
            parts = sorted((layer.path / sub).glob("part-*.parquet"))
            if parts:
                frames.append(layer.live(self._scan_parts(parts)))
        if not frames:
            if required:
                raise StoreError(f"store {self.root} has no {sub} files; re-ingest")
            return None
        return frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")

    def _scan_parts(self, parts: list[Path]) -> pl.LazyFrame:
        guards = [self.guard(p) for p in parts]
        if all(g is None for g in guards):
            return pl.scan_parquet(parts)
        frames = [scan_parquet_checked(p, g) for p, g in zip(parts, guards, strict=True)]
        return frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")

    def segments(self, *, with_embeddings: bool = True) -> pl.LazyFrame:
        """Kept segments (embeddings joined back when stored), in store order."""
        frames = []
        for layer in self.layers():
            for path in sorted((layer.path / SEGMENTS).glob("part-*.parquet")):
                lf = self.scan_parquet(path)
                emb_path = layer.path / EMBEDDINGS / (path.stem + ".arrow")
                if with_embeddings and emb_path.exists():
                    emb = scan_ipc_checked(emb_path, self.guard(emb_path))
                    lf = pl.concat([lf, emb.select("embedding")], how="horizontal")
                frames.append(layer.live(lf))
        if not frames:
            raise StoreError(f"store {self.root} has no segment files; re-ingest")
        return pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]

    def decisions(self) -> pl.LazyFrame:
        out = self._scan(DECISIONS)
        assert out is not None
        return out

    def documents(self) -> pl.LazyFrame:
        frames = [layer.live(self.scan_parquet(layer.path / DOCUMENTS))
                  for layer in self.layers() if (layer.path / DOCUMENTS).exists()]
        if not frames:
            return pl.scan_parquet(self.version / DOCUMENTS)  # raises the clear read error
        return frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")

    def change_layers(self) -> tuple[bool, list[tuple[int, str, str]]]:
        """Where this version's change history lies: whether its base carries a history
        (``history.parquet``, of the layers a compaction folded; otherwise the base's documents
        count as added by the version that wrote it, ``seq`` 0), and per later delta its
        ``seq``, its version id and its ``changes.parquet`` relative to the version."""
        offset = self.history_offset()
        deltas = [(offset + i, layer.name.rsplit("/", 1)[-1], f"{layer.name}/{CHANGES}")
                  for i, layer in enumerate(self.layers()[1:])
                  if (layer.path / CHANGES).exists()]
        return (self.version / HISTORY).exists(), deltas

    def history_offset(self) -> int:
        """The ``seq`` of the first delta layer in the change history: 1 after a base that
        an ingest wrote (seq 0), the carried history's length after a compacted base."""
        if (self.version / HISTORY).exists():
            return int(self.manifest.get("history_layers") or 0)
        return 1

    def change_history(self) -> pl.DataFrame:
        """``seq``, ``version``, ``doc_id``, ``change``: the documents each version of this
        version's lineage added, changed and removed, by (``seq``, ``doc_id``) (see
        :meth:`change_layers`)."""
        schema = {"seq": pl.Int64, "version": pl.String, "doc_id": pl.String,
                  "change": pl.String}
        carried, deltas = self.change_layers()
        if carried:
            frames = [self.read_parquet(self.version / HISTORY).cast(schema)]  # type: ignore[arg-type]
        else:
            base_id = str(self.manifest.get("base") or self.run_id)
            docs = self.version / DOCUMENTS
            ids = (self.read_parquet(docs, ["doc_id"]).get_column("doc_id")
                   .cast(pl.String) if docs.exists() else pl.Series("doc_id", [], pl.String))
            frames = [pl.DataFrame({"seq": pl.Series([0] * len(ids), dtype=pl.Int64),
                                    "version": [base_id] * len(ids), "doc_id": ids,
                                    "change": ["added"] * len(ids)}, schema=schema)]
        for seq, version, rel in deltas:
            frames.append(self.read_parquet(self.version / rel).select(
                pl.lit(seq, pl.Int64).alias("seq"), pl.lit(version).alias("version"),
                pl.col("doc_id").cast(pl.String), pl.col("change").cast(pl.String)))
        return pl.concat(frames, how="vertical").sort(["seq", "doc_id"], maintain_order=True)

    def fingerprints(self) -> pl.LazyFrame | None:
        """Each live document's input fingerprint (format 3), or ``None`` (older stores)."""
        return self._scan(FINGERPRINTS, required=False)

    def vectors(self) -> StoredVectors | None:
        """The kept embeddings in store order with their inverse norms (memory-mapped);
        ``None`` when the version stores no embeddings."""
        if self._vectors is False:
            loaded: list[tuple[np.ndarray, np.ndarray]] = []
            guards: list[RowGuard | None] = []
            live: list[np.ndarray] = []
            offset = 0
            any_dead = False
            for layer in self.layers():
                for path in sorted((layer.path / EMBEDDINGS).glob("part-*.arrow")):
                    matrix, inv, rows_guard = part_vectors(path, self.guard(path))
                    loaded.append((matrix, inv))
                    guards.append(rows_guard)
                    keep = np.arange(offset, offset + matrix.shape[0], dtype=np.int64)
                    if layer.dead:
                        ids = self.read_parquet(layer.path / SEGMENTS / (path.stem + ".parquet"),
                                                ["doc_id"]).get_column("doc_id")
                        mask = ~ids.cast(pl.String).is_in(sorted(layer.dead)).to_numpy()
                        any_dead = any_dead or not mask.all()
                        keep = keep[mask]
                    live.append(keep)
                    offset += matrix.shape[0]
            if not loaded:
                self._vectors = None
            else:
                dims = {m.shape[1] for m, _ in loaded if m.shape[0]}
                if len(dims) > 1:
                    raise StoreError(f"store {self.root}: embedding files of dimensions "
                                     f"{sorted(dims)}; the version is damaged, re-ingest")
                self._vectors = StoredVectors(
                    [m for m, _ in loaded], np.concatenate([i for _, i in loaded]),
                    np.concatenate(live) if any_dead else None, guards)
        return self._vectors  # type: ignore[return-value]

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def retrieval_log_dir(self) -> Path:
        return self.root / RETRIEVAL_LOG


def open_store(path: str | Path | Store, *, version: str | None = None) -> Store:
    """Open the current version (or the kept ``version``, by id) of the store at ``path``."""
    if isinstance(path, Store):
        return path
    root = Path(path)
    if not root.exists():
        raise StoreError(
            f"no store at {root}; create one with `arrowdedup ingest ... --out {root}`")
    if version is not None:
        from .versions import resolve_version

        chosen = resolve_version(root, version)
        return Store(root, chosen.resolve(), read_manifest(chosen))
    path_now = current_version(root)
    if path_now is None and not (root / CURRENT).is_symlink():
        from .versions import stranded_message

        stranded = stranded_message(root)
        if stranded is not None:
            raise StoreError(stranded)
    if path_now is None or not path_now.is_dir():
        raise StoreError(
            f"{root} is not an arrowdedup store (no '{CURRENT}' version); "
            f"create one with `arrowdedup ingest ... --out {root}`"
        )
    return Store(root, path_now, read_manifest(path_now))
