"""Documents to segments (SPEC §1): Markdown, plain text, HTML, CSV/TSV, JSONL, Parquet, PDF
(:mod:`.pdflayout`, parsed in worker processes by :mod:`.isolated`) and spreadsheets
(:mod:`.sheets`; tables of both kinds through :mod:`.tabular`).

``extract(paths)`` returns the segments table; ``extract_documents(paths)`` returns an
:class:`ExtractResult` that also lists the files skipped with ``skip_bad_files`` (for the store
manifest) and the stage timings. One module per format; :mod:`.discover` finds the files,
:mod:`.reading` reads and parses them, :mod:`.core` assembles the table.

Names load on first use (PEP 562): the CLI reads :mod:`.limits` for every command's options,
and a command that reads no documents (``search``, ``context``, ``--help``) must not pay for
the parsers behind :mod:`.core` (~0.5 s of imports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

_EXPORTS = {
    "EXTENSIONS": "discover",
    "SCHEMA": "core",
    "ExtractLimits": "limits",
    "ExtractResult": "core",
    "KeyColumns": "core",
    "SkippedFile": "core",
    "compile_language_pattern": "discover",
    "extract": "core",
    "extract_documents": "core",
}

__all__ = [
    "EXTENSIONS",
    "SCHEMA",
    "ExtractLimits",
    "ExtractResult",
    "KeyColumns",
    "SkippedFile",
    "compile_language_pattern",
    "extract",
    "extract_documents",
]

__getattr__ = _lazy.install(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from .core import SCHEMA, ExtractResult, KeyColumns, SkippedFile, extract, extract_documents
    from .discover import EXTENSIONS, compile_language_pattern
    from .limits import ExtractLimits
