"""`verify_store` / `arrowdedup verify`: a sound store passes, every kind of damage is reported."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from typer.testing import CliRunner

from arrowdedup import DedupConfig, IngestionConfig, StoreError, ingest, verify_store, write_store
from arrowdedup.cli import app
from arrowdedup.store import bucket_of, open_store
from arrowdedup.store.integrity import manifest_text
from arrowdedup.store.writer import index_file_entry
from tests.helpers import segments_frame, unit

runner = CliRunner()


def _table() -> pl.DataFrame:
    rng = np.random.default_rng(7)
    base = [unit(rng.normal(size=16)) for _ in range(4)]
    texts, embs, docs = [], [], []
    for d in range(3):
        for i in range(8):
            texts.append(f"doc {d} segment {i % 5}")  # i and i + 5 are exact copies
            embs.append(unit(base[i % 4] + rng.normal(scale=0.02, size=16)))
            docs.append(f"doc-{d}")
    return segments_frame(texts, embs, doc_id=docs, salience=[0.5] * len(texts))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    write_store(ingest(_table()), root, buckets=4, embedding_model="test-model")
    return root


def _manifest_path(root: Path) -> Path:
    return open_store(root).version / "manifest.json"


def _save(mpath: Path, manifest: dict) -> None:
    """Write an edited manifest with a fresh manifest_checksum, as if a writer had written
    it, so only the checks a test aims at can see the edit."""
    mpath.write_text(manifest_text(manifest))


def _rewrite(root: Path, rel: str, table: pa.Table) -> None:
    """Replace a data file and update the manifest, so only the content checks can see it."""
    version = open_store(root).version
    pq.write_table(table, version / rel)
    mpath = version / "manifest.json"
    manifest = json.loads(mpath.read_text())
    entry = index_file_entry(version / rel)
    assert entry["xxh3_128"] == xxhash.xxh3_128_hexdigest((version / rel).read_bytes())
    manifest["files"][rel] = {"rows": table.num_rows, **entry}
    _save(mpath, manifest)


def _decision_file(root: Path) -> str:
    version = open_store(root).version
    return "decisions/" + sorted((version / "decisions").glob("*.parquet"))[0].name


def _checks(report: object) -> set[str]:
    return {p.check for p in report.problems}  # type: ignore[attr-defined]


def test_sound_store_passes(store: Path) -> None:
    report = verify_store(store)
    assert report.ok, [str(p) for p in report.problems]
    assert report.checked["decisions"] == 24
    assert report.checked["representatives"] > 0
    assert report.checked["kept pairs"] > 0
    result = runner.invoke(app, ["verify", str(store)])
    assert result.exit_code == 0, result.output
    assert "OK" in result.output


def test_changed_bytes_fail_the_checksum(store: Path) -> None:
    version = open_store(store).version
    path = sorted((version / "segments").glob("*.parquet"))[0]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    report = verify_store(store)
    assert not report.ok
    assert any(p.check == "files" and "xxh3_128" in p.message for p in report.problems)
    result = runner.invoke(app, ["verify", str(store)])
    assert result.exit_code == 1
    assert "xxh3_128" in result.output and "Traceback" not in result.output


def test_missing_and_foreign_files(store: Path) -> None:
    version = open_store(store).version
    victim = sorted((version / "decisions").glob("*.parquet"))[0]
    victim.unlink()
    (version / "segments" / "part-09999.parquet").write_bytes(b"PAR1junk")
    report = verify_store(store)
    messages = " ".join(str(p) for p in report.problems)
    assert "missing" in messages and victim.name in messages
    assert "part-09999.parquet" in messages and "not listed" in messages


def test_bm25_index_files_are_checksummed(store: Path) -> None:
    version = open_store(store).version
    files = json.loads((version / "manifest.json").read_text())["files"]
    index = sorted(rel for rel in files if rel.startswith("bm25/"))
    assert index and all(files[rel]["rows"] is None for rel in index)
    assert verify_store(store).ok
    vocab = version / "bm25" / "vocab.index.json"
    vocab.write_text(vocab.read_text().replace('"', "'", 1))
    (version / "bm25" / "stray.bin").write_bytes(b"x")
    messages = " ".join(str(p) for p in verify_store(store).problems)
    assert "bm25/vocab.index.json" in messages and "xxh3_128" in messages
    assert "bm25/stray.bin" in messages and "not listed" in messages


def test_bm25_files_are_identical_across_runs(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        write_store(ingest(_table()), root, buckets=4, embedding_model="test-model")
    fa = json.loads(_manifest_path(a).read_text())["files"]
    fb = json.loads(_manifest_path(b).read_text())["files"]
    assert fa == fb  # every data and index file, byte for byte


def test_row_count_mismatch(store: Path) -> None:
    mpath = _manifest_path(store)
    manifest = json.loads(mpath.read_text())
    rel = sorted(k for k in manifest["files"] if k.startswith("segments/"))[0]
    manifest["files"][rel]["rows"] += 1
    manifest["counts"]["segments_kept"] += 5
    _save(mpath, manifest)
    report = verify_store(store)
    assert any("rows, the manifest says" in p.message for p in report.problems)


def test_count_mismatch_in_manifest(store: Path) -> None:
    mpath = _manifest_path(store)
    manifest = json.loads(mpath.read_text())
    manifest["counts"]["segments_in"] += 3
    _save(mpath, manifest)
    report = verify_store(store)
    assert _checks(report) == {"counts"}
    assert "segments_in" in report.problems[0].where


def test_representative_that_is_not_kept(store: Path) -> None:
    rel = _decision_file(store)
    frame = pl.read_parquet(open_store(store).version / rel)
    assert (frame.get_column("representative_id").is_not_null()).any()
    broken = frame.with_columns(
        pl.when(pl.col("representative_id").is_not_null()).then(pl.lit("no-such-id"))
        .otherwise(pl.col("representative_id")).alias("representative_id")
    )
    _rewrite(store, rel, broken.to_arrow())
    report = verify_store(store)
    assert any("lost its concept" in p.message for p in report.problems)
    assert any(p.check == "counts" for p in report.problems)  # duplicate tallies disagree too
    assert runner.invoke(app, ["verify", str(store)]).exit_code == 1


def test_decision_across_documents(store: Path) -> None:
    rel = _decision_file(store)
    frame = pl.read_parquet(open_store(store).version / rel)
    own = int(rel.split("-")[1].split(".")[0])
    names = pa.array([f"intruder-{i}" for i in range(20)])
    intruder = names[int(np.flatnonzero(bucket_of(names, 4) != own)[0])].as_py()
    broken = frame.with_columns(
        pl.when(pl.col("representative_id").is_not_null()).then(pl.lit(intruder))
        .otherwise(pl.col("doc_id")).alias("doc_id")
    )
    _rewrite(store, rel, broken.to_arrow())
    report = verify_store(store)
    assert any("crossed a document boundary" in p.message for p in report.problems)
    # The renamed document no longer hashes to its bucket file.
    assert "buckets" in _checks(report)


def test_kept_near_duplicates_are_reported(tmp_path: Path) -> None:
    # Written with dedup off, then the manifest claims a run at 0.9: the near copies kept
    # side by side must be found.
    root = tmp_path / "store"
    cfg = DedupConfig(ingestion=IngestionConfig(enabled=False))
    write_store(ingest(_table(), cfg), root)
    assert verify_store(root).ok
    mpath = _manifest_path(root)
    manifest = json.loads(mpath.read_text())
    manifest["config"]["Deduplication"]["Ingestion"]["Enabled"] = True
    _save(mpath, manifest)
    report = verify_store(root)
    assert _checks(report) == {"kept-pairs"}
    assert all(">= Ingestion.SimilarityThreshold 0.9" in p.message for p in report.problems)


def test_damaged_manifest_is_a_problem_not_a_crash(store: Path) -> None:
    _manifest_path(store).write_text("{ not json")
    report = verify_store(store)
    assert not report.ok and _checks(report) == {"manifest"}
    result = runner.invoke(app, ["verify", str(store)])
    assert result.exit_code == 1 and "Traceback" not in result.output


def test_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store at"):
        verify_store(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreError, match="not an arrowdedup store"):
        verify_store(tmp_path / "empty")
    result = runner.invoke(app, ["verify", str(tmp_path / "nothing")])
    assert result.exit_code == 1 and "error: no store at" in result.output


def test_json_report(store: Path) -> None:
    result = runner.invoke(app, ["verify", "--json", str(store)])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["ok"] is True and data["problems"] == [] and data["checked"]["segments"] > 0


def test_store_without_embeddings(tmp_path: Path) -> None:
    frame = segments_frame(["a", "b", "a", "c"], doc_id=["x", "x", "x", "y"])
    write_store(ingest(frame), tmp_path / "s")
    report = verify_store(tmp_path / "s")
    assert report.ok, [str(p) for p in report.problems]
    assert report.checked["representatives"] == 1
