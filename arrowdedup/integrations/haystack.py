"""Haystack (``haystack-ai``): :class:`DedupDocuments`, a component that deduplicates
``Document``\\ s, in an indexing pipeline (``mode="ingestion"``: :func:`arrowdedup.ingest`)
or in a query pipeline (``mode="ranked"``: :func:`arrowdedup.dedupe_ranked` over a
retriever's or ranker's documents, best first).

The document id is ``meta[doc_id_key]`` (default ``"source"``; Haystack's splitters record
the original's id as ``source_id``), an item's id is ``Document.id``, the position the list
order. A document's own ``embedding`` is used as it is; the others are embedded with
``embedder=`` (``"minilm"``, the default, or ``"model2vec:PATH"``). Kept documents carry
``salience``, ``near_duplicate_count`` and ``merged_ids`` (ingestion) or ``displaced_ids``
(ranked) in their ``meta``. With another model than MiniLM, find its threshold with
``arrowdedup calibrate``.

``pip install 'arrowdedup[haystack]'``.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np

from ..config import DedupConfig
from ..embed.embedders import Embedder
from ..errors import InputError, MissingDependencyError
from . import _common

try:
    # The top-level package first: a blocked or broken install is then seen even when its
    # submodules were imported before.
    import haystack  # noqa: F401
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as err:
    raise MissingDependencyError("haystack-ai", "haystack",
                                 "arrowdedup.integrations.haystack") from err

__all__ = ["DedupDocuments"]

MODES = ("ingestion", "ranked")


def _with_meta(doc: Document, meta: dict[str, Any]) -> Document:
    """A new document with ``meta``: what ``dataclasses.replace(doc, meta=meta)`` gives (the
    same id, no hash recomputed), the caller's document left as it was."""
    # replace() runs __init__ and __post_init__ again, every field set through Haystack's
    # mutation-warning __setattr__: 4.5 us a document. For Haystack's own Document whose
    # __post_init__ would change nothing (an id, a list embedding), a copy of its fields is
    # the same document in 1.8 us. The warning guards shared documents; the copy is not yet.
    if type(doc) is not Document or not doc.id or isinstance(doc.embedding, np.ndarray):
        return dataclasses.replace(doc, meta=meta)
    new = copy.copy(doc)
    object.__setattr__(new, "meta", meta)
    return new


@component
class DedupDocuments:
    """Deduplicate documents: ``run(documents=[...])`` returns ``{"documents": [...]}``, the
    kept ones in their order with arrowdedup's keys added to their ``meta``."""

    def __init__(self, *, mode: str = "ingestion", embedder: str | Embedder | None = None,
                 config: DedupConfig | None = None, doc_id_key: str = "source") -> None:
        if mode not in MODES:
            raise InputError(f"mode={mode!r} is not a DedupDocuments mode; use 'ingestion' "
                             "(inside each document, before writing) or 'ranked' (across "
                             "documents, on a retriever's results)")
        self.mode = mode
        self.embedder = embedder
        self.config = config
        self.doc_id_key = doc_id_key
        self._embed = _common.bundled(embedder)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """The kept documents (see the class)."""
        docs = list(documents)
        texts = [d.content or "" for d in docs]
        matrix = _common.matrix_of(texts, [d.embedding for d in docs], self._embed)
        metadata = [d.meta for d in docs]
        if self.mode == "ranked":
            kept = _common.ranked_kept(
                _common.ranked_table([d.id for d in docs], texts, matrix), self.config, metadata)
        else:
            key = self.doc_id_key
            doc_ids = [m.get(key) for m in metadata]
            _common.missing_doc_ids(doc_ids, key, lambda i: docs[i].meta, "document")
            kept = _common.ingest_kept(_common.segments_table(
                [str(d) for d in doc_ids], [d.id for d in docs], texts, matrix), self.config,
                metadata)
        return {"documents": [_with_meta(docs[row], meta)
                              for row, meta in zip(kept.rows, kept.metadata, strict=True)]}

    def to_dict(self) -> dict[str, Any]:
        """The component for a saved pipeline (the config in the spec's JSON shape)."""
        if self.embedder is not None and not isinstance(self.embedder, str):
            raise InputError("DedupDocuments with an embedder object cannot be saved with its "
                             "pipeline; pass embedder='minilm' or 'model2vec:PATH' instead")
        return default_to_dict(self, mode=self.mode, embedder=self.embedder,
                               config=None if self.config is None else self.config.to_dict(),
                               doc_id_key=self.doc_id_key)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DedupDocuments:
        """The component of a saved pipeline."""
        params = data.get("init_parameters", {})
        if params.get("config") is not None:
            params["config"] = DedupConfig.from_json(params["config"])
        return default_from_dict(cls, data)
