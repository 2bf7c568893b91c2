"""The per-document accumulator shared by the Markdown, HTML and plain-text extractors.

A parser walks its own token stream and calls :meth:`ParsedDoc.add` / :meth:`ParsedDoc.heading`;
the document keeps the heading path (``section``) and a *section run* number that changes at
every heading, so neighbours are taken inside one stretch of a section even when two sections
share a name ("A > Example" twice).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

_SPACES = re.compile(r"[ \t\u00a0]+")


def squash(text: str) -> str:
    """Collapse runs of spaces and tabs (left by removed markup) and trim the ends."""
    return _SPACES.sub(" ", text).strip()


@dataclasses.dataclass
class ParsedDoc:
    """Segments of one document, as parallel lists, plus its document-level metadata."""

    title: str | None = None
    created_at: dt.datetime | None = None
    language: str | None = None
    texts: list[str] = dataclasses.field(default_factory=list)
    types: list[str] = dataclasses.field(default_factory=list)
    sections: list[str | None] = dataclasses.field(default_factory=list)
    levels: list[int | None] = dataclasses.field(default_factory=list)
    runs: list[int] = dataclasses.field(default_factory=list)
    pages_start: list[int | None] = dataclasses.field(default_factory=list)
    pages_end: list[int | None] = dataclasses.field(default_factory=list)
    # Position of a code segment → the language its fence names (```python → "python").
    code_languages: dict[int, str] = dataclasses.field(default_factory=dict)
    # Position → contents of its inline code spans, which the text shows without backticks:
    # identifiers for the fact guard.
    code_terms: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    _path: list[tuple[int, str]] = dataclasses.field(default_factory=list, repr=False)
    _run: int = dataclasses.field(default=0, repr=False)

    @property
    def section(self) -> str | None:
        """The current heading path, "A > B", or ``None`` before the first heading."""
        return " > ".join(text for _, text in self._path) if self._path else None

    def add(self, text: str, segment_type: str) -> int:
        """Append a segment of the current section; returns its position."""
        self.texts.append(text)
        self.types.append(segment_type)
        self.sections.append(self.section)
        self.levels.append(None)
        self.runs.append(self._run)
        self.pages_start.append(None)
        self.pages_end.append(None)
        return len(self.texts) - 1

    def add_terms(self, position: int, terms: list[str] | None) -> None:
        """Record inline code terms of the segment at ``position``."""
        if terms:
            self.code_terms.setdefault(position, []).extend(terms)

    def heading(self, text: str, level: int) -> bool:
        """Open a section: the heading belongs to the section it opens. False for an empty
        heading, which adds nothing."""
        if not text:
            return False
        while self._path and self._path[-1][0] >= level:
            self._path.pop()
        self._path.append((level, text))
        self._run += 1
        self.add(text, "heading")
        self.levels[-1] = level
        return True

    def extend_last(self, text: str) -> None:
        """Append a further paragraph to the last segment (a list item or quote in parts)."""
        self.texts[-1] = f"{self.texts[-1]}\n\n{text}"


def row_text(headers: list[str], cells: list[str]) -> str:
    """A table row as "column: value" lines; empty cells are left out, unnamed columns bare."""
    lines = []
    for i, value in enumerate(cells):
        if not value:
            continue
        name = headers[i] if i < len(headers) else ""
        lines.append(f"{name}: {value}" if name else value)
    return "\n".join(lines)
