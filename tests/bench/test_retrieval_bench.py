"""The retrieval benchmark's quick version runs end to end (on a tiny store) and reports."""

from __future__ import annotations

import pytest

from benchmarks import retrieval


def test_quick_retrieval_benchmark_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWDEDUP_RETRIEVAL_BENCH_STORE", str(tmp_path / "store"))
    monkeypatch.setattr(retrieval, "QUICK", {"docs": 40, "segments": 20, "dim": 32,
                                             "queries": 5, "k": 5})
    monkeypatch.setattr(retrieval, "DEDUPE_CALLS", {"quick": 20, "full": 20})
    body = retrieval.run(True)
    f = body["figures"]
    # 800 segments plus the planted cross-document copies (a copy that lands in its own
    # document is merged at ingestion).
    assert 800 < f["segments"] <= 840 and f["dim"] == 32
    assert "mean_removed_cross_doc" in f
    assert f["dedupe_detail"]["removed"] == 20  # the planted near copies
    for key in ("floor_matvec", "search_vector", "search_hybrid_text"):
        assert f[key]["p50_ms"] > 0 and f[key]["p95_ms"] >= f[key]["p50_ms"]
    assert f["search_hybrid_p50_over_floor"] > 0
    assert [t["title"] for t in body["tables"]] == [
        "search latency (ms) vs the matrix–vector floor", "dedupe_ranked per call (ms)"]
    assert retrieval.headline({"figures": f})[0].startswith(f"Retrieval over {f['segments']:,}")
    # a second run reuses the store
    again = retrieval.run(True)["figures"]
    assert again["store_reused"] is True and again["store_build_s"] == 0.0


@pytest.mark.parametrize("name", ["p50_ms", "p95_ms", "mean_ms"])
def test_percentiles_keys(name):
    assert name in retrieval.percentiles([0.001, 0.002, 0.003])
