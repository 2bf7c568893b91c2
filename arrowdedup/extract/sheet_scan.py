"""Measure a workbook before it is read: cells, columns and text, from its XML, streamed.

The spreadsheet reader (calamine) materialises each sheet as the rectangle from its first to its
last cell reference, every empty cell included, and copies a shared string into every cell
that points at it. So a 2 KB xlsx with cells at A1 and XFD1048576 costs 17 billion cells, and
100k cells pointing at one 20 KB string cost 2 GB. This module reads the same cell references
from the zipped XML, in chunks (memory bounded by the chunk, time by the limits: it stops at
the first limit passed), and reports the first limit a workbook passes, before anything is
materialised. The sheet's declared ``<dimension>`` is not trusted: the reader ignores it, and
so does the scan.

xlsx/xlsm (OOXML) and ods (ODF) are scanned; xls (a binary format) is bounded by the worker's
memory and time limits and by the check of the tables read
(:func:`.table_worker.frame_problem`). The XML itself may expand to at most
``XML_PER_TEXT`` times the text limit (a zip bomb of markup holds no text but takes time).
"""

from __future__ import annotations

import html
import operator
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np

from .limits import ExtractLimits, mb, over_limit

_CHUNK = 4 << 20
XML_PER_TEXT = 16  # bytes of sheet XML allowed per byte of the text limit
_PREFIX = rb"(?:[A-Za-z_][\w.-]*:)?"  # a namespace prefix (<x:si>), as some writers emit
_ROOT_PREFIX = re.compile(rb"<([A-Za-z_][\w.-]*:)?worksheet\b")
_SHARED_ITEM = re.compile(rb"<" + _PREFIX + rb"si(?:\s[^>]*)?(?:/>|>(.*?)</" + _PREFIX + rb"si>)",
                          re.DOTALL)
_RELATION = re.compile(rb"<[^>]*?Type=\"[^\"]*/worksheet\"[^>]*>")
_TARGET = re.compile(rb"\sTarget=\"([^\"]+)\"")
_ID = re.compile(rb"\sId=\"([^\"]+)\"")
_SHEET_TAG = re.compile(rb"<" + _PREFIX + rb"sheet\s[^>]*>")
_RID = re.compile(rb"\s[\w.-]*:?id=\"([^\"]+)\"")
_NAME = re.compile(rb"\sname=\"([^\"]*)\"")
_SHARED_REF = re.compile(rb't="s"[^>]*>\s*<v>\s*([0-9]{1,12})\s*<')
_SMALL = 16 << 20  # the workbook and its relations: bigger is not a workbook we read
_ODS_ROW = re.compile(rb"<table:table-row(?=[\s/>])([^>]*?)(?:/>|>(.*?)</table:table-row>)",
                      re.DOTALL)
_ODS_CELL = re.compile(rb"<table:(?:covered-)?table-cell\b([^>]*?)(?:/>|>(.*?)"
                       rb"</table:(?:covered-)?table-cell>)", re.DOTALL)
_ODS_REPEAT_COLS = re.compile(rb"table:number-columns-repeated=\"([0-9]{1,12})\"")
_ODS_REPEAT_ROWS = re.compile(rb"table:number-rows-repeated=\"([0-9]{1,12})\"")
_ODS_TABLE_END = re.compile(rb"</table:table>")


class _Tally:
    """The running cost of one workbook; ``problem`` is set at the first limit passed."""

    def __init__(self, display: str, limits: ExtractLimits) -> None:
        self.display = display
        self.limits = limits
        self.cells = 0
        self.text = 0
        self.xml = 0
        self.problem: str | None = None

    def add_xml(self, n: int) -> None:
        self.xml += n
        bound = XML_PER_TEXT * self.limits.max_text_bytes
        if not self.problem and self.xml > bound:
            self.problem = over_limit(
                self.display, f"its sheets expand to more than {mb(bound)} of XML "
                f"({XML_PER_TEXT} × the text limit)", "max_text_bytes",
                mb(self.limits.max_text_bytes))

    def sheet(self, name: str, rows: int, columns: int) -> None:
        if self.problem:
            return
        if columns > self.limits.max_columns:
            self.problem = over_limit(
                self.display, f"sheet {name} has {columns:,} columns", "max_columns",
                f"{self.limits.max_columns:,}")
            return
        area = rows * columns
        if self.cells + area > self.limits.max_cells:
            self.problem = over_limit(
                self.display, f"sheet {name} spans {area:,} cells ({rows:,} rows × "
                f"{columns:,} columns, empty cells included)", "max_cells",
                f"{self.limits.max_cells:,}")
            return
        self.cells += area

    def add_text(self, n: int) -> None:
        self.text += n
        if not self.problem and self.text > self.limits.max_text_bytes:
            self.problem = over_limit(
                self.display, f"its cells hold more than {mb(self.limits.max_text_bytes)} of "
                "text (shared strings counted in every cell that uses them)",
                "max_text_bytes", mb(self.limits.max_text_bytes))


def scan_workbook(path: Path, display: str, fmt: str, limits: ExtractLimits) -> str | None:
    """The first limit the workbook passes, as a one-line message, or ``None`` (within the
    limits, or not a zip: then the reader reports what is wrong with it)."""
    if fmt not in ("xlsx", "xlsm", "ods"):
        return None
    try:
        with zipfile.ZipFile(path) as z:
            tally = _Tally(display, limits)
            if fmt == "ods":
                _scan_ods(z, tally)
            else:
                _scan_xlsx(z, tally)
            return tally.problem
    except (zipfile.BadZipFile, OSError, EOFError, KeyError, ValueError, RuntimeError,
            NotImplementedError):
        return None  # unreadable as a zip: the reader's own error says so


def _chunks(stream: IO[bytes], ends: tuple[bytes, ...]) -> Iterator[bytes]:
    """The stream in pieces of about ``_CHUNK`` bytes, each cut after the last of ``ends``
    it holds (so no element of interest is split), else after its last ``>``."""
    carry = b""
    while True:
        block = stream.read(_CHUNK)
        if not block:
            if carry:
                yield carry
            return
        data = carry + block
        cut = max(data.rfind(end) + len(end) if data.rfind(end) >= 0 else -1 for end in ends)
        if cut <= 0:
            cut = data.rfind(b">") + 1
        if cut <= 0 and len(data) < 4 * _CHUNK:
            carry = data
            continue
        if cut <= 0:
            cut = len(data)
        yield data[:cut]
        carry = data[cut:]


def _column_number(letters: bytes) -> int:
    n = 0
    for ch in letters.upper():
        n = n * 26 + ch - 64
    return n


def _shared_lengths(z: zipfile.ZipFile, names: set[str], tally: _Tally) -> np.ndarray:
    """The byte length of every shared string, in order (its markup included: a bound)."""
    name = next((n for n in names if n.lower() == "xl/sharedstrings.xml"), None)
    lengths: list[int] = []
    if name is None:
        return np.zeros(0, dtype=np.int64)
    size = 0
    with z.open(name) as stream:
        for chunk in _chunks(stream, (b"</si>", b"/>")):
            size += len(chunk)
            if size > tally.limits.max_text_bytes:
                tally.add_text(size)  # the table of strings alone is past the limit
                break
            lengths.extend(map(len, _SHARED_ITEM.findall(chunk)))
    return np.array(lengths, dtype=np.int64)


def _sheet_parts(z: zipfile.ZipFile, names: set[str]) -> list[tuple[str, str]]:
    """(part, sheet name) of every worksheet: those the workbook's relations name, then any
    other part under worksheets/ (named after its file)."""
    found: dict[str, str] = {}
    rels = next((n for n in names if n.lower() == "xl/_rels/workbook.xml.rels"), None)
    book = next((n for n in names if n.lower() == "xl/workbook.xml"), None)
    titles: dict[bytes, str] = {}
    if book is not None and z.getinfo(book).file_size < _SMALL:
        for tag in _SHEET_TAG.findall(z.read(book)):
            rid, title = _RID.search(tag), _NAME.search(tag)
            if rid and title:
                titles[rid.group(1)] = html.unescape(title.group(1).decode("utf-8", "replace"))
    if rels is not None and z.getinfo(rels).file_size < _SMALL:
        for rel in _RELATION.findall(z.read(rels)):
            target, rid = _TARGET.search(rel), _ID.search(rel)
            if target is None:
                continue
            resolved = _resolve(target.group(1).decode("utf-8", "replace"))
            if resolved in names and resolved not in found:
                found[resolved] = titles.get(rid.group(1) if rid else b"") or \
                    resolved.rsplit("/", 1)[-1].removesuffix(".xml")
    for n in sorted(names):
        if n.lower().startswith("xl/worksheets/") and n.lower().endswith(".xml") \
                and n not in found:
            found[n] = n.rsplit("/", 1)[-1].removesuffix(".xml")
    return list(found.items())


def _resolve(target: str) -> str:
    """A relation's target (relative to xl/, or absolute from the package root) as a name."""
    path = target[1:] if target.startswith("/") else f"xl/{target}"
    parts: list[str] = []
    for piece in path.split("/"):
        if piece == "..":
            if parts:
                parts.pop()
        elif piece and piece != ".":
            parts.append(piece)
    return "/".join(parts)


def _scan_xlsx(z: zipfile.ZipFile, tally: _Tally) -> None:
    names = {i.filename for i in z.infolist()}
    lengths = _shared_lengths(z, names, tally)
    if tally.problem:
        return
    for part, name in _sheet_parts(z, names):
        _scan_sheet(z, part, name, lengths, tally)
        if tally.problem:
            return


def _count_tags(data: bytes, tag: bytes) -> int:
    """Start tags ``<tag`` (followed by a space, ``/`` or ``>``) in ``data``."""
    return sum(data.count(tag + end) for end in (b" ", b">", b"/"))


def _text_between_tags(a: np.ndarray) -> int:
    """Bytes outside ``<…>`` (cell values and inline text, with some indentation)."""
    opens = np.flatnonzero(a == 60)
    closes = np.flatnonzero(a == 62)
    if not len(opens) or not len(closes):
        return 0
    if len(opens) == len(closes) and opens[0] < closes[0]:
        # Tags alternate (no ">" in the text): the bytes inside them are a sum of spans.
        return len(a) - int(closes.sum() - opens.sum()) - len(opens)
    before = np.searchsorted(closes, opens) - 1
    gaps = np.where(before >= 0, opens - closes[np.maximum(before, 0)] - 1, 0)
    return int(np.maximum(gaps, 0).sum())


def _shared_text(chunk: bytes, pattern: re.Pattern[bytes], lengths: np.ndarray) -> int:
    """Bytes of the shared strings the cells of ``chunk`` point at, each counted per cell."""
    if not len(lengths) or b't="s"' not in chunk:
        return 0
    index = np.array(pattern.findall(chunk), dtype=np.int64)
    return int(lengths[index[index < len(lengths)]].sum())


_REFERENCE = re.compile(rb' r="([A-Za-z]{1,8})([0-9]{1,12})"')


def _scan_sheet(z: zipfile.ZipFile, part: str, name: str, lengths: np.ndarray,
                tally: _Tally) -> None:
    letters: set[bytes] = set()
    low_row = 1 << 62
    high_row = cells = refs_total = rows_seen = width = height = 0
    limits = tally.limits
    prefix: bytes | None = None
    shared = _SHARED_REF
    with z.open(part) as stream:
        for chunk in _chunks(stream, (b"</row>", b"</c>")):
            if prefix is None:
                root = _ROOT_PREFIX.search(chunk)
                prefix = (root.group(1) or b"") if root else b""
                if prefix:
                    shared = re.compile(_SHARED_REF.pattern.replace(b"<v>", b"<" + prefix + b"v>"))
            refs = _REFERENCE.findall(chunk)
            refs_total += len(refs)
            cells += _count_tags(chunk, b"<" + prefix + b"c")
            rows_seen += _count_tags(chunk, b"<" + prefix + b"row")
            if refs:
                letters.update(map(operator.itemgetter(0), refs))
                numbers = [int(n) for n in set(map(operator.itemgetter(1), refs))]
                low_row, high_row = min(low_row, min(numbers)), max(high_row, max(numbers))
            tally.add_xml(len(chunk))
            a = np.frombuffer(chunk, np.uint8)
            tally.add_text(_text_between_tags(a) + _shared_text(chunk, shared, lengths))
            columns = {_column_number(c) for c in letters}
            width = max(columns) - min(columns) + 1 if columns else 0
            # A cell without a reference follows the previous one: bound them by their count.
            width = max(width, cells - refs_total)
            height = max(high_row - low_row + 1 if high_row else 0, rows_seen)
            if cells > limits.max_cells or width > limits.max_columns \
                    or height * width > limits.max_cells or tally.problem:
                break
    tally.sheet(name, height, width)
    if not tally.problem and cells > limits.max_cells:
        tally.sheet(name, cells, 1)


def _scan_ods(z: zipfile.ZipFile, tally: _Tally) -> None:
    """ODF repeats an element with ``number-columns-repeated`` / ``number-rows-repeated``;
    repeated *empty* cells and rows (a sheet LibreOffice writes ends with a million of them)
    cost nothing, repeated cells with a value cost each repeat."""
    if "content.xml" not in {i.filename for i in z.infolist()}:
        return
    sheet = row_index = height = width = 0
    limits = tally.limits
    with z.open("content.xml") as stream:
        for chunk in _chunks(stream, (b"</table:table-row>", b"</table:table>")):
            tally.add_xml(len(chunk))
            if tally.problem:
                return
            events = sorted([(m.start(), m) for m in _ODS_ROW.finditer(chunk)]
                            + [(m.start(), None) for m in _ODS_TABLE_END.finditer(chunk)],
                            key=lambda e: e[0])
            for _, row in events:
                if row is None:  # the end of a sheet
                    sheet += 1
                    tally.sheet(str(sheet), height, width)
                    row_index = height = width = 0
                    continue
                repeat = _repeat(_ODS_REPEAT_ROWS, row.group(1))
                col = last = text = 0
                for cell in _ODS_CELL.finditer(row.group(2) or b""):
                    span = _repeat(_ODS_REPEAT_COLS, cell.group(1))
                    col += span
                    if cell.group(2):  # holds a value or text
                        last = col
                        text += span * len(cell.group(2))
                if last:
                    height = row_index + repeat
                    width = max(width, last)
                row_index += repeat
                if height * width > limits.max_cells or width > limits.max_columns:
                    tally.sheet(str(sheet + 1), height, width)
                    return
                if last:
                    tally.add_text(repeat * text)
                if tally.problem:
                    return
    if height:
        tally.sheet(str(sheet + 1), height, width)


def _repeat(pattern: re.Pattern[bytes], attrs: bytes) -> int:
    found = pattern.search(attrs)
    return int(found.group(1)) if found else 1
