"""`arrowdedup calibrate`: precision / recall of the merge threshold on labelled pairs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import JsonOpt, app, clean_errors, console, print_json


@app.command()
@clean_errors
def calibrate(
    pairs: Annotated[Path, typer.Argument(help="TSV (or CSV) of labelled sentence pairs.")],
    embedder: Annotated[str, typer.Option("--embedder", "-e",
                                          help="'minilm' or 'model2vec:PATH'.")] = "minilm",
    text_columns: Annotated[str | None, typer.Option(
        help="The two text columns, 'a,b' (default: sentence1,sentence2 or text_en,text_xx)."
    )] = None,
    label_column: Annotated[str | None, typer.Option(
        help="0/1 label or graded score column (default: 'label' or 'score'; none = all "
             "pairs are negatives)."
    )] = None,
    positive_min: Annotated[float, typer.Option(help="Graded score: positive at or above.")] = 4.8,
    negative_max: Annotated[float, typer.Option(help="Graded score: negative below.")] = 3.0,
    target_precision: Annotated[float, typer.Option(
        help="Recommend the lowest threshold reaching this precision.")] = 0.99,
    threshold: Annotated[float, typer.Option(
        help="The threshold in use, reported separately.")] = 0.90,
    sample: Annotated[int | None, typer.Option(
        help="Seeded sample of N pairs (per language when the file has a lang column).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of --sample.")] = 0,
    keep_trivial: Annotated[bool, typer.Option(
        help="All-negative sets: keep pairs whose texts differ only in digits/punctuation.")
    ] = False,
    case_sensitive: Annotated[bool, typer.Option(
        help="All-negative sets: a case difference alone does not make a pair trivial.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Measure precision, recall and F1 of "merge if cosine >= t" for t in 0.80–0.98."""
    from rich.table import Table

    from ..calibrate import calibrate as run_calibration
    from ..calibrate import load_pairs

    columns = [c.strip() for c in text_columns.split(",")] if text_columns else None
    pair_set = load_pairs(
        pairs, text_columns=columns, label_column=label_column, positive_min=positive_min,
        negative_max=negative_max, set_aside_trivial=not keep_trivial,
        ignore_case=not case_sensitive, sample=sample, seed=seed,
    )
    result = run_calibration(pair_set, embedder, target_precision=target_precision,
                             default_threshold=threshold)
    if as_json:
        print_json(result.to_dict())
        return
    info = result.to_dict()
    table = Table(title=f"{pair_set.name} · {result.embedder}")
    for col in ("threshold", "precision", "recall", "F1", "false merges", "false-merge rate"):
        table.add_column(col, justify="right")
    for r in result.table.iter_rows(named=True):
        table.add_row(
            f"{r['threshold']:.2f}", _fmt(r["precision"]), _fmt(r["recall"]), _fmt(r["f1"]),
            str(r["fp"]), _fmt(r["false_merge_rate"], 4),
        )
    console.print(table)
    console.print(
        f"pairs: {pair_set.n} used of {pair_set.total_rows} ({pair_set.positives} positive, "
        f"{pair_set.negatives} negative; labelling: {pair_set.labelling}; "
        f"left out between thresholds: {pair_set.left_out}; set aside as trivial: "
        f"{pair_set.set_aside}, of which {pair_set.set_aside_case_only} differ only in case)",
        markup=False)
    at = info["at_default"]
    console.print(
        f"at {threshold:.2f}: precision {_fmt(at['precision'])}, recall {_fmt(at['recall'])}, "
        f"false merges {at['fp']} of {pair_set.negatives} negatives", markup=False)
    rec = result.recommended_threshold
    console.print(
        f"recommended threshold for precision >= {target_precision}: "
        + (f"{rec:.2f}" if rec is not None else "none in 0.80–0.98"), markup=False)
    best = info["best_precision"]
    if rec is None and best is not None and pair_set.positives:
        console.print(
            f"highest precision on the grid: {best['precision']:.3f} at {best['threshold']:.2f}"
            f" (recall {_fmt(best['recall'])})", markup=False)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
