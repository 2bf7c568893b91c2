"""PDF parsing in worker processes: a native crash or a hang in the parser skips that file.

Each worker is a fresh interpreter that loads :mod:`.pdflayout` from its file (not the
package, so it starts in a fraction of a second) and answers one task at a time over a pipe
(length-prefixed pickles). The parent drives each worker from a thread; when a worker dies or
exceeds the per-file timeout, the file it held gets a one-line error and a new worker takes
the remaining files. Results are keyed by task, so their order never depends on the workers.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from . import pdflayout

log = logging.getLogger(__name__)

FILE_TIMEOUT = 300.0  # seconds one PDF may take before its worker is killed

_WORKER = r"""
import importlib.util, os, pickle, struct, sys
spec = importlib.util.spec_from_file_location("_arrowdedup_worker_parser", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)  # a library printing on stdout must not corrupt the result stream
inp = sys.stdin.buffer
while True:
    head = inp.read(4)
    if len(head) < 4:
        break
    path, display = pickle.loads(inp.read(struct.unpack("<I", head)[0]))
    try:
        result = mod.parse_pdf(path, display)
    except Exception as err:
        result = {"error": f"{display}: the PDF parser failed ({type(err).__name__}: {err}); "
                           "re-export the file, or skip it with --skip-bad-files"}
    data = pickle.dumps(result, pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<I", len(data)) + data)
    out.flush()
"""


class _Worker:
    def __init__(self, module: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(module)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def ask(self, task: tuple[str, str], timeout: float) -> dict[str, Any] | None:
        """The worker's answer, or ``None`` when it died or timed out (then it is killed)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        data = pickle.dumps(task, pickle.HIGHEST_PROTOCOL)
        try:
            self.proc.stdin.write(struct.pack("<I", len(data)) + data)
            self.proc.stdin.flush()
            head = self._read(4, timeout)
            if head is None:
                return None
            body = self._read(struct.unpack("<I", head)[0], timeout)
            return None if body is None else pickle.loads(body)  # our own worker: trusted
        except (OSError, EOFError, pickle.UnpicklingError):
            return None

    def _read(self, n: int, timeout: float) -> bytes | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        chunks, got = [], 0
        while got < n:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(fd, n - got)
            if not chunk:
                return None
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def close(self, kill: bool = False) -> int | None:
        if kill:
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def _in_process(module: Path, task: tuple[str, str]) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("_arrowdedup_worker_parser", module)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    result: dict[str, Any] = mod.parse_pdf(*task)
    return result


def parse_isolated(
    tasks: list[tuple[str, str]],
    workers: int,
    *,
    module: Path | None = None,
    timeout: float = FILE_TIMEOUT,
) -> list[dict[str, Any]]:
    """``parse_pdf(path, display)`` of every task in worker processes, results in task order.

    ``module``: the parser module file (default :mod:`.pdflayout`); it must define
    ``parse_pdf(path, display) -> dict`` and import nothing it cannot load standalone.
    """
    source = Path(module or pdflayout.__file__)
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(tasks)):
        todo.put(i)

    def drive() -> None:
        worker: _Worker | None = None
        try:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                if worker is None:
                    try:
                        worker = _Worker(source)
                    except OSError as err:
                        # No subprocesses here (a sandbox): parse in this process, unguarded.
                        log.warning("PDF worker processes unavailable (%s); parsing in this "
                                    "process", err)
                        results[i] = _in_process(source, tasks[i])
                        continue
                answer = worker.ask(tasks[i], timeout)
                if answer is None:
                    code = worker.close(kill=True)
                    worker = None
                    display = tasks[i][1]
                    why = f"exit code {code}" if code is not None and code >= 0 else \
                        f"signal {-code}" if code is not None else "no answer"
                    answer = {"error": (
                        f"{display}: the PDF parser crashed or hung on this file ({why}, "
                        f"limit {timeout:.0f} s); it was skipped: re-export the file, or "
                        "leave it out with --skip-bad-files")}
                results[i] = answer
        finally:
            if worker is not None:
                worker.close()

    threads = [threading.Thread(target=drive, daemon=True)
               for _ in range(max(1, min(workers, len(tasks))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r if r is not None else {"error": f"{tasks[i][1]}: not parsed"}
            for i, r in enumerate(results)]
