"""arrowdedup.integrations.llamaindex against the real llama-index-core: the transform inside
an IngestionPipeline, the postprocessor and the retriever make the library's decisions."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import polars as pl
import pytest

import arrowdedup as ad
from arrowdedup.errors import EmbedderError, InputError, MissingDependencyError
from tests.helpers import M2V_MODEL, ROOT, Counting, need

pytest.importorskip("llama_index.core", reason="the [llamaindex] extra is not installed")
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import (
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
    TransformComponent,
)

from arrowdedup.integrations.llamaindex import (
    DedupPostprocessor,
    DedupTransform,
    StoreRetriever,
)


class Model2VecEmbedding(BaseEmbedding):
    """A LlamaIndex embedding model over the shared Model2Vec model, written the way
    LlamaIndex documents custom embeddings."""

    def _get_text_embedding(self, text):
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts):
        return _m2v().encode(list(texts)).tolist()

    def _get_query_embedding(self, query):
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query):
        return self._get_query_embedding(query)


_MODEL = {}


def _m2v():
    if "m" not in _MODEL:
        from arrowdedup.embed.embedders import Model2VecEmbedder

        _MODEL["m"] = Model2VecEmbedder(need(M2V_MODEL))
    return _MODEL["m"]


@pytest.fixture(scope="module")
def vectors(sample_segments, embedder):
    return ad.embed_texts(sample_segments.get_column("text").to_list(), embedder)[0]


def make_nodes(sample_segments, vectors=None, *, by_ref=True):
    """One TextNode per sample segment; its source document as ``ref_doc_id`` (``by_ref``) or
    as ``metadata['source']``."""
    nodes = []
    for i, (doc, text) in enumerate(sample_segments.select("doc_id", "text").iter_rows()):
        relationships = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)} if by_ref \
            else {}
        nodes.append(TextNode(id_=f"n{i}", text=text, relationships=relationships,
                              metadata={} if by_ref else {"source": doc},
                              embedding=None if vectors is None else vectors[i].tolist()))
    return nodes


def library_kept(sample_segments, vectors, config=None):
    n = sample_segments.height
    table = sample_segments.select("doc_id", "text").with_columns(
        segment_id=pl.Series([f"n{i}" for i in range(n)]),
        segment_type=pl.lit("paragraph"),
        position=pl.Series(range(n), dtype=pl.Int32),
        embedding=pl.Series(np.asarray(vectors, dtype=np.float32)))
    return ad.ingest(table, config)


def test_transform_in_an_ingestion_pipeline_makes_the_library_decisions(sample_segments,
                                                                        vectors, embedder):
    counting = Counting(embedder)
    transform = DedupTransform(embedder=counting)
    assert isinstance(transform, TransformComponent)
    nodes = make_nodes(sample_segments, vectors)
    out = IngestionPipeline(transformations=[transform]).run(nodes=nodes)
    assert counting.calls == 0  # the nodes' own embeddings were used
    result = library_kept(sample_segments, vectors)
    assert [n.node_id for n in out] == result.kept.get_column("segment_id").to_list()
    assert [n.metadata["near_duplicate_count"] for n in out] == \
        result.kept.get_column("near_duplicate_count").to_list()
    assert sum(len(n.metadata["merged_ids"]) for n in out) == \
        result.original_count - result.final_count
    for node in out:
        assert {"salience", "near_duplicate_count", "merged_ids"} <= set(node.metadata)
        # The keys stay out of what LlamaIndex embeds and shows the LLM.
        for mode in (MetadataMode.EMBED, MetadataMode.LLM):
            shown = node.get_content(metadata_mode=mode)
            assert "merged_ids:" not in shown and "salience:" not in shown
    assert all(not n.metadata for n in nodes)  # the caller's nodes are untouched


def test_ref_doc_id_wins_then_doc_id_key(sample_segments, vectors):
    by_ref = DedupTransform()(make_nodes(sample_segments, vectors))
    by_key = DedupTransform()(make_nodes(sample_segments, vectors, by_ref=False))
    assert [n.node_id for n in by_ref] == [n.node_id for n in by_key]
    renamed = make_nodes(sample_segments, vectors, by_ref=False)
    for node in renamed:
        node.metadata = {"file": node.metadata["source"]}
    by_file = DedupTransform(doc_id_key="file")(renamed)
    assert [n.node_id for n in by_file] == [n.node_id for n in by_key]
    with pytest.raises(InputError, match=r"no metadata 'source'"):
        DedupTransform()(renamed)


def test_transform_embeds_nodes_without_embeddings(sample_segments, vectors, embedder):
    counting = Counting(embedder)
    out = DedupTransform(embedder=counting)(make_nodes(sample_segments))
    assert counting.calls > 0  # in batches
    assert [n.node_id for n in out] == \
        library_kept(sample_segments, vectors).kept.get_column("segment_id").to_list()


def test_transform_with_a_llamaindex_embed_model(sample_segments, vectors):
    out = DedupTransform(embed_model=Model2VecEmbedding())(make_nodes(sample_segments[:150]))
    raw = _m2v().encode(sample_segments.get_column("text").head(150).to_list())
    assert [n.node_id for n in out] == \
        library_kept(sample_segments[:150], raw).kept.get_column("segment_id").to_list()
    with pytest.raises(InputError, match="not both"):
        DedupTransform(embedder="minilm", embed_model=Model2VecEmbedding())


def test_transform_is_deterministic_and_follows_the_config(sample_segments, vectors):
    config = ad.DedupConfig(ingestion=ad.IngestionConfig(fact_guard=False))
    one = DedupTransform(config=config)(make_nodes(sample_segments, vectors))
    two = DedupTransform(config=config)(make_nodes(sample_segments, vectors))
    assert [(n.node_id, n.metadata) for n in one] == [(n.node_id, n.metadata) for n in two]
    assert [n.node_id for n in one] == \
        library_kept(sample_segments, vectors, config).kept.get_column("segment_id").to_list()


def test_postprocessor_makes_the_library_decisions(sample_segments, vectors, embedder):
    counting = Counting(embedder)
    post = DedupPostprocessor(embedder=counting)
    assert isinstance(post, BaseNodePostprocessor)
    nodes = make_nodes(sample_segments, vectors)[::3]
    ranked = [NodeWithScore(node=n, score=1.0 - i / 1000) for i, n in enumerate(nodes)]
    kept = post.postprocess_nodes(ranked, query_str="webhook retries")
    assert counting.calls == 0
    expected = ad.dedupe_ranked(pl.DataFrame({
        "segment_id": [n.node_id for n in nodes], "text": [n.text for n in nodes],
        "embedding": pl.Series(np.asarray([n.embedding for n in nodes], dtype=np.float32))}))
    assert expected.height < len(nodes)
    assert [n.node.node_id for n in kept] == expected.get_column("segment_id").to_list()
    assert [n.node.metadata["displaced_ids"] for n in kept] == \
        expected.get_column("displaced_ids").to_list()
    scores = {n.node.node_id: n.score for n in ranked}
    assert [n.score for n in kept] == [scores[n.node.node_id] for n in kept]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("li") / "store"
    ad.ingest_to_store([ROOT / "data" / "sample"], out, embedder=f"model2vec:{need(M2V_MODEL)}",
                       quiet=True)
    return out


@pytest.mark.parametrize("options", [{"k": 3}, {"k": 4, "mode": "semantic"},
                                     {"k": 5, "where": "doc_id LIKE 'docs/%'"}])
def test_store_retriever_is_search(store, options):
    query = "how often are failed webhooks retried"
    got = StoreRetriever(store=store, **options).retrieve(query)
    hits = ad.search(store, query, **options).results
    assert [n.node.node_id for n in got] == hits.get_column("segment_id").to_list()
    assert [n.node.text for n in got] == hits.get_column("text").to_list()
    assert [n.score for n in got] == hits.get_column("score").to_list()
    assert [n.node.metadata["source"] for n in got] == hits.get_column("doc_id").to_list()


def test_store_retriever_with_an_embed_model_of_another_model_is_refused(store):
    with pytest.raises(EmbedderError, match="not the store's model"):
        StoreRetriever(store=store, embed_model=Model2VecEmbedding(model_name="other")
                       ).retrieve("webhooks")


def test_missing_extra_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_index", None)
    monkeypatch.delitem(sys.modules, "arrowdedup.integrations.llamaindex", raising=False)
    with pytest.raises(MissingDependencyError,
                       match=r"pip install 'arrowdedup\[llamaindex\]'"):
        importlib.import_module("arrowdedup.integrations.llamaindex")
