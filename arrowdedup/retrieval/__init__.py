"""Phase 2 of SPEC §4: retrieval across documents.

``dense`` (exact cosine over the stored embeddings) and ``bm25`` (index built at ingest) give
the candidates, ``fusion`` ranks them (four-signal RRF), ``crossdoc`` drops cross-document
repeats after ranking, ``search`` ties it together (with an optional ``rerank`` stage),
``context`` renders results for an LLM (with ``keys``: key-linked expansion).

Names load on first use (PEP 562): the job path imports ``retrieval.bm25`` to build the index
without loading the search side (and Numba behind ``crossdoc``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

_EXPORTS = {
    "build_bm25_index": "bm25", "tokenize": "bm25",
    "Context": "context", "build_context": "context",
    "NoEmbeddingsWarning": "crossdoc", "NoFactsWarning": "crossdoc",
    "dedupe_ranked": "crossdoc",
    "SearchMode": "fusion", "competition_rank": "fusion", "mode_weights": "fusion",
    "rrf": "fusion", "score_order": "fusion",
    "Reranker": "rerank",
    "SearchResult": "search", "search": "search",
}

__all__ = sorted(_EXPORTS)


__getattr__ = _lazy.install(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from .bm25 import build_bm25_index, tokenize
    from .context import Context, build_context
    from .crossdoc import NoEmbeddingsWarning, NoFactsWarning, dedupe_ranked
    from .fusion import SearchMode, competition_rank, mode_weights, rrf, score_order
    from .rerank import Reranker
    from .search import SearchResult, search
