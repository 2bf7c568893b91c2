"""The scale benchmark's quick version runs and reports what issue 5 asks of it."""

from __future__ import annotations

from benchmarks import scale


def test_quick_scale_benchmark_sweep_and_crossover(tmp_path):
    body = scale.run(True, ("exact", "crossover"))
    sweep = body["figures"]["sweep"]
    assert [r["n"] for r in sweep] == list(scale.QUICK_SIZES)
    for r in sweep:
        assert r["exact_s"] > 0 and r["floor_s"] > 0 and r["exact_merged_near"] > 0
        assert r["hyperplane_recall"] >= 0.99  # the recall target, at small n too
        assert 0 < r["minhash_recall"] <= 1
    cross = body["figures"]["crossover"]
    assert [r["n"] for r in cross["rows"]] == list(scale.QUICK_CROSSOVER_SIZES)
    assert all(r["numba_removed"] == r["blocked_removed"] for r in cross["rows"])
    titles = [t["title"] for t in body["tables"]]
    assert titles[0].startswith("Exact vs LSH") and titles[1].startswith("Numba scan vs")
    images = scale.plot({"figures": body["figures"]}, tmp_path)
    assert images and all(p.stat().st_size > 1000 for p in images)
    assert scale.headline({"figures": {"sweep": [dict(sweep[0], n=200_000)]}})[0].startswith(
        "200k-segment document")
