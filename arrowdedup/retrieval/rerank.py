"""The reranker stage of ``search`` (SPEC §4, §5).

Protocol: a reranker is any callable ``fn(query: str, texts: list[str]) -> scores`` returning
one finite number per text (a list, tuple or 1-D array), higher = more relevant. ``search``
calls it once per search with the query (several queries joined by newlines) and the texts of
the fused candidates that passed the relevance floor, in RRF order. The candidates are then
ordered by score, highest first; equal scores keep their RRF order. Cross-document dedup walks
that order, so SPEC §5's order guarantee holds for the reranked order, and each result records
``rank_rerank`` (its 1-based place in the reranked list). A cross-encoder fits the protocol:

    from sentence_transformers import CrossEncoder
    model = CrossEncoder("/path/to/a/local/cross-encoder")   # no download at run time
    search(store, "query", reranker=lambda q, texts: model.predict([(q, t) for t in texts]))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import InputError

Reranker = Callable[[str, list[str]], Sequence[float] | np.ndarray | Any]


def rerank_order(reranker: Reranker, query: str, texts: list[str]) -> np.ndarray:
    """The permutation of ``texts`` by the reranker's scores, highest first, stable."""
    try:
        raw = reranker(query, texts)
        scores = np.asarray(raw, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as err:
        raise InputError(f"the reranker must return one number per text ({err}); see the "
                         "protocol in arrowdedup.retrieval.rerank") from err
    if scores.size != len(texts):
        raise InputError(f"the reranker returned {scores.size} scores for {len(texts)} texts; "
                         "return one score per text, in order")
    if not np.isfinite(scores).all():
        raise InputError("the reranker returned NaN or infinite scores; return finite numbers")
    return np.argsort(-scores, kind="stable")
