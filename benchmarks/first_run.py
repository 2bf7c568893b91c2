"""First run (issue 46): what a new user waits for before anything is cached.

Each run is a fresh process with ``NUMBA_CACHE_DIR`` pointing at a new, empty directory, so
every jitted kernel of the package (and of any library) is compiled in that run and none is
loaded from an earlier one:

- ``arrowdedup ingest`` of the bundled sample docs folder (``data/sample``) with the
  Model2Vec embedder (``model2vec:../shared/data/models/m2v-minilm-l6-256``) into a new store
  (``--json``: the job's own stage timings, among them ``compile``);
- ``python -m arrowdedup.demo`` (what ``make demo`` runs once the venv is built) into a new
  output folder.

Beside them, in the same run, the warm-cache cold-start rows of :mod:`benchmarks.cold_start`
(``arrowdedup --help`` and a 10-segment ingest, the package's own warm cache), whose targets
still hold. The ingests and the warm rows are interleaved, so a burst of load hits each alike;
the demos follow (``--quick`` leaves them out).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .cold_start import _run, _small_table
from .common import ROOT, SHARED_DATA, fmt, table

TITLE = "First run: from an empty Numba cache"
REPEATS = 3
MODEL = SHARED_DATA / "models" / "m2v-minilm-l6-256"
SAMPLE = ROOT / "data" / "sample"
TARGETS = {"ingest_sample_s": 20.0, "demo_s": 60.0, "help_s": 0.5, "ingest_10_s": 1.5}
LABELS = {
    "ingest_sample": "`arrowdedup ingest data/sample` (Model2Vec), empty Numba cache",
    "demo": "`python -m arrowdedup.demo` (`make demo`), empty Numba cache",
    "help": "`arrowdedup --help`, warm cache",
    "ingest_10": "`arrowdedup ingest` 10-segment Parquet → store, warm cache",
}


def _ingest_sample(tmp: Path, i: int, env: dict[str, str]) -> tuple[float, float, dict[str, Any]]:
    """(wall s, CPU s, the job's stage timings) of one ingest from an empty cache."""
    cache = tmp / f"numba-ingest-{i}"
    cache.mkdir()
    store = tmp / f"store-{i}"
    cmd = [sys.executable, "-m", "arrowdedup", "ingest", str(SAMPLE), "--out", str(store),
           "--embedder", f"model2vec:{MODEL}", "--json"]
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env={**env, "NUMBA_CACHE_DIR": str(cache)},
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-1000:]}")
    timings = json.loads(proc.stdout)["timings"]
    shutil.rmtree(store, ignore_errors=True)
    return wall, _children_cpu() - cpu, timings


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _demo(tmp: Path, i: int, env: dict[str, str]) -> tuple[float, float]:
    cache = tmp / f"numba-demo-{i}"
    cache.mkdir()
    out = tmp / f"demo-{i}"
    wall, cpu = _run([sys.executable, "-m", "arrowdedup.demo", "--out", str(out)],
                     {**env, "NUMBA_CACHE_DIR": str(cache)})
    shutil.rmtree(out, ignore_errors=True)
    return wall, cpu


def run(quick: bool) -> dict[str, Any]:
    if not MODEL.is_dir():
        raise RuntimeError(f"the Model2Vec model is missing at {MODEL}; the first-run "
                           "benchmark needs ../shared/data/models/m2v-minilm-l6-256")
    repeats = REPEATS
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    runs: dict[str, list[float]] = {k: [] for k in LABELS}
    cpu: dict[str, list[float]] = {k: [] for k in LABELS}
    stages: list[dict[str, float]] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="arrowdedup-first-") as name:
        tmp = Path(name)
        small = tmp / "small.parquet"
        _small_table(small)
        small_store = tmp / "small-store"
        cli = [sys.executable, "-m", "arrowdedup"]
        _run([*cli, "ingest", str(small), "--out", str(small_store), "-q"], env)  # warm
        shutil.rmtree(small_store)
        for i in range(repeats):
            wall, used, timings = _ingest_sample(tmp, i, env)
            runs["ingest_sample"].append(wall)
            cpu["ingest_sample"].append(used)
            stages.append(timings)
            print(f"ingest_sample {i}: {wall:.2f} s wall, {used:.2f} s CPU, compile "
                  f"{timings['compile']:.2f} s", flush=True)
            for key, cmd in (("help", [*cli, "--help"]),
                             ("ingest_10", [*cli, "ingest", str(small), "--out",
                                            str(small_store), "-q"])):
                wall, used = _run(cmd, env)
                runs[key].append(wall)
                cpu[key].append(used)
                shutil.rmtree(small_store, ignore_errors=True)
                print(f"{key} {i}: {wall:.2f} s wall, {used:.2f} s CPU", flush=True)
        # The demos last: each is minutes from an empty cache on a busy machine, and the
        # figures above stand without them.
        for i in range(0 if quick else repeats):
            wall, used = _demo(tmp, i, env)
            runs["demo"].append(wall)
            cpu["demo"].append(used)
            print(f"demo {i}: {wall:.2f} s wall, {used:.2f} s CPU", flush=True)
    load_after = os.getloadavg()[0]
    sides = [k for k in LABELS if runs[k]]
    med = {k: statistics.median(runs[k]) for k in sides}
    med_cpu = {k: statistics.median(cpu[k]) for k in sides}
    met = {k: med[k] <= TARGETS[f"{k}_s"] for k in sides}
    rows = [[LABELS[k], med[k], min(runs[k]), max(runs[k]), med_cpu[k],
             f"{'met' if met[k] else 'MISSED'} (≤ {TARGETS[f'{k}_s']:g} s)"] for k in sides]
    keys = [k for k in stages[0] if k != "total" and max(s[k] for s in stages) >= 0.005]
    stage_rows = [[k, statistics.median(s[k] for s in stages), min(s[k] for s in stages),
                   max(s[k] for s in stages)] for k in [*keys, "total"]]
    return {
        "parameters": {"repeats": repeats, "sample": "data/sample",
                       "embedder": "model2vec:../shared/data/models/m2v-minilm-l6-256",
                       "demo": not quick},
        "figures": {"runs": runs, "median_s": med, "cpu_runs": cpu, "median_cpu_s": med_cpu,
                    "targets": TARGETS, "meets_targets": met, "ingest_stages": stages,
                    "load_average_1min": [load_before, load_after]},
        "tables": [
            table(f"Fresh-process wall time (seconds; median, min, max of {repeats}) and CPU "
                  "time (user + system, median)",
                  ["what", "median s", "min s", "max s", "CPU s", "target"], rows),
            table("Stages of the sample ingest from an empty cache, as the job reports them "
                  "(`ingest --json`; seconds: median, min, max)",
                  ["stage", "median s", "min s", "max s"], stage_rows),
        ],
        "notes": [
            "Each first-run figure is a whole fresh process with NUMBA_CACHE_DIR set to a new "
            "empty directory, so every jitted function is compiled in it (Numba then neither "
            "reads nor writes the package's own cache).",
            "The job's `compile` stage is the loading or compiling of the kernels the run "
            "uses, before the work (arrowdedup.pipeline.precompile); no other stage includes it.",
            "The venv build time is not measured here (the benchmark never rebuilds a venv).",
            "The machine has 2 cores shared with other work: the 1-minute load average was "
            f"{load_before:.1f} before and {load_after:.1f} after; CPU time is less "
            "sensitive to that load than wall time.",
            f"Warm-cache rows as in the cold-start benchmark: `--help` {fmt(med['help'])} s, "
            f"10-segment ingest {fmt(med['ingest_10'])} s.",
        ],
    }


def headline(result: dict[str, Any]) -> list[str]:
    f = result.get("figures") or {}
    med = f.get("median_s")
    if not med:
        return []
    met = f["meets_targets"]
    parts = [f"sample ingest {med['ingest_sample']:.1f} s (≤ 20 s: "
             f"{'met' if met['ingest_sample'] else 'MISSED'})"]
    if "demo" in med:
        parts.append(f"`make demo` {med['demo']:.1f} s (≤ 60 s: "
                     f"{'met' if met['demo'] else 'MISSED'})")
    return ["First run from an empty Numba cache: " + ", ".join(parts) + "."]
