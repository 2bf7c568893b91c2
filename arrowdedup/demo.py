"""`make demo`: the whole system on the sample corpus in ``data/sample``.

1. ingest ``data/sample`` with MiniLM into ``.demo/store`` (extract → embed → salience → dedup →
   store), print the per-document summary, the SPEC log line and a few of the merges;
2. ingest again to show the embedding cache (nothing is embedded twice);
3. run a few searches (when ``arrowdedup.retrieval`` is available) and show what cross-document
   dedup skipped;
4. print the store's metrics and warnings (when ``arrowdedup.metrics`` is available).

Run it with ``python -m arrowdedup.demo [--embedder model2vec:PATH] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample"
DEFAULT_OUT = ROOT / ".demo" / "store"
QUERIES = (
    "how do I avoid billing the same usage twice?",
    "what happens when I exceed the rate limit",
    "how often are failed webhooks retried",
)

# Under `make` stdout is not a terminal and rich would fall back to 80 columns.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)


def sample_inputs(sample: Path = SAMPLE) -> list[Path]:
    """The corpus files of ``data/sample`` (its README describes the corpus; it is not part of
    it). Ingest them with ``root=sample`` so doc ids stay relative to the corpus folder."""
    return sorted(p for p in sample.iterdir() if p.name != "README.md")


def show_merges(store_path: Path, segments: pl.DataFrame, limit: int = 6) -> None:
    """A few near-duplicate merges with both texts, so the reader sees what was merged.

    Removed segments are not in the store: their text comes from the extracted ``segments``,
    which the decisions trace to (segment ids are stable across runs).
    """
    from .store import open_store

    decisions = open_store(store_path).decisions().collect()
    texts = segments.select(
        pl.col("segment_id").cast(pl.String), pl.col("text").cast(pl.String)
    )
    near = (
        decisions.filter(pl.col("action") == "merged_near")
        .select("doc_id", "segment_id", "representative_id", "similarity")
        .join(texts, on="segment_id", how="left")
        .join(texts.rename({"segment_id": "representative_id", "text": "kept_text"}),
              on="representative_id", how="left")
        .sort(["doc_id", "segment_id"])
    )
    table = Table(title=f"Near-duplicate merges ({near.height} in all, first {limit})")
    for col in ("doc_id", "kept", "merged into it", "cosine"):
        table.add_column(col, overflow="fold", justify="right" if col == "cosine" else "left")
    for r in near.head(limit).iter_rows(named=True):
        table.add_row(r["doc_id"], _short(r["kept_text"]), _short(r["text"]),
                      f"{r['similarity']:.3f}")
    console.print(table)


def _short(text: Any, width: int = 70) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= width else s[: width - 1] + "…"


def run_searches(store_path: Path, embedder: Any) -> None:
    from .retrieval import search

    for query in QUERIES:
        result = search(store_path, query, k=3, embedder=embedder)
        table = Table(title=f"search: {query!r}", title_justify="left")
        for col in ("#", "doc_id", "text", "score", "skipped duplicates"):
            table.add_column(col, overflow="fold")
        for r in result.results.iter_rows(named=True):
            skipped = r.get("displaced_ids") or []
            table.add_row(str(r["rank"]), r["doc_id"], _short(r["text"], 60),
                          f"{r['score']:.2f}", ", ".join(skipped) or "-")
        console.print(table)
        console.print(result.summary(), markup=False)


def show_stats(store_path: Path) -> None:
    from .cli.app import app

    # The `arrowdedup stats` command renders metrics and warnings; reuse it rather than
    # duplicating its tables.
    try:
        app(["stats", str(store_path)], standalone_mode=False)
    except SystemExit as err:  # typer.Exit inside standalone_mode=False
        if err.code:
            raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arrowdedup.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="minilm",
                        help="'minilm' (default) or 'model2vec:PATH'")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="store directory")
    args = parser.parse_args(argv)

    from .cli.app import documents_table
    from .embed.embedders import get_embedder
    from .errors import ArrowDedupError
    from .extract.options import ExtractOptions
    from .pipeline.documents import extract_segments
    from .pipeline.options import RunOptions
    from .pipeline.run import ingest_to_store

    try:
        console.print(Panel.fit(
            "arrowdedup demo: signal-preserving dedup of RAG evidence segments\n"
            f"corpus: data/sample ({sum(1 for p in SAMPLE.rglob('*') if p.is_file()) - 1} files, "
            "written for this project)", style="bold"))
        shutil.rmtree(args.out, ignore_errors=True)
        console.rule("1. ingest: extract → embed → salience → dedup → store")
        start = time.perf_counter()
        with console.status(f"loading the embedder {args.embedder}…"):
            embedder = get_embedder(args.embedder)
        console.print(f"embedder {embedder.name} ({embedder.dim}-d) loaded in "
                      f"{time.perf_counter() - start:.1f} s")
        result = ingest_to_store(sample_inputs(), args.out, embedder=embedder,
                                 extract=ExtractOptions(root=SAMPLE))
        console.print(documents_table(result.documents.collect(), limit=12))
        console.print(result.summary(), markup=False, style="bold")
        from .timings import line

        console.print(line(result.timings), markup=False)
        segments = extract_segments(sample_inputs(), root=SAMPLE).segments
        cross = cross_language_merges(args.out, segments)
        console.print(f"merges across languages: {cross} (dedup never compares two languages)")
        show_merges(args.out, segments)

        console.rule("2. re-ingest: the embedding cache")
        result2 = ingest_to_store(sample_inputs(), args.out, embedder=embedder,
                                  extract=ExtractOptions(root=SAMPLE), run=RunOptions(quiet=True))
        cache = _manifest(args.out).get("embedding_cache", {})
        console.print(f"second run: {cache.get('embedded')} texts embedded, "
                      f"{cache.get('cached')} read from the cache; "
                      f"{result2.summary()}", markup=False)

        console.rule("3. retrieval: RRF, then cross-document dedup")
        run_searches(args.out, embedder)

        console.rule("4. metrics")
        show_stats(args.out)

        console.rule("5. a PDF and a spreadsheet linked by a key")
        show_linked_context(args.out.parent / f"{args.out.name}-linked", embedder)
        console.print(f"\nstore: {args.out} (version {result.version_id}); try "
                      f"`arrowdedup stats {args.out}`", markup=False)
    except ArrowDedupError as err:
        console.print(f"error: {err}", markup=False, style="red")
        return 1
    return 0


DOCUMENTS = Path(__file__).resolve().parent.parent / "data" / "documents"


def show_linked_context(store_path: Path, embedder: Any,
                        query: str = "status of order A-1042") -> str:
    """Ingest the invoice PDF and the purchases workbook, print a key-linked context."""
    from .extract.options import ExtractOptions
    from .pipeline.options import RunOptions
    from .pipeline.run import ingest_to_store
    from .retrieval.context import build_context

    shutil.rmtree(store_path, ignore_errors=True)
    inputs = [DOCUMENTS / "invoice-A-1042.pdf", DOCUMENTS / "tallybird-purchases.xlsx"]
    result = ingest_to_store(inputs, store_path, embedder=embedder,
                             extract=ExtractOptions(root=DOCUMENTS), run=RunOptions(quiet=True))
    console.print(f"ingested {', '.join(p.name for p in inputs)}: {result.summary()}",
                  markup=False)
    ctx = build_context(store_path, query, k=2, mode="keyword", embedder=embedder,
                        expand_keys=True)
    text = ctx.markdown()
    console.print(text, markup=False, highlight=False)
    return text


def _manifest(store_path: Path) -> dict[str, Any]:
    from .store import open_store

    return open_store(store_path).manifest


def cross_language_merges(store_path: Path, segments: pl.DataFrame) -> int:
    """Removed segments whose representative has another language (must be 0)."""
    from .store import open_store

    if "language" not in segments.columns:
        return 0
    lang = segments.select(pl.col("segment_id").cast(pl.String),
                           pl.col("language").cast(pl.String))
    dec = open_store(store_path).decisions().collect()
    pairs = (
        dec.filter(pl.col("representative_id").is_not_null())
        .select("segment_id", "representative_id")
        .join(lang, on="segment_id")
        .join(lang.rename({"segment_id": "representative_id", "language": "rep_language"}),
              on="representative_id")
    )
    return int(pairs.filter(pl.col("language").ne_missing(pl.col("rep_language"))).height)

if __name__ == "__main__":
    sys.exit(main())
