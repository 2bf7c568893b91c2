"""The benchmark harness cannot rot: ``python -m benchmarks run --quick`` end to end.

Quick runs write to a temporary directory and to copies of the READMEs, never to the published
results.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import common
from benchmarks.__main__ import discover, main, render
from benchmarks.corpus import make_corpus
from tests.helpers import M2V_MODEL, OTEL_CONTENT, PAIRS, need

# This test runs the benchmarks of this issue; the retrieval, scale and analytics owners test
# the quick versions of theirs.
MINE = ("ingest_scale", "kernel_floor", "peers", "quality", "real_corpus")
HAND_WRITTEN = "## Hand-written section\n\nThis paragraph is owned by someone else.\n"


def test_discover_finds_the_benchmarks():
    names = discover()
    for name in MINE:
        assert name in names
    assert "common" not in names and "corpus" not in names and "baseline" not in names


def test_corpus_is_seeded_and_plants_duplicates():
    a = make_corpus(20, 10, 32, seed=3)
    b = make_corpus(20, 10, 32, seed=3)
    assert a.table.equals(b.table)
    assert a.table.num_rows == 200
    emb = np.asarray(a.table.column("embedding").combine_chunks().flatten()).reshape(200, 32)
    np.testing.assert_array_equal(emb, a.matrix)
    # Half of every document are copies: cosine to some other row of the same doc >= 0.9.
    unit = a.matrix / np.linalg.norm(a.matrix, axis=1, keepdims=True)
    doc0 = unit[:10] @ unit[:10].T
    np.fill_diagonal(doc0, 0)
    assert (doc0.max(axis=1) >= 0.9).sum() >= 5


def test_replace_block_keeps_the_rest():
    text = "intro\n<!-- x:start -->\nold\n<!-- x:end -->\noutro\n"
    out = common.replace_block(text, "<!-- x:start -->", "<!-- x:end -->", "new")
    assert out == "intro\n<!-- x:start -->\nnew\n<!-- x:end -->\noutro\n"
    appended = common.replace_block("only text\n", "<!-- y:start -->", "<!-- y:end -->", "b")
    assert appended.startswith("only text\n") and appended.rstrip().endswith("<!-- y:end -->")


def test_timeit_reports_best_and_value():
    calls = []
    t = common.timeit(lambda: calls.append(1) or len(calls), repeats=3, warmup=2)
    assert len(calls) == 5 and t["value"] == 5
    assert len(t["runs"]) == 3 and t["best"] <= t["median"]


def test_quick_run_writes_results_and_readmes(tmp_path: Path):
    need(PAIRS)
    need(M2V_MODEL)
    need(OTEL_CONTENT)
    out = tmp_path / "results"
    readme = tmp_path / "BENCH.md"
    root_readme = tmp_path / "README.md"
    readme.write_text("# Benchmarks\n\n" + HAND_WRITTEN)
    root_readme.write_text("# arrowdedup\n\nIntro.\n\n<!-- perf:start -->\nstale\n"
                           "<!-- perf:end -->\n\n## Later section\n")
    published = sorted((common.RESULTS).glob("*.json"))
    before = {p: p.read_bytes() for p in published}
    only = [arg for name in MINE for arg in ("--only", name)]
    code = main(["run", "--quick", *only, "--out", str(out), "--readme", str(readme),
                 "--root-readme", str(root_readme)])
    assert code == 0
    for name in MINE:
        result = json.loads((out / f"{name}.json").read_text())
        assert result["quick"] is True
        assert result["machine"]["cores"] and result["machine"]["cpu"]
        assert result["versions"]["numpy"] and result["versions"]["polars"]
        assert "commit" in result["git"]
        assert result["tables"] and result["figures"]
    scale = json.loads((out / "ingest_scale.json").read_text())["figures"]
    assert scale["keep_sets_identical_to_baseline"] is True
    assert 0.4 < scale["dedup_ratio"] < 0.6
    # The BM25 target is judged on the build timed by itself, like for like in threads: the
    # larger of the default build over the default job and one thread over one thread.
    assert scale["bm25_build_share_of_file_to_store"] > 0
    assert scale["bm25_build_share_of_file_to_store"] == max(
        scale["bm25_build_share_default_threads"], scale["bm25_build_share_1_thread"])
    assert scale["sides"]["bm25_build"]["median_run"]["workers"] >= 1
    assert scale["sides"]["bm25_build_1_thread"]["median_run"]["workers"] == 1
    share, target = (scale["bm25_build_share_of_file_to_store"],
                     scale["targets"]["bm25_share_of_file_to_store"])
    assert scale["meets_targets"]["bm25_share_of_file_to_store"] == (share <= target)
    # Each floor ran writing through the page cache and with O_DIRECT; the faster is judged.
    med = {k: v["seconds"]["median"] for k, v in scale["sides"].items()}
    for kind, floor in (("ipc", "floor_ipc"), ("parquet", "floor_parquet")):
        judged = scale["judged_floors"][kind]
        assert judged == min((floor, floor + "_direct"), key=med.__getitem__)
        assert scale[f"{kind}_over_floor"] == pytest.approx(med[f"store_{kind}"] / med[judged])
    peers = json.loads((out / "peers.json").read_text())["figures"]
    assert peers["a"]["semhash_identical"] and peers["b"]["baseline_identical"]
    # The guard-less peers are compared with FactGuard false; the guarded time is beside it.
    assert peers["a"]["arrowdedup_guarded_ingest_s"] > 0 and scale["guarded_ingest_s"] > 0
    quality = json.loads((out / "quality.json").read_text())["figures"]["runs"]
    stsb = quality["model2vec/stsb_en"]
    assert stsb["guard_on_at_0.90"]["fp"] <= stsb["guard_off_at_0.90"]["fp"]
    assert set(stsb["targets"]) >= {"false_merge_cut_met", "positive_merges_kept_met"}
    assert "set_aside_barely_translated" in quality["model2vec/crosslingual"]
    real = json.loads((out / "real_corpus.json").read_text())["figures"]["model2vec_all"]
    assert real["cross_language_merges"] == 0 and real["cross_document_merges"] == 0
    assert (out / "kernel_floor.png").stat().st_size > 0
    assert (out / "quality_precision_recall.png").stat().st_size > 0
    text = readme.read_text()
    assert HAND_WRITTEN in text
    assert "<!-- bench:peers:start -->" in text and "SemHash" in text
    assert "Quick run" in text
    root = root_readme.read_text()
    assert "stale" not in root and "## Performance" in root and "## Later section" in root
    # The published results were not touched.
    assert {p: p.read_bytes() for p in published} == before


def test_render_is_idempotent(tmp_path: Path):
    result = {
        "name": "demo_bench", "title": "Demo", "quick": False, "date": "2026-01-01T00:00:00",
        "duration_s": 1.0, "command": "python -m benchmarks run --only demo_bench",
        "machine": common.machine(), "versions": {}, "git": {"commit": "abc", "dirty": False},
        "parameters": {"n": 3}, "figures": {"x": 1.5},
        "tables": [common.table("T", ["a", "b"], [[1, 2.5]])], "notes": ["a note"],
    }
    (tmp_path / "demo_bench.json").write_text(json.dumps(result))
    readme = tmp_path / "R.md"
    readme.write_text(HAND_WRITTEN)
    render(tmp_path, readme, None)
    first = readme.read_text()
    render(tmp_path, readme, None)
    assert readme.read_text() == first
    assert "| 1 | 2.500 |" in first and HAND_WRITTEN in first


@pytest.mark.parametrize("value,expected", [(None, "–"), (1234, "1,234"), (0.12345, "0.123"),
                                            (12.34, "12.3"), (True, "yes")])
def test_fmt(value, expected):
    assert common.fmt(value) == expected


def test_the_machine_record_says_how_memory_goes_back_to_the_host():
    """Each result records free page reporting and huge pages (the timings of anything that
    allocates fresh memory depend on them), and the machine line of the page says so."""
    from benchmarks.__main__ import memory_return_markdown

    m = common.machine()["memory_return"]
    assert set(m) == {"free_page_reporting", "page_reporting_order", "transparent_hugepages"}
    assert isinstance(m["free_page_reporting"], bool)
    on = {"date": "2", "machine": {"memory_return": {
        "free_page_reporting": True, "page_reporting_order": 9,
        "transparent_hugepages": "madvise"}}}
    off = {"date": "1", "machine": {"memory_return": {
        "free_page_reporting": False, "page_reporting_order": None,
        "transparent_hugepages": None}}}
    text = memory_return_markdown([off, on])  # the newest result speaks
    assert "2048 KiB blocks" in text and "host fault" in text and "madvise" in text
    assert memory_return_markdown([off]) == " No free page reporting."
    assert memory_return_markdown([{"date": "1", "machine": {}}]) == ""  # older results
