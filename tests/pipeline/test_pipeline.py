"""Whole corpora: bucket-by-bucket ingest from files, streaming, engines (local, Ray)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import xxhash
from typer.testing import CliRunner

from arrowdedup import SchemaError, ingest, open_store, write_store
from arrowdedup.errors import MissingDependencyError
from arrowdedup.pipeline.run import ingest_to_store
from tests.helpers.pipeline import corpus


def data_files(root: Path) -> dict[str, str]:
    version = (root / "current").resolve()
    return {str(p.relative_to(version)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(version.rglob("*")) if p.is_file() and p.name != "manifest.json"}


def decisions(root: Path) -> pl.DataFrame:
    return open_store(root).decisions().collect().sort("segment_id")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("in")
    frame = corpus()
    table = frame.to_arrow()
    paths = {"ipc": d / "a.arrow", "parquet": d / "a.parquet"}
    feather.write_feather(table, paths["ipc"], compression="uncompressed")
    pq.write_table(table, paths["parquet"], row_group_size=100)
    half = frame.height // 2
    paths["part1"], paths["part2"] = d / "p1.parquet", d / "p2.parquet"
    pq.write_table(table.slice(0, half), paths["part1"])
    pq.write_table(table.slice(half), paths["part2"])
    return paths


def test_same_decisions_as_whole_ingest_for_any_bucket_count(inputs, tmp_path):
    whole = ingest(corpus()).decisions.sort("segment_id")
    for buckets in (1, 3, 16):
        result = ingest_to_store([inputs["ipc"]], tmp_path / f"s{buckets}",
                                           buckets=buckets)
        got = decisions(tmp_path / f"s{buckets}")
        assert got.select("segment_id", "action", "representative_id").equals(
            whole.select("segment_id", "action", "representative_id"))
        assert result.original_count == whole.height
        assert result.final_count == int((whole["action"] == "kept").sum())
        assert open_store(tmp_path / f"s{buckets}").manifest["buckets"] == buckets
    assert (whole["action"] == "merged_near").sum() > 100


def test_parquet_streaming_equals_ipc_and_write_store(inputs, tmp_path):
    ingest_to_store([inputs["ipc"]], tmp_path / "ipc", buckets=4)
    ingest_to_store([inputs["parquet"]], tmp_path / "pq", buckets=4)
    # memory_budget=0: the partitioning pass to disk (what a corpus larger than memory takes).
    ingest_to_store([inputs["parquet"]], tmp_path / "pq0", buckets=4, memory_budget=0)
    ingest_to_store([inputs["part1"], inputs["part2"]], tmp_path / "parts", buckets=4,
                           memory_budget=0)
    write_store(ingest(corpus()), tmp_path / "whole", buckets=4)
    ref = data_files(tmp_path / "ipc")
    assert ref == data_files(tmp_path / "pq") == data_files(tmp_path / "pq0") \
        == data_files(tmp_path / "parts")
    whole = data_files(tmp_path / "whole")
    # The whole-result writer stores the same bucket files (documents.parquet keeps the
    # input order of documents there, bucket order here); it has no input rows, so it writes
    # no document fingerprints (its stores take no --update).
    assert {k: v for k, v in whole.items() if k != "documents.parquet"} == \
        {k: v for k, v in ref.items()
         if k != "documents.parquet" and not k.startswith("fingerprints/")}
    assert not any(p.name.startswith(".partition") for p in (tmp_path / "pq0").iterdir())


def test_byte_identical_across_runs_and_threads(inputs, tmp_path):
    ingest_to_store([inputs["parquet"]], tmp_path / "a", buckets=5, threads=1,
                           memory_budget=0)
    ingest_to_store([inputs["parquet"]], tmp_path / "b", buckets=5, threads=2)
    assert data_files(tmp_path / "a") == data_files(tmp_path / "b")


def test_vectors_align_with_segments_and_checksums(inputs, tmp_path):
    ingest_to_store([inputs["parquet"]], tmp_path / "s", buckets=3)
    store = open_store(tmp_path / "s")
    segs = store.segments().collect()
    vectors = store.vectors()
    assert vectors is not None and vectors.shape == (segs.height, 16)
    emb = segs["embedding"].to_numpy().astype(np.float32)
    np.testing.assert_allclose(vectors, emb / np.linalg.norm(emb, axis=1, keepdims=True),
                               atol=1e-6)
    for rel, entry in store.manifest["files"].items():
        data = (store.version / rel).read_bytes()
        assert store.manifest["checksum"] == "xxh3_128"
        assert xxhash.xxh3_128_hexdigest(data) == entry["xxh3_128"], rel
    from arrowdedup import verify_store

    assert verify_store(tmp_path / "s").ok


def test_duplicate_segment_id_across_buckets_is_refused(tmp_path):
    frame = corpus(docs=6)
    frame = frame.with_columns(
        pl.when(pl.col("segment_id") == "doc-5:s200").then(pl.lit("doc-0:s0"))
        .otherwise(pl.col("segment_id")).alias("segment_id"))
    path = tmp_path / "dup.parquet"
    frame.write_parquet(path)
    with pytest.raises(SchemaError, match="segment_id"):
        ingest_to_store([path], tmp_path / "s", buckets=8)
    assert not (tmp_path / "s" / "current").exists()


def test_empty_input_writes_an_empty_store(tmp_path):
    path = tmp_path / "empty.parquet"
    corpus(docs=1).head(0).write_parquet(path)
    result = ingest_to_store([path], tmp_path / "s", buckets=4)
    assert result.original_count == 0
    assert open_store(tmp_path / "s").segments().collect().height == 0


def test_ray_missing_is_a_clear_error(inputs, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"arrowdedup\[ray\]"):
        ingest_to_store([inputs["ipc"]], tmp_path / "s", engine="ray")


def test_cli_mode_and_engine_options(inputs, tmp_path):
    from arrowdedup.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(inputs["parquet"]), "--out", str(tmp_path / "s"),
                              "--mode", "lsh", "--buckets", "3", "-q"])
    assert res.exit_code == 0, res.output
    assert open_store(tmp_path / "s").config.ingestion.mode.value == "Lsh"
    bad = runner.invoke(app, ["ingest", str(inputs["parquet"]), "--out", str(tmp_path / "t"),
                              "--engine", "spark"])
    assert bad.exit_code == 1 and "engine" in bad.output


def test_ray_engine_is_byte_identical_to_local(inputs, tmp_path):
    ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
    ingest_to_store([inputs["parquet"]], tmp_path / "local", buckets=6)
    # Two documents in different buckets sharing a segment id: the commit's global check
    # refuses the run after the tasks wrote their buckets into the staging directory.
    bad = corpus()
    first_id = bad.get_column("segment_id")[0]
    bad = bad.with_columns(pl.when(pl.int_range(pl.len()) == pl.len() - 1)
                           .then(pl.lit(first_id)).otherwise(pl.col("segment_id"))
                           .alias("segment_id"))
    bad_path = tmp_path / "bad.arrow"
    feather.write_feather(bad.to_arrow(), bad_path, compression="uncompressed")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ingest_to_store([inputs["parquet"]], tmp_path / "ray", buckets=6, engine="ray")
        before = data_files(tmp_path / "ray")
        with pytest.raises(SchemaError, match="duplicate values across documents"):
            ingest_to_store([bad_path], tmp_path / "ray", buckets=6, engine="ray", replace=True)
        # A refusal raised inside a task comes out as itself, as from the local engine, not
        # as Ray's wrapper (whose text starts with the worker's colored traceback).
        emb = bad.get_column("embedding").to_list()
        emb[7] = [float("nan")] * len(emb[7])
        nan_path = tmp_path / "nan.arrow"
        feather.write_feather(bad.with_columns(pl.Series("embedding", emb, dtype=bad.schema[
            "embedding"])).to_arrow(), nan_path, compression="uncompressed")
        with pytest.raises(SchemaError) as info:
            ingest_to_store([nan_path], tmp_path / "ray", buckets=6, engine="ray", replace=True)
        assert type(info.value) is SchemaError
        assert str(info.value).startswith("column 'embedding': NaN") and "(rows 7)" in str(
            info.value)
    finally:
        ray.shutdown()
    assert data_files(tmp_path / "local") == before
    # The failed run left the store as it was, its staged bucket files removed with it.
    assert data_files(tmp_path / "ray") == before
    assert not list((tmp_path / "ray" / "versions").glob(".tmp-*"))
    assert open_store(tmp_path / "ray").manifest["engine"] == "ray"
    assert pa is not None
