"""Real corpus end to end (issue 7, item 3): the OpenTelemetry website docs.

``../shared/data/corpus/opentelemetry.io/content`` (CC-BY-4.0, © OpenTelemetry Authors; 1,812
Markdown documents in 11 languages): extract → embed → salience → dedup → store through
``arrowdedup.pipeline.run.ingest_to_store``, with Model2Vec on every document and MiniLM on a
seeded sample of English documents (MiniLM embeds ~100 segments/s on 2 cores). Reports the
per-stage times, the dedup ratio per language, document type and segment type, and the merges
that cross a language or a document (must be 0). Skipped, with a note, when the corpus is absent.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .common import SHARED_DATA, table, timed

TITLE = "Real corpus end to end (opentelemetry.io docs)"
CONTENT = SHARED_DATA / "corpus" / "opentelemetry.io" / "content"
M2V = SHARED_DATA / "models" / "m2v-minilm-l6-256"
LANGUAGE_PATTERN = "content/{lang}/**"
MINILM_DOCS = 60
QUICK_DOCS = 12
STAGES = ("extract", "embed", "salience", "kernel", "index", "write", "commit")


def pick_files(n: int | None, language: str | None, seed: int) -> list[Path]:
    base = CONTENT / language if language else CONTENT
    files = sorted(p for p in base.rglob("*.md") if p.is_file())
    if n is None or n >= len(files):
        return files
    pick = np.sort(np.random.default_rng(seed).choice(len(files), size=n, replace=False))
    return [files[i] for i in pick]


def one_run(files: list[Path], embedder: Any) -> dict[str, Any]:
    from arrowdedup.extract import extract
    from arrowdedup.pipeline.run import ingest_to_store

    with tempfile.TemporaryDirectory(prefix="arrowdedup-real-") as tmp:
        total_s, job = timed(lambda: ingest_to_store(
            files, Path(tmp) / "store", embedder=embedder, root=CONTENT,
            language_from_path=LANGUAGE_PATTERN, quiet=True))
        decisions = job.decisions.collect()
        documents = job.documents.collect()
        counts = (job.original_count, job.final_count, job.dedup_ratio)
    stages = {k: job.timings.get(k) for k in STAGES}
    # The extractor is deterministic: re-extract to know each removed segment's language and
    # type independently of the dedup output.
    frame = extract(files, root=CONTENT, language_from_path=LANGUAGE_PATTERN)
    has_lang = "language" in frame.columns
    meta = frame.select(
        "segment_id", "doc_id", "segment_type",
        (pl.col("language") if has_lang else pl.lit(None, pl.String)).alias("language"),
        (pl.col("doc_type") if "doc_type" in frame.columns else pl.lit(None, pl.String))
        .alias("doc_type"),
    ).with_columns(pl.col(pl.Categorical).cast(pl.String))
    dec = decisions.with_columns(pl.col("action").cast(pl.String)).drop("doc_id").join(
        meta, on="segment_id", how="left")
    reps = meta.select(pl.col("segment_id").alias("representative_id"),
                       pl.col("doc_id").alias("rep_doc"), pl.col("language").alias("rep_lang"),
                       pl.col("segment_type").alias("rep_type"))
    removed = dec.filter(pl.col("representative_id").is_not_null()).join(
        reps, on="representative_id", how="left")
    cross_language = removed.filter(pl.col("language").ne_missing(pl.col("rep_lang"))).height
    cross_doc = removed.filter(pl.col("doc_id") != pl.col("rep_doc")).height
    cross_type = removed.filter(pl.col("segment_type") != pl.col("rep_type")).height

    def ratios(key: str) -> list[list[Any]]:
        agg = (dec.group_by(key).agg(
            pl.col("doc_id").n_unique().alias("docs"), pl.len().alias("segments"),
            (pl.col("action") == "kept").sum().alias("kept"),
            (pl.col("action") == "dropped_exact").sum().alias("exact"),
            (pl.col("action") == "merged_near").sum().alias("near"),
            (pl.col("action") == "filtered_low_salience").sum().alias("filtered"),
        ).with_columns(((pl.col("segments") - pl.col("kept")) / pl.col("segments"))
                       .alias("ratio")).sort("segments", descending=True))
        return [list(r) for r in agg.iter_rows()]

    return {
        "files": len(files),
        "documents": documents.height,
        "segments": counts[0],
        "kept": counts[1],
        "dedup_ratio": counts[2],
        "total_s": total_s,
        "stages_s": stages,
        "embedder": getattr(embedder, "name", str(embedder)),
        "cross_language_merges": cross_language,
        "cross_document_merges": cross_doc,
        "cross_segment_type_merges": cross_type,
        "by_language": ratios("language"),
        "by_doc_type": ratios("doc_type"),
        "by_segment_type": ratios("segment_type"),
    }


def run(quick: bool) -> dict[str, Any]:
    if not CONTENT.exists() or not M2V.exists():
        return {"notes": ["../shared/data/corpus/opentelemetry.io or the Model2Vec model is "
                          "absent: skipped."]}
    from arrowdedup.embed.embedders import Model2VecEmbedder

    runs: dict[str, Any] = {}
    runs["model2vec_all"] = one_run(pick_files(QUICK_DOCS if quick else None, None, 1),
                                    Model2VecEmbedder(M2V))
    if not quick:
        from arrowdedup.embed.embedders import MiniLMEmbedder

        runs["minilm_en_sample"] = one_run(pick_files(MINILM_DOCS, "en", 2), MiniLMEmbedder())
    labels = {"model2vec_all": "Model2Vec, " + ("sample" if quick else "every document"),
              "minilm_en_sample": f"MiniLM, {MINILM_DOCS} sampled English docs"}
    stage_rows = [[s, *[r["stages_s"].get(s) for r in runs.values()]] for s in STAGES]
    stage_rows.append(["total (wall)", *[r["total_s"] for r in runs.values()]])
    summary_rows = [[labels[k], r["files"], r["segments"], r["kept"], r["dedup_ratio"],
                     r["cross_language_merges"], r["cross_document_merges"],
                     r["cross_segment_type_merges"]] for k, r in runs.items()]
    cols = ["docs", "segments", "kept", "exact", "near", "filtered", "dedup ratio"]
    tables = [
        table("Runs", ["run", "files", "segments", "kept", "dedup ratio",
                       "cross-language merges", "cross-document merges",
                       "cross-segment-type merges"], summary_rows),
        table("Stage times (seconds)", ["stage", *[labels[k] for k in runs]], stage_rows),
    ]
    for key, r in runs.items():
        tables.append(table(f"{labels[key]}: dedup per language", ["language", *cols],
                            r["by_language"]))
        tables.append(table(f"{labels[key]}: dedup per doc type", ["doc_type", *cols],
                            r["by_doc_type"]))
        tables.append(table(f"{labels[key]}: dedup per segment type", ["segment_type", *cols],
                            r["by_segment_type"]))
    return {
        "parameters": {"corpus": "../shared/data/corpus/opentelemetry.io/content",
                       "language_from_path": LANGUAGE_PATTERN, "minilm_docs": MINILM_DOCS,
                       "threshold": 0.90, "quick": quick},
        "figures": runs,
        "tables": tables,
        "notes": [
            "Corpus: OpenTelemetry website content (CC-BY-4.0, © OpenTelemetry Authors), commit "
            "in ../shared/data/corpus/opentelemetry.io/SOURCE_COMMIT.txt.",
            "Cross-language / cross-document merges are counted over every removed segment by "
            "comparing its language and document (from a second, independent extraction) with "
            "its representative's; both must be 0.",
            "Each run writes a fresh store (empty embedding cache), so embed times are cold.",
        ],
    }


def headline(result: dict[str, Any]) -> list[str]:
    runs = result.get("figures", {})
    r = runs.get("model2vec_all") if isinstance(runs, dict) else None
    if not r:
        return []
    line = (f"Real corpus (opentelemetry.io, {r['files']:,} Markdown docs, {r['segments']:,} "
            f"segments) end to end with Model2Vec in {r['total_s']:.1f} s: "
            f"{r['dedup_ratio']:.1%} removed inside documents, "
            f"{r['cross_language_merges']} cross-language merges")
    m = runs.get("minilm_en_sample")
    if m:
        line += (f"; MiniLM on {m['files']} English docs: {m['dedup_ratio']:.1%} removed "
                 f"in {m['total_s']:.1f} s")
    return [line + "."]
