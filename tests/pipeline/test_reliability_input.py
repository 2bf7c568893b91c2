"""Bad input (issue 8): each case is refused with one clear message naming the problem, the
rows or key and the fix — a subclass of ``ArrowDedupError`` from the library, exit code 1 and no
traceback from the CLI. Valid edge cases (empty table, one-segment document, loose types) pass."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from arrowdedup import (
    ArrowDedupError,
    ConfigError,
    DedupConfig,
    InputError,
    SchemaError,
    ingest,
    verify_store,
)
from arrowdedup.cli import app
from tests.helpers import ROOT, segments_frame, unit

runner = CliRunner()


def base(n: int = 6) -> pl.DataFrame:
    rng = np.random.default_rng(3)
    return segments_frame([f"text {i}" for i in range(n)],
                          [unit(rng.normal(size=4)) for _ in range(n)],
                          doc_id=["a"] * 3 + ["b"] * (n - 3))


def with_list_embeddings(values: list[list[float] | None]) -> pl.DataFrame:
    frame = base(len(values)).drop("embedding")
    return frame.with_columns(pl.Series("embedding", values, dtype=pl.List(pl.Float64)))


def set_value(frame: pl.DataFrame, column: str, row: int, value: object) -> pl.DataFrame:
    values = frame.get_column(column).to_list()
    values[row] = value
    return frame.with_columns(pl.Series(column, values, dtype=frame.schema[column]))


def emb_with(row: int, value: float) -> pl.DataFrame:
    values: list[list[float] | None] = [[0.5, 0.5, 0.5, 0.5] for _ in range(6)]
    values[row] = [0.1, value, 0.2, 0.3]
    return with_list_embeddings(values)


def fixed_emb_with(row: int, value: float) -> pl.DataFrame:
    frame = base()
    matrix = frame.get_column("embedding").to_numpy().copy()
    matrix[row, 1] = value
    return frame.with_columns(pl.Series("embedding", matrix, dtype=pl.Array(pl.Float32, 4)))


# (id, builder, error class, substrings the message must contain)
BAD_TABLES: list[tuple[str, Callable[[], pl.DataFrame], type[ArrowDedupError], list[str]]] = [
    ("missing-column", lambda: base().drop("position"), SchemaError,
     ["missing required column", "'position'", "add them"]),
    ("missing-two-columns", lambda: base().drop("text", "doc_id"), SchemaError,
     ["'doc_id'", "'text'"]),
    ("text-not-string", lambda: base().with_columns(pl.col("position").alias("text")),
     SchemaError, ["'text'", "expected UTF-8 strings", "cast"]),
    ("text-binary", lambda: base().with_columns(pl.col("text").cast(pl.Binary)), SchemaError,
     ["'text'", "binary", "decode"]),
    ("doc-id-not-string", lambda: base().with_columns(pl.col("position").alias("doc_id")),
     SchemaError, ["'doc_id'", "expected a string"]),
    ("position-float", lambda: base().with_columns(pl.col("position").cast(pl.Float64)),
     SchemaError, ["'position'", "integer"]),
    ("embedding-strings", lambda: base().with_columns(
        pl.Series("embedding", [["x"]] * 6, dtype=pl.List(pl.String))), SchemaError,
     ["'embedding'", "list or fixed-size list of floats"]),
    ("embedding-scalar", lambda: base().with_columns(pl.lit(1.0).alias("embedding")),
     SchemaError, ["'embedding'", "expected a list"]),
    ("null-doc-id", lambda: set_value(base(), "doc_id", 2, None), SchemaError,
     ["'doc_id'", "null", "rows 2", "fill or drop"]),
    ("null-segment-id", lambda: set_value(base(), "segment_id", 4, None), SchemaError,
     ["'segment_id'", "null", "rows 4"]),
    ("null-text", lambda: set_value(base(), "text", 1, None), SchemaError,
     ["'text'", "null", "rows 1"]),
    ("duplicate-segment-id", lambda: set_value(base(), "segment_id", 3, "s1"), SchemaError,
     ["'segment_id'", "duplicate", "rows 1, 3", "unique"]),
    ("mixed-dimension", lambda: with_list_embeddings(
        [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0, 1.0], [1.0, 0.0], None, [0.5, 0.5]]), SchemaError,
     ["'embedding'", "mixed dimensions", "rows 2", "same dimension"]),
    ("zero-dimension", lambda: with_list_embeddings([[] for _ in range(6)]), SchemaError,
     ["'embedding'", "dimension 0", "rows 0, 1"]),
    ("nan-embedding", lambda: emb_with(1, math.nan), SchemaError,
     ["'embedding'", "NaN or infinite", "rows 1", "finite"]),
    ("inf-embedding", lambda: emb_with(2, math.inf), SchemaError, ["NaN or infinite", "rows 2"]),
    ("minus-inf-embedding", lambda: emb_with(5, -math.inf), SchemaError, ["rows 5"]),
    ("nan-fixed-embedding", lambda: fixed_emb_with(3, math.nan), SchemaError,
     ["'embedding'", "rows 3"]),
    ("float32-overflow", lambda: emb_with(0, 1e300), SchemaError, ["'embedding'", "rows 0"]),
    ("salience-above-1", lambda: base().with_columns(
        pl.Series("salience", [0.5, 1.5, 0.5, 0.5, 0.5, 0.5], dtype=pl.Float32)), SchemaError,
     ["'salience'", "outside [0, 1]", "rows 1", "rescale"]),
    ("salience-negative", lambda: base().with_columns(
        pl.Series("salience", [0.5, 0.5, 0.5, 0.5, -0.1, 0.5], dtype=pl.Float64)), SchemaError,
     ["'salience'", "rows 4"]),
    ("salience-nan", lambda: base().with_columns(
        pl.Series("salience", [math.nan, 0.5, 0.5, 0.5, 0.5, 0.5], dtype=pl.Float64)),
     SchemaError, ["'salience'", "NaN", "rows 0"]),
    ("salience-string", lambda: base().with_columns(pl.lit("high").alias("salience")),
     SchemaError, ["'salience'", "cast"]),
    ("doc-type-list", lambda: base().with_columns(pl.lit(["pdf"]).alias("doc_type")),
     SchemaError, ["'doc_type'", "expected a string"]),
]


def _check_message(err: BaseException, needles: list[str]) -> None:
    message = str(err)
    assert "\n" not in message, "a refusal is one line"
    for needle in needles:
        assert needle.lower() in message.lower(), f"{needle!r} not in {message!r}"


@pytest.mark.parametrize(("builder", "kind", "needles"),
                         [pytest.param(b, k, n, id=i) for i, b, k, n in BAD_TABLES])
def test_library_refuses(builder: Callable[[], pl.DataFrame], kind: type[ArrowDedupError],
                         needles: list[str]) -> None:
    frame = builder()
    with pytest.raises(kind) as info:
        ingest(frame)
    _check_message(info.value, needles)


CLI_CASES = ["missing-column", "text-binary", "null-doc-id", "duplicate-segment-id",
             "mixed-dimension", "nan-embedding", "salience-above-1"]


@pytest.mark.parametrize("case", CLI_CASES)
def test_cli_refuses_with_exit_1(case: str, tmp_path: Path) -> None:
    builder, _, needles = next((b, k, n) for i, b, k, n in BAD_TABLES if i == case)
    path = tmp_path / "bad.parquet"
    builder().write_parquet(path)
    out = tmp_path / "store"
    result = runner.invoke(app, ["ingest", str(path), "--out", str(out), "-q"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.output.startswith("error: ")
    assert needles[0].lower() in result.output.lower()
    assert not (out / "current").exists(), "a refused run writes no version"


def test_cli_subprocess_stderr_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    set_value(base(), "segment_id", 3, "s1").write_parquet(path)
    proc = subprocess.run(
        [sys.executable, "-m", "arrowdedup", "ingest", str(path), "--out", str(tmp_path / "s")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: column 'segment_id'"), proc.stderr


# ----------------------------------------------------------------------------- valid edge cases


def test_loose_types_are_accepted_and_not_rewritten() -> None:
    frame = base().with_columns(
        pl.col("position").cast(pl.UInt8),
        pl.Series("salience", [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], dtype=pl.Float64),
        pl.col("segment_type").cast(pl.Categorical),
        pl.col("embedding").cast(pl.Array(pl.Float64, 4)),
    )
    result = ingest(frame)
    for col in ("position", "segment_type", "embedding", "text"):
        assert result.kept.schema[col] == frame.schema[col], col
    assert result.kept.schema["salience"] == pl.Float64
    expected = frame.join(result.kept.select("segment_id"), on="segment_id", how="semi")
    assert result.kept.get_column("embedding").to_arrow().equals(
        expected.get_column("embedding").to_arrow())


def test_list_embeddings_float64_accepted() -> None:
    result = ingest(with_list_embeddings([[1.0, 0.0], [0.0, 1.0], None, [1.0, 0.0], [0, 0],
                                          [0.7, 0.7]]))
    assert result.original_count == 6
    # the null and the zero vector are "not comparable": kept
    kept = set(result.kept.get_column("segment_id").to_list())
    assert {"s2", "s4"} <= kept


def test_empty_table_is_a_valid_empty_result(tmp_path: Path) -> None:
    empty = base().clear()
    result = ingest(empty)
    assert result.kept.height == 0 and result.decisions.height == 0
    assert result.documents.height == 0 and result.dedup_ratio == 0.0
    path = tmp_path / "empty.parquet"
    empty.write_parquet(path)
    out = tmp_path / "store"
    cli = runner.invoke(app, ["ingest", str(path), "--out", str(out), "-q"])
    assert cli.exit_code == 0, cli.output
    report = verify_store(out)
    assert report.ok, [str(p) for p in report.problems]
    assert report.checked["decisions"] == 0


def test_one_segment_document_is_kept() -> None:
    frame = segments_frame(["alone"], [unit(np.ones(4))], doc_id="solo", salience=[0.5])
    result = ingest(frame)
    assert result.kept.get_column("segment_id").to_list() == ["s0"]
    assert result.kept.get_column("salience").to_list() == [0.5]
    assert result.documents.row(0, named=True)["dedup_ratio"] == 0.0


def test_max_segments_per_document(tmp_path: Path) -> None:
    frame = base(8)  # documents a (3 rows) and b (5 rows)
    cfg = DedupConfig.from_json({"Ingestion": {"MaxSegmentsPerDocument": 4}})
    with pytest.raises(SchemaError) as info:
        ingest(frame, cfg)
    _check_message(info.value, ["document 'b'", "5 segments", "MaxSegmentsPerDocument = 4",
                                "raise the limit"])
    assert ingest(frame, DedupConfig.from_json(
        {"Ingestion": {"MaxSegmentsPerDocument": 5}})).original_count == 8
    assert ingest(frame).original_count == 8  # default: no limit
    path, conf = tmp_path / "t.parquet", tmp_path / "c.json"
    frame.write_parquet(path)
    conf.write_text('{"Ingestion": {"MaxSegmentsPerDocument": 2}}')
    cli = runner.invoke(app, ["ingest", str(path), "--out", str(tmp_path / "s"), "-c", str(conf)])
    assert cli.exit_code == 1 and "MaxSegmentsPerDocument" in cli.output


# ----------------------------------------------------------------------------- files


def _invalid_utf8_table() -> pa.Table:
    text = pa.array([b"fine", b"\xff\xfe not utf-8", b"ok"], pa.binary()).view(pa.string())
    return pa.table({"doc_id": ["d"] * 3, "segment_id": ["a", "b", "c"], "text": text,
                     "segment_type": ["paragraph"] * 3,
                     "position": pa.array([0, 1, 2], pa.int32())})


def test_invalid_utf8_strings_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad-utf8.parquet"
    pq.write_table(_invalid_utf8_table(), path)
    with pytest.raises(InputError) as info:
        ingest(path)
    _check_message(info.value, ["column 'text'", str(path), "not valid UTF-8", "re-export"])
    with pytest.raises(InputError, match="not valid UTF-8"):
        ingest(_invalid_utf8_table())
    cli = runner.invoke(app, ["ingest", str(path), "--out", str(tmp_path / "s")])
    assert cli.exit_code == 1 and "UTF-8" in cli.output and "Traceback" not in cli.output


def test_binary_text_column_in_parquet_refused(tmp_path: Path) -> None:
    table = _invalid_utf8_table()
    table = table.set_column(2, "text", table.column("text").cast(pa.binary()))
    path = tmp_path / "binary.parquet"
    pq.write_table(table, path)
    with pytest.raises(SchemaError, match=r"'text'.*UTF-8"):
        ingest(path)
    cli = runner.invoke(app, ["ingest", str(path), "--out", str(tmp_path / "s")])
    assert cli.exit_code == 1 and "Traceback" not in cli.output


def _write_ipc(path: Path, table: pa.Table, *, stream: bool = False) -> Path:
    """``table`` as an Arrow IPC file (or stream) at ``path``."""
    new = ipc.new_stream if stream else ipc.new_file
    with pa.OSFile(str(path), "wb") as sink, new(sink, table.schema) as w:
        w.write_table(table)
    return path


def _good_file(tmp_path: Path, kind: str) -> Path:
    table = base(40).to_arrow()
    path = tmp_path / f"good.{kind}"
    if kind == "parquet":
        pq.write_table(table, path)
        return path
    return _write_ipc(path, table, stream=kind != "arrow")


@pytest.mark.parametrize("kind", ["parquet", "arrow", "stream"])
@pytest.mark.parametrize("keep", [0.0, 0.1, 0.5, 0.9])
def test_truncated_files_refused(tmp_path: Path, kind: str, keep: float) -> None:
    path = _good_file(tmp_path, kind)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(InputError) as info:
        ingest(path)
    assert str(path) in str(info.value)
    assert any(w in str(info.value) for w in ("truncated", "neither", "re-export", "convert"))


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
def test_corrupted_files_refused_or_read(tmp_path: Path, kind: str) -> None:
    path = _good_file(tmp_path, kind)
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(11)
    for pos in rng.integers(8, len(data) - 8, size=40):
        data[int(pos)] ^= 0x5A
    path.write_bytes(bytes(data))
    try:
        ingest(path)
    except ArrowDedupError as err:
        assert str(path) in str(err) or "column" in str(err)


def test_cli_truncated_file_and_garbage(tmp_path: Path) -> None:
    path = _good_file(tmp_path, "parquet")
    path.write_bytes(path.read_bytes()[:100])
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"this is not a table at all")
    for p in (path, garbage, tmp_path / "missing.parquet", tmp_path):
        cli = runner.invoke(app, ["ingest", str(p), "--out", str(tmp_path / "s")])
        assert cli.exit_code == 1, cli.output
        assert cli.output.startswith("error: ") and "Traceback" not in cli.output


def test_files_of_different_schemas_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    base().write_parquet(a)
    base().drop("embedding").write_parquet(b)
    with pytest.raises(SchemaError, match="same columns"):
        ingest([a, b])


# ----------------------------------------------------------------------------- config


BAD_CONFIGS = [
    ('{"Ingestion": {"SimilarityThresold": 0.9}}', ["unknown key", "SimilarityThresold"]),
    ('{"Ingestoin": {}}', ["unknown key", "Ingestoin", "known sections"]),
    ('{"Ingestion": {"SimilarityThreshold": "0.9"}}', ["SimilarityThreshold", "'0.9'"]),
    ('{"Ingestion": {"Enabled": "yes"}}', ["Enabled", "true or false"]),
    ('{"Ingestion": {"Enabled": 1}}', ["Enabled"]),
    ('{"Ingestion": {"SimilarityThreshold": 0}}', ["SimilarityThreshold", "(0, 1]"]),
    ('{"Ingestion": {"SimilarityThreshold": 1.5}}', ["SimilarityThreshold"]),
    ('{"Ingestion": {"SalienceThreshold": 1.0}}', ["SalienceThreshold", "[0, 1)"]),
    ('{"Ingestion": {"BoostPerNearDuplicate": -0.1}}', ["BoostPerNearDuplicate"]),
    ('{"Ingestion": {"MaxSalienceBoost": 0}}', ["MaxSalienceBoost"]),
    ('{"Ingestion": {"BoostDecayMode": "Quadratic"}}', ["BoostDecayMode", "Linear"]),
    ('{"Ingestion": {"LogBase": 1}}', ["LogBase", "> 1"]),
    ('{"Ingestion": {"MaxSegmentsPerDocument": 0}}', ["MaxSegmentsPerDocument"]),
    ('{"Ingestion": {"MaxSegmentsPerDocument": 2.5}}', ["MaxSegmentsPerDocument"]),
    ('{"Ingestion": {"Mode": "Fast"}}', ["Mode"]),
    ('{"Ingestion": {"BoostDecayMode": []}}', ["BoostDecayMode"]),
    ('{"Ingestion": {"LshMethod": {"a": 1}}}', ["LshMethod"]),
    ('{"Retrieval": {"MinRelevanceScore": 2}}', ["MinRelevanceScore", "[0, 1]"]),
    ('{"Analytics": {"HighIngestionDedupThreshold": -1}}', ["HighIngestionDedupThreshold"]),
    ('{"Ingestion": []}', ["Ingestion", "JSON object"]),
    ('[1, 2]', ["JSON object"]),
    ('{"Ingestion": {"SimilarityThreshold": 0.9,}}', ["not valid JSON", "line 1"]),
    ('{"DocSummarizer": {"Deduplication": {}, "Other": 1}}', ["Other"]),
    ('{"Deduplication": {}, "Extra": {}}', ["Extra"]),
]


@pytest.mark.parametrize(("text", "needles"), BAD_CONFIGS)
def test_bad_config_refused(text: str, needles: list[str], tmp_path: Path) -> None:
    conf = tmp_path / "c.json"
    conf.write_text(text)
    sources: list[str | Path] = [conf] + ([text] if text.startswith("{") else [])
    for source in sources:
        with pytest.raises(ConfigError) as info:
            DedupConfig.from_json(source)
        _check_message(info.value, needles)
    data = tmp_path / "t.parquet"
    base().write_parquet(data)
    cli = runner.invoke(app, ["ingest", str(data), "--out", str(tmp_path / "s"), "-c", str(conf)])
    assert cli.exit_code == 1 and cli.output.startswith("error: ") and needles[0] in cli.output


def test_unreadable_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        DedupConfig.from_json(tmp_path / "absent.json")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"Ingestion": {"Mode": "\xe9"}}')
    with pytest.raises(ConfigError, match="UTF-8"):
        DedupConfig.from_json(latin)


# ----------------------------------------------------------------------------- documents


def _m2v() -> str:
    from tests.helpers import M2V_MODEL, need

    return f"model2vec:{need(M2V_MODEL)}"


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("broken.md", "---\ntitle: [unclosed\n---\n# Body\n\nText.\n", "broken YAML front matter"),
    ("unclosed.md", "---\ntitle: x\n\n# Body\n", "never closed"),
    ("ragged.csv", "id,text\n1,ok\n2,fine,extra\n", "ragged.csv"),
    ("latin1.txt", "caf\xe9 cr\xe8me".encode("latin-1"), "latin1.txt"),
])
def test_cli_documents_refused(name: str, content: str | bytes, needle: str,
                               tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    path = docs / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    (docs / "good.md").write_text("# Fine\n\nA perfectly good paragraph.\n")
    out = tmp_path / "store"
    cli = runner.invoke(app, ["ingest", str(docs), "--out", str(out), "-q",
                              "--embedder", _m2v()])
    if name == "latin1.txt" and cli.exit_code == 0:
        pytest.fail("a non-UTF-8 text file was accepted silently")
    assert cli.exit_code == 1, cli.output
    assert cli.output.startswith("error: ") and "Traceback" not in cli.output
    assert needle in cli.output and "skip-bad-files" in cli.output
    assert not (out / "current").exists()
    skipped = runner.invoke(app, ["ingest", str(docs), "--out", str(out), "-q",
                                  "--embedder", _m2v(), "--skip-bad-files"])
    assert skipped.exit_code == 0, skipped.output
    assert verify_store(out).ok


def test_cli_documents_into_a_store_of_another_model(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Title\n\nSome paragraph about tracing.\n")
    out = tmp_path / "store"
    from arrowdedup import write_store

    write_store(ingest(base()), out, embedding_model="some-other-model")
    cli = runner.invoke(app, ["ingest", str(docs), "--out", str(out), "-q",
                              "--embedder", _m2v()])
    assert cli.exit_code == 1, cli.output
    assert "'some-other-model'" in cli.output and "must not mix" in cli.output


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9])
def test_truncated_ipc_file_refused_by_the_job(tmp_path: Path, keep: float) -> None:
    """The job maps an IPC file instead of reading it through ``read_table_file``: a file cut
    short (its magic intact, its footer gone) is refused by name, from the library and the
    CLI, and no version is written."""
    from arrowdedup import ingest_to_store

    path = _good_file(tmp_path, "arrow")
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    assert path.read_bytes()[:6] == b"ARROW1"
    with pytest.raises(InputError) as info:
        ingest_to_store(path, tmp_path / "s", quiet=True)
    assert str(path) in str(info.value) and "re-export" in str(info.value)
    assert not (tmp_path / "s" / "current").exists()
    cli = runner.invoke(app, ["ingest", str(path), "--out", str(tmp_path / "c")])
    assert cli.exit_code == 1, cli.output
    assert cli.output.startswith("error: ") and "Traceback" not in cli.output
    assert "truncated" in cli.output


def _spread_input(n_docs: int = 40, per_doc: int = 5) -> pl.DataFrame:
    """Documents in runs, so each bucket's rows are spread over the input."""
    rng = np.random.default_rng(8)
    n = n_docs * per_doc
    return segments_frame([f"text {i}" for i in range(n)],
                          [unit(rng.normal(size=4)) for _ in range(n)],
                          doc_id=[f"doc-{i // per_doc}" for i in range(n)])


@pytest.mark.parametrize("layout", ["ipc", "two_ipc", "memory", "parquet_partitioned",
                                    "ipc_stream_partitioned"])
@pytest.mark.parametrize("bad", ["embedding", "salience"])
def test_job_refusals_name_input_rows_not_bucket_rows(tmp_path: Path, layout: str,
                                                      bad: str) -> None:
    """The job checks each bucket by itself; a refusal still names the row as it stands in
    the input (0-based, counted across the input files in order), for every way rows reach
    a bucket: mapped IPC files, in-memory tables, partitioned Parquet and IPC streams."""
    from arrowdedup import ingest_to_store

    row = 137
    frame = _spread_input()
    if bad == "embedding":
        values = frame.get_column("embedding").to_list()
        values[row] = [math.nan] * 4
        frame = frame.with_columns(pl.Series("embedding", values,
                                             dtype=frame.schema["embedding"]))
    else:
        frame = frame.with_columns(pl.lit(0.5).alias("salience"))
        frame = set_value(frame, "salience", row, 1.5)
    table = frame.to_arrow()
    source: object
    kwargs: dict[str, object] = {}
    if layout == "ipc":
        source = _write_ipc(tmp_path / "in.arrow", table)
    elif layout == "two_ipc":
        source = [_write_ipc(tmp_path / "a.arrow", table.slice(0, 100)),
                  _write_ipc(tmp_path / "b.arrow", table.slice(100))]
    elif layout == "memory":
        source = frame
    elif layout == "parquet_partitioned":
        source = tmp_path / "in.parquet"
        pq.write_table(table, source, row_group_size=64)
        kwargs["memory_budget"] = 0  # partitioned to disk, not read whole
    else:
        source = _write_ipc(tmp_path / "stream.arrow", table, stream=True)
    with pytest.raises(SchemaError) as info:
        ingest_to_store(source, tmp_path / "s", buckets=4, quiet=True, **kwargs)
    assert f"(rows {row})" in str(info.value), str(info.value)
    with pytest.raises(SchemaError) as whole:  # the same words as ingest() of the whole input
        ingest(frame)
    assert str(whole.value) == str(info.value)


_CORRUPTED_JOB = """
import sys
from pathlib import Path
from arrowdedup import ingest_to_store
from arrowdedup.errors import ArrowDedupError
outcomes = []
for path in sorted(Path(sys.argv[1]).glob("c*.arrow")):
    try:
        ingest_to_store(path, Path(sys.argv[1]) / ("s-" + path.stem), quiet=True)
        outcomes.append("read")
    except ArrowDedupError as err:
        assert str(path) in str(err) or "column" in str(err), err
        outcomes.append("refused")
print(outcomes.count("read"), outcomes.count("refused"))
"""


def test_corrupted_ipc_files_never_crash_the_job(tmp_path: Path) -> None:
    """The job takes each bucket's rows straight from an IPC file's memory map (or, for a
    stream, from its batches while partitioning). Byte-flipped files are refused (or read,
    where the flips land in values that stay valid), never a segmentation fault: before the
    tables were validated, 7 of 60 such files crashed the process, and 22 of 60 streams. Run
    in a child process, so a crash fails the test instead of the whole session."""
    rng = np.random.default_rng(1)
    n = 200
    table = pa.table({
        "doc_id": [f"d{i // 5}" for i in range(n)], "segment_id": [f"s{i}" for i in range(n)],
        "text": [f"text number {i}" for i in range(n)], "segment_type": ["paragraph"] * n,
        "position": pa.array(range(n), pa.int32()),
        "embedding": pa.FixedSizeListArray.from_arrays(
            pa.array(rng.normal(size=n * 8).astype(np.float32)), 8)})
    formats = [_write_ipc(tmp_path / f"good-{name}.arrow", table,
                          stream=name == "stream").read_bytes() for name in ("file", "stream")]
    for trial in range(40):
        data = formats[trial % 2]  # a stream takes the partitioning path
        flipped = bytearray(data)
        for pos in rng.integers(8, len(flipped) - 8, size=int(rng.integers(1, 30))):
            flipped[int(pos)] ^= int(rng.integers(1, 256))
        (tmp_path / f"c{trial:02d}.arrow").write_bytes(bytes(flipped))
    child = subprocess.run([sys.executable, "-c", _CORRUPTED_JOB, str(tmp_path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
    read, refused = map(int, child.stdout.split())
    assert read + refused == 40 and refused > 30


def test_invalid_utf8_refused_in_a_large_column() -> None:
    """Above the ASCII pass's threshold: one bad byte among thousands of ASCII rows is still
    refused by name."""
    from arrowdedup.arrays.hashing import JIT_MIN_ROWS

    n = JIT_MIN_ROWS + 10
    raw = [f"row {i}".encode() for i in range(n)]
    raw[n - 3] = b"\xff\xfe not utf-8"
    table = pa.table({"doc_id": ["d"] * n, "segment_id": [f"s{i}" for i in range(n)],
                      "text": pa.array(raw, pa.large_binary()).view(pa.large_string()),
                      "segment_type": ["paragraph"] * n,
                      "position": pa.array(range(n), pa.int32())})
    with pytest.raises(InputError, match=r"column 'text'.*not valid UTF-8"):
        ingest(table)
