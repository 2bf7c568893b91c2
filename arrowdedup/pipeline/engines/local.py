"""The ``local`` engine: the buckets in order in this process, one prepared ahead of the
one being written (the kernels use the threads).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ...store import (
    BucketOutput,
)
from ..bucket import ALONE_BYTES, BucketJob, BucketSummary, bucket_bytes, bucket_ids, process_bucket
from ..inputs import BucketSource, SourceCache, first_reads

LOCAL_AHEAD = 1  # buckets prepared ahead of the one being written (local engine)


def buckets_in_flight(threads: int | None) -> int:
    """Buckets the local engine works on at once: ``LOCAL_AHEAD + 1``, each with ``threads``
    kernel threads; one when ``threads`` is 1, so that one thread means one thread. (Giving
    two buckets in flight one kernel thread each by default instead measured the same on 2
    cores: 3.62 against 3.59 s at 1M, four fresh runs each.)"""
    return 1 if threads == 1 else LOCAL_AHEAD + 1


def _local(source: BucketSource, job: BucketJob, cache: SourceCache | None = None,
           alone_bytes: int | None = None
           ) -> Iterator[tuple[BucketOutput, BucketSummary]]:
    """Buckets in order; ``LOCAL_AHEAD + 1`` buckets are read and ingested on worker threads
    while the caller writes the previous one (Polars, Arrow, Numba and BLAS release the GIL),
    so at most ``LOCAL_AHEAD + 2`` buckets are in memory (one when ``job.threads`` is 1). A
    bucket of more than ``alone_bytes`` input bytes (:func:`bucket_bytes`; default
    :data:`ALONE_BYTES`) is worked on alone: it starts once the buckets before it are done,
    and the next starts once it is written.
    ``cache``: the run's :class:`SourceCache` (with the bucket ids, :func:`bucket_ids`)."""
    from concurrent.futures import Future, ThreadPoolExecutor

    cache = cache if cache is not None else SourceCache()
    bucket_ids(source, cache)
    if source.buckets == 1:
        done = process_bucket(source, 0, job, cache)
        if done is not None:
            yield done
        return
    in_flight = buckets_in_flight(job.threads)
    prefault = None
    if in_flight > 1:
        # The first buckets' read buffers, written ahead on a thread of their own while the
        # workers load their code (below), and as many again for the kept rows they gather
        # (a kept set fits in its bucket's read size).
        sizes = first_reads(source, cache, in_flight)
        if sizes:
            prefault = threading.Thread(target=cache.pool.prefault, args=(sizes * 2,),
                                        name="arrowdedup-prefault", daemon=True)
            prefault.start()
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(max_workers=in_flight) as pool:
        if prefault is not None:
            stack.callback(prefault.join)
        pending: dict[int, Future[Any]] = {}
        nxt = 0
        inputs = bucket_bytes(source, cache)
        limit = ALONE_BYTES if alone_bytes is None else alone_bytes
        alone = [n > limit for n in inputs]
        # The most any bucket after b may ask of the pool (a buffer holds its embeddings read,
        # or kept, which are fewer bytes than its input).
        later = np.maximum.accumulate(np.array([0, *inputs[::-1]], dtype=np.int64))[-2::-1]

        def refill() -> None:
            nonlocal nxt
            while nxt < source.buckets and len(pending) < in_flight:
                if pending and (alone[nxt] or any(alone[b] for b in pending)):
                    break
                pending[nxt] = pool.submit(process_bucket, source, nxt, job, cache,
                                           alone=alone[nxt])
                nxt += 1

        for b in range(source.buckets):
            refill()
            done = pending.pop(b).result()
            # Refilled before the caller writes this bucket: refilling only on the next
            # iteration left one worker idle during every write (0.06-0.08 s a bucket at 1M;
            # the job took 2.89 s against 3.17 s, medians of 7-8 alternating fresh runs).
            # With one thread nothing runs beside the write, nor beside a bucket that runs
            # alone: its output (the kept rows, the file images) is as large as its working
            # set, and the next buckets started under it (the CSV document's write beside
            # the two buckets after it: 1.66 GB).
            if in_flight > 1 and not alone[b]:
                refill()
            if done is not None:
                yield done
            # Not held while the next bucket runs: a large bucket's output (its file images
            # and kept rows, on pool buffers) stayed alive under the next one's working set.
            done = None
            cache.pool.trim(int(later[b]))
            if alone[b] or (b + 1 < source.buckets and alone[b + 1]):
                # Arrow's allocator (mimalloc) keeps the pages it freed for reuse, and no
                # other allocator reuses them: after the CSV document's bucket of the corpus
                # + four large files run it held 0.3 GB beside the 0.03 GB Arrow had in use,
                # under every bucket after it. Only around a bucket that runs alone: handing
                # pages back costs a page fault each when Arrow takes them again.
                pa.default_memory_pool().release_unused()


class Runner:
    """The ``local`` engine (:class:`arrowdedup.pipeline.engines.base.Runner`)."""

    reads_in_process = True

    def __init__(self, *, ray_address: str | None = None) -> None:
        del ray_address  # a Ray option; this engine has no cluster

    def prepare(self, source: BucketSource, cache: SourceCache) -> None:
        bucket_ids(source, cache)  # the bucket of every input row, read once

    def buckets(self, source: BucketSource, job: BucketJob, cache: SourceCache,
                staging: Path, stack: contextlib.ExitStack
                ) -> Iterator[tuple[BucketOutput, BucketSummary]]:
        del staging, stack  # the driver writes every bucket; nothing outlives the run
        return _local(source, job, cache)
