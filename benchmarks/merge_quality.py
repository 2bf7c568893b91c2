"""Merge quality on judged pairs (issue 44): how many of the merges the engine would make lose
nothing a reader needs.

Data: ``benchmarks/data/judged_pairs.jsonl``, candidate pairs of the shared OpenTelemetry corpus
(CC-BY-4.0, © OpenTelemetry Authors) collected the way the engine meets them (same document,
segment type and language; MiniLM cosine ≥ 0.90; the removed segment against its first
representative, see :mod:`benchmarks.judged_pairs`), each read and labelled by a person:
``genuine`` (deleting A loses nothing that B does not say) or ``lost``. The labelling guide is
``benchmarks/data/JUDGED_PAIRS.md``.

For each embedder whose vectors ship with the pairs (MiniLM, the bundled Model2Vec model), a pair
is *merged* when its cosine (that embedder's) is ≥ 0.90 and, for the text guard,
``arrowdedup.fact_conflict(text_a, text_b, segment_type=..., language=...)`` is None; for the
engine's guard (text and section context), the guard of ingestion passes on the two segments
as they stand in their document (``doc_id``, ``section``, the signatures of
:func:`arrowdedup.facts.guard.signatures_of`,
:func:`arrowdedup.facts.guard.conflict_reasons`). Reported:
merge precision (genuine ÷ merged), genuine recall (genuine merged ÷ genuine), lost pairs
merged, overall, per language and per segment type; the guard's refusal reasons per label.
Targets (issue 44): precision ≥ 0.95, genuine recall ≥ 0.80, for the engine's guard.

Beside the judged candidates, ``benchmarks/data/guarded_merges.jsonl`` holds 40 of the engine's
own guarded merges drawn at random from the corpus (``python -m benchmarks.judged_pairs
collect --guard``, then ``sample-merges``), each read and labelled the same way; the README
prints them with both texts and the judgement (target: at least 38 genuine), and says how
many of them the current rules still merge.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from .common import fmt, table

TITLE = "Merge quality on judged pairs (issue 44)"
DATA = Path(__file__).resolve().parent / "data"
PAIRS_FILE = DATA / "judged_pairs.jsonl"
MERGES_FILE = DATA / "guarded_merges.jsonl"
# Every guarded merge of the corpus the draw came from, read: the rate behind the draw.
POPULATION_FILE = DATA / "guarded_population.jsonl"
MERGES_GENUINE_MIN = 38
EMBEDDINGS_FILE = DATA / "judged_pairs_embeddings.parquet"
THRESHOLD = 0.90
EMBEDDERS = ("minilm", "m2v")
RULES = ("cosine only", "text guard", "engine guard")
JUDGED_RULE = "engine guard"
TARGETS = {"precision_min": 0.95, "genuine_recall_min": 0.80}
QUICK_PAIRS = 60
SEED = 44
EXAMPLES = 5


def load_pairs(path: Path = PAIRS_FILE) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_cosines(pair_ids: Sequence[str], path: Path = EMBEDDINGS_FILE) -> dict[str, np.ndarray]:
    """Per embedder, the cosine of each pair's two stored embeddings, in ``pair_ids`` order."""
    t = pq.read_table(path)
    index = {pid: i for i, pid in enumerate(t.column("pair_id").to_pylist())}
    rows = np.array([index[pid] for pid in pair_ids], dtype=np.int64)
    out: dict[str, np.ndarray] = {}
    for name in EMBEDDERS:
        a = _matrix(t.column(f"{name}_a"))[rows]
        b = _matrix(t.column(f"{name}_b"))[rows]
        out[name] = cosine(a, b)
    return out


def _matrix(column: Any) -> np.ndarray:
    array = column.combine_chunks()
    dim = array.type.list_size
    return np.asarray(array.flatten().to_numpy(zero_copy_only=False),
                      dtype=np.float32).reshape(-1, dim)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a.astype(np.float64), b.astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where((na > 0) & (nb > 0), dots / (na * nb), 0.0)
    return out


def guard_reasons(pairs: Sequence[dict[str, Any]]) -> list[str | None]:
    """``fact_conflict`` of each pair (removed text into its representative)."""
    from arrowdedup import fact_conflict

    return [fact_conflict(p["text_a"], p["text_b"], segment_type=p["segment_type"],
                          language=p["language"]) for p in pairs]


def engine_reasons(pairs: Sequence[dict[str, Any]]) -> list[str | None]:
    """The ingestion guard's reason for each pair, the two segments in their document and
    section (what ``ingest`` decides for them, cosine aside)."""
    import polars as pl

    from arrowdedup.facts.guard import conflict_reasons, fact_modes, signatures_of
    from arrowdedup.facts.tables import REASONS

    n = len(pairs)
    frame = pl.DataFrame({
        "doc_id": [p["doc"] for p in pairs] * 2,
        "section": [p["section_a"] for p in pairs] + [p["section_b"] for p in pairs],
        "text": [p["text_a"] for p in pairs] + [p["text_b"] for p in pairs],
        "segment_type": [p["segment_type"] for p in pairs] * 2,
        "language": [p["language"] for p in pairs] * 2,
    })
    offsets, values = signatures_of(frame)
    modes = fact_modes(frame.get_column("segment_type"), 2 * n)
    rows = np.arange(n, dtype=np.int64)
    codes = conflict_reasons(offsets, values, modes, rows, rows + n)
    return [REASONS[int(c) - 1] if c else None for c in codes]


def merged(cosines: np.ndarray, reasons: Sequence[str | None] | None,
           threshold: float = THRESHOLD) -> np.ndarray:
    """Which pairs merge: cosine ≥ threshold, and no guard reason when ``reasons`` is given."""
    out = cosines >= threshold
    if reasons is not None:
        out &= np.array([r is None for r in reasons], dtype=bool)
    return out


def scores(genuine: np.ndarray, merge: np.ndarray) -> dict[str, Any]:
    """Merge precision, genuine recall and the lost pairs merged."""
    n_merged = int(merge.sum())
    genuine_merged = int((merge & genuine).sum())
    n_genuine = int(genuine.sum())
    return {
        "pairs": int(genuine.size),
        "genuine": n_genuine,
        "merged": n_merged,
        "genuine_merged": genuine_merged,
        "lost_merged": n_merged - genuine_merged,
        "precision": genuine_merged / n_merged if n_merged else None,
        "genuine_recall": genuine_merged / n_genuine if n_genuine else None,
    }


def evaluate(pairs: Sequence[dict[str, Any]], cosines: dict[str, np.ndarray],
             reasons: dict[str, Sequence[str | None]]) -> dict[str, dict[str, Any]]:
    """Scores of every (embedder, rule), overall and by language and by segment type."""
    genuine = np.array([p["label"] == "genuine" for p in pairs], dtype=bool)
    out: dict[str, dict[str, Any]] = {}
    for name, cos in cosines.items():
        for rule in RULES:
            merge = merged(cos, reasons.get(rule))
            entry: dict[str, Any] = {"all": scores(genuine, merge)}
            for field in ("language", "segment_type"):
                groups = sorted({p[field] for p in pairs})
                entry[field] = {}
                for group in groups:
                    mask = np.array([p[field] == group for p in pairs], dtype=bool)
                    entry[field][group] = scores(genuine[mask], merge[mask])
            out[f"{name} / {rule}"] = entry
    return out


def _cell(text: str | None) -> str:
    """A text as one Markdown table cell: line breaks shown as ⏎, pipes escaped."""
    return (text or "").replace("|", "\\|").replace("\n", " ⏎ ")


def sampled_merges_table(pairs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The drawn guarded merges with both texts and the reader's judgement, and whether the
    current guard still merges each (the rules may have moved since the draw)."""
    reasons = engine_reasons(pairs)
    genuine = sum(p["label"] == "genuine" for p in pairs)
    still = [r is None for r in reasons]
    rows = [[p["pair_id"], f"{p['language']} {p['segment_type']}", _cell(p["text_a"]),
             _cell(p["text_b"]), p["label"], p["reason"],
             "yes" if ok else f"no ({r})"] for p, ok, r in zip(pairs, still, reasons,
                                                              strict=True)]
    verdict = "met" if genuine >= MERGES_GENUINE_MIN else "MISSED"
    note = (f"{len(pairs)} merges drawn at random from the engine's guarded merges of the corpus; "
            f"{genuine} judged genuine (target ≥ {MERGES_GENUINE_MIN}: {verdict}); "
            f"{sum(still)} still merge under the current rules. A is the removed segment, B "
            "its representative; ⏎ marks a line break. Texts: OpenTelemetry website docs, "
            "CC-BY-4.0, © OpenTelemetry Authors (attribution in "
            "`benchmarks/data/JUDGED_PAIRS.md`).")
    table_ = table("Guarded merges sampled from the corpus, with the reader's judgement",
                   ["pair", "lang / type", "A (removed)", "B (kept)", "judgement", "why",
                    "merged now"], rows, note=note)
    return table_, {"drawn": len(pairs), "genuine": genuine, "still_merged": sum(still),
                    "target_genuine_min": MERGES_GENUINE_MIN, "verdict": verdict}


def population_figures(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """The share of genuine merges among every guarded merge the draw was made from, and what
    a draw of 40 expects from it."""
    genuine = sum(p["label"] == "genuine" for p in pairs)
    share = genuine / len(pairs) if pairs else 0.0
    still = sum(r is None for r in engine_reasons(pairs)) if pairs else 0
    return {"merges": len(pairs), "genuine": genuine, "genuine_share": share,
            "expected_genuine_of_40": 40 * share, "still_merged": still,
            "lost": [p["pair_id"] for p in pairs if p["label"] != "genuine"]}


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _verdict(s: dict[str, Any]) -> str:
    p, r = s["precision"], s["genuine_recall"]
    ok = (p is not None and p >= TARGETS["precision_min"]
          and r is not None and r >= TARGETS["genuine_recall_min"])
    return "met" if ok else "MISSED"


def run(quick: bool) -> dict[str, Any]:
    pairs = load_pairs()
    if quick:
        pairs = random.Random(SEED).sample(pairs, min(QUICK_PAIRS, len(pairs)))
    cosines = load_cosines([p["pair_id"] for p in pairs])
    by_rule = {"text guard": guard_reasons(pairs), "engine guard": engine_reasons(pairs)}
    reasons = by_rule[JUDGED_RULE]
    results = evaluate(pairs, cosines, by_rule)
    labels = Counter(p["label"] for p in pairs)
    overall = [[key, s["all"]["pairs"], s["all"]["genuine"], s["all"]["merged"],
                s["all"]["genuine_merged"], s["all"]["lost_merged"],
                _ratio(s["all"]["precision"]), _ratio(s["all"]["genuine_recall"]),
                _verdict(s["all"]) if key.endswith(JUDGED_RULE) else "(baseline)"]
               for key, s in results.items()]
    columns = ["embedder / rule", "pairs", "genuine", "merged", "genuine merged", "lost merged",
               "precision", "genuine recall", "target (≥ 0.95, ≥ 0.80)"]
    tables = [table("Judged pairs: merges by rule", columns, overall,
                    note="merged = cosine ≥ 0.90 (each embedder's own cosine) and, for the "
                         "text guard, `fact_conflict(text_a, text_b)` is None; for the engine "
                         "guard (judged), ingestion's guard with the two segments' document "
                         "and sections passes.")]
    for field, title in (("language", "language"), ("segment_type", "segment type")):
        rows = []
        groups = results[f"{EMBEDDERS[0]} / {RULES[0]}"][field]
        for group in groups:
            row: list[Any] = [group, groups[group]["pairs"], groups[group]["genuine"]]
            for rule in RULES:
                s = results[f"minilm / {rule}"][field][group]
                row += [s["merged"], s["lost_merged"], _ratio(s["precision"]),
                        _ratio(s["genuine_recall"])]
            rows.append(row)
        tables.append(table(
            f"MiniLM, by {title}",
            [title, "pairs", "genuine", "merged (cos)", "lost merged (cos)", "precision (cos)",
             "recall (cos)", "merged (guard)", "lost merged (guard)", "precision (guard)",
             "recall (guard)"], rows))
    by_reason = Counter((p["label"], r or "none (merges)") for p, r in zip(pairs, reasons,
                                                                          strict=True))
    tables.append(table("Engine guard reasons by label (all judged pairs, cosine aside)",
                        ["label", "guard reason", "pairs"],
                        [[lab, reason, n] for (lab, reason), n in sorted(by_reason.items())]))
    mini = cosines["minilm"]
    lost_merged = [p for p, c, r in zip(pairs, mini, reasons, strict=True)
                   if c >= THRESHOLD and r is None and p["label"] == "lost"]
    genuine_refused = [(p, r) for p, c, r in zip(pairs, mini, reasons, strict=True)
                       if c >= THRESHOLD and r is not None and p["label"] == "genuine"]
    notes = [f"{len(pairs)} judged pairs ({labels['genuine']} genuine, {labels['lost']} lost); "
             "labelling guide and corpus attribution in `benchmarks/data/JUDGED_PAIRS.md` "
             "(corpus: OpenTelemetry website docs, CC-BY-4.0, © OpenTelemetry Authors)."]
    # Pairs are named by id with the reader's reason; their texts stay in the data file, the
    # one place with the corpus attribution.
    notes += [f"Merged but lost (MiniLM, engine guard): {p['pair_id']} [{p['language']} "
              f"{p['segment_type']}]: {p['reason']}" for p in lost_merged[:EXAMPLES]]
    notes += [f"Genuine but refused ({r}): {p['pair_id']} [{p['language']} {p['segment_type']}]: "
              f"{p['reason']}" for p, r in genuine_refused[:EXAMPLES]]
    figures = {key: s["all"] for key, s in results.items()}
    if MERGES_FILE.exists():
        sampled, sample_figures = sampled_merges_table(load_pairs(MERGES_FILE))
        tables.append(sampled)
        figures["sampled_merges"] = sample_figures
    if POPULATION_FILE.exists():
        figures["population_merges"] = population_figures(load_pairs(POPULATION_FILE))
        pop = figures["population_merges"]
        robust = pop["expected_genuine_of_40"] >= MERGES_GENUINE_MIN
        notes.append(
            f"Every guarded merge of the corpus at the draw ({pop['merges']}) was read: "
            f"{pop['genuine']} genuine ({pop['genuine_share']:.1%}); a random draw of 40 "
            f"expects {pop['expected_genuine_of_40']:.1f} genuine, so the draw's count is "
            f"{'robust' if robust else 'luck of the draw, not a met target'}"
            f"; {pop['still_merged']} still merge under the current rules.")
    figures["by_group"] = {key: {f: s[f] for f in ("language", "segment_type")}
                           for key, s in results.items()}
    figures["targets"] = TARGETS
    return {
        "parameters": {"pairs": len(pairs), "threshold": THRESHOLD, "embedders": list(EMBEDDERS),
                       "quick_sample": QUICK_PAIRS if quick else None},
        "figures": figures,
        "tables": tables,
        "notes": notes,
    }


def headline(result: dict[str, Any]) -> list[str]:
    s = result["figures"].get(f"minilm / {JUDGED_RULE}")
    if not s:
        return []
    return [f"Merge quality on {s['pairs']} judged pairs (MiniLM, engine guard): precision "
            f"{fmt(s['precision'])}, genuine recall {fmt(s['genuine_recall'])}, "
            f"{s['lost_merged']} lost pairs merged (targets ≥ 0.95 and ≥ 0.80)."]
