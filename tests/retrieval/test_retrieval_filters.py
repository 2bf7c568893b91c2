"""Search filters (`where`), the `cosine` column, the dense floor and version-aware freshness."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from arrowdedup import DedupConfig, InputError, ingest, search, write_store
from arrowdedup.cli import app
from arrowdedup.retrieval.search import version_keys
from tests.helpers import segments_frame, unit

runner = CliRunner()
DIM = 8


def _store(root: Path, frame: pl.DataFrame) -> Path:
    write_store(ingest(frame), root, buckets=2)
    return root


@pytest.fixture(scope="module")
def versioned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same install page in three versions (identical text and vectors), a German page and
    an unrelated one; ``doc_version`` set, no ``created_at``."""
    rng = np.random.default_rng(11)
    install, other, german = (unit(rng.normal(size=DIM)) for _ in range(3))
    texts, vectors, docs, versions, langs = [], [], [], [], []
    for v in ("3.9", "3.10", "3.2"):
        texts += ["Install the collector with the package manager.", "Unrelated release notes."]
        vectors += [install, other]
        docs += [f"docs/v{v}/install"] * 2
        versions += [v, v]
        langs += ["en", "en"]
    texts.append("Installieren Sie den Collector mit dem Paketmanager.")
    vectors.append(unit(install + 0.3 * german))
    docs.append("docs/de/install")
    versions.append(None)
    langs.append("de")
    frame = segments_frame(texts, vectors, doc_id=docs, doc_version=versions, language=langs)
    return _store(tmp_path_factory.mktemp("versioned") / "store", frame)


def _query(store: Path) -> np.ndarray:
    from arrowdedup import open_store

    return np.asarray(open_store(store).vectors()[0], dtype=np.float32)  # the install vector


class FixedEmbedder:
    """Embeds every text as one stored vector: the keyword tests exercise BM25, not a model."""

    name = "fixed"
    dim = DIM

    def __init__(self, vector: np.ndarray) -> None:
        self.vector = vector

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.tile(self.vector, (len(texts), 1))


def test_version_keys_compare_as_versions() -> None:
    keys = version_keys(pl.Series(["3.9", "3.10", "3.10.1", "v2", None, "3.2"]))
    order = [v for _, v in sorted(zip(keys[[0, 1, 2, 3, 5]], ["3.9", "3.10", "3.10.1", "v2",
                                                               "3.2"], strict=True))]
    assert order == ["v2", "3.2", "3.9", "3.10", "3.10.1"]
    assert np.isnan(keys[4])


def test_newest_version_of_a_page_wins_the_tie(versioned: Path) -> None:
    res = search(versioned, _query(versioned), k=3, mode="hybrid")
    top = res.results.row(0, named=True)
    assert top["doc_id"] == "docs/v3.10/install"  # not 3.9 (a string sort would pick it)
    assert sorted(top["displaced_ids"]) == ["s0", "s4"]  # the 3.9 and 3.2 copies
    assert top["rank_freshness"] == 1


def test_where_narrows_dense_and_bm25_before_ranking(versioned: Path) -> None:
    res = search(versioned, _query(versioned), k=5, where="doc_id LIKE 'docs/v3.9/%'")
    assert set(res.results["doc_id"]) == {"docs/v3.9/install"}
    assert res.results["displaced_ids"].to_list()[0] == []  # the other copies never competed
    assert res.where == "doc_id LIKE 'docs/v3.9/%'"
    res = search(versioned, "Paketmanager collector", k=5, mode="keyword",
                 where="language = 'de'", embedder=FixedEmbedder(_query(versioned)))
    assert res.results["doc_id"].to_list() == ["docs/de/install"]
    assert res.results["rank_bm25"].to_list() == [1]
    res = search(versioned, "release notes", k=5, mode="keyword",
                 where="doc_id LIKE 'docs/v3.2/%'", embedder=FixedEmbedder(_query(versioned)))
    assert res.results["segment_id"].to_list()[0] == "s5"  # the BM25 hit of that version
    res = search(versioned, _query(versioned), k=5, where="doc_version IS NULL")
    assert res.results["doc_id"].to_list() == ["docs/de/install"]
    res = search(versioned, _query(versioned), k=5, where="doc_id = 'nothing'")
    assert res.results.height == 0 and res.before == 0


def test_bad_where_is_one_line_naming_the_columns(versioned: Path) -> None:
    with pytest.raises(InputError, match=r"is not a valid filter: .*segment columns \(doc_id"):
        search(versioned, _query(versioned), where="no_such_column = 1")
    out = runner.invoke(app, ["search", str(versioned), "install", "--where", "doc_id LIKE",
                              "--mode", "keyword"])
    assert out.exit_code == 1
    assert out.output.startswith("error: --where 'doc_id LIKE' is not a valid filter")
    assert len(out.output.strip().splitlines()) == 1


def test_where_reaches_the_segments_and_nothing_else(versioned: Path, tmp_path: Path) -> None:
    """``where`` is SQL that may come from a user further up (a RAG service passing a filter
    through): it can neither read files through DuckDB nor add rows that are no segments
    by closing the parenthesis around it."""
    secret = tmp_path / "secret.txt"
    secret.write_text("docs/en/install\n")
    for where in (f"doc_id IN (SELECT trim(content) FROM read_text('{secret}'))",
                  f"(SELECT count(*) FROM read_csv('{secret}', header = false)) > 0",
                  "1 = 1) UNION ALL SELECT 10 ** 6 WHERE (1 = 1",
                  "1 = 1) UNION ALL SELECT __row FROM segments WHERE (1 = 1"):
        with pytest.raises(InputError, match="is not a valid filter"):
            search(versioned, _query(versioned), k=5, where=where)
    everything = search(versioned, _query(versioned), k=5, where="1 = 1")
    assert everything.results.height > 0  # a plain predicate still works


@pytest.mark.parametrize("k", [0, -3, True, 2**31, 10**11])
def test_k_out_of_range_is_refused_before_anything_runs(versioned: Path, k: int) -> None:
    """k outside 1 .. 2**31 - 1 is refused as the caller's mistake (a k past Arrow's 32-bit
    indices reached pyarrow and came back as an ArrowInvalid)."""
    with pytest.raises(InputError, match=r"^k = "):
        search(versioned, _query(versioned), k=k)


def test_cosine_says_what_rrf_cannot(tmp_path: Path) -> None:
    e = np.eye(DIM, dtype=np.float32)
    frame = segments_frame(["first", "second"], [e[0], e[1]], doc_id=["a", "b"])
    store = _store(tmp_path / "store", frame)
    res = search(store, e[2], k=2)  # orthogonal to both segments
    assert res.results["score"][0] > 0.9  # rank-only score: looks like a great match
    assert res.results["cosine"].to_list() == [pytest.approx(0.0, abs=1e-6)] * 2
    near = (0.8 * e[0] + 0.6 * e[2]).astype(np.float32)
    res = search(store, near, k=2, min_cosine=0.5)
    assert res.results["segment_id"].to_list() == ["s0"]
    assert res.results["cosine"][0] == pytest.approx(0.8, abs=1e-5)
    assert search(store, e[2], k=2, min_cosine=0.5).results.height == 0
    cfg = DedupConfig.from_json({"Retrieval": {"MinDenseSimilarity": 0.5}})
    assert search(store, near, k=2, config=cfg).results.height == 1
    with pytest.raises(InputError, match="min_cosine"):
        search(store, near, min_cosine=2.0)


def test_library_options_are_keyword_only(versioned: Path) -> None:
    with pytest.raises(TypeError):
        search(versioned, _query(versioned), 3)  # type: ignore[misc]
