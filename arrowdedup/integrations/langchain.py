"""LangChain (``langchain-core`` 1.x): ingestion dedup as a document transformer, retrieval's
cross-document dedup as a document compressor, and a retriever over an arrowdedup store.

- :class:`DedupTransformer` (``BaseDocumentTransformer``): :func:`arrowdedup.ingest` over a
  list of ``Document``\\ s; the document id is ``metadata[doc_id_key]`` (default
  ``"source"``), the position the list order. Kept documents carry ``salience``,
  ``near_duplicate_count`` and ``merged_ids`` in their metadata.
- :class:`DedupCompressor` (``BaseDocumentCompressor``): :func:`arrowdedup.dedupe_ranked` over
  a retriever's results in their order (it works inside ``ContextualCompressionRetriever``,
  from ``langchain-classic``); kept documents carry ``displaced_ids``.
- :class:`StoreRetriever` (``BaseRetriever``): :func:`arrowdedup.search` with its options.

Texts are embedded with ``embedder=`` (``"minilm"``, the default, or ``"model2vec:PATH"``) or
with a LangChain ``Embeddings`` object (``embeddings=``). The 0.90 threshold was set for
MiniLM: with another model, find its threshold with ``arrowdedup calibrate``. An item's id is
``Document.id``, else ``{doc_id}#{index in the list}``.

``pip install 'arrowdedup[langchain]'``.
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
    import langchain_core  # noqa: F401
    from langchain_core.callbacks import CallbackManagerForRetrieverRun, Callbacks
    from langchain_core.documents import BaseDocumentCompressor, BaseDocumentTransformer, Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, InstanceOf
except ImportError as err:
    raise MissingDependencyError("langchain-core", "langchain",
                                 "arrowdedup.integrations.langchain") from err

__all__ = ["DedupCompressor", "DedupTransformer", "StoreRetriever"]


def _embed(embedder: str | Embedder | None, embeddings: Embeddings | None) -> _common.EmbedFn:
    native = embeddings.embed_documents if embeddings is not None else None
    return _common.embed_choice(embedder, native, "embeddings")


def _kept_documents(documents: Sequence[Document], kept: _common.Kept) -> list[Document]:
    # A shallow copy with the new metadata (model_copy: no validation, the fields as they
    # were), so the caller's documents are left as they were.
    return [documents[row].model_copy(update={"metadata": metadata})
            for row, metadata in zip(kept.rows, kept.metadata, strict=True)]


class DedupTransformer(BaseDocumentTransformer):
    """Ingestion dedup (SPEC §2) over a list of ``Document``\\ s: exact copies dropped, near
    duplicates merged into the most salient one inside each document, the fact guard on."""

    def __init__(self, *, embedder: str | Embedder | None = None,
                 embeddings: Embeddings | None = None, config: DedupConfig | None = None,
                 doc_id_key: str = "source") -> None:
        self.embed = _embed(embedder, embeddings)
        self.config = config
        self.doc_id_key = doc_id_key

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any
                            ) -> Sequence[Document]:
        """The kept documents, in input order, with ``salience``, ``near_duplicate_count`` and
        ``merged_ids`` added to their metadata."""
        docs = list(documents)
        key = self.doc_id_key
        metadata = [d.metadata for d in docs]
        doc_ids = [m.get(key) for m in metadata]
        _common.missing_doc_ids(doc_ids, key, lambda i: metadata[i], "document")
        texts = [d.page_content for d in docs]
        ids = _common.default_ids([d.id for d in docs], doc_ids)
        matrix = _common.matrix_of(texts, None, self.embed)
        table = _common.segments_table([str(d) for d in doc_ids], ids, texts, matrix)
        return _kept_documents(docs, _common.ingest_kept(table, self.config, metadata))

    async def atransform_documents(self, documents: Sequence[Document], **kwargs: Any
                                   ) -> Sequence[Document]:
        return self.transform_documents(documents, **kwargs)


class DedupCompressor(BaseDocumentCompressor):
    """Retrieval's cross-document dedup (SPEC §4.5) over ranked documents, best first: a
    document that repeats a better-ranked one is dropped and listed in its
    ``displaced_ids``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    embedder: str | InstanceOf[Embedder] | None = None
    embeddings: InstanceOf[Embeddings] | None = None
    config: InstanceOf[DedupConfig] | None = None
    doc_id_key: str = "source"

    def model_post_init(self, context: Any, /) -> None:
        _embed(self.embedder, self.embeddings)  # refuses both at once, at construction

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        """The kept documents in their order, each with ``displaced_ids`` in its metadata."""
        docs = list(documents)
        metadata = [d.metadata for d in docs]
        texts = [d.page_content for d in docs]
        ids = _common.default_ids([d.id for d in docs],
                                  [m.get(self.doc_id_key) for m in metadata])
        matrix = _common.matrix_of(texts, None, _embed(self.embedder, self.embeddings))
        table = _common.ranked_table(ids, texts, matrix)
        return _kept_documents(docs, _common.ranked_kept(table, self.config, metadata))


class StoreRetriever(BaseRetriever):
    """:func:`arrowdedup.search` over a store as a LangChain retriever: the top ``k`` results
    (deduplicated across documents), each a ``Document`` whose metadata holds ``doc_id_key``
    (the doc_id), ``segment_id``, ``rank``, ``score``, ``cosine`` and ``displaced_ids``.

    A text query is embedded with the store's recorded model, ``embedder=``, or
    ``embeddings=`` (which must be the store's model: search refuses another one)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any  # a path or an arrowdedup Store
    k: int = 10
    mode: str = "hybrid"
    where: str | None = None
    min_cosine: float | None = None
    embedder: str | InstanceOf[Embedder] | None = None
    embeddings: InstanceOf[Embeddings] | None = None
    config: InstanceOf[DedupConfig] | None = None
    doc_id_key: str = "source"

    def model_post_init(self, context: Any, /) -> None:
        _embed(self.embedder, self.embeddings)  # refuses both at once, at construction

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        from ..retrieval.search import search

        embedder: str | Embedder | None = self.embedder
        if self.embeddings is not None:
            embedder = _common.QueryEmbedder(_common.model_name(self.embeddings),
                                             self.embeddings.embed_query(query))
        hits = search(self.store, query, embedder=embedder,
                      **_common.search_kwargs(self.k, self.mode, self.where, self.min_cosine,
                                              self.config))
        rows = _common.result_rows(hits.results)
        texts = hits.results.get_column("text").to_list()
        key = self.doc_id_key
        return [Document(page_content=text, id=row["segment_id"],
                         metadata={key: row.pop("doc_id"), **row})
                for text, row in zip(texts, rows, strict=True)]
