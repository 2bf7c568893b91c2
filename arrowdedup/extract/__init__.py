"""Documents to segments (SPEC §1): Markdown, plain text, HTML, CSV/TSV, JSONL, Parquet, PDF
(:mod:`.pdflayout`, parsed in worker processes by :mod:`.isolated`) and spreadsheets
(:mod:`.sheets`; tables of both kinds through :mod:`.tabular`).

``extract(paths)`` returns the segments table; ``extract_documents(paths)`` returns an
:class:`ExtractResult` that also lists the files skipped with ``skip_bad_files`` (for the store
manifest) and the stage timings. One module per format; :mod:`.core` finds the files and
assembles the table.
"""

from .core import (
    EXTENSIONS,
    SCHEMA,
    ExtractResult,
    KeyColumns,
    SkippedFile,
    compile_language_pattern,
    extract,
    extract_documents,
)
from .limits import ExtractLimits

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
