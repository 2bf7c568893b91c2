"""What a store records of the document files it was built from, so that ``--update`` of a
folder re-extracts only the files that changed.

The manifest's ``source_files`` maps each file's absolute path to its size, modification
time (ns), XXH3-128 content hash and the doc_ids it produced (``doc_id`` itself, or
``doc_id#sheet`` for a workbook). An update skips a file whose size, mtime and hash are all
recorded unchanged and whose documents the store still holds; segments tables inside a folder
(JSONL, Parquet: any doc_ids) are always read again.

The record also says where each document came from: a file of the update that would replace a
document the store holds from another recorded path (another folder's page of the same name,
a checkout moved elsewhere) is reported in :attr:`FileSplit.moved`, for the update to refuse
unless moving is allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

PASSTHROUGH = frozenset({"jsonl", "parquet"})


class SourceFile(Protocol):
    """A document file as extraction found it (``arrowdedup.extract.discover.discover_files``):
    the store records files without knowing how they are found or read."""

    @property
    def path(self) -> Path: ...
    @property
    def absolute(self) -> Path: ...
    @property
    def base(self) -> Path: ...  # the root ``rel`` is relative to
    @property
    def rel(self) -> str: ...  # posix path relative to its root
    @property
    def doc_id(self) -> str: ...
    @property
    def fmt(self) -> str: ...
    @property
    def problem(self) -> str | None: ...


def content_hash(path: Path) -> str:
    import xxhash

    h = xxhash.xxh3_128()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return str(h.hexdigest())


def _stat(file: SourceFile) -> dict[str, Any]:
    if file.problem is not None:  # e.g. hashing a named pipe would wait for a writer
        raise OSError(file.problem)
    st = file.path.stat()
    return {"size": int(st.st_size), "mtime_ns": int(st.st_mtime_ns),
            "hash": content_hash(file.path)}


def _own(file: SourceFile, doc_ids: Iterable[str]) -> list[str]:
    stem = file.doc_id
    return sorted(d for d in doc_ids if d == stem or d.startswith(stem + "#"))


def file_records(files: Sequence[SourceFile], doc_ids: Iterable[str]
                 ) -> dict[str, dict[str, Any]]:
    """The ``source_files`` record of ``files`` (found by extraction) that produced
    ``doc_ids``."""
    ids = set(doc_ids)
    out: dict[str, dict[str, Any]] = {}
    for file in files:
        if file.fmt in PASSTHROUGH:
            continue
        try:
            out[str(file.absolute)] = {**_stat(file), "doc_ids": _own(file, ids)}
        except OSError:
            continue  # unreadable: extraction reports it, and it is simply not recorded
    return out


@dataclasses.dataclass(frozen=True)
class Moved:
    """A document of the store whose file of the update is not the one recorded."""

    doc_id: str
    recorded: str  # the absolute path the store recorded for it
    now: str  # the absolute path this update would take it from
    rel: str = ""  # that file's path below the update's root (posix)


@dataclasses.dataclass(frozen=True)
class FileSplit:
    """Which files of an update to extract (grouped by the root of their doc_ids) and which
    documents the unchanged files hold."""

    changed: dict[str, list[Path]]  # root → files to extract
    unchanged_ids: frozenset[str]
    unchanged: dict[str, dict[str, Any]]  # their records, carried into the new manifest
    seen: frozenset[str]  # every file found (absolute paths)
    moved: tuple[Moved, ...] = ()  # by doc_id


def _owners(recorded: Mapping[str, Mapping[str, Any]], live_ids: set[str]
            ) -> dict[str, list[str]]:
    """doc_id → the recorded paths it came from (sorted), for the documents the store holds."""
    owners: dict[str, list[str]] = {}
    for path, record in recorded.items():
        for doc_id in record.get("doc_ids") or []:
            if doc_id in live_ids:
                owners.setdefault(str(doc_id), []).append(str(path))
    return {d: sorted(paths) for d, paths in owners.items()}


def _claims(file: SourceFile, owners: Mapping[str, list[str]], sheet_formats: frozenset[str]
            ) -> list[str]:
    """The store's doc_ids ``file`` will produce, known before it is read: its own id, or for a
    workbook (a format of ``sheet_formats``) its sheets' ``id#sheet``."""
    stem = file.doc_id
    if file.fmt in sheet_formats:
        return sorted(d for d in owners if d.startswith(stem + "#"))
    return [stem] if stem in owners else []


def moved_summary(moved: Sequence[Moved]) -> str:
    """One clause on the moved documents: the first by name, both paths, and how many more;
    a whole checkout under a new root is named as such."""
    first = moved[0]
    text = (f"document {first.doc_id!r} was ingested from {first.recorded}, and this update "
            f"would replace it with {first.now}")
    if len(moved) > 1:
        text += f" ({len(moved) - 1} more document(s) likewise"
        roots = _moved_root(moved)
        if roots is not None:
            text += f": every one now under {roots[1]} instead of {roots[0]}"
        text += ")"
    return text


def _moved_root(moved: Sequence[Moved]) -> tuple[str, str] | None:
    """(old root, new root) when every moved file sits at the same path below the update's
    root as below a recorded root (a checkout moved as a whole)."""
    found: set[tuple[str, str]] = set()
    for m in moved:
        rel = PurePosixPath(m.rel).parts
        old = Path(m.recorded).parts
        if not rel or len(old) <= len(rel) or old[-len(rel):] != rel:
            return None
        found.add((str(Path(*old[:-len(rel)])), str(Path(m.now).parents[len(rel) - 1])))
        if len(found) > 1:
            return None
    return found.pop() if found else None


def split_files(files: Sequence[SourceFile], recorded: Mapping[str, Mapping[str, Any]],
                live_ids: set[str], *, sheet_formats: frozenset[str]) -> FileSplit:
    changed: dict[str, list[Path]] = {}
    unchanged_ids: set[str] = set()
    unchanged: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    owners = _owners(recorded, live_ids)
    moved: list[Moved] = []
    for file in files:
        key = str(file.absolute)
        seen.add(key)
        old = recorded.get(key)
        same = False
        if old is not None and file.fmt not in PASSTHROUGH:
            try:
                now = _stat(file)
            except OSError:
                now = {}
            ids = list(old.get("doc_ids") or [])
            same = bool(ids) and all(now.get(k) == old.get(k)
                                     for k in ("size", "mtime_ns", "hash")) \
                and all(d in live_ids for d in ids)
        if same and old is not None:  # same implies a recorded entry
            unchanged_ids.update(old.get("doc_ids") or [])
            unchanged[key] = dict(old)
        else:
            changed.setdefault(str(file.base), []).append(file.path)
            if file.fmt not in PASSTHROUGH:
                moved.extend(Moved(d, owners[d][0], key, file.rel)
                             for d in _claims(file, owners, sheet_formats) if key not in owners[d])
    return FileSplit(changed, frozenset(unchanged_ids), unchanged, frozenset(seen),
                     tuple(sorted(moved, key=lambda m: m.doc_id)))


def forget_moved(records: dict[str, dict[str, Any]], moved: Sequence[Moved]) -> None:
    """Take the moved documents out of their old files' records (dropping a record left with
    none), so the old path no longer vouches for a document it no longer provides."""
    for m in moved:
        record = records.get(m.recorded)
        if record is None:
            continue
        ids = [d for d in record.get("doc_ids") or [] if d != m.doc_id]
        if ids:
            records[m.recorded] = {**record, "doc_ids": ids}
        else:
            del records[m.recorded]
