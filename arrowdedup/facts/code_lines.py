"""Code segments compared by line (SPEC §2 step 4, code): each line's kind (code, comment,
prompt or output) and the tokens of its code lines, white space aside, so that a copy with
comments or output added still merges into the fuller block.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ..arrays.hashing import xxh64
from .tables import CODE_COMMAND, CODE_NOTE, KIND_SHIFT, LOW_BITS

# Code: comment lines and prompts (SPEC §2, "Code is compared by line").
_COMMENT = r"^(?:#(?:[^!\w]|$)|//|--\s|/\*|\*/|\*\s|<!--|;|%\s|REM\s|rem\s)"


_PROMPT = r"^(?:\$|%|>>>|\.\.\.|PS[^>]{0,40}>|[A-Za-z]:\\[^>]{0,80}>|❯)\s"


def code_line_kinds(lines: pl.Series) -> pl.Series:
    """For the lines of one code block: ``command``, ``comment`` or ``output``.

    A comment line starts with a comment marker (``#``, ``//``, ``-- ``, ``/*``, ``<!--``,
    ``;``). When the block has prompt lines (``$ ``, ``% ``, ``>>> ``, ``PS C:\\> ``), the
    commands are the prompt lines and every other line is output; without a prompt, every line
    that is not a comment is a command.
    """
    frame = pl.DataFrame({"line": lines}).with_columns(
        s=pl.col("line").str.strip_chars_start())
    return _line_kinds(frame, prompted=bool(frame.get_column("s").str.contains(_PROMPT).any())
                       ).get_column("kind")


def _line_kinds(frame: pl.DataFrame, prompted: bool | pl.Expr) -> pl.DataFrame:
    prompt = pl.col("s").str.contains(_PROMPT)
    comment = pl.col("s").str.contains(_COMMENT)
    has_prompt = prompted if isinstance(prompted, pl.Expr) else pl.lit(prompted)
    return frame.with_columns(
        kind=pl.when(prompt).then(pl.lit("command"))
        .when(comment).then(pl.lit("comment"))
        .when(has_prompt).then(pl.lit("output"))
        .otherwise(pl.lit("command")))


def code_facts(text: pl.Series, rows: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    frame = pl.DataFrame({"row": rows, "line": text.str.split("\n")}).explode("line")
    frame = frame.with_columns(s=pl.col("line").str.strip_chars())
    frame = frame.filter(pl.col("s").str.len_bytes() > 0)
    if frame.height == 0:
        return []
    frame = _line_kinds(frame, pl.col("s").str.contains(_PROMPT).any().over("row"))
    frame = frame.with_columns(
        # A prompt is layout; white space anywhere in a line is layout.
        body=pl.col("s").str.replace(_PROMPT, "").str.replace_all(r"\s+", ""),
    ).filter(pl.col("body").str.len_bytes() > 0)
    if frame.height == 0:
        return []
    kinds = np.where(frame.get_column("kind").to_numpy() == "command", CODE_COMMAND, CODE_NOTE)
    h = np.asarray(xxh64(frame.get_column("body")), dtype=np.uint64) & np.uint64(LOW_BITS)
    return [(frame.get_column("row").to_numpy(),
             h | (kinds.astype(np.uint64) << np.uint64(KIND_SHIFT)))]
