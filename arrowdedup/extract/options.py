"""How a documents run extracts: one frozen object instead of eight keywords repeated by every
function on the way (``ingest_to_store``, ``update_store``, the CLI)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from .limits import ExtractLimits


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExtractOptions:
    """The extraction options of a documents run (ignored for segments tables).

    - ``language_from_path``: a path pattern with ``{lang}`` that gives each file's language;
    - ``key_columns``: the columns that identify a row of a CSV/TSV table (else detected,
      unless ``detect_keys`` is False);
    - ``doc_version_from_path``: a path pattern with ``{version}`` that gives each document's
      version;
    - ``skip_bad_files``: skip a file that cannot be read (listed in the manifest) instead of
      refusing the run;
    - ``root``: the folder doc_ids are relative to (default: each input folder);
    - ``limits``: what one file may cost (:class:`ExtractLimits`; default bounds when None);
    - ``follow_external_symlinks``: follow symbolic links that leave an input folder.
    """

    language_from_path: str | None = None
    key_columns: Sequence[str] | None = None
    detect_keys: bool = True
    doc_version_from_path: str | None = None
    skip_bad_files: bool = False
    root: str | Path | None = None
    limits: ExtractLimits | None = None
    follow_external_symlinks: bool = False


# The keywords ingest_to_store and update_store took before ExtractOptions, and their fields.
LEGACY_KEYWORDS = {
    "language_from_path": "language_from_path", "key_columns": "key_columns",
    "detect_keys": "detect_keys", "doc_version_from_path": "doc_version_from_path",
    "skip_bad_files": "skip_bad_files", "root": "root", "extract_limits": "limits",
    "follow_external_symlinks": "follow_external_symlinks",
}
