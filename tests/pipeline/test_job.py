"""The one job path: every input kind (frames, Arrow tables, files, folders) goes through
``ingest_to_store`` and gets the same frozen ``JobResult``, read lazily from the version."""

from __future__ import annotations

import dataclasses
import fcntl
import multiprocessing
import os
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pytest

from arrowdedup import JobResult, StoreError, ingest, ingest_to_store, open_store
from arrowdedup.config import resolve_config
from arrowdedup.store import INV_NORM, atomic_write_bytes, store_lock
from arrowdedup.timings import STAGES
from tests.helpers import M2V_MODEL, need
from tests.helpers.pipeline import corpus, data_files


def test_every_table_input_writes_the_same_store(tmp_path: Path) -> None:
    frame = corpus(docs=6, per_doc=20)
    ipc = tmp_path / "in.arrow"
    feather.write_feather(frame.to_arrow(), ipc, compression="uncompressed")
    results = {
        "frame": ingest_to_store(frame, tmp_path / "frame", buckets=3),
        "lazy": ingest_to_store(frame.lazy(), tmp_path / "lazy", buckets=3),
        "arrow": ingest_to_store(frame.to_arrow(), tmp_path / "arrow", buckets=3),
        "file": ingest_to_store(ipc, tmp_path / "file", buckets=3),
    }
    reference = data_files(tmp_path / "file")
    whole = ingest(frame)
    for name, result in results.items():
        assert isinstance(result, JobResult)
        assert data_files(tmp_path / name) == reference, name
        assert tuple(result.timings) == STAGES, name  # one set of keys, in one order
        assert result.timings["total"] > 0 and result.timings["extract"] == 0
        assert result.original_count == frame.height
        assert result.final_count == whole.final_count
        kept = result.kept
        assert isinstance(kept, pl.LazyFrame)
        assert kept.collect().sort("segment_id").drop("embedding").equals(
            whole.kept.sort("segment_id").drop("embedding"))
        assert result.decisions.collect().height == frame.height
        assert result.documents.collect().height == 6
        assert result.version_id == open_store(tmp_path / name).run_id
        assert result.path == open_store(tmp_path / name).version
    with pytest.raises(dataclasses.FrozenInstanceError):
        results["frame"].timings = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        results["frame"].timings["total"] = 0.0  # type: ignore[index]


def test_documents_take_the_same_path(tmp_path: Path) -> None:
    from arrowdedup import get_embedder

    m2v = get_embedder(f"model2vec:{need(M2V_MODEL)}")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Keys\n\nKeys rotate every 90 days.\n\nKeys rotate every 90 "
                               "days.\n\nSet --max-request-bytes to 10.\n")
    result = ingest_to_store(docs, tmp_path / "s", embedder=m2v, quiet=True)
    assert tuple(result.timings) == STAGES
    assert result.timings["extract"] > 0 and result.timings["embed"] > 0
    assert result.counts["dropped_exact"] == 1
    assert open_store(tmp_path / "s").manifest["source"] == "documents"


def test_each_vector_is_stored_once_with_its_inverse_norm(tmp_path: Path) -> None:
    frame = corpus(docs=5, per_doc=12).with_columns(
        pl.when(pl.col("position") == 3).then(None).otherwise(pl.col("embedding"))
        .alias("embedding"))
    result = ingest_to_store(frame, tmp_path / "s", buckets=2)
    version = result.path
    assert not (version / "vectors.npy").exists()
    store = open_store(tmp_path / "s")
    kept = store.segments().collect()
    vectors = store.vectors()
    assert vectors is not None and vectors.shape == (kept.height, 16)
    for path in sorted((version / "embeddings").glob("*.arrow")):
        with pa.memory_map(str(path)) as source:
            table = pa.ipc.open_file(source).read_all()
        assert table.column_names == ["embedding", INV_NORM]
    emb = kept.get_column("embedding")
    for i in range(kept.height):
        value = emb[i]
        if value is None:
            assert not vectors[i].any()
        else:
            e = np.asarray(value, dtype=np.float32)
            np.testing.assert_allclose(vectors[i], e / np.linalg.norm(e), rtol=1e-6, atol=1e-7)
    q = np.array(emb.drop_nulls()[0], dtype=np.float32)
    q = q / np.linalg.norm(q)
    scores = vectors.scores(q[None, :])[:, 0]
    np.testing.assert_allclose(scores, np.asarray(vectors) @ q, rtol=1e-5, atol=1e-6)


def _hold(root: str, ready: multiprocessing.synchronize.Event,
          release: multiprocessing.synchronize.Event) -> None:
    with store_lock(Path(root)):
        ready.set()
        release.wait(30)


def test_lock_is_an_flock_the_os_releases(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(root), ready, release))
    holder.start()
    assert ready.wait(30)
    with pytest.raises(StoreError, match=f"being written by process {holder.pid}"):
        ingest_to_store(corpus(docs=1, per_doc=4), root)
    holder.kill()  # a SIGKILL: the OS drops the flock, no pid check needed
    holder.join(30)
    assert (root / ".lock").exists()
    with open(root / ".lock") as fh:  # nobody holds it any more
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fh, fcntl.LOCK_UN)
    ingest_to_store(corpus(docs=1, per_doc=4), root)
    assert not (root / ".lock").exists()


def test_atomic_write_never_shows_half_a_file(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "f.bin"
    atomic_write_bytes(target, b"old")

    def boom(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_the_store_imports_neither_ingest_nor_retrieval() -> None:
    import subprocess
    import sys

    code = ("import sys, arrowdedup.store as s; s.open_store; "
            "bad = [m for m in sys.modules if m.startswith(('arrowdedup.dedup.ingest', "
            "'arrowdedup.retrieval', 'arrowdedup.dedup.kernels'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_no_store_module_imports_the_job_modules_even_inside_a_function() -> None:
    """The rule is about the code, not only what loads at import: a function-level import
    (the delta writer once built its BM25 index itself) breaks it too."""
    import ast

    import arrowdedup.store

    banned = {f"arrowdedup.{name}" for name in ("ingest", "job", "retrieval", "kernels",
                                                 "update")}

    def imported(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        if not isinstance(node, ast.ImportFrom):
            return []
        if node.level == 0:
            return [node.module or ""]
        # Relative to arrowdedup.store: one dot is the store, two the package.
        base = ["arrowdedup", "store"][:3 - node.level]
        if node.module:
            return [".".join([*base, node.module])]
        return [".".join([*base, alias.name]) for alias in node.names]

    found = []
    for path in sorted(Path(arrowdedup.store.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found += [f"{path.name}:{getattr(node, 'lineno', 0)} {name}"
                      for name in imported(node)
                      if ".".join(name.split(".")[:2]) in banned]
    assert found == []


def _gathered(tables: list[pa.Table], bucket: int, buckets: int) -> pa.Table | None:
    """A bucket's rows as a Polars gather from each whole table gives them (the read before
    the embeddings of IPC files were read with preadv)."""
    from arrowdedup.pipeline.inputs import row_buckets

    parts = []
    for table in tables:
        rows = np.flatnonzero(row_buckets(table, buckets) == bucket)
        if rows.size:
            frame = pl.from_arrow(table, rechunk=False)
            assert isinstance(frame, pl.DataFrame)
            parts.append(frame[rows].to_arrow())
    return (pa.concat_tables(parts) if len(parts) > 1 else parts[0]) if parts else None


@pytest.mark.parametrize("jit_min_runs", [1, 10**9])
def test_bucket_reads_equal_a_gather_of_the_whole_input(tmp_path: Path, jit_min_runs: int,
                                                        monkeypatch) -> None:
    """IPC files (several record batches, uncompressed or compressed, float32 and float64
    lists) give each bucket the same table as a gather from the whole input: same values,
    types and chunks, whether the embeddings' runs are read by the jitted loop or from
    Python."""
    import pyarrow.ipc as pa_ipc

    from arrowdedup.pipeline import inputs

    monkeypatch.setattr(inputs, "JIT_MIN_RUNS", jit_min_runs)

    frame = corpus(docs=40, per_doc=30)
    table = frame.to_arrow()
    emb = frame.get_column("embedding").to_numpy().astype(np.float64)
    table = table.append_column("wide", pa.FixedSizeListArray.from_arrays(
        pa.array(emb.reshape(-1)), emb.shape[1]))
    buckets = 5
    for compression in (None, "lz4"):
        path = tmp_path / f"in-{compression}.arrow"
        with pa_ipc.new_file(path, table.schema, options=pa_ipc.IpcWriteOptions(
                compression=compression)) as writer:
            for batch in table.to_batches(max_chunksize=333):
                writer.write_batch(batch)
        mapped = inputs._mapped(str(path))
        source = inputs.BucketSource((str(path),), buckets, False, table.num_rows)
        cache = inputs.SourceCache()  # the local engine's: one mapping for every bucket
        for b in range(buckets):
            want = _gathered([mapped], b, buckets)
            for got in (source.read(b), source.read(b, cache)):
                assert got is not None and want is not None
                assert got.schema.equals(want.schema) and got.equals(want), (compression, b)
                assert [c.num_chunks for c in got.columns] == \
                    [c.num_chunks for c in want.columns]
        assert list(cache.mapped) == [str(path)] and list(cache.ids) == [str(path)]
    # An in-memory table of several chunks takes its rows the same way.
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=333))
    memory = inputs.BucketSource(("mem:0",), buckets, False, table.num_rows, tables=(chunked,))
    for b in range(buckets):
        got, want = memory.read(b), _gathered([chunked], b, buckets)
        assert got is not None and want is not None
        assert got.schema.equals(want.schema) and got.equals(want), b
        assert [c.num_chunks for c in got.columns] == [c.num_chunks for c in want.columns]


@pytest.mark.parametrize("jit_min_runs", [1, 10**9])
def test_rows_past_the_end_of_the_file_are_refused(tmp_path: Path, jit_min_runs: int,
                                                   monkeypatch) -> None:
    from arrowdedup import InputError
    from arrowdedup.pipeline import inputs

    monkeypatch.setattr(inputs, "JIT_MIN_RUNS", jit_min_runs)
    path = tmp_path / "short.bin"
    path.write_bytes(bytes(range(200)) * 8)  # 1,600 bytes: rows of 16 bytes at offset 64
    out = np.zeros((4, 4), dtype=np.float32)
    spans = [(100, 64, 16)]
    inputs._read_runs(str(path), inputs._runs(spans, np.array([0, 1, 5, 9])), out)
    want = np.frombuffer(path.read_bytes(), dtype=np.uint8)
    rows = [want[64 + 16 * r:80 + 16 * r] for r in (0, 1, 5, 9)]
    assert out.view(np.uint8).tobytes() == b"".join(r.tobytes() for r in rows)
    with pytest.raises(InputError, match="shorter than its Arrow IPC footer"):
        inputs._read_runs(str(path), inputs._runs(spans, np.array([0, 1, 95, 99])), out)


def test_a_ray_worker_reuses_its_mapping_until_the_file_changes(tmp_path: Path) -> None:
    """The tasks one Ray worker runs share one SourceCache per input (as the local engine's
    threads do); a file rewritten since is mapped afresh, so no task reads stale rows."""
    from arrowdedup.pipeline import bucket, inputs
    from arrowdedup.pipeline.engines import ray as ray_engine

    frame = corpus(docs=12, per_doc=10)
    path = tmp_path / "in.arrow"
    feather.write_feather(frame.to_arrow(), path, compression="uncompressed")
    source = inputs.BucketSource((str(path),), 3, False, frame.height)
    bjob = bucket.BucketJob(resolve_config(None), 1)
    ray_engine._WORKER_CACHE = None
    first = ray_engine._ray_task(source, 0, bjob)
    cache = ray_engine._WORKER_CACHE
    assert first is not None and cache is not None and list(cache[1].mapped) == [str(path)]
    second = ray_engine._ray_task(source, 1, bjob)
    assert second is not None and ray_engine._WORKER_CACHE is cache  # reused, not rebuilt
    want = bucket.process_bucket(source, 1, bjob)
    assert want is not None and second[1].documents.equals(want[1].documents)

    # Rewritten with other rows: a new mapping, and the bucket read from the new file.
    other = corpus(docs=12, per_doc=11, seed=5)  # other counts, whatever the guard keeps
    replacement = tmp_path / "new.arrow"
    feather.write_feather(other.to_arrow(), replacement, compression="uncompressed")
    os.replace(replacement, path)
    again = ray_engine._ray_task(source, 0, bjob)
    assert ray_engine._WORKER_CACHE is not cache
    fresh = bucket.process_bucket(source, 0, bjob)
    assert again is not None and fresh is not None
    assert again[1].documents.equals(fresh[1].documents)
    assert not again[1].documents.equals(first[1].documents)
    ray_engine._WORKER_CACHE = None


def test_a_ray_run_that_started_ray_stops_it_before_returning(tmp_path: Path) -> None:
    """Ray's shutdown runs beside the commit, and the run waits for it: on return Ray is down,
    and the store is whole."""
    ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
    if ray.is_initialized():
        ray.shutdown()
    frame = corpus(docs=8, per_doc=10)
    path = tmp_path / "in.arrow"
    feather.write_feather(frame.to_arrow(), path, compression="uncompressed")
    psutil = pytest.importorskip(
        "psutil", reason="psutil is not installed (no extra of ours names it; ipykernel brings it)")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    result = ingest_to_store([path], tmp_path / "s", buckets=2, engine="ray", quiet=True)
    assert not ray.is_initialized()
    # No process of the cluster it started is left (the monitor ended before the shutdown).
    left = [p for p in psutil.Process().children(recursive=True)
            if p.pid not in before and p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [p.cmdline()[:3] for p in left]
    local = ingest_to_store([path], tmp_path / "local", buckets=2, quiet=True)
    assert data_files(tmp_path / "s") == data_files(tmp_path / "local")
    assert result.kept.collect().height == local.kept.collect().height


def test_a_ray_cluster_the_run_starts_gives_its_workers_one_thread_pools(monkeypatch) -> None:
    """Each task reserves one CPU, so the workers of a cluster ``ray_start`` starts size
    Polars' and Numba's pools to one thread; they run at this process's priority, not Ray's
    nice 15; a value the user set is kept, and this process's environment is as it was."""
    ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
    from arrowdedup.pipeline.engines import ray as ray_engine

    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.delenv("POLARS_MAX_THREADS", raising=False)
    monkeypatch.setenv("NUMBA_NUM_THREADS", "2")
    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    before = dict(os.environ)

    def pools() -> tuple[str | None, str | None, int, int]:
        import polars

        return (os.environ.get("POLARS_MAX_THREADS"), os.environ.get("NUMBA_NUM_THREADS"),
                polars.thread_pool_size(), os.nice(0))

    assert ray_engine.ray_start(None)
    try:
        # Every variable is as it was and none of ours is left behind; ray.init may add its
        # own (RAY_AUTH_MODE, ...) on first use, which are Ray's, not ours.
        assert {name: os.environ.get(name) for name in before} == before
        assert not set(ray_engine.LOCAL_CLUSTER_ENV) & (set(os.environ) - set(before))
        got = ray.get(ray.remote(num_cpus=1)(pools).remote())
    finally:
        ray_engine.stop_ray()
    assert got == ("1", "2", 1, os.nice(0))


def test_one_thread_means_one_bucket_at_a_time(tmp_path: Path, monkeypatch) -> None:
    """``threads=1`` works on one bucket at a time (the single-thread benchmark row is single
    threaded); any other count keeps ``LOCAL_AHEAD + 1`` buckets in flight. The store is the
    same either way."""
    from arrowdedup.pipeline import bucket
    from arrowdedup.pipeline.engines import local as local_engine

    assert local_engine.buckets_in_flight(1) == 1
    in_flight = local_engine.buckets_in_flight
    assert in_flight(None) == in_flight(4) == local_engine.LOCAL_AHEAD + 1
    frame = corpus(docs=12, per_doc=10)
    busy, peak = [0], [0]
    real = bucket.process_bucket

    def counted(*args, **kwargs):
        busy[0] += 1
        peak[0] = max(peak[0], busy[0])
        try:
            return real(*args, **kwargs)
        finally:
            busy[0] -= 1

    monkeypatch.setattr(local_engine, "process_bucket", counted)
    ingest_to_store(frame, tmp_path / "one", buckets=4, threads=1, quiet=True)
    assert peak[0] == 1
    ingest_to_store(frame, tmp_path / "two", buckets=4, threads=2, quiet=True)
    assert data_files(tmp_path / "one") == data_files(tmp_path / "two")


def test_a_failed_background_ray_stop_is_raised_but_never_hides_the_runs_error(monkeypatch
                                                                              ) -> None:
    from arrowdedup.pipeline.engines import ray as ray_engine

    def failing_stop() -> None:
        raise RuntimeError("stop failed")

    monkeypatch.setattr(ray_engine, "ray_start", lambda address: True)
    monkeypatch.setattr(ray_engine, "stop_ray", failing_stop)
    with pytest.raises(RuntimeError, match="stop failed"):
        with ray_engine.RaySession(None) as session:
            session.stop_soon()  # the run finished; its stop fails on the thread
    with pytest.raises(ValueError, match="the run's own"):
        with ray_engine.RaySession(None) as session:
            session.stop_soon()
            raise ValueError("the run's own error")


def test_the_stage_table_counts_reading_fingerprints_and_bucket_numbers(
        tmp_path: Path, monkeypatch) -> None:
    """Work done outside ``ingest()`` lands in a stage: taking a bucket's rows from the input
    in ``read``, the input fingerprints in ``encode``, every row's bucket in ``partition``.
    (At 1M segments the first two were about a second of CPU that no stage showed.)"""
    import time

    from arrowdedup.pipeline import bucket, inputs

    frame = corpus(docs=8, per_doc=10)
    ipc = tmp_path / "in.arrow"
    feather.write_feather(frame.to_arrow(), ipc, compression="uncompressed")
    pause = 0.05

    def slowed(real):
        def run(*args, **kwargs):
            time.sleep(pause)
            return real(*args, **kwargs)
        return run

    source_class = inputs.BucketSource
    monkeypatch.setattr(source_class, "read_numbered", slowed(source_class.read_numbered))
    monkeypatch.setattr(bucket, "fingerprint_file", slowed(bucket.fingerprint_file))
    monkeypatch.setattr(bucket, "row_buckets", slowed(bucket.row_buckets))
    result = ingest_to_store(ipc, tmp_path / "s", buckets=2, threads=1, quiet=True)
    assert result.timings["read"] >= 2 * pause
    assert result.timings["encode"] >= 2 * pause
    assert result.timings["partition"] >= pause


@pytest.mark.parametrize("threads", [None, 1])
def test_workers_are_refilled_before_a_bucket_is_written(threads: int | None, monkeypatch) -> None:
    """While the caller writes bucket b, the local engine already works on the next
    ``LOCAL_AHEAD + 1`` buckets (no worker idles during a write); with one thread, on none."""
    import threading
    import time

    from arrowdedup.pipeline import bucket, inputs
    from arrowdedup.pipeline.engines import local as local_engine

    table = corpus(docs=12, per_doc=10).to_arrow()
    started: list[int] = []
    lock = threading.Lock()

    def recorded(source, bucket, *args, **kwargs):
        with lock:
            started.append(bucket)
        return ("bucket", bucket)

    monkeypatch.setattr(local_engine, "process_bucket", recorded)
    source = inputs.BucketSource(("mem:0",), 6, False, table.num_rows, (table,))
    stream = local_engine._local(source, bucket.BucketJob(resolve_config(None), threads))
    # The caller holds bucket 0 (as while writing it) and has not asked for the next one.
    assert next(stream) == ("bucket", 0)
    expected = [0] if threads == 1 else list(range(local_engine.LOCAL_AHEAD + 2))
    deadline = time.monotonic() + 5.0
    while sorted(started) != expected and time.monotonic() < deadline:
        time.sleep(0.01)  # a submitted bucket starts on a pool thread
    assert sorted(started) == expected
    assert [b for _, b in stream] == list(range(1, 6))
    assert sorted(started) == list(range(6))


@pytest.mark.parametrize("bound", ["all", "some"])
def test_buckets_over_the_alone_bound_run_by_themselves_and_write_the_same_store(
        bound: str, tmp_path: Path, monkeypatch) -> None:
    """A bucket of more than ``ALONE_BYTES`` input bytes is worked on with no other bucket in
    flight (its write included); the others still run two at a time, and the store is the
    same as when every bucket may run beside another."""
    import threading

    from arrowdedup.pipeline.engines import local as local_engine

    frame = corpus(docs=24, per_doc=10)
    path = tmp_path / "in.arrow"
    feather.write_feather(frame.to_arrow(), path, compression="uncompressed")
    ingest_to_store(path, tmp_path / "normal", buckets=6, quiet=True)
    sizes: list[int] = []
    real_sizes = local_engine.bucket_bytes

    def recorded_sizes(*args, **kwargs):
        sizes[:] = real_sizes(*args, **kwargs)
        return sizes

    monkeypatch.setattr(local_engine, "bucket_bytes", recorded_sizes)
    ingest_to_store(path, tmp_path / "sized", buckets=6, quiet=True)
    limit = 0 if bound == "all" else sorted(sizes)[len(sizes) // 2]
    alone = {b for b, n in enumerate(sizes) if n > limit}
    assert alone and (bound == "all" or len(alone) < len(sizes))
    monkeypatch.setattr(local_engine, "ALONE_BYTES", limit)
    lock = threading.Lock()
    busy: set[int] = set()
    beside: list[tuple[int, set[int]]] = []
    real = local_engine.process_bucket

    def counted(source, bucket, *args, **kwargs):
        if "alone" not in kwargs:  # the kernels' warm-up run on a bucket of its own
            return real(source, bucket, *args, **kwargs)
        assert kwargs["alone"] == (bucket in alone)
        with lock:
            beside.append((bucket, set(busy)))
            busy.add(bucket)
        try:
            return real(source, bucket, *args, **kwargs)
        finally:
            with lock:
                busy.discard(bucket)

    monkeypatch.setattr(local_engine, "process_bucket", counted)
    ingest_to_store(path, tmp_path / "alone", buckets=6, quiet=True)
    for bucket, others in beside:
        assert not (others and (bucket in alone or others & alone)), (bucket, others)
    assert data_files(tmp_path / "alone") == data_files(tmp_path / "normal")
