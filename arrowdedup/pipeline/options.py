"""How a job runs: one frozen :class:`RunOptions` instead of the keywords every entry point
repeated, and the one place that turns the old keywords into the option objects (they keep
working for one release, with a ``DeprecationWarning`` naming the new spelling)."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Collection, Mapping
from typing import Any

from ..extract.options import LEGACY_KEYWORDS as EXTRACT_KEYWORDS
from ..extract.options import ExtractOptions
from ..store.layout import DEFAULT_BUCKETS, KEEP_VERSIONS
from .engines.base import Engine
from .inputs import DEFAULT_MEMORY_BUDGET


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How a job runs (``ingest_to_store(run=...)``, ``update_store(run=...)``).

    - ``threads``: threads of the kernels and of Polars (None: every core);
    - ``buckets``: hash buckets of ``doc_id`` in the store (a full ingest only);
    - ``engine``: where the buckets run (:class:`Engine`: ``"local"`` or ``"ray"``);
    - ``ray_address``: an existing Ray cluster (``"auto"``, ``"ray://host:port"``) for the Ray
      engine; None starts a local one;
    - ``memory_budget``: bytes of Parquet input read whole instead of partitioned to disk
      first (local engine; 0 always partitions);
    - ``keep_versions``: versions kept after the run (older ones are pruned);
    - ``quiet``: no progress display.
    """

    threads: int | None = None
    buckets: int = DEFAULT_BUCKETS
    engine: str | Engine = Engine.LOCAL
    ray_address: str | None = None
    memory_budget: int = DEFAULT_MEMORY_BUDGET
    keep_versions: int = KEEP_VERSIONS
    quiet: bool = False


RUN_KEYWORDS = ("threads", "buckets", "engine", "ray_address", "memory_budget",
                "keep_versions", "quiet")


def with_legacy(function: str, legacy: Mapping[str, object], extract: ExtractOptions | None,
                run: RunOptions | None, *, run_keywords: Collection[str] = RUN_KEYWORDS,
                default_run: RunOptions | None = None) -> tuple[ExtractOptions, RunOptions]:
    """The option objects of a call to ``function``, with its old keywords (``legacy``) folded
    in: each old keyword warns once, naming the new spelling; a keyword ``function`` never
    took is a TypeError, as before; an old keyword beside the object it belongs to is a
    TypeError (which one would win is not obvious)."""
    extract_fields: dict[str, Any] = {}
    run_fields: dict[str, Any] = {}
    for key, value in legacy.items():
        if key in EXTRACT_KEYWORDS:
            if extract is not None:
                raise TypeError(f"{function}() got both extract= and {key}=; set "
                                f"{EXTRACT_KEYWORDS[key]} inside ExtractOptions")
            extract_fields[EXTRACT_KEYWORDS[key]] = value
            spelled = f"extract=ExtractOptions({EXTRACT_KEYWORDS[key]}=...)"
        elif key in run_keywords:
            if run is not None:
                raise TypeError(f"{function}() got both run= and {key}=; set {key} inside "
                                "RunOptions")
            run_fields[key] = value
            spelled = f"run=RunOptions({key}=...)"
        else:
            raise TypeError(f"{function}() got an unexpected keyword argument {key!r}")
        warnings.warn(f"{function}({key}=...) is deprecated; pass {spelled}",
                      DeprecationWarning, stacklevel=3)
    base_run = run if run is not None else (default_run or RunOptions())
    return (extract if extract is not None else ExtractOptions(**extract_fields),
            dataclasses.replace(base_run, **run_fields) if run_fields else base_run)
