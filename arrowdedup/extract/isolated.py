"""Readers in worker processes: a native crash, a hang or a memory blow-up skips that file.

PDFs (:mod:`.pdflayout`), workbooks and CSV/TSV tables (:mod:`.table_worker`) are read here.
Each worker is a fresh interpreter that loads only the reader it is asked for (a module file
such as :mod:`.pdflayout`, or a module of this package without the package's own imports, so
it starts in a fraction of a second) and answers one task at a time over a pipe
(length-prefixed pickles). The parent drives each worker from a thread; when a worker dies,
exceeds the per-file time limit or the memory limit (its resident set, polled), the file it
held gets a one-line error and a new worker takes the remaining files. Results are keyed by
task, so their order never depends on the workers.

A worker never outlives its run: it asks the kernel for SIGKILL when its parent dies (Linux),
sits outside the terminal's process group (a Ctrl-C reaches the parent alone, which kills its
workers), and is killed when the run ends by any exception. Whatever a library prints in a
worker goes to a temporary file, read only to name the cause of a crash.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import logging
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import ArrowDedupError
from . import pdflayout
from .limits import ExtractLimits, mb, over_limit

log = logging.getLogger(__name__)

FILE_TIMEOUT = ExtractLimits().timeout  # seconds one file may take before its worker is killed
_POLL = 0.05  # seconds between two looks at a busy worker's memory

_WORKER = r"""
import importlib, importlib.util, os, pickle, signal, struct, sys, types, warnings
signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and kills us
parent, package_dir = int(sys.argv[1]), sys.argv[2]
if sys.platform.startswith("linux"):
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass
if os.getppid() != parent:  # the parent died before the request above took effect
    sys.exit(0)
warnings.simplefilter("ignore")
if "arrowdedup.extract" not in sys.modules:
    # This package's modules, without its __init__ (which imports the extraction stack).
    package = types.ModuleType("arrowdedup.extract")
    package.__path__ = [package_dir]
    sys.modules["arrowdedup.extract"] = package
out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)  # a library printing on stdout must not corrupt the result stream
inp = sys.stdin.buffer
modules = {}


def load(ref):
    if ref not in modules:
        if ref.endswith(".py"):
            spec = importlib.util.spec_from_file_location(f"_arrowdedup_worker_{len(modules)}",
                                                          ref)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        else:
            mod = importlib.import_module(ref)
        modules[ref] = mod
    return modules[ref]


while True:
    head = inp.read(4)
    if len(head) < 4:
        break
    ref, function, args, display, what = pickle.loads(inp.read(struct.unpack("<I", head)[0]))
    try:
        result = getattr(load(ref), function)(*args)
    except MemoryError:
        result = {"memory": True}
    except RecursionError:
        result = {"error": f"{display}: the file is nested too deeply for {what}; re-export "
                           "it, or skip it with --skip-bad-files"}
    except Exception as err:
        if type(err).__module__.startswith("arrowdedup"):
            result = {"error": str(err)}
        else:
            reason = (str(err).splitlines() or [""])[0][:300]
            result = {"error": f"{display}: {what} failed ({type(err).__name__}: {reason}); "
                               "re-export the file, or skip it with --skip-bad-files"}
    data = pickle.dumps(result, pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<I", len(data)) + data)
    out.flush()
"""

# What a reader prints when an allocation fails (Rust, C++, Python).
_OUT_OF_MEMORY = (b"memory allocation of", b"bad_alloc", b"MemoryError", b"out of memory",
                  b"Cannot allocate memory")


@dataclasses.dataclass(frozen=True)
class Task:
    """One file for a worker: ``module.function(*args)`` returns a dict (``{"error": …}`` on
    a refusal). ``module``: a ``.py`` file, loaded alone, or a module of this package.
    ``prepare``, if given, builds ``args`` in the parent just before the task is sent (so a
    file's text is held only while a worker reads it); an ``ArrowDedupError`` it raises is
    that file's error. ``what`` names the reader in messages ("the PDF parser")."""

    module: str
    function: str
    args: tuple[Any, ...]
    display: str
    what: str
    prepare: Callable[[], tuple[Any, ...]] | None = None


class _Worker:
    def __init__(self, env: dict[str, str]) -> None:
        self.log: IO[bytes] = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(os.getpid()), str(Path(__file__).parent)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env,
            start_new_session=True,
        )
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def ask(self, payload: tuple[Any, ...], limits: ExtractLimits) -> dict[str, Any] | str:
        """The worker's answer, or why there is none: "timeout", "memory" or "died" (then
        the worker is killed)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        data = pickle.dumps(payload, pickle.HIGHEST_PROTOCOL)
        deadline = time.monotonic() + limits.timeout
        try:
            self.proc.stdin.write(struct.pack("<I", len(data)) + data)
            self.proc.stdin.flush()
            head = self._read(4, deadline, limits.memory)
            if isinstance(head, str):
                return head
            body = self._read(struct.unpack("<I", head)[0], deadline, limits.memory)
            if isinstance(body, str):
                return body
            answer: dict[str, Any] = pickle.loads(body)  # our own worker: trusted
            return "memory" if answer.get("memory") else answer
        except (OSError, EOFError, pickle.UnpicklingError):
            return "died"

    def _read(self, n: int, deadline: float, memory: int) -> bytes | str:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        chunks, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([fd], [], [], min(left, _POLL))
            if not ready:
                if self.rss() > memory:
                    return "memory"
                continue
            chunk = os.read(fd, n - got)
            if not chunk:
                return "died"
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def rss(self) -> int:
        """Resident bytes of the worker (0 where /proc is not there to tell)."""
        try:
            with open(f"/proc/{self.proc.pid}/statm", "rb") as f:
                return int(f.read().split()[1]) * self._page
        except (OSError, IndexError, ValueError):
            return 0

    def ran_out_of_memory(self) -> bool:
        """Whether the worker's last words say an allocation failed."""
        try:
            self.log.seek(0, os.SEEK_END)
            size = self.log.tell()
            self.log.seek(max(0, size - 65536))
            tail = self.log.read()
        except OSError:
            return False
        return any(marker in tail for marker in _OUT_OF_MEMORY)

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
        finally:
            self.log.close()


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", ""))
                                        if p)
    env.setdefault("RUST_BACKTRACE", "0")
    return env


def _in_process(task: Task, args: tuple[Any, ...]) -> dict[str, Any]:
    if task.module.endswith(".py"):
        spec = importlib.util.spec_from_file_location("_arrowdedup_worker_parser", task.module)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    else:
        mod = importlib.import_module(task.module)
    try:
        result: dict[str, Any] = getattr(mod, task.function)(*args)
    except ArrowDedupError as err:
        return {"error": str(err)}
    return result


def _failure(task: Task, why: str, code: int | None, limits: ExtractLimits) -> str:
    if why == "timeout":
        return over_limit(task.display, f"{task.what} took more than {limits.timeout:g} s on "
                          "this file and was stopped", "timeout", f"{limits.timeout:g} s")
    if why == "memory":
        return over_limit(task.display, f"{task.what} needed more than {mb(limits.memory)} "
                          "of memory for this file and was stopped", "memory", mb(limits.memory))
    how = f"exit code {code}" if code is not None and code >= 0 else \
        f"signal {-code}" if code is not None else "no answer"
    return (f"{task.display}: {task.what} crashed on this file ({how}); it was skipped: "
            "re-export the file, or leave it out with --skip-bad-files")


def run_isolated(tasks: Sequence[Task], workers: int,
                 limits: ExtractLimits | None = None) -> list[dict[str, Any]]:
    """Every task's answer (a dict; ``{"error": one line}`` on a refusal or a failure), in
    task order, from up to ``workers`` worker processes."""
    limits = limits or ExtractLimits()
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(tasks)):
        todo.put(i)
    live: set[_Worker] = set()
    lock = threading.Lock()
    stop = threading.Event()
    env = _environment()

    def drive() -> None:
        worker: _Worker | None = None
        try:
            while not stop.is_set():
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                task = tasks[i]
                try:
                    args = task.prepare() if task.prepare is not None else task.args
                except ArrowDedupError as err:
                    results[i] = {"error": str(err)}
                    continue
                if worker is None:
                    try:
                        worker = _Worker(env)
                    except OSError as err:
                        # No subprocesses here (a sandbox): read in this process, unguarded.
                        log.warning("extraction worker processes unavailable (%s); reading "
                                    "in this process", err)
                        results[i] = _in_process(task, args)
                        continue
                    with lock:
                        live.add(worker)
                answer = worker.ask((task.module, task.function, args, task.display,
                                     task.what), limits)
                if isinstance(answer, str):
                    why = answer
                    if why == "died" and worker.ran_out_of_memory():
                        why = "memory"
                    with lock:
                        live.discard(worker)
                    code = worker.close(kill=True)
                    worker = None
                    answer = {"error": _failure(task, why, code, limits)}
                results[i] = answer
        finally:
            if worker is not None:
                with lock:
                    live.discard(worker)
                worker.close()

    threads = [threading.Thread(target=drive, daemon=True)
               for _ in range(max(1, min(workers, len(tasks))))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            # In slices: a signal may land on a driving thread, and a join without a timeout
            # would then never return to run the main thread's handler (Ctrl-C).
            while t.is_alive():
                t.join(0.2)
    except BaseException:  # Ctrl-C or any end of the run: no worker outlives it
        stop.set()
        with lock:
            for w in live:
                w.proc.kill()
        raise
    return [r if r is not None else {"error": f"{tasks[i].display}: not read"}
            for i, r in enumerate(results)]


def parse_isolated(
    tasks: list[tuple[str, str]],
    workers: int,
    *,
    module: Path | None = None,
    timeout: float = FILE_TIMEOUT,
    limits: ExtractLimits | None = None,
) -> list[dict[str, Any]]:
    """``parse_pdf(path, display)`` of every task in worker processes, results in task order.

    ``module``: the parser module file (default :mod:`.pdflayout`); it must define
    ``parse_pdf(path, display) -> dict`` and import nothing it cannot load standalone.
    ``limits``: time and memory per file (``timeout`` overrides its time limit).
    """
    source = str(Path(module or pdflayout.__file__))
    if limits is None:
        limits = ExtractLimits(timeout=timeout)
    elif timeout != FILE_TIMEOUT:
        limits = dataclasses.replace(limits, timeout=timeout)
    return run_isolated([Task(source, "parse_pdf", (path, display), display, "the PDF parser")
                         for path, display in tasks], workers, limits)
