"""Builders for the store tests: random documents and corpora to write, and a CLI writer in
another process that pauses at a write point (``PAUSE_ENV``) to be killed there."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import polars as pl

from arrowdedup.store import PAUSE_ENV
from tests.helpers import ROOT
from tests.helpers.dedup import random_table


def corpus(seed: int = 0, docs: int = 12) -> pl.DataFrame:
    parts = []
    for i in range(docs):
        t = random_table(seed * 1000 + i, 30)
        parts.append(t.with_columns(pl.lit(f"doc-{i}").alias("doc_id"),
                                    (pl.lit(f"{i}:") + pl.col("segment_id")).alias("segment_id")))
    return pl.concat(parts)


def doc(i: int, seed: int, n: int = 24) -> pl.DataFrame:
    """Document ``doc-i``; another ``seed`` gives a changed document with the same id."""
    t = random_table(seed * 7919 + i, n)
    return t.with_columns(pl.lit(f"doc-{i}").alias("doc_id"),
                          (pl.lit(f"{i}:{seed}:") + pl.col("segment_id")).alias("segment_id"))


def corpus_of(state: dict[int, int]) -> pl.DataFrame:
    return pl.concat([doc(i, s) for i, s in sorted(state.items())])


def cli_process(args: list[str], pause: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ)
    if pause:
        env[PAUSE_ENV] = pause
    return subprocess.Popen(
        [sys.executable, "-m", "arrowdedup", *args], cwd=ROOT, env=env, text=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    if proc.stderr:
        proc.stderr.close()


def wait_for_pause(proc: subprocess.Popen[str], point: str, timeout: float = 90.0) -> None:
    # Raw reads on the descriptor: a buffered readline could swallow the marker line into
    # Python's buffer, where select() cannot see it.
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    marker = f"arrowdedup-test-pause {point}\n"
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            chunk = os.read(fd, 65536).decode(errors="replace")
            seen += chunk
            if marker in seen:
                return
            if not chunk and proc.poll() is not None:
                break
    proc.kill()
    raise AssertionError(f"writer never reached {point!r}; stderr: {seen}")
