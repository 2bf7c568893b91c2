"""arrowdedup.integrations.langchain against the real langchain-core / langchain-classic:
the adapters make exactly the library's decisions on the same inputs."""

from __future__ import annotations

import importlib
import sys
import warnings

import numpy as np
import polars as pl
import pytest

import arrowdedup as ad
from arrowdedup.errors import InputError, MissingDependencyError
from tests.helpers import M2V_MODEL, Counting, need

pytest.importorskip("langchain_core", reason="the [langchain] extra is not installed")
from langchain_core.documents import (
    BaseDocumentCompressor,
    BaseDocumentTransformer,
    Document,
)
from langchain_core.retrievers import BaseRetriever

from arrowdedup.integrations.langchain import (
    DedupCompressor,
    DedupTransformer,
    StoreRetriever,
)

INGESTION_KEYS = {"salience", "near_duplicate_count", "merged_ids"}


@pytest.fixture(scope="module")
def m2v():
    return f"model2vec:{need(M2V_MODEL)}"


@pytest.fixture(scope="module")
def documents(sample_segments):
    frame = sample_segments.select("doc_id", "text")
    return [Document(page_content=t, metadata={"source": d, "kind": "sample"})
            for d, t in frame.iter_rows()]


def library_ingest(documents, embedder, config=None, key="source"):
    """What ingest() decides on the same documents, built by hand."""
    texts = [d.page_content for d in documents]
    docs = [d.metadata[key] for d in documents]
    vectors, _ = ad.embed_texts(texts, embedder)
    table = pl.DataFrame({
        "doc_id": docs, "segment_id": [f"{d}#{i}" for i, d in enumerate(docs)], "text": texts,
        "segment_type": ["paragraph"] * len(texts),
        "position": pl.Series(range(len(texts)), dtype=pl.Int32),
        "embedding": pl.Series(vectors)})
    return ad.ingest(table, config)


def test_transformer_makes_the_library_decisions(documents, m2v, embedder):
    transformer = DedupTransformer(embedder=m2v)
    assert isinstance(transformer, BaseDocumentTransformer)
    kept = transformer.transform_documents(documents)
    result = library_ingest(documents, embedder)
    assert result.decisions.filter(pl.col("action") == "merged_near").height > 0
    assert result.decisions.filter(pl.col("action") == "dropped_exact").height > 0
    rows = [int(s.rsplit("#", 1)[1]) for s in result.kept.get_column("segment_id").to_list()]
    assert [(d.page_content, d.metadata["source"]) for d in kept] == [
        (documents[r].page_content, documents[r].metadata["source"]) for r in rows]
    assert [d.metadata["salience"] for d in kept] == pytest.approx(
        result.kept.get_column("salience").cast(pl.Float64).to_list())
    assert [d.metadata["near_duplicate_count"] for d in kept] == \
        result.kept.get_column("near_duplicate_count").to_list()
    removed = result.decisions.filter(pl.col("representative_id").is_not_null())
    merged: dict[str, list[str]] = {}
    for seg, rep in removed.select("segment_id", "representative_id").iter_rows():
        merged.setdefault(rep, []).append(seg)
    for doc, seg in zip(kept, result.kept.get_column("segment_id").to_list(), strict=True):
        assert doc.metadata["merged_ids"] == merged.get(seg, [])
        assert set(doc.metadata) == {"source", "kind"} | INGESTION_KEYS
    # The caller's documents are left as they were.
    assert all(set(d.metadata) == {"source", "kind"} for d in documents)


def test_transformer_is_deterministic_and_follows_the_config(documents, m2v, embedder):
    one = DedupTransformer(embedder=m2v).transform_documents(documents)
    two = DedupTransformer(embedder=m2v).transform_documents(documents)
    assert [(d.page_content, d.metadata) for d in one] == [(d.page_content, d.metadata)
                                                           for d in two]
    config = ad.DedupConfig(ingestion=ad.IngestionConfig(fact_guard=False,
                                                         similarity_threshold=0.85))
    loose = DedupTransformer(embedder=m2v, config=config).transform_documents(documents)
    assert len(loose) == library_ingest(documents, embedder, config).final_count
    assert len(loose) < len(one)


def test_doc_id_key_and_a_missing_key(documents, m2v):
    renamed = [Document(page_content=d.page_content, metadata={"url": d.metadata["source"]})
               for d in documents]
    by_url = DedupTransformer(embedder=m2v, doc_id_key="url").transform_documents(renamed)
    by_source = DedupTransformer(embedder=m2v).transform_documents(documents)
    assert [d.page_content for d in by_url] == [d.page_content for d in by_source]
    with pytest.raises(InputError, match=r"no metadata 'source'.*doc_id_key="):
        DedupTransformer(embedder=m2v).transform_documents(renamed)


def test_transformer_embeds_once_with_a_given_embedder(documents, embedder):
    counting = Counting(embedder)
    DedupTransformer(embedder=counting).transform_documents(documents[:50])
    assert counting.calls == 1


def test_embedder_and_embeddings_together_are_refused(m2v):
    from langchain_core.embeddings import DeterministicFakeEmbedding

    with pytest.raises(InputError, match="not both"):
        DedupTransformer(embedder=m2v, embeddings=DeterministicFakeEmbedding(size=8))
    with pytest.raises(InputError, match="not both"):
        DedupCompressor(embedder=m2v, embeddings=DeterministicFakeEmbedding(size=8))


@pytest.fixture(scope="module")
def hf_embeddings():
    """LangChain's own HuggingFaceEmbeddings over the packaged MiniLM (offline)."""
    community = pytest.importorskip("langchain_community.embeddings",
                                    reason="the [langchain] extra is not installed")
    from arrowdedup.embed.minilm_onnx import packaged_model_dir

    with warnings.catch_warnings():  # deprecated for langchain-huggingface, still LangChain's
        warnings.simplefilter("ignore")
        return community.HuggingFaceEmbeddings(model_name=str(packaged_model_dir()))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_transformer_with_langchain_embeddings(documents, hf_embeddings):
    docs = documents[:120]
    kept = DedupTransformer(embeddings=hf_embeddings).transform_documents(docs)
    texts = [d.page_content for d in docs]
    vectors = np.asarray(hf_embeddings.embed_documents(texts), dtype=np.float32)
    table = pl.DataFrame({
        "doc_id": [d.metadata["source"] for d in docs],
        "segment_id": [str(i) for i in range(len(docs))], "text": texts,
        "segment_type": ["paragraph"] * len(docs),
        "position": pl.Series(range(len(docs)), dtype=pl.Int32),
        "embedding": pl.Series(vectors)})
    expected = ad.ingest(table).kept
    assert [d.page_content for d in kept] == expected.get_column("text").to_list()


def ranked_documents(documents):
    """Ranked results that cross documents: the sample's texts that several pages share, then
    the rest, in a fixed order."""
    return [Document(page_content=d.page_content, metadata=dict(d.metadata),
                     id=f"r{i}") for i, d in enumerate(documents[::3])]


def test_compressor_makes_the_library_decisions(documents, m2v, embedder):
    ranked = ranked_documents(documents)
    compressor = DedupCompressor(embedder=m2v)
    assert isinstance(compressor, BaseDocumentCompressor)
    kept = compressor.compress_documents(ranked, "query")
    texts = [d.page_content for d in ranked]
    vectors, _ = ad.embed_texts(texts, embedder)
    expected = ad.dedupe_ranked(pl.DataFrame({
        "segment_id": [d.id for d in ranked], "text": texts, "embedding": pl.Series(vectors)}))
    assert expected.height < len(ranked)
    assert [d.id for d in kept] == expected.get_column("segment_id").to_list()
    assert [d.metadata["displaced_ids"] for d in kept] == \
        expected.get_column("displaced_ids").to_list()
    again = compressor.compress_documents(ranked, "query")
    assert [(d.id, d.metadata) for d in again] == [(d.id, d.metadata) for d in kept]


def test_compressor_inside_contextual_compression_retriever(documents, m2v, embedder):
    pytest.importorskip("sklearn", reason="scikit-learn, which LangChain's TFIDFRetriever needs, "
                        "is in no extra of ours")
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_community.retrievers import TFIDFRetriever

    base = TFIDFRetriever.from_documents(documents, k=30)
    retriever = ContextualCompressionRetriever(base_compressor=DedupCompressor(embedder=m2v),
                                               base_retriever=base)
    query = "how many times is a failed webhook retried"
    results = base.invoke(query)
    kept = retriever.invoke(query)
    texts = [d.page_content for d in results]
    vectors, _ = ad.embed_texts(texts, embedder)
    ids = [f"{d.metadata['source']}#{i}" for i, d in enumerate(results)]
    expected = ad.dedupe_ranked(pl.DataFrame({
        "segment_id": ids, "text": texts, "embedding": pl.Series(vectors)}))
    assert [d.page_content for d in kept] == expected.get_column("text").to_list()
    assert [d.metadata["displaced_ids"] for d in kept] == \
        expected.get_column("displaced_ids").to_list()


@pytest.fixture(scope="module")
def store(tmp_path_factory, sample_segments, m2v):
    from tests.helpers import ROOT

    out = tmp_path_factory.mktemp("lc") / "store"
    ad.ingest_to_store([ROOT / "data" / "sample"], out, embedder=m2v, quiet=True)
    return out


@pytest.mark.parametrize("options", [
    {"k": 3},
    {"k": 5, "mode": "keyword"},
    {"k": 4, "where": "doc_id LIKE 'docs/%'", "min_cosine": 0.3},
])
def test_store_retriever_is_search(store, options):
    retriever = StoreRetriever(store=store, **options)
    assert isinstance(retriever, BaseRetriever)
    query = "how often are failed webhooks retried"
    docs = retriever.invoke(query)
    hits = ad.search(store, query, **options).results
    assert [d.id for d in docs] == hits.get_column("segment_id").to_list()
    assert [d.page_content for d in docs] == hits.get_column("text").to_list()
    assert [d.metadata["source"] for d in docs] == hits.get_column("doc_id").to_list()
    assert [d.metadata["displaced_ids"] for d in docs] == \
        hits.get_column("displaced_ids").to_list()
    assert [d.metadata["score"] for d in docs] == hits.get_column("score").to_list()


def test_missing_extra_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.delitem(sys.modules, "arrowdedup.integrations.langchain", raising=False)
    with pytest.raises(MissingDependencyError, match=r"pip install 'arrowdedup\[langchain\]'"):
        importlib.import_module("arrowdedup.integrations.langchain")


def test_store_retriever_embeds_the_query_with_langchain_embeddings(store, embedder):
    """A LangChain Embeddings of the store's own model embeds the query (BM25 still reads its
    words); one of another model is refused, naming both."""
    from langchain_core.embeddings import Embeddings

    class StoreModel(Embeddings):
        model_name = embedder.name

        def embed_documents(self, texts):
            return embedder.encode(list(texts)).tolist()

        def embed_query(self, text):
            return self.embed_documents([text])[0]

    query = "how often are failed webhooks retried"
    docs = StoreRetriever(store=store, k=4, embeddings=StoreModel()).invoke(query)
    hits = ad.search(store, query, k=4, embedder=embedder).results
    assert [d.id for d in docs] == hits.get_column("segment_id").to_list()
    assert all(d.metadata["cosine"] is not None for d in docs)
    other = StoreModel()
    other.model_name = "some-other-model"
    with pytest.raises(ad.EmbedderError, match="not the store's model"):
        StoreRetriever(store=store, embeddings=other).invoke(query)
