"""`arrowdedup.calibrate` and `arrowdedup calibrate` on tiny pair files made here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from arrowdedup.calibrate import (
    DEFAULT_THRESHOLDS,
    calibrate,
    load_pairs,
    metrics_at,
    pair_guard_reasons,
    recommend,
)
from arrowdedup.cli import app
from arrowdedup.errors import ConfigError, InputError
from arrowdedup.facts.guard import fact_conflict
from arrowdedup.facts.tables import KIND_NAMES
from tests.helpers import M2V_MODEL, need

GRADED = [
    ("p1", "5.0", "A man is playing a guitar.", "A man is playing a guitar."),
    ("p2", "4.9", "The cat sleeps on the sofa.", "The cat is sleeping on the sofa."),
    ("p3", "3.5", "A dog runs in the park.", "A dog is running outside."),
    ("p4", "1.0", "Stocks fell sharply on Monday.", "The child ate an apple."),
    ("p5", "0.5", "Rain is expected tomorrow.", "She plays the violin beautifully."),
    ("p6", "2.0", "A woman slices an onion.", "A man is cutting a tomato."),
]


def write_tsv(path: Path, header: list[str], rows: list[tuple[str, ...]]) -> Path:
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(r) + "\n" for r in rows))
    return path


@pytest.fixture()
def graded(tmp_path: Path) -> Path:
    return write_tsv(tmp_path / "graded.tsv", ["pair_id", "score", "sentence1", "sentence2"],
                     GRADED)


@pytest.fixture()
def crosslingual(tmp_path: Path) -> Path:
    rows = [
        ("x1", "de", "Two trains on the tracks.", "Zwei Züge auf den Gleisen."),
        ("x2", "fr", "A cat eats fish.", "Un chat mange du poisson."),
        ("x3", "de", "BBC News 2012", "BBC News, 2013"),  # digits and punctuation only
        ("x4", "fr", "Obama Wins Ohio", "Obama wins Ohio"),  # case only
        ("x5", "de", "The weather is nice.", "Das Wetter ist schön."),
        ("x6", "de", "Obama wins Ohio again", "Obama gewinnt Ohio again"),  # one word swapped
    ]
    return write_tsv(tmp_path / "cross.tsv", ["pair_id", "lang", "text_en", "text_xx"], rows)


def test_graded_labelling_leaves_out_the_middle(graded: Path):
    pairs = load_pairs(graded)
    assert pairs.text_columns == ("sentence1", "sentence2")
    assert pairs.n == 5 and pairs.left_out == 1  # p3 (3.5) is neither
    assert pairs.labels.tolist() == [True, True, False, False, False]
    stricter = load_pairs(graded, positive_min=4.95, negative_max=1.5)
    assert stricter.labels.tolist() == [True, False, False]
    assert stricter.left_out == 3


def test_binary_label_column(tmp_path: Path):
    path = write_tsv(tmp_path / "b.tsv", ["id", "sentence1", "sentence2", "label"],
                     [("1", "a b", "a b", "1"), ("2", "c d", "e f", "0")])
    pairs = load_pairs(path)
    assert pairs.labelling == "label == 1" and pairs.labels.tolist() == [True, False]


def test_all_negative_sets_aside_trivial_pairs(crosslingual: Path):
    pairs = load_pairs(crosslingual)
    assert pairs.labelling == "all negative" and pairs.positives == 0
    assert pairs.set_aside == 2 and pairs.set_aside_case_only == 1
    assert pairs.set_aside_barely_translated == 1
    assert pairs.n == 3 and pairs.groups == ["de", "fr", "de"]
    # text_en is English; text_xx is in the pair's lang.
    assert pairs.left_languages == ["en"] * 3 and pairs.right_languages == ["de", "fr", "de"]
    strict = load_pairs(crosslingual, ignore_case=False)
    # Case counts: x4 differs in one token ("Wins" / "wins"), so it is barely translated.
    assert strict.set_aside == 1 and strict.set_aside_barely_translated == 2 and strict.n == 3
    kept = load_pairs(crosslingual, set_aside_trivial=False)
    assert kept.set_aside == 0 and kept.set_aside_barely_translated == 0 and kept.n == 6


def test_seeded_sample_per_group(crosslingual: Path):
    a = load_pairs(crosslingual, set_aside_trivial=False, sample=1, seed=3)
    b = load_pairs(crosslingual, set_aside_trivial=False, sample=1, seed=3)
    assert a.left == b.left and sorted(a.groups or []) == ["de", "fr"]
    assert a.sampled_from == 6


def test_metrics_against_hand_counts():
    cosine = np.array([0.99, 0.95, 0.91, 0.85, 0.50], dtype=np.float32)
    labels = np.array([True, True, False, True, False])
    table = metrics_at(cosine, labels, [0.90, 0.96])
    at90, at96 = table.row(0, named=True), table.row(1, named=True)
    assert (at90["tp"], at90["fp"], at90["fn"], at90["tn"]) == (2, 1, 1, 1)
    assert at90["precision"] == pytest.approx(2 / 3) and at90["recall"] == pytest.approx(2 / 3)
    assert at90["f1"] == pytest.approx(2 / 3) and at90["false_merge_rate"] == pytest.approx(0.5)
    assert (at96["tp"], at96["fp"]) == (1, 0) and at96["precision"] == 1.0
    assert recommend(table, 0.99, has_positives=True) == pytest.approx(0.96)
    assert recommend(table, 0.5, has_positives=True) == pytest.approx(0.90)
    none = metrics_at(cosine, labels, [0.999])
    assert none.row(0, named=True)["precision"] is None
    assert none.row(0, named=True)["f1"] == 0.0


def test_calibrate_with_model2vec(graded: Path):
    need(M2V_MODEL)
    result = calibrate(load_pairs(graded), f"model2vec:{M2V_MODEL}")
    assert result.table.height == len(DEFAULT_THRESHOLDS) == 19
    assert result.table["threshold"].to_list()[0] == pytest.approx(0.80)
    assert result.table["threshold"].to_list()[-1] == pytest.approx(0.98)
    # p1 is an identical pair: cosine 1, merged at every threshold.
    assert result.cosine[0] == pytest.approx(1.0, abs=1e-5)
    assert (result.table["tp"] >= 1).all()
    # Unrelated sentences are far below the threshold.
    assert result.cosine[2:].max() < 0.8
    info = result.to_dict()
    assert info["positives"] == 2 and info["negatives"] == 3
    assert info["at_default"]["fp"] == 0 and info["recommended_threshold"] == pytest.approx(0.80)
    assert info["best_precision"]["precision"] == 1.0
    assert info["best_precision"]["threshold"] == pytest.approx(0.80)


def test_cli_calibrate_table_and_json(graded: Path, crosslingual: Path):
    need(M2V_MODEL)
    runner = CliRunner()
    emb = f"model2vec:{M2V_MODEL}"
    res = runner.invoke(app, ["calibrate", str(graded), "--embedder", emb])
    assert res.exit_code == 0, res.output
    assert "recommended threshold" in res.output and "0.98" in res.output
    res = runner.invoke(app, ["calibrate", str(crosslingual), "--embedder", emb, "--json",
                              "--target-precision", "0.95"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["set_aside_trivial"] == 2 and data["pairs_used"] == 3
    assert data["target_precision"] == 0.95
    assert set(data["false_merges_by_group_at_default"]) == {"de", "fr"}
    res = runner.invoke(app, ["calibrate", str(graded), "--embedder", emb, "--fact-guard",
                              "off", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["fact_guard"] == "off"
    assert data["at_default"] == data["guard_off"]["at_default"]
    assert data["guard_on"]["at_default"]["fp"] <= data["guard_off"]["at_default"]["fp"]
    res = runner.invoke(app, ["calibrate", str(graded), "--embedder", emb], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "false merges on" in res.output and "false merges off" in res.output
    assert "fact guard on:" in res.output and "fact guard off:" in res.output
    res = runner.invoke(app, ["calibrate", str(graded), "--embedder", emb, "--fact-guard",
                              "maybe"])
    assert res.exit_code == 2 and "maybe" in res.output
    res = runner.invoke(app, ["calibrate", str(graded), "--embedder", emb,
                              "--text-columns", "sentence1,nope"])
    assert res.exit_code == 1 and "nope" in res.output and "Traceback" not in res.output


class LetterCounts:
    """A toy embedder: counts of the letters a–z. Digits are invisible to it, so texts that
    differ only in a number have cosine 1 (the cosine test alone merges them)."""

    name = "letter-counts"
    dim = 26

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out


GUARDED = [
    ("g1", "5.0", "The cache holds 512 entries.", "The cache holds 512 entries."),
    ("g2", "4.9", "Restart the service after upgrading.", "Restart the service after upgrading!"),
    ("g3", "0.5", "The cache holds 512 entries.", "The cache holds 1024 entries."),
    ("g4", "0.8", "Set the flag to enable tracing.", "Set the flag to disable tracing."),
    ("g5", "1.0", "Stocks fell sharply on Monday.", "The child ate an apple."),
]


def test_pair_guard_reasons_are_fact_conflict():
    left = ["The cache holds 512 entries.", "Do not restart.", "Es kostet 10.000 Euro.",
            "Version 3.5 is out.", "Call `get_value` first.", "A plain sentence."]
    right = ["The cache holds 1024 entries.", "Restart.", "Es kostet 10000 Euro.",
             "Version 3.50 is out.", "Call `get_value` first, then wait.", "Plain sentence."]
    langs = [None, None, "de", None, None, None]
    got = pair_guard_reasons(left, right, left_languages=langs, right_languages=langs)
    want = [fact_conflict(a, b, language=lang) for a, b, lang in zip(left, right, langs,
                                                                     strict=True)]
    assert [KIND_NAMES[k] if k else None for k in got.tolist()] == want
    assert want[0] == "number" and want[1] == "negation" and want[2] is None
    assert want[3] == "version" and want[4] is None and want[5] is None
    heading = pair_guard_reasons(["Install `tool`"], ["Install `tool` and `other`"],
                                 segment_type="heading")
    assert KIND_NAMES[int(heading[0])] == fact_conflict(
        "Install `tool`", "Install `tool` and `other`", segment_type="heading") == "identifier"
    with pytest.raises(ConfigError, match="right texts"):
        pair_guard_reasons(["a"], [])


def test_calibrate_reports_the_guard_side_by_side(tmp_path: Path):
    path = write_tsv(tmp_path / "g.tsv", ["pair_id", "score", "sentence1", "sentence2"], GUARDED)
    pairs = load_pairs(path)
    on = calibrate(pairs, LetterCounts())
    off = calibrate(pairs, LetterCounts(), fact_guard=False)
    assert on.fact_guard and not off.fact_guard
    assert np.array_equal(on.cosine, off.cosine)
    # g3 differs only in the number: cosine 1, a false merge without the guard only.
    assert on.cosine[2] == pytest.approx(1.0)
    assert off.row_at(0.90)["fp"] >= 1 and on.row_at(0.90)["fp"] == off.row_at(0.90)["fp"] - 1 \
        - int(off.cosine[3] >= 0.90)
    assert on.table.equals(on.tables["on"]) and off.table.equals(off.tables["off"])
    assert on.tables["off"].equals(off.tables["off"])
    # Both positives merge either way: the guard costs no recall here.
    assert on.row_at(0.90)["tp"] == off.row_at(0.90)["tp"] == 2
    info = on.to_dict()
    assert info["fact_guard"] == "on"
    assert info["guard_on"]["at_default"]["fp"] == on.row_at(0.90)["fp"]
    assert info["guard_off"]["at_default"]["fp"] == off.row_at(0.90)["fp"]
    assert info["guard_refusals_at_default"]["negatives"]["number"] == 1
    assert info["guard_refusals_at_default"]["positives"] == {}
    assert "g3" in info["guard_off"]["false_merge_ids_at_default"]
    assert "g3" not in info["guard_on"]["false_merge_ids_at_default"]
    side = on.side_by_side()
    assert side.height == len(DEFAULT_THRESHOLDS)
    assert side["fp_guard_off"].to_list() == off.table["fp"].to_list()
    assert side["fp_guard_on"].to_list() == on.table["fp"].to_list()
    assert (side["fp_guard_on"] <= side["fp_guard_off"]).all()
    # The guarded decision never merges a pair the cosine test refuses.
    assert (side["tp_guard_on"] <= side["tp_guard_off"]).all()
    assert on.recommended_threshold is not None and off.recommended_threshold is None


def test_errors_name_the_fix(tmp_path: Path, graded: Path):
    with pytest.raises(InputError, match="does not exist"):
        load_pairs(tmp_path / "missing.tsv")
    with pytest.raises(ConfigError, match="label column 'grade'"):
        load_pairs(graded, label_column="grade")
    odd = write_tsv(tmp_path / "odd.tsv", ["a", "b"], [("x", "y")])
    with pytest.raises(ConfigError, match="--text-columns"):
        load_pairs(odd)
    with pytest.raises(ConfigError, match="negative_max"):
        load_pairs(graded, positive_min=2.0, negative_max=3.0)
