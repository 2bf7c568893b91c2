"""The CLI is a thin layer: same results as the library, clean errors, exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from arrowdedup import open_store
from arrowdedup.cli import app
from tests.helpers.store import corpus

runner = CliRunner()


def test_ingest_writes_a_store(tmp_path: Path) -> None:
    frame = corpus(docs=4)
    path = tmp_path / "seg.parquet"
    frame.write_parquet(path)
    out = tmp_path / "store"
    result = runner.invoke(app, ["ingest", str(path), "--out", str(out), "--threads", "1",
                                 "--buckets", "2"])
    assert result.exit_code == 0, result.output
    assert f"Deduplication: {frame.height} →" in result.output
    store = open_store(out)
    assert store.manifest["buckets"] == 2
    assert store.manifest["inputs"] == [str(path)]
    assert store.decisions().collect().height == frame.height


def test_config_file_reaches_the_engine(tmp_path: Path) -> None:
    frame = corpus(docs=2)
    path = tmp_path / "seg.parquet"
    frame.write_parquet(path)
    config = tmp_path / "c.json"
    config.write_text('{"DocSummarizer": {"Deduplication": {"Ingestion": {"Enabled": false}}}}')
    result = runner.invoke(app, ["ingest", str(path), "--out", str(tmp_path / "s"),
                                 "--config", str(config), "--quiet"])
    assert result.exit_code == 0, result.output
    kept = open_store(tmp_path / "s").segments().select(pl.len()).collect().item()
    assert kept == frame.height


def test_bad_input_is_one_line_and_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    corpus(docs=1).drop("segment_id").write_parquet(bad)
    proc = subprocess.run([sys.executable, "-m", "arrowdedup", "ingest", str(bad), "--out",
                           str(tmp_path / "s")], capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: missing required column(s) 'segment_id'")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bad_config_and_missing_file(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text('{"Ingestion": {"SimilarityThreshold": 2}}')
    path = tmp_path / "seg.parquet"
    corpus(docs=1).write_parquet(path)
    result = runner.invoke(app, ["ingest", str(path), "--out", str(tmp_path / "s"),
                                 "--config", str(config)])
    assert result.exit_code == 1
    assert "SimilarityThreshold" in result.output
    result = runner.invoke(app, ["ingest", str(tmp_path / "nope.parquet"), "--out",
                                 str(tmp_path / "s")])
    assert result.exit_code == 1
    assert "does not exist" in result.output


def test_help_lists_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "ingest" in result.output
