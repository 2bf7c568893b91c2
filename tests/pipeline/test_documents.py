"""Documents to store (issue 3): extract → embed (cached) → salience → dedup → store.

Uses the Model2Vec model of ../shared/data (fast); the MiniLM path is covered by
tests/pipeline/test_sample.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from arrowdedup.cli import app
from arrowdedup.embed.embedders import get_embedder
from arrowdedup.errors import InputError, StoreError
from arrowdedup.pipeline.inputs import is_documents_input
from arrowdedup.pipeline.run import ingest_to_store
from arrowdedup.store import open_store
from arrowdedup.timings import STAGES
from tests.helpers import M2V_MODEL, need

PAGE = """---
title: Webhooks
lang: en
---

# Webhooks

Tallybird retries a failed webhook delivery up to eight times over the next 24 hours.

A failed webhook delivery is retried by Tallybird up to eight times over the next 24 hours.

Questions? Write to support and we answer within one business day.

Questions? Write to support and we answer within one business day.
"""


@pytest.fixture(scope="module")
def m2v():
    return get_embedder(f"model2vec:{need(M2V_MODEL)}")


def write_docs(root: Path) -> Path:
    (root / "de").mkdir(parents=True)
    (root / "hooks.md").write_text(PAGE, encoding="utf-8")
    (root / "de" / "hooks.md").write_text(
        "---\ntitle: Webhooks\nlang: de\n---\n\nTallybird wiederholt eine fehlgeschlagene "
        "Zustellung bis zu achtmal.\n", encoding="utf-8")
    (root / "codes.csv").write_text("code,status\nrate_limited,429\ninternal,500\n")
    return root


def test_documents_to_store(tmp_path, m2v) -> None:
    docs = write_docs(tmp_path / "docs")
    result = ingest_to_store(docs, tmp_path / "store", embedder=m2v, quiet=True)
    store = open_store(tmp_path / "store")
    assert store.version == result.path and store.run_id == result.version_id
    m = store.manifest
    assert m["embedding"] == {"model": "model2vec:m2v-minilm-l6-256", "dim": 256}
    # One set of stage timings, the same keys as for a segments table.
    assert set(m["timings"]) >= {"extract", "embed", "salience", "kernel", "index", "write"}
    assert set(result.timings) >= set(STAGES)
    assert result.timings["extract"] > 0 and result.timings["embed"] > 0
    assert all(v >= 0 for v in m["timings"].values())
    assert m["skipped_files"] == []
    assert m["extract"]["files"] == 3
    assert m["embedding_cache"]["embedded"] == m["embedding_cache"]["unique"]
    decisions = result.decisions.collect()
    actions = dict(decisions.get_column("action").cast(pl.String).value_counts().iter_rows())
    assert actions["dropped_exact"] == 1  # the repeated "Questions?" footer
    assert decisions.height == result.final_count + sum(
        v for k, v in actions.items() if k != "kept")
    kept = store.segments().collect()
    assert kept.schema["embedding"] == pl.Array(pl.Float32, 256)
    assert kept.get_column("salience").is_not_null().all()
    assert set(store.documents().collect().get_column("doc_id")) == {"hooks", "de/hooks", "codes"}
    # The stored vectors are the embedder's, untouched.
    direct = m2v.encode(kept.get_column("text").to_list())
    assert np.allclose(np.stack(kept.get_column("embedding").to_numpy()), direct, atol=1e-6)


def test_reingest_embeds_only_new_texts(tmp_path, m2v) -> None:
    docs = write_docs(tmp_path / "docs")
    out = tmp_path / "store"
    ingest_to_store(docs, out, embedder=m2v, quiet=True)
    first = open_store(out).manifest["embedding_cache"]
    (docs / "hooks.md").write_text(PAGE + "\nA brand new paragraph about signatures.\n")
    ingest_to_store(docs, out, embedder=m2v, quiet=True)
    second = open_store(out).manifest["embedding_cache"]
    assert second["embedded"] == 1
    assert second["cached"] == first["unique"]


def test_identical_runs_write_identical_files(tmp_path, m2v) -> None:
    docs = write_docs(tmp_path / "docs")
    ingest_to_store(docs, tmp_path / "a", embedder=m2v, quiet=True, threads=1)
    ingest_to_store(docs, tmp_path / "b", embedder=m2v, quiet=True, threads=2)
    a = open_store(tmp_path / "a").manifest["files"]
    b = open_store(tmp_path / "b").manifest["files"]
    assert a == b
    assert any(k.startswith("segments/") for k in a)


def test_a_streamed_run_writes_the_store_of_one_held_in_memory(tmp_path, m2v, monkeypatch
                                                               ) -> None:
    """Documents past STREAM_DOCUMENTS_BYTES are partitioned to disk batch by batch (issue 45:
    memory); the store is byte for byte the one an in-memory run writes, with several
    batches per bucket and more buckets than documents."""
    from arrowdedup.pipeline import documents, inputs, run

    docs = write_docs(tmp_path / "docs")
    for i in range(6):  # more documents than buckets below, and rows past one batch
        (docs / f"many-{i}.md").write_text(
            "\n\n".join(f"Paragraph {k} of part {i} says {k * 7 % 13} things." for k in range(40)),
            encoding="utf-8")
    monkeypatch.setattr(inputs, "PARTITION_BATCH", 50)
    monkeypatch.setattr(documents, "DOCUMENTS_BATCH", 50)
    monkeypatch.setattr(run, "STREAM_DOCUMENTS_BYTES", 1 << 40)
    held = ingest_to_store(docs, tmp_path / "held", embedder=m2v, quiet=True, buckets=4)
    streams: list[object] = []
    real = run.documents_stream

    def counted(documents):
        streams.append(documents)
        return real(documents)

    monkeypatch.setattr(run, "documents_stream", counted)
    monkeypatch.setattr(run, "STREAM_DOCUMENTS_BYTES", 0)
    streamed = ingest_to_store(docs, tmp_path / "streamed", embedder=m2v, quiet=True, buckets=4)
    assert len(streams) == 1, "the second run streamed"
    a = open_store(tmp_path / "held").manifest["files"]
    b = open_store(tmp_path / "streamed").manifest["files"]
    assert a == b
    assert streamed.original_count == held.original_count > 240
    assert not list((tmp_path / "streamed").glob(".partition-*")), "partition files removed"


def test_a_streamed_run_takes_a_dictionary_column_whole(tmp_path, m2v, monkeypatch) -> None:
    """A passthrough segments file with a categorical column streams too (its dictionary is
    one for every batch) and writes the store an in-memory run writes."""
    from arrowdedup.pipeline import documents, inputs, run

    folder = tmp_path / "in"
    folder.mkdir()
    pl.DataFrame({
        "doc_id": [f"d{i % 3}" for i in range(120)],
        "segment_id": [f"s{i}" for i in range(120)],
        "text": [f"Line {i % 40} of the handbook says {i % 7} things." for i in range(120)],
        "segment_type": ["paragraph"] * 120,
        "position": pl.Series(range(120), dtype=pl.Int32),
        "doc_type": pl.Series([["guide", "faq"][i % 2] for i in range(120)],
                              dtype=pl.Categorical),
    }).write_parquet(folder / "seg.parquet")
    monkeypatch.setattr(inputs, "PARTITION_BATCH", 50)
    monkeypatch.setattr(documents, "DOCUMENTS_BATCH", 50)
    monkeypatch.setattr(run, "STREAM_DOCUMENTS_BYTES", 1 << 40)
    ingest_to_store(folder, tmp_path / "held", embedder=m2v, quiet=True, buckets=2)
    monkeypatch.setattr(run, "STREAM_DOCUMENTS_BYTES", 0)
    ingest_to_store(folder, tmp_path / "streamed", embedder=m2v, quiet=True, buckets=2)
    assert open_store(tmp_path / "held").manifest["files"] == \
        open_store(tmp_path / "streamed").manifest["files"]


class OtherModel:
    """Another embedder of the same dimension: its vectors must not join the store."""

    name = "other-model"
    dim = 256

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        return np.ones((len(texts), self.dim), np.float32)


def test_other_embedding_model_is_refused_before_embedding(tmp_path, m2v) -> None:
    docs = write_docs(tmp_path / "docs")
    out = tmp_path / "store"
    ingest_to_store(docs, out, embedder=m2v, quiet=True)
    before = open_store(out).version
    other = OtherModel()
    with pytest.raises(StoreError, match=r"embedding model 'model2vec:m2v-minilm-l6-256'.*"
                                         r"'other-model'.*SPEC §9"):
        ingest_to_store(docs, out, embedder=other, quiet=True)
    assert other.calls == 0
    assert open_store(out).version == before


def test_bad_files_stop_the_run_unless_skipped(tmp_path, m2v) -> None:
    docs = write_docs(tmp_path / "docs")
    (docs / "broken.md").write_bytes(b"\xff\xfe\x00bad \xc3\x28 bytes")
    with pytest.raises(InputError, match=r"broken\.md"):
        ingest_to_store(docs, tmp_path / "s1", embedder=m2v, quiet=True)
    ingest_to_store(docs, tmp_path / "s2", embedder=m2v, quiet=True, skip_bad_files=True)
    skipped = open_store(tmp_path / "s2").manifest["skipped_files"]
    assert [s["path"] for s in skipped] == ["broken.md"]
    assert skipped[0]["reason"]


def test_user_salience_wins(tmp_path, m2v) -> None:
    rows = [{"doc_id": "d", "segment_id": f"d#{i}", "text": t, "segment_type": "paragraph",
             "position": i, "salience": s}
            for i, (t, s) in enumerate([("Invoices are final.", 0.42), ("Meters count.", 0.7)])]
    path = tmp_path / "in" / "seg.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = ingest_to_store(path, tmp_path / "store", embedder=m2v, quiet=True)
    got = dict(result.kept.select("segment_id", "salience_original").collect().iter_rows())
    assert got == pytest.approx({"d#0": 0.42, "d#1": 0.7})


def test_is_documents_input(tmp_path) -> None:
    assert is_documents_input(tmp_path)
    assert is_documents_input(tmp_path / "a.md")
    assert not is_documents_input(tmp_path / "a.parquet")
    assert not is_documents_input(tmp_path / "a.arrow")


def test_cli_ingest_documents_and_refuse_other_model(tmp_path) -> None:
    model = need(M2V_MODEL)
    docs = write_docs(tmp_path / "docs")
    out = tmp_path / "store"
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(docs), "--out", str(out), "--embedder",
                              f"model2vec:{model}", "--language-from-path", "{lang}/**",
                              "--key-columns", "code", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "Deduplication: " in res.output
    assert open_store(out).manifest["timings"]["embed"] >= 0
    other = tmp_path / "m2v-copy"
    shutil.copytree(model, other)
    res = runner.invoke(app, ["ingest", str(docs), "--out", str(out), "--embedder",
                              f"model2vec:{other}", "--quiet"])
    assert res.exit_code == 1
    assert "embeddings of two models must not mix" in res.output
    assert "Traceback" not in res.output


def test_an_embedder_with_a_segments_table_is_refused(tmp_path: Path) -> None:
    """A table is never embedded (SPEC §3): an embedder given with one would go unused while
    the run looked embedded (exact dedup only), so it is refused with the ways out."""
    from arrowdedup.pipeline.update import update_store

    table = pl.DataFrame({"doc_id": ["d", "d"], "segment_id": ["a", "b"],
                          "text": ["One idea.", "Another idea."],
                          "segment_type": ["paragraph", "paragraph"], "position": [0, 1]})
    table.write_parquet(tmp_path / "t.parquet")
    with pytest.raises(InputError, match="--embedding-model"):
        ingest_to_store(tmp_path / "t.parquet", tmp_path / "s", embedder="minilm", quiet=True)
    assert not (tmp_path / "s").exists()
    res = CliRunner().invoke(app, ["ingest", str(tmp_path / "t.parquet"), "--out",
                                   str(tmp_path / "s"), "--embedder", "minilm"])
    assert res.exit_code == 1 and "never embedded" in res.output
    assert "Traceback" not in res.output
    ingest_to_store(table, tmp_path / "s", quiet=True)  # without an embedder: exact dedup
    with pytest.raises(InputError, match="never embedded"):
        update_store(tmp_path / "s", table, embedder="minilm", quiet=True)
