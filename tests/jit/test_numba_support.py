"""``arrowdedup.jit.runtime``: Numba's NumPy support loads without importing ``scipy.linalg``, and
what a jitted function may still ask of BLAS keeps working."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from arrowdedup.jit import runtime

PROBE = """
import sys
import numpy as np
import pyarrow as pa
from arrowdedup.arrays.hashing import xxh64
xxh64(pa.array([f"text {i}" for i in range(50_000)]))  # jitted (not the twin) at this size
assert "numba" in sys.modules, "the probe did not reach the jitted code"
print("linalg-after-kernel", "scipy.linalg" in sys.modules)
import numba

@numba.njit
def both(x, y):
    return np.dot(x, y), np.convolve(x, y)

dot, conv = both(np.arange(4.0), np.arange(4.0))
print("dot", float(dot), "conv", conv.tolist())
print("linalg-after-dot", "scipy.linalg" in sys.modules)
"""


def test_a_kernel_process_never_imports_scipy_linalg_and_blas_still_works() -> None:
    pytest.importorskip(
        "scipy.linalg", reason="scipy is not installed (no extra of ours needs it; the test checks "
        "that a kernel process never loads it when it is there)")
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.split("\n")
    assert "linalg-after-kernel False" in lines
    # np.dot compiles against BLAS (importing scipy.linalg then), np.convolve is exact.
    assert "dot 14.0 conv [0.0, 0.0, 1.0, 4.0, 10.0, 12.0, 9.0]" in lines
    assert "linalg-after-dot True" in lines


def test_only_the_loading_thread_is_refused_scipy_linalg() -> None:
    finder = runtime._Hidden()
    with pytest.raises(ModuleNotFoundError, match="BLAS probe"):
        finder.find_spec(runtime.HIDDEN)
    assert finder.find_spec("scipy.sparse") is None
    seen: list[object] = []
    other = threading.Thread(target=lambda: seen.append(finder.find_spec(runtime.HIDDEN)))
    other.start()
    other.join()
    assert seen == [None]


def test_a_changed_jitted_source_clears_the_package_caches(tmp_path) -> None:
    """A kernel compiled with another file's jitted function (the guard's ``conflict``) is
    reloaded by Numba while its own file is unchanged; the stamp clears the package's cache
    files wherever the jitted sources changed since they were written."""
    import os
    from pathlib import Path

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    where = ("from arrowdedup.jit import runtime; source = runtime._jitted_sources()[0]; "
             "print(runtime._cache_dir(source), source.stem)")
    first = subprocess.run([sys.executable, "-c", where], capture_output=True, text=True,
                           env=env, timeout=300, check=True)
    cache_dir, stem = first.stdout.split()
    cache = Path(cache_dir)
    stamp = cache / runtime._STAMP
    assert cache.is_relative_to(tmp_path) and stamp.is_file()
    stale = cache / f"{stem}.kernel-96.py311.nbi"
    other = cache / "someone_else.f-1.py311.nbi"  # not the package's: kept
    stale.write_bytes(b"old")
    other.write_bytes(b"theirs")
    subprocess.run([sys.executable, "-c", where], env=env, timeout=300, check=True,
                   capture_output=True)
    assert stale.exists(), "an unchanged stamp keeps the cache"
    stamp.write_text("a digest of other sources", encoding="ascii")
    subprocess.run([sys.executable, "-c", where], env=env, timeout=300, check=True,
                   capture_output=True)
    assert not stale.exists() and other.exists()
    assert stamp.read_text(encoding="ascii") != "a digest of other sources"
