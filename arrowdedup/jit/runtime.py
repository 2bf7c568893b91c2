"""Numba, as every jitted module of the package imports it: ``from ..jit.runtime import numba``
(and :func:`njit`, for the options Numba's type stubs do not list).

Numba's first compile or cache load in a process installs its NumPy support, and that import
(``numba.np.arraymath``) probes for a BLAS by importing ``scipy.linalg``: 0.28 s of every
fresh process that runs a kernel (a 1M-segment job, each Ray worker), for a library no jitted
function of ours calls. The probe's answer only picks the inner product of a jitted
``np.convolve`` / ``np.correlate`` (a plain loop instead of BLAS, the same values).
``np.dot`` and the rest of ``np.linalg`` still import ``scipy.linalg`` when a function using
them is compiled. So the NumPy support is loaded here, up front, with ``scipy.linalg`` hidden
from this thread alone; when ``scipy.linalg`` is already imported nothing is hidden.

The interpreted twins (:mod:`arrowdedup.jit.interpreted`) never import this module: their
``from ..jit.runtime import ...`` gets the stand-ins instead.

Numba's cache is checked per source file: a cached kernel is reloaded while its own file is
unchanged, even when a jitted function of another file that it calls (and compiled into
itself) has changed. The guard's ``conflict`` lives in ``_facts_jit.py`` and is compiled into
the greedy kernels of ``_kernels_jit.py``, the blocked kernel and LSH: after an edit of the
guard, or an upgrade over a kept cache, those kernels ran the old rule. So on first import
this module stamps each cache directory of the package's jitted files with a digest of all of
them (their sizes and modification times, what Numba itself compares); where the stamp
differs, the package's cache files there are removed, and the kernels compile afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import numba

if TYPE_CHECKING:
    from numba.core.dispatcher import Dispatcher

__all__ = ["njit", "numba"]

F = TypeVar("F", bound=Callable[..., object])

HIDDEN = "scipy.linalg"


class _Hidden(importlib.abc.MetaPathFinder):
    """Refuses :data:`HIDDEN` to the thread that installed it; every other thread and module
    imports as usual."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == HIDDEN and threading.get_ident() == self.thread:
            raise ModuleNotFoundError(f"{HIDDEN} is not loaded for Numba's BLAS probe",
                                      name=fullname)
        return None


def _load_numpy_support() -> None:
    if "numba.np.arraymath" in sys.modules or HIDDEN in sys.modules:
        return
    finder = _Hidden()
    sys.meta_path.insert(0, finder)
    try:
        import numba.np.arraymath  # noqa: F401  (what Numba's first compile would import)
    finally:
        sys.meta_path.remove(finder)


_load_numpy_support()


def njit(**options: object) -> Callable[[F], Dispatcher[F]]:
    """``numba.njit(**options)``, for options Numba's type stubs do not list (``_nrt=False``,
    which compiles a function without reference counting): the options go to Numba as they
    are, and the jitted function keeps its signature for the type checker, as with
    ``numba.njit``. The interpreted twins get an identity decorator of the same name."""
    decorate: Callable[..., Callable[[F], Dispatcher[F]]] = numba.njit
    return decorate(**options)


_PACKAGE = Path(__file__).resolve().parent.parent  # the whole package, not this subpackage
_STAMP = "arrowdedup-jit.stamp"
_MARK = "jit.runtime import"  # how every jitted module imports Numba (from this module)


def _jitted_sources() -> list[Path]:
    """The package's files that define jitted functions (they import this module)."""
    found = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        with contextlib.suppress(OSError):
            if _MARK in path.read_text(encoding="utf-8", errors="replace"):
                found.append(path)
    return found


def _probe() -> None:
    """A function for Numba's cache locators, which need one to say where a file's cache is."""


def _cache_dir(source: Path) -> Path | None:
    """Where Numba caches the functions of ``source`` (its own choice of locator)."""
    from numba.core.caching import CacheImpl

    locators: list[Any] = list(CacheImpl._locator_classes)
    for locator in locators:
        found = locator.from_function(_probe, str(source))
        if found is not None:
            return Path(found.get_cache_path())
    return None


def _drop_stale_caches() -> None:
    sources = _jitted_sources()
    digest = hashlib.sha256()
    for path in sources:
        st = path.stat()
        digest.update(f"{path.relative_to(_PACKAGE)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                      .encode())
    stamp = digest.hexdigest()
    by_dir: dict[Path, list[str]] = {}
    for path in sources:
        where = _cache_dir(path)
        if where is not None:
            by_dir.setdefault(where, []).append(path.stem)
    for where, stems in by_dir.items():
        marker = where / _STAMP
        with contextlib.suppress(OSError):
            if marker.read_text(encoding="ascii") == stamp:
                continue
        for entry in where.iterdir() if where.is_dir() else ():
            if entry.suffix in (".nbi", ".nbc") and entry.name.split(".", 1)[0] in stems:
                with contextlib.suppress(OSError):
                    entry.unlink()
        with contextlib.suppress(OSError):
            tmp = where / f"{_STAMP}.{os.getpid()}"
            tmp.write_text(stamp, encoding="ascii")
            tmp.replace(marker)


_drop_stale_caches()
