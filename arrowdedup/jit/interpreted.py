"""The interpreted twin of a Numba module: the module's own source, run by CPython.

A fresh process pays ~0.5-1 s to import Numba and load a module's cached machine code; a call
on a ten-row input runs in milliseconds interpreted. So small inputs call the twin, which is
the jitted module's source executed with a stand-in ``numba`` (its decorators return the
function unchanged, ``prange`` is ``range``) and with the jitted modules it imports
(:data:`JITTED`) replaced by their twins. The twin computes what the jitted module computes,
statement by statement; a property test holds the two to identical bits
(``tests/jit/test_interpreted.py``). Only modules written for it are listed: their integer
arithmetic is on NumPy scalars or small Python ints, which wrap (or never overflow) as Numba's
do; NumPy's overflow warnings are off inside :func:`quiet`.

:func:`module` makes the choice: the twin up to a size bound given by the caller, unless the
process has already taken the kernel. Since the two agree bit for bit, a choice by the size
of a call (hence of a run) never changes an output: an update still equals a full ingest
(SPEC §8a). :func:`forced` makes every choice one way, for the compile stage and for tests.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import importlib.util
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

# Modules whose twin may be built, and which a twin imports as twins.
JITTED = frozenset({"arrowdedup.arrays.hashing_jit", "arrowdedup.facts.scan_jit",
                    "arrowdedup.facts.scan_text_jit", "arrowdedup.facts.scan_pieces_jit",
                    "arrowdedup.facts.scan_facts_jit", "arrowdedup.facts.conflict_jit",
                    "arrowdedup.facts.content_jit", "arrowdedup.facts.words_jit"})

# Jitted-only modules and the pure-Python module a twin imports in place of each: the names it
# takes from them mean the same in both.
STAND_INS = {"arrowdedup.jit.intrinsics_jit": "arrowdedup.jit.byte_loads"}

_lock = threading.RLock()  # a twin builds the twins it imports

TWIN, KERNEL = "twin", "kernel"
# Every choice between a module and its twin made one way, process-wide, while set (see
# :func:`forced`); None leaves each choice to :func:`module`.
_forced: str | None = None
_taken: set[str] = set()  # jitted modules module() has given (so their kernels are loaded)


def _njit(*args: Any, **_options: Any) -> Any:
    """``numba.njit`` as an identity decorator (bare or with options)."""
    if len(args) == 1 and callable(args[0]):
        return args[0]
    return lambda func: func


def _njit_options(**_options: object) -> Callable[[Any], Any]:
    """:func:`arrowdedup.jit.runtime.njit` as an identity decorator."""
    return lambda func: func


class _StandInNumba(types.ModuleType):
    """The stand-in ``numba``: the names a twinned module uses."""

    njit: Callable[..., Any]
    jit: Callable[..., Any]
    prange: type[range]


class _StandInRuntime(types.ModuleType):
    """The stand-in :mod:`arrowdedup.jit.runtime`."""

    numba: _StandInNumba
    njit: Callable[..., Callable[[Any], Any]]


_STUB = _StandInNumba("numba")
_STUB.njit = _njit
_STUB.jit = _njit
_STUB.prange = range
# What ``from ..jit.runtime import njit, numba`` gives a twin.
_STUB_PACKAGE = _StandInRuntime("arrowdedup.jit.runtime[interpreted]")
_STUB_PACKAGE.numba = _STUB
_STUB_PACKAGE.njit = _njit_options


def _importer(package: str) -> Callable[..., Any]:
    """``__import__`` for a twin's source: ``numba`` is the stand-in, jitted siblings are
    twins, everything else is imported as usual."""

    def imp(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
            level: int = 0) -> Any:
        if level == 0 and name == "numba":
            return _STUB
        if level == 0 and name.startswith("numba."):
            raise ImportError(f"the interpreted twin has no {name}; keep it out of a twinned "
                              "module, or drop the module from interpreted.JITTED")
        absolute = importlib.util.resolve_name("." * level + name, package) if level else name
        if absolute == "arrowdedup.jit.runtime":
            return _STUB_PACKAGE
        if absolute in JITTED:
            return twin(absolute)
        if absolute in STAND_INS:
            return importlib.import_module(STAND_INS[absolute])
        return builtins.__import__(name, globals, locals, fromlist, level)

    return imp


@functools.cache
def _build(name: str) -> types.ModuleType:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or spec.loader is None:
        raise ImportError(f"no source for {name}")
    with open(spec.origin, encoding="utf-8") as fh:
        source = fh.read()
    module = types.ModuleType(f"{name}[interpreted]")
    package = name.rpartition(".")[0]
    module.__dict__.update({
        "__file__": spec.origin, "__package__": package,
        "__builtins__": {**builtins.__dict__, "__import__": _importer(package)},
    })
    exec(compile(source, spec.origin, "exec"), module.__dict__)  # the package's own file
    return module


def twin(name: str) -> types.ModuleType:
    """The interpreted twin of the jitted module ``name`` (one of :data:`JITTED`), built once
    per process; importing it loads neither Numba nor the jitted module."""
    if name not in JITTED:
        raise ValueError(f"{name} has no interpreted twin; twins exist for {sorted(JITTED)}")
    with _lock:
        return _build(name)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """NumPy's integer overflow warnings off: Numba wraps silently, so must the twin."""
    import numpy as np

    with np.errstate(over="ignore"):
        yield


def module(name: str, size: int, bound: int) -> types.ModuleType:
    """The jitted module ``name`` (one of :data:`JITTED`) or its twin, for an input of
    ``size`` (bytes, values, ...): the twin up to ``bound`` unless this process has already
    taken the jitted module (:func:`taken`), since importing Numba and loading the module's
    machine code (from an empty cache: compiling it) would cost more than interpreting that
    much. The two give the same bits, so the choice never shows in an output, whatever the
    size of a run or the state of the process."""
    if _forced == TWIN or (_forced is None and size <= bound and name not in _taken):
        return twin(name)
    jitted = importlib.import_module(name)
    _taken.add(name)
    return jitted


def taken(name: str) -> bool:
    """Whether :func:`module` has given the jitted module ``name`` in this process. Being
    imported is not enough: a jitted module that imports another's helpers (the guard the
    scanner's sort) compiles those helpers alone, not the other module's entry points."""
    return name in _taken


def forced_kind() -> str | None:
    """:data:`TWIN` or :data:`KERNEL` inside :func:`forced`, else None: for choices of the
    same kind made elsewhere (a NumPy twin that writes a kernel's bytes)."""
    return _forced


def taken_modules() -> frozenset[str]:
    """The jitted modules :func:`module` has given in this process."""
    return frozenset(_taken)


@contextlib.contextmanager
def forced(kind: str) -> Iterator[None]:
    """Every :func:`module` choice made ``kind`` (:data:`TWIN` or :data:`KERNEL`) while the
    block runs, in every thread: the compile stage loads the kernels a run will take, and
    tests hold a run on twins to the same run on kernels."""
    global _forced
    if kind not in (TWIN, KERNEL):
        raise ValueError(f"forced() takes {TWIN!r} or {KERNEL!r}, not {kind!r}")
    with _lock:
        previous, _forced = _forced, kind
    try:
        yield
    finally:
        with _lock:
            _forced = previous
