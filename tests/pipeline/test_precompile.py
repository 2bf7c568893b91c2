"""The compile stage (arrowdedup.pipeline.precompile): a run loads or compiles its jitted kernels up
front, in ``compile``, and none later inside another stage; a small run loads none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import M2V_MODEL, ROOT, need

# Run in a fresh process: every jitted function's overloads (compiled, or loaded from the
# cache) are listed before and after each warm-up of the compile stage and at the end of the
# run; an overload that appears outside a warm-up was compiled or loaded inside another stage.
PROBE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import polars as pl
    from arrowdedup.pipeline import precompile

    def overloads():
        if "numba" not in sys.modules:
            return set()
        from numba.core.dispatcher import Dispatcher
        out = set()
        for name, mod in list(sys.modules.items()):
            if not name.startswith("arrowdedup") or mod is None:
                continue
            for attr, value in list(vars(mod).items()):
                if isinstance(value, Dispatcher):
                    out.update((name, attr, str(sig)) for sig in value.overloads)
        return out

    warmed = set()
    stray = set()
    timed = precompile._timed

    def spying(timings, quiet, work):
        def wrapped():
            stray.update(overloads() - warmed)  # since the last warm-up: in another stage
            work()
            warmed.update(overloads())
        timed(timings, quiet, wrapped)

    precompile._timed = spying
    kind, out, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    from arrowdedup import ingest_to_store, update_store
    if kind == "table":
        rng = np.random.default_rng(0)
        n = int(arg)
        big = 3200 if n > 3200 else 0
        docs = ["big"] * big + [f"d{i // 20}" for i in range(n - big)]
        frame = pl.DataFrame({
            "doc_id": docs, "segment_id": [f"s{i}" for i in range(n)],
            "text": [f"segment {i % 997} of document {d} says {i} things" for i, d in
                     enumerate(docs)],
            "segment_type": ["paragraph"] * n,
            "position": pl.Series(range(n), dtype=pl.Int32),
            "embedding": pl.Series(rng.standard_normal((n, 32)).astype(np.float32)),
        })
        result = ingest_to_store(frame, out, buckets=2, quiet=True)
        changed = frame.with_columns(pl.when(pl.col("doc_id") == "d3")
                                     .then(pl.col("text") + " changed")
                                     .otherwise(pl.col("text")).alias("text"))
        update_store(out, changed)
    else:
        result = ingest_to_store(arg, out, embedder=f"model2vec:{sys.argv[4]}", quiet=True)
    loaded = "numba" in sys.modules
    stray = sorted(stray | (overloads() - warmed))
    print(json.dumps({"stray": stray, "numba": loaded, "compile": result.timings["compile"],
                      "kernels": sorted({f"{m}.{f}" for m, f, _ in overloads()})}))
""")


def probe(*args: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_no_kernel_is_compiled_inside_another_stage(tmp_path: Path) -> None:
    # 6000 rows in 2 buckets: jitted hashing, plan, kernels (with the blocked kernel for a
    # document of 3200 rows), vectors and the BM25 tokenizer; then an update.
    out = probe("table", str(tmp_path / "s"), "6000")
    assert out["numba"] and out["stray"] == [], out["stray"]
    assert isinstance(out["compile"], float) and out["compile"] > 0


def test_a_small_run_loads_no_kernel(tmp_path: Path) -> None:
    out = probe("table", str(tmp_path / "s"), "60")
    assert out == {"stray": [], "numba": False, "compile": 0.0, "kernels": []}
    small = tmp_path / "small"
    small.mkdir()
    (small / "a.md").write_text("# Keys\n\nKeys rotate every 90 days.\n")
    need(M2V_MODEL)
    out = probe("docs", str(tmp_path / "d"), str(small), str(M2V_MODEL))
    assert out == {"stray": [], "numba": False, "compile": 0.0, "kernels": []}


def test_the_sample_docs_compile_before_the_work(tmp_path: Path) -> None:
    need(M2V_MODEL)
    out = probe("docs", str(tmp_path / "d"), str(ROOT / "data" / "sample"), str(M2V_MODEL))
    assert out["stray"] == [], out["stray"]
    # Its 45 KB of text take the twins of the scanner and of the guard's CSR helpers: from
    # an empty cache the scanner alone compiles for most of a minute.
    assert "arrowdedup.facts.scan_jit._scan" not in out["kernels"], out["kernels"]


def english_page(page: int) -> str:
    blocks = [f"# Page {page} of the Kafka guide\n"]
    for i in range(40):
        blocks.append(f"Step {i}: set `retry_{i}` to {i * 7} MB on node{page}; "
                      f"do not restart the Broker before 10:{i:02d}, as \"v2.{i}\" says.")
        if i % 10 == 0:
            blocks.append(f"| name | value |\n| --- | --- |\n| limit | {i} |\n| page | {page} |")
    return "\n\n".join(blocks) + "\n"


def japanese_page(page: int) -> str:
    blocks = [f"# ガイド {page}\n"]
    for i in range(40):
        blocks.append(f"東京のサーバー{i}台は設定{page}を使いません。"
                      f"エクスポーターは{i * 3}秒ごとにトレースを送信します。")
    return "\n\n".join(blocks) + "\n"


@pytest.mark.parametrize("write_page", [english_page, japanese_page])
def test_a_large_docs_folder_compiles_the_scanner_before_extracting(tmp_path: Path,
                                                                     write_page) -> None:
    """Documents of more than ``TWIN_MAX_BYTES`` take the jitted scanner: loaded or compiled
    in ``compile``, never inside ``extract``. Japanese text counts its bytes outside ASCII
    three times (the twin spends that much longer on them): a folder under the bound in
    bytes is over it."""
    need(M2V_MODEL)
    from arrowdedup.facts.guard import scan_size
    from arrowdedup.facts.tables import TWIN_MAX_BYTES

    docs = tmp_path / "docs"
    docs.mkdir()
    text = ""
    # Half again over the bound: extraction drops the Markdown around the text.
    while scan_size(np.frombuffer(text.encode(), dtype=np.uint8)) <= 1.5 * TWIN_MAX_BYTES:
        page = write_page(len(text))
        (docs / f"page-{len(text)}.md").write_text(page, encoding="utf-8")
        text += page
    if write_page is japanese_page:
        assert len(text.encode()) <= TWIN_MAX_BYTES  # under the bound in bytes
    out = probe("docs", str(tmp_path / "d"), str(docs), str(M2V_MODEL))
    assert out["stray"] == [], out["stray"]
    assert "arrowdedup.facts.scan_jit._scan" in out["kernels"], out["kernels"]
