"""Reading document files for extraction: their bytes decoded as UTF-8 (a binary file refused by
name), parsed in worker processes when there are many, and PDFs and sheets read in an isolated
worker with limits (:mod:`.isolated`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ArrowDedupError, InputError
from .blocks import ParsedDoc
from .discover import (
    SKIP_HINT,
    DocumentFile,
)
from .html import parse_html
from .isolated import Task, run_isolated
from .limits import ExtractLimits, mb, over_limit
from .markdown import parse_markdown
from .sheets import SHEET_FORMATS
from .text import parse_text

log = logging.getLogger(__name__)


def read_isolated(
    pdfs: list[DocumentFile], tables: list[DocumentFile], workers: int | None,
    limits: ExtractLimits, options: dict[str, Any],
) -> tuple[dict[Path, ParsedDoc | str], dict[Path, dict[str, Any]]]:
    """PDFs, workbooks and CSV/TSV files in worker processes (always: a native crash, a hang
    or a memory blow-up must cost that file, not the run); the PDFs as parsed documents (or
    their error), the tables as :func:`.table_worker.read_table` answers."""
    if not pdfs and not tables:
        return {}, {}
    pdf_module = str(Path(__file__).with_name("pdflayout.py"))
    tasks = [Task(pdf_module, "parse_pdf", (str(f.path), f.display), f.display,
                  "the PDF parser") for f in pdfs]
    worker_options = {**options, "limits": dataclasses.asdict(limits)}
    for f in tables:
        sheet = f.fmt in SHEET_FORMATS
        tasks.append(Task(
            "arrowdedup.extract.table_worker", "read_table",
            (str(f.path), f.display, f.fmt, f.doc_id, None, worker_options), f.display,
            "the spreadsheet reader" if sheet else f"the {f.fmt.upper()} reader",
            prepare=None if sheet else _text_task(f, limits, worker_options)))
    count = max(1, workers) if workers is not None else min(_cpu_count(), 8)
    answers = run_isolated(tasks, count, limits)
    out: dict[Path, ParsedDoc | str] = {}
    for file, answer in zip(pdfs, answers, strict=False):
        if "error" in answer:
            out[file.absolute] = str(answer["error"])
            continue
        doc = ParsedDoc()
        doc.texts = list(answer["texts"])
        doc.types = list(answer["types"])
        doc.sections = list(answer["sections"])
        doc.levels = list(answer["levels"])
        doc.runs = list(answer["runs"])
        doc.pages_start = list(answer["page_start"])
        doc.pages_end = list(answer["page_end"])
        doc.title = next((t for t, ty, lv in zip(doc.texts, doc.types, doc.levels,
                                                 strict=True)
                          if ty == "heading" and lv == 1), None)
        out[file.absolute] = doc
    return out, {f.absolute: a for f, a in zip(tables, answers[len(pdfs):], strict=True)}


def _text_task(file: DocumentFile, limits: ExtractLimits,
               options: dict[str, Any]) -> Callable[[], tuple[Any, ...]]:
    """Read and decode a CSV/TSV file for its worker (after checking its size)."""

    def prepare() -> tuple[Any, ...]:
        if file.size > limits.max_text_bytes:
            raise InputError(over_limit(file.display, f"the file holds {mb(file.size)} of text",
                                        "max_text_bytes", mb(limits.max_text_bytes)))
        text = _decode(read_bytes(file.path, file.display), file.display)
        return (str(file.path), file.display, file.fmt, file.doc_id, text, options)

    return prepare


def read_bytes(path: Path, display: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise InputError(
            f"cannot read {display}: {err.strerror or err}; check that the file exists "
            f"and is readable, {SKIP_HINT}"
        ) from err


def _decode(data: bytes, display: str) -> str:
    """UTF-8 text (a BOM dropped), with every line ending turned into "\\n"."""
    if _looks_binary(data):
        raise InputError(
            f"{display} is a binary file, not text (it holds NUL or control bytes); it cannot "
            f"be extracted as its extension says: remove it from the input, {SKIP_HINT}"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"{display} is not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start}); "
            f"re-save it as UTF-8 (e.g. iconv -f latin1 -t utf-8), {SKIP_HINT}"
        ) from err
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13))


def _looks_binary(data: bytes) -> bool:
    """NUL in the first 8 KiB, or more than 10 % control bytes: an image, an archive, a
    compiled file, not text in some other encoding."""
    head = data[:8192]
    if not head:
        return False
    if b"\0" in head:
        return True
    return len(head) - len(head.translate(None, _CONTROL)) > 0.1 * len(head)


def parse_one(task: tuple[str, str, str]) -> ParsedDoc | str:
    """Parse one document; an error comes back as its message (cheap to send across)."""
    path, display, fmt = task
    try:
        return PARSERS[fmt](_decode(read_bytes(Path(path), display), display), display)
    except ArrowDedupError as err:
        return str(err)
    except RecursionError:
        return f"{display}: the document is nested too deeply to extract; {SKIP_HINT}"


def parse_all(files: list[DocumentFile], workers: int | None) -> dict[Path, ParsedDoc | str]:
    tasks = [(str(f.path), f.display, f.fmt) for f in files]
    if workers is not None:
        count = max(1, workers)
    elif sum(f.size for f in files) >= PARALLEL_MIN_BYTES:
        count = min(_cpu_count(), 8)
    else:
        count = 1
    count = min(count, len(tasks))
    results = _parse_in_subprocesses(tasks, count) if count > 1 else None
    if results is None:
        results = [parse_one(t) for t in tasks]
    return {f.absolute: r for f, r in zip(files, results, strict=True)}


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _parse_in_subprocesses(
    tasks: list[tuple[str, str, str]], count: int
) -> list[ParsedDoc | str] | None:
    """Parse ``tasks`` in ``count`` fresh interpreters (``python -c``), results in task order.

    Plain subprocesses rather than multiprocessing: ``spawn`` re-imports the caller's main
    module (a script without a ``__main__`` guard would run again in every worker) and
    ``fork`` is unsafe once Polars or Numba have started threads. Returns ``None`` when the
    workers cannot run, and the caller parses in this process instead.
    """
    package_parent = str(Path(__file__).resolve().parent.parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_parent, env.get("PYTHONPATH", "")) if p
    )
    shares = [tasks[i::count] for i in range(count)]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for share in shares:
            # Out of the terminal's process group: a Ctrl-C reaches only the parent, which
            # kills the workers. (A worker still starting its interpreter cannot ignore
            # SIGINT yet, and printed "Fatal Python error" when one landed then.)
            proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                env=env, start_new_session=True,
            )
            procs.append(proc)
            assert proc.stdin is not None
            proc.stdin.write(pickle.dumps(share, protocol=pickle.HIGHEST_PROTOCOL))
            proc.stdin.close()
        outputs = []
        for proc in procs:
            assert proc.stdout is not None
            outputs.append(proc.stdout.read())
            proc.stdout.close()
            proc.wait()
    except OSError as err:
        for proc in procs:
            proc.kill()
        log.warning("parallel extraction unavailable (%s); parsing in this process", err)
        return None
    except BaseException:  # Ctrl-C: no worker outlives the run
        for proc in procs:
            proc.kill()
        raise
    results: list[ParsedDoc | str] = [""] * len(tasks)
    for i, (proc, output) in enumerate(zip(procs, outputs, strict=True)):
        part: list[ParsedDoc | str] | None = None
        if proc.returncode == 0:
            try:
                part = pickle.loads(output)  # our own worker's output: trusted
            except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
                part = None
        if part is None or len(part) != len(shares[i]):
            log.warning("an extraction worker failed (exit %s); parsing its files here",
                        proc.returncode)
            part = [parse_one(t) for t in shares[i]]
        results[i::count] = part
    return results


# The worker: read the pickled tasks on stdin, write the pickled results on stdout.
_WORKER = (
    # The parent handles Ctrl-C (and kills its workers): a worker must not print a traceback.
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    # And a worker dies with its parent (PR_SET_PDEATHSIG, Linux).
    "import sys\nif sys.platform.startswith('linux'):\n"
    " try:\n  import ctypes; ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
    " except Exception:\n  pass\n"
    "import pickle, sys; from arrowdedup.extract.reading import parse_one; "
    "tasks = pickle.load(sys.stdin.buffer); "
    "pickle.dump([parse_one(t) for t in tasks], sys.stdout.buffer, pickle.HIGHEST_PROTOCOL)"
)


PARSERS: dict[str, Callable[[str, str], ParsedDoc]] = {
    "markdown": parse_markdown,
    "html": parse_html,
    "text": parse_text,
}


# Below this much Markdown/HTML/text, starting worker interpreters (~1-2 s) costs more than
# it saves (the parsers run at ~1 MB/s per core).
PARALLEL_MIN_BYTES = 4 << 20
