"""The shared builders of the test suite, imported one way everywhere (``from tests.helpers
import ...``): the repository's paths, the shared data folder and the skip for its absence,
small segment tables and fact signatures, and a real embedder that counts its calls.
Builders of one area live in a submodule beside this one (``tests.helpers.dedup``,
``.store``, ``.pipeline``, ``.retrieval``, ``.golden``, ``.hostile``, ``.metrics_corpus``).
No test file imports another test file; what two of them share lives here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[2]  # the repository (tests/helpers/ is two below)
README = ROOT / "README.md"
DOCS = ROOT / "data" / "documents"  # the committed documents of every format
SAMPLE = ROOT / "data" / "sample"  # the bundled sample of the demo
SHARED_DATA = ROOT.parent / "shared" / "data"
M2V_MODEL = SHARED_DATA / "models" / "m2v-minilm-l6-256"
OTEL_CONTENT = SHARED_DATA / "corpus" / "opentelemetry.io" / "content"
PAIRS = SHARED_DATA / "pairs"


def need(path: Path) -> Path:
    """Skip the test, with a message, when a piece of ../shared/data is absent."""
    if not path.exists():
        import pytest  # here, so that the benchmarks can use these helpers without pytest

        pytest.skip(f"../shared/data/{path.relative_to(SHARED_DATA)} is not present")
    return path


def on_a_terminal(args: list[str], env: dict[str, str], *, stream: str) -> bytes:
    """What ``arrowdedup ARGS`` writes to its ``stream`` ("stdout" or "stderr") when that
    stream is a terminal (a pty); the other streams go nowhere. The run must exit 0."""
    import pty

    master, slave = pty.openpty()
    sinks = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream: slave}
    proc = subprocess.Popen([sys.executable, "-m", "arrowdedup", *args], env=env,
                            stdin=subprocess.DEVNULL, **sinks)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(master)
    assert proc.returncode == 0
    return b"".join(chunks)


def word(i: int) -> str:
    """A distinct plain lower-case word for ``i`` ("bcq" for 12): texts built from such words
    state no fact (arrowdedup.facts.guard), so the fact guard lets cosine decide."""
    return "".join(chr(97 + int(c)) for c in str(i)) + "q"


def spacing(i: int) -> str:
    """White space that makes ``i`` texts distinct (another content hash) while they state the
    same facts and content words: layout, which the guard ignores (SPEC §2), so near copies
    built with it merge on cosine alone."""
    return " " * (i + 1)


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def segments_frame(
    texts: list[str],
    embeddings: list[np.ndarray | None] | None = None,
    *,
    doc_id: str | list[str] = "doc",
    segment_type: str | list[str] = "paragraph",
    salience: list[float] | None = None,
    **extra: list[object],
) -> pl.DataFrame:
    """A segments table with fixed-size float32 embeddings (None → null)."""
    n = len(texts)
    docs = [doc_id] * n if isinstance(doc_id, str) else doc_id
    types = [segment_type] * n if isinstance(segment_type, str) else segment_type
    data: dict[str, object] = {
        "doc_id": docs,
        "segment_id": [f"s{i}" for i in range(n)],
        "text": texts,
        "segment_type": types,
        "position": pl.Series(list(range(n)), dtype=pl.Int32),
    }
    if salience is not None:
        data["salience"] = pl.Series(salience, dtype=pl.Float32)
    data.update(extra)
    frame = pl.DataFrame(data)
    if embeddings is not None:
        dim = next((len(e) for e in embeddings if e is not None), 4)
        values = [None if e is None else [float(x) for x in e] for e in embeddings]
        frame = frame.with_columns(
            pl.Series("embedding", values, dtype=pl.List(pl.Float32)).cast(
                pl.Array(pl.Float32, dim)
            )
        )
    return frame


def random_facts(m: int, seed: int):
    """Random fact signatures (CSR) over a small pool, so that covers and refusals are both
    common, and random guard modes (subset or equal)."""
    rng = np.random.default_rng(seed + 7)
    pool = np.array(sorted((k << 61) | int(v) for k, v in
                           zip(rng.integers(1, 8, 6), rng.integers(1, 2**40, 6), strict=True)),
                    dtype=np.uint64)
    counts = rng.integers(0, 3, m)
    offsets = np.zeros(m + 1, dtype=np.int64)
    values = []
    for r in range(m):
        chosen = np.unique(rng.choice(pool, counts[r], replace=False))
        values.extend(chosen.tolist())
        offsets[r + 1] = len(values)
    modes = rng.choice(np.array([0, 0, 1], dtype=np.int8), m)
    return offsets, np.array(values, dtype=np.uint64), modes


class Counting:
    """A real embedder that counts its calls (the framework adapters must not call it for
    items that carry their embeddings)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim, self.calls = inner, inner.name, inner.dim, 0

    def encode(self, texts: list[str]) -> Any:
        self.calls += 1
        return self.inner.encode(texts)
