"""A store's versions: list them, make one current again (rollback), remove old ones (the
removal :func:`arrowdedup.pipeline.update.prune` does).

Every version directory is whole by itself (a delta version holds hard links to the files it
shares with its parent), so removing one never damages another. A version that a reader holds
open (:func:`arrowdedup.store.reader.pin_version`, a shared ``flock`` on its manifest) is not
removed: the reader keeps reading it whole, and a later prune removes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .atomic import fsync_dir
from .layout import CURRENT, MANIFEST, VERSIONS
from .lock import store_lock
from .manifest import current_version, read_manifest


@dataclasses.dataclass(frozen=True)
class VersionInfo:
    """One version as ``arrowdedup versions`` lists it."""

    id: str
    created_at: str | None
    parent: str | None
    current: bool
    documents: int
    segments: int
    added: int
    changed: int
    removed: int
    deltas: int
    path: Path

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("path")
        return out


def version_dirs(root: Path) -> list[Path]:
    """The committed version directories of the store at ``root``, oldest first (run ids
    start with their UTC time)."""
    base = root / VERSIONS
    if not base.is_dir():
        return []
    dirs = [p for p in base.iterdir()
            if p.is_dir() and not p.name.startswith(".") and (p / MANIFEST).exists()]
    # Run ids start with their time to the second; created_at orders two of one second.
    return sorted(dirs, key=lambda p: (_created(p), p.name))


def _created(path: Path) -> str:
    try:
        return str(read_manifest(path).get("created_at") or "")
    except StoreError:
        return ""


def _info(path: Path, current: Path | None) -> VersionInfo:
    m = read_manifest(path)
    counts = m.get("counts") or {}
    life = m.get("life") or {}
    return VersionInfo(
        id=path.name, created_at=m.get("created_at"), parent=m.get("parent"),
        current=current is not None and path.resolve() == current,
        documents=int(counts.get("documents", 0)),
        segments=int(counts.get("segments_kept", 0)),
        added=int(life.get("added", counts.get("documents", 0) if not m.get("parent") else 0)),
        changed=int(life.get("changed", 0)), removed=int(life.get("removed", 0)),
        deltas=max(0, len(m.get("layers") or [""]) - 1), path=path,
    )


def scan_versions(root: str | Path) -> tuple[list[VersionInfo], list[tuple[str, str]]]:
    """(every kept version whose manifest is sound, oldest first, the current one marked;
    (id, why) of each version skipped because its manifest is missing or damaged)."""
    root = Path(root)
    if not (root / CURRENT).exists() and not (root / VERSIONS).is_dir():
        raise StoreError(f"no store at {root}; create one with `arrowdedup ingest ... --out "
                         f"{root}`")
    current = current_version(root)
    infos: list[VersionInfo] = []
    skipped: list[tuple[str, str]] = []
    for path in version_dirs(root):
        try:
            infos.append(_info(path, current))
        except (StoreError, TypeError, ValueError) as err:
            skipped.append((path.name, str(err)))
    return infos, skipped


def list_versions(root: str | Path) -> list[VersionInfo]:
    """Every kept version of the store whose manifest is sound, oldest first, the current
    one marked (:func:`scan_versions` also names the skipped ones)."""
    return scan_versions(root)[0]


def stranded_message(root: Path) -> str | None:
    """The refusal for a store whose ``current`` pointer is gone while versions remain (None
    when it has no version either): the versions found and the command that restores it."""
    found = [p.name for p in version_dirs(root)]
    if not found:
        return None
    return (f"store {root} has no current version (its '{CURRENT}' pointer is missing); "
            f"versions found: {', '.join(found)}; `arrowdedup rollback {root} VERSION` makes "
            "one current again")


def resolve_version(root: Path, version: str) -> Path:
    path = root / VERSIONS / version
    if not version or "/" in version or not (path / MANIFEST).exists():
        known = ", ".join(p.name for p in version_dirs(root)) or "none"
        raise StoreError(f"store {root} has no version {version!r} (kept versions: {known}); "
                         "list them with `arrowdedup versions`")
    return path


def switch_current(root: Path, version: Path) -> None:
    """Point ``current`` at ``version`` with one atomic rename."""
    import uuid

    link = root / CURRENT
    tmp_link = root / f".{CURRENT}.{uuid.uuid4().hex}"
    os.symlink(Path(VERSIONS) / version.name, tmp_link)
    os.replace(tmp_link, link)
    fsync_dir(root)


def rollback(root: str | Path, version: str | None = None) -> VersionInfo:
    """Make ``version`` (default: the current version's parent) current; writes nothing but
    the pointer."""
    root = Path(root)
    with store_lock(root):
        current = current_version(root)
        if current is None and version is None:
            raise StoreError(stranded_message(root) or
                             f"{root} is not an arrowdedup store (no '{CURRENT}' version)")
        if current is None:
            # A stranded store: the named version becomes current (its manifest must be sound).
            target = resolve_version(root, str(version))
            info = _info(target, target.resolve())
            switch_current(root, target)
            return info
        if version is None:
            parent = read_manifest(current).get("parent")
            if not parent:
                raise StoreError(f"the current version {current.name} of {root} has no "
                                 "parent to roll back to; name a version (`arrowdedup "
                                 "versions` lists them)")
            version = str(parent)
        target = resolve_version(root, version)
        info = _info(target, target.resolve())  # refuses a version whose manifest is damaged
        switch_current(root, target)
        return info


def is_pinned(version: Path) -> bool:
    """True when a reader holds ``version`` open (a shared lock on its manifest)."""
    try:
        fd = os.open(version / MANIFEST, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases our probe lock
    return False


def check_keep(keep: int) -> None:
    if keep < 1:
        raise StoreError(f"--keep must be at least 1 (the current version), got {keep}")


def prune_plan(root: Path, keep: int, *, folding: bool = False
               ) -> tuple[list[Path], list[Path]]:
    """(versions to remove, versions kept only because a reader holds them): all but the
    newest ``keep`` and never the current one. ``folding``: a compacted version is about to
    be written and become current, so it is one of the ``keep`` and the current version is
    no longer spared."""
    check_keep(keep)
    current = None if folding else current_version(root)
    dirs = version_dirs(root)
    kept_here = keep - 1 if folding else keep
    candidates = dirs[:max(0, len(dirs) - kept_here)]
    old = [p for p in candidates if current is None or p.resolve() != current]
    held = [p for p in old if is_pinned(p)]
    return [p for p in old if p not in held], held


def remove_versions(root: Path, keep: int) -> tuple[list[str], list[str]]:
    """Remove the versions of :func:`prune_plan` and stale temporary directories (the caller
    holds the store lock); returns (removed ids, ids held by readers)."""
    remove, held = prune_plan(root, keep)
    for old in remove:
        # Rename first, so a half-removed version never looks like a version.
        trash = old.with_name(f".trash-{old.name}")
        with contextlib.suppress(OSError):
            os.rename(old, trash)
            shutil.rmtree(trash, ignore_errors=True)
    for tmp in [*(root / VERSIONS).glob(".tmp-*"), *(root / VERSIONS).glob(".trash-*")]:
        shutil.rmtree(tmp, ignore_errors=True)  # left by a killed run (we hold the lock)
    return [p.name for p in remove], [p.name for p in held]
