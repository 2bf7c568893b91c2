"""The judged merge pairs (``benchmarks/data/judged_pairs.jsonl``) and the merge-quality
harness that scores the engine's merge rule on them (``benchmarks/merge_quality.py``)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from benchmarks import judged_pairs, merge_quality

FIELDS = {*judged_pairs.FIELDS, "label", "reason"}
TYPES = {"heading", "paragraph", "list_item", "code", "table_row", "quote"}


@pytest.fixture(scope="module")
def pairs() -> list[dict]:
    return merge_quality.load_pairs()


def test_judged_pairs_schema_and_labels(pairs):
    assert len(pairs) >= 100
    ids = [p["pair_id"] for p in pairs]
    assert len(set(ids)) == len(ids)
    assert len({(p["text_a"], p["text_b"]) for p in pairs}) == len(pairs)
    for p in pairs:
        assert set(p) == FIELDS, p["pair_id"]
        assert p["label"] in ("genuine", "lost")
        assert p["reason"].strip()
        assert p["segment_type"] in TYPES
        assert p["doc"].startswith(f"{p['language']}/") and p["doc"].endswith(".md")
        assert p["text_a"] and p["text_b"]
        assert merge_quality.THRESHOLD <= p["cosine"] <= 1.0 + 1e-6
        # The id is the hash of what the pair is, so a relabelled pair keeps its id.
        assert p["pair_id"] == judged_pairs.pair_id(p["language"], p["segment_type"],
                                                    p["text_a"], p["text_b"])
    assert {p["label"] for p in pairs} == {"genuine", "lost"}
    assert len({p["language"] for p in pairs}) >= 3


def test_embeddings_file_matches_the_pairs(pairs):
    table = pq.read_table(merge_quality.EMBEDDINGS_FILE)
    assert table.column("pair_id").to_pylist() == [p["pair_id"] for p in pairs]
    for name, dim in (("minilm", 384), ("m2v", 256)):
        for side in ("a", "b"):
            column = table.schema.field(f"{name}_{side}")
            assert column.type.list_size == dim
            assert str(column.type.value_type) == "float"
    cos = merge_quality.load_cosines([p["pair_id"] for p in pairs])
    # The stored MiniLM vectors give back the cosine the engine decided on.
    recorded = np.array([p["cosine"] for p in pairs])
    assert np.abs(cos["minilm"] - recorded).max() < 1e-4


def test_harness_scores_a_few_pairs(pairs):
    few = [p for p in pairs if p["label"] == "genuine"][:3] + \
        [p for p in pairs if p["label"] == "lost"][:3]
    cos = merge_quality.load_cosines([p["pair_id"] for p in few])
    reasons = merge_quality.engine_reasons(few)
    out = merge_quality.evaluate(few, cos, {"text guard": merge_quality.guard_reasons(few),
                                            "engine guard": reasons})
    every = out["minilm / cosine only"]["all"]
    # Cosine only: every collected pair is at or above the threshold, so all merge.
    assert every == {"pairs": 6, "genuine": 3, "merged": 6, "genuine_merged": 3,
                     "lost_merged": 3, "precision": 0.5, "genuine_recall": 1.0}
    guarded = out["minilm / engine guard"]["all"]
    expected = sum(r is None for r in reasons)
    assert guarded["merged"] == expected
    assert guarded["genuine_merged"] == sum(
        r is None and p["label"] == "genuine" for p, r in zip(few, reasons, strict=True))
    by_type = out["minilm / cosine only"]["segment_type"]
    assert sum(s["pairs"] for s in by_type.values()) == 6


def test_scores_by_hand():
    genuine = np.array([True, True, False, False])
    merge = np.array([True, False, True, False])
    s = merge_quality.scores(genuine, merge)
    assert s == {"pairs": 4, "genuine": 2, "merged": 2, "genuine_merged": 1, "lost_merged": 1,
                 "precision": 0.5, "genuine_recall": 0.5}
    assert merge_quality.scores(genuine, np.zeros(4, bool))["precision"] is None
    assert list(merge_quality.merged(np.array([0.95, 0.95, 0.5]), ["number", None, None])) \
        == [False, True, False]


def test_sample_is_seeded_and_capped():
    cands = [{"pair_id": f"jp-{i:03d}", "language": lang, "segment_type": "paragraph",
              "text_a": f"a{i}", "text_b": f"b{i}"}
             for i, lang in enumerate(["en"] * 10 + ["es"] * 2)]
    a = judged_pairs.sample(cands, 3, 7)
    assert a == judged_pairs.sample(list(reversed(cands)), 3, 7)
    assert [p["language"] for p in a] == ["en"] * 3 + ["es"] * 2
    assert json.dumps(a) != json.dumps(judged_pairs.sample(cands, 3, 8))
    # A candidate repeated by a second collection run counts once; the same texts met in a
    # second language are kept in the first language only.
    assert judged_pairs.sample(cands + cands[-2:], 3, 7) == a
    twin = {**cands[-1], "pair_id": "jp-999", "language": "pt"}
    assert judged_pairs.sample([*cands, twin], 3, 7) == a


def test_sampled_guarded_merges_are_forty_judged_merges():
    merges = merge_quality.load_pairs(merge_quality.MERGES_FILE)
    assert len(merges) == judged_pairs.MERGES_SAMPLE
    assert len({p["pair_id"] for p in merges}) == len(merges)
    for p in merges:
        assert set(p) == FIELDS and p["label"] in ("genuine", "lost") and p["reason"].strip()
    table, figures = merge_quality.sampled_merges_table(merges)
    assert len(table["rows"]) == len(merges)
    assert figures["genuine"] == sum(p["label"] == "genuine" for p in merges)
    assert all("\n" not in cell for row in table["rows"] for cell in row[2:4])


def test_sibling_sections_are_paths_neither_of_which_starts_the_other():
    assert judged_pairs._siblings("Guide > Tomcat", "Guide > WebLogic")
    assert not judged_pairs._siblings("Guide", "guide >  Setup")
    assert not judged_pairs._siblings("Guide > Setup", "Guide > Setup")
    assert not judged_pairs._siblings(None, "Guide")
