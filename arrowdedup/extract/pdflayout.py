"""PDF text layer to segments: lines with their geometry (PDFium), reading order, blocks.

This module imports nothing from arrowdedup (only the standard library and pypdfium2), so an
extraction worker can load it from its file without importing the package: a worker starts in
~0.2 s instead of ~2 s. It returns plain dicts and lists (cheap to pickle across processes).

The steps, per document:

1. **Lines.** PDFium's text of each page, split at its line breaks; a line made of several
   text objects separated by a gap wider than :data:`GAP_EM` em is split into pieces (two
   columns written side by side, table cells). Each piece keeps its box, font size and
   whether it is bold (its first and last characters' fonts have weight >= 600, a force-bold
   flag, or "Bold" in the font name).
2. **Page furniture.** A line among the first or last :data:`FURNITURE_LINES` of a page, inside
   the top or bottom :data:`FURNITURE_MARGIN` of it, whose text with digits masked recurs on
   at least two pages and on more than half of them (running headers, footers, "Page N of M"),
   or that is a bare page number, is typed ``page_furniture``. Two pages are enough.
3. **Reading order.** A page with at least :data:`COLUMN_MIN_LINES` lines wholly left and as
   many wholly right of its middle is read in bands: full-width lines in place, and between
   them the left column top to bottom, then the right column.
4. **Tables.** Rows of three or more pieces on one baseline whose left edges line up with the
   row above form a table; its first row is the header; each further row becomes a
   ``table_row`` "Header: value; …".
5. **Blocks.** Lines join into paragraphs until the vertical pitch grows past the body's
   normal line pitch, the font changes to a heading, a list bullet starts, or a page / column
   ends on a full stop. A heading is a line at least :data:`HEADING_RATIO` times the body font
   size, or a short bold line at body size; levels follow the distinct heading styles, largest
   first. Words hyphenated at a line end are joined when the next line starts in lower case;
   ligatures, soft hyphens, non-breaking and zero-width spaces are normalised.
"""

from __future__ import annotations

import ctypes
import itertools
import re
import statistics
import unicodedata
from collections import Counter, defaultdict
from typing import Any

GAP_EM = 0.9  # a gap between two text objects wider than this many em splits a line
FURNITURE_LINES = 2
FURNITURE_MARGIN = 0.10
FURNITURE_MAX_CHARS = 120
COLUMN_MIN_LINES = 3
HEADING_RATIO = 1.12
BOLD_HEADING_MAX_CHARS = 120
NO_TEXT_LAYER = "no text layer; OCR is not supported"

_LIGATURES = str.maketrans({
    "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
    "\ufb05": "st", "\ufb06": "st", "\u00a0": " ", "\u2009": " ", "\u202f": " ",
    "\u2002": " ", "\u2003": " ", "\u200b": "", "\u200c": "", "\u200d": "", "\ufeff": "",
    "\u00ad": "\u00ad", "\x02": "\u00ad", "\ufffe": "\u00ad", "\ufffd": "",
})
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SPACES = re.compile(r"[ \t]+")
_DIGITS = re.compile(r"\d+")
_PAGE_NUMBER = re.compile(r"(?i)^(?:page\s*)?[-–—]?\s*\d+\s*[-–—]?(?:\s*(?:of|/)\s*\d+)?$")
_SYMBOL_BULLET = re.compile(r"^[•◦▪‣∙·●○■□\-–*]\s+")
_BULLET = re.compile(r"^(?:[•◦▪‣∙·●○■□\-–*]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s+")
_ENDS_SENTENCE = re.compile(r"[.!?:;。！？)\]\"”']$")
_FORCE_BOLD = 0x40000


def clean(text: str) -> str:
    """Ligatures expanded, Unicode noise dropped, NFC, spaces collapsed."""
    if not text.isascii() or "\x02" in text:  # str.translate is slow: only when needed
        text = unicodedata.normalize("NFC", text.translate(_LIGATURES))
    return _SPACES.sub(" ", _CONTROL.sub("", text)).strip()


def _clean(piece: dict[str, Any]) -> str:
    """:func:`clean` of a piece's text, computed once."""
    text = piece.get("clean")
    if text is None:
        text = piece["clean"] = clean(piece["text"])
    return text


def mask_digits(text: str) -> str:
    """The text with every run of digits replaced by "0" (page furniture is compared so)."""
    return _DIGITS.sub("0", text)


# -- 1. lines -------------------------------------------------------------------------------


def _font(raw: Any, textpage: Any, index: int, buffer: Any) -> tuple[float, bool]:
    size = float(raw.FPDFText_GetFontSize(textpage, index))
    weight = int(raw.FPDFText_GetFontWeight(textpage, index))
    flags = ctypes.c_int(0)
    raw.FPDFText_GetFontInfo(textpage, index, buffer, len(buffer), ctypes.byref(flags))
    name = buffer.value.decode("latin-1", "replace").lower()
    bold = weight >= 600 or bool(flags.value & _FORCE_BOLD) or any(
        w in name for w in ("bold", "black", "heavy", "semibold", "demi"))
    return size, bold


def _page_lines(page: Any, number: int, raw: Any) -> tuple[list[dict[str, Any]], int]:
    """The pieces of one page (dicts) and its count of non-space characters."""
    width, height = page.get_size()
    textpage = page.get_textpage()
    try:
        text = textpage.get_text_range()
        n = textpage.count_chars()
        if len(text) != n:  # never seen; without a 1:1 index map, keep the text, lose fonts
            text = text[:n]
        ink = len("".join(text.split()))  # non-space characters
        buffer = ctypes.create_string_buffer(128)
        pieces: list[dict[str, Any]] = []
        for match in re.finditer(r"[^\r\n]+", text):
            start, end = match.start(), match.end()
            while end > start and text[end - 1].isspace():
                end -= 1
            while start < end and text[start].isspace():
                start += 1
            if start >= end:
                continue
            rects = [textpage.get_rect(i) for i in range(textpage.count_rects(start, end - start))]
            if not rects:
                continue
            size, bold = _font(raw, textpage, start, buffer)
            if len(rects) == 1 or size <= 0 or not _has_gap(rects, GAP_EM * size):
                left = min(r[0] for r in rects)
                bottom = min(r[1] for r in rects)
                right = max(r[2] for r in rects)
                top = max(r[3] for r in rects)
                parts = [(start, end, (left, height - top, right, height - bottom))]
            else:
                parts = _split_line(textpage, start, end, text, GAP_EM * size, height)
            for a, b, (x0, y0, x1, y1) in parts:
                if a != start:
                    size, bold = _font(raw, textpage, a, buffer)
                if bold and b - 1 > a:
                    # A bold lead-in ("Note: …") does not make a bold line: both ends must be.
                    bold = _font(raw, textpage, b - 1, buffer)[1]
                pieces.append({
                    "text": text[a:b], "page": number, "x0": x0, "x1": x1, "top": y0,
                    "bottom": y1, "size": round(size, 1), "bold": bold, "width": width,
                    "height": height,
                })
        return pieces, ink
    finally:
        textpage.close()


def _has_gap(rects: list[tuple[float, float, float, float]], gap: float) -> bool:
    """Whether consecutive text rectangles of a line jump right, back left or off the line
    (only then are its characters' boxes looked at; font changes alone do not split)."""
    for (_, b0, r0, t0), (l1, b1, _, t1) in itertools.pairwise(rects):
        if l1 - r0 > gap or l1 < r0 - gap or abs((b0 + t0) / 2 - (b1 + t1) / 2) > gap:
            return True
    return False


def _split_line(
    textpage: Any, start: int, end: int, text: str, gap: float, height: float
) -> list[tuple[int, int, tuple[float, float, float, float]]]:
    """Pieces of a line of several text objects: (start, end, box from the top of the page).

    A piece ends where the next visible character starts ``gap`` right of the last one, jumps
    back left, or sits on another baseline (PDFium joins lines of two columns written side by
    side, in either order).
    """
    parts: list[tuple[int, int, tuple[float, float, float, float]]] = []
    first = start
    box: list[float] | None = None
    last_right = last_mid = 0.0
    last_visible = start
    for i in range(start, end):
        if text[i].isspace():
            continue
        left, bottom, right, top = textpage.get_charbox(i)
        mid = (bottom + top) / 2
        if box is not None and (left - last_right > gap or left < last_right - gap
                                or abs(mid - last_mid) > gap):
            parts.append((first, last_visible + 1, (box[0], height - box[3], box[2],
                                                    height - box[1])))
            first, box = i, None
        if box is None:
            box = [left, bottom, right, top]
        else:
            box = [min(box[0], left), min(box[1], bottom), max(box[2], right), max(box[3], top)]
        last_right, last_mid, last_visible = right, mid, i
    if box is not None:
        parts.append((first, last_visible + 1, (box[0], height - box[3], box[2],
                                                height - box[1])))
    return parts


# -- 2. page furniture ------------------------------------------------------------------------


def _furniture_key(piece: dict[str, Any]) -> tuple[str, str] | None:
    h = piece["height"]
    if len(piece["text"]) > FURNITURE_MAX_CHARS:
        return None
    if piece["bottom"] <= FURNITURE_MARGIN * h:
        zone = "top"
    elif piece["top"] >= (1 - FURNITURE_MARGIN) * h:
        zone = "bottom"
    else:
        return None
    return zone, mask_digits(_clean(piece).lower())


def mark_furniture(pages: list[list[dict[str, Any]]]) -> None:
    """Set ``furniture`` on the pieces of running headers, footers and page numbers."""
    candidates: list[tuple[dict[str, Any], tuple[str, str]]] = []
    for pieces in pages:
        by_y = sorted(range(len(pieces)), key=lambda i: (pieces[i]["top"], pieces[i]["x0"]))
        ends = set(by_y[:FURNITURE_LINES]) | set(by_y[-FURNITURE_LINES:])
        for i in sorted(ends):
            key = _furniture_key(pieces[i])
            if key is not None:
                candidates.append((pieces[i], key))
    on_pages: dict[tuple[str, str], set[int]] = defaultdict(set)
    for piece, key in candidates:
        on_pages[key].add(piece["page"])
    total = len(pages)
    for piece, key in candidates:
        seen = len(on_pages[key])
        if (seen >= 2 and seen * 2 > total) or _PAGE_NUMBER.match(_clean(piece)):
            piece["furniture"] = True


# -- 3. reading order and 4. tables ----------------------------------------------------------


def _reading_order(pieces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not pieces:
        return pieces
    mid = pieces[0]["width"] / 2
    tol = pieces[0]["width"] * 0.01
    left = [p for p in pieces if p["x1"] <= mid + tol]
    right = [p for p in pieces if p["x0"] >= mid - tol]
    if len(left) < COLUMN_MIN_LINES or len(right) < COLUMN_MIN_LINES:
        return pieces
    ordered: list[dict[str, Any]] = []
    band: list[dict[str, Any]] = []

    def flush() -> None:
        ordered.extend(sorted((p for p in band if p["x1"] <= mid + tol), key=_by_y))
        ordered.extend(sorted((p for p in band if not p["x1"] <= mid + tol), key=_by_y))
        band.clear()

    for p in sorted(pieces, key=_by_y):
        if p["x1"] > mid + tol and p["x0"] < mid - tol and not p.get("table"):
            flush()
            ordered.append(p)
        else:
            band.append(p)
    flush()
    return ordered


def _by_y(p: dict[str, Any]) -> tuple[float, float]:
    return (round(p["top"], 1), p["x0"])


def _mark_tables(pieces: list[dict[str, Any]]) -> None:
    """Group pieces into rows by baseline; runs of aligned rows of 3+ cells are tables."""
    rows: list[list[dict[str, Any]]] = []
    for p in sorted((p for p in pieces if not p.get("furniture")), key=_by_y):
        if rows and abs(rows[-1][0]["top"] - p["top"]) <= 0.3 * max(p["size"], 1.0):
            rows[-1].append(p)
        else:
            rows.append([p])
    table: list[list[dict[str, Any]]] = []

    def close() -> None:
        if len(table) >= 2:
            header = [_clean(c) for c in table[0]]
            for cell in table[0]:
                cell["table"] = "header"
            for row in table[1:]:
                row[0]["table_row"] = "; ".join(
                    f"{h}: {_clean(c)}" if h else _clean(c)
                    for h, c in zip(header, row, strict=True))
                for cell in row:
                    cell["table"] = "cell"
        table.clear()

    for row in rows:
        row.sort(key=lambda c: c["x0"])
        aligned = bool(table) and len(row) == len(table[0]) and all(
            abs(a["x0"] - b["x0"]) <= 0.6 * max(a["size"], 1.0)
            for a, b in zip(row, table[0], strict=True))
        if len(row) >= 3 and (not table or aligned):
            table.append(row)
            continue
        close()
        if len(row) >= 3:
            table.append(row)
    close()


# -- 5. blocks -----------------------------------------------------------------------------


def _join(a: str, b: str) -> str:
    """Join two lines of one paragraph, undoing a hyphenation at the end of ``a``."""
    if a.endswith("\u00ad"):
        return a[:-1] + b
    if len(a) >= 2 and a[-1] in "-\u2010" and a[-2].isalnum():
        # "collec-" + "ted": a hyphenation; "Open-" + "Telemetry", "x86-" + "64": a compound.
        return a[:-1] + b if a[-2].isalpha() and b[:1].islower() else a + b
    return f"{a} {b}"


def _ends_block(text: str) -> bool:
    return bool(_ENDS_SENTENCE.search(text))


def parse_pdf(path: str, display: str) -> dict[str, Any]:
    """Segments of one PDF as parallel lists, or ``{"error": message}``."""
    try:
        import pypdfium2 as pdfium
        import pypdfium2.raw as raw
    except ImportError:
        return {"error": f"{display}: reading PDFs needs the package 'pypdfium2'; install it "
                         "with: pip install pypdfium2"}
    try:
        document = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as err:
        message = str(err).lower()
        if "password" in message:
            return {"error": f"{display}: the PDF is encrypted (it needs a password); decrypt "
                             "it first (e.g. qpdf --decrypt), or skip it with --skip-bad-files"}
        return {"error": f"{display}: not a readable PDF ({err}); the file is corrupt or "
                         "truncated: re-export it, or skip it with --skip-bad-files"}
    except OSError as err:
        return {"error": f"{display}: cannot read the file ({err.strerror or err}); check that "
                         "it exists and is readable, or skip it with --skip-bad-files"}
    try:
        pages: list[list[dict[str, Any]]] = []
        ink = 0
        for number in range(1, len(document) + 1):
            page = document[number - 1]
            try:
                pieces, count = _page_lines(page, number, raw)
            finally:
                page.close()
            pages.append(pieces)
            ink += count
    except pdfium.PdfiumError as err:
        return {"error": f"{display}: the PDF is damaged ({err}); re-export it, or skip it "
                         "with --skip-bad-files"}
    finally:
        document.close()
    if ink == 0:
        return {"error": f"{display}: {NO_TEXT_LAYER} (the pages hold only images or "
                         "drawings); run OCR on it first, or skip it with --skip-bad-files"}
    mark_furniture(pages)
    for pieces in pages:
        _mark_tables(pieces)
    flow = [p for pieces in pages for p in _reading_order(pieces)]
    return _blocks(flow, len(pages))


def _styles(flow: list[dict[str, Any]]) -> tuple[float, bool, float]:
    """Body font size and boldness (by characters) and the body's normal line pitch."""
    weights: Counter[tuple[float, bool]] = Counter()
    for p in flow:
        if not p.get("furniture") and not p.get("table"):
            weights[(p["size"], p["bold"])] += len(p["text"])
    if not weights:
        return 10.0, False, 12.0
    (size, bold), _ = max(weights.items(), key=lambda kv: (kv[1], -kv[0][0]))
    pitches = [
        b["top"] - a["top"] for a, b in itertools.pairwise(flow)
        if a["page"] == b["page"] and a["size"] == size == b["size"]
        and 0 < b["top"] - a["top"] < 3 * size
    ]
    pitch = statistics.median(pitches) if pitches else 1.2 * size
    return size, bold, pitch


def _blocks(flow: list[dict[str, Any]], page_count: int) -> dict[str, Any]:
    body, body_bold, pitch = _styles(flow)

    def heading_style(p: dict[str, Any]) -> tuple[float, bool] | None:
        text = _clean(p)
        if p.get("furniture") or p.get("table") or not text or len(text) > 200:
            return None
        if p["size"] >= HEADING_RATIO * body:
            return (p["size"], p["bold"])
        if p["bold"] and not body_bold and len(text) <= BOLD_HEADING_MAX_CHARS \
                and not _ENDS_SENTENCE.search(text[-1:]) and p["size"] >= 0.95 * body:
            return (p["size"], True)
        return None

    styles = sorted({s for p in flow if (s := heading_style(p)) is not None},
                    key=lambda s: (-s[0], not s[1]))
    level_of = {s: i + 1 for i, s in enumerate(styles)}

    out: dict[str, list[Any]] = {k: [] for k in (
        "texts", "types", "sections", "levels", "runs", "page_start", "page_end")}
    path: list[tuple[int, str]] = []
    run = 0
    current: dict[str, Any] | None = None
    # Furniture met inside an open block (a footer between two pages of one paragraph) is
    # written after that block, so the block reads on.
    held: list[dict[str, Any]] = []

    def emit(block: dict[str, Any] | None) -> None:
        add(block)
        for f in held:
            add(f)
        held.clear()

    def add(block: dict[str, Any] | None) -> None:
        nonlocal run
        if block is None:
            return
        text = clean(block["text"].replace("\u00ad", ""))
        if not text:
            return
        if block["type"] == "heading":
            while path and path[-1][0] >= block["level"]:
                path.pop()
            path.append((block["level"], text))
            run += 1
        out["texts"].append(text)
        out["types"].append(block["type"])
        out["sections"].append(" > ".join(t for _, t in path) if path else None)
        out["levels"].append(block.get("level"))
        # Page furniture stands apart: it is nobody's neighbour (its own run each).
        out["runs"].append(-len(out["texts"]) if block["type"] == "page_furniture" else run)
        out["page_start"].append(block["page_start"])
        out["page_end"].append(block["page_end"])

    for p in flow:
        text = _clean(p)
        if not text:
            continue
        if p.get("furniture"):
            held.append({"type": "page_furniture", "text": text, "page_start": p["page"],
                         "page_end": p["page"]})
            continue
        if p.get("table") == "header" or (p.get("table") == "cell" and "table_row" not in p):
            continue
        if "table_row" in p:
            emit(current)
            current = None
            emit({"type": "table_row", "text": p["table_row"], "page_start": p["page"],
                  "page_end": p["page"]})
            continue
        style = heading_style(p)
        if style is not None:
            if current is not None and current["type"] == "heading" \
                    and current["style"] == style and current["page_end"] == p["page"] \
                    and 0 < p["top"] - current["last"]["top"] <= 1.6 * p["size"]:
                current["text"] = f"{current['text']} {text}"  # a heading wrapped on 2 lines
                current["last"] = p
                continue
            emit(current)
            current = {"type": "heading", "text": text, "level": level_of[style],
                       "style": style, "page_start": p["page"], "page_end": p["page"],
                       "last": p}
            continue
        bullet = bool(_BULLET.match(text))
        if current is not None and current["type"] in ("paragraph", "list_item") \
                and not bullet and _continues(current, p, pitch):
            current["text"] = _join(current["text"], text)
            current["last"] = p
            current["page_end"] = p["page"]
            continue
        emit(current)
        if bullet:
            text = _SYMBOL_BULLET.sub("", text)  # numbering stays; a bullet glyph is layout
        current = {"type": "list_item" if bullet else "paragraph", "text": text,
                   "page_start": p["page"], "page_end": p["page"], "last": p, "x0": p["x0"]}
    emit(current)
    return {**out, "pages": page_count}


def _continues(block: dict[str, Any], p: dict[str, Any], pitch: float) -> bool:
    """Whether line ``p`` goes on with ``block`` (same paragraph or list item)."""
    last = block["last"]
    if abs(p["size"] - last["size"]) > 0.5:
        return False
    if p["page"] != last["page"] or p["top"] < last["top"] - 0.5 * p["size"]:
        # A new page or a new column: the paragraph goes on only if it did not end.
        return not _ends_block(block["text"])
    step = p["top"] - last["top"]
    if block["type"] == "list_item" and p["x0"] <= block["x0"] + 0.3 * p["size"]:
        return False  # a list item's continuation is indented under its text
    return 0 < step <= pitch * 1.3 + 0.5
