"""`arrowdedup verify STORE`: check a store's files, decisions and guarantees (reliability)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .app import JsonOpt, app, clean_errors, note, print_json, say


@app.command()
@clean_errors
def verify(
    store: Annotated[Path, typer.Argument(help="Store directory to check.")],
    as_json: JsonOpt = False,
    max_problems: Annotated[int, typer.Option(help="Stop listing after this many.")] = 100,
    version: Annotated[str | None, typer.Option(
        help="Check this kept version (an id `arrowdedup versions` lists) instead of the "
             "current one.")] = None,
) -> None:
    """Check a store against its manifest (files, checksums, every count), its decisions
    (every representative exists and is kept) and, in exact mode, that no kept pair of a group
    is a near duplicate. Exit code 1 when anything is wrong."""
    from ..store.verify import report_json, verify_store

    report = verify_store(store, max_problems=max_problems, version=version)
    if as_json:
        print_json(json.loads(report_json(report)))
    else:
        for problem in report.problems:
            note(f"problem: {problem}")
        for line in report.notes:
            say(f"note: {line}")
        say(report.summary())
    if not report.ok:
        raise typer.Exit(code=1)
