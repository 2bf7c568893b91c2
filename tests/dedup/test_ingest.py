"""Phase 1 behaviour: the worked examples of SPEC §2 and the rules around them."""

from __future__ import annotations

import logging
import math

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arrowdedup import DecayMode, DedupConfig, IngestionConfig, ingest
from arrowdedup.config import AnalyticsConfig
from tests.helpers import segments_frame, unit


def vec_at(cos: float, axis: int, d: int = 4) -> np.ndarray:
    """A unit vector with the given cosine to e0, the rest on another axis."""
    v = np.zeros(d, dtype=np.float64)
    v[0] = cos
    v[axis] = math.sqrt(1 - cos * cos)
    return v.astype(np.float32)


E0 = np.array([1, 0, 0, 0], dtype=np.float32)
ABC = ["Machine learning models require training data", "ML systems need data for training",
       "Training data is essential for ML"]


def abc_frame(salience: list[float] | None = None) -> pl.DataFrame:
    return segments_frame(ABC, [E0, vec_at(0.92, 1), vec_at(0.91, 2)],
                          salience=salience or [0.5, 0.4, 0.3])


def cfg(**ingestion: object) -> DedupConfig:
    return DedupConfig(ingestion=IngestionConfig(**ingestion))  # type: ignore[arg-type]


def actions(result: object) -> list[str]:
    return result.decisions.get_column("action").cast(pl.String).to_list()  # type: ignore[attr-defined]


def test_exact_pair_keeps_first_drops_second_without_boost() -> None:
    frame = segments_frame(["Same text", "Same text"], [E0, E0], salience=[0.5, 0.4])
    r = ingest(frame)
    assert actions(r) == ["kept", "dropped_exact"]
    assert r.decisions.get_column("representative_id").to_list() == [None, "s0"]
    assert r.kept.get_column("salience_boost").to_list() == [0.0]
    assert r.kept.get_column("exact_duplicate_count").to_list() == [1]
    assert r.kept.get_column("salience").to_list() == pytest.approx([0.5])


@pytest.mark.parametrize(("mode", "boost"),
                         [("Linear", 0.30), ("Logarithmic", 0.15 * math.log2(3))])
def test_abc_near_duplicates(mode: str, boost: float) -> None:
    r = ingest(abc_frame(), cfg(boost_decay_mode=mode))
    assert actions(r) == ["kept", "merged_near", "merged_near"]
    assert r.decisions.get_column("representative_id").to_list() == [None, "s0", "s0"]
    sims = r.decisions.get_column("similarity").to_list()
    assert sims[0] is None and sims[1] == pytest.approx(0.92, abs=1e-6)
    assert sims[2] == pytest.approx(0.91, abs=1e-6)
    kept = r.kept.row(0, named=True)
    assert kept["near_duplicate_count"] == 2
    assert kept["salience_boost"] == pytest.approx(boost)
    assert kept["salience"] == pytest.approx(0.5 * (1 + boost))
    assert kept["salience_original"] == pytest.approx(0.5)


@pytest.mark.parametrize(("mode", "boost"), [("Linear", 0.45), ("Logarithmic", 0.30)])
def test_three_near_duplicates(mode: str, boost: float) -> None:
    frame = segments_frame(["a", "b", "c", "d"],
                           [E0, vec_at(0.95, 1), vec_at(0.94, 2), vec_at(0.93, 3)],
                           salience=[0.4, 0.3, 0.2, 0.1])
    r = ingest(frame, cfg(boost_decay_mode=mode))
    assert r.kept.get_column("salience_boost").to_list() == pytest.approx([boost])
    assert r.kept.get_column("salience").to_list() == pytest.approx([0.4 * (1 + boost)])


def test_boost_is_capped_at_max_salience_boost_but_recorded_nominal() -> None:
    r = ingest(abc_frame([0.9, 0.8, 0.7]), cfg(max_salience_boost=0.95))
    kept = r.kept.row(0, named=True)
    assert kept["salience"] == pytest.approx(0.95)
    assert kept["salience_boost"] == pytest.approx(0.15 * math.log2(3))


def test_boost_disabled() -> None:
    r = ingest(abc_frame(), cfg(enable_salience_boost=False))
    assert actions(r) == ["kept", "merged_near", "merged_near"]
    assert r.kept.get_column("salience").to_list() == pytest.approx([0.5])
    assert r.kept.get_column("salience_boost").to_list() == [0.0]
    assert r.kept.get_column("near_duplicate_count").to_list() == [2]


def test_dedup_disabled_keeps_everything() -> None:
    frame = segments_frame(["x", "x", "y"], [E0, E0, E0], salience=[0.5, 0.01, 0.4])
    r = ingest(frame, cfg(enabled=False))
    assert actions(r) == ["kept", "kept", "kept"]
    assert r.kept.height == 3
    assert r.kept.get_column("salience").to_list() == pytest.approx([0.5, 0.01, 0.4])


def test_salience_zero_is_kept_low_salience_is_filtered() -> None:
    frame = segments_frame(["a", "b", "c"], [E0, vec_at(0.1, 1), vec_at(0.1, 2)],
                           salience=[0.0, 0.04, 0.05])
    r = ingest(frame)
    assert actions(r) == ["kept", "filtered_low_salience", "kept"]
    assert r.documents.row(0, named=True)["filtered_count"] == 1
    assert r.decisions.get_column("representative_id").to_list() == [None, None, None]


def test_filtered_segment_never_becomes_a_representative() -> None:
    frame = segments_frame(["a", "a"], [E0, E0], salience=[0.01, 0.5])
    assert actions(ingest(frame)) == ["filtered_low_salience", "kept"]


def test_null_and_zero_embeddings_are_kept() -> None:
    frame = segments_frame(["a", "b", "c"], [E0, None, np.zeros(4, np.float32)],
                           salience=[0.5, 0.4, 0.3])
    r = ingest(frame)
    assert actions(r) == ["kept", "kept", "kept"]


def test_exact_copy_without_embedding_dropped_by_hash() -> None:
    frame = segments_frame(["footer text", "footer text", "other"], [None, None, None],
                           salience=[0.5, 0.4, 0.3])
    assert actions(ingest(frame)) == ["kept", "dropped_exact", "kept"]
    no_embedding_column = frame.drop("embedding")
    assert actions(ingest(no_embedding_column)) == ["kept", "dropped_exact", "kept"]


def test_given_content_hash_column_is_the_exact_key() -> None:
    frame = segments_frame(["one", "two"], [None, None], salience=[0.5, 0.4],
                           content_hash=["h1", "h1"])
    assert actions(ingest(frame)) == ["kept", "dropped_exact"]


def test_segment_types_and_languages_are_never_compared() -> None:
    frame = segments_frame(["t", "t", "t", "t"], [E0, E0, E0, E0],
                           segment_type=["heading", "paragraph", "heading", "heading"],
                           salience=[0.5, 0.5, 0.5, 0.5], language=["en", "en", "de", "en"])
    r = ingest(frame)
    assert actions(r) == ["kept", "kept", "kept", "dropped_exact"]
    assert r.decisions.get_column("representative_id").to_list()[3] == "s0"


def test_documents_are_never_compared() -> None:
    frame = segments_frame(["t", "t"], [E0, E0], doc_id=["a", "b"], salience=[0.5, 0.5])
    assert actions(ingest(frame)) == ["kept", "kept"]


def test_highest_salience_is_the_representative_ties_by_position() -> None:
    frame = segments_frame(["a", "b", "c"], [vec_at(0.99, 1), E0, vec_at(0.98, 2)],
                           salience=[0.3, 0.9, 0.3])
    r = ingest(frame)
    assert actions(r) == ["merged_near", "kept", "merged_near"]
    assert r.decisions.get_column("representative_id").to_list() == ["s1", None, "s1"]


def test_every_removed_segment_has_a_kept_representative_of_its_group() -> None:
    rng = np.random.default_rng(7)
    base = rng.standard_normal((6, 16))
    n = 300
    vectors = base[rng.integers(0, 6, n)] + 0.1 * rng.standard_normal((n, 16))
    frame = segments_frame(
        [f"t{int(i)}" for i in rng.integers(0, 100, n)], [unit(v) for v in vectors],
        doc_id=[f"d{int(i)}" for i in rng.integers(0, 4, n)],
        segment_type=[["paragraph", "heading"][int(i)] for i in rng.integers(0, 2, n)],
        salience=rng.uniform(0, 1, n).round(2).tolist(),
    )
    r = ingest(frame)
    dec = r.decisions.join(frame.select("segment_id", "doc_id", "segment_type"), on=["segment_id",
                                                                                  "doc_id"])
    removed = dec.filter(pl.col("action").is_in(["merged_near", "dropped_exact"]))
    assert removed.height > 0
    reps = removed.join(dec.select(pl.col("segment_id").alias("representative_id"),
                                   pl.col("doc_id").alias("rep_doc"),
                                   pl.col("segment_type").alias("rep_type"),
                                   pl.col("action").alias("rep_action")), on="representative_id")
    assert reps.height == removed.height
    assert (reps["rep_action"].cast(pl.String) == "kept").all()
    assert (reps["rep_doc"] == reps["doc_id"]).all()
    assert (reps["rep_type"] == reps["segment_type"]).all()
    near = reps.filter(pl.col("action") == "merged_near")
    assert (near["similarity"] >= 0.9).all()


def test_content_is_immutable_and_types_are_not_rewritten() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((5, 6))
    vectors[1] = vectors[0] + 1e-3
    frame = pl.DataFrame({
        "doc_id": ["d"] * 5,
        "segment_id": [f"s{i}" for i in range(5)],
        "text": ["α", "b", "c", "d", "e"],
        "segment_type": ["paragraph"] * 5,
        "position": pl.Series(range(5), dtype=pl.Int64),
        "salience": pl.Series([0.9, 0.8, 0.7, 0.6, 0.5], dtype=pl.Float64),
        "embedding": pl.Series(vectors.tolist(), dtype=pl.List(pl.Float64)),
        "extra": [{"k": 1}, None, {"k": 3}, {"k": 4}, {"k": 5}],
    })
    r = ingest(frame)
    assert r.kept.height == 4
    for col in frame.columns:
        assert r.kept.schema[col] == frame.schema[col], col
    kept_ids = r.kept.get_column("segment_id").to_list()
    original = frame.filter(pl.col("segment_id").is_in(kept_ids))
    for col in frame.columns:
        if col != "salience":
            assert r.kept.get_column(col).equals(original.get_column(col)), col
    # bit for bit, not just equal as numbers (-0.0 == 0.0 would hide a rewrite)
    got = r.kept.get_column("embedding").explode().to_numpy().view(np.uint64)
    want = original.get_column("embedding").explode().to_numpy().view(np.uint64)
    np.testing.assert_array_equal(got, want)


def test_kept_are_in_input_order_and_decisions_one_per_input_row() -> None:
    frame = segments_frame(["c", "a", "b", "a"], [vec_at(0.1, 1), E0, vec_at(0.2, 2), E0],
                           salience=[0.1, 0.9, 0.5, 0.95])
    r = ingest(frame)
    assert r.decisions.get_column("segment_id").to_list() == ["s0", "s1", "s2", "s3"]
    assert r.kept.get_column("segment_id").to_list() == ["s0", "s2", "s3"]


def test_accepts_frames_tables_and_files(tmp_path: object) -> None:
    frame = abc_frame()
    path = tmp_path / "seg.parquet"  # type: ignore[operator]
    frame.write_parquet(path)
    ipc_path = tmp_path / "seg.arrow"  # type: ignore[operator]
    frame.write_ipc(ipc_path)
    expected = actions(ingest(frame))
    for source in (frame.lazy(), frame.to_arrow(), path, str(path), [path], ipc_path):
        assert actions(ingest(source)) == expected
    two = ingest([path, ipc_path.with_name("b.parquet")] if False else [path])
    assert two.original_count == 3
    table = pq.read_table(path)
    assert isinstance(table, pa.Table)


def test_documents_and_summary() -> None:
    frame = pl.concat([
        abc_frame(),
        segments_frame(["x", "x"], [None, None], doc_id="other", salience=[0.5, 0.4],
                       doc_type=["markdown", "markdown"]).with_columns(
            pl.Series("segment_id", ["o0", "o1"])),
    ], how="diagonal")
    r = ingest(frame)
    docs = {row["doc_id"]: row for row in r.documents.iter_rows(named=True)}
    assert docs["doc"] == {
        "doc_id": "doc", "doc_type": None, "original_count": 3, "final_count": 1,
        "exact_count": 0, "near_count": 2, "filtered_count": 0, "dedup_ratio": pytest.approx(2 / 3),
        "avg_salience_boost": pytest.approx(0.15 * math.log2(3)),
        "max_salience_boost": pytest.approx(0.15 * math.log2(3)),
    }
    assert docs["other"]["doc_type"] == "markdown" and docs["other"]["exact_count"] == 1
    assert "Deduplication: 5 → 2 segments" in r.summary()
    assert set(r.timings) >= {"validate", "hash", "plan", "kernel", "output"}


def test_empty_table_is_valid() -> None:
    frame = segments_frame(["a"], [E0], salience=[0.5]).clear()
    r = ingest(frame)
    assert r.kept.height == 0 and r.decisions.height == 0 and r.documents.height == 0


def test_default_salience_when_absent() -> None:
    frame = segments_frame(["Overview of the system and what it does for its users",
                            "short", "Overview of the system and what it does for its users"],
                           [E0, vec_at(0.2, 1), E0])
    r = ingest(frame)
    assert "salience" in r.kept.columns
    assert actions(r) == ["kept", "kept", "dropped_exact"]
    assert r.kept.get_column("salience").max() == pytest.approx(1.0)


# ------------------------------------------------------------------ every key changes behaviour


def test_similarity_threshold_key() -> None:
    assert actions(ingest(abc_frame(), cfg(similarity_threshold=0.915))) == \
        ["kept", "merged_near", "kept"]


def test_salience_threshold_key() -> None:
    frame = segments_frame(["a", "b"], [E0, vec_at(0.1, 1)], salience=[0.5, 0.2])
    assert actions(ingest(frame, cfg(salience_threshold=0.3))) == ["kept", "filtered_low_salience"]


def test_boost_per_near_duplicate_and_log_base_keys() -> None:
    r = ingest(abc_frame(), cfg(boost_per_near_duplicate=0.1, log_base=3.0))
    assert r.kept.get_column("salience_boost").to_list() == pytest.approx([0.1])  # log3(3) = 1


def test_decay_mode_key_default_is_logarithmic() -> None:
    assert DedupConfig().ingestion.boost_decay_mode is DecayMode.LOGARITHMIC


def test_enable_logging_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="arrowdedup"):
        ingest(abc_frame())
    assert any("Deduplication: 3 → 1 segments" in m for m in caplog.messages)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="arrowdedup"):
        ingest(abc_frame(), DedupConfig(analytics=AnalyticsConfig(enable_logging=False)))
    assert not caplog.messages


def test_kept_rows_parallel_gather_equals_filter() -> None:
    # Large enough for the parallel embedding gather; the frame must equal Polars' filter.
    import importlib

    from arrowdedup.arrays.vectors import embeddings_from

    ingest_mod = importlib.import_module("arrowdedup.dedup.ingest")
    rng = np.random.default_rng(3)
    n, d = 3000, 384
    frame = pl.DataFrame({
        "segment_id": [f"s{i}" for i in range(n)],
        "embedding": rng.standard_normal((n, d), dtype=np.float32),
        "text": [f"t{i}" for i in range(n)],
    }).with_columns(pl.col("embedding").cast(pl.Array(pl.Float32, d)))
    for mask in (rng.random(n) < 0.5, np.ones(n, dtype=bool)):  # every row kept: no copy
        got = ingest_mod.kept_rows(frame, mask, embeddings_from(frame))
        want = frame.filter(pl.Series(mask))
        assert got.schema == want.schema
        assert got.equals(want)


def test_kept_frame_of_a_chunked_input_equals_the_single_chunk_one() -> None:
    # A file read by Arrow comes in chunks; the kept frame is assembled column by column (a
    # projection of mixed chunking would rechunk the embeddings): same rows, same bits.
    rng = np.random.default_rng(3)
    n, d = 3000, 384  # above the size where the parallel row gather takes over
    base = rng.standard_normal((n // 2, d)).astype(np.float32)
    vecs = np.concatenate([base, base + 0.01 * rng.standard_normal(base.shape, np.float32)])
    def word(i: int) -> str:  # letters, not digits: the fact guard lets the copies merge
        return "".join(chr(97 + int(c)) for c in np.base_repr(i % (n // 2), 10))

    texts = [f"about {word(i)}" + (" again" if i >= n // 2 else "") for i in range(n)]
    frame = segments_frame(texts, list(vecs),
                           doc_id=[f"d{i % (n // 2) % 7}" for i in range(n)])
    chunked = pl.from_arrow(pa.Table.from_batches(frame.to_arrow().to_batches(max_chunksize=400)),
                            rechunk=False)
    assert isinstance(chunked, pl.DataFrame) and chunked.get_column("text").n_chunks() > 1
    one, many = ingest(frame), ingest(chunked)
    assert 0 < one.final_count < n
    assert one.kept.equals(many.kept) and one.decisions.equals(many.decisions)
    assert many.kept.columns == one.kept.columns


@pytest.mark.parametrize("decay", ["Logarithmic", "Linear"])
def test_boost_fraction_looks_up_the_formula_of_each_count(decay: str) -> None:
    """SPEC §2.6 per row: 0 without near duplicates, else the decay formula of the count."""
    from arrowdedup.config import resolve_config
    from arrowdedup.dedup.ingest import boost_fraction

    cfg = resolve_config({"Ingestion": {"BoostDecayMode": decay, "BoostPerNearDuplicate": 0.2,
                                        "LogBase": 3}})
    counts = np.array([0, 3, 1, 0, 7, 3], dtype=np.int64)
    c = counts.astype(np.float64)
    formula = 0.2 * c if decay == "Linear" else 0.2 * np.log1p(c) / np.log(3)
    np.testing.assert_allclose(boost_fraction(counts, cfg), np.where(c > 0, formula, 0.0),
                               rtol=0, atol=1e-15)
    assert boost_fraction(np.empty(0, np.int64), cfg).shape == (0,)


def test_centrality_does_not_depend_on_its_row_chunks(monkeypatch) -> None:
    """The salience centrality is computed in row chunks (memory); any chunk size gives the
    same bits: rows are summed in order and each row's cosine is its own."""
    import numpy as np

    from arrowdedup.arrays.vectors import Embeddings
    from arrowdedup.dedup import salience

    rng = np.random.default_rng(11)
    n, d = 5_000, 32
    matrix = rng.standard_normal((n, d)).astype(np.float32)
    matrix[::97] = 0.0  # unusable rows
    usable = np.abs(matrix).sum(axis=1) > 0
    emb = Embeddings(matrix, np.ones(n, dtype=bool), usable, d)
    codes = np.sort(rng.integers(0, 7, n))
    want = salience.centrality(codes, 7, emb)
    for rows in (1, 333, 4_096, 1 << 20):
        monkeypatch.setattr(salience, "_CHUNK_ROWS", rows)
        got = salience.centrality(codes, 7, emb)
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64))


def test_salience_factors_read_each_value_as_a_numpy_str_array_did() -> None:
    """The type and section factors are looked up once per distinct value (no fixed-width
    copy of the column): each value as NumPy's ``str`` arrays read it (null as "None",
    trailing NULs dropped), the factors it always had."""
    import numpy as np

    from arrowdedup.dedup import salience

    values = ["title", "title\x00", "", "Intro > Abstract", "x > Summary\x00\x00", None,
              "y" * 900, "References", "title"]
    keys, codes = salience._unique_map(pl.Series(values, dtype=pl.String))
    as_numpy = np.array(values, dtype=object).astype(str)
    assert [keys[c] for c in codes] == [str(v) for v in as_numpy]
