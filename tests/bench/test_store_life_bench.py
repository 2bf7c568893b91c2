"""The store-life benchmark's quick version runs and reports every target of issue 14."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_quick_store_life_benchmark_reports_the_targets() -> None:
    from benchmarks import store_life
    from benchmarks.__main__ import discover

    assert "store_life" in discover()
    result = store_life.run(True)
    f = result["figures"]
    for key in ("full_ingest_s", "update_plus_delete_s", "noop_update_s", "step_s"):
        assert (f[key]["median"] > 0 and len(f[key]["runs"]) >= 3) or key == "step_s"
    assert f["update_plus_delete_s"]["median"] < f["full_ingest_s"]["median"]
    assert 1.0 <= f["disk_ratio"] < 2.0
    assert set(f["search_ratio"]) == {"hybrid", "semantic"}
    assert f["same_top10_share"] == 1.0  # uncompacted and compacted stores agree
    cells = [c for t in result["tables"] for row in t["rows"] for c in row]
    assert sum(("met" in str(c)) or ("MISSED" in str(c)) for c in cells) == 5
