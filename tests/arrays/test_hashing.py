"""The bulk XXH64 equals the xxhash package, byte for byte."""

from __future__ import annotations

import pyarrow as pa
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from arrowdedup.arrays.hashing import to_hex, xxh64


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


def test_large_string_view_columns_hash_through_their_views() -> None:
    """Above the jit threshold a string_view column is hashed through its views: inline
    strings (up to 12 bytes) and out-of-line ones, Polars' own arrays (several data buffers),
    one buffer, slices and nulls (by the cast) all equal the xxhash package."""
    import polars as pl

    from arrowdedup.arrays.hashing import JIT_MIN_ROWS, string_views

    texts = [("x" * (i % 40)) + f"{i}γ" if i % 97 else "" for i in range(JIT_MIN_ROWS * 3)]
    expected = [xxhash.xxh64_intdigest(t.encode()) for t in texts]
    views = pl.Series(texts).to_arrow(compat_level=pl.CompatLevel.newest())
    assert pa.types.is_string_view(views.type) and len(views.buffers()) > 3
    assert string_views(views) is not None
    one = pa.array(texts, type=pa.large_string()).cast(pa.string_view())
    assert len(one.buffers()) == 3
    assert [int(v) for v in xxh64(one)] == expected
    assert [int(v) for v in xxh64(views)] == expected
    assert [int(v) for v in xxh64(pl.Series(texts))] == expected  # a Polars column as it is
    assert [int(v) for v in xxh64(views.slice(JIT_MIN_ROWS + 7))] == expected[JIT_MIN_ROWS + 7:]
    several = pa.concat_arrays([views.slice(0, JIT_MIN_ROWS), views.slice(JIT_MIN_ROWS)])
    assert [int(v) for v in xxh64(several)] == expected
    with_null = pa.array([*texts[:-1], None], type=pa.string_view())
    assert [int(v) for v in xxh64(with_null)] == [*expected[:-1], xxhash.xxh64_intdigest(b"")]


def test_bucket_of_hashes_each_distinct_id_once_and_agrees_with_every_row() -> None:
    """Repeated ids (hashed once each through a dictionary), distinct ids, nulls and chunked
    columns all bucket as XXH64 of each row's id modulo the bucket count."""
    import numpy as np

    from arrowdedup.arrays.hashing import JIT_MIN_ROWS
    from arrowdedup.store import bucket_of

    repeated = [f"doc-{i // 50}" for i in range(JIT_MIN_ROWS * 2)]
    distinct = [f"d{i}γ" for i in range(300)]
    with_null = ["a", None, "a", "b"] * 10
    for ids in (repeated, distinct, with_null):
        want = np.array([xxhash.xxh64_intdigest((t or "").encode()) % 7 for t in ids])
        for arr in (pa.array(ids, type=pa.string()), pa.array(ids, type=pa.large_string()),
                    pa.chunked_array([pa.array(ids[:5]), pa.array(ids[5:])])):
            got = bucket_of(arr, 7)
            assert got.dtype == np.int64 and (got == want).all()
    assert bucket_of(pa.chunked_array([], type=pa.string()), 3).shape == (0,)


def test_ascii_only_proves_ascii_columns_and_defers_everything_else() -> None:
    """A large ASCII column (sliced, string or large_string) is shown valid; non-ASCII bytes,
    offsets that go backwards, and small columns are left to Arrow's full validation
    (False)."""
    import numpy as np

    from arrowdedup.arrays.hashing import JIT_MIN_ROWS, ascii_only

    texts = [f"row {i} --max-request-bytes v3.5" for i in range(JIT_MIN_ROWS * 2)]
    for kind in (pa.string(), pa.large_string()):
        arr = pa.array(texts, type=kind)
        assert ascii_only(arr) and ascii_only(arr.slice(11, JIT_MIN_ROWS + 3))
        assert not ascii_only(arr.slice(0, JIT_MIN_ROWS - 1))  # small: Arrow decides
    accented = pa.array([*texts[:-1], "café"])
    assert not ascii_only(accented)
    accented.validate(full=True)  # valid, only not provable by the ASCII pass
    n = JIT_MIN_ROWS
    backwards = np.r_[np.arange(n), n - 2].astype(np.int32)
    bad = pa.StringArray.from_buffers(n, pa.py_buffer(backwards), pa.py_buffer(b"x" * n))
    assert not ascii_only(bad)


def test_view_run_heads_mark_where_each_run_of_equal_strings_starts() -> None:
    """Inline strings of every length up to 12 (only their own bytes compared), longer ones
    with equal prefixes, equal strings stored apart, and Polars' several data buffers."""
    import numpy as np
    import polars as pl

    from arrowdedup.arrays.hashing import JIT_MIN_ROWS, string_views
    from arrowdedup.arrays.hashing_jit import view_run_heads

    rng = np.random.default_rng(5)
    words = [("p" * k) + s for k in range(0, 30) for s in ("", "a", "b", "ab")]
    texts = [words[i] for i in rng.integers(0, len(words), JIT_MIN_ROWS)]
    texts = [t for t in texts for _ in range(int(rng.integers(1, 4)))]
    expected = [True] + [a != b for a, b in zip(texts[1:], texts[:-1], strict=True)]
    for arr in (pl.Series(texts).to_arrow(compat_level=pl.CompatLevel.newest()),
                pa.array(texts, type=pa.large_string()).cast(pa.string_view())):
        views = string_views(arr)
        assert views is not None
        assert view_run_heads(*views).tolist() == expected
