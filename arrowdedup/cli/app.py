"""The Typer app and what every command shares: clean errors, config loading, tables.

Library errors (``ArrowDedupError``) become one line on stderr and exit code 1, never a
traceback. Each command lives in a small function; heavy imports happen inside them so
``arrowdedup --help`` stays fast.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from ..errors import ArrowDedupError

app = typer.Typer(
    name="arrowdedup",
    help="Signal-preserving deduplication of RAG evidence segments.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

F = TypeVar("F", bound=Callable[..., Any])


def clean_errors(func: F) -> F:
    """Turn library errors into one clean line and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ArrowDedupError as err:
            err_console.print(f"error: {err}", markup=False, soft_wrap=True)
            raise typer.Exit(code=1) from None
        except KeyboardInterrupt:
            err_console.print("interrupted", markup=False)
            raise typer.Exit(code=130) from None

    return wrapper  # type: ignore[return-value]


def load_config(path: Path | None) -> Any:
    from ..config import DedupConfig

    return DedupConfig.from_json(path) if path is not None else DedupConfig()


ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="Config JSON (SPEC §7 shape).")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress or summary tables.")]


def documents_table(documents: Any, limit: int = 20) -> Table:
    table = Table(title="Per-document summary", show_lines=False)
    for col in ("doc_id", "doc_type", "original", "final", "exact", "near", "filtered",
                "dedup", "max boost"):
        table.add_column(col, justify="left" if col in ("doc_id", "doc_type") else "right")
    rows = documents.sort(["dedup_ratio", "doc_id"], descending=[True, False]).head(limit)
    for r in rows.iter_rows(named=True):
        table.add_row(
            str(r["doc_id"]), str(r["doc_type"] or "-"), str(r["original_count"]),
            str(r["final_count"]), str(r["exact_count"]), str(r["near_count"]),
            str(r["filtered_count"]), f"{r['dedup_ratio']:.0%}", f"{r['max_salience_boost']:.2f}",
        )
    if documents.height > limit:
        table.caption = f"{limit} of {documents.height} documents, highest dedup ratio first"
    return table


@app.callback()
def _root(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Per-document log lines.")
    ] = False,
) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(message)s", stream=sys.stderr)


def main() -> None:
    app()
