"""Phase 2 of SPEC §4: retrieval across documents.

``dense`` (exact cosine over mmapped vectors) and ``bm25`` (index built at ingest) give the
candidates, ``fusion`` ranks them (four-signal RRF), ``crossdoc`` drops cross-document
repeats after ranking, ``search`` ties it together (with an optional ``rerank`` stage),
``context`` renders results for an LLM (with ``keys``: key-linked expansion).
"""

from .bm25 import build_bm25_index, tokenize
from .context import Context, build_context
from .crossdoc import NoEmbeddingsWarning, NoFactsWarning, dedupe_ranked
from .fusion import SearchMode, competition_rank, mode_weights, rrf, score_order
from .rerank import Reranker
from .search import SearchResult, search

__all__ = [
    "Context",
    "NoEmbeddingsWarning",
    "NoFactsWarning",
    "Reranker",
    "SearchMode",
    "SearchResult",
    "build_bm25_index",
    "build_context",
    "competition_rank",
    "dedupe_ranked",
    "mode_weights",
    "rrf",
    "score_order",
    "search",
    "tokenize",
]
