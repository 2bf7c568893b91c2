"""The store never loses data (issue 8): SIGKILLed writers leave the old version whole (or no
store), concurrent writers are refused, stale locks are recovered, and write failures (an
unwritable location, a full disk, another model or format) are clean refusals."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from arrowdedup import StoreError, ingest, open_store, verify_store, write_store
from arrowdedup.cli import app
from arrowdedup.pipeline.run import ingest_to_store
from arrowdedup.store import LOCK
from arrowdedup.store.integrity import manifest_text
from tests.helpers import segments_frame, unit
from tests.helpers.store import cli_process, kill, wait_for_pause

runner = CliRunner()
POINTS = ("locked", "files-written", "manifest-written", "renamed", "switched")


def _table(seed: int, n_docs: int, per_doc: int = 20, dim: int = 16):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    base = [unit(rng.normal(size=dim)) for _ in range(6)]
    n = n_docs * per_doc
    texts = [f"seed {seed} text {i % (per_doc // 2)}" for i in range(n)]
    embs = [unit(base[i % 6] + rng.normal(scale=0.05, size=dim)) for i in range(n)]
    docs = [f"d{seed}-{i // per_doc}" for i in range(n)]
    return segments_frame(texts, embs, doc_id=docs, salience=[0.5] * n)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    old, new = folder / "old.parquet", folder / "new.parquet"
    _table(1, 5).write_parquet(old)
    _table(2, 10).write_parquet(new)
    return old, new


@pytest.fixture(scope="module")
def big_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.parquet"
    _table(3, 400).write_parquet(path)
    return path


def _snapshot(root: Path) -> tuple[str, dict[str, str]]:
    """The current run id and the sha256 of every file, after a full verify."""
    report = verify_store(root)
    assert report.ok, [str(p) for p in report.problems]
    store = open_store(root)
    files = {k: v[store.manifest["checksum"]] for k, v in store.manifest["files"].items()}
    return str(store.manifest["run_id"]), files


def _same_data_as(root: Path, expected: Path) -> None:
    """The store's current version holds exactly the result of ingesting ``expected``."""
    result = ingest(expected)
    store = open_store(root)
    decisions = store.decisions().collect().sort("segment_id")
    assert decisions.get_column("segment_id").to_list() == \
        result.decisions.sort("segment_id").get_column("segment_id").to_list()


def test_sigkill_at_each_point_leaves_old_or_new_whole(
    inputs: tuple[Path, Path], tmp_path: Path
) -> None:
    """One writer per pause point (all at once: one interpreter start-up for the batch), plus
    a first-ever run killed before its switch; while each is paused a second writer is
    refused, then the writer is SIGKILLed and the store checked."""
    old, new = inputs
    roots = {p: tmp_path / p for p in POINTS}
    before = {}
    for point, root in roots.items():
        ingest_to_store([old], root)
        before[point] = _snapshot(root)
    fresh = tmp_path / "fresh"
    procs = {p: cli_process(["ingest", str(new), "--out", str(r), "-q", "--replace"], pause=p)
             for p, r in roots.items()}
    first = cli_process(["ingest", str(old), "--out", str(fresh), "-q"], pause="manifest-written")
    try:
        for point, proc in procs.items():
            wait_for_pause(proc, point)
            root = roots[point]
            assert (root / LOCK).read_text().strip() == str(proc.pid), "the lock names its holder"
            with pytest.raises(StoreError) as info:
                ingest_to_store([old], root, replace=True)
            assert f"being written by process {proc.pid}" in str(info.value)
            assert "lock file" in str(info.value)
            if point == "files-written":
                cli = runner.invoke(app, ["ingest", str(old), "--out", str(root), "-q",
                                          "--replace"])
                assert cli.exit_code == 1 and f"process {proc.pid}" in cli.output
                assert _snapshot(root) == before[point]  # readers still see the old version
            kill(proc)
        wait_for_pause(first, "manifest-written")
        kill(first)
    finally:
        for proc in [*procs.values(), first]:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    for point, root in roots.items():
        after = _snapshot(root)
        if point == "switched":
            assert after[0] != before[point][0]
            _same_data_as(root, new)
            # Determinism across processes: the killed CLI run wrote the bytes this one does.
            reference = tmp_path / "reference"
            ingest_to_store([new], reference)
            assert _snapshot(reference)[1] == after[1]
        else:
            assert after == before[point], f"killed at {point}: the old version changed"
            _same_data_as(root, old)
        assert (root / LOCK).exists(), "SIGKILL cannot release the lock: it must be stale"
        # The next run recovers the dead writer's lock and cleans its temporary version.
        ingest_to_store([new], root, replace=True)
        assert not (root / LOCK).exists()
        assert not list((root / "versions").glob(".tmp-*"))
        _same_data_as(root, new)
        assert verify_store(root).ok
    # The killed first run left no store at all, and the next run makes one.
    with pytest.raises(StoreError, match="not an arrowdedup store"):
        open_store(fresh)
    with pytest.raises(StoreError):
        verify_store(fresh)
    ingest_to_store([old], fresh)
    assert verify_store(fresh).ok


@pytest.mark.slow
def test_timed_sigkills_never_leave_a_mix(inputs: tuple[Path, Path], big_input: Path,
                                          tmp_path: Path) -> None:
    old = inputs[0]
    delays = (1.0, 2.0, 3.0, 4.0, 5.0, 6.5, 8.0)
    roots = [tmp_path / f"t{i}" for i in range(len(delays))]
    snapshots = []
    for root in roots:
        ingest_to_store([old], root)
        snapshots.append(_snapshot(root))
    start = time.monotonic()
    procs = [cli_process(["ingest", str(big_input), "--out", str(r), "-q", "--replace"])
             for r in roots]
    try:
        for delay, proc in zip(delays, procs, strict=True):
            time.sleep(max(0.0, start + delay - time.monotonic()))
            proc.kill()
            proc.wait(timeout=30)
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            if proc.stderr:
                proc.stderr.close()
    for root, snap in zip(roots, snapshots, strict=True):
        after = _snapshot(root)  # whole, whichever version it is
        _same_data_as(root, old if after == snap else big_input)
        # the store takes a new run either way; --replace since a finished kill-free run
        # may have switched it to the other input
        ingest_to_store([old], root, replace=True)
        assert verify_store(root).ok


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("content", ["dead", "garbage\n", ""])
def test_stale_lock_recovered(inputs: tuple[Path, Path], tmp_path: Path, content: str) -> None:
    root = tmp_path / "s"
    ingest_to_store([inputs[0]], root)
    (root / LOCK).write_text(f"{_dead_pid()}\n" if content == "dead" else content)
    ingest_to_store([inputs[0]], root)
    assert not (root / LOCK).exists()
    assert not list(root.glob(f"{LOCK}.stale.*"))
    assert verify_store(root).ok


# ----------------------------------------------------------------------------- refusals


def test_store_of_another_embedding_model(tmp_path: Path) -> None:
    root = tmp_path / "s"
    result = ingest(_table(1, 2))
    write_store(result, root, embedding_model="model-a")
    before = _snapshot(root)
    with pytest.raises(StoreError) as info:
        write_store(result, root, embedding_model="model-b")
    message = str(info.value)
    assert "'model-a'" in message and "'model-b'" in message and "new store" in message
    assert _snapshot(root) == before
    with pytest.raises(StoreError, match=r"16-d.*8-d"):
        write_store(ingest(_table(1, 2, dim=8)), root, embedding_model="model-a")
    assert not (root / LOCK).exists()


def test_store_of_another_format_version(tmp_path: Path) -> None:
    root = tmp_path / "s"
    result = ingest(_table(1, 2))
    write_store(result, root)
    mpath = open_store(root).version / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["format_version"] = 99
    mpath.write_text(manifest_text(manifest))  # as a later writer would
    with pytest.raises(StoreError, match="format version 99"):
        open_store(root)
    with pytest.raises(StoreError, match=r"format version 99.*new store"):
        write_store(result, root)
    report = verify_store(root)
    assert not report.ok and "format version 99" in report.problems[0].message
    cli = runner.invoke(app, ["verify", str(root)])
    assert cli.exit_code == 1


def test_output_path_that_is_a_file(inputs: tuple[Path, Path], tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("precious")
    with pytest.raises(StoreError, match="is a file"):
        ingest_to_store([inputs[0]], target)
    cli = runner.invoke(app, ["ingest", str(inputs[0]), "--out", str(target)])
    assert cli.exit_code == 1 and "is a file" in cli.output and "Traceback" not in cli.output
    assert target.read_text() == "precious"
    other = tmp_path / "not-a-store"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="not an arrowdedup store"):
        ingest_to_store([inputs[0]], other)
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_unwritable_location(inputs: tuple[Path, Path], tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root, which chmod does not stop: the OS refusal is simulated.
    real_mkdir = os.mkdir

    def refuse(path: object, *args: object, **kwargs: object) -> None:
        if str(tmp_path / "locked") in str(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "mkdir", refuse)
    with pytest.raises(StoreError, match=r"cannot create the store.*Permission denied.*writable"):
        ingest_to_store([inputs[0]], tmp_path / "locked" / "store")
    cli = runner.invoke(app, ["ingest", str(inputs[0]), "--out", str(tmp_path / "locked")])
    assert cli.exit_code == 1 and "Traceback" not in cli.output


@pytest.mark.parametrize(("code", "hint"), [(errno.ENOSPC, "free some disk space"),
                                            (errno.EACCES, "permissions")])
def test_write_failure_keeps_the_old_version(inputs: tuple[Path, Path], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch, code: int,
                                             hint: str) -> None:
    root = tmp_path / "s"
    ingest_to_store([inputs[0]], root)
    before = _snapshot(root)
    calls = {"n": 0}
    real = pq.write_table

    def failing(*args: object, **kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # a few files in: a half-written version exists
            raise OSError(code, os.strerror(code))
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pq, "write_table", failing)
    with pytest.raises(StoreError) as info:
        ingest_to_store([inputs[1]], root, replace=True)
    assert hint in str(info.value) and "previous version is intact" in str(info.value)
    monkeypatch.undo()
    assert _snapshot(root) == before
    assert not list((root / "versions").glob(".tmp-*"))
    assert not (root / LOCK).exists()


def test_a_failed_background_fsync_fails_the_commit(inputs: tuple[Path, Path], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Data files are fsynced on a background thread as they are written: an error there (an
    I/O error of the disk) fails the run at the commit, before any switch."""
    from arrowdedup.store import writer

    root = tmp_path / "s"
    ingest_to_store([inputs[0]], root)
    before = _snapshot(root)
    real = writer.fsync_file
    seen = []

    def failing(path: Path) -> None:
        seen.append(path)
        if "embeddings" in path.parts:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(path)

    monkeypatch.setattr(writer, "fsync_file", failing)
    with pytest.raises(StoreError) as info:
        ingest_to_store([inputs[1]], root, replace=True)
    assert "previous version is intact" in str(info.value)
    assert any("embeddings" in p.parts for p in seen)
    monkeypatch.undo()
    assert _snapshot(root) == before
    assert not list((root / "versions").glob(".tmp-*"))
    assert not (root / LOCK).exists()


@contextlib.contextmanager
def _tiny_disk(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill a real disk: {proc.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_real_full_disk(inputs: tuple[Path, Path], big_input: Path, tmp_path: Path) -> None:
    with _tiny_disk(tmp_path / "disk", "400k") as disk:
        root = disk / "store"
        ingest_to_store([inputs[0]], root)
        before = _snapshot(root)
        with pytest.raises(StoreError) as info:
            ingest_to_store([big_input], root, replace=True)  # far more than 400 kB
        assert "free some disk space" in str(info.value)
        assert _snapshot(root) == before
        assert not list((root / "versions").glob(".tmp-*"))
        assert not (root / LOCK).exists()
        cli = runner.invoke(app, ["ingest", str(big_input), "--out", str(root), "-q", "--replace"])
        assert cli.exit_code == 1 and "free some disk space" in cli.output


def test_store_whose_texts_have_no_tokens(tmp_path: Path) -> None:
    # Found by these tests: an empty BM25 vocabulary crashed write_store inside bm25s.
    from arrowdedup.retrieval.search import search

    frame = segments_frame(["a", "!!", "…", "a"], doc_id=["x", "x", "y", "y"])
    root = tmp_path / "s"
    write_store(ingest(frame), root)
    assert verify_store(root).ok
    with pytest.raises(StoreError, match="neither embeddings nor a BM25 index"):
        search(root, "a", mode="keyword")


def test_read_only_location(inputs: tuple[Path, Path], tmp_path: Path) -> None:
    """A real read-only file system (a tmpfs remounted ro): new store and existing store."""
    with _tiny_disk(tmp_path / "ro", "2m") as disk:
        root = disk / "store"
        ingest_to_store([inputs[0]], root)
        before = _snapshot(root)
        remount = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True,
                                 text=True)
        if remount.returncode != 0:
            pytest.skip(f"cannot remount read-only: {remount.stderr.strip()}")
        for target in (root, disk / "new-store"):
            with pytest.raises(StoreError) as info:
                ingest_to_store([inputs[1]], target, replace=True)
            assert "Read-only file system" in str(info.value), str(info.value)
            cli = runner.invoke(app, ["ingest", str(inputs[1]), "--out", str(target), "-q",
                                      "--replace"])
            assert cli.exit_code == 1 and "Traceback" not in cli.output
        assert _snapshot(root) == before


def _damage(path: Path) -> None:
    """Flip bytes of a file's footer area (its size is unchanged, so only reading it shows)."""
    data = bytearray(path.read_bytes())
    for back in (9, 12, 20, 40):
        data[-back] ^= 0x5A
    path.write_bytes(bytes(data))


def test_a_damaged_store_file_is_refused_with_the_way_out(inputs: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    """A store file whose bytes a reading library rejects: the library's search, context and
    store-life calls and every store command of the CLI refuse with the store named and `verify` /
    `rollback` as the way out, never with that library's own exception or a traceback."""
    from arrowdedup import build_context, compact_store, delete_documents, search
    from arrowdedup.store.reader import damaged, read_failure

    root = tmp_path / "s"
    ingest_to_store(inputs[0], root, quiet=True)
    query = unit(np.random.default_rng(1).normal(size=16)).astype(np.float32)
    for part in sorted((root / "current" / "segments").glob("*.parquet")):
        _damage(part)
    delete_documents(root, ["d1-0"])  # a delta: tombstones only, no data file is read
    for call in (lambda: search(root, query, k=3), lambda: build_context(root, query, k=3),
                 lambda: compact_store(root)):  # folding the delta reads the base
        with pytest.raises(StoreError) as info:
            call()
        message = str(info.value)
        assert str(root) in message and f"arrowdedup verify {root}" in message
        assert "rollback" in message
    for args in (["search", str(root), "seed text", "--mode", "keyword"],
                 ["stats", str(root)], ["merges", str(root)], ["verify", str(root)]):
        cli = runner.invoke(app, args)
        assert cli.exit_code == 1, (args, cli.output)
        assert isinstance(cli.exception, SystemExit), (args, cli.exception)
        if args[0] != "verify":  # verify lists what it found instead
            assert "error: " in cli.output and "Traceback" not in cli.output, (args, cli.output)
            assert "verify" in cli.output, (args, cli.output)  # the way out, not another error
    # Only the reading libraries' errors are translated; a plain bug still surfaces as such.
    assert not read_failure(KeyError("x")) and not read_failure(StoreError("x"))
    assert str(root) in str(damaged(root, ValueError("boom")))


def test_a_manifest_that_is_not_utf8_is_refused(inputs: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    root = tmp_path / "s"
    ingest_to_store(inputs[0], root, quiet=True)
    manifest = root / "current" / "manifest.json"
    data = bytearray(manifest.read_bytes())
    data[len(data) // 2] = 0xF1  # not valid UTF-8 at this place
    manifest.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"manifest .* damaged"):
        open_store(root)
    for args in (["verify", str(root)], ["stats", str(root)]):
        cli = runner.invoke(app, args)
        assert cli.exit_code == 1 and "Traceback" not in cli.output, (args, cli.output)
