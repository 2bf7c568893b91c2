"""arrowdedup: signal-preserving deduplication of RAG evidence segments.

Phase 1 (:func:`ingest`) removes exact and near duplicates inside each document and boosts the
salience of what it keeps; phase 2 (retrieval) skips results that repeat a higher-ranked one.
"""

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
from .documents import ingest_documents
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
from .extract import ExtractResult, KeyColumns, SkippedFile, extract, extract_documents
from .facts import fact_conflict, fact_signatures
from .ingest import IngestionResult, ingest
from .pipeline import ingest_tables_to_store
from .retrieval import (
    Context,
    NoEmbeddingsWarning,
    NoFactsWarning,
    Reranker,
    SearchMode,
    SearchResult,
    build_context,
    competition_rank,
    dedupe_ranked,
    rrf,
    search,
)
from .store import Store, StoreWriter, bucket_of, open_store, write_store
from .verify import Problem, VerifyReport, verify_store

__version__ = "0.1.0"

__all__ = [
    "AnalyticsConfig",
    "ArrowDedupError",
    "CalibrationResult",
    "ConfigError",
    "Context",
    "DecayMode",
    "DedupConfig",
    "Embedder",
    "EmbedderError",
    "EmbeddingCache",
    "ExtractResult",
    "IngestionConfig",
    "IngestionResult",
    "InputError",
    "KeyColumns",
    "LshMethod",
    "MiniLMEmbedder",
    "MissingDependencyError",
    "Mode",
    "Model2VecEmbedder",
    "NoEmbeddingsWarning",
    "NoFactsWarning",
    "PairSet",
    "Problem",
    "Reranker",
    "RetrievalConfig",
    "RrfConfig",
    "SchemaError",
    "SearchMode",
    "SearchResult",
    "SignalWeights",
    "SkippedFile",
    "Store",
    "StoreError",
    "StoreWriter",
    "VerifyReport",
    "__version__",
    "bucket_of",
    "build_context",
    "calibrate",
    "competition_rank",
    "dedupe_ranked",
    "embed_texts",
    "extract",
    "extract_documents",
    "fact_conflict",
    "fact_signatures",
    "get_embedder",
    "ingest",
    "ingest_documents",
    "ingest_tables_to_store",
    "load_pairs",
    "open_store",
    "rrf",
    "search",
    "verify_store",
    "write_store",
]
