"""Section context in the fact guard (issue 44, item 4): a near merge between sibling sections of
one document is refused (reason ``section``) unless the two texts say the same words; a section
and one that contains it merge; exact copies, other documents and ``FactGuard: false`` are
untouched; every decision path gives the same decisions."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from arrowdedup import DedupConfig, IngestionConfig, LshMethod, Mode, RetrievalConfig, ingest
from arrowdedup.facts.guard import conflict_reasons, fact_modes, signatures_of
from arrowdedup.facts.sections import FORM, LEAF, PREFIX, ROLE_SHIFT, ROOT, SECTION, section_facts
from arrowdedup.facts.tables import REASONS
from arrowdedup.retrieval.crossdoc import dedupe_ranked
from tests.helpers import segments_frame, unit

RNG = np.random.default_rng(44)
BASE = unit(RNG.normal(size=24))


def near(scale: float = 1e-3) -> np.ndarray:
    return unit(BASE + RNG.normal(scale=scale, size=BASE.shape[0]))


def providers() -> pl.DataFrame:
    """The protocols case: sibling provider sections say the same kind of sentence, the most
    salient one adds a protocol; its subsection repeats it; three sibling sections carry the
    same notice in three layouts (boilerplate)."""
    rows = [
        ("Providers > Alpha", "Supported protocols are HTTP and gRPC.", 0.5),
        ("Providers > Beta", "Supported protocols are HTTP and gRPC, all encrypted.", 0.5),
        ("Providers > Gamma", "Supported protocols are HTTP, gRPC and Kafka, all encrypted.",
         0.9),
        ("Providers > Gamma > Limits",
         "Supported protocols are HTTP, gRPC and Kafka, all encrypted!", 0.4),
        ("Providers > Alpha", "Note: this provider is in beta.", 0.6),
        ("Providers > Beta", "**Note:** This provider is in beta.", 0.5),
        ("Providers > Gamma", "Note:  this provider is in beta!", 0.5),
    ]
    return segments_frame([t for _, t, _ in rows], [near() for _ in rows],
                          doc_id="guide", salience=[s for _, _, s in rows],
                          section=[p for p, _, _ in rows])


def decisions(frame: pl.DataFrame, cfg: DedupConfig | None = None) -> dict[str, dict]:
    out = ingest(frame, cfg).decisions
    return {r["segment_id"]: r for r in out.iter_rows(named=True)}


def test_sibling_sections_are_refused_and_named() -> None:
    rows = decisions(providers())
    for seg, section in (("s0", "Alpha"), ("s1", "Beta")):
        assert rows[seg]["action"] == "kept"
        assert rows[seg]["guard_reason"] == "section"
        assert rows[seg]["guard_refused_id"] == "s2"
        assert rows[seg]["guard_detail"] == f"{section} ≠ Gamma"


def test_a_section_merges_into_the_one_that_contains_it() -> None:
    rows = decisions(providers())
    assert rows["s3"]["action"] == "merged_near" and rows["s3"]["representative_id"] == "s2"


def test_boilerplate_merges_across_sibling_sections() -> None:
    # A notice the document repeats in three sections, in other layouts (markup, case).
    rows = decisions(providers())
    for seg in ("s5", "s6"):
        assert rows[seg]["action"] == "merged_near" and rows[seg]["representative_id"] == "s4"
    # Said in two sections only, the same words are two statements, one about each.
    two = providers().filter(pl.col("segment_id") != "s6")
    assert decisions(two)["s5"]["action"] == "kept"


def test_a_lead_in_merges_into_another_only_as_the_same_statement() -> None:
    # What a lead-in says is the block after it: "the final file looks like this:" and "the
    # file looks like this:" introduce two versions of a file.
    texts = ["The final model.go file looks like this:", "The model.go file looks like this:",
             "The model.go file looks like this :", "The model.go file looks like this"]
    frame = segments_frame(texts, [near() for _ in texts], doc_id="tutorial",
                           salience=[0.9, 0.8, 0.7, 0.6])
    rows = decisions(frame)
    assert rows["s1"]["action"] == "kept" and rows["s1"]["guard_reason"] == "content"
    assert rows["s1"]["guard_detail"] == "two lead-ins: each introduces its own block"
    assert rows["s2"]["action"] == "merged_near" and rows["s2"]["representative_id"] == "s1"
    assert rows["s3"]["action"] == "merged_near"  # not a lead-in: B may say more
    # Into a text that goes on past its colon, a lead-in merges: B may hold its block.
    frame = segments_frame(["Ports:\nPort 8080 serves the API.", "Ports:"],
                           [near(), near()], doc_id="tutorial", salience=[0.9, 0.5])
    assert decisions(frame)["s1"]["action"] == "merged_near"


def test_boost_counts_only_the_merges_that_pass() -> None:
    kept = ingest(providers()).kept
    counts = dict(zip(kept["segment_id"].to_list(), kept["near_duplicate_count"].to_list(),
                      strict=True))
    assert counts["s2"] == 1  # its own subsection only, not the other providers


def test_exact_copies_drop_whatever_their_section() -> None:
    frame = segments_frame(["Supported protocols are HTTP and gRPC."] * 3,
                           [near() for _ in range(3)], doc_id="guide",
                           salience=[0.9, 0.5, 0.5],
                           section=["Providers > Alpha", "Providers > Beta", "Other"])
    actions = [r["action"] for r in decisions(frame).values()]
    assert actions == ["kept", "dropped_exact", "dropped_exact"]


def test_fact_guard_off_is_cosine_only_with_or_without_sections() -> None:
    off = DedupConfig(ingestion=IngestionConfig(fact_guard=False))
    with_sections = ingest(providers(), off).decisions
    without = ingest(providers().drop("section"), off).decisions
    assert with_sections.select("action", "representative_id").equals(
        without.select("action", "representative_id"))
    assert with_sections["guard_reason"].null_count() == with_sections.height


def test_other_documents_are_never_apart_by_section() -> None:
    # Retrieval meets results of many documents: the rule compares one document's sections.
    frame = providers().with_columns(
        pl.Series("doc_id", ["a", "b", "c", "c", "a", "b", "c"])).sort(
        "salience", descending=True, maintain_order=True)
    offsets, values = signatures_of(frame)
    modes = fact_modes(frame.get_column("segment_type"), frame.height)
    ids = frame["segment_id"].to_list()
    a, b = ids.index("s0"), ids.index("s1")
    assert conflict_reasons(offsets, values, modes, np.array([a]), np.array([b]))[0] == 0
    same_doc = frame.with_columns(pl.lit("one").alias("doc_id"))
    offsets, values = signatures_of(same_doc)
    reason = conflict_reasons(offsets, values, modes, np.array([a]), np.array([b]))[0]
    assert REASONS[int(reason) - 1] == "section"


def test_dedupe_ranked_applies_the_rule_inside_one_document() -> None:
    ranked = providers().sort("salience", descending=True, maintain_order=True)
    cfg = DedupConfig(retrieval=RetrievalConfig(similarity_threshold=0.9))
    kept = dedupe_ranked(ranked, cfg)["segment_id"].to_list()
    assert {"s0", "s1", "s2", "s4"} <= set(kept) and not {"s3", "s5", "s6"} & set(kept)
    many_docs = ranked.with_columns(pl.Series("doc_id", [f"d{i}" for i in range(ranked.height)]))
    assert dedupe_ranked(many_docs, cfg)["segment_id"].to_list() == ["s2", "s4"]


@pytest.mark.parametrize("mode", ["exact", "blocked", "lsh-hyperplane", "lsh-minhash"])
def test_every_decision_path_agrees(mode: str) -> None:
    frame = pl.concat([providers().with_columns(
        pl.format("{}-{}", pl.col("segment_id"), pl.lit(k)).alias("segment_id"))
        for k in range(40)])  # one document of 240 rows: room for the blocked kernel
    ref = ingest(frame).decisions.select("action", "representative_id", "guard_reason")
    ing = IngestionConfig()
    if mode == "blocked":
        ing = dataclasses.replace(ing, block_min_segments=1)
    elif mode.startswith("lsh"):
        method = LshMethod.HYPERPLANE if mode.endswith("hyperplane") else LshMethod.MINHASH
        ing = dataclasses.replace(ing, mode=Mode.LSH, lsh_min_segments=1, lsh_method=method)
    got = ingest(frame, DedupConfig(ingestion=ing)).decisions.select(
        "segment_id", "action", "representative_id", "guard_reason")
    if mode.startswith("lsh"):
        # LSH may miss a candidate pair, never make a merge the guard refuses.
        merged = got.filter(pl.col("action") == "merged_near")
        ids = frame["segment_id"].to_list()
        a = np.array([ids.index(x) for x in merged["segment_id"]])
        b = np.array([ids.index(x) for x in merged["representative_id"]])
        offsets, values = signatures_of(frame)
        modes = fact_modes(frame.get_column("segment_type"), frame.height)
        assert merged.height > 0 and not conflict_reasons(offsets, values, modes, a, b).any()
    else:
        assert got.drop("segment_id").equals(ref)
    assert "section" in ref["guard_reason"].cast(pl.String).to_list()


def test_tokens_fold_case_and_space_and_skip_rows_without_a_section() -> None:
    rows, tokens = section_facts(pl.Series(["d", "d", "d", "e"]),
                                 pl.Series(["Guide >  Install", "guide > install", None, ""]))
    by_row = {r: sorted(tokens[rows == r].tolist()) for r in set(rows.tolist())}
    assert set(by_row) == {0, 1} and by_row[0] == by_row[1]
    kinds = {int(t) >> 60 for t in tokens}
    roles = sorted((int(t) >> ROLE_SHIFT) & 3 for t in by_row[0])
    assert kinds == {SECTION} and roles == [ROOT, PREFIX, PREFIX, LEAF]
    # With the texts, each row also gets the form of its text: layout folded, words kept.
    rows, tokens = section_facts(pl.Series(["d"] * 3), pl.Series(["A > B", "A > C", "A"]),
                                 pl.Series(["**Note:** Beta.", "note: beta", "Note: beta!"]))
    forms = [int(t) for t in tokens if (int(t) >> ROLE_SHIFT) & 3 == FORM]
    assert len(forms) == 3 and len(set(forms)) == 1
    # In three of a document's seven sections (a glossary's "See X." under three terms), a
    # text is a statement about each: no form.
    paths = ["G > A", "G > B", "G > C", "G > D", "G > E", "G > F", "G > H"]
    rows, tokens = section_facts(pl.Series(["d"] * 7), pl.Series(paths),
                                 pl.Series(["See tracing."] * 3 + ["w", "x", "y", "z"]))
    assert len([t for t in tokens if (int(t) >> ROLE_SHIFT) & 3 == FORM]) == 0
    # In two sections only, a text is no boilerplate: no form.
    rows, tokens = section_facts(pl.Series(["d"] * 3), pl.Series(["A > B", "A > C", "a > c"]),
                                 pl.Series(["**Note:** Beta.", "note: beta", "Note: beta!"]))
    assert not [t for t in tokens if (int(t) >> ROLE_SHIFT) & 3 == FORM]
    # A lead-in has no form: what it introduces differs from section to section.
    rows, tokens = section_facts(pl.Series(["d"] * 2), pl.Series(["A > B", "A > C"]),
                                 pl.Series(["Grant these permissions:",
                                            "Grant the following permissions."]))
    assert not [t for t in tokens if (int(t) >> ROLE_SHIFT) & 3 == FORM]


def test_the_same_content_in_other_words_is_refused_across_sibling_sections() -> None:
    # Equal content words ("debe" and "debes" share a stem) are not the same text: under two
    # components' sections they are two statements.
    texts = ["Grant the service account these permissions through a ClusterRole.",
             "Grant your service account these permissions through a ClusterRole."]
    frame = segments_frame(texts, [near(), near()], doc_id="k8s", salience=[0.9, 0.5],
                           section=["Components > Receiver", "Components > Processor"])
    rows = decisions(frame)
    assert rows["s1"]["action"] == "kept" and rows["s1"]["guard_reason"] == "section"
    same_section = frame.with_columns(pl.lit("Components > Receiver").alias("section"))
    assert decisions(same_section)["s1"]["action"] == "merged_near"


def test_extraction_stores_the_section_tokens(tmp_path) -> None:
    # The store keeps what extract computed: retrieval reads the section tokens, it never
    # recomputes them per query.
    from arrowdedup import extract
    from arrowdedup.facts.guard import signature_column_arrays

    page = tmp_path / "page.md"
    page.write_text("# Guide\n\n## Tomcat\n\nAdd the agent path.\n\n## WebLogic\n\n"
                    "Add the agent path to the domain script.\n", encoding="utf-8")
    frame = extract(page)
    assert all(any(v >> 60 == SECTION for v in sig) for sig in frame["fact_signature"])
    stored = signature_column_arrays(frame.get_column("fact_signature"))
    again = signatures_of(frame)
    assert np.array_equal(stored[0], again[0]) and np.array_equal(stored[1], again[1])


def test_form_hashes_twin_and_kernel_agree() -> None:
    from arrowdedup.arrays.hashing import string_buffers
    from arrowdedup.facts.content_jit import form_hashes
    from arrowdedup.jit import interpreted

    texts = pl.Series(["**Note:** This  page", "note this page", "  note -- this page!! ",
                       "Note: this pages", "Ünïcode：テキスト", "ünïcode：テキスト", "", "a_b"])
    offsets, data = string_buffers(texts.str.to_lowercase().to_arrow())
    rows = np.arange(texts.len(), dtype=np.int64)
    jitted = form_hashes(offsets, data, rows)
    with interpreted.quiet():
        twin = interpreted.twin("arrowdedup.facts.content_jit").form_hashes(offsets, data, rows)
    assert np.array_equal(jitted, twin)
    assert jitted[0] == jitted[1] == jitted[2] and jitted[3] != jitted[0]
    assert jitted[4] == jitted[5] and jitted[7] != jitted[6]
    assert int(jitted.max()) < 1 << 58
