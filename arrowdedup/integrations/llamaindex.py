"""LlamaIndex (``llama-index-core``): ingestion dedup as a transformation for
``IngestionPipeline``, retrieval's cross-document dedup as a node postprocessor, and a
retriever over an arrowdedup store. The semantics are those of
:mod:`arrowdedup.integrations.langchain`.

- :class:`DedupTransform` (``TransformComponent``): :func:`arrowdedup.ingest` over nodes, per
  source document: a node's ``ref_doc_id`` when it has one, else ``metadata[doc_id_key]``
  (default ``"source"``); the position is the list order. Kept nodes carry ``salience``,
  ``near_duplicate_count`` and ``merged_ids`` (node ids) in their metadata.
- :class:`DedupPostprocessor` (``BaseNodePostprocessor``): :func:`arrowdedup.dedupe_ranked`
  over retrieved nodes in their order; kept nodes carry ``displaced_ids``.
- :class:`StoreRetriever` (``BaseRetriever``): :func:`arrowdedup.search` with its options.

A node's own ``embedding`` is used as it is; nodes without one are embedded with
``embedder=`` (``"minilm"``, the default, or ``"model2vec:PATH"``) or a LlamaIndex
``BaseEmbedding`` (``embed_model=``), over the node's text without its metadata (metadata
shared by every chunk of a file would pull them together). The keys written are excluded from
what LlamaIndex embeds and shows the LLM. With another model than MiniLM, find its threshold
with ``arrowdedup calibrate``.

``pip install 'arrowdedup[llamaindex]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import DedupConfig
from ..embed.embedders import Embedder
from ..errors import MissingDependencyError
from . import _common

try:
    # The top-level package first: a blocked or broken install is then seen even when its
    # submodules were imported before.
    import llama_index.core  # noqa: F401
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import (
        BaseNode,
        MetadataMode,
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        TextNode,
        TransformComponent,
    )
    from pydantic import InstanceOf
except ImportError as err:
    raise MissingDependencyError("llama-index-core", "llamaindex",
                                 "arrowdedup.integrations.llamaindex") from err

__all__ = ["DedupPostprocessor", "DedupTransform", "StoreRetriever"]


def _embed(embedder: str | Embedder | None, embed_model: BaseEmbedding | None
           ) -> _common.EmbedFn:
    native = embed_model.get_text_embedding_batch if embed_model is not None else None
    return _common.embed_choice(embedder, native, "embed_model")


def _kept_nodes(nodes: Sequence[BaseNode], kept: _common.Kept) -> list[BaseNode]:
    # A shallow copy with the new metadata (model_copy: no validation, the other fields as they
    # were), so the caller's nodes are left as they were, whose new keys stay out of the text
    # LlamaIndex embeds and gives the LLM.
    keys = kept.keys
    out = []
    for row, metadata in zip(kept.rows, kept.metadata, strict=True):
        node = nodes[row]
        out.append(node.model_copy(update={
            "metadata": metadata,
            "excluded_embed_metadata_keys": _union(node.excluded_embed_metadata_keys, keys),
            "excluded_llm_metadata_keys": _union(node.excluded_llm_metadata_keys, keys),
        }))
    return out


def _union(old: list[str], new: tuple[str, ...]) -> list[str]:
    return old + [k for k in new if k not in old] if old else list(new)


def _texts(nodes: Sequence[BaseNode]) -> list[str]:
    # A TextNode's content without metadata is its text (TextNode.get_content), read directly
    # for that class: the call costs a microsecond a node. Other classes are asked.
    return [n.text if type(n) is TextNode else n.get_content(metadata_mode=MetadataMode.NONE)
            for n in nodes]


def _source_id(node: BaseNode) -> str | None:
    # BaseNode.ref_doc_id (its source node's id), with the same refusal of a list, read from
    # the relationships in one look-up: the property goes through a second property
    # (source_node) and looks twice, about twice the cost over 10,000 nodes.
    source = node.relationships.get(NodeRelationship.SOURCE)
    if source is None:
        return None
    if isinstance(source, list):
        raise ValueError("Source object must be a single RelatedNodeInfo object")
    return source.node_id


class DedupTransform(TransformComponent):
    """Ingestion dedup (SPEC §2) of the nodes of each source document, for
    ``IngestionPipeline(transformations=[..., DedupTransform(...)])``."""

    embedder: str | InstanceOf[Embedder] | None = None
    embed_model: InstanceOf[BaseEmbedding] | None = None
    config: InstanceOf[DedupConfig] | None = None
    doc_id_key: str = "source"

    def model_post_init(self, context: Any, /) -> None:
        _embed(self.embedder, self.embed_model)  # refuses both at once, at construction

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """The kept nodes, in input order, with ``salience``, ``near_duplicate_count`` and
        ``merged_ids`` added to their metadata."""
        items = list(nodes)
        key = self.doc_id_key
        doc_ids = [_source_id(n) or n.metadata.get(key) for n in items]
        _common.missing_doc_ids(doc_ids, key, lambda i: items[i].metadata, "node")
        texts = _texts(items)
        matrix = _common.matrix_of(texts, [n.embedding for n in items],
                                   _embed(self.embedder, self.embed_model))
        table = _common.segments_table([str(d) for d in doc_ids], [n.node_id for n in items],
                                       texts, matrix)
        return _kept_nodes(items, _common.ingest_kept(table, self.config,
                                                      [n.metadata for n in items]))


class DedupPostprocessor(BaseNodePostprocessor):
    """Retrieval's cross-document dedup (SPEC §4.5) over retrieved nodes, best first: a node
    that repeats a better-ranked one is dropped and listed in its ``displaced_ids``."""

    embedder: str | InstanceOf[Embedder] | None = None
    embed_model: InstanceOf[BaseEmbedding] | None = None
    config: InstanceOf[DedupConfig] | None = None

    def model_post_init(self, context: Any, /) -> None:
        _embed(self.embedder, self.embed_model)  # refuses both at once, at construction

    @classmethod
    def class_name(cls) -> str:
        return "ArrowDedupPostprocessor"

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        inner = [n.node for n in nodes]
        texts = _texts(inner)
        matrix = _common.matrix_of(texts, [n.embedding for n in inner],
                                   _embed(self.embedder, self.embed_model))
        table = _common.ranked_table([n.node_id for n in inner], texts, matrix)
        kept = _common.ranked_kept(table, self.config, [n.metadata for n in inner])
        return [NodeWithScore(node=node, score=nodes[row].score)
                for row, node in zip(kept.rows, _kept_nodes(inner, kept), strict=True)]


class StoreRetriever(BaseRetriever):
    """:func:`arrowdedup.search` over a store as a LlamaIndex retriever: the top ``k`` results
    (deduplicated across documents) as ``NodeWithScore`` (score: the normalised RRF score),
    each a ``TextNode`` whose id is the segment_id and whose metadata holds ``doc_id_key`` (the
    doc_id), ``segment_id``, ``rank``, ``score``, ``cosine`` and ``displaced_ids``.

    A text query is embedded with the store's recorded model, ``embedder=``, or
    ``embed_model=`` (which must be the store's model: search refuses another one)."""

    def __init__(self, *, store: Any, k: int = 10, mode: str = "hybrid",
                 where: str | None = None, min_cosine: float | None = None,
                 embedder: str | Embedder | None = None,
                 embed_model: BaseEmbedding | None = None, config: DedupConfig | None = None,
                 doc_id_key: str = "source",
                 callback_manager: CallbackManager | None = None) -> None:
        _embed(embedder, embed_model)  # refuses both at once
        self.store = store
        self.k = k
        self.mode = mode
        self.where = where
        self.min_cosine = min_cosine
        self.embedder = embedder
        self.embed_model = embed_model
        self.config = config
        self.doc_id_key = doc_id_key
        super().__init__(callback_manager=callback_manager)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        from ..retrieval.search import search

        query = query_bundle.query_str
        embedder: str | Embedder | None = self.embedder
        if self.embed_model is not None:
            vector = query_bundle.embedding or self.embed_model.get_query_embedding(query)
            embedder = _common.QueryEmbedder(_common.model_name(self.embed_model), vector)
        hits = search(self.store, query, embedder=embedder,
                      **_common.search_kwargs(self.k, self.mode, self.where, self.min_cosine,
                                              self.config))
        rows = _common.result_rows(hits.results)
        texts = hits.results.get_column("text").to_list()
        key = self.doc_id_key
        out = []
        for text, row in zip(texts, rows, strict=True):
            metadata = {key: row.pop("doc_id"), **row}
            node = TextNode(id_=row["segment_id"], text=text, metadata=metadata,
                            excluded_embed_metadata_keys=list(metadata),
                            excluded_llm_metadata_keys=[k for k in metadata if k != key])
            out.append(NodeWithScore(node=node, score=row["score"]))
        return out
