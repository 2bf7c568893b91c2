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
import pyarrow as pa
import pytest

from arrowdedup import StoreError, ingest, open_store, write_store
from arrowdedup.arrays.scratch import ScratchPool
from arrowdedup.store import atomic
from arrowdedup.store.encode import write_data_file
from arrowdedup.store.integrity import checksum_file
from tests.helpers.store import corpus


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
    assert m["format_version"] == 4 and m["run_id"] and m["buckets"] == 4
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
    for volatile in ("run_id", "base", "created_at", "timings", "manifest_checksum"):
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


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 5003, 4 << 20, (9 << 20) + 7])
def test_direct_images_write_exactly_their_bytes(tmp_path: Path, size: int) -> None:
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    for pool in (None, ScratchPool(min_bytes=0)):
        image = atomic.image_buffer(size, pool)
        assert size == 0 or image.ctypes.data % atomic.DIRECT_BLOCK == 0
        assert image.shape[0] == atomic.padded_size(size) >= size
        image[:] = 0xFF  # stale bytes beyond the file: never in it
        image[:size] = data
        atomic.write_image(tmp_path / "direct.bin", image, size)
        assert (tmp_path / "direct.bin").read_bytes() == data.tobytes()  # truncated back


def test_write_image_refuses_an_unaligned_or_short_image(tmp_path: Path) -> None:
    image = atomic.image_buffer(8192)
    with pytest.raises(ValueError, match="image_buffer"):
        atomic.write_image(tmp_path / "a.bin", image[1:4097], 4096)
    with pytest.raises(ValueError, match="image_buffer"):
        atomic.write_image(tmp_path / "a.bin", image[:4096], 4097)


def test_large_files_are_written_through_one_reused_image(tmp_path: Path) -> None:
    """A writer's large files are assembled in one pooled image, bucket after bucket, and the
    bytes on disk are those a plain IPC writer gives, with the checksum of the file."""
    rng = np.random.default_rng(5)
    pool = ScratchPool(max_free=1)
    for i, rows in enumerate([6_000, 5_500]):  # 9.2 and 8.4 MB: both large
        vectors = rng.standard_normal((rows, 384), dtype=np.float32)
        table = pa.table({"embedding": pa.FixedSizeListArray.from_arrays(
            pa.array(vectors.reshape(-1)), 384), "n": np.arange(rows)})
        digest = write_data_file(tmp_path / f"{i}.arrow", table, pool)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as ipc_writer:
            ipc_writer.write_table(table)
        assert (tmp_path / f"{i}.arrow").read_bytes() == sink.getvalue().to_pybytes()
        assert digest == checksum_file(tmp_path / f"{i}.arrow")
    assert (pool.allocated, pool.reused) == (1, 1)
    big = bytes(range(256)) * 40_000  # a large buffer: the same path
    assert write_data_file(tmp_path / "big.bin", big, pool) == checksum_file(tmp_path / "big.bin")
    assert (tmp_path / "big.bin").read_bytes() == big
    assert (pool.allocated, pool.reused) == (1, 2)


@pytest.mark.parametrize("refuse", ["none", "open", "write"])
@pytest.mark.parametrize("rows", [0, 1, 700, 5_000])
def test_large_tables_written_through_a_window_match_an_image(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int, refuse: str) -> None:
    """A table past WINDOWED_MIN_BYTES is written window by window: the same bytes and the
    same manifest entry (checksum, size, block digests) as the whole image gives, where
    O_DIRECT is taken, refused on open or refused on the first write."""
    from arrowdedup.store import encode

    vectors = np.random.default_rng(rows).standard_normal((rows, 384), dtype=np.float32)
    table = pa.table({"embedding": pa.FixedSizeListArray.from_arrays(
        pa.array(vectors.reshape(-1)), 384), "n": np.arange(rows)})
    expected = encode.write_data_entry(tmp_path / "image.arrow", table)
    direct = getattr(os, "O_DIRECT", 0)
    real_open, real_write = os.open, os.write

    def refuse_open(path: str, flags: int, *args: int) -> int:
        if flags & direct:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    def refuse_write(fd: int, data: memoryview) -> int:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & direct:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    if refuse == "open" and direct:
        monkeypatch.setattr(os, "open", refuse_open)
    if refuse == "write" and direct:
        monkeypatch.setattr(os, "write", refuse_write)
    # A small window, so a file spans several of them and ends mid-window.
    monkeypatch.setattr(encode, "DIRECT_MIN_BYTES", 0)
    monkeypatch.setattr(encode, "WINDOWED_MIN_BYTES", 0)
    monkeypatch.setattr(encode, "WINDOW_BYTES", 4 * atomic.DIRECT_BLOCK * 64)
    windows: list[atomic.WindowedFile] = []
    monkeypatch.setattr(encode, "WindowedFile", lambda *a: windows.append(
        atomic.WindowedFile(*a)) or windows[-1])
    pool = ScratchPool(min_bytes=0)
    entry = encode.write_data_entry(tmp_path / "windowed.arrow", table, pool)
    monkeypatch.undo()
    assert len(windows) == 1 and windows[0].closed
    assert (tmp_path / "windowed.arrow").read_bytes() == \
        (tmp_path / "image.arrow").read_bytes()
    assert entry == expected
    assert entry["bytes"] == (tmp_path / "windowed.arrow").stat().st_size


def test_direct_writes_fall_back_to_the_page_cache_where_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    direct = getattr(os, "O_DIRECT", 0)
    if not direct:
        pytest.skip("no O_DIRECT on this platform: images are always written buffered")
    payload = np.frombuffer(bytes(range(256)) * 40_000 + b"tail", dtype=np.uint8)
    image = atomic.image_buffer(payload.size)
    image[:payload.size] = payload
    real_open, real_write = os.open, os.write

    def refuse_open(path: str, flags: int, *args: int) -> int:  # tmpfs refuses the flag
        if flags & direct:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refuse_open)
    atomic.write_image(tmp_path / "a.bin", image, payload.size)
    assert (tmp_path / "a.bin").read_bytes() == payload.tobytes()
    monkeypatch.setattr(os, "open", real_open)

    refused: list[int] = []

    def refuse_write(fd: int, data: memoryview) -> int:  # accepted on open, refused on I/O
        if fcntl.fcntl(fd, fcntl.F_GETFL) & direct:
            refused.append(fd)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", refuse_write)
    atomic.write_image(tmp_path / "b.bin", image, payload.size)
    assert refused
    assert (tmp_path / "b.bin").read_bytes() == payload.tobytes()


def test_a_direct_write_that_fails_midway_is_not_hidden(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def full_disk(fd: int, data: memoryview) -> int:
        calls.append(fd)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data[:1 << 20])  # a short write: the rest is tried again

    monkeypatch.setattr(os, "write", full_disk)
    image = atomic.image_buffer(9 << 20)
    with pytest.raises(OSError, match="No space"):
        atomic.write_image(tmp_path / "c.bin", image, 9 << 20)
    assert len(calls) == 2
