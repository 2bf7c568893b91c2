"""What an engine is: a name in :class:`Engine` and a :class:`Runner` that runs a job's buckets.

The job path (:func:`arrowdedup.pipeline.run.ingest_to_store`) partitions the inputs, asks the
runner for the buckets' results in bucket order, and writes them; it never asks which engine
runs. An engine is one module of this package named after its :class:`Engine` value, holding a
``Runner`` class; the tests that hold every engine to byte-identical stores take them all from
:class:`Engine`.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ...store import BucketOutput
    from ..bucket import BucketJob, BucketSummary
    from ..inputs import BucketSource, SourceCache


class Engine(str, enum.Enum):
    """Where a job's buckets run."""

    LOCAL = "local"  # in this process, in bucket order, one bucket prepared ahead
    RAY = "ray"  # one Ray task per bucket (the [ray] extra)


class Runner(Protocol):
    """How one engine runs the buckets of a job."""

    # Whether the buckets are read in this process: the memory budget then applies (Parquet
    # read whole, IPC files memory-mapped once); otherwise workers read partition files.
    reads_in_process: bool

    def prepare(self, source: BucketSource, cache: SourceCache) -> None:
        """Work on the partitioned source before the compile stage (e.g. the bucket of every
        input row)."""

    def buckets(self, source: BucketSource, job: BucketJob, cache: SourceCache,
                staging: Path, stack: contextlib.ExitStack
                ) -> Iterator[tuple[BucketOutput, BucketSummary]]:
        """The non-empty buckets' results in bucket order; what must be closed when the run ends
        (a session, outstanding tasks) is entered on ``stack``."""
        ...
