"""Framework adapters (issue 48): their overhead over the library call they wrap, and what
LangChain's own ``EmbeddingsRedundantFilter`` keeps beside arrowdedup's compressor.

**Overhead.** Each adapter against the library call it wraps, on the same inputs, timed in
turn round by round (:func:`benchmarks.common.timeit_interleaved`): ingestion on 10,000 items
(500 documents × 20 segments of :mod:`benchmarks.corpus`, 384-d) against :func:`arrowdedup.ingest`
on the segments table, retrieval on 100 ranked results (with planted near copies) against
:func:`arrowdedup.dedupe_ranked`. No model runs in the timing: LangChain's items get their
vectors from an ``Embeddings`` object that returns the precomputed matrix; LlamaIndex nodes and
Haystack documents carry them (lists of floats, as the frameworks hold them); the library side
gets the same vectors in its table. ``EmbeddingsRedundantFilter`` is timed on the same 100
results with the same ``Embeddings``. Target: adapter / library <= 1.10.

**Quality** (target 3): English pages of the OpenTelemetry docs (../shared/data, CC-BY-4.0,
© OpenTelemetry Authors) split into paragraphs as a LangChain user would (blank lines), the
top 30 paragraphs of each of :data:`QUESTIONS` by Model2Vec cosine, then
``EmbeddingsRedundantFilter`` (its default 0.95, and 0.90) and :class:`DedupCompressor` over
the same results with the same MiniLM ``Embeddings``. Counted against arrowdedup's decisions:
results the filter drops that arrowdedup keeps (split into "the better-ranked copy dropped" —
the filter keeps the *lower*-ranked document of a pair — and "no kept result states its
facts"), and results the filter keeps that repeat a better-ranked one.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from .common import SHARED_DATA, table, timeit_interleaved

TITLE = "Framework adapters: overhead and LangChain's redundancy filter"
TARGET_RATIO = 1.10
FULL = {"docs": 500, "segments": 20, "dim": 384, "results": 100, "repeats": 7,
        "calls": 50, "pages": None}
QUICK = {"docs": 50, "segments": 20, "dim": 64, "results": 100, "repeats": 3,
         "calls": 5, "pages": 60}
CORPUS = SHARED_DATA / "corpus" / "opentelemetry.io" / "content" / "en"
M2V = SHARED_DATA / "models" / "m2v-minilm-l6-256"
TOP = 30
QUESTIONS = (
    "How do I configure the OTLP exporter endpoint?",
    "What is the difference between a span and a trace?",
    "How does tail sampling work in the collector?",
    "How is context propagated across service boundaries?",
    "Which semantic conventions apply to HTTP server spans?",
    "How do I install the Java agent for automatic instrumentation?",
    "What is a resource and which attributes does it carry?",
    "How do I set the service name of my application?",
    "What are span events and span links?",
    "How does the batch span processor export spans?",
    "How are logs correlated with traces?",
    "How do I add a custom attribute to a metric?",
)


def _embeddings_class() -> type:
    from langchain_core.embeddings import Embeddings

    class Precomputed(Embeddings):
        """Returns given vectors: each text's row of a matrix (no model in the timing)."""

        def __init__(self, texts: list[str], matrix: np.ndarray) -> None:
            self.row = {t: i for i, t in enumerate(texts)}
            self.matrix = matrix

        def embed_documents(self, texts: list[str]) -> Any:
            if len(texts) == self.matrix.shape[0]:
                return self.matrix  # the whole list, in order: no lookup
            return self.matrix[[self.row[t] for t in texts]]

        def embed_query(self, text: str) -> list[float]:
            return self.matrix[self.row[text]].tolist()

    return Precomputed


def _model_embeddings(model: Any) -> Any:
    from langchain_core.embeddings import Embeddings

    class ModelEmbeddings(Embeddings):
        """An arrowdedup embedder as LangChain Embeddings (both filters read the same)."""

        def embed_documents(self, texts: list[str]) -> Any:
            return model.encode(list(texts))

        def embed_query(self, text: str) -> list[float]:
            return model.encode([text])[0].tolist()

    return ModelEmbeddings()


def _summary(t: dict[str, Any], scale: float = 1.0) -> dict[str, float]:
    return {"median": t["median"] * scale, "min": t["min"] * scale, "max": t["max"] * scale}


def overhead(p: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    import datasets
    from haystack import Document as HDoc
    from langchain_community.document_transformers import EmbeddingsRedundantFilter
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

    import arrowdedup as ad
    from arrowdedup.integrations.haystack import DedupDocuments
    from arrowdedup.integrations.langchain import DedupCompressor, DedupTransformer
    from arrowdedup.integrations.llamaindex import DedupPostprocessor, DedupTransform

    from .corpus import make_corpus

    corpus = make_corpus(p["docs"], p["segments"], p["dim"], seed=48)
    frame = pl.from_arrow(corpus.table)
    assert isinstance(frame, pl.DataFrame)
    texts = frame.get_column("text").to_list()
    doc_ids = frame.get_column("doc_id").to_list()
    ids = frame.get_column("segment_id").to_list()
    matrix = corpus.matrix
    lists = matrix.tolist()
    n = len(texts)
    library_table = pl.DataFrame({
        "doc_id": doc_ids, "segment_id": ids, "text": texts,
        "segment_type": ["paragraph"] * n,
        "position": pl.Series(range(n), dtype=pl.Int32), "embedding": pl.Series(matrix)})
    embeddings = _embeddings_class()(texts, matrix)
    lc_docs = [Document(page_content=t, metadata={"source": d}, id=i)
               for t, d, i in zip(texts, doc_ids, ids, strict=True)]
    li_nodes = [TextNode(id_=i, text=t, embedding=v,
                         relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=d)})
                for t, d, i, v in zip(texts, doc_ids, ids, lists, strict=True)]
    hs_docs = [HDoc(id=i, content=t, meta={"source": d}, embedding=v)
               for t, d, i, v in zip(texts, doc_ids, ids, lists, strict=True)]
    dataset = datasets.Dataset.from_polars(library_table.select(
        pl.col("doc_id").alias("url"), pl.col("text").alias("content"),
        pl.col("embedding").alias("emb"), "segment_id", "segment_type", "position"))
    columns = {"doc_id": "url", "text": "content", "embedding": "emb"}
    transformer = DedupTransformer(embeddings=embeddings)
    transform = DedupTransform()
    component = DedupDocuments(mode="ingestion")
    ingestion = timeit_interleaved({
        "library": lambda: ad.ingest(library_table).final_count,
        "langchain": lambda: len(transformer.transform_documents(lc_docs)),
        "llamaindex": lambda: len(transform(li_nodes)),
        "haystack": lambda: len(component.run(documents=hs_docs)["documents"]),
        "datasets": lambda: ad.ingest(dataset, columns=columns).final_count,
    }, repeats=p["repeats"])
    counts = {k: v["value"] for k, v in ingestion.items()}
    assert len(set(counts.values())) == 1, counts  # every side keeps the same rows

    # 100 ranked results across documents, every fifth a near copy of an earlier one.
    rng = np.random.default_rng(48)
    m = p["results"]
    rows = rng.choice(n, size=m, replace=False)
    vectors = matrix[rows].copy()
    copies = np.arange(5, m, 5)
    noise = rng.standard_normal((copies.size, matrix.shape[1])).astype(np.float32)
    noise *= 0.2 / np.linalg.norm(noise, axis=1, keepdims=True)
    base = vectors[copies - 3]
    vectors[copies] = base / np.linalg.norm(base, axis=1, keepdims=True) + noise
    r_texts = [texts[r] for r in rows]
    for c in copies:  # same words, so the fact guard agrees with cosine
        r_texts[c] = r_texts[c - 3] + " "
    r_ids = [f"r{i}" for i in range(m)]
    r_lists = vectors.tolist()
    ranked_frame = pl.DataFrame({"segment_id": r_ids, "text": r_texts,
                                 "embedding": pl.Series(vectors)})
    r_embeddings = _embeddings_class()(r_texts, vectors)
    r_lc = [Document(page_content=t, id=i) for t, i in zip(r_texts, r_ids, strict=True)]
    r_li = [NodeWithScore(node=TextNode(id_=i, text=t, embedding=v), score=1.0)
            for t, i, v in zip(r_texts, r_ids, r_lists, strict=True)]
    r_hs = [HDoc(id=i, content=t, embedding=v)
            for t, i, v in zip(r_texts, r_ids, r_lists, strict=True)]
    redundant = EmbeddingsRedundantFilter(embeddings=r_embeddings)
    calls = p["calls"]

    def many(fn: Any) -> Any:
        def run() -> Any:
            for _ in range(calls):
                value = fn()
            return value
        return run

    retrievals: dict[bool, dict[str, dict[str, Any]]] = {}
    # The fact guard reads the texts (~0.3 ms a result with the interpreted scanner): the
    # default, and the guard off, where the library call is the cosine scan alone.
    for guard in (True, False):
        cfg = ad.DedupConfig(retrieval=ad.RetrievalConfig(fact_guard=guard))
        compressor = DedupCompressor(embeddings=r_embeddings, config=cfg)
        post = DedupPostprocessor(config=cfg)
        ranked_component = DedupDocuments(mode="ranked", config=cfg)
        sides = {
            "library": many(lambda cfg=cfg: ad.dedupe_ranked(ranked_frame, cfg).height),
            "langchain": many(lambda c=compressor: len(c.compress_documents(r_lc, "q"))),
            "llamaindex": many(lambda c=post: len(c.postprocess_nodes(r_li, query_str="q"))),
            "haystack": many(lambda c=ranked_component: len(c.run(documents=r_hs)["documents"])),
            "EmbeddingsRedundantFilter": many(lambda: len(redundant.transform_documents(r_lc))),
        }
        retrievals[guard] = timeit_interleaved(sides, repeats=p["repeats"])
        kept = {k: v["value"] for k, v in retrievals[guard].items()
                if k != "EmbeddingsRedundantFilter"}
        assert len(set(kept.values())) == 1, kept

    figures: dict[str, Any] = {"ingestion_items": n, "retrieval_results": m,
                               "ingestion_kept": counts["library"],
                               "retrieval_kept": retrievals[True]["library"]["value"],
                               "erf_kept": retrievals[True]["EmbeddingsRedundantFilter"]["value"]}
    rows_out = []
    for phase, timings, scale, unit in (
            ("ingestion", ingestion, 1.0, "s"),
            ("retrieval", retrievals[True], 1e3 / calls, "ms"),
            ("retrieval_noguard", retrievals[False], 1e3 / calls, "ms")):
        lib = timings["library"]
        for side, t in timings.items():
            ratio = t["median"] / lib["median"]
            adapter = side not in ("library", "EmbeddingsRedundantFilter")
            verdict = ("met" if ratio <= TARGET_RATIO else "MISSED") if adapter else "–"
            added = (t["median"] - lib["median"]) * scale
            figures[f"{phase}_{side}"] = {**_summary(t, scale), "ratio": ratio,
                                          "added": added}
            rows_out.append([phase.replace("_noguard", " (fact guard off)"), side,
                             f"{t['median'] * scale:.4g} {unit}",
                             f"{t['min'] * scale:.4g}–{t['max'] * scale:.4g}",
                             f"{added:+.3g} {unit}" if side != "library" else "–",
                             ratio, verdict])
    tables = [table("Adapter against the library call it wraps (median of "
                    f"{p['repeats']}; retrieval per call, {calls} calls a run)",
                    ["phase", "side", "median", "min–max", "added", "ratio to library",
                     "target <= 1.10"], rows_out,
                    note="Ingestion: 10,000 items; retrieval: 100 ranked results. Same vectors "
                         "on every side, no model in the timing.")]
    return figures, tables


def paragraphs(pages: int | None) -> tuple[list[str], list[str]]:
    """(source, text) of each paragraph of the English pages (front matter and shortcode
    lines dropped), as a user splitting Markdown on blank lines gets them."""
    files = sorted(CORPUS.rglob("*.md"))[:pages] if pages else sorted(CORPUS.rglob("*.md"))
    sources, texts = [], []
    for path in files:
        body = re.sub(r"\A---\n.*?\n---\n", "", path.read_text(encoding="utf-8"), flags=re.S)
        for block in body.split("\n\n"):
            block = block.strip()
            if len(block) >= 40 and not block.startswith("{{"):
                sources.append(str(path.relative_to(CORPUS)))
                texts.append(block)
    return sources, texts


def quality(p: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    from langchain_community.document_transformers import EmbeddingsRedundantFilter
    from langchain_core.documents import Document

    import arrowdedup as ad
    from arrowdedup.integrations.langchain import DedupCompressor

    sources, texts = paragraphs(p["pages"])
    m2v = ad.get_embedder(f"model2vec:{M2V}")
    dense = m2v.encode(texts)
    questions = m2v.encode(list(QUESTIONS))
    minilm = _model_embeddings(ad.get_embedder("minilm"))
    compressor = DedupCompressor(embeddings=minilm)
    totals: dict[str, dict[str, int]] = {}
    examples: list[list[Any]] = []
    kinds: list[str] = []
    shown: set[str] = set()
    for threshold in (0.95, 0.90):
        totals[f"{threshold:.2f}"] = {"results": 0, "erf_kept": 0, "ours_kept": 0,
                                      "erf_dropped_better_ranked": 0,
                                      "erf_dropped_facts": 0, "erf_kept_repeats": 0}
    for q, question in enumerate(QUESTIONS):
        top = np.argsort(-(dense @ questions[q]), kind="stable")[:TOP]
        # The filter's documents lose their id (it rebuilds them): the rank names them.
        docs = [Document(page_content=texts[i], metadata={"source": sources[i], "rank": r},
                         id=f"#{i}") for r, i in enumerate(top)]
        rank_of = {d.id: r for r, d in enumerate(docs)}
        vectors = np.asarray(minilm.embed_documents([d.page_content for d in docs]))
        ours = compressor.compress_documents(docs, question)
        kept_ours = {d.metadata["rank"] for d in ours}
        displaced_by = {rank_of[x]: d.metadata["rank"] for d in ours
                        for x in d.metadata["displaced_ids"]}
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        for threshold, tally in totals.items():
            theirs = EmbeddingsRedundantFilter(
                embeddings=minilm, similarity_threshold=float(threshold)
            ).transform_documents(docs)
            kept_theirs = {d.metadata["rank"] for d in theirs}
            tally["results"] += len(docs)
            tally["erf_kept"] += len(theirs)
            tally["ours_kept"] += len(ours)
            for r, doc in enumerate(docs):
                if r in kept_ours and r not in kept_theirs:
                    partners = [j for j in range(len(docs)) if j != r and
                                unit[r] @ unit[j] > float(threshold)]
                    later = [j for j in partners if j in kept_theirs and
                             displaced_by.get(j) == r]
                    kind = "better-ranked copy dropped" if later else "facts not covered"
                    key = "erf_dropped_better_ranked" if later else "erf_dropped_facts"
                    tally[key] += 1
                    other = docs[(later or partners or [r])[0]]
                    if threshold == "0.95" and kinds.count(kind) < 3 and \
                            not {doc.page_content, other.page_content} & shown:
                        kinds.append(kind)
                        shown |= {doc.page_content, other.page_content}
                        examples.append([question, kind, _short(doc.page_content),
                                         _short(other.page_content),
                                         ad.fact_conflict(doc.page_content,
                                                          other.page_content)])
                elif r in kept_theirs and r not in kept_ours and displaced_by[r] in kept_theirs:
                    # Both copies reach the prompt: the filter keeps a repeat of a result it
                    # keeps too (a dropped better copy is counted above, not here).
                    tally["erf_kept_repeats"] += 1
                    if threshold == "0.95" and kinds.count("kept a repeat") < 3:
                        kinds.append("kept a repeat")
                        rep = docs[displaced_by[r]]
                        examples.append([question, "kept a repeat", _short(doc.page_content),
                                         _short(rep.page_content),
                                         f"cosine {unit[r] @ unit[displaced_by[r]]:.3f}"])
    rows = [[f"EmbeddingsRedundantFilter @ {t}", v["results"], v["erf_kept"], v["ours_kept"],
             v["erf_dropped_better_ranked"], v["erf_dropped_facts"], v["erf_kept_repeats"]]
            for t, v in totals.items()]
    figures = {"questions": len(QUESTIONS), "top": TOP, "paragraphs": len(texts),
               "pages": len(set(sources)), "totals": totals}
    tables = [
        table(f"{len(QUESTIONS)} questions × top {TOP} paragraphs ({len(texts):,} paragraphs "
              f"of {len(set(sources))} English OpenTelemetry pages), MiniLM embeddings for both",
              ["filter", "results", "filter keeps", "arrowdedup keeps",
               "filter drops the better-ranked copy", "filter drops, facts not covered",
               "filter keeps a repeat of a kept result"], rows,
              note="Counted against arrowdedup's DedupCompressor (threshold 0.90, fact guard on) "
                   "on the same results."),
        table("Examples (filter at its default 0.95; texts cut to 80 characters)",
              ["question", "what the filter did", "this result", "the result it pairs with",
               "fact_conflict (dropped, kept) or cosine"], examples),
    ]
    notes = ["EmbeddingsRedundantFilter drops, of each pair above its threshold, the document "
             "that comes *first* in the list (its rule: `np.tril(similarity, k=-1)`, then "
             "`included_idxs.remove(second_idx)`), so it keeps the lower-ranked copy; "
             "arrowdedup keeps the better-ranked one and lists the other in `displaced_ids`."]
    return figures, tables, notes


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def run(quick: bool) -> dict[str, Any]:
    p = QUICK if quick else FULL
    figures, tables = overhead(p)
    notes: list[str] = []
    if CORPUS.exists() and M2V.exists():
        q_figures, q_tables, notes = quality(p)
        figures["quality"] = q_figures
        tables += q_tables
    else:
        notes.append("quality comparison skipped: ../shared/data is not present")
    return {"parameters": dict(p), "figures": figures, "tables": tables, "notes": notes}


def headline(result: dict[str, Any]) -> list[str]:
    f = result["figures"]
    sides = ("langchain", "llamaindex", "haystack")
    ing = ", ".join(f"{s} {f[f'ingestion_{s}']['ratio']:.2f}x" for s in (*sides, "datasets"))
    ret = ", ".join(f"{s} {f[f'retrieval_{s}']['ratio']:.2f}x" for s in sides)
    off = ", ".join(f"{s} {f[f'retrieval_noguard_{s}']['ratio']:.2f}x" for s in sides)
    return [f"Framework adapters over the library call they wrap (target <= 1.10x): ingestion "
            f"of {f['ingestion_items']:,} items {ing}; retrieval of {f['retrieval_results']} "
            f"results {ret} (fact guard off: {off})."]


