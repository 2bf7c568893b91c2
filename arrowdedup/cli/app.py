"""The Typer app and what every command shares: clean errors, config loading, tables.

Library errors (``ArrowDedupError``) become one line on stderr and exit code 1, never a
traceback; Ctrl-C becomes one line and exit code 130, wherever it lands. Each command lives in
a small function; heavy imports happen inside them so ``arrowdedup --help`` stays fast.

Output rules, the same for every command:
- tables go to stdout and stay readable at any width: ids wrap at their separators and only
  beyond two lines are shortened from the middle (:func:`wrap_id`), free text wraps, and no
  column is dropped (``no_wrap`` columns are kept narrow on purpose);
- every document-derived string (texts, doc_ids, file names) is printed through
  :func:`arrowdedup.escape.escape`: a document never drives the terminal;
- ``--json`` prints exactly one JSON document on stdout (:func:`print_json`); summaries and
  notes then go to stderr, so ``cmd --json | jq`` always parses;
- the width is read when a command starts (``COLUMNS``, else the terminal, else 80).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO, TypeVar, cast

import typer

from .._interrupt import interrupt_handled
from ..errors import ArrowDedupError
from ..escape import escape
from .coercion import install as _plain_coercion

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

# Simple parameters skip Typer's Pydantic adapters (~0.2 s of every command's start-up).
_plain_coercion()

# Plain click help (rich_markup_mode=None): it wraps every option's help at the terminal width
# instead of truncating long option names ("--language-from-p…") in a squeezed rich panel, and
# it never eats text in brackets as markup ("extra [ray]").
app = typer.Typer(
    name="arrowdedup",
    help="Signal-preserving deduplication of RAG evidence segments.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class DeferredConsole:
    """A rich ``Console`` made on first use: ``--help`` never imports rich (~60 ms)."""

    def __init__(self, **options: Any) -> None:
        object.__setattr__(self, "_options", options)
        object.__setattr__(self, "_console", None)

    def _real(self) -> Console:
        if self._console is None:
            from rich.console import Console

            object.__setattr__(self, "_console", Console(**self._options))
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._real(), name, value)


# markup=False: what is printed is data (texts, doc_ids, paths), printed as it is; a segment
# holding "[/]" or "[link=...]" is no Rich markup (it raised MarkupError mid-table before).
# A DeferredConsole forwards every attribute, read or set, to its Console.
console = cast("Console", DeferredConsole(highlight=False, markup=False))
err_console = cast("Console", DeferredConsole(stderr=True, highlight=False, markup=False))

F = TypeVar("F", bound=Callable[..., Any])

INTERRUPTED = "interrupted (Ctrl-C); the store is unchanged unless a version was committed"


def clean_errors(func: F) -> F:
    """Turn library errors into one clean line and exit code 1, Ctrl-C into exit code 130."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ArrowDedupError as err:
            err_console.print(f"error: {escape(err)}", markup=False, soft_wrap=True)
            raise typer.Exit(code=1) from None
        except KeyboardInterrupt:
            _say_interrupted()
            raise typer.Exit(code=130) from None
        except BaseException as err:
            # A command on a store whose file a reading library could not read (a native
            # panic included, which is no Exception): say so, and how to find and leave the
            # damaged version, instead of that library's traceback.
            from ..store.reader import damaged, read_failure

            if "store" not in kwargs or not read_failure(err):
                raise
            err_console.print(f"error: {escape(damaged(kwargs['store'], err))}",
                              markup=False, soft_wrap=True)
            raise typer.Exit(code=1) from None

    return cast(F, wrapper)  # functools.wraps: func's signature, name and docstring


_interrupt_reported = False


def _say_interrupted() -> None:
    """Report a Ctrl-C once, and let the exit code 130 that follows stand."""
    global _interrupt_reported
    interrupt_handled()
    if not _interrupt_reported:
        _interrupt_reported = True
        err_console.print(INTERRUPTED, markup=False, soft_wrap=True)


def load_config(path: Path | None) -> Any:
    from ..config import DedupConfig

    return DedupConfig.from_json(path) if path is not None else DedupConfig()


ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="Config JSON (SPEC §7 shape).")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress or summary tables.")]
JsonOpt = Annotated[bool, typer.Option(
    "--json", help="Print one JSON document on stdout (summaries go to stderr).")]
EmbedderOpt = Annotated[str | None, typer.Option(
    "--embedder", "-e",
    help="'minilm' (ONNX Runtime), 'minilm:torch' (sentence-transformers) or "
         "'model2vec:PATH' (default: the model the store records).")]


def plain(value: object) -> str:
    """A data value for a terminal table, free text included: control characters shown as
    ``\\x1b`` escapes (:func:`arrowdedup.escape.escape`), so a segment cannot move the
    cursor, recolour or retitle the reader's terminal (Rich passes escape sequences through);
    newlines and tabs stay, for the cell's layout."""
    return escape(value, keep_layout=True)


def middle(text: str, width: int) -> str:
    """``text`` on one line of at most ``width`` characters, shortened from the middle
    (``docs/v3…/install``): both the start and the end of a path or id say which one it is
    (control characters, newlines included, shown as escapes)."""
    return _middle(escape(text), width)


def _middle(text: str, width: int) -> str:
    if width < 1:
        return ""
    if len(text) <= width:
        return text
    if width <= 3:
        return text[:width]
    head = width // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


# An id breaks after a run of separators (``guides/`` ``operations-`` ``and-`` ``maintenance``)
# or a space, never inside a word.
_ID_PIECE = re.compile(r"[^/\-_. ]*(?:[/\-_. ]+|$)")


def wrap_id(text: object, width: int, lines: int = 2) -> str:
    """An id (doc_id, segment_id, file name) on at most ``lines`` lines of at most ``width``
    characters, broken only after ``/``, ``-``, ``_``, ``.`` or a space. Beyond ``lines``
    lines the middle is left out (``…`` starts the last line), and a single word longer than
    ``width`` is shortened from its middle: neither is ever folded mid-word. Control
    characters, newlines included, are shown as escapes."""
    text = escape(text)
    width = max(width, 1)
    if len(text) <= width:
        return text
    pieces = [p for p in _ID_PIECE.findall(text) if p]
    rows = _pack(pieces, width)
    lines = max(lines, 1)
    if len(rows) > lines:
        # The rows after the head hold more than ``width`` characters (else they would be
        # one row), so a tail of at most ``width - 1`` never repeats the head.
        tail = ""
        for piece in reversed(pieces):
            if len(tail) + len(piece) > width - 1:
                break
            tail = piece + tail
        rows = [*rows[:lines - 1], "…" + (tail or _middle(pieces[-1], width - 1))]
    return "\n".join(_middle(r, width) for r in rows)


def _pack(pieces: list[str], width: int) -> list[str]:
    rows: list[str] = []
    row = ""
    for piece in pieces:
        if row and len(row) + len(piece) > width:
            rows.append(row)
            row = ""
        row += piece
    if row:
        rows.append(row)
    return rows


def lines_width(cell: str) -> int:
    """The width of a multi-line cell: its longest line."""
    return max((len(line) for line in cell.split("\n")), default=0)


def id_width(total: int, share: float = 0.3, floor: int = 12, cap: int = 60) -> int:
    """Characters an id column may use in a table ``total`` columns wide."""
    return max(floor, min(cap, int(total * share)))


def stdout_is_terminal() -> bool:
    """Whether stdout is a terminal (not a pipe, a file or a test runner's buffer)."""
    return bool(getattr(sys.stdout, "isatty", lambda: False)())


# JSON escapes C0 controls itself; DEL, the C1 controls and the bidi controls pass through
# with ensure_ascii=False, and are written as \\u escapes here (the same string, parsed).
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def print_json(payload: Any) -> None:
    """The one JSON document a ``--json`` command prints on stdout (no markup, no wrapping;
    no character that could drive a terminal)."""
    text = json.dumps(payload, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")
    sys.stdout.flush()


def say(message: str) -> None:
    """A human line on stdout (a result, a summary): control characters in the names it
    holds are shown as escapes, as in :func:`note`."""
    console.print(escape(message), markup=False)


def note(message: str) -> None:
    """A human line on stderr (summaries, skipped files): never mixed into stdout. It names
    files and doc_ids, so control characters (a newline included: one note, one line) are
    shown as escapes."""
    err_console.print(escape(message), markup=False, soft_wrap=True)


def compact_table(title: str | None = None, **options: Any) -> Table:
    """A table without vertical borders: a column costs one space beside it, not three, which
    at 80 columns is the room the ids need."""
    from rich import box
    from rich.table import Table

    return Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False,
                 show_edge=False, **options)


def table_overhead(columns: int) -> int:
    """Characters a :func:`compact_table` of ``columns`` columns adds beyond its cells."""
    return 3 * (columns - 1)


def documents_table(documents: Any, limit: int = 20) -> Table:
    """Per-document counts. The numbers keep their full width; ``doc_id`` takes what is left,
    wraps onto a second line at a ``/``, ``-``, ``_`` or ``.`` when it must (:func:`wrap_id`),
    and only beyond two lines is shortened from the middle, so versioned paths stay apart
    (``docs/v3.5/install`` vs ``docs/v3.6/install``). Columns: segments in / out, exact copies
    dropped, near duplicates merged, filtered as noise, the dedup ratio and the largest
    salience boost."""
    headers = ("doc_id", "type", "in", "out", "exact", "near", "filt", "dedup", "boost")
    rows = documents.sort(["dedup_ratio", "doc_id"], descending=[True, False]).head(limit)
    cells = [
        [escape(r["doc_id"]), escape(r["doc_type"] or "-"), str(r["original_count"]),
         str(r["final_count"]), str(r["exact_count"]), str(r["near_count"]),
         str(r["filtered_count"]), f"{r['dedup_ratio']:.0%}", f"{r['max_salience_boost']:.2f}"]
        for r in rows.iter_rows(named=True)
    ]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]
    room = console.width - (table_overhead(len(headers)) + sum(widths[2:]))
    # The type takes at most a third of what the two text columns share.
    widths[1] = max(len(headers[1]), min(widths[1], room // 3))
    room -= widths[1]
    ids = [wrap_id(c[0], max(len(headers[0]), min(widths[0], room))) for c in cells]
    types = [wrap_id(c[1], widths[1]) for c in cells]
    widths[0] = max([len(headers[0]), *(lines_width(i) for i in ids)])
    widths[1] = max([len(headers[1]), *(lines_width(t) for t in types)])
    table = compact_table("Per-document summary")
    for i, h in enumerate(headers):
        table.add_column(h, justify="left" if i < 2 else "right", no_wrap=True,
                         min_width=widths[i], max_width=widths[i])
    for c, doc_id, doc_type in zip(cells, ids, types, strict=True):
        table.add_row(doc_id, doc_type, *c[2:])
    if documents.height > limit:
        table.caption = f"{limit} of {documents.height} documents, highest dedup ratio first"
    return table


def _fit_consoles() -> None:
    """Read the width when a command starts: ``COLUMNS`` wins, else rich asks the terminal
    (80 when stdout is not one)."""
    columns = os.environ.get("COLUMNS", "")
    for c in (console, err_console):
        c.width = int(columns) if columns.isdigit() and int(columns) > 0 else c.size.width


class _Handler(logging.StreamHandler[TextIO]):
    """The handler :func:`setup_logging` installs, and replaces when called again."""

    _arrowdedup = True


class _EscapingFormatter(logging.Formatter):
    """Log lines name files and doc_ids: their control characters, newlines included, are
    shown as escapes (one record, one line; a traceback, added after this, keeps its lines)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return escape(super().formatMessage(record))


def setup_logging(verbose: bool) -> None:
    """arrowdedup's own loggers at INFO (``-v``) or WARNING; every other library's at WARNING,
    so ``-v`` shows our per-document lines and not markdown-it's or matplotlib's debug output."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_arrowdedup", False):
            root.removeHandler(handler)
    handler = _Handler(sys.stderr)
    handler.setFormatter(_EscapingFormatter("%(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("arrowdedup").setLevel(logging.DEBUG if verbose else logging.WARNING)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"arrowdedup {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="arrowdedup's own log lines (per document, "
                                                   "per stage); other libraries stay quiet.")
    ] = False,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] =
    False,
) -> None:
    _fit_consoles()
    setup_logging(verbose)


def main() -> None:
    """The console script. Typer already turns a Ctrl-C inside the app into exit code 130;
    this catches one that lands around it (start-up, shutdown), so it is always one line."""
    try:
        app()
    except KeyboardInterrupt:
        _say_interrupted()
        sys.exit(130)
    except SystemExit as done:
        # Typer turns a Ctrl-C outside our commands (while it parses, say) into a silent 130.
        if done.code == 130:
            _say_interrupted()
        raise
