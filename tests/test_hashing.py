"""The bulk XXH64 equals the xxhash package, byte for byte."""

from __future__ import annotations

import pyarrow as pa
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from arrowdedup.hashing import to_hex, xxh64


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=120), max_size=30))
def test_matches_xxhash(texts: list[str]) -> None:
    arr = pa.array(texts, type=pa.string())
    got = xxh64(arr)
    assert [int(v) for v in got] == [xxhash.xxh64_intdigest(t.encode()) for t in texts]
    assert to_hex(got).to_pylist() == [xxhash.xxh64_hexdigest(t.encode()) for t in texts]


def test_sliced_chunked_and_view_arrays() -> None:
    texts = ["alpha", "beta" * 20, "", "γ"]
    arr = pa.array(texts)
    expected = [xxhash.xxh64_intdigest(t.encode()) for t in texts]
    assert [int(v) for v in xxh64(arr.slice(1))] == expected[1:]
    assert [int(v) for v in xxh64(pa.chunked_array([arr[:2], arr[2:]]))] == expected
    assert [int(v) for v in xxh64(arr.cast(pa.string_view()))] == expected
