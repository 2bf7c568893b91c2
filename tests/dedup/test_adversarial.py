"""Adversarial inputs of SPEC §10: salience inflation by repetition, boilerplate floods,
duplicate injection across documents, hostile configs, and the threshold-1.0 edge."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from arrowdedup import (
    AnalyticsConfig,
    ConfigError,
    DedupConfig,
    IngestionConfig,
    RetrievalConfig,
    RrfConfig,
    SignalWeights,
    ingest,
    write_store,
)
from arrowdedup.retrieval.crossdoc import dedupe_ranked
from tests.helpers import M2V_MODEL, need, segments_frame, spacing, unit

# ----------------------------------------------------------------------------- inflation


@pytest.mark.parametrize("mode", ["Linear", "Logarithmic"])
@pytest.mark.parametrize("cap", [1.0, 0.7])
def test_salience_inflation_by_near_copies_is_capped(mode: str, cap: float) -> None:
    rng = np.random.default_rng(1)
    v = rng.normal(size=32)
    texts = [f"buy now, variant{spacing(i)}" for i in range(100)]  # layout: nothing differs
    embs = [unit(v + rng.normal(scale=1e-3, size=32)) for _ in range(100)]
    frame = segments_frame(texts, embs, salience=[0.6] * 100)
    cfg = DedupConfig.from_json({"Ingestion": {"BoostDecayMode": mode, "MaxSalienceBoost": cap}})
    result = ingest(frame, cfg)
    assert result.kept.height == 1
    row = result.kept.row(0, named=True)
    assert row["near_duplicate_count"] == 99
    assert row["salience"] <= cap
    nominal = 0.15 * 99 if mode == "Linear" else 0.15 * math.log2(100)
    assert row["salience_boost"] == pytest.approx(nominal)  # recorded before the cap
    assert row["salience_original"] == pytest.approx(0.6)


def test_exact_repetition_never_boosts() -> None:
    v = unit(np.ones(8))
    frame = segments_frame(["same spam"] * 100, [v] * 100, salience=[0.4] * 100)
    result = ingest(frame)
    row = result.kept.row(0, named=True)
    assert result.kept.height == 1
    assert row["exact_duplicate_count"] == 99 and row["near_duplicate_count"] == 0
    assert row["salience"] == pytest.approx(0.4) and row["salience_boost"] == 0.0


# A hang guard, not a timing: the first ingest of a 10,000-segment document compiles the
# full-size kernels from an empty cache, which alone took a minute on a loaded 2-core CI.
@pytest.mark.timeout(900)
def test_boilerplate_flood_dropped_without_boost_in_bounded_time() -> None:
    n = 10_000
    v = unit(np.arange(1, 17, dtype=np.float64))
    texts = ["© ACME Corp. All rights reserved."] * n + ["the one real sentence"]
    rng = np.random.default_rng(2)
    embs = [v] * n + [unit(rng.normal(size=16))]
    frame = segments_frame(texts, embs, doc_id="flooded", salience=[0.5] * (n + 1))
    result = ingest(frame)
    actions = result.decisions.get_column("action").cast(pl.String).value_counts()
    counts = dict(actions.iter_rows())
    assert counts == {"kept": 2, "dropped_exact": n - 1}
    kept = result.kept.sort("segment_id")
    assert kept.get_column("salience").to_list() == pytest.approx([0.5, 0.5])
    assert kept.get_column("salience_boost").to_list() == [0.0, 0.0]
    assert result.documents.row(0, named=True)["max_salience_boost"] == 0.0


# ----------------------------------------------------------------------------- injection


def _corpus(rng: np.random.Generator, n_docs: int = 30) -> pl.DataFrame:
    words = ["trace", "span", "metric", "log", "exporter", "collector", "sampler", "context",
             "baggage", "resource", "processor", "receiver", "pipeline", "agent", "sdk"]
    texts, docs = [], []
    for d in range(n_docs):
        for s in range(3):
            texts.append(" ".join(rng.choice(words, size=6)) + f" d{d}s{s}")
            docs.append(f"doc-{d:02d}")
    return pl.DataFrame({
        "doc_id": docs,
        "segment_id": [f"{d}#{i % 3}" for i, d in enumerate(docs)],
        "text": texts,
        "segment_type": ["paragraph"] * len(texts),
        "position": pl.Series([i % 3 for i in range(len(texts))], dtype=pl.Int32),
    })


@pytest.mark.parametrize("mode", ["semantic", "hybrid", "keyword"])
def test_duplicate_injection_cannot_raise_a_score(mode: str, tmp_path: Path) -> None:
    from arrowdedup.embed.embedders import get_embedder
    from arrowdedup.retrieval.search import search

    embedder = get_embedder(f"model2vec:{need(M2V_MODEL)}")
    rng = np.random.default_rng(4)
    clean = _corpus(rng)
    target = clean.row(7, named=True)
    copies = pl.DataFrame({
        "doc_id": [f"spam-{i}" for i in range(6)],
        "segment_id": [f"spam-{i}#0" for i in range(6)],
        "text": [target["text"]] * 6,
        "segment_type": ["paragraph"] * 6,
        "position": pl.Series([0] * 6, dtype=pl.Int32),
    })
    query = target["text"]
    scores = {}
    for name, frame in (("clean", clean), ("injected", pl.concat([clean, copies]))):
        # One salience for all: the copies' own salience must not be what wins (a one-segment
        # spam document scored by the default scorer gets 1.0, the §8 "salience near 1.0"
        # warning's business, not dedup's).
        frame = frame.with_columns(
            pl.Series("embedding", embedder.encode(frame.get_column("text").to_list())),
            pl.lit(0.5, dtype=pl.Float32).alias("salience"))
        root = tmp_path / name
        write_store(ingest(frame), root, embedding_model=embedder.name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = search(root, query, k=5, mode=mode, embedder=embedder)
        res = result.results
        ids = res.get_column("segment_id").to_list()
        holders = [i for i in ids if i == target["segment_id"] or i.startswith("spam-")]
        assert len(holders) == 1, f"{name}: the injected copies reach the context: {ids}"
        assert holders == [target["segment_id"]], "ties keep the original (by segment_id)"
        top = res.filter(pl.col("segment_id") == holders[0]).row(0, named=True)
        scores[name] = (top["rrf"], top["score"])
        if name == "injected":
            displaced = set(top["displaced_ids"])
            all_copies = {target["segment_id"], *copies.get_column("segment_id")}
            assert displaced == all_copies - {holders[0]}
    assert scores["injected"][0] <= scores["clean"][0] + 1e-12
    assert scores["injected"][1] <= scores["clean"][1] + 1e-12


# ----------------------------------------------------------------------------- hostile config


def _numeric_keys() -> list[tuple[str, str, type]]:
    out = []
    for section, cls in (("Ingestion", IngestionConfig), ("Retrieval", RetrievalConfig),
                         ("Analytics", AnalyticsConfig), ("Rrf", RrfConfig)):
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else None
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                out.append((section, f.metadata["key"], cls))
            elif isinstance(default, bool):
                out.append((section, f.metadata["key"], cls))
    for f in dataclasses.fields(SignalWeights):
        out.append(("Rrf.Hybrid", f.metadata["key"], SignalWeights))
    return out


def _nested(section: str, key: str, value: object) -> dict[str, object]:
    parts = section.split(".")
    inner: dict[str, object] = {key: value}
    for part in reversed(parts):
        inner = {part: inner}
    return {"Deduplication": inner}


@pytest.mark.parametrize(("section", "key", "cls"), _numeric_keys(),
                         ids=[f"{s}.{k}" for s, k, _ in _numeric_keys()])
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_nan_and_infinity_refused_everywhere(section: str, key: str, cls: type,
                                             value: str) -> None:
    text = json.dumps(_nested(section, key, "@")).replace('"@"', value)
    with pytest.raises(ConfigError) as info:
        DedupConfig.from_json(text)
    assert key in str(info.value)


@pytest.mark.parametrize("value", [1.0, 0.999, 0.5, 0.0, -2.0, 1e7, 1e300])
def test_hostile_log_base_refused(value: float) -> None:
    with pytest.raises(ConfigError, match="LogBase"):
        DedupConfig.from_json({"Ingestion": {"LogBase": value}})


@pytest.mark.parametrize("key", ["Ingestion", "Retrieval"])
@pytest.mark.parametrize("value", [0.0, -0.1, -1e9, 1.0000001, 2.0, 1e300])
def test_hostile_similarity_threshold_refused(key: str, value: float) -> None:
    with pytest.raises(ConfigError, match=f"{key}.SimilarityThreshold"):
        DedupConfig.from_json({key: {"SimilarityThreshold": value}})


def test_hostile_values_by_constructor() -> None:
    with pytest.raises(ConfigError):
        IngestionConfig(log_base=float("nan"))
    with pytest.raises(ConfigError):
        IngestionConfig(similarity_threshold=float("inf"))
    with pytest.raises(ConfigError):
        SignalWeights(dense=0.0, bm25=0.0, salience=0.0, freshness=0.0)
    with pytest.raises(ConfigError):
        IngestionConfig(lsh_band_bits=63)
    assert IngestionConfig(log_base=1e6).log_base == 1e6  # the largest accepted


# ----------------------------------------------------------------------------- threshold 1.0


def _orthogonal_step(v: np.ndarray, rng: np.random.Generator, cos: float) -> np.ndarray:
    u = rng.normal(size=v.size)
    u -= (u @ v) / (v @ v) * v
    u *= np.linalg.norm(v) / np.linalg.norm(u)
    return (cos * v + math.sqrt(1 - cos * cos) * u).astype(np.float32)


def test_threshold_one_never_merges_distinct_directions() -> None:
    rng = np.random.default_rng(8)
    cfg = DedupConfig.from_json({"Ingestion": {"SimilarityThreshold": 1.0}})
    for d in (3, 8, 384):
        v = rng.normal(size=d).astype(np.float32)
        others = [_orthogonal_step(v, rng, c) for c in (0.9999, 0.99999, 0.9)]
        frame = segments_frame(["a", "b", "c", "d"], [v, *others], salience=[0.9, 0.8, 0.7, 0.6])
        actions = ingest(frame, cfg).decisions.get_column("action").cast(pl.String).to_list()
        assert actions == ["kept"] * 4, d


def test_threshold_one_merges_identical_directions() -> None:
    rng = np.random.default_rng(9)
    cfg = DedupConfig.from_json({"Ingestion": {"SimilarityThreshold": 1.0}})
    for trial in range(60):
        d = (3, 8, 384)[trial % 3]
        v = rng.normal(size=d).astype(np.float32)
        frame = segments_frame(["a", "b", "c"], [v, v.copy(), v * np.float32(2.0)],
                               salience=[0.9, 0.8, 0.7])
        actions = ingest(frame, cfg).decisions.get_column("action").cast(pl.String).to_list()
        assert actions == ["kept", "merged_near", "merged_near"], (trial, d)


def test_retrieval_threshold_one_merges_identical_directions() -> None:
    rng = np.random.default_rng(10)
    cfg = DedupConfig(retrieval=RetrievalConfig(similarity_threshold=1.0))
    for trial in range(60):
        d = (3, 8, 384)[trial % 3]
        v = rng.normal(size=d).astype(np.float32)
        ranked = pl.DataFrame({"segment_id": ["a", "b"],
                               "embedding": pl.Series([v, v.copy()],
                                                      dtype=pl.Array(pl.Float32, d))})
        assert dedupe_ranked(ranked, cfg).get_column("segment_id").to_list() == ["a"], trial
