"""Quality of the merge threshold on labelled pairs (issue 7, item 4), MiniLM and Model2Vec.

Pair sets from ``../shared/data/pairs`` (cited in ``../shared/data/README.md``): STS-B English
(positives: score >= 4.8, negatives: < 3), PAWS-X German (label), STS-B cross-lingual (a
sentence beside its translation: all negatives, trivial pairs set aside). MiniLM embeds ~100
sentences/s on 2 cores; the full run embeds the whole 40k-pair cross-lingual file with it too
(~9 min), so the false-merge count is the file's, not a sample's. Model2Vec runs on every pair.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import SHARED_DATA, fmt, pyplot, save_figure, table

TITLE = "Quality: precision / recall of the merge threshold"
PAIRS = SHARED_DATA / "pairs"
M2V = SHARED_DATA / "models" / "m2v-minilm-l6-256"
SETS = (
    ("stsb_en", "stsb_open_en_traindev.tsv"),
    ("pawsx_de", "pawsx_de_dev.tsv"),
    ("crosslingual", "stsb_open_crosslingual_traindev.tsv"),
)


def run(quick: bool) -> dict[str, Any]:
    from arrowdedup.calibrate import calibrate, load_pairs, precision_recall_curve
    from arrowdedup.embed import Model2VecEmbedder

    if not PAIRS.exists() or not M2V.exists():
        return {"notes": ["../shared/data/pairs or the Model2Vec model is absent: skipped."]}
    embedders: list[tuple[str, Any]] = [("model2vec", Model2VecEmbedder(M2V))]
    if not quick:
        from arrowdedup.embed import MiniLMEmbedder

        embedders.insert(0, ("minilm", MiniLMEmbedder()))
    runs: dict[str, Any] = {}
    rows = []
    cross_rows = []
    for emb_key, embedder in embedders:
        for set_key, filename in SETS:
            sample = 100 if quick else None  # pairs (per language); the full run uses all
            pairs = load_pairs(PAIRS / filename, sample=sample, seed=7)
            result = calibrate(pairs, embedder)
            info = result.to_dict()
            info["curve"] = precision_recall_curve(result).to_dicts()
            runs[f"{emb_key}/{set_key}"] = info
            at = info["at_default"]
            if pairs.positives:
                rows.append([
                    filename, emb_key, pairs.positives, pairs.negatives, at["precision"],
                    at["recall"], at["f1"], at["fp"], info["recommended_threshold"],
                    round(info["embed_seconds"], 2),
                ])
            else:
                by_lang = info["false_merges_by_group_at_default"]
                cross_rows.append([
                    filename, emb_key,
                    f"{pairs.n} (sample {sample}/lang)" if sample else pairs.n,
                    pairs.set_aside, at["fp"], info["max_negative_cosine"],
                    ", ".join(f"{k} {v}" for k, v in by_lang.items() if v) or "none",
                    info["recommended_threshold"],
                ])
    grid_tables = []
    for key, info in runs.items():
        if not info["positives"]:
            continue
        grid_tables.append(table(
            f"{key}: threshold grid",
            ["threshold", "precision", "recall", "F1", "false merges", "false-merge rate"],
            [[r["threshold"], r["precision"], r["recall"], r["f1"], r["fp"],
              r["false_merge_rate"]] for r in info["thresholds"]],
        ))
    tables = [
        table("Labelled pairs at the default threshold 0.90",
              ["pairs", "embedder", "positives", "negatives", "precision", "recall", "F1",
               "false merges", "threshold for precision ≥ 0.99", "embed s"], rows),
        table("Cross-lingual pairs (must never merge) at 0.90",
              ["pairs", "embedder", "pairs used", "set aside (identical up to digits/punct.)",
               "false merges", "max cosine", "false merges by language",
               "lowest threshold with 0 false merges"], cross_rows),
        *grid_tables,
    ]
    figures = {
        key: {"precision_at_0.90": info["at_default"]["precision"],
              "recall_at_0.90": info["at_default"]["recall"],
              "false_merges_at_0.90": info["at_default"]["fp"],
              "recommended_threshold": info["recommended_threshold"],
              "set_aside_trivial": info["set_aside_trivial"]}
        for key, info in runs.items()
    }
    notes = [
        "Merge = cosine ≥ threshold of the two sentences' embeddings (what ingestion does inside "
        "a document). PAWS-X German through English-trained models is indicative only.",
        "Quick run: Model2Vec on a seeded sample of 100 pairs per file (per language)." if quick
        else "MiniLM and Model2Vec on every pair of every file (MiniLM embeds the ~44k "
        "cross-lingual sentences in ~9 min on 2 cores).",
        "Data: STS Benchmark (open sub-sources), stsb-multi-mt translations, PAWS-X (Google LLC);"
        " licences in ../shared/data/pairs/licenses.",
    ]
    return {"parameters": {"thresholds": "0.80–0.98", "target_precision": 0.99,
                           "positive_min": 4.8, "negative_max": 3.0, "seed": 7,
                           "quick": quick},
            "figures": {"runs": figures, "details": runs}, "tables": tables, "notes": notes}


def plot(result: dict[str, Any], out_dir: Path) -> list[Path]:
    details = result.get("figures", {}).get("details")
    if not details:
        return []
    plt = pyplot()

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for key, info in details.items():
        curve = info["curve"]
        if info["positives"]:
            pts = [(r["recall"], r["precision"]) for r in curve if r["precision"] is not None]
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], label=key)
            at = info["at_default"]
            if at["precision"] is not None:
                ax1.scatter([at["recall"]], [at["precision"]], s=18)
        else:
            ax2.plot([r["threshold"] for r in curve], [r["fp"] for r in curve], label=key)
    ax1.set(xlabel="recall", ylabel="precision", title="Merge decision (dots: threshold 0.90)")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    ax2.set(xlabel="threshold", ylabel="false merges", yscale="symlog",
            title="Cross-lingual pairs merged")
    ax2.axvline(0.90, color="grey", lw=0.8, ls="--")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    return save_figure(fig, out_dir / "quality_precision_recall.png")


def headline(result: dict[str, Any]) -> list[str]:
    runs = result.get("figures", {}).get("runs", {})
    out = []
    en = runs.get("minilm/stsb_en")
    if en:
        out.append(f"Quality (MiniLM, STS-B en, threshold 0.90): precision "
                   f"{fmt(en['precision_at_0.90'])}, recall {fmt(en['recall_at_0.90'])}.")
    details = result.get("figures", {}).get("details", {})
    cross = [(k.split("/")[0], details[k]) for k in runs if k.endswith("/crosslingual")]
    if cross:
        out.append("Sentence vs its translation (STS-B cross-lingual, must never merge), false "
                   "merges at 0.90: " + ", ".join(
                       f"{k} {v['at_default']['fp']} of {v['pairs_used']:,} pairs"
                       + (" (seeded sample)" if v.get("sampled_from") else "")
                       for k, v in cross)
                   + f"; {cross[0][1]['set_aside_trivial']} trivial pairs set aside.")
    return out
