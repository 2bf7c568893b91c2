"""Hypothesis fuzzing (bounded: a few seconds each) of the config parser, the schema validator,
the table-file reader and the Markdown / CSV extractors: whatever the input, the only exception
allowed out is an ``ArrowDedupError``."""

from __future__ import annotations

import json
import math
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from arrowdedup import ArrowDedupError, DedupConfig, ingest
from arrowdedup.config import IngestionConfig
from arrowdedup.schema import read_table_file, validate

FUZZ = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.function_scoped_fixture])


def only_clean_errors(call: Callable[[], Any]) -> Any:
    """Run ``call``; an ArrowDedupError is a clean refusal, anything else fails the test."""
    try:
        return call()
    except ArrowDedupError as err:
        assert str(err).strip(), "a refusal says something"
        return None


# ----------------------------------------------------------------------------- config

KNOWN_KEYS = sorted({
    "Deduplication", "DocSummarizer", "Ingestion", "Retrieval", "Rrf", "Analytics", "Hybrid",
    "Keyword", "Dense", "Bm25", "Salience", "Freshness", "K",
    *(f.metadata["key"] for f in IngestionConfig.__dataclass_fields__.values()),
    "MinRelevanceScore", "EnableLogging", "EnableMetrics", "HighIngestionDedupThreshold",
})
keys = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=12))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**20, 10**20),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.sampled_from(["Linear", "Logarithmic", "Exact", "Lsh", "MinHash", "Hyperplane", "1e9"]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(keys, children, max_size=5)),
    max_leaves=25,
)


@st.composite
def config_shapes(draw: st.DrawFn) -> Any:
    """Mostly well-shaped configs with hostile leaves, sometimes anything at all."""
    if draw(st.integers(0, 4)) == 0:
        return draw(json_values)
    sections = draw(st.dictionaries(
        st.sampled_from(["Ingestion", "Retrieval", "Rrf", "Analytics", "Bogus"]),
        st.dictionaries(keys, json_values, max_size=6), max_size=4))
    wrap = draw(st.integers(0, 2))
    if wrap == 1:
        return {"Deduplication": sections}
    if wrap == 2:
        return {"DocSummarizer": {"Deduplication": sections}}
    return sections


@FUZZ
@given(raw=config_shapes())
def test_fuzz_config_mapping(raw: Any) -> None:
    cfg = only_clean_errors(lambda: DedupConfig.from_dict(raw))
    if cfg is not None:
        # Whatever is accepted round-trips through its own JSON.
        assert DedupConfig.from_json(cfg.to_json()) == cfg
        assert math.isfinite(cfg.ingestion.similarity_threshold)


@FUZZ
@given(raw=config_shapes())
def test_fuzz_config_json_text(raw: Any) -> None:
    text = json.dumps(raw, allow_nan=True)
    assume(text.lstrip().startswith("{"))
    only_clean_errors(lambda: DedupConfig.from_json(text))


@FUZZ
@given(text=st.text(max_size=60))
def test_fuzz_config_any_text_or_path(text: str) -> None:
    # A string that is not a JSON object is read as a path: whatever it is, refuse cleanly.
    only_clean_errors(lambda: DedupConfig.from_json(text))


def test_config_path_with_nul_byte() -> None:
    with pytest.raises(ArrowDedupError):
        DedupConfig.from_json("bad\x00name.json")


# ----------------------------------------------------------------------------- schema

REQUIRED = ("doc_id", "segment_id", "text", "segment_type", "position")


@st.composite
def column(draw: st.DrawFn, n: int) -> pl.Series:
    kind = draw(st.sampled_from(["str", "str", "int", "float", "bool", "binary", "null",
                                 "list_f", "list_s", "array", "cat"]))
    null_rate = draw(st.sampled_from([0.0, 0.0, 0.3]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    mask = rng.random(n) < null_rate

    def nulls(values: list[Any]) -> list[Any]:
        return [None if m else v for v, m in zip(values, mask, strict=True)]

    pool = draw(st.lists(st.text(string.printable, max_size=6), min_size=1, max_size=4))
    if kind == "str":
        return pl.Series(nulls([pool[i] for i in rng.integers(0, len(pool), n)]), dtype=pl.String)
    if kind == "cat":
        return pl.Series([pool[i] for i in rng.integers(0, len(pool), n)]).cast(pl.Categorical)
    if kind == "int":
        return pl.Series(nulls(rng.integers(-5, 5, n).tolist()), dtype=pl.Int64)
    if kind == "float":
        values = rng.choice([0.0, 0.01, 0.5, 1.0, 1.5, -0.2, np.nan, np.inf], n).tolist()
        return pl.Series(nulls(values), dtype=pl.Float64)
    if kind == "bool":
        return pl.Series(nulls((rng.random(n) < 0.5).tolist()), dtype=pl.Boolean)
    if kind == "binary":
        return pl.Series(nulls([bytes(rng.integers(0, 256, 3).tolist()) for _ in range(n)]),
                         dtype=pl.Binary)
    if kind == "null":
        return pl.Series([None] * n, dtype=pl.Null)
    if kind == "list_s":
        return pl.Series(nulls([["a"] * int(rng.integers(0, 3)) for _ in range(n)]),
                         dtype=pl.List(pl.String))
    dim = int(draw(st.integers(0, 4)))
    special = [0.0, 1.0, -1.0, np.nan, np.inf, 1e39, 1e-45]
    if kind == "array":
        values = [[float(rng.choice(special)) if rng.random() < 0.1 else float(rng.normal())
                   for _ in range(dim)] for _ in range(n)]
        return pl.Series(nulls(values), dtype=pl.List(pl.Float64)).cast(
            pl.Array(pl.Float64, dim))
    values = [[float(rng.normal()) for _ in range(int(rng.integers(max(dim - 1, 0), dim + 1)))]
              for _ in range(n)]
    return pl.Series(nulls(values), dtype=pl.List(pl.Float32))


@st.composite
def hostile_frames(draw: st.DrawFn) -> pl.DataFrame:
    n = draw(st.integers(0, 12))
    data: dict[str, pl.Series] = {}
    optional = ("embedding", "salience", "language", "content_hash", "doc_type")
    for name in REQUIRED + optional:
        include = draw(st.integers(0, 9)) > (0 if name in REQUIRED else 5)
        if not include:
            continue
        if name in REQUIRED and draw(st.integers(0, 2)) > 0:
            # a plausible column most of the time, so that validation gets deep
            if name == "position":
                data[name] = pl.Series(list(range(n)), dtype=pl.Int32)
            elif name == "segment_id":
                data[name] = pl.Series([f"s{i}" for i in range(n)], dtype=pl.String)
            else:
                data[name] = pl.Series([f"{name}{i % 3}" for i in range(n)], dtype=pl.String)
        else:
            data[name] = draw(column(n))
    return pl.DataFrame(data)


@FUZZ
@given(frame=hostile_frames())
def test_fuzz_schema_validator_and_ingest(frame: pl.DataFrame) -> None:
    before = frame.clone()
    only_clean_errors(lambda: validate(frame))
    assert frame.equals(before), "validation never changes the frame"
    only_clean_errors(lambda: ingest(frame))


@FUZZ
@given(data=st.binary(max_size=400),
       prefix=st.sampled_from([b"", b"PAR1", b"ARROW1", b"\xff\xff\xff\xff"]),
       suffix=st.sampled_from([b"", b"PAR1", b"ARROW1"]))
def test_fuzz_table_file_reader(data: bytes, prefix: bytes, suffix: bytes,
                                tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("f") / "input.parquet"
    path.write_bytes(prefix + data + suffix)
    only_clean_errors(lambda: read_table_file(path))


# ----------------------------------------------------------------------------- extractors

md_pieces = st.sampled_from([
    "---\n", "+++\n", "title: x\n", "title: [unclosed\n", "date: 2024-13-45\n", "lang: en\n",
    "date: 2021-01-01T00:00:00Z\n", ": :\n", "- a\n", "# Heading\n", "## Sub\n", "text line\n",
    "\n", "```python\ncode\n", "```\n", "| a | b |\n", "|---|---|\n", "| 1 |\n",
    "{{< shortcode x=\"y\" >}}\n", "{{% note %}}\n", "{{< /shortcode >}}\n", "<div>html</div>\n",
    "> quote\n", "* item\n", "1. one\n", "![img](a.png)\n", "\t\tindented\n", "title = 'toml'\n",
    "\x00", "\ufeff", "\r\n", "é中文\n", "[link](http://x)\n", "---", "&amp; &#0; &#xD800;\n",
])


@FUZZ
@given(pieces=st.lists(md_pieces, max_size=25), noise=st.text(max_size=30))
def test_fuzz_markdown_parser(pieces: list[str], noise: str) -> None:
    from arrowdedup.extract.markdown import parse_markdown

    text = "".join(pieces) + noise
    only_clean_errors(lambda: parse_markdown(text, "fuzz.md"))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(md_pieces, max_size=20), raw=st.binary(max_size=40),
       suffix=st.sampled_from([".md", ".csv", ".tsv", ".txt", ".html", ".jsonl"]))
def test_fuzz_extract_files(pieces: list[str], raw: bytes, suffix: str,
                            tmp_path_factory: pytest.TempPathFactory) -> None:
    from arrowdedup.extract import extract

    content = "".join(pieces).encode("utf-8", "surrogatepass") + raw
    folder = tmp_path_factory.mktemp("docs")
    (folder / f"doc{suffix}").write_bytes(content)
    frame = only_clean_errors(lambda: extract([folder], workers=1))
    if frame is not None and frame.height:
        validate(frame)  # what the extractor yields is a valid segments table


csv_cells = st.sampled_from(["a", "b", '"quoted, cell"', '"open', '""', "", "x\ny", "1.5",
                             "é", " ", "\t", '"a""b"', "NULL", "\x00"])


@FUZZ
@given(header=st.lists(st.sampled_from(["text", "name", "id", '"h"', "é"]), min_size=1,
                       max_size=4, unique=True),
       rows=st.lists(st.lists(csv_cells, max_size=5), max_size=8),
       tsv=st.booleans(), keys=st.sampled_from([None, ["id"], ["nope"], ["text", "name"]]))
def test_fuzz_csv_reader(header: list[str], rows: list[list[str]], tsv: bool,
                         keys: list[str] | None) -> None:
    from arrowdedup.extract.tables import read_delimited

    sep = "\t" if tsv else ","
    text = "\n".join([sep.join(header)] + [sep.join(r) for r in rows])
    only_clean_errors(lambda: read_delimited(text, "fuzz.csv", tsv=tsv, key_columns=keys))


def test_csv_with_empty_first_line_then_repeated_values() -> None:
    # found by the fuzzer: a blank line before a duplicated header used to raise Polars'
    # DuplicateError
    from arrowdedup.extract.tables import read_delimited

    with pytest.raises(ArrowDedupError, match=r"fuzz\.csv"):
        read_delimited("\na,a\n1,2\n", "fuzz.csv", tsv=False, key_columns=None)


def test_csv_with_blank_line_before_a_header_only_table() -> None:
    # found by the fuzzer (used to raise Polars' ComputeError): blank lines before the header
    # are skipped, and a header without rows is an empty table
    from arrowdedup.extract.tables import read_delimited

    frame = read_delimited("\na\n", "fuzz.csv", tsv=False, key_columns=None)
    assert frame.height == 0


def test_ragged_csv_is_refused_with_lines(tmp_path: Path) -> None:
    from arrowdedup.extract import extract

    path = tmp_path / "ragged.csv"
    path.write_text("id,text\n1,ok\n2,fine,extra\n3,good\n4\n")
    with pytest.raises(ArrowDedupError) as info:
        extract([path])
    message = str(info.value)
    assert "ragged.csv" in message and "lines" in message


def test_broken_front_matter_is_refused(tmp_path: Path) -> None:
    from arrowdedup.extract import extract

    unclosed = tmp_path / "a" / "unclosed.md"
    unclosed.parent.mkdir()
    unclosed.write_text("---\ntitle: x\n\n# Body\n")
    with pytest.raises(ArrowDedupError, match="never closed"):
        extract([unclosed])
    broken = tmp_path / "b" / "yaml.md"
    broken.parent.mkdir()
    broken.write_text("---\ntitle: [unclosed\n---\n# Body\n")
    with pytest.raises(ArrowDedupError, match="broken YAML front matter"):
        extract([broken])
    # skip_bad_files turns the refusal into a listed skip, and good files still come through
    (tmp_path / "b" / "good.md").write_text("# Good\n\nA paragraph.\n")
    from arrowdedup.extract.core import extract_documents

    result = extract_documents([tmp_path / "b"], skip_bad_files=True)
    assert result.segments.height >= 1
    assert any("yaml.md" in str(s) for s in result.skipped)
