"""Extraction speed (issue 3): the real OpenTelemetry docs (1,812 Markdown files, 11 languages).

``arrowdedup.extract`` on ``../shared/data/corpus/opentelemetry.io/content`` with the language
taken from the path, in one process and with the default worker processes (one per core for
large inputs). The figure is the best of the runs (least disturbed on a shared machine); the
stage timings are those of that run. Source: opentelemetry.io (CC-BY-4.0, © OpenTelemetry
Authors).
"""

from __future__ import annotations

from typing import Any

from .common import SHARED_DATA, table, timeit

TITLE = "Extraction: documents to segments"
CORPUS = SHARED_DATA / "corpus" / "opentelemetry.io" / "content"


def run(quick: bool) -> dict[str, Any]:
    from arrowdedup.extract import extract_documents
    from arrowdedup.extract.reading import _cpu_count

    if not CORPUS.exists():
        return {"parameters": {}, "figures": {}, "tables": [],
                "notes": ["../shared/data/corpus/opentelemetry.io is absent: skipped"]}
    source = CORPUS / "en" if quick else CORPUS
    size = sum(p.stat().st_size for p in source.rglob("*.md"))
    rows = []
    figures: dict[str, Any] = {}
    for label, workers in (("1 process", 1), (f"{_cpu_count()} workers (default)", None)):
        timing = timeit(
            lambda w=workers: extract_documents(source, language_from_path="{lang}/**",
                                                workers=w),
            repeats=1 if quick else 2, warmup=0,
        )
        result = timing["value"]
        rows.append([label, len(result.files), result.segments.height, timing["best"],
                     size / 2**20 / timing["best"],
                     ", ".join(f"{k} {v:.2f}" for k, v in result.timings.items())])
        key = "serial" if workers == 1 else "parallel"
        figures[f"{key}_seconds"] = timing["best"]
        figures["files"] = len(result.files)
        figures["segments"] = result.segments.height
        figures["segment_types"] = result.type_counts()
    figures["megabytes"] = size / 2**20
    return {
        "parameters": {"corpus": "opentelemetry.io/content" + ("/en" if quick else ""),
                       "language_from_path": "{lang}/**"},
        "figures": figures,
        "tables": [table("Extraction of the OpenTelemetry docs",
                         ["run", "files", "segments", "seconds", "MB/s", "stages (s)"], rows)],
        "notes": ["Markdown parsing (markdown-it-py, pure Python) is ~90 % of the time; "
                  "workers are plain `python -c` subprocesses, one share of the files each."],
    }


def headline(result: dict[str, Any]) -> list[str]:
    f = result.get("figures", {})
    if "parallel_seconds" not in f:
        return []
    return [f"Extraction: {f['files']:,} Markdown files → {f['segments']:,} segments in "
            f"{f['parallel_seconds']:.1f} s ({f['serial_seconds']:.1f} s in one process)."]
