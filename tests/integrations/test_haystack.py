"""arrowdedup.integrations.haystack against the real haystack-ai: DedupDocuments in an indexing
pipeline and in a query pipeline makes the library's decisions."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import polars as pl
import pytest

import arrowdedup as ad
from arrowdedup.errors import InputError, MissingDependencyError
from tests.helpers import M2V_MODEL, Counting, need

pytest.importorskip("haystack", reason="the [haystack] extra is not installed")
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.components.writers import DocumentWriter
from haystack.document_stores.in_memory import InMemoryDocumentStore

from arrowdedup.integrations.haystack import DedupDocuments


@pytest.fixture(scope="module")
def vectors(sample_segments, embedder):
    return ad.embed_texts(sample_segments.get_column("text").to_list(), embedder)[0]


def make_documents(sample_segments, vectors=None, key="source"):
    return [Document(content=text, meta={key: doc, "n": i},
                     embedding=None if vectors is None else vectors[i].tolist())
            for i, (doc, text) in enumerate(sample_segments.select("doc_id", "text")
                                            .iter_rows())]


def library_ingest(documents, config=None):
    vectors = np.asarray([d.embedding for d in documents], dtype=np.float32)
    return ad.ingest(pl.DataFrame({
        "doc_id": [d.meta["source"] for d in documents],
        "segment_id": [d.id for d in documents], "text": [d.content for d in documents],
        "segment_type": ["paragraph"] * len(documents),
        "position": pl.Series(range(len(documents)), dtype=pl.Int32),
        "embedding": pl.Series(vectors)}), config)


def test_ingestion_mode_in_an_indexing_pipeline(sample_segments, vectors, embedder):
    counting = Counting(embedder)
    store = InMemoryDocumentStore()
    pipeline = Pipeline()
    pipeline.add_component("dedup", DedupDocuments(mode="ingestion", embedder=counting))
    pipeline.add_component("writer", DocumentWriter(document_store=store))
    pipeline.connect("dedup.documents", "writer.documents")
    documents = make_documents(sample_segments, vectors)
    out = pipeline.run({"dedup": {"documents": documents}})
    assert counting.calls == 0  # the documents' own embeddings were used
    result = library_ingest(documents)
    assert result.final_count < result.original_count
    assert out["writer"]["documents_written"] == result.final_count
    written = sorted(store.filter_documents(), key=lambda d: d.meta["n"])
    assert [d.id for d in written] == result.kept.get_column("segment_id").to_list()
    assert [d.meta["near_duplicate_count"] for d in written] == \
        result.kept.get_column("near_duplicate_count").to_list()
    assert all({"salience", "near_duplicate_count", "merged_ids"} <= set(d.meta)
               for d in written)
    assert all(set(d.meta) == {"source", "n"} for d in documents)


def test_run_returns_documents_and_is_deterministic(sample_segments, vectors):
    component = DedupDocuments()
    one = component.run(documents=make_documents(sample_segments, vectors))
    two = DedupDocuments().run(documents=make_documents(sample_segments, vectors))
    assert list(one) == ["documents"]
    assert [(d.id, d.meta) for d in one["documents"]] == [(d.id, d.meta)
                                                          for d in two["documents"]]


def test_exact_copies_share_an_id_and_are_still_named(vectors, sample_segments):
    docs = make_documents(sample_segments.head(3), vectors)
    copy = Document(content=docs[0].content, meta=dict(docs[0].meta),
                    embedding=docs[0].embedding)
    assert copy.id == docs[0].id
    out = DedupDocuments().run(documents=[*docs, copy])["documents"]
    assert out[0].meta["merged_ids"] == [f"{docs[0].id}#3"]


def test_doc_id_key_and_config(sample_segments, vectors):
    by_key = DedupDocuments(doc_id_key="file").run(
        documents=make_documents(sample_segments, vectors, key="file"))["documents"]
    default = DedupDocuments().run(documents=make_documents(sample_segments, vectors))
    assert [d.content for d in by_key] == [d.content for d in default["documents"]]
    with pytest.raises(InputError, match=r"no metadata 'source'"):
        DedupDocuments().run(documents=make_documents(sample_segments, vectors, key="file"))
    config = ad.DedupConfig(ingestion=ad.IngestionConfig(similarity_threshold=0.8,
                                                         fact_guard=False))
    documents = make_documents(sample_segments, vectors)
    loose = DedupDocuments(config=config).run(documents=documents)["documents"]
    assert [d.id for d in loose] == \
        library_ingest(documents, config).kept.get_column("segment_id").to_list()
    with pytest.raises(InputError, match="mode="):
        DedupDocuments(mode="both")


def test_ranked_mode_in_a_query_pipeline(sample_segments, embedder):
    store = InMemoryDocumentStore()
    store.write_documents(make_documents(sample_segments))
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=30))
    m2v = f"model2vec:{need(M2V_MODEL)}"
    pipeline.add_component("dedup", DedupDocuments(mode="ranked", embedder=m2v))
    pipeline.connect("retriever.documents", "dedup.documents")
    query = "how many times is a failed webhook delivery retried"
    out = pipeline.run({"retriever": {"query": query}}, include_outputs_from={"retriever"})
    ranked = out["retriever"]["documents"]
    kept = out["dedup"]["documents"]
    texts = [d.content for d in ranked]
    expected = ad.dedupe_ranked(pl.DataFrame({
        "segment_id": [d.id for d in ranked], "text": texts,
        "embedding": pl.Series(ad.embed_texts(texts, embedder)[0])}))
    assert [d.id for d in kept] == expected.get_column("segment_id").to_list()
    assert [d.meta["displaced_ids"] for d in kept] == \
        expected.get_column("displaced_ids").to_list()
    assert [d.score for d in kept] == [d.score for d in ranked if d.id in
                                       set(expected.get_column("segment_id").to_list())]


def test_pipeline_round_trip(sample_segments):
    config = ad.DedupConfig(retrieval=ad.RetrievalConfig(similarity_threshold=0.93))
    pipeline = Pipeline()
    pipeline.add_component("dedup", DedupDocuments(mode="ranked", embedder="minilm",
                                                   config=config))
    loaded = Pipeline.loads(pipeline.dumps(), allowed_modules=["arrowdedup.integrations.haystack"])
    component = loaded.get_component("dedup")
    assert component.mode == "ranked" and component.config == config


def test_missing_extra_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "haystack", None)
    monkeypatch.delitem(sys.modules, "arrowdedup.integrations.haystack", raising=False)
    with pytest.raises(MissingDependencyError, match=r"pip install 'arrowdedup\[haystack\]'"):
        importlib.import_module("arrowdedup.integrations.haystack")
