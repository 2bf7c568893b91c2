"""ingest / ingest_to_store on a Hugging Face datasets.Dataset (the real package): zero-copy
without an indices mapping, rows taken once with one, columns= mapping, DatasetDict refused."""

from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import arrowdedup as ad
from arrowdedup.errors import InputError, MissingDependencyError

datasets = pytest.importorskip("datasets", reason="the [datasets] extra is not installed")

from arrowdedup.integrations.datasets import dataset_table  # noqa: E402

COLUMNS = {"doc_id": "url", "text": "content", "embedding": "emb"}


@pytest.fixture(scope="module")
def dataset(sample_segments, embedder):
    texts = sample_segments.get_column("text").to_list()
    vectors, _ = ad.embed_texts(texts, embedder)
    ds = datasets.Dataset.from_dict({
        "url": sample_segments.get_column("doc_id").to_list(), "content": texts,
        "emb": vectors.tolist()})
    return ds.cast_column("emb", datasets.Sequence(datasets.Value("float32"),
                                                   length=vectors.shape[1]))


def frame_of(ds):
    """The same rows as a Polars segments table built by hand (the library's own input)."""
    frame = pl.from_arrow(ds.flatten_indices().data.table)
    return frame.rename({"url": "doc_id", "content": "text", "emb": "embedding"}).with_columns(
        segment_type=pl.lit("paragraph"),
        position=pl.int_range(pl.len(), dtype=pl.Int32).over("doc_id"),
    ).with_columns(segment_id=pl.format("{}#{}", "doc_id", "position"))


def decisions(result):
    return result.decisions.select("segment_id", "action", "representative_id")


def test_ingest_takes_a_dataset_with_a_column_mapping(dataset):
    result = ad.ingest(dataset, columns=COLUMNS)
    expected = ad.ingest(frame_of(dataset))
    assert result.final_count < result.original_count
    assert decisions(result).equals(decisions(expected))
    again = ad.ingest(dataset, columns=COLUMNS)
    assert result.kept.equals(again.kept)


def test_zero_copy_without_an_indices_mapping(dataset):
    table = dataset_table(dataset, COLUMNS)
    source = dataset.data.table
    assert table.column("embedding").chunks[0].values.buffers()[1].address == \
        source.column("emb").chunks[0].values.buffers()[1].address
    assert table.column("text").chunks[0].buffers()[2].address == \
        source.column("content").chunks[0].buffers()[2].address
    assert table.num_rows == dataset.num_rows


@pytest.mark.parametrize("how", ["select", "shuffle", "filter"])
def test_a_dataset_with_an_indices_mapping_is_taken_once(dataset, how):
    if how == "select":
        view = dataset.select(list(range(400, 0, -3)))
    elif how == "shuffle":
        view = dataset.shuffle(seed=7)
    else:
        view = dataset.filter(lambda row: row["url"].startswith("docs/"))
    table = dataset_table(view, COLUMNS)
    assert table.column("text").to_pylist() == view["content"]
    result = ad.ingest(view, columns=COLUMNS)
    assert decisions(result).equals(decisions(ad.ingest(frame_of(view))))


def test_ingest_to_store_takes_a_dataset(dataset, tmp_path):
    job = ad.ingest_to_store(dataset.select(range(200)), tmp_path / "store", columns=COLUMNS,
                             quiet=True)
    expected = ad.ingest(frame_of(dataset.select(range(200))))
    assert job.final_count == expected.final_count
    assert job.store.segments().collect().height == expected.final_count


def test_a_dataset_dict_is_refused_naming_its_splits(dataset):
    both = datasets.DatasetDict({"train": dataset, "test": dataset})
    with pytest.raises(InputError, match=r"'train', 'test'.*dataset\['train'\]"):
        ad.ingest(both, columns=COLUMNS)
    with pytest.raises(InputError, match=r"'train', 'test'"):
        ad.ingest_to_store(both, "unused", columns=COLUMNS)


def test_bad_mappings_are_refused(dataset):
    with pytest.raises(InputError, match=r"do not exist; the dataset has: url, content, emb"):
        ad.ingest(dataset, columns={"doc_id": "link", "text": "content"})
    with pytest.raises(InputError, match=r"no 'doc_id' or 'text' column.*columns="):
        ad.ingest(dataset)
    with pytest.raises(InputError, match=r"columns= maps the columns of a datasets.Dataset"):
        ad.ingest(pl.DataFrame({"url": ["a"]}), columns={"doc_id": "url"})
    renamed = dataset.rename_column("emb", "text")
    with pytest.raises(InputError, match=r"already has column\(s\) \['text'\]"):
        ad.ingest(renamed, columns={"doc_id": "url", "text": "content"})


def test_given_ids_and_positions_are_kept(dataset):
    ds = dataset.select(range(20)).map(lambda row, i: {"sid": f"x{i}", "pos": i},
                                       with_indices=True)
    table = dataset_table(ds, {**COLUMNS, "segment_id": "sid", "position": "pos"})
    assert table.column("segment_id").to_pylist() == [f"x{i}" for i in range(20)]
    assert pa.types.is_integer(table.column("position").type)
    assert np.array_equal(np.asarray(table.column("position")), np.arange(20))


def test_import_arrowdedup_does_not_import_datasets():
    code = ("import sys, arrowdedup as ad; ad.ingest; ad.integrations; "
            "assert 'datasets' not in sys.modules, 'datasets imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_extra_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    monkeypatch.delitem(sys.modules, "arrowdedup.integrations.datasets", raising=False)
    with pytest.raises(MissingDependencyError, match=r"pip install 'arrowdedup\[datasets\]'"):
        importlib.import_module("arrowdedup.integrations.datasets")
