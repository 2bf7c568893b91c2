"""Plain value coercion for the CLI's simple parameters, without Pydantic.

Typer (0.2x) coerces every parameter through a Pydantic ``TypeAdapter``: importing Pydantic and
building the adapters costs ~0.2 s of every command's start-up, more than a 10-segment
``ingest`` spends on its work. Nearly all our parameters are ``str``, ``int``, ``float``,
``Path`` or ``bool``, optional or as lists, without constraints; :func:`install` makes Typer
convert those with the plain constructor (what the adapter does for a command-line string).
Every other parameter (enums, ranges, parsers, path checks) keeps Typer's own coercion, and
when Typer's internals are not the ones this was written against nothing is changed.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "t", "yes", "y", "on"):
        return True
    if text in ("0", "false", "f", "no", "n", "off"):
        return False
    raise ValueError(value)


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(value)
    return int(value)


def _str(value: Any) -> str:
    if value is None:
        raise ValueError(value)
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


LEAVES: dict[Any, tuple[Callable[[Any], Any], str]] = {
    str: (_str, "string"), int: (_int, "integer"), float: (float, "number"),
    Path: (Path, "path"), bool: (_bool, "boolean"),
}
# ParameterInfo attributes that must hold their defaults for the plain conversion to be
# Typer's: anything else (a range, a parser, a path check) needs Typer's adapter.
DEFAULTS = {"parser": None, "click_type": None, "min": None, "max": None, "exists": False,
            "resolve_path": False, "allow_dash": False, "path_type": None, "writable": False,
            "file_okay": True, "dir_okay": True, "readable": True, "formats": None}


def plain_leaf(annotation: Any, info: Any) -> tuple[Callable[[Any], Any], str, bool] | None:
    """(converter, type label, many) for an annotation the plain conversion covers."""
    many = False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            return None
        annotation = args[0]
        origin = typing.get_origin(annotation)
    if origin is list:
        (annotation,) = typing.get_args(annotation) or (None,)
        many = True
    leaf = LEAVES.get(annotation)
    if leaf is None:
        return None
    for name, default in DEFAULTS.items():
        if getattr(info, name, default) != default:
            return None
    return leaf[0], leaf[1], many


def install() -> bool:
    """Route Typer's coercion of simple parameters through :func:`plain_leaf`; True when
    installed (Typer's internals are the expected ones)."""
    try:
        from typer import core
        from typer._click.exceptions import BadParameter
        from typer._coercion import RuntimeParam
    except ImportError:
        return False
    original = getattr(core, "build_runtime_param", None)
    if original is None or getattr(original, "plain", False):
        return original is not None and getattr(original, "plain", False)

    @dataclasses.dataclass(frozen=True)
    class PlainRuntimeParam(RuntimeParam):
        convert: Callable[[Any], Any] = _str
        label: str = "string"
        many: bool = False

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                if self.many:
                    return [self.convert(v) for v in value]
                return self.convert(value)
            except (TypeError, ValueError):
                raise BadParameter(f"{value!r} is not a valid {self.label}.", ctx=ctx,
                                   param=param) from None

    def build(descriptor: Any) -> Any:
        if getattr(descriptor, "file_annotation", None) is None:
            leaf = plain_leaf(descriptor.annotation, descriptor.parameter_info)
            if leaf is not None:
                return PlainRuntimeParam(parameter_info=descriptor.parameter_info,
                                         annotation=descriptor.annotation, convert=leaf[0],
                                         label=leaf[1], many=leaf[2])
        return original(descriptor)

    # Marks the installed function, for a second install(); a function's own attribute is
    # not something a type checker can be told of.
    build.plain = True  # type: ignore[attr-defined]
    core.build_runtime_param = build
    return True
