"""The embedder's view of a text: emphasis markers and whitespace runs are formatting, not
meaning; identifiers, arithmetic, globs and code stay as written."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arrowdedup.embed.cache import embed_texts
from arrowdedup.embed.view import embedding_text, embedding_texts


class RecordingEmbedder:
    """Deterministic vectors, and a record of every text it was asked to embed."""

    name = "recording"
    dim = 4

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        return np.array([[len(t), t.count(" "), 1.0, 0.5] for t in texts], dtype=np.float32)


@pytest.mark.parametrize(("text", "view"), [
    ("the _example_ shows it", "the example shows it"),
    ("a **bold** claim", "a bold claim"),
    ("an *emphasised phrase* here", "an emphasised phrase here"),
    ("__strong__ start", "strong start"),
    ("**_both_** layers", "both layers"),
    ("wrapped\nline  with   spaces\t", "wrapped line with spaces"),
    ("  padded  ", "padded"),
    ("**the `__init__` method**", "the `__init__` method"),
])
def test_formatting_is_dropped(text: str, view: str) -> None:
    assert embedding_text(text) == view


@pytest.mark.parametrize("text", [
    "set max_request_bytes and http_server_requests_total",
    "_private_var is internal",
    "2 * 3 * 4 = 24",
    "a*b*c",
    "match **/*.js and *.md files",
    "a lone _ underscore and * star",
    "ends with_ nothing",
    "call `_x_` or `*y*` as written",
])
def test_identifiers_arithmetic_and_globs_stay(text: str) -> None:
    assert embedding_text(text) == text


def test_code_rows_are_embedded_verbatim_and_nulls_stay() -> None:
    out = embedding_texts(["x = _y_  + 1", "a  _b_", None],
                          verbatim=np.array([True, False, False]))
    assert out.to_pylist() == ["x = _y_  + 1", "a b", None]


def test_formatting_variants_share_one_embedding() -> None:
    emb = RecordingEmbedder()
    vectors, stats = embed_texts(["the _example_ shows it", "the example shows it",
                                  "the example\nshows  it"], emb)
    assert emb.seen == ["the example shows it"]
    assert stats.unique == 1 and stats.embedded == 1
    assert np.array_equal(vectors[0], vectors[1]) and np.array_equal(vectors[1], vectors[2])


@given(st.text(alphabet=st.sampled_from(list("ab _*\n.x1`")), max_size=30))
def test_view_is_a_fixed_point_and_keeps_every_word(text: str) -> None:
    view = embedding_text(text)
    assert embedding_text(view) == view
    # It it only ever removes markers and whitespace: the other characters stay in order.
    def kept(s: str) -> str:
        return "".join(c for c in s if c not in " \n*_")
    assert kept(view) == kept(text)


def test_the_vectorised_check_flags_every_kind_of_white_space() -> None:
    # Every character Python's \s matches, one at a time between words and doubled: the
    # column path must give what embedding_text gives.
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    texts = [f"a{c}b" for c in spaces] + [f"{c}a" for c in spaces] + [f"a{c}{c}b" for c in spaces]
    assert embedding_texts(texts).to_pylist() == [embedding_text(t) for t in texts]


@given(st.text(alphabet=st.sampled_from(list("ab _*`\t\n\xa0\u2003\x1c\u200b.")), max_size=30))
def test_column_view_equals_the_text_view(text: str) -> None:
    assert embedding_texts([text]).to_pylist() == [embedding_text(text)]
