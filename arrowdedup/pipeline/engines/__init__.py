"""The engines that run a job's buckets, behind one interface (:mod:`.base`): ``local``
(:mod:`.local`) and ``ray`` (:mod:`.ray`). :func:`runner` gives an engine's runner by name."""

from __future__ import annotations

import importlib

from ...errors import InputError
from .base import Engine, Runner

__all__ = ["Engine", "Runner", "runner"]


def runner(engine: str | Engine, *, ray_address: str | None = None) -> Runner:
    """The :class:`Runner` of ``engine`` (an :class:`Engine` or its value); its module is
    imported only now, so a missing extra is reported when that engine is asked for."""
    try:
        kind = Engine(engine)
    except ValueError:
        choices = " or ".join(repr(e.value) for e in Engine)
        raise InputError(f"unknown engine {engine!r}; choose {choices}") from None
    module = importlib.import_module(f".{kind.value}", __name__)
    made: Runner = module.Runner(ray_address=ray_address)
    return made
