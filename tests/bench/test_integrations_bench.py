"""The framework-adapter benchmark runs end to end on tiny parameters and reports."""

from __future__ import annotations

import pytest

from tests.helpers import M2V_MODEL, OTEL_CONTENT, need

# The [bench] extra brings every framework adapter's extra.
pytest.importorskip("langchain_community", reason="the [bench] extra is not installed")
pytest.importorskip("llama_index.core", reason="the [bench] extra is not installed")
pytest.importorskip("haystack", reason="the [bench] extra is not installed")
pytest.importorskip("datasets", reason="the [bench] extra is not installed")

from benchmarks import integrations

TINY = {"docs": 20, "segments": 10, "dim": 16, "results": 40, "repeats": 1, "calls": 1,
        "pages": 25}


def test_overhead_sides_agree_and_are_reported():
    figures, tables = integrations.overhead(TINY)
    assert figures["ingestion_items"] == 200
    for phase in ("ingestion", "retrieval", "retrieval_noguard"):
        assert figures[f"{phase}_library"]["ratio"] == 1.0
        for side in ("langchain", "llamaindex", "haystack"):
            assert figures[f"{phase}_{side}"]["ratio"] > 0
    assert figures["retrieval_kept"] < 40  # the planted copies were removed
    assert tables[0]["columns"][-1] == "target <= 1.10"


@pytest.mark.slow  # MiniLM and the corpus: about a minute
def test_quality_counts_against_arrowdedup():
    need(M2V_MODEL)
    need(OTEL_CONTENT)
    figures, tables, notes = integrations.quality(TINY)
    totals = figures["totals"]["0.95"]
    assert totals["results"] == len(integrations.QUESTIONS) * integrations.TOP
    assert totals["ours_kept"] <= totals["results"]
    assert "keeps the lower-ranked copy" in notes[0]
    assert all(len(row[2]) <= 80 for row in tables[1]["rows"])
