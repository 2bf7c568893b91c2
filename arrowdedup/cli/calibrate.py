"""`arrowdedup calibrate`: precision / recall of the merge threshold on labelled pairs."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..escape import escape
from .app import (
    JsonOpt,
    app,
    clean_errors,
    compact_table,
    console,
    print_json,
    say,
    table_overhead,
)

if TYPE_CHECKING:
    from rich.table import Table

# (label, key, digits) of each measure, shown with the fact guard on and off.
METRICS = (("precision", "precision", 3), ("recall", "recall", 3), ("F1", "f1", 3),
           ("false merges", "fp", 0), ("false-merge rate", "false_merge_rate", 4))


class GuardSwitch(StrEnum):
    ON = "on"
    OFF = "off"


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
    fact_guard: Annotated[GuardSwitch, typer.Option(
        "--fact-guard", help="Recommend with the fact guard on (a pair merges only when the "
        "second text states every fact of the first) or off (cosine only); both are shown.")
    ] = GuardSwitch.ON,
    language: Annotated[str | None, typer.Option(
        help="Language of both texts for the fact guard (default: from text_<code> column "
             "names and the lang column).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Measure precision, recall and F1 of "merge if cosine >= t" for t in 0.80–0.98, with the
    fact guard and without it, side by side."""
    from ..calibrate import calibrate as run_calibration
    from ..calibrate import load_pairs

    columns = [c.strip() for c in text_columns.split(",")] if text_columns else None
    pair_set = load_pairs(
        pairs, text_columns=columns, label_column=label_column, positive_min=positive_min,
        negative_max=negative_max, set_aside_trivial=not keep_trivial,
        ignore_case=not case_sensitive, sample=sample, seed=seed, language=language,
    )
    result = run_calibration(pair_set, embedder, target_precision=target_precision,
                             default_threshold=threshold,
                             fact_guard=fact_guard is GuardSwitch.ON)
    info = result.to_dict()
    if as_json:
        print_json(info)
        return
    table = _table(f"{escape(pair_set.name)} · {result.embedder} · fact guard on / off",
                   result.side_by_side().to_dicts(), console.width)
    console.print(table)
    say(
        f"pairs: {pair_set.n} used of {pair_set.total_rows} ({pair_set.positives} positive, "
        f"{pair_set.negatives} negative; labelling: {pair_set.labelling}; "
        f"left out between thresholds: {pair_set.left_out}; set aside as trivial: "
        f"{pair_set.set_aside}, of which {pair_set.set_aside_case_only} differ only in case; "
        f"set aside as barely translated: {pair_set.set_aside_barely_translated})")
    for mode in ("on", "off"):
        at = info[f"guard_{mode}"]["at_default"]
        say(
            f"at {threshold:.2f}, fact guard {mode}: precision {_fmt(at['precision'])}, recall "
            f"{_fmt(at['recall'])}, false merges {at['fp']} of {pair_set.negatives} negatives")
    refused = info["guard_refusals_at_default"]
    say(
        f"refused by the guard at {threshold:.2f}: "
        + "; ".join(f"{key} {sum(by.values())}"
                    + (f" ({', '.join(f'{k} {v}' for k, v in sorted(by.items()))})" if by else "")
                    for key, by in refused.items()))
    rec = result.recommended_threshold
    other = info[f"guard_{'off' if result.fact_guard else 'on'}"]["recommended_threshold"]
    say(
        f"recommended threshold for precision >= {target_precision} (fact guard "
        f"{info['fact_guard']}): " + (f"{rec:.2f}" if rec is not None else "none in 0.80–0.98")
        + f"; with the guard {'off' if result.fact_guard else 'on'}: "
        + (f"{other:.2f}" if other is not None else "none"))
    best = info["best_precision"]
    if rec is None and best is not None and pair_set.positives:
        say(
            f"highest precision on the grid: {best['precision']:.3f} at {best['threshold']:.2f}"
            f" (recall {_fmt(best['recall'])})")


def _table(title: str, rows: list[dict[str, Any]], width: int) -> Table:
    """Each measure with the guard on and off side by side when that fits ``width``;
    otherwise one column per measure, the guard on over off in each row (fits 80 columns:
    no header or number is cut)."""
    cells = [[f"{r['threshold']:.2f}",
              *(_fmt(r[f"{key}_guard_{mode}"], digits) for _, key, digits in METRICS
                for mode in ("on", "off"))] for r in rows]
    headers = ["threshold", *(f"{label} {mode}" for label, _, _ in METRICS
                              for mode in ("on", "off"))]
    natural = sum(max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers))
    table = compact_table(title)
    if natural + table_overhead(len(headers)) <= width:
        for h in headers:
            table.add_column(h, justify="right", no_wrap=True)
        for c in cells:
            table.add_row(*c)
        return table
    table.add_column("threshold", justify="right", no_wrap=True)
    table.add_column("guard", no_wrap=True)
    for label, _, _ in METRICS:
        # A two-word label may take two lines; a number never wraps.
        table.add_column(label.replace(" ", "\n"), justify="right", no_wrap=True)
    for c in cells:
        table.add_row(c[0], "on\noff", *(f"{c[1 + 2 * i]}\n{c[2 + 2 * i]}"
                                         for i in range(len(METRICS))))
    return table


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"
