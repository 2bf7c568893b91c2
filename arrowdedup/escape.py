"""Text from documents made safe to print on a terminal.

A document's text, its doc_id and its file name are the outside world's bytes. Printed raw, an
ESC starts a terminal escape sequence (OSC 0 retitles the window, OSC 52 writes the clipboard
on some terminals, CSI 2J clears the screen), BEL rings, BS and CR overwrite what was printed,
a newline inside an id forges a line, and a bidi override (U+202E) makes ``evil.md`` read as
something else. :func:`escape` is the one function every printing place goes through: the
CLI's tables, ``context``, stderr notes, error lines and log lines.

It has no dependencies beyond ``re``, so library code may call it to build a message.
"""

from __future__ import annotations

import re

__all__ = ["escape"]

# C0 controls, DEL and C1 controls (U+0080-U+009F: U+009B is a one-character CSI on some
# terminals), plus the bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069).
_OTHERS = "\x7f-\x9f\u202a-\u202e\u2066-\u2069"
_ANY = re.compile(f"[\x00-\x1f{_OTHERS}]")
# The same but tab (0x09) and newline (0x0a): the layout of free text (Markdown, a paragraph).
_BUT_LAYOUT = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHERS}]")
# A whole escape sequence, for removal: CSI (ESC [ ... final), OSC / DCS / SOS / PM / APC up
# to their terminator (BEL, or ESC backslash; at most to the end of the line without one), and
# the two-character escapes. Removing only the ESC would leave "]0;title" in the text.
_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"
                       r"|\x1b[\]PX^_][^\x07\x1b\n]*(?:\x07|\x1b\\)?"
                       r"|\x1b[ -/]*[0-~]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(value: object, *, keep_layout: bool = False, remove: bool = False) -> str:
    """``str(value)`` with every control character shown as a visible escape (``\\x1b``,
    ``\\x07``, ``\\n``, ``\\u202e``), so printing it cannot drive the terminal.

    - ``keep_layout``: newlines and tabs stay as they are (free text, Markdown); otherwise
      they are shown too, so an id or a file name stays on one line.
    - ``remove``: the control characters are dropped instead of shown (Markdown meant for a
      pipe or a prompt, where a visible ``\\x1b`` would only be noise).
    """
    text = str(value)
    pattern = _BUT_LAYOUT if keep_layout else _ANY
    if remove:
        return pattern.sub("", _SEQUENCE.sub("", text))
    return pattern.sub(_visible, text)
