"""Numba, as every jitted module of the package imports it: ``from ._numba import numba``.

Numba's first compile or cache load in a process installs its NumPy support, and that import
(``numba.np.arraymath``) probes for a BLAS by importing ``scipy.linalg``: 0.28 s of every
fresh process that runs a kernel (a 1M-segment job, each Ray worker), for a library no jitted
function of ours calls. The probe's answer only picks the inner product of a jitted
``np.convolve`` / ``np.correlate`` (a plain loop instead of BLAS, the same values).
``np.dot`` and the rest of ``np.linalg`` still import ``scipy.linalg`` when a function using
them is compiled. So the NumPy support is loaded here, up front, with ``scipy.linalg`` hidden
from this thread alone; when ``scipy.linalg`` is already imported nothing is hidden.

The interpreted twins (:mod:`arrowdedup.interpreted`) never import this module: their
``from ._numba import numba`` gets the stand-in numba instead.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType

import numba

__all__ = ["numba"]

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
