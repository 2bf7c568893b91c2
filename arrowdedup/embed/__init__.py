"""Embedders (:mod:`.embedders`: the protocol, MiniLM and Model2Vec, all offline), MiniLM on
ONNX Runtime (:mod:`.minilm_onnx`), the store's embedding cache (:mod:`.cache`) and the text an
embedder reads (:mod:`.view`)."""

from .._lazy import install

__getattr__ = install(__name__, {
    "Embedder": "embedders", "MiniLMEmbedder": "embedders", "Model2VecEmbedder": "embedders",
    "get_embedder": "embedders", "EmbeddingCache": "cache", "embed_texts": "cache",
})
