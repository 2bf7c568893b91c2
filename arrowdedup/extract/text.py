"""Plain text to segments: one ``paragraph`` per block of lines between blank lines."""

from __future__ import annotations

import re

from .blocks import ParsedDoc

_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")


def parse_text(text: str, display: str) -> ParsedDoc:
    """Segments of one plain-text document; line breaks inside a paragraph are kept."""
    doc = ParsedDoc()
    for block in _BLANK_LINES.split(text):
        paragraph = "\n".join(line.rstrip() for line in block.strip("\n").split("\n")).strip()
        if paragraph:
            doc.add(paragraph, "paragraph")
    return doc
