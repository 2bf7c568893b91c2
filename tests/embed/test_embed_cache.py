"""The store's embedding cache: keyed by (model, XXH64 of the text), append-only Arrow files."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from arrowdedup.embed import cache as embed_cache
from arrowdedup.embed.cache import EmbeddingCache, embed_texts, model_key, text_hashes
from arrowdedup.errors import EmbedderError, StoreError


class CountingEmbedder:
    """A deterministic embedder that records every text it is asked to embed."""

    def __init__(self, name: str = "counting", dim: int = 8) -> None:
        self.name = name
        self.dim = dim
        self.seen: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            rng = np.random.default_rng(xxhash.xxh64_intdigest(t.encode()))
            v = rng.standard_normal(self.dim).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


def test_hashes_are_xxh64_of_utf8() -> None:
    texts = ["a", "héllo", ""]
    assert text_hashes(texts).tolist() == [xxhash.xxh64_intdigest(t.encode()) for t in texts]


def test_repeated_texts_embed_once_and_rows_align(tmp_path) -> None:
    emb = CountingEmbedder()
    texts = ["x", "y", "x", "z", "y"]
    vectors, stats = embed_texts(texts, emb, cache=None)
    assert emb.seen == ["x", "y", "z"]  # first-appearance order
    assert stats.to_dict() == {"texts": 5, "unique": 3, "cached": 0, "embedded": 3}
    direct = CountingEmbedder().encode(texts)
    assert np.array_equal(vectors, direct)
    # The distinct vectors once each (a first run keeps them in first-appearance order,
    # without a second copy), and every row pointing at its own.
    distinct, inverse, _ = embed_cache.embed_distinct(texts, CountingEmbedder(), cache=None)
    assert distinct.shape == (3, 8) and np.array_equal(distinct[inverse], direct)


def test_second_run_embeds_only_new_texts(tmp_path) -> None:
    cache = EmbeddingCache(tmp_path / "cache", "counting", 8)
    first = CountingEmbedder()
    v1, s1 = embed_texts(["a", "b", "c"], first, cache=cache)
    assert s1.embedded == 3 and len(cache) == 3
    second = CountingEmbedder()
    v2, s2 = embed_texts(["b", "d", "a", "e"], second, cache=cache)
    assert second.seen == ["d", "e"]
    assert (s2.cached, s2.embedded) == (2, 2)
    assert np.array_equal(v2[0], v1[1]) and np.array_equal(v2[2], v1[0])
    assert len(cache.files()) == 2 and len(cache) == 5
    third = CountingEmbedder()
    _, s3 = embed_texts(["e", "a"], third, cache=cache)
    assert third.seen == [] and s3.embedded == 0
    assert len(cache.files()) == 2  # nothing new, no new file


def test_models_do_not_share_vectors(tmp_path) -> None:
    a = EmbeddingCache(tmp_path, "model-a", 8)
    b = EmbeddingCache(tmp_path, "model-b", 8)
    embed_texts(["same text"], CountingEmbedder("model-a"), cache=a)
    other = CountingEmbedder("model-b")
    embed_texts(["same text"], other, cache=b)
    assert other.seen == ["same text"]
    assert a.directory != b.directory
    assert model_key("model2vec:m2v/x") != model_key("model2vec:m2v_x")


def test_oldest_vector_wins_and_compaction_keeps_lookups(tmp_path, monkeypatch) -> None:
    cache = EmbeddingCache(tmp_path, "m", 2)
    h = np.array([7, 9], dtype=np.uint64)
    cache.add(h, np.array([[1, 0], [0, 1]], np.float32))
    cache.add(np.array([7], np.uint64), np.array([[0.6, 0.8]], np.float32))
    vec, found = cache.lookup(np.array([9, 7, 5], np.uint64))
    assert found.tolist() == [True, True, False]
    assert vec.tolist() == [[0, 1], [1, 0], [0, 0]]
    monkeypatch.setattr(embed_cache, "COMPACT_AFTER", 2)
    cache.add(np.array([5], np.uint64), np.array([[0.0, -1.0]], np.float32))
    assert len(cache.files()) == 1
    vec2, found2 = cache.lookup(np.array([9, 7, 5], np.uint64))
    assert found2.all() and vec2.tolist() == [[0, 1], [1, 0], [0, -1]]


def test_no_pickles_and_metadata_checked(tmp_path) -> None:
    cache = EmbeddingCache(tmp_path, "m", 2)
    path = cache.add(np.array([1], np.uint64), np.array([[1, 0]], np.float32))
    assert path is not None and path.suffix == ".arrow"
    with pa.memory_map(str(path)) as src:
        table = pa.ipc.open_file(src).read_all()
    assert table.schema.metadata[b"model"] == b"m"
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), 2)
    wrong = EmbeddingCache(tmp_path, "m", 3)
    wrong.directory = cache.directory
    with pytest.raises(StoreError, match="expected 3-d vectors"):
        wrong.load()
    path.write_bytes(b"garbage")
    with pytest.raises(StoreError, match="damaged"):
        cache.load()


def test_bad_embedder_output_is_refused(tmp_path) -> None:
    class Broken(CountingEmbedder):
        def encode(self, texts: list[str]) -> np.ndarray:
            return np.full((len(texts), self.dim), np.nan, np.float32)

    with pytest.raises(EmbedderError, match="NaN"):
        embed_texts(["a"], Broken())

    class Short(CountingEmbedder):
        def encode(self, texts: list[str]) -> np.ndarray:
            return np.zeros((len(texts), 3), np.float32)

    with pytest.raises(EmbedderError, match="shape"):
        embed_texts(["a"], Short())


def test_batches_cover_all_texts() -> None:
    emb = CountingEmbedder()
    texts = [f"t{i}" for i in range(25)]
    out = embed_cache.encode_batched(emb, texts, batch_size=4)
    assert emb.seen == texts and out.shape == (25, 8)
    assert np.array_equal(out, CountingEmbedder().encode(texts))


def test_the_cache_keys_on_the_runtime(tmp_path) -> None:
    torch_cache = EmbeddingCache(tmp_path, "m", 2, runtime="torch")
    legacy = EmbeddingCache(tmp_path, "m", 2)
    onnx_cache = EmbeddingCache(tmp_path, "m", 2, runtime="onnx")
    # The torch runtime keeps the key caches had before runtimes were recorded.
    assert torch_cache.directory == legacy.directory != onnx_cache.directory
    assert model_key("m", "torch") == model_key("m") != model_key("m", "onnx")
    legacy.add(np.array([1], np.uint64), np.array([[1.0, 0.0]], np.float32))
    onnx_cache.add(np.array([1], np.uint64), np.array([[0.0, 1.0]], np.float32))
    assert torch_cache.lookup(np.array([1], np.uint64))[0].tolist() == [[1.0, 0.0]]
    assert onnx_cache.lookup(np.array([1], np.uint64))[0].tolist() == [[0.0, 1.0]]
    # A file of one runtime placed in the other's directory is refused on read.
    moved = onnx_cache.files()[0].rename(torch_cache.directory / "run-zz.arrow")
    with pytest.raises(StoreError, match=r"runtime onnx.*runtime torch"):
        torch_cache.load()
    assert moved.exists()
