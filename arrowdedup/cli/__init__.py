"""The thin command line: parse → config → one library call → render.

One module per command group registers its commands on the shared Typer ``app``.
"""

from __future__ import annotations

from . import calibrate, extract, ingest, merges, search, stats, verify  # noqa: F401  (registration)
from .app import app, main

__all__ = ["app", "main"]
