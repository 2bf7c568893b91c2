"""Lazy package namespaces (PEP 562): public names load their submodule on first use.

A package whose function shares its submodule's name (``arrowdedup.calibrate``,
``arrowdedup.retrieval.search``) keeps the function: the import system binds a submodule
onto its package when it is first imported, and :class:`LazyPackage` declines that binding
for the exported names (an eager ``from .x import x`` would rebind it the same way).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any


class LazyPackage(types.ModuleType):
    _lazy_exports: Mapping[str, str] = {}

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in self._lazy_exports \
                and value.__name__ == f"{self.__name__}.{name}":
            return
        super().__setattr__(name, value)


def install(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """Make ``package`` lazy over ``exports`` (name -> submodule); returns its ``__getattr__``."""
    module = sys.modules[package]
    module.__class__ = LazyPackage
    object.__setattr__(module, "_lazy_exports", dict(exports))

    def __getattr__(name: str) -> Any:
        sub = exports.get(name)
        if sub is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{sub}", package), name)
        module.__dict__[name] = value
        return value

    return __getattr__
