"""Candidate merge pairs for the judged merge-quality benchmark (issue 44, item 1).

The pairs are collected the way the engine meets them: the shared OpenTelemetry corpus
(``../shared/data/corpus/opentelemetry.io/content/<lang>/``) is extracted with the package's own
extractors, embedded with the default embedder (MiniLM, through the engine's embedding view), and
ingested with ``Ingestion.FactGuard: false``. Every ``merged_near`` decision is a candidate: the
removed segment (``text_a``) against its first representative (``text_b``) in the greedy order
of SPEC section 2, inside one (document, segment type, language) group. Pairs are deduplicated
by ``(text_a, text_b)``.

Commands (run from the project root; nothing is written inside the repository except by
``build``):

- ``python -m benchmarks.judged_pairs collect --out SCRATCH/candidates.jsonl`` collects every
  candidate (embeddings cached under ``--cache``, default a folder in the temp directory).
- ``python -m benchmarks.judged_pairs sample --candidates SCRATCH/candidates.jsonl --out
  SCRATCH/sample.jsonl`` draws the stratified sample (fixed seed, a cap per language and
  segment type).
- ``python -m benchmarks.judged_pairs build --sample SCRATCH/sample.jsonl --labels LABELS.tsv``
  joins the reader's labels (``pair_id<TAB>label<TAB>reason``) to the sampled pairs and writes
  ``benchmarks/data/judged_pairs.jsonl`` and ``judged_pairs_embeddings.parquet`` (both texts
  embedded by MiniLM and by the bundled Model2Vec model).

The engine's own merges are drawn and read the same way (issue 44: 40 randomly sampled guarded
merges printed with their judgement):

- ``python -m benchmarks.judged_pairs collect --guard --languages bn,en,es,fr,ja,ko,pl,pt,ro,uk,zh
  --out SCRATCH/guarded.jsonl`` lists every unique merge of the whole corpus with the default
  rules (fact guard on);
- ``python -m benchmarks.judged_pairs sample-merges --merges SCRATCH/guarded.jsonl --out
  SCRATCH/drawn.jsonl`` draws 40 of them uniformly (fixed seed);
- ``python -m benchmarks.judged_pairs build-merges --sample SCRATCH/drawn.jsonl --labels
  LABELS.tsv`` writes ``benchmarks/data/guarded_merges.jsonl``; with ``--sample
  SCRATCH/guarded.jsonl --out benchmarks/data/guarded_population.jsonl`` it writes every merge,
  read, which gives the rate a draw of 40 comes from.

``python -m benchmarks.judged_pairs sections --out SCRATCH/crossings.jsonl`` measures how
often the text rules alone merge across sibling sections (issue 44, item 4), with the
engine's merges and ``section`` refusals beside, and writes the crossing pairs.

This module is a data tool, not a timed benchmark (no ``run``); the measurement is
:mod:`benchmarks.merge_quality`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from .common import ROOT, SHARED_DATA

CORPUS = SHARED_DATA / "corpus" / "opentelemetry.io" / "content"
M2V_MODEL = SHARED_DATA / "models" / "m2v-minilm-l6-256"
DATA = Path(__file__).resolve().parent / "data"
PAIRS_FILE = DATA / "judged_pairs.jsonl"
# The engine's own guarded merges, drawn at random and read (issue 44: 40 sampled merges).
MERGES_FILE = DATA / "guarded_merges.jsonl"
MERGES_SAMPLE = 40
# Every one of those merges, read: the rate a draw of 40 comes from.
POPULATION_FILE = DATA / "guarded_population.jsonl"
EMBEDDINGS_FILE = DATA / "judged_pairs_embeddings.parquet"
LANGUAGES = "es,en:6,pt,fr,ja:6,zh:4"
THRESHOLD = 0.90
LABELS = ("genuine", "lost")
SEED = 44
# Per (language, segment type): at most this many pairs enter the sample.
CAP = 30
# The fields of one pair, in file order (``label`` and ``reason`` follow).
FIELDS = ("pair_id", "doc", "language", "segment_type", "section_a", "section_b", "text_a",
          "text_b", "cosine")


def default_cache() -> Path:
    return Path(tempfile.gettempdir()) / "arrowdedup-judged-pairs"


def corpus_files(corpus: Path, language: str, share: int) -> list[Path]:
    """The Markdown files of one language, thinned to one document in ``share`` (chosen by a
    hash of the path, so the choice is fixed) to bound the embedding time."""
    found = sorted(p for p in (corpus / language).rglob("*.md") if p.is_file())
    return [p for p in found
            if int(_digest(p.relative_to(corpus).as_posix())[:8], 16) % share == 0]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pair_id(language: str, segment_type: str, text_a: str, text_b: str) -> str:
    return "jp-" + _digest("\x00".join((language, segment_type, text_a, text_b)))[:12]


def embed(texts: list[str], code: np.ndarray, spec: str, cache: Path) -> np.ndarray:
    """Vectors of ``texts`` as the documents path embeds them (the embedding view; code
    verbatim), through an embedding cache outside the repository."""
    from arrowdedup.embed.cache import EmbeddingCache, embed_texts
    from arrowdedup.embed.embedders import get_embedder

    model = get_embedder(spec)
    store = EmbeddingCache(cache, model.name, model.dim)
    vectors, _ = embed_texts(pa.array(texts, pa.string()), model, cache=store, quiet=False,
                             verbatim=code)
    return vectors


def parse_shares(spec: str) -> dict[str, int]:
    """``"en:8,es,ja:3"``: the languages to collect and the share of documents of each."""
    out: dict[str, int] = {}
    for part in spec.split(","):
        lang, _, share = part.strip().partition(":")
        out[lang] = int(share) if share else 1
    return out


def collect(corpus: Path, language: str, share: int, cache: Path, *, guard: bool = False
            ) -> list[dict[str, Any]]:
    """Every unique cosine-only candidate pair of one language, in document order; with
    ``guard``, every unique merge the engine makes with its defaults (the fact guard on).

    Languages are collected one at a time: the engine never compares segments of two
    languages, so the decisions are those of one run over all of them."""
    import arrowdedup
    from arrowdedup.pipeline.documents import with_embeddings

    files = corpus_files(corpus, language, share)
    print(f"{language}: {len(files)} documents", flush=True)
    frame = arrowdedup.extract(files, root=corpus, language_from_path="{lang}/**")
    print(f"{language}: {frame.height} segments", flush=True)
    code = frame.get_column("segment_type").cast(pl.String).eq("code").fill_null(False)
    vectors = embed(frame.get_column("text").to_list(), code.to_numpy(), "minilm", cache)
    frame = with_embeddings(frame.drop("embedding", strict=False), vectors)
    config = {"Ingestion": {"FactGuard": guard}}
    result = arrowdedup.ingest(frame, arrowdedup.DedupConfig.from_dict(config))
    suffix = {p.relative_to(corpus).with_suffix("").as_posix(): p.suffix for p in files}
    rows = frame.select("segment_id", "section", "position").rename(
        {"section": "section_b", "position": "position_b", "segment_id": "representative_id"})
    merged = (
        result.decisions.filter(pl.col("action") == "merged_near")
        .join(frame.select("segment_id", "segment_type", "language", "section", "position",
                           pl.col("text").alias("full_text")), on="segment_id", how="left")
        .join(rows, on="representative_id", how="left")
        .join(frame.select(pl.col("segment_id").alias("representative_id"),
                           pl.col("text").alias("text_b")), on="representative_id", how="left")
        .sort("doc_id", "position")
    )
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for row in merged.iter_rows(named=True):
        key = (row["full_text"], row["text_b"])
        if key in seen:
            continue
        seen.add(key)
        seg_type = str(row["segment_type"])
        language = str(row["language"])
        out.append({
            "pair_id": pair_id(language, seg_type, *key),
            "doc": row["doc_id"] + suffix.get(row["doc_id"], ".md"),
            "language": language,
            "segment_type": seg_type,
            "section_a": row["section"],
            "section_b": row["section_b"],
            "text_a": key[0],
            "text_b": key[1],
            "cosine": round(float(row["similarity"]), 6),
        })
    return out


def sample(candidates: list[dict[str, Any]], cap: int, seed: int) -> list[dict[str, Any]]:
    """At most ``cap`` pairs per (language, segment type), drawn with a fixed seed; a stratum
    with fewer candidates is taken whole. Candidates repeated across collection runs count
    once, and so does a pair of texts met in two languages. Sorted by language, type and
    pair id."""
    unique = {p["pair_id"]: p for p in reversed(candidates)}  # the first of repeated ids
    strata: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for pair in unique.values():
        strata[(pair["language"], pair["segment_type"])].append(pair)
    chosen: list[dict[str, Any]] = []
    for key in sorted(strata):
        pairs = sorted(strata[key], key=lambda p: p["pair_id"])
        if len(pairs) > cap:
            pairs = random.Random(f"{seed}:{key[0]}:{key[1]}").sample(pairs, cap)
        chosen += pairs
    chosen.sort(key=lambda p: (p["language"], p["segment_type"], p["pair_id"]))
    # Code is seldom translated: the same pair of texts can come from two languages' copies
    # of a page. It counts once, in the first language (after the draw, so that no stratum's
    # draw depends on another's).
    seen: set[tuple[str, str]] = set()
    out = []
    for pair in chosen:
        key = (pair["text_a"], pair["text_b"])
        if key not in seen:
            seen.add(key)
            out.append(pair)
    return out


def _levels(path: str | None) -> list[str]:
    return [" ".join(level.lower().split()) for level in (path or "").split(">") if level.strip()]


def _siblings(a: str | None, b: str | None) -> bool:
    """Two heading paths of one document, neither the start of the other."""
    pa, pb = _levels(a), _levels(b)
    k = min(len(pa), len(pb))
    return bool(pa) and bool(pb) and pa[:k] != pb[:k]


def section_crossings(corpus: Path, language: str, cache: Path) -> dict[str, Any]:
    """Issue 44, item 4: the near merges the text rules alone make in one language's
    documents (the signature without section tokens, no ``section`` column), how many join
    sibling sections, and the merges and ``section`` refusals of the engine's own rules."""
    import arrowdedup
    from arrowdedup.facts.guard import signature_arrays, signature_series
    from arrowdedup.pipeline.documents import with_embeddings

    files = corpus_files(corpus, language, 1)
    frame = arrowdedup.extract(files, root=corpus, language_from_path="{lang}/**")
    code = frame.get_column("segment_type").cast(pl.String).eq("code").fill_null(False)
    vectors = embed(frame.get_column("text").to_list(), code.to_numpy(), "minilm", cache)
    frame = with_embeddings(frame.drop("embedding", strict=False), vectors)
    text_rules = frame.drop("section").with_columns(signature_series(*signature_arrays(
        frame["text"], segment_type=frame["segment_type"], language=frame["language"]))
        .alias("fact_signature"))
    merged = arrowdedup.ingest(text_rules).decisions.filter(pl.col("action") == "merged_near")
    section = dict(zip(frame["segment_id"].to_list(), frame["section"].to_list(), strict=True))
    text = dict(zip(frame["segment_id"].to_list(), frame["text"].to_list(), strict=True))
    crossing = [(a, b) for a, b in merged.select("segment_id", "representative_id").iter_rows()
                if _siblings(section[a], section[b])]
    engine = arrowdedup.ingest(frame).decisions
    return {
        "text_rule_merges": merged.height,
        "sibling_section_merges": len(crossing),
        "engine_merges": engine.filter(pl.col("action") == "merged_near").height,
        "section_refusals": engine.filter(pl.col("guard_reason") == "section").height,
        "examples": [{"language": language, "section_a": section[a], "section_b": section[b],
                      "text_a": text[a], "text_b": text[b]} for a, b in crossing],
    }


def sample_merges(merges: list[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` of the engine's guarded merges drawn uniformly (fixed seed) from every unique
    one, in pair id order, so the sample is the corpus's mix of languages and types."""
    unique = sorted({p["pair_id"]: p for p in merges}.values(), key=lambda p: p["pair_id"])
    chosen = random.Random(seed).sample(unique, min(n, len(unique)))
    return sorted(chosen, key=lambda p: p["pair_id"])


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")


def read_labels(path: Path) -> dict[str, tuple[str, str]]:
    """``pair_id<TAB>label<TAB>reason`` lines (``#`` starts a comment line)."""
    labels: dict[str, tuple[str, str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3 or parts[1] not in LABELS:
            raise SystemExit(f"{path}:{number}: expected pair_id<TAB>genuine|lost<TAB>reason")
        labels[parts[0]] = (parts[1], parts[2].strip())
    return labels


def build(pairs: list[dict[str, Any]], labels: dict[str, tuple[str, str]], cache: Path
          ) -> list[dict[str, Any]]:
    """The labelled pairs (in sample order) written to :data:`PAIRS_FILE`, and both texts'
    embeddings by both bundled embedders to :data:`EMBEDDINGS_FILE`."""
    known = {p["pair_id"] for p in pairs}
    unknown = sorted(set(labels) - known)
    if unknown:
        raise SystemExit(f"labels for pairs not in the sample: {unknown[:5]}")
    judged = [{**{k: p[k] for k in FIELDS}, "label": labels[p["pair_id"]][0],
               "reason": labels[p["pair_id"]][1]} for p in pairs if p["pair_id"] in labels]
    write_jsonl(judged, PAIRS_FILE)
    write_embeddings(judged, cache)
    return judged


def write_embeddings(judged: list[dict[str, Any]], cache: Path) -> None:
    texts = [p["text_a"] for p in judged] + [p["text_b"] for p in judged]
    code = np.array([p["segment_type"] == "code" for p in judged] * 2, dtype=bool)
    n = len(judged)
    columns: dict[str, Any] = {"pair_id": pa.array([p["pair_id"] for p in judged], pa.string())}
    for name, spec in (("minilm", "minilm"), ("m2v", f"model2vec:{M2V_MODEL}")):
        vectors = embed(texts, code, spec, cache).astype(np.float32)
        dim = vectors.shape[1]
        for side, block in (("a", vectors[:n]), ("b", vectors[n:])):
            flat = pa.array(np.ascontiguousarray(block).reshape(-1), pa.float32())
            columns[f"{name}_{side}"] = pa.FixedSizeListArray.from_arrays(flat, dim)
    pq.write_table(pa.table(columns), EMBEDDINGS_FILE, compression="zstd")


def counts(rows: list[dict[str, Any]], *keys: str) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for row in rows:
        out["/".join(str(row[k]) for k in keys)] += 1
    return dict(sorted(out.items()))


def counts_markdown(judged: list[dict[str, Any]]) -> str:
    """The counts tables of ``JUDGED_PAIRS.md``: pairs per language and per segment type, by
    label."""
    lines: list[str] = []
    for field, title in (("language", "language"), ("segment_type", "segment type")):
        per: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(LABELS, 0))
        for p in judged:
            per[p[field]][p["label"]] += 1
        lines += [f"| {title} | genuine | lost | all |", "|---|---:|---:|---:|"]
        for key in sorted(per):
            g, lo = per[key]["genuine"], per[key]["lost"]
            lines.append(f"| {key} | {g} | {lo} | {g + lo} |")
        g = sum(p["label"] == "genuine" for p in judged)
        lines += [f"| **all** | {g} | {len(judged) - g} | {len(judged)} |", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.judged_pairs")
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="every unique cosine-only candidate pair")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--languages", default=LANGUAGES,
                   help="LANG[:N],...: languages, each keeping one document in N (path hash)")
    c.add_argument("--cache", type=Path, default=default_cache())
    c.add_argument("--guard", action="store_true",
                   help="the engine's merges with the fact guard on, not the candidates")
    s = sub.add_parser("sample", help="stratified sample with a fixed seed")
    s.add_argument("--candidates", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--cap", type=int, default=CAP)
    s.add_argument("--seed", type=int, default=SEED)
    x = sub.add_parser("sections", help="near merges across sibling sections (issue 44)")
    x.add_argument("--out", type=Path, required=True)
    x.add_argument("--languages", default="bn,en,es,fr,ja,ko,pl,pt,ro,uk,zh")
    x.add_argument("--cache", type=Path, default=default_cache())
    m = sub.add_parser("sample-merges", help="draw guarded merges (from collect --guard)")
    m.add_argument("--merges", type=Path, required=True)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("-n", type=int, default=MERGES_SAMPLE)
    m.add_argument("--seed", type=int, default=SEED)
    j = sub.add_parser("build-merges", help="join labels to the drawn merges, write the file")
    j.add_argument("--sample", type=Path, required=True)
    j.add_argument("--labels", type=Path, required=True)
    j.add_argument("--out", type=Path, default=MERGES_FILE,
                   help=f"default {MERGES_FILE.name}; {POPULATION_FILE.name} for every merge")
    b = sub.add_parser("build", help="join labels, write the data files")
    b.add_argument("--sample", type=Path, required=True)
    b.add_argument("--labels", type=Path, required=True)
    b.add_argument("--cache", type=Path, default=default_cache())
    args = parser.parse_args(argv)
    if not CORPUS.is_dir() and args.cmd in ("collect", "sections"):
        print(f"the shared corpus is missing ({CORPUS.relative_to(ROOT.parent)}); "
              "fetch ../shared/data first", file=sys.stderr)
        return 1
    if args.cmd == "collect":
        pairs = []
        for language, share in parse_shares(args.languages).items():
            pairs += collect(CORPUS, language, share, args.cache, guard=args.guard)
            write_jsonl(pairs, args.out)
        print(json.dumps(counts(pairs, "language", "segment_type"), indent=1))
        print(f"{len(pairs)} unique candidate pairs -> {args.out}")
    elif args.cmd == "sections":
        found = [section_crossings(CORPUS, lang, args.cache)
                 for lang in parse_shares(args.languages)]
        totals = {k: sum(f[k] for f in found) for k in found[0] if k != "examples"}
        write_jsonl([e for f in found for e in f["examples"]], args.out)
        print(json.dumps(totals, indent=1))
    elif args.cmd == "sample-merges":
        pairs = sample_merges(read_jsonl(args.merges), args.n, args.seed)
        write_jsonl(pairs, args.out)
        print(f"{len(pairs)} of {len(read_jsonl(args.merges))} guarded merges -> {args.out}")
    elif args.cmd == "build-merges":
        labels = read_labels(args.labels)
        pairs = read_jsonl(args.sample)
        missing = [p["pair_id"] for p in pairs if p["pair_id"] not in labels]
        if missing:
            raise SystemExit(f"every drawn merge needs a label; missing: {missing[:5]}")
        write_jsonl([{**{k: p[k] for k in FIELDS}, "label": labels[p["pair_id"]][0],
                      "reason": labels[p["pair_id"]][1]} for p in pairs], args.out)
        print(json.dumps(counts(read_jsonl(args.out), "label"), indent=1))
    elif args.cmd == "sample":
        pairs = sample(read_jsonl(args.candidates), args.cap, args.seed)
        write_jsonl(pairs, args.out)
        print(json.dumps(counts(pairs, "language", "segment_type"), indent=1))
        print(f"{len(pairs)} sampled pairs -> {args.out}")
    else:
        judged = build(read_jsonl(args.sample), read_labels(args.labels), args.cache)
        print(json.dumps(counts(judged, "language", "label"), indent=1))
        print(counts_markdown(judged))
        print(f"{len(judged)} judged pairs -> {PAIRS_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
