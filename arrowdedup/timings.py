"""The stage timings of a job: one set of keys, in one order, for every kind of run (full
ingest, update, delete, compaction), in the :class:`arrowdedup.pipeline.run.JobResult`, in the store
manifest's ``timings`` and in what ``arrowdedup ingest`` prints.

Each value is seconds of wall time (``time.perf_counter``), never negative. The stages in
:data:`SEQUENTIAL` run one after another on the job's own thread, each measured alone, so
their sum is at most ``total``. The stages in :data:`IN_BUCKETS` run inside ``buckets`` (the
pass over the buckets, from the first bucket's rows read to the last bucket written): they
are summed over the buckets, and buckets overlap (the local engine prepares the next buckets
while one is written, the Ray engine runs them at once), so their sum may exceed ``buckets``.
Two stages of that list also run after the pass: ``index`` includes finishing the indexes
(BM25) before the commit, and ``write`` files written outside the bucket loop.

``compile`` is the loading (from Numba's cache) or compiling of the jitted kernels the run uses,
done up front (:mod:`arrowdedup.pipeline.precompile`), never inside another stage. ``total`` is
the job's wall time. The manifest is written before the version is renamed into place and
``current`` switched, so its ``commit`` and ``total`` stop at the manifest (the rest, a rename
and the removal of old versions, is in the :class:`JobResult`'s). """

from __future__ import annotations

import types
from collections.abc import Mapping

SEQUENTIAL = ("compile", "extract", "embedder_load", "embed", "partition", "buckets", "commit")
IN_BUCKETS = ("read", "validate", "salience", "hash", "facts", "plan", "kernel", "output",
              "encode", "index", "write")
STAGES = ("compile", "extract", "embedder_load", "embed", "partition", "buckets", *IN_BUCKETS,
          "commit", "total")


def complete(values: Mapping[str, float]) -> Mapping[str, float]:
    """Every key of :data:`STAGES` (0.0 where a stage did not run), in that order, read-only;
    keys outside :data:`STAGES` are dropped."""
    out = dict.fromkeys(STAGES, 0.0)
    for key, value in values.items():
        if key in out:
            out[key] = max(0.0, float(value))
    return types.MappingProxyType(out)


def add(timings: dict[str, float], key: str, seconds: float) -> None:
    timings[key] = timings.get(key, 0.0) + seconds


def line(timings: Mapping[str, float]) -> str:
    """The stages as one line (what ``arrowdedup ingest`` prints): those that run one after
    another, the ones inside the bucket pass in brackets after ``buckets``, and the total;
    stages under 5 ms are left out."""

    def shown(keys: tuple[str, ...]) -> list[str]:
        return [f"{k} {timings[k]:.2f} s" for k in keys if timings.get(k, 0.0) >= 0.005]

    parts = []
    for key in SEQUENTIAL:
        if key == "buckets" and (inner := shown(IN_BUCKETS)):
            parts.append(f"buckets {timings[key]:.2f} s [overlapping: {', '.join(inner)}]")
        else:
            parts.extend(shown((key,)))
    return "stages: " + ", ".join(parts) + f"; total {timings.get('total', 0.0):.2f} s"
