"""One exception hierarchy for everything arrowdedup refuses.

Every message names the problem, where it is (column, rows, key, file) and the fix, so the CLI
can print it as a single line and exit 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import SupportsInt


class ArrowDedupError(Exception):
    """Root of every error arrowdedup raises on purpose."""


class SchemaError(ArrowDedupError):
    """The segments table does not follow SPEC section 1."""


class ConfigError(ArrowDedupError):
    """A configuration key is unknown, of the wrong type or out of range."""


class StoreError(ArrowDedupError):
    """A store cannot be read, written or locked."""


class InputError(ArrowDedupError):
    """An input file cannot be read or decoded."""


class EmbedderError(ArrowDedupError):
    """An embedder cannot be loaded, or does not match the store."""


class MissingDependencyError(ArrowDedupError):
    """An optional extra is not installed."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the optional package {package!r}, which is not installed; "
            f"install it with: pip install 'arrowdedup[{extra}]'"
        )


def first_rows(indices: Iterable[SupportsInt], limit: int = 5) -> str:
    """Format the first offending row indices for an error message."""
    rows = [int(i) for i in list(indices)[: limit + 1]]
    shown = ", ".join(str(r) for r in rows[:limit])
    return shown + (", …" if len(rows) > limit else "")
