"""SPEC §1: loose types accepted, each refusal names the column, the rows and the fix."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from arrowdedup import SchemaError, ingest
from arrowdedup.schema import embeddings_from
from tests.helpers import segments_frame

E = np.array([1, 0, 0, 0], dtype=np.float32)


def base() -> pl.DataFrame:
    return segments_frame(["a", "b", "c"], [E, E, None], salience=[0.5, 0.4, 0.3])


def refuse(frame: pl.DataFrame, *needles: str) -> str:
    with pytest.raises(SchemaError) as info:
        ingest(frame)
    message = str(info.value)
    for needle in needles:
        assert needle in message, message
    return message


def test_missing_required_column() -> None:
    refuse(base().drop("position"), "'position'", "add")


def test_null_ids() -> None:
    f = base().with_columns(pl.Series("doc_id", ["d", None, "d"]))
    refuse(f, "'doc_id'", "rows 1", "fill or drop")
    f = base().with_columns(pl.Series("segment_id", ["x", "y", None]))
    refuse(f, "'segment_id'", "rows 2")


def test_duplicate_segment_id() -> None:
    f = base().with_columns(pl.Series("segment_id", ["x", "y", "x"]))
    refuse(f, "'segment_id'", "duplicate", "rows 0, 2", "unique")


def test_mixed_dimensions() -> None:
    f = base().with_columns(pl.Series("embedding", [[1.0, 0.0], [1.0, 0.0, 0.0], None],
                                      dtype=pl.List(pl.Float32)))
    refuse(f, "'embedding'", "mixed dimensions", "rows 1")


def test_zero_dimension() -> None:
    f = base().with_columns(pl.Series("embedding", [[], [], None], dtype=pl.List(pl.Float32)))
    refuse(f, "'embedding'", "dimension 0", "rows 0, 1")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_embeddings(bad: float) -> None:
    v = [1.0, 0.0, bad, 0.0]
    f = base().with_columns(pl.Series("embedding", [[1.0, 0, 0, 0], v, None],
                                      dtype=pl.List(pl.Float64)))
    refuse(f, "'embedding'", "NaN or infinite", "rows 1")
    fixed = f.with_columns(pl.col("embedding").cast(pl.Array(pl.Float64, 4)))
    refuse(fixed, "rows 1")


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_salience_out_of_range(bad: float) -> None:
    f = base().with_columns(pl.Series("salience", [0.5, bad, 0.2], dtype=pl.Float64))
    refuse(f, "'salience'", "[0, 1]", "rows 1")


def test_unusable_types() -> None:
    refuse(base().with_columns(pl.col("position").cast(pl.Float64)), "'position'", "integer")
    refuse(base().with_columns(pl.Series("text", [b"a", b"b", b"c"])), "'text'", "string")
    refuse(base().with_columns(pl.Series("embedding", [["a"], ["b"], None])), "'embedding'")
    refuse(base().with_columns(pl.Series("salience", ["high", "low", "mid"])), "'salience'")


def test_loose_types_accepted() -> None:
    f = base().with_columns(
        pl.col("position").cast(pl.Int64), pl.col("salience").cast(pl.Float64),
        pl.col("embedding").cast(pl.List(pl.Float64)), pl.col("segment_type").cast(pl.Categorical),
    )
    r = ingest(f)
    assert r.kept.schema["position"] == pl.Int64
    assert r.kept.schema["salience"] == pl.Float64
    assert r.kept.schema["embedding"] == pl.List(pl.Float64)
    assert r.kept.schema["segment_type"] == pl.Categorical


def test_max_segments_per_document() -> None:
    from arrowdedup import DedupConfig, IngestionConfig
    cfg = DedupConfig(ingestion=IngestionConfig(max_segments_per_document=2))
    with pytest.raises(SchemaError, match="MaxSegmentsPerDocument"):
        ingest(base(), cfg)


def test_embeddings_matrix_and_masks() -> None:
    f = base().with_columns(pl.Series("embedding", [[3.0, 4.0], [0.0, 0.0], None],
                                      dtype=pl.List(pl.Float64)))
    emb = embeddings_from(f)
    assert emb is not None and emb.dim == 2
    assert emb.matrix.dtype == np.float32
    assert emb.present.tolist() == [True, True, False]
    assert emb.usable.tolist() == [True, False, False]
    np.testing.assert_array_equal(emb.matrix[2], [0.0, 0.0])
