"""Reads that notice damage (issue 45): a byte flipped in any store file is found by `verify`
and never read back as data; `verify` checks every count of the manifest; a store whose
`current` pointer is lost can be recovered."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import xxhash
from typer.testing import CliRunner

from arrowdedup import StoreError, search, verify_store
from arrowdedup.cli import app
from arrowdedup.pipeline.run import ingest_to_store
from arrowdedup.pipeline.update import compact_store, update_store
from arrowdedup.retrieval.search import _VIEWS
from arrowdedup.store import open_store
from arrowdedup.store.integrity import BLOCK_SIZE, forget_checked, manifest_text
from arrowdedup.store.reader import is_panic, read_failure, reads_store
from arrowdedup.store.versions import list_versions, scan_versions
from tests.helpers.store import corpus_of

runner = CliRunner()


class HashEmbedder:
    """A deterministic 8-d text embedder (the stores below hold 8-d vectors)."""

    name = "fuzz-hash"
    dim = 8

    def encode(self, texts: list[str]) -> np.ndarray:
        rows = [np.random.default_rng(xxhash.xxh64_intdigest(t.encode())).normal(size=8)
                for t in texts]
        return np.asarray(rows, dtype=np.float32)


EMBEDDER = HashEmbedder()
QUERY_VECTOR = np.linspace(-1.0, 1.0, 8, dtype=np.float32)


def _search_text(root: Path) -> pl.DataFrame:
    return search(root, "step 1 ax", k=5, embedder=EMBEDDER).results  # dense + BM25


def _search_vector(root: Path) -> pl.DataFrame:
    return search(root, QUERY_VECTOR, k=5, mode="semantic").results


def _stats(root: Path) -> str:
    out = runner.invoke(app, ["stats", str(root), "--format", "json"])
    if out.exit_code != 0:
        lines = out.stderr.strip().splitlines()
        assert out.exit_code == 1 and len(lines) == 1, out.output
        raise StoreError(lines[0].removeprefix("error: "))
    return out.stdout


# Stats first: it reads the retrieval log, which each search that runs appends to.
READS: dict[str, Callable[[Path], Any]] = {
    "stats": _stats,
    "segments": lambda root: open_store(root).segments().collect(),
    "decisions": lambda root: open_store(root).decisions().collect(),
    "documents": lambda root: open_store(root).documents().collect(),
    "search": _search_text,
    "search_vector": _search_vector,
}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, pl.DataFrame):
        return isinstance(b, pl.DataFrame) and a.equals(b)
    return bool(a == b)


def _fresh(src: Path, dst: Path) -> Path:
    """A copy of the store ``src`` at ``dst``, read by this process as if for the first time."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, symlinks=True)
    forget_checked()
    _VIEWS.clear()
    return dst


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A version with a delta layer (tombstones, changes, the layered BM25 index) and its
    compaction (the carried history): between them every kind of store file."""
    base = tmp_path_factory.mktemp("integrity")
    layered = base / "layered"
    ingest_to_store(corpus_of({i: 0 for i in range(5)}), layered, buckets=2, quiet=True)
    update_store(layered, corpus_of({0: 0, 1: 1, 2: 0, 3: 0, 5: 0}), delete_missing=True)
    compacted = _fresh(layered, base / "compacted")
    compact_store(compacted)
    return {"layered": layered, "compacted": compacted}


def _kind(rel: str) -> str:
    """The kind of a version's file: its directory (segments, bm25, ...) or its name."""
    parts = rel.split("/")
    if parts[0] == "deltas":
        parts = parts[2:]
    if parts[0] == "bm25":
        return "bm25/" + parts[-1].split(".")[0]
    return parts[0]


def _files(root: Path) -> dict[str, list[str]]:
    version = open_store(root).version
    kinds: dict[str, list[str]] = {}
    for path in sorted(version.rglob("*")):
        if path.is_file():
            rel = path.relative_to(version).as_posix()
            kinds.setdefault(_kind(rel), []).append(rel)
    return kinds


def _flip(path: Path, rng: np.random.Generator, whole_byte: bool) -> str:
    """Flip one bit (or replace one byte by another value) at a random place of ``path``."""
    data = bytearray(path.read_bytes())
    at = int(rng.integers(len(data)))
    old = data[at]
    if whole_byte:
        data[at] = int((old + rng.integers(1, 256)) % 256)
    else:
        data[at] ^= 1 << int(rng.integers(8))
    path.write_bytes(bytes(data))
    return f"byte {at}: {old:#04x} -> {data[at]:#04x}"


def _expected(stores: dict[str, Path], scratch: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for name, root in stores.items():
        copy = _fresh(root, scratch / f"expected-{name}")
        out[name] = {read: fn(copy) for read, fn in READS.items()}
    return out


def run_flips(stores: dict[str, Path], scratch: Path, flips: int, seed: int
              ) -> dict[str, int]:
    """Flip one bit or byte in one file per trial, every file kind in turn; assert `verify`
    finds each, and every read raises one StoreError line or returns the original data."""
    expected = _expected(stores, scratch)
    copies = {name: _fresh(root, scratch / f"trial-{name}") for name, root in stores.items()}
    rng = np.random.default_rng(seed)
    plan = [(name, kind, rels) for name, root in stores.items()
            for kind, rels in sorted(_files(root).items())]
    tally = {"flips": 0, "verify_caught": 0, "reads_refused": 0, "reads_same": 0,
             "reads_changed": 0}
    changed: list[str] = []
    for trial in range(flips):
        name, _kind_name, rels = plan[trial % len(plan)]
        rel = rels[int(rng.integers(len(rels)))]
        copy = copies[name]
        path = copy / "current" / rel
        original = path.read_bytes()
        what = _flip(path, rng, whole_byte=bool(trial % 2))
        forget_checked()
        _VIEWS.clear()
        tally["flips"] += 1
        report = verify_store(copy)
        if not report.ok:
            tally["verify_caught"] += 1
        else:
            changed.append(f"verify passed {name}:{rel} {what}")
        for read, fn in READS.items():
            try:
                got = fn(copy)
            except StoreError as err:
                message = str(err)
                assert "\n" not in message and "arrowdedup verify" in message \
                    and "arrowdedup rollback" in message, (name, rel, what, read, message)
                tally["reads_refused"] += 1
                continue
            if _same(got, expected[name][read]):
                tally["reads_same"] += 1
            else:
                tally["reads_changed"] += 1
                changed.append(f"{read} changed: {name}:{rel} {what}")
        path.write_bytes(original)  # the copy is sound again for the next trial
        shutil.rmtree(copy / "retrieval_log", ignore_errors=True)
    assert not changed, changed
    return tally


def test_byte_flips_in_every_file_kind_are_caught(stores: dict[str, Path],
                                                  tmp_path: Path) -> None:
    kinds = {kind for root in stores.values() for kind in _files(root)}
    # Every kind of file a version holds is among the flipped ones.
    assert {"segments", "decisions", "embeddings", "fingerprints", "documents.parquet",
            "tombstones.parquet", "changes.parquet", "history.parquet", "manifest.json",
            "bm25/data", "bm25/indices", "bm25/indptr", "bm25/vocab", "bm25/params",
            "bm25/tf", "bm25/doc_len"} <= kinds
    plan = sum(len(_files(root)) for root in stores.values())
    tally = run_flips(stores, tmp_path, flips=plan, seed=45)  # each kind of each store once
    assert tally["verify_caught"] == tally["flips"] == plan
    assert tally["reads_changed"] == 0 and tally["reads_refused"] > 0


@pytest.mark.slow
def test_one_hundred_flips(stores: dict[str, Path], tmp_path: Path) -> None:
    tally = run_flips(stores, tmp_path, flips=100, seed=4500)
    assert tally["verify_caught"] == 100 and tally["reads_changed"] == 0


def test_damage_in_a_block_that_a_read_does_not_touch_is_not_reported_by_it(
        tmp_path: Path) -> None:
    # A ranged read checks only its own blocks: a flip inside the text column of a large
    # segments file leaves a read of doc_id alone, and fails a read of the text.
    import pyarrow.parquet as pq

    root = tmp_path / "s"
    frame = corpus_of({i: 0 for i in range(40)})
    rng = np.random.default_rng(3)
    noise = [rng.bytes(1000).hex() for _ in range(frame.height)]  # does not compress
    ingest_to_store(frame.with_columns(pl.col("text") + pl.Series(noise)), root, buckets=1,
                    quiet=True)
    path = open_store(root).version / "segments" / "part-00000.parquet"
    meta = pq.read_metadata(path)
    chunks = {meta.row_group(0).column(c).path_in_schema: meta.row_group(0).column(c)
              for c in range(meta.num_columns)}
    text, doc_id = chunks["text"], chunks["doc_id"]
    at = text.data_page_offset + text.total_compressed_size // 2
    footer_block = (path.stat().st_size - 8 - 4096) // BLOCK_SIZE
    assert doc_id.data_page_offset + doc_id.total_compressed_size < BLOCK_SIZE
    assert BLOCK_SIZE <= at < footer_block * BLOCK_SIZE  # a block of the text alone
    data = bytearray(path.read_bytes())
    data[at] ^= 0x10
    path.write_bytes(bytes(data))
    forget_checked()
    ids = open_store(root).segments(with_embeddings=False).select("doc_id").collect()
    assert ids.height == open_store(root).manifest["counts"]["segments_kept"]
    with pytest.raises(StoreError, match=r"segments/part-00000.parquet .* is damaged"):
        open_store(root).segments(with_embeddings=False).select("text").collect()
    assert not verify_store(root).ok


def test_embedding_rows_are_checked_when_read(tmp_path: Path) -> None:
    # 1,000 vectors of 256 floats: 1 MB of values over four blocks. A flip in row 600 fails
    # the reads of that row (and the dense scan), not the opening nor a read of row 10.
    from arrowdedup import ingest, write_store
    from tests.helpers import segments_frame, unit

    rng = np.random.default_rng(11)
    n = 1000
    frame = segments_frame([f"segment {i}" for i in range(n)],
                           [unit(rng.normal(size=256)) for _ in range(n)],
                           doc_id=[f"doc-{i // 100}" for i in range(n)])
    root = tmp_path / "s"
    write_store(ingest(frame), root, buckets=1)
    vectors = open_store(root).vectors()
    assert vectors is not None and len(vectors) == n
    row = vectors.rows(np.array([600]))[0]
    path = open_store(root).version / "embeddings" / "part-00000.arrow"
    data = bytearray(path.read_bytes())
    at = data.find(row.astype(np.float32).tobytes())
    assert BLOCK_SIZE < at < len(data) - BLOCK_SIZE  # a block of the values alone
    data[at + 1] ^= 0x01
    path.write_bytes(bytes(data))
    forget_checked()
    vectors = open_store(root).vectors()
    assert vectors is not None
    np.testing.assert_array_equal(vectors.rows(np.array([10]))[0], frame["embedding"][10])
    with pytest.raises(StoreError, match=r"embeddings/part-00000.arrow .* is damaged"):
        vectors.rows(np.array([600]))
    with pytest.raises(StoreError, match="is damaged"):
        search(root, rng.normal(size=256), k=3, mode="semantic")


# ----------------------------------------------------------------------------- panics


def test_a_native_panic_in_a_read_is_the_store_error() -> None:
    class PanicException(BaseException):  # what PyO3 raises; not an Exception
        pass

    PanicException.__module__ = "pyo3_runtime"
    assert is_panic(PanicException("boom")) and read_failure(PanicException("boom"))
    assert not read_failure(KeyboardInterrupt())

    @reads_store
    def reader(store: Path) -> None:
        raise PanicException("called `Option::unwrap()` on a `None` value")

    with pytest.raises(StoreError, match=r"could not be read \(PanicException: .*verify"):
        reader(Path("somewhere"))


# ----------------------------------------------------------------------------- counts


@pytest.mark.parametrize("key", ["documents", "kept", "dropped_exact", "merged_near",
                                 "filtered_low_salience", "segments_in", "segments_kept"])
def test_every_edited_count_fails_verify(tmp_path: Path, key: str) -> None:
    root = tmp_path / "s"
    ingest_to_store(corpus_of({i: 0 for i in range(4)}), root, buckets=2, quiet=True)
    mpath = open_store(root).version / "manifest.json"
    manifest = json.loads(mpath.read_text())
    stated = manifest["counts"].get(key, 0)
    manifest["counts"][key] = stated + 7
    mpath.write_text(json.dumps(manifest, indent=2))  # an edit: the checksum no longer fits
    report = verify_store(root)
    problems = [str(p) for p in report.problems if p.check == "counts"]
    assert any(f"counts.{key}" in p and str(stated + 7) in p and str(stated) in p
               for p in problems), problems
    assert any("rollback" in p for p in problems)
    assert "manifest" in {p.check for p in report.problems}  # its checksum fails too
    cli = runner.invoke(app, ["verify", str(root)])
    assert cli.exit_code == 1 and f"counts.{key}" in cli.stderr
    # Resealed (as a writer that miscounted would have written it): the count alone fails.
    mpath.write_text(manifest_text(manifest))
    report = verify_store(root)
    assert {p.check for p in report.problems} == {"counts"}
    assert f"counts.{key}" in report.problems[0].where


def test_life_counts_are_checked(stores: dict[str, Path], tmp_path: Path) -> None:
    root = _fresh(stores["layered"], tmp_path / "s")
    assert verify_store(root).ok
    mpath = open_store(root).version / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["life"]["removed"] += 1
    mpath.write_text(manifest_text(manifest))
    report = verify_store(root)
    assert [p.where for p in report.problems] == ["manifest.life.removed"]


def test_an_edited_manifest_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "s"
    ingest_to_store(corpus_of({i: 0 for i in range(2)}), root, buckets=1, quiet=True)
    mpath = open_store(root).version / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["counts"]["documents"] = 99
    mpath.write_text(json.dumps(manifest, indent=2))
    with pytest.raises(StoreError, match=r"manifest of .* is damaged.*verify.*rollback"):
        open_store(root)
    infos, skipped = scan_versions(root)
    assert infos == [] and len(skipped) == 1


# ----------------------------------------------------------------------------- stranded


def test_a_store_without_current_can_be_recovered(tmp_path: Path) -> None:
    root = tmp_path / "s"
    ingest_to_store(corpus_of({0: 0, 1: 0}), root, buckets=1, quiet=True)
    update_store(root, corpus_of({0: 0, 1: 0, 2: 0}))
    ids = [v.id for v in list_versions(root)]
    assert len(ids) == 2
    (root / "current").unlink()

    cli = runner.invoke(app, ["verify", str(root)])
    lines = cli.stderr.strip().splitlines()
    assert cli.exit_code == 1 and len(lines) == 1, cli.output
    assert "no current version" in lines[0] and all(i in lines[0] for i in ids)
    assert f"arrowdedup rollback {root} VERSION" in lines[0]
    with pytest.raises(StoreError, match="no current version"):
        open_store(root)

    listed = runner.invoke(app, ["versions", str(root), "--json"])
    assert listed.exit_code == 0
    assert [v["id"] for v in json.loads(listed.stdout)] == ids
    assert not any(v["current"] for v in json.loads(listed.stdout))

    refused = runner.invoke(app, ["rollback", str(root)])
    assert refused.exit_code == 1 and "no current version" in refused.stderr
    done = runner.invoke(app, ["rollback", str(root), ids[-1]])
    assert done.exit_code == 0, done.output
    assert open_store(root).run_id == ids[-1]
    assert verify_store(root).ok


def test_a_corrupt_manifest_of_another_version_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "s"
    ingest_to_store(corpus_of({0: 0, 1: 0}), root, buckets=1, quiet=True)
    update_store(root, corpus_of({0: 0, 1: 0, 2: 0}))
    old, new = [v.id for v in list_versions(root)]
    (root / "versions" / old / "manifest.json").write_text("{ not json")
    cli = runner.invoke(app, ["versions", str(root), "--json"])
    assert cli.exit_code == 0, cli.output
    assert [v["id"] for v in json.loads(cli.stdout)] == [new]
    assert f"skipped version {old}" in cli.stderr
    assert verify_store(root).ok
    refused = runner.invoke(app, ["rollback", str(root), old])
    assert refused.exit_code == 1 and "damaged" in refused.stderr
    assert open_store(root).run_id == new  # the pointer did not move


def test_a_manifest_without_the_new_fields_is_read_as_before(stores: dict[str, Path],
                                                             tmp_path: Path) -> None:
    # A store written before block checksums: no block_checksum, bytes, blocks or
    # manifest_checksum. It is read without read-time checks, and verify still passes.
    root = _fresh(stores["layered"], tmp_path / "old")
    expected = _search_vector(root)
    mpath = open_store(root).version / "manifest.json"
    manifest = json.loads(mpath.read_text())
    for key in ("block_checksum", "manifest_checksum"):
        manifest.pop(key)
    for entry in manifest["files"].values():
        entry.pop("bytes"), entry.pop("blocks")
    mpath.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    forget_checked()
    _VIEWS.clear()
    store = open_store(root)
    assert store.guard(store.version / "documents.parquet") is None
    assert store.segments().collect().height == store.manifest["counts"]["segments_kept"]
    assert _search_vector(root).equals(expected)
    assert verify_store(root).ok
