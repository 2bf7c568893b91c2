"""The retrieval log only ever appends (issue 8): every search adds one file and never rewrites
an old one; a crash in the middle of an append loses at most that entry, and readers (the DuckDB
views) never see half a file."""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from arrowdedup import StoreError, ingest, open_store, write_store
from arrowdedup.metrics import connect
from arrowdedup.retrieval.search import search
from tests.helpers import ROOT, segments_frame

# The retrieval log is written through the store's atomic-write helper.
atomic_module = sys.modules["arrowdedup.store.atomic"]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    rng = np.random.default_rng(12)
    n = 60
    vectors = rng.normal(size=(n, 16)).astype(np.float32)
    frame = segments_frame([f"segment number {i}" for i in range(n)], list(vectors),
                           doc_id=[f"d{i % 6}" for i in range(n)])
    root = tmp_path / "store"
    write_store(ingest(frame), root)
    return root


def _query() -> np.ndarray:
    return np.random.default_rng(1).normal(size=16).astype(np.float32)


def _log_files(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / "retrieval_log").glob("*.parquet"))}


def _logged_rows(root: Path) -> int:
    con = connect(root)
    return int(con.sql("SELECT count(*) FROM retrieval_log").fetchall()[0][0])


def test_each_search_appends_one_file_and_never_rewrites(store: Path) -> None:
    for _ in range(3):
        search(store, _query(), k=5, mode="semantic")
    first = _log_files(store)
    assert len(first) == 3
    for _ in range(2):
        search(store, _query(), k=5, mode="semantic")
    after = _log_files(store)
    assert len(after) == 5
    assert {k: after[k] for k in first} == first, "old entries are byte-identical"
    assert _logged_rows(store) == 5
    # A new store version keeps the log (it lives beside the versions).
    write_store(ingest(open_store(store).segments().collect()), store)
    assert _log_files(store) == after


def test_crash_mid_append_loses_only_that_entry(store: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for _ in range(2):
        search(store, _query(), k=5, mode="semantic")
    before = _log_files(store)

    def crash(*args: object, **kwargs: object) -> None:
        raise SystemExit("simulated crash between the temporary file and the rename")

    # The log is written through the store's atomic-write helper: a crash before its rename
    # publishes nothing (a killed process would also leave its temporary file, faked below).
    monkeypatch.setattr(atomic_module.os, "replace", crash)
    with pytest.raises(SystemExit):
        search(store, _query(), k=5, mode="semantic")
    monkeypatch.undo()
    assert _log_files(store) == before
    (store / "retrieval_log" / ".half-written.parquet.tmp").write_bytes(b"PAR1\x00\x01")
    assert _log_files(store) == before
    assert _logged_rows(store) == 2, "readers ignore the half-written entry"
    search(store, _query(), k=5, mode="semantic")
    assert _logged_rows(store) == 3


@pytest.mark.parametrize(("code", "needle"), [(errno.ENOSPC, "free space"),
                                              (errno.EACCES, "permissions")])
def test_log_write_failure_is_a_clean_error(store: Path, monkeypatch: pytest.MonkeyPatch,
                                            code: int, needle: str) -> None:
    search(store, _query(), k=5, mode="semantic")
    before = _log_files(store)

    def failing(*args: object, **kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(pq, "write_table", failing)
    with pytest.raises(StoreError) as info:
        search(store, _query(), k=5, mode="semantic")
    assert needle in str(info.value) and "EnableMetrics" in str(info.value)
    monkeypatch.undo()
    assert _log_files(store) == before


def test_sigkill_during_a_stream_of_searches(store: Path) -> None:
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        from arrowdedup.retrieval.search import search
        q = np.random.default_rng(1).normal(size=16).astype(np.float32)
        search({str(store)!r}, q, k=5, mode="semantic")
        print("ready", flush=True)
        while True:
            search({str(store)!r}, q, k=5, mode="semantic")
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
        time.sleep(1.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
    files = sorted((store / "retrieval_log").glob("*.parquet"))
    assert len(files) >= 2
    for path in files:  # every visible entry is whole
        assert pq.read_table(path).num_rows == 1
    assert _logged_rows(store) == len(files)
