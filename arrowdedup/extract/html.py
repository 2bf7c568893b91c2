"""HTML to segments with BeautifulSoup's standard-library parser.

Visible text only: ``script``, ``style``, ``nav``, ``noscript``, ``template`` and ``head`` are
skipped. Block elements end a segment: ``h1``–``h6`` → ``heading`` (and the heading path), ``p``
→ ``paragraph``, ``li`` → ``list_item``, ``blockquote`` → ``quote``, ``pre`` → ``code``,
``figcaption`` / ``caption`` → ``caption``, table rows → ``table_row``; text directly inside
other blocks (``div``, ``section``, …) is a ``paragraph``. The title is ``<title>`` or the first
``h1``; ``<html lang>`` gives the language.
"""

from __future__ import annotations

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import Comment, Declaration, Doctype, ProcessingInstruction

from ..errors import InputError
from .blocks import ParsedDoc, row_text

SKIP = ("script", "style", "nav", "noscript", "template", "head", "iframe", "svg")
_KIND = {"p": "paragraph", "li": "list_item", "blockquote": "quote", "figcaption": "caption",
         "caption": "caption", "dt": "paragraph", "dd": "paragraph"}
_BREAKS = frozenset({
    "address", "article", "aside", "body", "details", "dialog", "div", "dl", "fieldset",
    "figure", "footer", "form", "header", "hgroup", "hr", "html", "main", "menu", "ol",
    "section", "summary", "ul",
})
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_INVISIBLE = (Comment, Declaration, Doctype, ProcessingInstruction)
_BR = "\ue000"  # a non-whitespace stand-in for <br> while whitespace is collapsed


def _clean(raw: str) -> str:
    text = " ".join(raw.split())
    if _BR in text:
        text = "\n".join(part.strip() for part in text.split(_BR))
        text = "\n".join(line for line in text.split("\n") if line)
    return text


def _soup(markup: str) -> BeautifulSoup:
    return BeautifulSoup(markup, "html.parser")


def visible_text(fragment: str) -> str:
    """Visible text of an HTML fragment (a raw HTML block inside Markdown), on one line."""
    stripped = fragment.strip()
    if not stripped or (stripped.startswith("<!--") and stripped.endswith("-->")
                        and stripped.count("-->") == 1):
        return ""
    soup = _soup(fragment)
    for tag in soup.find_all(SKIP):
        tag.decompose()
    return " ".join(
        " ".join(s.split()) for s in soup.find_all(string=True)
        if not isinstance(s, _INVISIBLE) and s.strip()
    )


def _cell(tag: Tag) -> str:
    return " ".join(tag.get_text(" ").split())


def parse_html(markup: str, display: str) -> ParsedDoc:
    """Segments of one HTML document."""
    soup = _soup(markup)
    doc = ParsedDoc()
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text().split()) if isinstance(title_tag, Tag) else ""
    html_tag = soup.find("html")
    if isinstance(html_tag, Tag):
        lang = html_tag.get("lang")
        doc.language = (lang.strip() or None) if isinstance(lang, str) else None
    for tag in soup.find_all(SKIP):
        tag.decompose()
    walker = _Walker(doc)
    try:
        walker.walk(soup)
    except RecursionError as err:
        raise InputError(
            f"{display}: the HTML is nested too deeply to extract; simplify the markup, or "
            "skip the file with --skip-bad-files"
        ) from err
    walker.flush()
    first_h1 = next((t for t, lv in zip(doc.texts, doc.levels, strict=True) if lv == 1), None)
    doc.title = title or first_h1
    return doc


class _Walker:
    """Depth-first walk that gathers inline text until a block element ends it."""

    def __init__(self, doc: ParsedDoc) -> None:
        self.doc = doc
        self.buffer: list[str] = []
        self.kinds: list[str] = []
        self.terms: list[str] = []  # <code> contents of the open block: fact-guard identifiers

    def flush(self) -> None:
        text = _clean("".join(self.buffer))
        self.buffer.clear()
        terms, self.terms = self.terms, []
        if text:
            at = self.doc.add(text, self.kinds[-1] if self.kinds else "paragraph")
            self.doc.add_terms(at, [t for t in (_clean(x) for x in terms) if t])

    def walk(self, node: Tag) -> None:
        for child in node.children:
            if isinstance(child, NavigableString):
                if not isinstance(child, _INVISIBLE):
                    self.buffer.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name
            if name == "br":
                self.buffer.append(_BR)
            elif name in _HEADINGS:
                self.flush()
                self.doc.heading(_clean(child.get_text()), _HEADINGS[name])
            elif name == "pre":
                self.flush()
                code = child.get_text().strip("\n")
                if code.strip():
                    self.doc.add(code, "code")
            elif name == "table":
                self.flush()
                self._table(child)
            elif name in _KIND:
                self.flush()
                kind = _KIND[name]
                if name == "p" and self.kinds and self.kinds[-1] in ("list_item", "quote"):
                    kind = self.kinds[-1]
                self.kinds.append(kind)
                self.walk(child)
                self.flush()
                self.kinds.pop()
            elif name in _BREAKS:
                self.flush()
                self.walk(child)
                self.flush()
            else:
                if name == "code":
                    self.terms.append(child.get_text())
                self.walk(child)

    def _table(self, table: Tag) -> None:
        headers: list[str] = []
        for tr in table.find_all("tr"):
            if tr.find_parent("table") is not table:
                continue  # a row of a nested table: that table's own rows
            cells = tr.find_all(["td", "th"], recursive=False)
            values = [_cell(c) for c in cells]
            in_head = tr.find_parent("thead") is not None
            if not headers and (in_head or all(c.name == "th" for c in cells)):
                headers = values
                continue
            text = row_text(headers, values)
            if text:
                self.doc.add(text, "table_row")
