"""Shared helpers of the benchmarks: machine, versions, commit, timing, JSON, Markdown tables.

A benchmark is a module ``benchmarks/<name>.py`` with

- ``TITLE: str`` (optional) and ``run(quick: bool) -> dict`` returning
  ``{"parameters": {...}, "figures": {...}, "tables": [table(...), ...], "notes": [...]}``;
- optionally ``plot(result: dict, out_dir: Path) -> list[Path]`` (PNG files, from the JSON only);
- optionally ``headline(result: dict) -> list[str]`` (bullet lines for the README's Performance
  section).

The harness (``python -m benchmarks run``) adds the machine, versions, commit and date, writes
``benchmarks/results/<name>.json`` and regenerates the Markdown from those files.
"""

from __future__ import annotations

import datetime as dt
import gc
import importlib.metadata
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
RESULTS = Path(__file__).resolve().parent / "results"
LIBRARIES = (
    "arrowdedup", "polars", "pyarrow", "numpy", "numba", "duckdb", "datasketch", "xxhash",
    "semhash", "vicinity", "model2vec", "sentence-transformers", "torch", "bm25s", "ray",
    "matplotlib", "scipy",
)


def machine() -> dict[str, Any]:
    """CPU model, logical cores, memory and OS of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory_gb = round(int(line.split()[1]) / 1024**2, 1)
                break
    except OSError:
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "load_average_1_5_15m": load,  # the machines are shared: context for the timings
        "memory_return": memory_return(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def memory_return() -> dict[str, Any]:
    """How this (virtual) machine hands memory back, which the timings of anything that
    allocates fresh memory depend on: free page reporting (a guest returns free blocks of
    ``2**order`` pages to its host, so touching such memory again costs a host fault as well
    as the guest's page clearing) and transparent huge pages."""
    base = "/sys/module/page_reporting/parameters/"
    order = _read(base + "page_reporting_order")
    thp = _read("/sys/kernel/mm/transparent_hugepage/enabled")
    return {
        "free_page_reporting": order is not None,
        "page_reporting_order": int(order) if order and order.lstrip("-").isdigit() else None,
        "transparent_hugepages": thp.split("[")[1].split("]")[0] if thp and "[" in thp
        else thp,
    }


def versions(extra: Sequence[str] = ()) -> dict[str, str | None]:
    """Installed version of Python and of every library a benchmark may touch."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in (*LIBRARIES, *extra):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


# What the harness itself writes: a run of several parts or benchmarks must not call the code
# it measures dirty because an earlier part rewrote these.
GENERATED = ("benchmarks/results", "benchmarks/README.md", "README.md")


def git_commit() -> dict[str, Any]:
    """HEAD commit of the checkout and whether tracked files other than the generated results
    and READMEs differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=False).stdout.strip()

    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", ".",
                     *(f":(exclude){path}" for path in GENERATED)))
    return {"commit": commit or None, "dirty": dirty}


def now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def timeit(fn: Callable[[], Any], *, repeats: int = 3, warmup: int = 1) -> dict[str, Any]:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times; seconds per run.

    Reports the best (the least disturbed by other processes on a shared machine) and the
    median; ``value`` is the last run's return value.
    """
    value = None
    for _ in range(warmup):
        value = fn()
    runs = []
    for _ in range(max(1, repeats)):
        gc.collect()
        start = time.perf_counter()
        value = fn()
        runs.append(time.perf_counter() - start)
    return {"best": min(runs), "min": min(runs), "max": max(runs),
            "median": statistics.median(runs), "runs": runs, "value": value}


def timeit_interleaved(fns: dict[str, Callable[[], Any]], *, repeats: int = 5,
                       warmup: int = 1) -> dict[str, dict[str, Any]]:
    """:func:`timeit` for several sides run in turn (one run of each side per round), so a
    burst of load on the shared machine hits every side alike."""
    values: dict[str, Any] = {}
    for _ in range(warmup):
        for name, fn in fns.items():
            values[name] = fn()
    runs: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(max(1, repeats)):
        for name, fn in fns.items():
            values[name] = None  # the previous result's memory is free before the next run
            gc.collect()
            start = time.perf_counter()
            values[name] = fn()
            runs[name].append(time.perf_counter() - start)
    return {name: {"best": min(r), "min": min(r), "max": max(r),
                   "median": statistics.median(r), "runs": r, "value": values[name]}
            for name, r in runs.items()}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """One timed call: (seconds, value)."""
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
          note: str | None = None) -> dict[str, Any]:
    """A table for the README, stored in the result JSON."""
    return {"title": title, "columns": list(columns), "rows": [list(r) for r in rows],
            "note": note}


def fmt(value: Any, digits: int = 3) -> str:
    """Compact human formatting of a cell."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:  # NaN
            return "–"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value else f"{value:.{digits}f}"
    return str(value)


def markdown_table(t: dict[str, Any]) -> str:
    """Render one stored table as GitHub Markdown."""
    cols = t["columns"]
    lines = [f"**{t['title']}**", "", "| " + " | ".join(cols) + " |",
             "|" + "|".join("---" for _ in cols) + "|"]
    for row in t["rows"]:
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    if t.get("note"):
        lines += ["", t["note"]]
    return "\n".join(lines)


def replace_block(text: str, start: str, end: str, body: str) -> str:
    """Replace what lies between two marker lines (appending both when absent)."""
    block = f"{start}\n{body.rstrip()}\n{end}"
    i = text.find(start)
    j = text.find(end, i + len(start)) if i >= 0 else -1
    if i < 0 or j < 0:
        return text.rstrip() + "\n\n" + block + "\n"
    return text[:i] + block + text[j + len(end):]


def seconds(value: float) -> str:
    if value < 1e-3:
        return f"{value * 1e6:.0f} µs"
    if value < 1:
        return f"{value * 1e3:.0f} ms"
    return f"{value:.2f} s"


def pyplot() -> Any:
    """matplotlib's pyplot on the headless Agg backend (benchmarks run without a screen)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 110) -> list[Path]:
    """Lay out, write and close a figure; the list a benchmark's ``plot`` returns."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return [path]
