"""The filters benchmark runs (quick) and reports every predicate against the unfiltered search."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_filters_benchmark_quick(tmp_path, monkeypatch) -> None:
    from benchmarks import filters

    monkeypatch.setenv("ARROWDEDUP_RETRIEVAL_BENCH_STORE", str(tmp_path / "store"))
    result = filters.run(quick=True)
    figures = result["figures"]
    assert set(figures["predicates"]) == {label for label, _, _ in filters.PREDICATES}
    for entry in figures["predicates"].values():
        assert 0 < entry["share"] <= 1
        for mode in ("vector", "text"):
            assert entry[mode]["min"] <= entry[mode]["p50_ms_median"] <= entry[mode]["max"]
    assert figures["meets_target"] == (figures["worst_over_unfiltered"] <= filters.TARGET)
    assert filters.headline(result)[0].startswith("Search filters")
