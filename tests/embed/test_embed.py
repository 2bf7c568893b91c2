"""The offline embedders: real MiniLM on known sentences, the Model2Vec path, get_embedder."""

from __future__ import annotations

import numpy as np
import pytest

from arrowdedup.embed.embedders import MINILM_NAME, Embedder, Model2VecEmbedder, get_embedder
from arrowdedup.errors import EmbedderError
from tests.helpers import M2V_MODEL, need


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return get_embedder("minilm")


def test_minilm_paraphrase_and_unrelated(minilm: Embedder) -> None:
    texts = [
        "The cat sat on the mat.",
        "A cat was sitting on the mat.",
        "Quarterly revenue rose by eight percent in Asia.",
    ]
    v = minilm.encode(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert minilm.name == MINILM_NAME and minilm.dim == 384
    assert float(v[0] @ v[1]) >= 0.7
    assert float(v[0] @ v[2]) <= 0.3


def test_minilm_is_deterministic_and_batch_independent(minilm: Embedder) -> None:
    texts = ["Invoices are finalized at the end of each period.", "Webhooks retry eight times."]
    a = minilm.encode(texts)
    b = np.vstack([minilm.encode([t]) for t in texts])
    assert np.allclose(a, b, atol=1e-5)
    assert minilm.encode([]).shape == (0, 384)


def test_model2vec_path() -> None:
    path = need(M2V_MODEL)
    emb = get_embedder(f"model2vec:{path}")
    assert isinstance(emb, Model2VecEmbedder)
    assert emb.name == "model2vec:m2v-minilm-l6-256" and emb.dim == 256
    v = emb.encode(["The cat sat on the mat.", "A cat was sitting on the mat.",
                    "Quarterly revenue rose by eight percent in Asia."])
    assert v.shape == (3, 256) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2])
    assert emb.encode([]).shape == (0, 256)


def test_get_embedder_refuses_unknown_names(tmp_path) -> None:
    with pytest.raises(EmbedderError, match="unknown embedder"):
        get_embedder("word2vec")
    with pytest.raises(EmbedderError, match="does not exist"):
        get_embedder(f"model2vec:{tmp_path / 'nope'}")
    with pytest.raises(EmbedderError, match="not an embedder"):
        get_embedder(42)  # type: ignore[arg-type]


def test_get_embedder_passes_objects_through() -> None:
    class Fixed:
        name = "fixed"
        dim = 2

        def encode(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 2), np.float32)

    obj = Fixed()
    assert get_embedder(obj) is obj
