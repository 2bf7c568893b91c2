"""Determinism across engines and bucket counts (SPEC §5, issue 8): every engine of
:class:`arrowdedup.pipeline.engines.Engine` writes the same data files as the local engine for
one bucket count, in the exact and the LSH modes, and the decisions are those of an in-process
``ingest`` (so the guarantees proven on it carry over) whatever the bucket count. Ray runs as a
small local cluster (2 CPUs) shared by the module. A new engine is tested here by being a member
of :class:`Engine`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from arrowdedup import DedupConfig, IngestionConfig, LshMethod, Mode, ingest, open_store
from arrowdedup import verify_store as verify
from arrowdedup.pipeline.engines import Engine
from arrowdedup.pipeline.run import ingest_to_store

CONFIGS = {
    "exact": DedupConfig(),
    "lsh-hyperplane": DedupConfig(ingestion=IngestionConfig(
        mode=Mode.LSH, lsh_min_segments=8, lsh_method=LshMethod.HYPERPLANE)),
    "lsh-minhash": DedupConfig(ingestion=IngestionConfig(
        mode=Mode.LSH, lsh_min_segments=8, lsh_method=LshMethod.MINHASH)),
}


def _table(n_docs: int = 40) -> pl.DataFrame:
    rng = np.random.default_rng(21)
    bases = rng.normal(size=(5, 32))
    rows = []
    for d in range(n_docs):
        size = int(rng.integers(1, 25))
        for i in range(size):
            rows.append((f"doc-{d:03d}", f"doc-{d:03d}#{i}", f"words {int(rng.integers(0, 8))}",
                         ["paragraph", "heading"][int(rng.integers(0, 2))], i,
                         ["en", "fr"][int(rng.integers(0, 2))]))
    frame = pl.DataFrame(rows, schema={"doc_id": pl.String, "segment_id": pl.String,
                                       "text": pl.String, "segment_type": pl.String,
                                       "position": pl.Int32, "language": pl.String},
                         orient="row")
    n = frame.height
    vectors = bases[rng.integers(0, 5, n)] + rng.normal(scale=0.08, size=(n, 32))
    return frame.with_columns(
        pl.Series("embedding", vectors.astype(np.float32)),
        pl.Series("salience", rng.choice([0.0, 0.02, 0.5, 0.8, 1.0], n), dtype=pl.Float32),
    )


def _digest(root: Path) -> dict[str, str]:
    version = open_store(root).version
    return {str(p.relative_to(version)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(version.rglob("*"))
            if p.is_file() and p.name != "manifest.json"}


@pytest.fixture(scope="module")
def table_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("engines") / "segments.parquet"
    _table().write_parquet(path)
    return path


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("name", list(CONFIGS))
def test_decisions_independent_of_bucket_count(name: str, table_path: Path,
                                               tmp_path: Path) -> None:
    cfg = CONFIGS[name]
    expected = ingest(pl.read_parquet(table_path), cfg).decisions.sort("segment_id")
    for buckets in (1, 7):
        root = tmp_path / f"b{buckets}"
        ingest_to_store([table_path], root, config=cfg, buckets=buckets)
        report = verify(root)
        assert report.ok, [str(p) for p in report.problems]
        got = open_store(root).decisions().collect().sort("segment_id")
        assert got.select(expected.columns).equals(expected), f"buckets={buckets}"


@pytest.mark.slow
@pytest.mark.parametrize("engine", [e for e in Engine if e is not Engine.LOCAL])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_engine_writes_the_local_engines_bytes(name: str, engine: Engine, table_path: Path,
                                                     tmp_path: Path, ray_session: None) -> None:
    cfg = CONFIGS[name]
    local, other = tmp_path / "local", tmp_path / engine.value
    ingest_to_store([table_path], local, config=cfg, buckets=4, threads=2)
    ingest_to_store([table_path], other, config=cfg, buckets=4, engine=engine)
    assert _digest(local) == _digest(other)
    assert verify(other).ok
    assert open_store(other).manifest["engine"] == engine.value
    expected = ingest(pl.read_parquet(table_path), cfg).decisions.sort("segment_id")
    got = open_store(other).decisions().collect().sort("segment_id")
    assert got.select(expected.columns).equals(expected)
