"""arrowdedup: signal-preserving deduplication of RAG evidence segments.

Phase 1 (:func:`ingest`) removes exact and near duplicates inside each document and boosts the
salience of what it keeps; :func:`ingest_to_store` runs it over documents or segments tables
into a versioned store; phase 2 (retrieval: :func:`search`) skips results that repeat a
higher-ranked one.

Names are imported on first use (PEP 562), so ``import arrowdedup`` and ``arrowdedup --help``
load neither Polars, Numba nor the embedders until a function needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _lazy

__version__ = "0.1.0"

# public name -> submodule that defines it
_EXPORTS = {
    "CalibrationResult": "calibrate", "PairSet": "calibrate", "calibrate": "calibrate",
    "load_pairs": "calibrate",
    "AnalyticsConfig": "config", "DecayMode": "config", "DedupConfig": "config",
    "IngestionConfig": "config", "LshMethod": "config", "Mode": "config",
    "RetrievalConfig": "config", "RrfConfig": "config", "SignalWeights": "config",
    "Embedder": "embed", "MiniLMEmbedder": "embed", "Model2VecEmbedder": "embed",
    "get_embedder": "embed",
    "EmbeddingCache": "embed_cache", "embed_texts": "embed_cache",
    "ArrowDedupError": "errors", "ConfigError": "errors", "EmbedderError": "errors",
    "InputError": "errors", "MissingDependencyError": "errors", "SchemaError": "errors",
    "StoreError": "errors",
    "ExtractResult": "extract", "SkippedFile": "extract", "extract": "extract",
    "extract_documents": "extract",
    "IngestionResult": "ingest", "ingest": "ingest",
    "JobResult": "job", "ingest_to_store": "job", "write_store": "job",
    "Context": "retrieval", "NoEmbeddingsWarning": "retrieval", "SearchMode": "retrieval",
    "SearchResult": "retrieval", "build_context": "retrieval",
    "competition_rank": "retrieval", "dedupe_ranked": "retrieval", "rrf": "retrieval",
    "search": "retrieval",
    "Store": "store", "StoreWriter": "store", "bucket_of": "store", "open_store": "store",
    "Problem": "verify", "VerifyReport": "verify", "verify_store": "verify",
}

__all__ = sorted([*_EXPORTS, "__version__"])


__getattr__ = _lazy.install(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from .calibrate import CalibrationResult, PairSet, calibrate, load_pairs
    from .config import (
        AnalyticsConfig,
        DecayMode,
        DedupConfig,
        IngestionConfig,
        LshMethod,
        Mode,
        RetrievalConfig,
        RrfConfig,
        SignalWeights,
    )
    from .embed import Embedder, MiniLMEmbedder, Model2VecEmbedder, get_embedder
    from .embed_cache import EmbeddingCache, embed_texts
    from .errors import (
        ArrowDedupError,
        ConfigError,
        EmbedderError,
        InputError,
        MissingDependencyError,
        SchemaError,
        StoreError,
    )
    from .extract import ExtractResult, SkippedFile, extract, extract_documents
    from .ingest import IngestionResult, ingest
    from .job import JobResult, ingest_to_store, write_store
    from .retrieval import (
        Context,
        NoEmbeddingsWarning,
        SearchMode,
        SearchResult,
        build_context,
        competition_rank,
        dedupe_ranked,
        rrf,
    )
    from .retrieval.search import search
    from .store import Store, StoreWriter, bucket_of, open_store
    from .verify import Problem, VerifyReport, verify_store
