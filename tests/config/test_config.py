"""DedupConfig: the spec's JSON shapes, validation naming the key, round trips."""

from __future__ import annotations

import json
import math

import pytest

from arrowdedup import ConfigError, DecayMode, DedupConfig, Mode

SPEC_JSON = {"Deduplication": {
    "Ingestion": {"Enabled": True, "SimilarityThreshold": 0.90, "SalienceThreshold": 0.05,
                  "EnableSalienceBoost": True, "BoostPerNearDuplicate": 0.15,
                  "MaxSalienceBoost": 1.0, "BoostDecayMode": "Logarithmic", "LogBase": 2.0},
    "Retrieval": {"Enabled": True, "SimilarityThreshold": 0.90, "MinRelevanceScore": 0.25},
    "Analytics": {"EnableLogging": True, "EnableMetrics": True,
                  "HighIngestionDedupThreshold": 0.50, "HighRetrievalDedupThreshold": 0.30,
                  "HighSalienceBoostThreshold": 0.60}}}


def test_defaults_are_the_spec_values() -> None:
    c = DedupConfig()
    assert c.ingestion.similarity_threshold == 0.90
    assert c.ingestion.salience_threshold == 0.05
    assert c.ingestion.boost_per_near_duplicate == 0.15
    assert c.ingestion.max_salience_boost == 1.0
    assert c.ingestion.boost_decay_mode is DecayMode.LOGARITHMIC
    assert c.ingestion.log_base == 2.0
    assert c.ingestion.mode is Mode.EXACT
    assert c.retrieval.min_relevance_score == 0.25
    assert c.analytics.high_salience_boost_threshold == 0.60
    assert c.rrf.k == 60
    assert c.rrf.hybrid.as_dict() == {"dense": 1.0, "bm25": 1.0, "salience": 0.3, "freshness": 0.2}
    assert c.rrf.keyword.as_dict() == {"dense": 0.3, "bm25": 1.5, "salience": 0.2, "freshness": 0.1}


@pytest.mark.parametrize("shape", ["whole", "dedup", "inner"])
def test_three_shapes_accepted(shape: str) -> None:
    doc = {"whole": {"DocSummarizer": SPEC_JSON}, "dedup": SPEC_JSON,
           "inner": SPEC_JSON["Deduplication"]}[shape]
    assert DedupConfig.from_json(doc) == DedupConfig()


def test_from_file_and_string(tmp_path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"Ingestion": {"SimilarityThreshold": 0.8}}))
    assert DedupConfig.from_json(path).ingestion.similarity_threshold == 0.8
    assert DedupConfig.from_json(str(path)).ingestion.similarity_threshold == 0.8
    assert DedupConfig.from_json('{"Retrieval": {"Enabled": false}}').retrieval.enabled is False


def test_round_trip() -> None:
    c = DedupConfig.from_json({"Ingestion": {"BoostDecayMode": "Linear", "Mode": "Lsh"},
                               "Rrf": {"K": 30, "Hybrid": {"Dense": 2.0}}})
    assert DedupConfig.from_json(c.to_dict()) == c
    assert DedupConfig.from_json(c.to_json()) == c
    assert c.rrf.hybrid.dense == 2.0 and c.rrf.hybrid.bm25 == 1.0


@pytest.mark.parametrize(("doc", "needle"), [
    ({"Ingestion": {"SimilarityTreshold": 0.9}}, "Ingestion.SimilarityTreshold"),
    ({"Ingest": {}}, "Ingest"),
    ({"Deduplication": {"Retrieval": {"Foo": 1}}}, "Retrieval.Foo"),
    ({"DocSummarizer": {"Deduplication": {}, "Other": 1}}, "Other"),
    ({"Ingestion": {"SimilarityThreshold": 0}}, "SimilarityThreshold"),
    ({"Ingestion": {"SimilarityThreshold": 1.01}}, "SimilarityThreshold"),
    ({"Ingestion": {"SalienceThreshold": 1.0}}, "SalienceThreshold"),
    ({"Ingestion": {"BoostPerNearDuplicate": -0.1}}, "BoostPerNearDuplicate"),
    ({"Ingestion": {"MaxSalienceBoost": 0}}, "MaxSalienceBoost"),
    ({"Ingestion": {"LogBase": 1.0}}, "LogBase"),
    ({"Ingestion": {"LogBase": 1e300}}, "LogBase"),
    ({"Ingestion": {"LogBase": math.nan}}, "LogBase"),
    ({"Ingestion": {"BoostDecayMode": "Quadratic"}}, "BoostDecayMode"),
    ({"Ingestion": {"Enabled": "yes"}}, "Enabled"),
    ({"Ingestion": {"SimilarityThreshold": "0.9"}}, "SimilarityThreshold"),
    ({"Ingestion": {"SimilarityThreshold": True}}, "SimilarityThreshold"),
    ({"Retrieval": {"MinRelevanceScore": 1.5}}, "MinRelevanceScore"),
    ({"Retrieval": {"SimilarityThreshold": math.nan}}, "SimilarityThreshold"),
    ({"Analytics": {"HighIngestionDedupThreshold": -0.1}}, "HighIngestionDedupThreshold"),
    ({"Rrf": {"Hybrid": {"Dense": -1}}}, "Dense"),
    ({"Ingestion": []}, "Ingestion"),
])
def test_invalid_values_name_the_key(doc: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        DedupConfig.from_json(doc)


def test_bad_json_and_missing_file(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        DedupConfig.from_json(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        DedupConfig.from_json(tmp_path / "missing.json")
    with pytest.raises(ConfigError):
        DedupConfig.from_json("[1, 2]")


def test_frozen() -> None:
    c = DedupConfig()
    with pytest.raises(AttributeError):
        c.ingestion.similarity_threshold = 0.5  # type: ignore[misc]


def test_a_config_file_with_a_byte_order_mark_is_read(tmp_path) -> None:
    """Windows editors save UTF-8 with a BOM: the same JSON, read as such."""
    path = tmp_path / "c.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"Ingestion": {"SimilarityThreshold": 0.85}}')
    assert DedupConfig.from_json(path).ingestion.similarity_threshold == 0.85
