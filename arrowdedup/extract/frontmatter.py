"""YAML (``---``) and TOML (``+++``) front matter: read the few keys we use, strip the block.

Only ``title``, ``date`` (→ ``created_at``, UTC) and ``language`` / ``lang`` are read; every
other key is ignored. A block that does not parse is an :class:`InputError` naming the file,
because silently keeping it as text would index the metadata as content.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import tomllib
from typing import Any

import yaml

from ..errors import InputError

_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FENCES = {
    "---": re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.M),
    "+++": re.compile(r"^\+\+\+[ \t]*$", re.M),
}
_FIX = "fix the block or remove it, or skip the file with --skip-bad-files"


@dataclasses.dataclass(frozen=True)
class FrontMatter:
    title: str | None = None
    created_at: dt.datetime | None = None
    language: str | None = None


def split_front_matter(text: str, display: str) -> tuple[FrontMatter, str]:
    """The front matter of ``text`` (newlines already normalised) and the body after it."""
    first, _, rest = text.partition("\n")
    fence = first.rstrip(" \t")
    if fence not in _FENCES:
        return FrontMatter(), text
    close = _FENCES[fence].search(rest)
    if close is None:
        raise InputError(
            f"{display}: the front matter opened with {fence!r} on line 1 is never closed; "
            f"add a closing {fence!r} line, or {_FIX}"
        )
    block, body = rest[: close.start()], rest[close.end() + 1:]
    meta = _load_yaml(block, display) if fence == "---" else _load_toml(block, display)
    return _read_keys(meta, display), body


def _load_yaml(block: str, display: str) -> dict[str, Any]:
    try:
        meta = yaml.load(block, Loader=_YAML_LOADER)  # the C build of the safe loader
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError) as err:
        reason = str(err).replace("\n", " ")
        raise InputError(f"{display}: broken YAML front matter ({reason}); {_FIX}") from err
    return _as_mapping(meta, display)


def _load_toml(block: str, display: str) -> dict[str, Any]:
    try:
        meta = tomllib.loads(block)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as err:
        raise InputError(f"{display}: broken TOML front matter ({err}); {_FIX}") from err
    return _as_mapping(meta, display)


def _as_mapping(meta: object, display: str) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise InputError(
            f"{display}: the front matter is a {type(meta).__name__}, not a mapping of keys; "
            f"write it as 'key: value' lines, or {_FIX}"
        )
    return meta


def _scalar(meta: dict[str, Any], key: str, display: str) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    # Anything but a scalar is refused: str() of a nested YAML alias structure can be huge.
    if isinstance(value, bool) or not isinstance(value, (str, int, float, dt.date)):
        raise InputError(
            f"{display}: front matter key {key!r} is a {type(value).__name__}, expected a "
            f"string; {_FIX}"
        )
    text = str(value).strip()
    return text or None


def _read_keys(meta: dict[str, Any], display: str) -> FrontMatter:
    language = _scalar(meta, "language", display) or _scalar(meta, "lang", display)
    return FrontMatter(
        title=" ".join(t.split()) if (t := _scalar(meta, "title", display)) else None,
        created_at=to_utc(meta.get("date"), display),
        language=language,
    )


def to_utc(value: object, display: str) -> dt.datetime | None:
    """A front-matter date as an aware UTC datetime; naive times are taken as UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip())
        except ValueError as err:
            raise InputError(
                f"{display}: front matter date {value!r} is not an ISO 8601 date; write it as "
                f"YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ, or {_FIX}"
            ) from err
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        try:
            return value.astimezone(dt.UTC)
        except (OverflowError, ValueError) as err:
            raise InputError(
                f"{display}: front matter date {value} is out of range; {_FIX}"
            ) from err
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    raise InputError(
        f"{display}: front matter date {value!r} is a {type(value).__name__}, not a date; "
        f"write it as YYYY-MM-DD, or {_FIX}"
    )
