"""Option objects (issue 47 item 5): ``ExtractOptions`` and ``RunOptions`` replace the long
keyword lists of ``ingest_to_store`` and ``update_store``; the old keywords keep working for
one release with a ``DeprecationWarning`` naming the new spelling, and give the same store."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

import polars as pl
import pytest

import arrowdedup
from arrowdedup import ExtractOptions, RunOptions, ingest_to_store, open_store, update_store
from tests.helpers import M2V_MODEL, SAMPLE, need
from tests.helpers.pipeline import corpus, data_files


def _table(docs: int = 6, per_doc: int = 8, seed: int = 3, prefix: str = "") -> pl.DataFrame:
    """The pipeline corpus (near copies in every document), its ids prefixed when asked."""
    frame = corpus(docs=docs, per_doc=per_doc, seed=seed)
    return frame.with_columns((pl.lit(prefix) + pl.col("doc_id")).alias("doc_id"),
                              (pl.lit(prefix) + pl.col("segment_id")).alias("segment_id"))


def test_options_and_old_keywords_write_the_same_store(tmp_path: Path) -> None:
    table = _table()
    new = ingest_to_store(table, tmp_path / "new",
                          run=RunOptions(buckets=3, threads=1, quiet=True))
    with pytest.warns(DeprecationWarning, match=r"run=RunOptions\(buckets=\.\.\.\)"):
        old = ingest_to_store(table, tmp_path / "old", buckets=3, threads=1, quiet=True)
    assert new.final_count == old.final_count
    assert data_files(tmp_path / "new") == data_files(tmp_path / "old")
    assert open_store(tmp_path / "new").manifest["buckets"] == 3


def test_extraction_keywords_map_onto_extract_options(tmp_path: Path) -> None:
    if not SAMPLE.is_dir():
        pytest.skip("data/sample is absent")
    files = sorted(SAMPLE.rglob("*.md"))[:3]
    new = ingest_to_store(files, tmp_path / "new", embedder="model2vec:" + _m2v(),
                          extract=ExtractOptions(root=SAMPLE, detect_keys=False),
                          run=RunOptions(quiet=True))
    with pytest.warns(DeprecationWarning, match=r"extract=ExtractOptions\(root=\.\.\.\)"):
        old = ingest_to_store(files, tmp_path / "old", embedder="model2vec:" + _m2v(),
                              root=SAMPLE, detect_keys=False, run=RunOptions(quiet=True))
    ids = sorted(new.documents.collect().get_column("doc_id").to_list())
    assert ids == sorted(old.documents.collect().get_column("doc_id").to_list())
    assert all(not d.startswith("/") for d in ids)  # relative to root


def _m2v() -> str:
    return str(need(M2V_MODEL))


def test_an_old_keyword_beside_its_object_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="both run= and threads="), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ingest_to_store(_table(), tmp_path / "s", run=RunOptions(), threads=2)
    with pytest.raises(TypeError, match="both extract= and root="):
        ingest_to_store(_table(), tmp_path / "s", extract=ExtractOptions(), root=tmp_path)
    assert not (tmp_path / "s").exists()


def test_an_unknown_keyword_is_a_type_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'bukets'"):
        ingest_to_store(_table(), tmp_path / "s", bukets=4)


def test_update_takes_the_run_options_it_uses(tmp_path: Path) -> None:
    table = _table()
    ingest_to_store(table, tmp_path / "s", run=RunOptions(quiet=True))
    more = _table(docs=2, per_doc=5, seed=9, prefix="new-")
    result = update_store(tmp_path / "s", more, run=RunOptions(threads=1, keep_versions=3))
    assert result.changes["added"] == 2
    with pytest.warns(DeprecationWarning, match=r"update_store\(threads=\.\.\.\)"):
        update_store(tmp_path / "s", more, threads=1, dry_run=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'buckets'"):
        update_store(tmp_path / "s", more, buckets=4)


def test_no_public_function_takes_more_than_twelve_parameters() -> None:
    """Issue 47's bound, keyword-only ones and ``**legacy`` counted."""
    wide = {}
    for name in arrowdedup.__all__:
        obj = getattr(arrowdedup, name)
        if inspect.isfunction(obj):
            count = len(inspect.signature(obj).parameters)
            if count > 12:
                wide[name] = count
    assert not wide, wide
