"""The fact-guard benchmark's own helpers (``benchmarks/fact_audit.py``): the independent audit
regex, the seeded perturbations, and a quick run on the shared corpus."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks import fact_audit
from benchmarks.__main__ import main
from tests.helpers import M2V_MODEL, OTEL_CONTENT, need


def test_audit_regex_finds_lost_fact_tokens():
    lost = fact_audit.lost_tokens
    assert lost("Use `--peer-tls` between peers", "Use `--client-tls` with clients") == [
        "--peer-tls"]
    assert lost("requests_received_total counts them", "requests_sent_total counts them") == [
        "requests_received_total"]
    assert lost("Member 3:", "Member 2:") == ["3"]
    assert lost("message GetResponse", "message PutResponse") == ["GetResponse"]
    assert lost("$ tool defrag --all", "$ tool defrag") == ["--all"]
    assert lost("upgrade to version 3", "upgrade to version 3.5") == ["3"]
    # Formatting, a representative saying more, or a token written without backticks: no loss.
    assert lost("Set **timeout** to 30 s.", "Set timeout to 30 s") == []
    assert lost("Call `get_value`.", "Call get_value, then `put_value`.") == []
    assert lost("The cache holds 512 entries", "Yes: the cache holds 512 entries (max).") == []


def test_perturbations_are_seeded_and_change_what_they_say():
    sentence = "The exporter retries 5 times and waits 30 seconds between attempts."
    a = fact_audit.change_number(sentence, np.random.default_rng(1))
    b = fact_audit.change_number(sentence, np.random.default_rng(1))
    assert a == b and a != sentence
    assert re.sub(r"\d+", "#", a) == re.sub(r"\d+", "#", sentence)  # one number, nothing else
    assert fact_audit.change_number("No digits here at all today.", np.random.default_rng(1)) \
        is None
    neg = fact_audit.insert_negation("The collector can export traces.",
                                     np.random.default_rng(0))
    assert neg == "The collector can not export traces."
    # A sentence that already negates (straight or typographic apostrophe) is skipped.
    for already in ("It doesn’t export traces, it can drop them.", "It is not sampled."):
        assert fact_audit.insert_negation(already, np.random.default_rng(0)) is None
    # Emphasis goes around plain words only, never inside an identifier or a path.
    glued = "Use client/server spans and otelsql.Open with section-local paths"
    for seed in range(30):
        out = fact_audit.change_formatting(glued, np.random.default_rng(seed))
        for token in ("client/server", "otelsql.Open", "section-local"):
            assert token in out
    rng = np.random.default_rng(3)
    for _ in range(50):
        out = fact_audit.change_formatting(sentence, rng)
        assert re.findall(r"[A-Za-z0-9]+", out) == re.findall(r"[A-Za-z0-9]+", sentence)


def test_perturbed_pairs_are_deterministic():
    sentences = [f"Service {i} is started with {i + 2} workers in the cluster." for i in range(20)]
    one = fact_audit.perturbed_pairs(sentences, 5, seed=4)
    two = fact_audit.perturbed_pairs(sentences, 5, seed=4)
    assert set(one) == set(fact_audit.KINDS)
    for kind in fact_audit.KINDS:
        assert one[kind].equals(two[kind]) and one[kind].height == 5
        if kind != "formatting_md":  # extraction may undo the formatting change
            assert (one[kind]["original"] != one[kind]["variant"]).all()
    raw, md = one["formatting"], one["formatting_md"]
    assert md["original"].to_list() == [fact_audit.as_extracted(t) for t in raw["original"]]
    assert fact_audit.as_extracted("a  **b**\nc _d_.") == "a b c d."
    frame = pl.DataFrame({"segment_type": ["paragraph", "code"],
                          "text": ["One two three four five six. Seven eight nine ten eleven "
                                   "twelve.", "not a sentence of prose at all here"]})
    assert fact_audit.corpus_sentences(frame) == ["One two three four five six.",
                                                  "Seven eight nine ten eleven twelve."]


def test_salience_audit_counts_filtered_segments_that_hold_something():
    frame = pl.DataFrame({
        "text": ["Overview", "See `--max-bytes`", "Step 2", "a b c d e f g h", "Summary",
                 "kept at zero", "kept high"],
        "salience": [0.01, 0.02, 0.03, 0.04, 0.01, 0.0, 0.9]})
    r = fact_audit.salience_audit(frame, 0.05)
    assert (r["segments"], r["filtered"], r["holding"]) == (7, 5, 3)
    assert r["share_holding"] == 3 / 5
    assert r["examples_holding"] == ["See `--max-bytes`", "Step 2", "a b c d e f g h"]
    assert r["examples_plain"] == ["Overview", "Summary"]
    assert fact_audit.salience_audit(frame.head(0), 0.05)["share_holding"] is None


def test_quick_run_reports_both_sides(tmp_path: Path):
    need(M2V_MODEL)
    need(OTEL_CONTENT)
    out = tmp_path / "results"
    assert main(["run", "--quick", "--only", "fact_audit", "--out", str(out)]) == 0
    result = json.loads((out / "fact_audit.json").read_text())
    f = result["figures"]
    off, on = f["audit"]["guard_off"], f["audit"]["guard_on"]
    assert off["segments"] == on["segments"] > 0
    assert on["near_merges"] <= off["near_merges"]
    assert on["guard_refusals"] > 0
    for kind in fact_audit.KINDS:
        r = f["perturbed"]["model2vec"][kind]
        assert r["merged_guard_on"] <= r["merged_guard_off"] <= r["pairs"]
    sampled = f["sampled_guarded_merges"]
    assert len(sampled) == min(fact_audit.SAMPLED_MERGES, on["near_merges"])
    assert all(m["removed_text"] and m["rep_text"] for m in sampled)
    assert f["salience_filter"]["English"]["filtered"] >= f["salience_filter"]["English"][
        "holding"]
    titles = [t["title"] for t in result["tables"]]
    assert any("sampled" in t for t in titles) and titles[0].startswith("Targets")
