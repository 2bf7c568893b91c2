"""The public API's shape (issue 15, item 6): options after the first two are keyword-only,
and the objects the library returns are frozen.

Every name in ``arrowdedup.__all__`` is held to the rules, so a new function or result type
added there is checked without editing this file.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect

import pytest

import arrowdedup as ad

POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
# Option holders a user constructs: every field is keyword-only (a config written positionally
# would silently change meaning when a field is added).
CONFIGS = ("AnalyticsConfig", "DedupConfig", "IngestionConfig", "RetrievalConfig", "RrfConfig",
           "SignalWeights")
# Classes that are neither results nor options: exceptions, enums, protocols, the store's
# handles and the embedders (constructed with their required arguments).
NOT_RESULTS = frozenset({"Embedder", "EmbeddingCache", "MiniLMEmbedder", "Model2VecEmbedder",
                         "Store", "StoreWriter", "Reranker"})


def public() -> list[tuple[str, object]]:
    return [(name, getattr(ad, name)) for name in ad.__all__ if name != "__version__"]


def late_options(obj: object) -> list[str]:
    """Parameters with a default, after the first two, that can still be passed by position."""
    params = list(inspect.signature(obj).parameters.values())  # type: ignore[arg-type]
    return [p.name for p in params[2:] if p.kind in POSITIONAL and p.default is not p.empty]


def test_every_public_function_takes_late_options_by_keyword_only() -> None:
    functions = [(n, f) for n, f in public() if inspect.isfunction(f)]
    assert len(functions) >= 15  # the check reaches the API, not an empty list
    offenders = {n: late_options(f) for n, f in functions if late_options(f)}
    assert not offenders, f"make these keyword-only (after '*'): {offenders}"
    # The job path and the embedding cache, by name (they took a third option by position).
    for func, name in ((ad.ingest_to_store, "config"), (ad.embed_texts, "cache"),
                       (ad.build_context, "k")):
        kind = inspect.signature(func).parameters[name].kind
        assert kind is inspect.Parameter.KEYWORD_ONLY, (func.__name__, name)


def test_constructors_take_late_options_by_keyword_only() -> None:
    classes = [(n, c) for n, c in public() if inspect.isclass(c)
               and not issubclass(c, (BaseException, enum.Enum)) and n in NOT_RESULTS]
    offenders = {n: late_options(c) for n, c in classes if late_options(c)}
    assert not offenders, offenders
    for name in CONFIGS:
        params = inspect.signature(getattr(ad, name)).parameters.values()
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params), name
    with pytest.raises(TypeError):
        ad.IngestionConfig(True, 0.9)  # type: ignore[misc]


def test_every_public_result_is_frozen() -> None:
    dataclass_types = [(n, c) for n, c in public()
                       if inspect.isclass(c) and dataclasses.is_dataclass(c)]
    assert {"JobResult", "IngestionResult", "SearchResult", "Context", "ExtractResult",
            "VerifyReport", "CalibrationResult"} <= {n for n, _ in dataclass_types}
    thawed = [n for n, c in dataclass_types
              if not c.__dataclass_params__.frozen]  # type: ignore[attr-defined]
    assert not thawed, f"make these frozen: {thawed}"
    # Every other public class is an option holder, a handle, an error, an enum or a protocol.
    others = [n for n, c in public() if inspect.isclass(c) and not dataclasses.is_dataclass(c)
              and not issubclass(c, (BaseException, enum.Enum, Warning)) and n not in NOT_RESULTS]
    assert not others, f"classify these public classes: {others}"
