"""The one BM25 tokenizer (Python and Numba twins agree) and the columnar index build (equal to
bm25s' own build, and queried like it)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrowdedup.retrieval import bm25 as bm25_module
from arrowdedup.retrieval import tokens_jit as jit
from arrowdedup.retrieval.bm25 import Bm25Builder, Bm25Index, load_bm25
from arrowdedup.retrieval.tokens import lowercase, tokenize, tokens_of
from tests.helpers import ROOT


def jit_tokens(texts: list[str | None]) -> list[list[str]]:
    lowered = lowercase(pl.Series(texts, dtype=pl.String))
    ids, rows, vocab = jit.scan(lowered.to_arrow())
    words = vocab.to_pylist()
    assert len(set(words)) == len(words)  # one id per distinct token
    out: list[list[str]] = [[] for _ in texts]
    for r, i in zip(rows.tolist(), ids.tolist(), strict=True):
        out[r].append(words[i])
    return out


EXAMPLES = {
    "Upgrade from 3.4 to 3.5.": ["upgrade", "from", "3.4", "3.5"],
    "Set --max-request-bytes=10": ["set", "--max-request-bytes", "max", "request", "bytes",
                                   "10"],
    "http_server_requests_total{x}": ["http_server_requests_total", "http", "server",
                                      "requests", "total"],
    "v3.5 and V10.2.1": ["v3.5", "v3", "3.5", "v10.2.1", "v10", "10.2.1"],
    "config.yaml: see 10.0.0.1": ["config.yaml", "config", "yaml", "see", "10.0.0.1"],
    "Ünïcödé “quoted” — dash…": ["ünïcödé", "quoted", "dash"],
    "日本語のテキスト。二つ目": ["日本語のテキスト", "二つ目"],
    "a - b -- c --- d -e": ["-e"],
    "Member 3 of the cluster": ["member", "3", "cluster"],
    "": [],
}


@pytest.mark.parametrize("text", list(EXAMPLES))
def test_tokenizer_keeps_numbers_versions_flags_identifiers(text: str) -> None:
    assert tokenize([text]).to_list()[0] == EXAMPLES[text]
    assert jit_tokens([text]) == [EXAMPLES[text]]


ALPHABET = st.sampled_from([*"abcXYZ019_.-:/ ,;!?()\"'`\n\t", "é", "日", "—", "“", "\xa0",
                            "\u3002", "ß", "İ", "\uff0c", "€", "😀", "Σ", "ǅ"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(ALPHABET, max_size=40)), max_size=20))
def test_numba_scanner_equals_python_tokenizer(texts: list[str | None]) -> None:
    lowered = lowercase(pl.Series(texts, dtype=pl.String)).to_list()
    assert jit_tokens(texts) == [tokens_of(t) for t in lowered]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(st.sampled_from(
    [*"AZaz@[`{09 -_.\n\t\x00\x7f", "É", "ß", "İ"]), max_size=40)), max_size=30),
    st.integers(0, 5))
def test_jit_lower_equals_polars_lowercase(texts: list[str | None], skip: int) -> None:
    """The ASCII byte pass (the bytes around 'A'-'Z' included) gives Polars' lower-casing,
    slices too; a non-ASCII text sends the column to Polars."""
    series = pl.Series(texts, dtype=pl.String)[skip:]
    assert jit.lower(series).equals(lowercase(series).to_arrow())


def test_jit_lower_over_several_parallel_blocks() -> None:
    """Megabytes of text (several of the pass's blocks, an odd length) lower-cased whole;
    one non-ASCII byte in the last block sends the column to Polars."""
    texts = [f"Row {i} MiXeD Case --Flag V3.5 " * 30 + "Z" * (i % 7) for i in range(3_000)]
    series = pl.Series(texts, dtype=pl.String)
    assert sum(map(len, texts)) > 2 * 2**20 and sum(map(len, texts)) % 8
    assert jit.lower(series).equals(lowercase(series).to_arrow())
    series = pl.Series([*texts[:-1], texts[-1] + "Ä"], dtype=pl.String)
    assert jit.lower(series).equals(lowercase(series).to_arrow())


def test_numba_scanner_with_many_distinct_tokens_of_every_length() -> None:
    """Thousands of distinct tokens (the table grows several times), 1 to 40 bytes long,
    sharing their first and last 8 bytes and differing only in the middle or the length,
    beside stop words: one id per distinct token, the Python tokenizer's tokens."""
    texts = []
    for i in range(3000):
        middle = f"{i:05d}"
        texts.append(" ".join([
            f"p{middle}",  # short
            f"prefix{middle}x",  # 9-16 bytes
            f"prefixab{middle}suffixyz",  # over 16: equal first and last 8 bytes
            f"prefixab{'q' * (i % 25)}suffixyz",  # lengths only tell these apart
            "the", "and", "it",
        ]))
    lowered = lowercase(pl.Series(texts, dtype=pl.String)).to_list()
    assert jit_tokens(texts) == [tokens_of(t) for t in lowered]


def test_numba_scanner_over_rows_longer_than_its_chunk() -> None:
    """The scanner cuts a bucket into chunks of ``SPAN_CHUNK_BYTES`` (at least one row): rows
    several chunks long, between short ones and at either end, tokenize as in Python."""
    words = 3 * jit.SPAN_CHUNK_BYTES // 15 + 1  # each word and its space: 15 bytes or more
    long_row = " ".join(f"Tok{i % 977} v3.{i % 9} --f-{i % 13}" for i in range(words))
    assert len(long_row.encode()) > 3 * jit.SPAN_CHUNK_BYTES
    short = [f"row {i} config.yaml x_{i}" for i in range(400)]
    texts = [long_row, *short[:200], long_row + " tail", *short[200:], "", long_row]
    lowered = lowercase(pl.Series(texts, dtype=pl.String)).to_list()
    assert jit_tokens(texts) == [tokens_of(t) for t in lowered]


def _build(texts: list[str], tmp: Path, splits: tuple[int, ...] = ()) -> Path:
    builder = Bm25Builder()
    bounds = [0, *splits, len(texts)]
    for lo, hi in itertools.pairwise(bounds):
        part = pl.DataFrame({"text": pl.Series(texts[lo:hi], dtype=pl.String)})
        builder.add(builder.encode(part), hi - lo)
    builder.finish(tmp)
    return tmp / "bm25"


def corpus(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "3.5", "v3.6", "--flag", "x_y", "the", "delta",
             "config.yaml", "Zeta", "日本"]
    return [" ".join(rng.choice(words, size=int(rng.integers(0, 9)))) for _ in range(n)]


@pytest.mark.parametrize("jit_min", [10**9, 1])
def test_index_equals_bm25s_on_the_same_tokens(tmp_path: Path, monkeypatch, jit_min) -> None:
    import bm25s

    monkeypatch.setattr(bm25_module, "JIT_MIN_TEXTS", jit_min)
    texts = corpus(3000)
    path = _build(texts, tmp_path, splits=(1000, 1001, 2500))
    ours = Bm25Index(path)
    vocab = ours._vocab
    assert list(vocab) == sorted(vocab)  # a sorted vocabulary: identical inputs, same bytes
    reference = bm25s.BM25()
    reference.index(([[vocab[t] for t in toks] for toks in tokenize(texts).to_list()], vocab),
                    show_progress=False)
    loaded = bm25s.BM25.load(str(path), mmap=False)  # our files in bm25s' layout
    for query in ["alpha beta", "3.5", "flag", "x_y gamma gamma", "zeta v3.6", "日本", "none"]:
        ids = ours.token_ids(query)
        got = ours.scores(query)
        if not ids:
            assert not got.any()
            continue
        np.testing.assert_allclose(got, reference.get_scores_from_ids(ids), rtol=2e-6,
                                   atol=1e-6)
        np.testing.assert_allclose(got, loaded.get_scores_from_ids(ids), rtol=2e-6, atol=1e-6)


def test_bucket_splits_do_not_change_the_index(tmp_path: Path) -> None:
    texts = corpus(500, seed=3)
    one = _build(texts, tmp_path / "one")
    many = _build(texts, tmp_path / "many", splits=(1, 250, 251, 499))
    for name in sorted(p.name for p in one.iterdir()):
        assert (one / name).read_bytes() == (many / name).read_bytes(), name


def test_a_question_about_versions_matches_on_its_numbers(tmp_path: Path) -> None:
    texts = ["Upgrade from 3.3 to 3.4 first.", "Upgrade from 3.5 to 3.6 needs a restart.",
             "Set --max-request-bytes to 10485760.", "Restart the router."]
    index = Bm25Index(_build(texts, tmp_path))
    scores = index.scores("What changes from 3.5 to 3.6?")
    assert int(np.argmax(scores)) == 1 and scores[1] > 3 * scores[0]  # "from" alone
    assert int(np.argmax(index.scores("max-request-bytes limit"))) == 2
    assert int(np.argmax(index.scores("--max-request-bytes"))) == 2


def test_no_token_no_index(tmp_path: Path) -> None:
    builder = Bm25Builder()
    builder.add(builder.encode(pl.DataFrame({"text": ["a", "the", ""]})), 3)
    assert builder.finish(tmp_path) is None
    assert load_bm25(tmp_path) is None


def _reference_scores(texts: list[str], query: str) -> np.ndarray:
    """BM25 (Lucene variant, bm25s' defaults) by hand, one document at a time, in the float
    steps the index promises: idf and the tf part in float64, each cast to float32, their
    float32 product summed in float64 over the query's tokens."""
    docs = tokenize(texts).to_list()
    n = len(docs)
    avg = sum(len(d) for d in docs) / n
    avg = avg if avg > 0 else 1.0
    df: dict[str, int] = {}
    for d in docs:
        for t in set(d):
            df[t] = df.get(t, 0) + 1
    out = np.zeros(n, np.float64)
    for t in tokenize([query]).to_list()[0]:
        if t not in df:
            continue
        idf = np.float32(np.log1p((n - df[t] + 0.5) / (df[t] + 0.5)))
        for i, d in enumerate(docs):
            tf = d.count(t)
            if tf:
                norm = 1.5 * ((1.0 - 0.75) + 0.75 * len(d) / avg)
                out[i] += np.float64(idf * np.float32(tf / (norm + tf)))
    return out.astype(np.float32)


@pytest.mark.parametrize("jit", [False, True])
def test_scores_equal_a_reference_by_hand_exactly(tmp_path: Path, monkeypatch, jit) -> None:
    # Both build paths (NumPy for small indexes, Numba from JIT_MIN_POSTINGS on) write the
    # same bytes, and their scores equal the formula computed by hand, bit for bit.
    monkeypatch.setattr(bm25_module, "JIT_MIN_TEXTS", 1 if jit else 10**9)
    monkeypatch.setattr(bm25_module, "JIT_MIN_POSTINGS", 1 if jit else 10**9)
    texts = [*corpus(700, seed=5), "v3.5 --flag x_y config.yaml 10.0.0.1", "", "the a"]
    path = _build(texts, tmp_path / "index", splits=(100, 350))
    index = Bm25Index(path)
    for query in ["alpha beta", "3.5 v3.6", "flag x_y", "gamma gamma delta", "日本 zeta",
                  "config yaml 10.0.0.1"]:
        np.testing.assert_array_equal(index.scores(query), _reference_scores(texts, query))


def test_numba_and_numpy_builds_write_identical_files(tmp_path: Path, monkeypatch) -> None:
    texts = corpus(1500, seed=7)
    monkeypatch.setattr(bm25_module, "JIT_MIN_TEXTS", 10**9)
    monkeypatch.setattr(bm25_module, "JIT_MIN_POSTINGS", 10**9)
    small = _build(texts, tmp_path / "numpy", splits=(10, 900))
    monkeypatch.setattr(bm25_module, "JIT_MIN_TEXTS", 1)
    monkeypatch.setattr(bm25_module, "JIT_MIN_POSTINGS", 1)
    large = _build(texts, tmp_path / "numba", splits=(10, 900))
    for name in sorted(p.name for p in small.iterdir()):
        assert (small / name).read_bytes() == (large / name).read_bytes(), name


def test_a_driver_without_numba_builds_the_large_index_with_numpy(tmp_path: Path) -> None:
    """A process that has not loaded Numba (a Ray driver: its workers tokenised the buckets)
    merges and scores a large index with NumPy instead of loading Numba for one pass, and
    writes the bytes the Numba build writes."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "import polars as pl\n"
        "from arrowdedup.retrieval import bm25\n"
        "bm25.JIT_MIN_TEXTS = 10**9  # the Python tokenizer: no Numba in the workers' part\n"
        "texts = Path(sys.argv[2]).read_text(encoding='utf-8').split('\\n')\n"
        "builder = bm25.Bm25Builder()\n"
        "for lo, hi in ((0, 7_500), (7_500, 15_000), (15_000, 22_500), (22_500, 30_000)):\n"
        "    part = builder.encode(pl.DataFrame({'text': texts[lo:hi]}))\n"
        "    assert part.doc_rows.shape[0] < bm25.JIT_MIN_POSTINGS\n"
        "    builder.add(part, hi - lo)\n"
        "assert sum(p.doc_rows.shape[0] for p, _ in builder._parts) >= bm25.JIT_MIN_POSTINGS\n"
        "builder.finish(Path(sys.argv[1]))\n"
        "assert 'numba' not in sys.modules, 'the finish loaded Numba'\n")
    texts = corpus(30_000, seed=3)
    (tmp_path / "texts.txt").write_text("\n".join(texts), encoding="utf-8")
    root = ROOT
    proc = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "numpy"),
                           str(tmp_path / "texts.txt")], cwd=root,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    jitted = _build(texts, tmp_path / "numba", splits=(7_500, 15_000, 22_500))
    assert bm25_module._finish_jitted(10**9)  # Numba is loaded in this process
    numpy_built = tmp_path / "numpy" / "bm25"
    assert sorted(p.name for p in numpy_built.iterdir()) == sorted(p.name for p in jitted.iterdir())
    for path in jitted.iterdir():
        assert (numpy_built / path.name).read_bytes() == path.read_bytes(), path.name


def test_index_files_do_not_depend_on_the_thread_count(tmp_path: Path, monkeypatch) -> None:
    """The merge places buckets on parallel threads and the scores are computed in parallel
    blocks of ``SCORE_BLOCK`` postings: one Numba thread and two write the same bytes, over
    more postings than a block and a term frequency too large for uint16 (the int32 counts
    are kept apart from the scores written over them)."""
    from arrowdedup.dedup.ingest import numba_threads

    monkeypatch.setattr(bm25_module, "JIT_MIN_TEXTS", 1)
    monkeypatch.setattr(bm25_module, "JIT_MIN_POSTINGS", 1)
    texts = [*corpus(30_000, seed=11), " ".join(["burst"] * 70_000), "burst once"]
    built = []
    for threads in (1, 2):  # capped at Numba's thread count (a one-core machine builds twice)
        with numba_threads(threads):
            built.append(_build(texts, tmp_path / f"t{threads}", splits=(3_000, 20_000)))
    one, many = built
    assert np.load(one / "data.csc.index.npy").shape[0] > jit.SCORE_BLOCK
    tf = np.load(one / "tf.csc.index.npy")
    assert tf.dtype == np.int32 and tf.max() == 70_000
    for name in sorted(p.name for p in one.iterdir()):
        assert (one / name).read_bytes() == (many / name).read_bytes(), name
    np.testing.assert_array_equal(Bm25Index(one).scores("burst gamma"),
                                  _reference_scores(texts, "burst gamma"))


def test_term_frequencies_are_written_in_the_narrowest_dtype() -> None:
    """uint8, then uint16, then int32: the values never change, only their width."""
    from arrowdedup.retrieval.bm25 import narrow_counts

    for top, dtype in ((255, np.uint8), (256, np.uint16), (65_535, np.uint16),
                       (65_536, np.int32)):
        values = np.array([1, 7, top], dtype=np.int32)
        got = narrow_counts(values)
        assert got.dtype == dtype and got.tolist() == values.tolist()
    assert narrow_counts(np.zeros(0, np.int32)).dtype == np.uint8
