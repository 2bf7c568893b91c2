"""The ``ray`` engine: one Ray task per bucket; the driver writes their results in
bucket order, so the store is byte-identical to the local engine's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ...errors import ArrowDedupError, MissingDependencyError
from ...store import (
    BucketOutput,
)
from ..bucket import BucketJob, BucketSummary, process_bucket
from ..inputs import BucketSource, SourceCache


def _driver_node() -> str | None:
    """The Ray node this driver runs on; None through Ray Client (``ray://``), whose driver
    process and files are on a machine that is no node of the cluster."""
    import ray
    from ray.util.client import ray as client

    if client.is_connected():
        return None
    return str(ray.get_runtime_context().get_node_id())


# The SourceCache of the Ray worker process this module runs in: the tasks a worker runs in
# one job share its input mappings and bucket numbers, as the local engine's threads do, so a
# task does not map the file afresh and hash every doc_id of it again.
_WORKER_CACHE: tuple[tuple[Any, ...], SourceCache] | None = None


def _source_identity(source: BucketSource) -> tuple[Any, ...]:
    """What a cached mapping is valid for: the input files as they are on disk now (a file
    replaced or rewritten since gets a fresh mapping) and the bucket count."""
    files = []
    for path in source.files:
        st = os.stat(path) if path and not path.startswith("mem:") else None
        files.append((path, None if st is None else
                      (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)))
    return (source.buckets, source.partitioned, tuple(files))


def _ray_task(source: BucketSource, bucket: int, job: BucketJob
              ) -> tuple[BucketOutput, BucketSummary] | None:
    """One bucket in a Ray worker, through the worker's cache of the source (one source at a
    time is kept: a worker serves one driver's job, and Ray ends it with that job)."""
    global _WORKER_CACHE
    key = _source_identity(source)
    if _WORKER_CACHE is None or _WORKER_CACHE[0] != key:
        _WORKER_CACHE = None  # the old mappings go before the new ones are made
        _WORKER_CACHE = (key, SourceCache())
    return process_bucket(source, bucket, job, _WORKER_CACHE[1])


# The thread pools of a Ray worker sized to the one CPU each task reserves (``num_cpus=1``),
# as Ray itself sizes OpenMP's: left at the machine's core count, every worker runs Polars' and
# Numba's pools beside the others' on the same cores (measured: benchmarks/README.md,
# "Measured design choices").
ONE_CPU_POOLS = {"POLARS_MAX_THREADS": "1", "NUMBA_NUM_THREADS": "1"}


# Ray starts its workers at nice 15, below its own daemons and the driver, to keep a shared
# node's raylet responsive. In a cluster started for one run the workers are the run's
# compute, and the local engine runs at the caller's priority, so they get the caller's
# priority too (the measured gain is small and not firm: benchmarks/README.md, "Measured
# design choices").
LOCAL_CLUSTER_ENV = {**ONE_CPU_POOLS, "RAY_worker_niceness": "0"}


@contextlib.contextmanager
def _worker_environment(names: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``names`` set where the user has not set them, then restored: the
    processes a local ``ray.init`` spawns (raylet, and the workers it starts) inherit it; this
    process's own pools are built already or read it later, after the restore."""
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update({name: value for name, value in names.items() if saved[name] is None})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def ray_start(address: str | None) -> bool:
    """Start (or join) Ray; True when this call started it. Timed by the benchmarks. A cluster
    this call starts gives its workers one-thread pools and the caller's priority
    (:data:`LOCAL_CLUSTER_ENV`); a cluster it joins keeps the environment its workers were
    started with."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "ray", "--engine ray") from None
    if ray.is_initialized():
        return False
    # Not through runtime_env's env_vars: a job-level runtime env made Ray start workers for it
    # instead of using the ones it prestarts (6.24 s after ray.init, median of 5).
    with _worker_environment(LOCAL_CLUSTER_ENV if address is None else {}):
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    return True


def _stop_monitor() -> None:
    """End the autoscaler monitor of the Ray cluster this process started, before
    ``ray.shutdown``. Ray 2.60 stops the GCS first and then sends the monitor SIGTERM; the
    monitor's handler then waits on the stopped GCS to report its own exit, until Ray kills it
    one second later (1.0 of the 1.4 s a shutdown took, measured). A local cluster started for
    one run has nothing for the monitor to report. This reaches into Ray's node object, so any
    layout other than the one described leaves the monitor to ``ray.shutdown`` as before."""
    try:
        from ray._private import ray_constants
        from ray._private import worker as ray_worker
    except ImportError:
        return
    node = getattr(ray_worker, "_global_node", None)
    processes = getattr(node, "all_processes", None)
    if node is None or not isinstance(processes, dict) or not node.is_head():
        return
    for info in processes.get(getattr(ray_constants, "PROCESS_TYPE_MONITOR", "monitor"), []):
        process = getattr(info, "process", None)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=5)


def stop_ray() -> None:
    """Stop the Ray cluster this process started, as a run does. Timed by the benchmarks."""
    import ray

    _stop_monitor()
    ray.shutdown()


class RaySession:
    """Ray for one run: started (or joined) on entry; on exit, stopped when this run started
    it. ``stop_soon`` starts that stop on a thread once the last bucket is in, so that Ray's
    shutdown (about 0.4 s, see :func:`_stop_monitor`) overlaps the commit; the exit waits for
    it. A run that fails stops Ray before its exit returns, so no task of it can
    still be writing when the writer removes the staging directory."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        self.started = False
        self._stopping: threading.Thread | None = None
        self._error: BaseException | None = None

    def __enter__(self) -> RaySession:
        self.started = ray_start(self.address)
        return self

    def stop_soon(self) -> None:
        if self.started and self._stopping is None:
            self._stopping = threading.Thread(target=self._stop, name="arrowdedup-ray-stop",
                                              daemon=True)
            self._stopping.start()

    def _stop(self) -> None:
        try:
            stop_ray()
        except BaseException as err:  # raised by __exit__, in the caller's thread
            self._error = err

    def __exit__(self, kind: object, *_: object) -> None:
        if not self.started:
            return
        if self._stopping is None:
            stop_ray()
        else:
            self._stopping.join()
        self.started = False
        if self._error is not None and kind is None:  # never hides the run's own error
            raise self._error


def _ray_result(ray: Any, ref: Any) -> Any:
    """``ray.get(ref)``; a refusal raised inside the task (bad input, a full disk) is raised
    as itself, as the local engine raises it, not as Ray's wrapper that prints the worker's
    colored traceback before the message."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, ArrowDedupError):
            raise cause from None
        raise


def _ray(source: BucketSource, job: BucketJob, session: RaySession,
         staging: Path | None = None) -> Iterator[tuple[BucketOutput, BucketSummary]]:
    """Buckets as Ray tasks, in order. Tasks on the driver's node write their files into
    ``staging`` (the writer's version directory) themselves; on other nodes they return the
    bytes, which the driver writes. Ray stops (``session.stop_soon``) once every bucket is in.
    """
    import ray

    pending: dict[int, Any] = {}
    try:
        task = ray.remote(num_cpus=1)(_ray_task)
        # A bounded window of tasks in flight keeps the driver's memory near a few buckets.
        window = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        nxt = 0
        node = _driver_node() if staging is not None else None
        one_thread = dataclasses.replace(job, threads=1, node=node,
                                         staging=str(staging) if staging is not None else None)
        for b in range(source.buckets):
            while nxt < source.buckets and len(pending) < window:
                pending[nxt] = task.remote(source, nxt, one_thread)
                nxt += 1
            done = _ray_result(ray, pending.pop(b))
            if done is not None:
                yield done
        # Every bucket is in and written: the commit runs beside Ray's shutdown. (Not before
        # the last bucket was written: a result can hold buffers in Ray's shared memory.)
        session.stop_soon()
    finally:
        # A run that stops early leaves no task writing into a staging directory that the
        # writer is about to remove.
        for ref in pending.values():
            ray.cancel(ref, force=True)  # our tasks hold nothing a killed worker could lose


class Runner:
    """The ``ray`` engine (:class:`arrowdedup.pipeline.engines.base.Runner`)."""

    reads_in_process = False  # Ray tasks read the partition files

    def __init__(self, *, ray_address: str | None = None) -> None:
        self.ray_address = ray_address

    def prepare(self, source: BucketSource, cache: SourceCache) -> None:
        del source, cache  # each task finds its own rows

    def buckets(self, source: BucketSource, job: BucketJob, cache: SourceCache,
                staging: Path, stack: contextlib.ExitStack
                ) -> Iterator[tuple[BucketOutput, BucketSummary]]:
        del cache
        session = stack.enter_context(RaySession(self.ray_address))
        return _ray(source, job, session, staging)
