"""The thin command line: parse → config → one library call → render.

One module per command group registers its commands on the shared Typer ``app``.
"""

from __future__ import annotations

from . import (  # noqa: F401  (registration)
    calibrate,
    extract,
    ingest,
    merges,
    search,
    stats,
    store_life,
    verify,
)
from .app import app, main

__all__ = ["app", "main"]
