"""arrowdedup: signal-preserving deduplication of RAG evidence segments.

Phase 1 (:func:`ingest`) removes exact and near duplicates inside each document and boosts the
salience of what it keeps; phase 2 (retrieval) skips results that repeat a higher-ranked one.
"""

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
from .errors import (
    ArrowDedupError,
    ConfigError,
    EmbedderError,
    InputError,
    MissingDependencyError,
    SchemaError,
    StoreError,
)
from .ingest import IngestionResult, ingest
from .store import Store, open_store, write_store
from .verify import Problem, VerifyReport, verify_store

__version__ = "0.1.0"

__all__ = [
    "AnalyticsConfig",
    "ArrowDedupError",
    "ConfigError",
    "DecayMode",
    "DedupConfig",
    "EmbedderError",
    "IngestionConfig",
    "IngestionResult",
    "InputError",
    "LshMethod",
    "MissingDependencyError",
    "Mode",
    "Problem",
    "RetrievalConfig",
    "RrfConfig",
    "SchemaError",
    "SignalWeights",
    "Store",
    "StoreError",
    "VerifyReport",
    "__version__",
    "ingest",
    "open_store",
    "verify_store",
    "write_store",
]
