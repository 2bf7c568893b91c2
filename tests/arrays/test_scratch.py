"""The scratch pool lends a buffer again only once nothing refers to it, and a job that
reuses its buffers writes the same store as one that allocates afresh."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather

from arrowdedup import ingest_to_store
from arrowdedup.arrays import scratch
from arrowdedup.pipeline import inputs
from tests.helpers.pipeline import corpus, data_files


def test_a_buffer_is_lent_again_only_when_nothing_refers_to_it() -> None:
    pool = scratch.ScratchPool(min_bytes=0)
    a = pool.empty((100, 8), np.float32)
    a[:] = 1.0
    # Views, an Arrow array and a Polars column built on the array each keep it lent.
    arrow = pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), 8)
    series = pl.Series("e", arrow)
    del a, arrow
    gc.collect()
    b = pool.empty((100, 8), np.float32)
    b[:] = 2.0
    assert pool.allocated == 2 and pool.reused == 0
    assert series.to_numpy().min() == 1.0  # untouched by the second array
    del series, b
    gc.collect()
    c = pool.empty((50, 8), np.float32)
    assert pool.reused == 1 and c.shape == (50, 8) and c.dtype == np.float32
    assert c.ctypes.data % 64 == 0


def test_free_buffers_too_small_for_a_request_are_let_go_not_kept_beside_it() -> None:
    """A larger bucket after smaller ones does not hold the smaller ones' buffers on top of
    its own (issue 45: peak memory of a run with documents of different sizes)."""
    pool = scratch.ScratchPool(min_bytes=0)
    small = [pool.empty((100, 8), np.float32) for _ in range(2)]
    del small
    gc.collect()
    big = pool.empty((1000, 8), np.float32)
    assert pool.allocated == 3 and pool.reused == 0
    assert not pool._free, "the two small free buffers went before the large one came"
    del big
    gc.collect()
    again = pool.empty((900, 8), np.float32)  # fits the large buffer: reused
    assert pool.reused == 1 and again.shape == (900, 8)


def test_arrays_start_where_asked_whether_fresh_or_reused() -> None:
    for min_bytes in (0, 1 << 30):  # lent from the pool, and left to NumPy
        pool = scratch.ScratchPool(min_bytes=min_bytes)
        for _ in range(3):  # fresh, then reused buffers (each array dropped at once)
            page = pool.empty((10_000,), np.uint8, align=4096)
            assert page.ctypes.data % 4096 == 0 and page.shape == (10_000,)
            assert pool.empty((7, 3), np.float64).ctypes.data % 16 == 0
            del page
    pool = scratch.ScratchPool(min_bytes=0)
    lined = pool.empty((1000,), np.uint8)  # a buffer cut for 64-byte alignment...
    del lined
    page = pool.empty((1000,), np.uint8, align=4096)  # ...reused only if it has room for 4096
    assert page.ctypes.data % 4096 == 0


def test_small_requests_and_no_pool_are_plain_arrays() -> None:
    pool = scratch.ScratchPool()
    assert pool.empty((3, 4), np.int64).shape == (3, 4) and pool.allocated == 0
    assert scratch.empty((2, 2), np.float32).shape == (2, 2)  # outside a scratch_pool block
    with scratch.scratch_pool(scratch.ScratchPool(min_bytes=0)):
        assert scratch.empty((2, 2), np.float32).base is not None  # carved from a buffer


def test_a_job_reusing_its_buffers_writes_the_same_store(tmp_path: Path, monkeypatch) -> None:
    frame = corpus(docs=30, per_doc=20)
    path = tmp_path / "in.arrow"
    feather.write_feather(frame.to_arrow(), path, compression="uncompressed")
    ingest_to_store(path, tmp_path / "fresh", buckets=4)
    pools: list[scratch.ScratchPool] = []

    def lending() -> scratch.ScratchPool:
        pools.append(scratch.ScratchPool(min_bytes=0))
        return pools[-1]

    original = inputs.SourceCache.__init__

    def init(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        self.pool = lending()

    monkeypatch.setattr(inputs.SourceCache, "__init__", init)
    ingest_to_store(path, tmp_path / "pooled", buckets=4)
    assert pools and sum(p.reused for p in pools) > 0
    # The local engine wrote its first buckets' read buffers ahead (and as many for their
    # kept rows): four buffers for two buckets in flight, lent like any other.
    assert sum(p.prefaulted for p in pools) == 4
    assert data_files(tmp_path / "pooled") == data_files(tmp_path / "fresh")


def test_prefaulted_buffers_are_lent_like_reclaimed_ones() -> None:
    pool = scratch.ScratchPool(min_bytes=1024)
    pool.prefault([4096, 512, 8192])  # the request below min_bytes gets no buffer
    assert pool.prefaulted == 2 and pool.allocated == 0
    small = pool.empty((1024,), np.float32)  # 4 KiB: the smallest buffer that fits
    large = pool.empty((2048,), np.float32)  # 8 KiB: the other one
    assert pool.reused == 2 and pool.allocated == 0
    assert small.ctypes.data % 64 == 0 and large.ctypes.data % 64 == 0
    pool.empty((2048,), np.float32)  # none left: a fresh buffer
    assert pool.allocated == 1


def test_prefault_short_of_memory_stops_without_raising(monkeypatch) -> None:
    pool = scratch.ScratchPool(min_bytes=0)

    def refuse(*args: object, **kwargs: object) -> np.ndarray:
        raise MemoryError

    monkeypatch.setattr(scratch.np, "empty", refuse)
    pool.prefault([4096, 8192])  # raised on its own thread, it would only print a traceback
    assert pool.prefaulted == 0


def test_small_pages_switches_numpys_advice_off_and_restores_it(monkeypatch) -> None:
    calls: list[bool] = []
    state = {"huge": True}

    def switch(enabled: bool) -> bool:
        calls.append(enabled)
        previous, state["huge"] = state["huge"], enabled
        return previous

    monkeypatch.setattr(scratch, "_set_madvise_hugepage", switch)
    with scratch.small_pages():
        assert state["huge"] is False
        with scratch.small_pages():  # nested (two jobs in one process): switched once
            assert state["huge"] is False
        assert state["huge"] is False  # the outer block still runs
    assert state["huge"] is True and calls == [False, True]
    state["huge"] = False  # a process that had the advice off keeps it off
    with scratch.small_pages():
        pass
    assert state["huge"] is False


def test_the_job_runs_with_small_pages_and_leaves_the_setting_as_it_was(
        tmp_path: Path, monkeypatch) -> None:
    seen: list[bool] = []
    real = scratch._set_madvise_hugepage

    def spy(enabled: bool) -> bool:
        seen.append(enabled)
        return real(enabled)

    monkeypatch.setattr(scratch, "_set_madvise_hugepage", spy)
    before = real(True)
    real(before)
    ingest_to_store(corpus(docs=4, per_doc=5).to_arrow(), tmp_path / "store", buckets=2)
    assert seen[0] is False and seen[-1] is before
    assert real(before) is before  # restored: asking again returns the same setting


def test_trim_lets_go_of_free_buffers_larger_than_later_requests_take() -> None:
    """After a large bucket, its buffers do not stay under the smaller buckets after it."""
    pool = scratch.ScratchPool(min_bytes=0)
    big, small = pool.empty((1000, 8), np.float32), pool.empty((100, 8), np.float32)
    lent = pool.empty((1000, 8), np.float32)  # still in use: never let go
    del big, small
    gc.collect()
    pool.trim(100 * 8 * 4)
    assert [b.nbytes for b in pool._free] == [int(100 * 8 * 4 * scratch.HEADROOM) + scratch.ALIGN]
    again = pool.empty((100, 8), np.float32)  # the small buffer, reused
    assert pool.reused == 1 and again.shape == (100, 8) and lent.shape == (1000, 8)
    del again
    gc.collect()
    pool.trim(0)
    assert not pool._free
