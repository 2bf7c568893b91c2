"""The store: layout, determinism, atomic swap, lock, and reading back."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_kernels import random_table

from arrowdedup import StoreError, ingest, open_store, write_store
from arrowdedup.store import atomic


def corpus(seed: int = 0, docs: int = 12) -> pl.DataFrame:
    parts = []
    for i in range(docs):
        t = random_table(seed * 1000 + i, 30)
        parts.append(t.with_columns(pl.lit(f"doc-{i}").alias("doc_id"),
                                    (pl.lit(f"{i}:") + pl.col("segment_id")).alias("segment_id")))
    return pl.concat(parts)


def data_files(version: Path) -> dict[str, str]:
    return {
        str(p.relative_to(version)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(version.rglob("*")) if p.is_file() and p.name != "manifest.json"
    }


def test_layout_and_read_back(tmp_path: Path) -> None:
    frame = corpus()
    result = ingest(frame)
    version = write_store(result, tmp_path / "s", buckets=4)
    store = open_store(tmp_path / "s")
    assert store.version == version.resolve()
    assert (tmp_path / "s" / "current").is_symlink()
    m = store.manifest
    assert m["format_version"] == 3 and m["run_id"] and m["buckets"] == 4
    assert m["embedding"]["dim"] == 8
    assert m["counts"]["segments_in"] == frame.height
    assert m["config"] == result.config.to_dict()
    segs = store.segments().collect()
    assert segs.height == result.kept.height
    assert set(segs.columns) == set(result.kept.columns)
    assert segs.sort("segment_id").equals(result.kept.sort("segment_id").select(segs.columns))
    assert store.decisions().collect().height == frame.height
    assert store.documents().collect().sort("doc_id").equals(result.documents.sort("doc_id"))
    vectors = store.vectors()
    assert vectors is not None and vectors.shape == (segs.height, 8)
    emb = np.array([[np.nan] * 8 if e is None else e for e in segs["embedding"].to_list()])
    for row, e in zip(vectors, emb, strict=True):
        if np.isfinite(e).all() and np.linalg.norm(e) > 0:
            np.testing.assert_allclose(row, e / np.linalg.norm(e), rtol=1e-5, atol=1e-6)
        else:
            assert not row.any()


def test_each_document_lives_in_one_bucket(tmp_path: Path) -> None:
    write_store(ingest(corpus(docs=30)), tmp_path / "s", buckets=8)
    version = open_store(tmp_path / "s").version
    seen: dict[str, str] = {}
    for sub in ("segments", "decisions"):
        parts = sorted((version / sub).glob("*.parquet"))
        assert 1 < len(parts) <= 8
        for part in parts:
            for doc in pl.read_parquet(part).get_column("doc_id").unique().to_list():
                assert seen.setdefault(f"{sub}:{doc}", part.name) == part.name


def test_identical_runs_write_identical_bytes(tmp_path: Path) -> None:
    frame = corpus(seed=3)
    a = write_store(ingest(frame, threads=1), tmp_path / "a", buckets=4)
    b = write_store(ingest(frame, threads=2), tmp_path / "b", buckets=4)
    assert data_files(a) == data_files(b)
    ma, mb = (json.loads((v / "manifest.json").read_text()) for v in (a, b))
    for volatile in ("run_id", "base", "created_at", "timings"):
        ma.pop(volatile), mb.pop(volatile)
    assert ma == mb


def test_reingest_replaces_content_and_keeps_one_pointer(tmp_path: Path) -> None:
    root = tmp_path / "s"
    write_store(ingest(corpus(seed=1)), root)
    first = open_store(root)
    write_store(ingest(corpus(seed=2, docs=3)), root)
    second = open_store(root)
    assert second.version != first.version
    assert second.manifest["counts"]["documents"] == 3
    # a reader that opened the old version still reads it whole
    assert first.decisions().collect().height == 12 * 30


def test_failed_run_leaves_old_store_intact(tmp_path: Path) -> None:
    root = tmp_path / "s"
    write_store(ingest(corpus(seed=1)), root)
    before = open_store(root)

    def boom(version_dir: Path, kept: pl.DataFrame) -> None:
        raise RuntimeError("simulated crash while writing")

    with pytest.raises(RuntimeError):
        write_store(ingest(corpus(seed=2)), root, hooks=[boom])
    after = open_store(root)
    assert after.version == before.version
    assert data_files(after.version) == data_files(before.version)
    assert not list((root / "versions").glob(".tmp-*"))
    assert not (root / ".lock").exists()


def test_second_writer_is_refused_and_stale_lock_recovered(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    (root / "versions").mkdir()
    # A live holder: the lock is an flock on the file (another open file description of it
    # conflicts even inside this process), and the file names the holder.
    with open(root / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write(f"{os.getppid()}\n")
        held.flush()
        with pytest.raises(StoreError, match=f"being written by process {os.getppid()}"):
            write_store(ingest(corpus(docs=1)), root)
    # Released (as the OS does when a holder dies, however it dies): the file left behind
    # is stale and the next writer takes it.
    (root / ".lock").write_text("999999999\n")
    write_store(ingest(corpus(docs=1)), root)
    assert not (root / ".lock").exists()
    assert open_store(root).manifest["counts"]["documents"] == 1


def test_refusals(tmp_path: Path) -> None:
    file_path = tmp_path / "file"
    file_path.write_text("x")
    with pytest.raises(StoreError, match="is a file"):
        write_store(ingest(corpus(docs=1)), file_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    with pytest.raises(StoreError, match="not an arrowdedup store"):
        write_store(ingest(corpus(docs=1)), other)
    with pytest.raises(StoreError, match="no store"):
        open_store(tmp_path / "missing")
    with pytest.raises(StoreError, match="not an arrowdedup store"):
        open_store(other)


def test_other_embedding_model_refused(tmp_path: Path) -> None:
    root = tmp_path / "s"
    write_store(ingest(corpus(docs=1)), root, embedding_model="model-a")
    with pytest.raises(StoreError, match="model-a"):
        write_store(ingest(corpus(docs=1)), root, embedding_model="model-b")


def test_store_without_embeddings(tmp_path: Path) -> None:
    frame = corpus(docs=2).drop("embedding")
    write_store(ingest(frame), tmp_path / "s")
    store = open_store(tmp_path / "s")
    assert store.vectors() is None
    assert "embedding" not in store.segments().collect().columns


def test_buckets_a_worker_wrote_itself_give_the_same_store(tmp_path: Path) -> None:
    """A bucket whose files a worker wrote into the staging directory (what a Ray task on the
    driver's node does) lands as if the writer had written it; a staged file that is missing
    is refused and the old store stays; a task that comes late, after the run removed its
    staging directory, fails instead of recreating it."""
    from arrowdedup.store import StoreWriter, encode_bucket, write_staged

    result = ingest(corpus())
    out = encode_bucket(0, result.kept, result.decisions, None, result.embedding_dim)

    def build(root: Path, staged: bool) -> Path:
        with StoreWriter(root, buckets=1, config=result.config) as writer:
            writer.add(write_staged(writer.staging, out) if staged else out)
            return writer.commit(documents=result.documents)

    plain, staged = build(tmp_path / "a", False), build(tmp_path / "b", True)
    assert data_files(plain) == data_files(staged)
    files_of = lambda v: json.loads((v / "manifest.json").read_text())["files"]  # noqa: E731
    assert files_of(plain) == files_of(staged)

    with pytest.raises(StoreError, match="not there"), \
            StoreWriter(tmp_path / "b", buckets=1, config=result.config) as writer:
        lost = write_staged(writer.staging, out)
        (writer.staging / lost.files[0][0]).unlink()
        writer.add(lost)
    assert open_store(tmp_path / "b").version == staged.resolve()
    assert not list((tmp_path / "b" / "versions").glob(".tmp-*"))

    with pytest.raises(FileNotFoundError):
        write_staged(tmp_path / "ended", out)
    assert not (tmp_path / "ended").exists()


@pytest.mark.parametrize("shape", [(0,), (0, 3), (7,), (3, 5), (300_000, 8)])
def test_chunked_writes_match_numpy(tmp_path: Path, shape: tuple[int, ...],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # Small chunks so every array above spans several of them, one ending mid-chunk.
    monkeypatch.setattr(atomic, "WRITE_CHUNK", 4096 + 3)
    array = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    atomic.save_npy(tmp_path / "ours.npy", array)
    np.save(tmp_path / "numpy.npy", array)
    assert (tmp_path / "ours.npy").read_bytes() == (tmp_path / "numpy.npy").read_bytes()
    assert np.array_equal(np.load(tmp_path / "ours.npy"), array)
    # Non-contiguous input is written as its contiguous copy, like np.save.
    if array.ndim == 2:
        atomic.save_npy(tmp_path / "t.npy", array.T)
        assert np.array_equal(np.load(tmp_path / "t.npy"), array.T)
    payload = bytes(range(256)) * 100
    atomic.atomic_write_bytes(tmp_path / "blob", payload)
    assert (tmp_path / "blob").read_bytes() == payload


@pytest.mark.parametrize("pieces", [[0], [1], [4095], [4096], [5000, 3], [4 << 20],
                                    [(4 << 20) - 1, 2], [3 << 20, 3 << 20, 123_457]])
def test_direct_files_hold_exactly_what_was_written(tmp_path: Path, pieces: list[int]) -> None:
    rng = np.random.default_rng(len(pieces) + sum(pieces))
    chunks = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in pieces]
    path = tmp_path / "direct.bin"
    with atomic.DirectFile(path) as fh:
        for chunk in chunks:
            assert fh.write(chunk) == len(chunk)
        assert fh.tell() == sum(pieces)
    assert path.read_bytes() == b"".join(chunks)  # truncated back from its padded last block


def test_direct_files_reuse_their_stage_and_leave_no_stale_bytes(tmp_path: Path) -> None:
    with atomic.DirectFile(tmp_path / "big.bin") as fh:
        fh.write(b"\xff" * ((4 << 20) + 4097))  # every byte of the stage written over
        assert fh._array is not None
        address = fh._array.ctypes.data  # (holding the array would keep it from the pool)
    with atomic.DirectFile(tmp_path / "small.bin") as fh:
        assert fh._array is not None
        assert fh._array.ctypes.data == address  # kept, not mapped and faulted in again
        fh.write(b"ab")
    # Only what this file was given, though its stage still held the first file's bytes.
    assert (tmp_path / "small.bin").read_bytes() == b"ab"
    assert (tmp_path / "big.bin").read_bytes() == b"\xff" * ((4 << 20) + 4097)


def test_a_stage_still_viewed_after_close_is_not_reused(tmp_path: Path) -> None:
    with atomic.DirectFile(tmp_path / "a.bin") as fh:
        fh.write(b"x" * 10)
        assert fh._array is not None
        held = fh._array[:10]  # as an error's traceback could hold a slice of it
    with atomic.DirectFile(tmp_path / "b.bin") as fh:
        assert fh._array is not held.base
        fh.write(b"y" * 10)
    assert bytes(held) == b"x" * 10  # never written over by the second file
    assert (tmp_path / "b.bin").read_bytes() == b"y" * 10


def test_direct_files_fall_back_to_the_page_cache_where_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    direct = getattr(os, "O_DIRECT", 0)
    if not direct:
        pytest.skip("no O_DIRECT on this platform: DirectFile always writes buffered")
    payload = bytes(range(256)) * 40_000  # 10 MB: a few stages and a partial block
    real_open, real_write = os.open, os.write

    def refuse_open(path: str, flags: int, *args: int) -> int:  # tmpfs refuses the flag
        if flags & direct:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refuse_open)
    with atomic.DirectFile(tmp_path / "a.bin") as fh:
        fh.write(payload)
        assert not fh.direct
        assert fh._fill == 0 and fh.tell() == len(payload)  # written straight, not staged
        fh.write(b"tail")
    assert (tmp_path / "a.bin").read_bytes() == payload + b"tail"
    monkeypatch.setattr(os, "open", real_open)

    refused: list[int] = []

    def refuse_write(fd: int, data: memoryview) -> int:  # accepted on open, refused on I/O
        if fcntl.fcntl(fd, fcntl.F_GETFL) & direct:
            refused.append(fd)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", refuse_write)
    with atomic.DirectFile(tmp_path / "b.bin") as fh:
        fh.write(payload)
        fh.write(b"tail")  # after the refusal: straight through the page cache
    assert refused and not fh.direct
    assert (tmp_path / "b.bin").read_bytes() == payload + b"tail"


def test_a_direct_write_that_fails_midway_is_not_hidden(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def full_disk(fd: int, data: memoryview) -> int:
        calls.append(fd)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError, match="No space"), atomic.DirectFile(tmp_path / "c.bin") as fh:
        fh.write(bytes(9 << 20))
