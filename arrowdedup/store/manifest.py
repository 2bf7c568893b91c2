"""Where a store's current version is and what its manifest says: the lowest layer of the
store, read by the reader, the writer and the version operations alike.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .integrity import manifest_problem
from .layout import (
    CURRENT,
    MANIFEST,
)


def current_version(root: Path) -> Path | None:
    link = root / CURRENT
    if not link.exists():
        return None
    return (root / os.readlink(link)).resolve() if link.is_symlink() else link.resolve()


def current_manifest(root: Path) -> dict[str, Any] | None:
    version = current_version(root)
    if version is None:
        return None
    return read_manifest(version)


def read_manifest(version: Path, *, strict: bool = True) -> dict[str, Any]:
    """The manifest of ``version``; ``strict`` (readers): refused when it fails its own
    checksum (``verify`` reads it leniently and reports that as one problem)."""
    root = version.parent.parent
    way_out = (f"`arrowdedup verify {root}` lists the damage, `arrowdedup rollback {root} "
               "VERSION` makes a sound version current (or ingest again)")
    try:
        raw = (version / MANIFEST).read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError) as err:  # ValueError: bad JSON, or bytes that are not UTF-8
        raise StoreError(f"manifest of {version} is missing or damaged "
                         f"({str(err).splitlines()[0] if str(err) else type(err).__name__}); "
                         f"{way_out}") from err
    if not isinstance(data, dict):
        raise StoreError(f"manifest of {version} is not a JSON object (damaged); {way_out}")
    if strict:
        problem = manifest_problem(raw, data)
        if problem is not None:
            raise StoreError(f"manifest of {version} is damaged ({problem}); {way_out}")
    return data
