"""Documents to a segments table: find the files, parse each, assemble one typed frame.

Files are sorted by their path relative to the root, so the row order (and every id) is the
same on every run. Markdown, HTML and plain-text files are parsed in Python, one file per call,
in worker processes when there are many (the parsers are pure Python; the order of the results
does not depend on the workers). CSV/TSV and the passthrough formats are read columnar.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import logging
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ..errors import ArrowDedupError, ConfigError, InputError, SchemaError
from ..facts.guard import fact_signatures
from ..facts.tables import FACT_COLUMN
from ..schema import validate
from .blocks import ParsedDoc
from .discover import (
    EXTENSIONS,
    DocumentFile,
    PathsInput,
    claim,
    claim_id,
    discover_files,
    language_matcher,
    path_matcher,
    printable,
)
from .limits import ExtractLimits
from .passthrough import read_jsonl, read_parquet
from .reading import PARSERS, parse_all, read_bytes, read_isolated
from .sheets import SHEET_FORMATS
from .tabular import TableRows

log = logging.getLogger(__name__)

_PASSTHROUGH = frozenset({"jsonl", "parquet"})
# The way out a refusal offers ("…, or skip it with --skip-bad-files"), in any extractor's
# words: a file that was skipped under that flag is not told to use it.
_SKIP_HINT_RE = re.compile(r"[,;:]?\s*\bor\s+(?:skip|leave)\s+(?:it|the\s+file)(?:\s+out)?\s+"
                           r"with\s+--skip-bad-files(?:\s*\(skip_bad_files=True\))?")
#: Columns of an extracted table, in order, with their types.
SCHEMA: dict[str, pl.DataType] = {
    "doc_id": pl.String(),
    "segment_id": pl.String(),
    "text": pl.String(),
    "segment_type": pl.String(),
    "position": pl.Int32(),
    "section": pl.String(),
    "heading_level": pl.Int8(),
    "code_language": pl.String(),
    "title": pl.String(),
    "doc_type": pl.String(),
    "language": pl.String(),
    "created_at": pl.Datetime("us", "UTC"),
    "neighbours_before": pl.List(pl.String),
    "neighbours_after": pl.List(pl.String),
    "keys": pl.List(pl.String),
    "page_start": pl.Int32(),
    "page_end": pl.Int32(),
    "row_values": pl.String(),
    "content_hash": pl.String(),
    # SPEC §2 step 4's fact guard reads it (arrowdedup.facts.guard); computed here once.
    "fact_signature": pl.List(pl.UInt64),
}

@dataclasses.dataclass(frozen=True)
class SkippedFile:
    """A file left out by ``skip_bad_files``: its path relative to the root, and why."""

    path: str
    reason: str


@dataclasses.dataclass(frozen=True)
class KeyColumns:
    """The key columns of one table (``doc_id``), ``source`` "given" or "detected"."""

    doc_id: str
    columns: tuple[str, ...]
    source: str


@dataclasses.dataclass(frozen=True)
class ExtractResult:
    """The segments table, the files it came from, the files skipped, and stage timings."""

    segments: pl.DataFrame
    files: tuple[str, ...]
    skipped: tuple[SkippedFile, ...]
    timings: dict[str, float]
    keys: tuple[KeyColumns, ...] = ()
    # Files found in the folders given whose type no extractor reads (.png, .bin, …).
    unsupported: tuple[str, ...] = ()
    # Symbolic links in the folders given that point outside them, not followed.
    external_links: tuple[str, ...] = ()

    def keys_report(self) -> list[str]:
        """One line per table with key columns: which, and whether given or detected."""
        return [f"keys of {k.doc_id}: {', '.join(k.columns)} ({k.source})" for k in self.keys]

    def type_counts(self) -> dict[str, int]:
        """Segments per ``segment_type``, most frequent first (ties by name)."""
        if self.segments.height == 0 or "segment_type" not in self.segments.columns:
            return {}
        counts = (
            self.segments.group_by(pl.col("segment_type").cast(pl.String)).len()
            .sort(["len", "segment_type"], descending=[True, False])
        )
        return dict(zip(counts["segment_type"].to_list(), counts["len"].to_list(), strict=True))

    def summary(self) -> str:
        """One line: files, skipped files, segments and their types, seconds."""
        types = ", ".join(f"{k} {v:,}" for k, v in self.type_counts().items())
        left = []
        if self.skipped:
            left.append(f"{len(self.skipped)} skipped")
        if self.unsupported:
            left.append(f"{len(self.unsupported)} of unsupported types ignored")
        skipped = f" ({', '.join(left)})" if left else ""
        return (
            f"extracted {len(self.files):,} files{skipped} → {self.segments.height:,} segments"
            f"{f' ({types})' if types else ''} in {sum(self.timings.values()):.2f} s"
        )

    def manifest(self) -> dict[str, Any]:
        """What a store manifest records about the extraction (JSON-ready)."""
        return {
            "files": len(self.files),
            "segments": self.segments.height,
            "segment_types": self.type_counts(),
            "skipped_files": [dataclasses.asdict(s) for s in self.skipped],
            "key_columns": [dataclasses.asdict(k) for k in self.keys],
            "unsupported_files": list(self.unsupported),
            "external_links": list(self.external_links),
            "timings": dict(self.timings),
        }

    def left_out(self, limit: int = 5) -> list[str]:
        """Lines that say what was not extracted and why: the count and the first names."""
        return left_out_lines([(s.path, s.reason) for s in self.skipped], self.unsupported,
                              self.external_links, limit)


def skipped_lines(skipped: Sequence[tuple[str, str]], limit: int = 20) -> list[str]:
    """One line per skipped file, ``skipped PATH: REASON`` (the first ``limit``, then one line
    with the count of the rest; the manifest's ``skipped_files`` and ``--json`` list all)."""
    lines = [f"skipped {path}: {reason}" for path, reason in skipped[:limit]]
    if len(skipped) > limit:
        lines.append(f"skipped {len(skipped) - limit} more unreadable file(s) (all are listed "
                     "in the store manifest's skipped_files and in --json)")
    return lines


def left_out_lines(
    skipped: Sequence[tuple[str, str]],
    unsupported: Sequence[str],
    external_links: Sequence[str],
    limit: int = 5,
) -> list[str]:
    """What an extraction left out, as the CLI prints it: a line per skipped file, the
    unsupported files (a count and the first names) and the links not followed."""
    lines = skipped_lines(skipped)
    if unsupported:
        names = ", ".join(unsupported[:limit])
        more = f" and {len(unsupported) - limit} more" if len(unsupported) > limit else ""
        lines.append(f"ignored {len(unsupported)} file(s) of unsupported types: "
                     f"{names}{more} (supported: {', '.join(EXTENSIONS)})")
    lines.extend(external_link_lines(external_links, limit))
    return lines


def external_link_lines(links: Sequence[str], limit: int = 5) -> list[str]:
    """One line per symbolic link not followed (the first ``limit``, then a count)."""
    lines = [f"not followed: {link} (a symbolic link to outside the folder; follow such "
             "links with --follow-external-symlinks)" for link in links[:limit]]
    if len(links) > limit:
        lines.append(f"not followed: {len(links) - limit} more symbolic link(s) to outside "
                     "the folder (--follow-external-symlinks)")
    return lines


def extract(
    paths: PathsInput,
    *,
    root: str | Path | None = None,
    key_columns: Sequence[str] | str | None = None,
    language_from_path: str | None = None,
    skip_bad_files: bool = False,
    workers: int | None = None,
    neighbours: int = 3,
    detect_keys: bool = True,
    doc_version_from_path: str | None = None,
    limits: ExtractLimits | None = None,
    follow_external_symlinks: bool = False,
) -> pl.DataFrame:
    """Segments of the documents at ``paths`` (files or folders, walked recursively).

    See :func:`extract_documents`, which also returns the skipped files and the timings.
    """
    return extract_documents(
        paths, root=root, key_columns=key_columns, language_from_path=language_from_path,
        skip_bad_files=skip_bad_files, workers=workers, neighbours=neighbours,
        detect_keys=detect_keys,
        doc_version_from_path=doc_version_from_path, limits=limits,
        follow_external_symlinks=follow_external_symlinks,
    ).segments


def extract_documents(
    paths: PathsInput,
    *,
    root: str | Path | None = None,
    key_columns: Sequence[str] | str | None = None,
    language_from_path: str | None = None,
    skip_bad_files: bool = False,
    workers: int | None = None,
    neighbours: int = 3,
    detect_keys: bool = True,
    doc_version_from_path: str | None = None,
    limits: ExtractLimits | None = None,
    follow_external_symlinks: bool = False,
) -> ExtractResult:
    """Extract segments from documents into one table (columns and types: :data:`SCHEMA`).

    - ``root``: ``doc_id`` is the path relative to it, without extension (default: each folder
      argument itself, or a file argument's folder).
    - ``key_columns``: table columns (CSV/TSV, spreadsheet sheets) whose "column: value" pairs
      fill ``keys``; each table uses those of them it has, and a name no table has is refused.
      Without them, key columns are detected (``detect_keys``, see :mod:`.tabular`) and listed
      in ``ExtractResult.keys``.
    - ``language_from_path``: e.g. ``"content/{lang}/**"``, matched against the path relative
      to the root (or to one of the root's parent folders, so it may start with the root's own
      name); front matter (or ``<html lang>``) wins over it. Without any language the column is
      absent.
    - ``skip_bad_files``: a file that cannot be read or decoded is listed in ``skipped`` instead
      of stopping the run.
    - ``workers``: processes for the Markdown/HTML/text parsing (default: the CPU count for large
      inputs, else 1); the output does not depend on it.
    - ``doc_version_from_path``: e.g. ``"docs/v{version}/**"`` fills a ``doc_version`` column
      (matched like ``language_from_path``); retrieval's freshness compares it as a version.
    - ``neighbours``: how many ids ``neighbours_before`` / ``neighbours_after`` hold at most, the
      nearest first, inside the same stretch of a section.
    - ``limits``: what one file may cost (:class:`ExtractLimits`: cells, columns, text, time,
      memory); a file past one is an error naming the limit (skipped with ``skip_bad_files``).
      PDFs, workbooks and CSV/TSV files are read in worker processes within them.
    - ``follow_external_symlinks``: read the files a symbolic link inside a folder points at
      outside that folder (default: such links are listed in ``external_links``, not read).

    JSONL and Parquet files must already be segments tables: they are validated and their rows
    passed through as they are.
    """
    if neighbours < 0:
        raise ConfigError(f"neighbours must be >= 0, got {neighbours}; pass 0 to disable them")
    started = time.perf_counter()
    keys = _key_columns(key_columns)
    matcher = language_matcher(language_from_path)
    versioner = path_matcher(doc_version_from_path, "version")
    limits = limits or ExtractLimits()
    unsupported: list[str] = []
    external: list[str] = []
    files = discover_files(paths, root, unsupported, external=external,
                      follow_external_symlinks=follow_external_symlinks)
    timings = {"discover": time.perf_counter() - started}

    tick = time.perf_counter()
    documents = [f for f in files if f.fmt in PARSERS and f.problem is None]
    parsed = parse_all(documents, workers)
    table_files = [f for f in files if (f.fmt in SHEET_FORMATS or f.fmt in ("csv", "tsv"))
                   and f.problem is None]
    read, tables_read = read_isolated(
        [f for f in files if f.fmt == "pdf" and f.problem is None], table_files, workers,
        limits,
        {"key_columns": keys, "detect_keys": detect_keys})
    parsed.update(read)
    timings["parse"] = time.perf_counter() - tick

    tick = time.perf_counter()
    chunks: list[pl.DataFrame] = []
    pending: list[tuple[DocumentFile, ParsedDoc, str | None]] = []
    done: list[str] = []
    skipped: list[SkippedFile] = []
    claimed: dict[str, str] = {}
    key_reports: list[KeyColumns] = []
    keys_seen: set[str] = set()
    any_language = False

    def add_table(doc: DocumentFile, doc_id: str, answer: dict[str, Any],
                  language: str | None) -> None:
        table = TableRows(answer["rows"], answer["summary"], tuple(answer["key_columns"]),
                          answer["key_source"])
        keys_seen.update(answer["columns"])
        if table.key_columns:
            key_reports.append(KeyColumns(doc_id, table.key_columns, table.key_source))
        chunks.append(with_content_hash(
            _with_neighbours(_table_chunk(doc, doc_id, table, language), neighbours)))

    def flush() -> None:
        if pending:
            chunks.append(with_content_hash(
                _with_neighbours(_documents_chunk(pending), neighbours)))
            pending.clear()

    for file in files:
        try:
            if file.problem is not None:
                raise InputError(file.problem)
            if file.fmt in _PASSTHROUGH:
                flush()
                frame = (
                    read_parquet(file.path, file.display) if file.fmt == "parquet"
                    else read_jsonl(read_bytes(file.path, file.display), file.display)
                )
                any_language |= "language" in frame.columns
                chunks.append(frame)
            elif file.fmt in PARSERS or file.fmt == "pdf":
                outcome = parsed[file.absolute]
                if isinstance(outcome, str):
                    raise InputError(outcome)
                claim(claimed, file)
                language = outcome.language or (matcher(file) if matcher else None)
                any_language |= language is not None
                pending.append((file, outcome, language))
            else:
                answer = tables_read[file.absolute]
                if "error" in answer:
                    raise InputError(str(answer["error"]))
                claim(claimed, file)
                flush()
                language = matcher(file) if matcher else None
                any_language |= language is not None
                for table in answer["tables"]:
                    doc_id = file.doc_id
                    if table["sheet"] is not None:
                        doc_id = f"{file.doc_id}#{table['sheet']}"
                        claim_id(claimed, doc_id, file)
                    add_table(file, doc_id, table, language)
            done.append(file.rel)
        except ArrowDedupError as err:
            if not skip_bad_files:
                raise
            reason = skipped_reason(err)
            log.info("skipped %s: %s", file.display, reason)
            skipped.append(SkippedFile(printable(file.rel), reason))
    flush()
    unknown = [k for k in keys or [] if k not in keys_seen]
    if unknown:
        tables = ", ".join(f.display for f in files
                           if f.fmt in SHEET_FORMATS or f.fmt in ("csv", "tsv"))
        raise InputError(
            f"{tables or 'no table'}: key column(s) {unknown} are in none of the tables "
            f"extracted (columns seen: {sorted(keys_seen)}); fix --key-columns"
        )

    segments = _concat(chunks)
    if "content_hash" in segments.columns and segments.get_column("content_hash").null_count():
        segments = with_content_hash(segments)  # passthrough rows mixed with extracted ones
    if not any_language and "language" in segments.columns:
        segments = segments.drop("language")
    if versioner is not None:
        segments = _with_versions(segments, files, versioner, claimed)
    try:
        validate(segments)
    except SchemaError as err:
        raise SchemaError(f"the extracted files together do not form one table: {err}") from err
    timings["assemble"] = time.perf_counter() - tick
    return ExtractResult(segments, tuple(done), tuple(skipped), timings, tuple(key_reports),
                         tuple(sorted(set(unsupported))), tuple(sorted(set(external))))


def with_content_hash(segments: pl.DataFrame) -> pl.DataFrame:
    """``content_hash`` (SPEC §1: XXH64 hex of the text) where it is missing; page furniture
    hashes its text with digits masked, so "Page 3 of 9" and "Page 4 of 9" are exact duplicates
    of each other and nothing else (SPEC: furniture is deduplicated with digits masked)."""
    from ..arrays.hashing import to_hex, xxh64

    if segments.height == 0:
        return segments.with_columns(pl.lit(None, dtype=pl.String).alias("content_hash"))
    furniture = segments.get_column("segment_type").cast(pl.String) == "page_furniture"
    texts = segments.get_column("text").cast(pl.String).fill_null("")
    if furniture.any():
        # The same rule as pdflayout.mask_digits (every run of digits -> "0"), columnar.
        texts = pl.select(pl.when(furniture).then(texts.str.replace_all(r"\d+", "0"))
                          .otherwise(texts)).to_series()
    hashes = pl.Series("content_hash", to_hex(xxh64(texts)), dtype=pl.String)
    if "content_hash" in segments.columns:
        hashes = segments.get_column("content_hash").cast(pl.String).fill_null(hashes)
    return segments.with_columns(hashes)


def _with_versions(segments: pl.DataFrame, files: list[DocumentFile],
                   versioner: Callable[[DocumentFile], str | None],
                   claimed: dict[str, str] | None = None) -> pl.DataFrame:
    """``doc_version`` per document from its path (null where the pattern does not match);
    ``claimed`` (doc_id → file path) adds the documents a file splits into (workbook sheets)."""
    by_rel = {f.rel: f for f in files}
    pairs = [(f.doc_id, f) for f in files]
    pairs += [(doc_id, by_rel[rel]) for doc_id, rel in (claimed or {}).items() if rel in by_rel]
    versions = pl.DataFrame({"doc_id": [d for d, _ in pairs],
                             "doc_version": [versioner(f) for _, f in pairs]},
                            schema={"doc_id": pl.String, "doc_version": pl.String})
    versions = versions.unique("doc_id", keep="first", maintain_order=True)
    if "doc_version" in segments.columns:
        segments = segments.drop("doc_version")
    return segments.join(versions, on="doc_id", how="left", maintain_order="left")


def _key_columns(key_columns: Sequence[str] | str | None) -> list[str] | None:
    if key_columns is None:
        return None
    names = key_columns.split(",") if isinstance(key_columns, str) else list(key_columns)
    names = [n.strip() for n in names if n.strip()]
    return names or None


def skipped_reason(err: BaseException | str) -> str:
    """Why a file was skipped under ``skip_bad_files``: the refusal without its hint to skip
    the file with --skip-bad-files, which the run was given."""
    return _SKIP_HINT_RE.sub("", str(err))


def _timestamp_us(value: dt.datetime | None) -> int | None:
    if value is None:
        return None
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _doc_level(values: list[Any], dtype: pl.DataType, index: np.ndarray) -> pl.Series:
    return pl.Series(values, dtype=dtype).gather(index)


def _documents_chunk(pending: list[tuple[DocumentFile, ParsedDoc, str | None]]) -> pl.DataFrame:
    """Parsed documents as one frame: per-segment lists concatenated, per-doc values gathered."""
    docs = [d for _, d, _ in pending]
    counts = np.array([len(d.texts) for d in docs], dtype=np.int64)
    index = np.repeat(np.arange(len(docs)), counts)
    starts = np.cumsum(counts) - counts
    position = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts)
    created = pl.Series([_timestamp_us(d.created_at) for d in docs], dtype=pl.Int64)

    def chain(attr: str) -> list[Any]:
        return list(itertools.chain.from_iterable(getattr(d, attr) for d in docs))

    frame = pl.DataFrame({
        "doc_id": _doc_level([f.doc_id for f, _, _ in pending], pl.String(), index),
        "text": pl.Series(chain("texts"), dtype=pl.String),
        "segment_type": pl.Series(chain("types"), dtype=pl.String),
        "position": pl.Series(position, dtype=pl.Int32),
        "section": pl.Series(chain("sections"), dtype=pl.String),
        "heading_level": pl.Series(chain("levels"), dtype=pl.Int8),
        "code_language": pl.Series([d.code_languages.get(i) for d in docs
                                    for i in range(len(d.texts))], dtype=pl.String),
        "title": _doc_level([d.title for d in docs], pl.String(), index),
        "doc_type": _doc_level([f.fmt for f, _, _ in pending], pl.String(), index),
        "language": _doc_level([lang for _, _, lang in pending], pl.String(), index),
        "created_at": created.gather(index).cast(pl.Datetime("us")).dt.replace_time_zone("UTC"),
        "_run": pl.Series(chain("runs"), dtype=pl.Int32),
        "page_start": pl.Series(chain("pages_start"), dtype=pl.Int32),
        "page_end": pl.Series(chain("pages_end"), dtype=pl.Int32),
        "_code_terms": pl.Series([d.code_terms.get(i) for d in docs
                                  for i in range(len(d.texts))], dtype=pl.List(pl.String)),
    })
    return _finish(frame)


def _table_chunk(file: DocumentFile, doc_id: str, table: TableRows,
                 language: str | None) -> pl.DataFrame:
    """One ``table_row`` per row, then the summary segment (last, so row ids stay
    ``{doc_id}#{row}``)."""
    rows = table.rows.with_columns(pl.lit("table_row", dtype=pl.String).alias("segment_type"))
    if table.summary is not None:
        head = pl.DataFrame({
            "text": [table.summary], "keys": pl.Series([None], dtype=pl.List(pl.String)),
            "row_values": pl.Series([None], dtype=pl.String),
            "segment_type": ["table_summary"],
        })
        rows = pl.concat([rows.select(head.columns), head])
    frame = rows.select(
        pl.lit(doc_id, dtype=pl.String).alias("doc_id"),
        pl.col("text"),
        pl.col("segment_type"),
        pl.int_range(pl.len(), dtype=pl.Int32).alias("position"),
        pl.lit(None, dtype=pl.String).alias("section"),
        pl.lit(None, dtype=pl.Int8).alias("heading_level"),
        pl.lit(None, dtype=pl.String).alias("title"),
        pl.lit(file.fmt, dtype=pl.String).alias("doc_type"),
        pl.lit(language, dtype=pl.String).alias("language"),
        pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("created_at"),
        # The summary stands apart from the rows: it is nobody's neighbour.
        pl.when(pl.col("segment_type") == "table_summary").then(-1).otherwise(0)
        .cast(pl.Int32).alias("_run"),
        pl.col("keys"),
        pl.col("row_values"),
    )
    return _finish(frame)


def _finish(frame: pl.DataFrame) -> pl.DataFrame:
    """Add the ids (``{doc_id}#{position}``) and any missing column, in :data:`SCHEMA` order."""
    frame = frame.with_columns(
        segment_id=pl.concat_str(pl.col("doc_id"), pl.lit("#"), pl.col("position").cast(pl.String))
    )
    missing = [
        pl.lit(None, dtype=dtype).alias(name)
        for name, dtype in SCHEMA.items() if name not in frame.columns and name != FACT_COLUMN
    ]
    frame = frame.with_columns(missing)
    frame = frame.with_columns(fact_signatures(
        frame.get_column("text"), segment_type=frame.get_column("segment_type"),
        language=frame.get_column("language"),
        code_terms=frame.get_column("_code_terms") if "_code_terms" in frame.columns else None,
        sections=(frame.get_column("doc_id"), frame.get_column("section"))))
    return frame.select([*SCHEMA, "_run"])


def _with_neighbours(frame: pl.DataFrame, count: int) -> pl.DataFrame:
    """Ids of up to ``count`` segments before / after each one in the same section run."""
    if count == 0 or frame.height == 0:
        empty = pl.lit([], dtype=pl.List(pl.String))
        return frame.with_columns(neighbours_before=empty, neighbours_after=empty).drop("_run")
    group = ["doc_id", "_run"]
    ids = pl.col("segment_id")
    return frame.with_columns(
        neighbours_before=pl.concat_list(
            [ids.shift(k).over(group) for k in range(1, count + 1)]
        ).list.drop_nulls(),
        neighbours_after=pl.concat_list(
            [ids.shift(-k).over(group) for k in range(1, count + 1)]
        ).list.drop_nulls(),
    ).drop("_run")


def _concat(chunks: list[pl.DataFrame]) -> pl.DataFrame:
    if not chunks:
        return pl.DataFrame(schema=SCHEMA)
    if len(chunks) == 1:
        return chunks[0]
    try:
        return pl.concat(chunks, how="diagonal_relaxed")
    except pl.exceptions.PolarsError as err:
        raise SchemaError(
            f"the passthrough tables and the extracted segments have incompatible column types "
            f"({err}); extract them separately"
        ) from err
