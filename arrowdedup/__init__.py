"""arrowdedup: signal-preserving deduplication of RAG evidence segments.

Phase 1 (:func:`ingest`) removes exact and near duplicates inside each document and boosts the
salience of what it keeps; :func:`ingest_to_store` runs it over documents or segments tables
into a versioned store; phase 2 (retrieval: :func:`search`) skips results that repeat a
higher-ranked one.

Every public name is imported on first use (PEP 562), so ``import arrowdedup`` and
``arrowdedup --help`` cost milliseconds, not the seconds Polars, Numba and DuckDB take, and a
Ctrl-C during start-up lands inside the CLI's handler. Subpackages are attributes too
(``ad.metrics.connect(store)``, ``ad.retrieval``, ``ad.extract``).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "AnalyticsConfig": ".config",
    "ArrowDedupError": ".errors",
    "CalibrationResult": ".calibrate",
    "ConfigError": ".errors",
    "Context": ".retrieval",
    "DecayMode": ".config",
    "DedupConfig": ".config",
    "Embedder": ".embed.embedders",
    "EmbedderError": ".errors",
    "EmbeddingCache": ".embed.cache",
    "Engine": ".pipeline.engines",
    "ExtractLimits": ".extract",
    "ExtractOptions": ".extract.options",
    "RunOptions": ".pipeline.options",
    "ExtractResult": ".extract",
    "IngestionConfig": ".config",
    "IngestionResult": ".dedup.ingest",
    "InputError": ".errors",
    "KeyColumns": ".extract",
    "LshMethod": ".config",
    "MiniLMEmbedder": ".embed.embedders",
    "MissingDependencyError": ".errors",
    "Mode": ".config",
    "Model2VecEmbedder": ".embed.embedders",
    "NoEmbeddingsWarning": ".retrieval",
    "NoFactsWarning": ".retrieval",
    "PairSet": ".calibrate",
    "Problem": ".store.verify",
    "Reranker": ".retrieval",
    "RetrievalConfig": ".config",
    "RrfConfig": ".config",
    "SchemaError": ".errors",
    "SearchMode": ".retrieval",
    "SearchResult": ".retrieval",
    "SignalWeights": ".config",
    "SkippedFile": ".extract",
    "Store": ".store",
    "StoreError": ".errors",
    "StoreWriter": ".store",
    "VerifyReport": ".store.verify",
    "bucket_of": ".store",
    "build_context": ".retrieval",
    "calibrate": ".calibrate",
    "competition_rank": ".retrieval",
    "dedupe_ranked": ".retrieval",
    "embed_texts": ".embed.cache",
    "extract": ".extract",
    "extract_documents": ".extract",
    "fact_conflict": ".facts.guard",
    "fact_signatures": ".facts.guard",
    "get_embedder": ".embed.embedders",
    "ingest": ".dedup.ingest",
    "JobResult": ".pipeline.run",
    "ingest_to_store": ".pipeline.run",
    "load_pairs": ".calibrate",
    "open_store": ".store",
    "rrf": ".retrieval",
    "search": ".retrieval.search",
    "verify_store": ".store.verify",
    "write_store": ".pipeline.run",
    "update_store": ".pipeline.update",
    "delete_documents": ".pipeline.update",
    "compact_store": ".pipeline.update",
    "list_versions": ".store.versions",
    "rollback": ".store.versions",
    "prune": ".pipeline.update",
    "PruneResult": ".pipeline.update",
}
# Subpackages and modules reachable as attributes without an import statement.
_SUBMODULES = frozenset({"calibrate", "cli", "config", "embed", "errors", "extract",
                         "integrations",
                         "facts",
                         "ingest", "job", "metrics", "retrieval", "schema", "store",
                         "verify"})


class _Package(types.ModuleType):
    """The package module: a function that shares its name with a module (``ingest``,
    ``extract``, ``calibrate``) keeps the name when that module is imported later, as it did
    when the package imported everything eagerly."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            # The import system binds a submodule on its parent once it has run; the export
            # of that name (defined in it, or already resolved) takes the name instead.
            resolved = self.__dict__.get(name) or value.__dict__.get(name)
            if resolved is None and name in getattr(value, "_lazy_exports", ()):
                return  # a lazy subpackage's export: :func:`__getattr__` loads it on use
            value = resolved if resolved is not None else getattr(value, name, value)
        super().__setattr__(name, value)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        sub = importlib.import_module(f".{name}", __name__)
        return globals().get(name, sub)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_SUBMODULES})


sys.modules[__name__].__class__ = _Package

if TYPE_CHECKING:  # the eager form, for type checkers and IDEs
    from .calibrate import (
        CalibrationResult,
        PairSet,
        calibrate,
        load_pairs,
    )
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
    from .dedup.ingest import IngestionResult, ingest
    from .embed.cache import EmbeddingCache, embed_texts
    from .embed.embedders import Embedder, MiniLMEmbedder, Model2VecEmbedder, get_embedder
    from .errors import (
        ArrowDedupError,
        ConfigError,
        EmbedderError,
        InputError,
        MissingDependencyError,
        SchemaError,
        StoreError,
    )
    from .extract import (
        ExtractLimits,
        ExtractResult,
        KeyColumns,
        SkippedFile,
        extract,
        extract_documents,
    )
    from .extract.options import ExtractOptions
    from .facts.guard import fact_conflict, fact_signatures
    from .pipeline.engines import Engine
    from .pipeline.options import RunOptions
    from .pipeline.run import JobResult, ingest_to_store, write_store
    from .pipeline.update import PruneResult, compact_store, delete_documents, prune, update_store
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
    )
    from .retrieval.search import search
    from .store import (
        Store,
        StoreWriter,
        bucket_of,
        open_store,
    )
    from .store.verify import Problem, VerifyReport, verify_store
    from .store.versions import list_versions, rollback

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
    "Engine",
    "ExtractLimits",
    "ExtractOptions",
    "ExtractResult",
    "IngestionConfig",
    "IngestionResult",
    "InputError",
    "JobResult",
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
    "PruneResult",
    "Reranker",
    "RetrievalConfig",
    "RrfConfig",
    "RunOptions",
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
    "compact_store",
    "competition_rank",
    "dedupe_ranked",
    "delete_documents",
    "embed_texts",
    "extract",
    "extract_documents",
    "fact_conflict",
    "fact_signatures",
    "get_embedder",
    "ingest",
    "ingest_to_store",
    "list_versions",
    "load_pairs",
    "open_store",
    "prune",
    "rollback",
    "rrf",
    "search",
    "update_store",
    "verify_store",
    "write_store",
]
