"""What a store records of the document files it was built from, so that ``--update`` of a
folder re-extracts only the files that changed.

The manifest's ``source_files`` maps each file's absolute path to its size, modification
time (ns), XXH3-128 content hash and the doc_ids it produced (``doc_id`` itself, or
``doc_id#sheet`` for a workbook). An update skips a file whose size, mtime and hash are all
recorded unchanged and whose documents the store still holds; segments tables inside a folder
(JSONL, Parquet: any doc_ids) are always read again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

PASSTHROUGH = frozenset({"jsonl", "parquet"})


def content_hash(path: Path) -> str:
    import xxhash

    h = xxhash.xxh3_128()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return str(h.hexdigest())


def _files(paths: Sequence[Path], root: str | Path | None,
           follow_external_symlinks: bool = False) -> list[Any]:
    from .extract.core import _discover

    return _discover(list(paths), root, follow_external_symlinks=follow_external_symlinks)


def _stat(file: Any) -> dict[str, Any]:
    if file.problem is not None:  # e.g. hashing a named pipe would wait for a writer
        raise OSError(file.problem)
    st = file.path.stat()
    return {"size": int(st.st_size), "mtime_ns": int(st.st_mtime_ns),
            "hash": content_hash(file.path)}


def _own(file: Any, doc_ids: Iterable[str]) -> list[str]:
    stem = file.doc_id
    return sorted(d for d in doc_ids if d == stem or d.startswith(stem + "#"))


def file_records(paths: Sequence[Path], root: str | Path | None, doc_ids: Iterable[str]
                 ) -> dict[str, dict[str, Any]]:
    """The ``source_files`` record of the files under ``paths`` that produced ``doc_ids``."""
    ids = set(doc_ids)
    out: dict[str, dict[str, Any]] = {}
    for file in _files(paths, root):
        if file.fmt in PASSTHROUGH:
            continue
        try:
            out[str(file.absolute)] = {**_stat(file), "doc_ids": _own(file, ids)}
        except OSError:
            continue  # unreadable: extraction reports it, and it is simply not recorded
    return out


@dataclasses.dataclass(frozen=True)
class FileSplit:
    """Which files of an update to extract (grouped by the root of their doc_ids) and which
    documents the unchanged files hold."""

    changed: dict[str, list[Path]]  # root → files to extract
    unchanged_ids: frozenset[str]
    unchanged: dict[str, dict[str, Any]]  # their records, carried into the new manifest
    seen: frozenset[str]  # every file found (absolute paths)


def split_files(paths: Sequence[Path], root: str | Path | None,
                recorded: Mapping[str, Mapping[str, Any]], live_ids: set[str],
                follow_external_symlinks: bool = False) -> FileSplit:
    changed: dict[str, list[Path]] = {}
    unchanged_ids: set[str] = set()
    unchanged: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for file in _files(paths, root, follow_external_symlinks):
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
        if same:
            unchanged_ids.update(old.get("doc_ids") or [])  # type: ignore[union-attr]
            unchanged[key] = dict(old)  # type: ignore[arg-type]
        else:
            changed.setdefault(str(file.base), []).append(file.path)
    return FileSplit(changed, frozenset(unchanged_ids), unchanged, frozenset(seen))
