"""Markdown to segments with markdown-it-py's token stream (CommonMark + GFM tables).

Block tokens map to segment types: headings → ``heading`` (and the heading path), paragraphs →
``paragraph`` (``list_item`` inside a list item, ``quote`` inside a block quote), fenced and
indented code → one ``code`` segment, table body rows → ``table_row`` ("column: value" lines),
raw HTML blocks → their visible text. A front-matter title is the document's title and opens it
as a level-1 heading, as the rendered page shows it, unless the body has an H1 with that text.

Hugo shortcodes (``{{< name … >}}``, ``{{% name … %}}``) are template calls, not text: a line of
shortcodes only is dropped (and ends a paragraph), as is a line of Go template actions only
(``{{ if $x }}``, ``{{ end }}``, in Hugo's partials); inline shortcodes are removed from prose,
shortcode-only lines are dropped from code, and escaped shortcodes (``{{</* x */>}}``) become
the literal text they document. Inline shortcodes inside code are kept: there they stand for a
value (a version, a path) and a visible placeholder beats a silent hole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

from .blocks import ParsedDoc, row_text, squash
from .frontmatter import split_front_matter
from .html import visible_text

# A shortcode tag, with a bound on its length so an unclosed "{{<" cannot scan a whole file.
_SHORTCODE = re.compile(r"\{\{<(?!/\*).{0,4000}?>\}\}|\{\{%(?!/\*).{0,4000}?%\}\}", re.S)
# A Go template action ("{{ if $x }}", "{{ end }}"), as in Hugo's _includes partials.
_ACTION = re.compile(r"\{\{(?![<%]).{0,4000}?\}\}", re.S)
_ESCAPED = re.compile(r"\{\{([<%])/\*(.{0,4000}?)\*/([>%])\}\}", re.S)
_SHORTCODE_LINE = re.compile(
    r"[ \t]*(?:(?:\{\{<(?!/\*).*?>\}\}|\{\{%(?!/\*).*?%\}\})[ \t]*)+"
)
# Goldmark/Hugo attribute lists: "{.class}" on a line of its own, "## Title {#anchor}".
_ATTR_LINE = re.compile(r"\{[.#:][^{}\n]*\}")
_HEADING_ATTR = re.compile(r"\s*\{[.#][^{}\n]*\}\s*$")
# GitHub alert markers ("> [!NOTE]") open a quote; they are rendering hints, not text.
_ALERT = re.compile(r"^\[![A-Za-z]+\][ \t]*\n?")


def _shortcode_block(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """A line (or lines, for a multi-line tag) made of shortcode tags or template actions only.

    Shortcodes are dropped at any indentation (Hugo expands them everywhere); template actions
    only outside indented code, where they may be the code being shown.
    """
    src = state.src
    pos = state.bMarks[start] + state.tShift[start]
    if not src.startswith("{{", pos):
        return False
    actions = state.sCount[start] - state.blkIndent < 4
    while True:
        match = _SHORTCODE.match(src, pos) or (_ACTION.match(src, pos) if actions else None)
        if match is None:
            return False
        pos = match.end()
        while pos < len(src) and src[pos] in " \t":
            pos += 1
        if pos >= len(src) or src[pos] == "\n":
            break
        if not src.startswith("{{", pos):
            return False
    line = start
    while line < end and state.eMarks[line] < pos:
        line += 1
    if line >= end:
        return False
    if not silent:
        token = state.push("shortcode", "", 0)
        token.map = [start, line + 1]
        token.content = src[state.bMarks[start]: pos]
    state.line = line + 1
    return True


def _shortcode_inline(state: StateInline, silent: bool) -> bool:
    """Drop an inline shortcode tag; an escaped one becomes its literal text."""
    src, pos = state.src, state.pos
    if not src.startswith(("{{<", "{{%"), pos):
        return False
    escaped = _ESCAPED.match(src, pos)
    match = escaped or _SHORTCODE.match(src, pos)
    if match is None or match.end() > state.posMax:
        return False
    if not silent and escaped is not None:
        state.pending += f"{{{{{escaped.group(1)}{escaped.group(2)}{escaped.group(3)}}}}}"
    state.pos = match.end()
    return True


# Characters that start an inline construct of CommonMark (or our shortcode rule). Text without
# any of them parses to plain text and soft/hard breaks, so the inline parser is skipped for it.
_INLINE_SYNTAX = re.compile(r"[\\`*_\[\]!<&{]")


class _Parser(MarkdownIt):
    """Link targets are never output; URL normalisation is skipped (a measurable share of the
    time)."""

    def validateLink(self, url: str) -> bool:
        return True

    def normalizeLink(self, url: str) -> str:
        return url


_PARSER: MarkdownIt | None = None


def parser() -> MarkdownIt:
    """The shared parser: CommonMark, raw HTML as tokens, GFM tables, shortcode rules."""
    global _PARSER
    if _PARSER is None:
        md = _Parser("commonmark", {"html": True}).enable("table")
        md.block.ruler.before(
            "table", "shortcode", _shortcode_block,
            {"alt": ["paragraph", "reference", "blockquote", "list"]},
        )
        md.inline.ruler.after("text", "shortcode", _shortcode_inline)
        md.inline.add_terminator_char("{")
        # Inline content is parsed in parse_markdown, only where it has inline syntax.
        md.core.ruler.disable("inline")
        _PARSER = md
    return _PARSER


def _inline_lines(children: Sequence[Token], terms: list[str] | None = None
                  ) -> tuple[list[str], list[str]]:
    """The visible text of an inline token as lines, with the break that ends each line; the
    content of each inline code span is also appended to ``terms`` (when given)."""
    lines: list[str] = []
    breaks: list[str] = []
    current: list[str] = []

    def walk(tokens: Sequence[Token]) -> None:
        for tok in tokens:
            kind = tok.type
            if kind in ("text", "text_special"):  # text_special: escapes and entities
                current.append(tok.content)
            elif kind == "code_inline":
                content = tok.content
                content = _ESCAPED.sub(r"{{\1\2\3}}", content) if "/*" in content else content
                current.append(content)
                if terms is not None:
                    terms.append(content)
            elif kind in ("softbreak", "hardbreak"):
                lines.append("".join(current))
                breaks.append(" " if kind == "softbreak" else "\n")
                current.clear()
            elif kind == "image" and tok.children:
                walk(tok.children)
            # Other tokens (emphasis and link markers, raw inline HTML) carry no visible text.

    walk(children)
    lines.append("".join(current))
    return lines, breaks


def inline_text(token: Token, terms: list[str] | None = None) -> str:
    """Visible text of an inline token: soft breaks become spaces, hard breaks newlines, and
    lines holding only an attribute list ("{.class}") are dropped. Inline code spans lose
    their backticks in the text; their contents go to ``terms`` (the fact guard's
    identifiers, :func:`arrowdedup.facts.guard.fact_signatures`)."""
    if token.meta.get("plain"):
        lines = token.content.split("\n")
        # The CommonMark rule: a line ending in two or more spaces ends with a hard break.
        breaks = ["\n" if line.endswith("  ") else " " for line in lines[:-1]]
    else:
        lines, breaks = _inline_lines(token.children or [], terms)
    out: list[str] = []
    for i, line in enumerate(lines):
        text = squash(line)
        if not text or _ATTR_LINE.fullmatch(text):
            continue
        if out:
            out.append(breaks[i - 1])
        out.append(text)
    return "".join(out).strip()


def code_text(content: str) -> str:
    """Code block content without shortcode-only lines; escaped shortcodes made literal."""
    lines = [ln for ln in content.split("\n") if not _SHORTCODE_LINE.fullmatch(ln)]
    text = "\n".join(lines)
    if "/*" in text:
        text = _ESCAPED.sub(r"{{\1\2\3}}", text)
    return text.strip("\n")


def _table_rows(tokens: Sequence[Token], start: int) -> tuple[list[str], int]:
    """Body rows of the table opening at ``start`` as texts, and the index after it."""
    headers: list[str] = []
    body: list[list[str]] = []
    cells: list[str] = []
    in_head = False
    i = start + 1
    while i < len(tokens) and tokens[i].type != "table_close":
        kind = tokens[i].type
        if kind == "thead_open":
            in_head = True
        elif kind == "thead_close":
            in_head = False
        elif kind == "inline":
            cells.append(inline_text(tokens[i]))
        elif kind == "tr_close":
            if in_head:
                headers = cells
            else:
                body.append(cells)
            cells = []
        i += 1
    rows = [row_text(headers, row) for row in body]
    if not body and any(headers):
        rows = [" | ".join(h for h in headers if h)]
    return [r for r in rows if r], i + 1


class _Container:
    """An open list item or block quote, and the segment its paragraphs go to."""

    __slots__ = ("kind", "segment")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.segment: int | None = None


def parse_markdown(text: str, display: str) -> ParsedDoc:
    """Segments of one Markdown document (newlines already normalised to "\\n")."""
    meta, body = split_front_matter(text, display)
    md = parser()
    env: dict[str, object] = {}
    tokens = md.parse(body, env)
    for tok in tokens:
        if tok.type == "inline":
            if _INLINE_SYNTAX.search(tok.content) is None:
                tok.meta["plain"] = True
            else:
                tok.children = []
                md.inline.parse(tok.content, md, env, tok.children)
    doc = ParsedDoc(created_at=meta.created_at, language=meta.language)
    h1_texts = [
        _heading_text(tokens[i + 1])
        for i, tok in enumerate(tokens)
        if tok.type == "heading_open" and tok.tag == "h1"
    ]
    doc.title = meta.title or next((h for h in h1_texts if h), None)
    if meta.title and meta.title not in h1_texts:
        doc.heading(meta.title, 1)
    _walk(tokens, doc)
    return doc


def _heading_text(token: Token, terms: list[str] | None = None) -> str:
    return _HEADING_ATTR.sub("", inline_text(token, terms))


def _walk(tokens: list[Token], doc: ParsedDoc) -> None:
    stack: list[_Container] = []

    def flow(text: str, terms: list[str] | None = None) -> None:
        # Paragraphs of one list item or quote, with nothing in between, form one segment.
        if not text:
            return
        top = stack[-1] if stack else None
        if top is not None and top.kind == "quote" and text.startswith("[!"):
            text = _ALERT.sub("", text).strip()
            if not text:
                return
        if top is not None and top.segment is not None and top.segment == len(doc.texts) - 1:
            doc.extend_last(text)
            doc.add_terms(len(doc.texts) - 1, terms)
            return
        position = doc.add(text, top.kind if top is not None else "paragraph")
        doc.add_terms(position, terms)
        if top is not None:
            top.segment = position

    i = 0
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        kind = tok.type
        if kind == "heading_open":
            terms: list[str] = []
            if doc.heading(_heading_text(tokens[i + 1], terms), int(tok.tag[1:])):
                doc.add_terms(len(doc.texts) - 1, terms)
            i += 3
            continue
        if kind == "paragraph_open":
            terms = []
            flow(inline_text(tokens[i + 1], terms), terms)
            i += 3
            continue
        if kind == "table_open":
            rows, i = _table_rows(tokens, i)
            for row in rows:
                doc.add(row, "table_row")
            continue
        if kind == "list_item_open":
            stack.append(_Container("list_item"))
        elif kind == "blockquote_open":
            stack.append(_Container("quote"))
        elif kind in ("list_item_close", "blockquote_close"):
            stack.pop()
        elif kind in ("fence", "code_block"):
            code = code_text(tok.content)
            if code.strip():
                at = doc.add(code, "code")
                info = (tok.info or "").strip().split()
                if info:
                    doc.code_languages[at] = info[0].strip("{}.")
        elif kind == "html_block":
            flow(visible_text(_SHORTCODE.sub(" ", tok.content)))
        i += 1
