"""Which files a documents run reads: every supported file under the given paths, once, with
its doc_id (its path relative to its root, without suffix), and the language and version a
path pattern gives it. Symbolic links that leave a folder are not followed unless asked.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from ..errors import ConfigError, InputError

PathsInput = str | Path | Sequence[str | Path]


@dataclasses.dataclass(frozen=True)
class DocumentFile:
    path: Path  # as reached from the argument, for reading and messages
    absolute: Path
    base: Path  # the root its ``rel`` is relative to (absolute)
    rel: str  # posix path relative to the root
    fmt: str
    size: int = 0
    # Why the file cannot be taken, found before it is opened (a named pipe, socket or
    # device: reading a pipe waits for a writer that may never come; a name that is not
    # UTF-8, which no doc_id can hold); refused (or skipped) by name instead. None: fine.
    problem: str | None = None

    @property
    def doc_id(self) -> str:
        return str(PurePosixPath(self.rel).with_suffix(""))

    @property
    def display(self) -> str:
        return str(self.path)


def _is_utf8(name: str) -> bool:
    """False for a name holding bytes that are not UTF-8 (Python keeps them as surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def claim(claimed: dict[str, str], file: DocumentFile) -> None:
    """Refuse a second file whose path maps to an existing ``doc_id`` (``a.md``, ``a.txt``)."""
    claim_id(claimed, file.doc_id, file)


def claim_id(claimed: dict[str, str], doc_id: str, file: DocumentFile) -> None:
    other = claimed.get(doc_id)
    if other is not None:
        raise InputError(
            f"{file.display} and {other} both map to doc_id {doc_id!r} (the path without "
            f"its extension); rename one, or extract them separately, {SKIP_HINT}"
        )
    claimed[doc_id] = file.rel


def discover_files(paths: PathsInput, root: str | Path | None,
              unsupported: list[str] | None = None, *, external: list[str] | None = None,
              follow_external_symlinks: bool = False) -> list[DocumentFile]:
    """Every supported file under ``paths``, once, sorted by path relative to its root; the
    folder files of other types are appended to ``unsupported`` (hidden ones are not).

    A symbolic link inside a folder that points outside it (a file, or a folder) is neither
    read nor walked, but appended to ``external``, unless ``follow_external_symlinks``: a
    folder of documents from elsewhere must not read ``~/.ssh`` through a link. A link
    named as an argument is the caller's choice and is followed."""
    args = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not args:
        raise InputError("no input paths given; pass document files or folders")
    root_abs = Path(os.path.abspath(root)) if root is not None else None
    if root_abs is not None and not root_abs.is_dir():
        raise InputError(f"root {root} is not a folder; pass the folder the doc_ids start from")
    found: dict[Path, DocumentFile] = {}

    def add(path: Path, base: Path, fmt: str) -> None:
        absolute = Path(os.path.abspath(path))
        if absolute in found:
            return
        try:
            rel = absolute.relative_to(base).as_posix()
        except ValueError as err:
            raise InputError(
                f"{path} is not inside the root {root}; pass a root that contains every input"
            ) from err
        try:
            st = path.stat()
            size, regular = st.st_size, stat.S_ISREG(st.st_mode)
        except OSError:
            size, regular = 0, True  # unreadable: reported when it is read
        problem = None
        if not _is_utf8(rel):
            problem = (f"{printable(path)}: the file name is not valid UTF-8, so no doc_id can "
                       "hold it: rename the file (e.g. convmv -f latin1 -t utf8 --notest), "
                       f"{SKIP_HINT}")
        elif not regular:
            problem = (f"{path} is not a regular file (a named pipe, socket or device), so "
                       f"reading it could wait forever: remove it from the input, {SKIP_HINT}")
        found[absolute] = DocumentFile(path, absolute, base, rel, fmt, size, problem)

    for arg in args:
        path = Path(arg)
        if path.is_dir():
            base = root_abs or Path(os.path.abspath(path))
            inside = os.path.realpath(path)
            visited: set[str] = set()

            def outside(entry: str, inside: str = inside) -> bool:
                target = os.path.realpath(entry)
                return target != inside and not target.startswith(inside.rstrip(os.sep) + os.sep)

            for dirpath, dirnames, filenames in os.walk(path, followlinks=True):
                visited.add(os.path.realpath(dirpath))
                keep = []
                for d in sorted(d for d in dirnames if not d.startswith(".")):
                    entry = os.path.join(dirpath, d)
                    if os.path.islink(entry):
                        if not outside(entry):
                            continue  # walked where it points (as before: not twice)
                        if not follow_external_symlinks:
                            if external is not None:
                                external.append(_relative_name(entry, base))
                            continue
                        if os.path.realpath(entry) in visited:
                            continue  # a loop
                    keep.append(d)
                dirnames[:] = keep
                for name in sorted(filenames):
                    if name.startswith("."):
                        continue
                    entry = os.path.join(dirpath, name)
                    if not follow_external_symlinks and os.path.islink(entry) \
                            and outside(entry):
                        if external is not None:
                            external.append(_relative_name(entry, base))
                        continue
                    fmt = EXTENSIONS.get(os.path.splitext(name)[1].lower())
                    if fmt is not None:
                        add(Path(dirpath) / name, base, fmt)
                    elif unsupported is not None:
                        unsupported.append(Path(os.path.relpath(
                            os.path.abspath(Path(dirpath) / name), base)).as_posix())
        elif path.exists() or path.is_symlink():
            fmt = EXTENSIONS.get(path.suffix.lower())
            if fmt is None:
                raise InputError(
                    f"{path}: unknown document type {path.suffix or '(no extension)'!r}; "
                    f"supported: {', '.join(EXTENSIONS)}; convert or rename the file"
                )
            add(path, root_abs or Path(os.path.abspath(path.parent)), fmt)
        else:
            raise InputError(f"input {path} does not exist; check the path")
    if not found:
        raise InputError(
            f"no documents found in {', '.join(str(a) for a in args)}; supported extensions: "
            f"{', '.join(EXTENSIONS)} (hidden files and folders are ignored)"
        )
    return sorted(found.values(), key=lambda f: (f.rel, str(f.absolute)))


def _relative_name(entry: str, base: Path) -> str:
    return printable(Path(os.path.relpath(os.path.abspath(entry), base)).as_posix())


def compile_language_pattern(pattern: str) -> re.Pattern[str]:
    """``content/{lang}/**`` → a regex with a ``lang`` group, matching a whole posix path.

    ``**`` is any number of folders, ``*`` any name part, ``?`` one character.
    """
    return compile_path_pattern(pattern, "lang")


_EXAMPLES = {"lang": "content/{lang}/**", "version": "docs/v{version}/**"}


def compile_path_pattern(pattern: str, field: str) -> re.Pattern[str]:
    """A path pattern with one ``{field}`` placeholder → a regex with that named group
    (``{version}`` takes the rest of one folder or file name: ``v{version}`` on ``v3.10``)."""
    placeholder = "{" + field + "}"
    if pattern.count(placeholder) != 1:
        kind = "language" if field == "lang" else field
        raise ConfigError(
            f"{kind} pattern {pattern!r} must contain {placeholder} exactly once, "
            f"e.g. {_EXAMPLES.get(field, '{' + field + '}/**')!r}"
        )
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith(placeholder, i):
            out.append(rf"(?P<{field}>[^/]+)")
            i += len(placeholder)
        elif pattern.startswith("**/", i):
            out.append(r"(?:[^/]+/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(r".*")
            i += 2
        elif pattern[i] == "*":
            out.append(r"[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append(r"[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def language_matcher(pattern: str | None) -> Callable[[DocumentFile], str | None] | None:
    return path_matcher(pattern, "lang")


def path_matcher(pattern: str | None, field: str) -> Callable[[DocumentFile], str | None] | None:
    if not pattern:
        return None
    regex = compile_path_pattern(pattern.strip().lstrip("/"), field)

    def match(file: DocumentFile) -> str | None:
        # The path relative to the root first, then to each parent of the root in turn.
        parents = file.base.parts[1:]
        for depth in range(len(parents) + 1):
            prefix = "/".join(parents[len(parents) - depth:])
            candidate = f"{prefix}/{file.rel}" if prefix else file.rel
            found = regex.fullmatch(candidate)
            if found:
                return found.group(field)
        return None

    return match


#: File extension → format (also the ``doc_type`` of what it yields, except passthrough).
EXTENSIONS: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".html": "html",
    ".htm": "html",
    ".csv": "csv",
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".parquet": "parquet",
    ".pdf": "pdf",
    ".xlsx": "xlsx",
    ".xlsm": "xlsm",
    ".xls": "xls",
    ".ods": "ods",
}


SKIP_HINT = "or skip it with --skip-bad-files (skip_bad_files=True)"


def printable(path: Path | str) -> str:
    """``path`` with bytes that are not UTF-8 shown as ``\\xff`` escapes (a message holding
    the raw surrogates could not even be printed)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")
