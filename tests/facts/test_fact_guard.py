"""The fact guard end to end: ingest decisions and their columns, the store, the views, the
`merges` command, the report, verify and the salience floor."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from arrowdedup import (
    DedupConfig,
    IngestionConfig,
    fact_conflict,
    ingest,
    open_store,
    verify_store,
    write_store,
)
from arrowdedup.cli import app
from arrowdedup.dedup.salience import DefaultSalience
from arrowdedup.metrics.views import connect, corpus_metrics, merge_examples
from tests.helpers import segments_frame, unit

RNG = np.random.default_rng(12)
BASE = [unit(RNG.normal(size=16)) for _ in range(3)]


def near(v: np.ndarray, scale: float = 0.02) -> np.ndarray:
    return unit(v + RNG.normal(scale=scale, size=v.shape[0]))


def guide() -> pl.DataFrame:
    """One document: an upgrade note said twice (same facts), an upgrade note for another
    version, a flag heading pair, and a negated sentence, all cosine neighbours."""
    texts = [
        "Upgrade from 3.3 to 3.4 with the new installer.",   # 0 representative
        "Upgrade from 3.3 to 3.4 using the new installer.",  # 1 same facts: merges into 0
        "Upgrade from 3.4 to 3.5 with the new installer.",   # 2 other versions: refused
        "Do not restart the collector after the upgrade.",   # 3
        "Restart the collector after the upgrade.",          # 4 negation differs: refused
        "Webhooks retry five times.",                         # 5 unrelated
    ]
    embs = [BASE[0], near(BASE[0]), near(BASE[0]), BASE[1], near(BASE[1]), BASE[2]]
    return segments_frame(texts, embs, doc_id=["guide"] * 6,
                          salience=[0.9, 0.8, 0.7, 0.9, 0.8, 0.5])


def test_decisions_explain_every_refusal() -> None:
    result = ingest(guide())
    dec = result.decisions
    assert dec.columns[:5] == ["doc_id", "segment_id", "action", "representative_id",
                               "similarity"]
    assert {"guard_refused_id", "guard_reason", "text"} <= set(dec.columns)
    rows = {r["segment_id"]: r for r in dec.iter_rows(named=True)}
    ids = dec.get_column("segment_id").to_list()
    assert rows[ids[1]]["action"] == "merged_near" and rows[ids[1]]["representative_id"] == ids[0]
    assert rows[ids[1]]["text"].startswith("Upgrade from 3.3 to 3.4 using")
    assert rows[ids[2]]["action"] == "kept"
    assert (rows[ids[2]]["guard_refused_id"], rows[ids[2]]["guard_reason"]) == (ids[0], "version")
    assert (rows[ids[4]]["guard_refused_id"], rows[ids[4]]["guard_reason"]) == (ids[3], "negation")
    assert rows[ids[0]]["text"] is None  # kept: its text is in the segments
    # The boost counts only the guarded merge.
    kept = result.kept.filter(pl.col("segment_id") == ids[0])
    assert kept.item(0, "near_duplicate_count") == 1
    # The kept frame carries the signature the store keeps for retrieval.
    assert "fact_signature" in result.kept.columns


def test_fact_guard_off_gives_the_cosine_only_decisions() -> None:
    off = DedupConfig(ingestion=IngestionConfig(fact_guard=False))
    dec = ingest(guide(), off).decisions
    assert dec.get_column("action").cast(pl.String).to_list() == [
        "kept", "merged_near", "merged_near", "kept", "merged_near", "kept"]
    assert dec.get_column("guard_refused_id").null_count() == dec.height
    assert DedupConfig.from_json({"Ingestion": {"FactGuard": False}}).ingestion.fact_guard is False
    assert DedupConfig.from_json({"Retrieval": {"FactGuard": False}}).retrieval.fact_guard is False


def test_every_merge_keeps_its_facts_under_the_public_rule() -> None:
    frame = guide()
    dec = ingest(frame).decisions
    texts = dict(zip(frame["segment_id"].to_list(), frame["text"].to_list(), strict=True))
    for seg, rep in dec.filter(pl.col("action") == "merged_near").select(
            "segment_id", "representative_id").iter_rows():
        assert fact_conflict(texts[seg], texts[rep], segment_type="paragraph") is None


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    out = tmp_path / "store"
    write_store(ingest(guide()), out)
    return out


def test_views_metric_and_verify(store: Path) -> None:
    con = connect(store)
    merges = con.sql("SELECT * FROM merges").pl()
    assert merges.height == 1
    assert merges.item(0, "segment_text").startswith("Upgrade from 3.3 to 3.4 using")
    assert merges.item(0, "representative_text").startswith("Upgrade from 3.3 to 3.4 with")
    refusals = con.sql("SELECT * FROM guard_refusals ORDER BY reason").pl()
    assert refusals.get_column("reason").to_list() == ["version", "negation"] or \
        sorted(refusals.get_column("reason").to_list()) == ["negation", "version"]
    assert refusals.filter(pl.col("reason") == "negation").item(0, "segment_text") \
        .startswith("Restart the collector")
    assert corpus_metrics(con)["guard_refused_merges"] == 2
    con.close()
    # Two kept near duplicates are legitimate when the guard refused them.
    assert verify_store(store).ok
    assert open_store(store).segments(with_embeddings=False).collect() \
        .get_column("fact_signature").dtype == pl.List(pl.UInt64)
    assert merge_examples(store, refused=True, doc_id="nope").height == 0


def test_merges_command(store: Path) -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["merges", str(store), "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert len(rows) == 1 and rows[0]["segment_text"].startswith("Upgrade from 3.3 to 3.4 using")
    out = runner.invoke(app, ["merges", str(store), "--refused", "--limit", "1"],
                        env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    assert "Fact-guard refusals" in out.stdout
    assert "version" in out.stdout or "negation" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 80


def test_ingest_fact_guard_option(tmp_path: Path) -> None:
    table = tmp_path / "in.parquet"
    guide().write_parquet(table)
    runner = CliRunner()
    for flag, near_count in (("off", 3), ("on", 1)):
        out = runner.invoke(app, ["ingest", str(table), "--out", str(tmp_path / flag), "-q",
                                  "--fact-guard", flag])
        assert out.exit_code == 0, out.output
        dec = open_store(tmp_path / flag).decisions().collect()
        assert (dec.get_column("action") == "merged_near").sum() == near_count
    bad = runner.invoke(app, ["ingest", str(table), "--out", str(tmp_path / "x"),
                              "--fact-guard", "maybe"])
    assert bad.exit_code == 1 and "--fact-guard" in bad.output


def test_report_shows_merge_and_refusal_examples(store: Path, tmp_path: Path) -> None:
    from arrowdedup.metrics.report import write_report

    page = write_report(store, tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Merge examples" in page and "Fact-guard refusals" in page
    assert "Upgrade from 3.4 to 3.5" in page and "negation" in page


def test_salience_floor_keeps_segments_with_facts_of_their_own() -> None:
    # A central segment and short, off-centre ones: one holds a flag found nowhere else, one
    # says eight words, one is noise.
    # Forty central segments and three in directions of their own (centrality ~1/40).
    q, _ = np.linalg.qr(np.random.default_rng(5).normal(size=(16, 4)))
    central = [f"The collector exports spans in batch {chr(97 + i % 26)}x." for i in range(40)]
    texts = [*central, "--max-bytes", "one two three four five six seven eight", "ok fine"]
    embs = [near(q[:, 0], 0.01) for _ in central] + [q[:, 1], q[:, 2], q[:, 3]]
    frame = segments_frame(texts, embs, doc_id=["d"] * len(texts)).drop("salience",
                                                                         strict=False)
    from arrowdedup.schema import embeddings_from

    low = DefaultSalience(floor=0.05).score(frame, embeddings_from(frame))
    plain = DefaultSalience(floor=0.0).score(frame, embeddings_from(frame))
    assert (0 < plain[-3:]).all() and (plain[-3:] < 0.05).all()  # all below the filter
    assert low[-3] >= 0.05  # a flag found nowhere else in the document
    assert low[-2] >= 0.05  # eight words
    assert low[-1] == plain[-1]  # noise keeps its score
