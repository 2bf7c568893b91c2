"""Progress on a terminal, silence elsewhere.

Long stages (extraction, embedding, dedup, writing) show a rich bar or spinner on stderr when
stderr is a terminal; piped, redirected or under ``--quiet`` / ``--json`` they print nothing,
so logs and scripts see only the summary lines.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

Advance = Callable[[int], None]


def interactive() -> bool:
    """True when stderr is a terminal (where a live bar can redraw itself)."""
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


@contextlib.contextmanager
def spinner(label: str, *, quiet: bool = False) -> Iterator[None]:
    """A spinner with the elapsed time while a stage of unknown length runs."""
    if quiet or not interactive():
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn(label), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        bar.add_task(label, total=None)
        yield


@contextlib.contextmanager
def bar(label: str, total: int, *, quiet: bool = False) -> Iterator[Advance | None]:
    """A bar of ``total`` steps; yields the function that advances it (None when silent)."""
    if quiet or not interactive() or total <= 0:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as live:
        task = live.add_task(label, total=total)
        yield lambda k: live.advance(task, k)
