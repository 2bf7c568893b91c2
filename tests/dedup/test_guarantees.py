"""The five guarantees of SPEC §5 as hypothesis property tests, in the exact and LSH modes.

Order preservation (retrieval), no concept loss, document boundary (document, segment type and
language), content immutable (Arrow-level, bit for bit), determinism (threads, runs, processes,
bucket counts). Exact mode is also checked against a plain-Python greedy oracle.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrowdedup import (
    DedupConfig,
    IngestionConfig,
    IngestionResult,
    LshMethod,
    Mode,
    RetrievalConfig,
    fact_conflict,
    ingest,
    open_store,
    verify_store,
    write_store,
)
from arrowdedup.dedup.salience import DefaultSalience
from arrowdedup.retrieval.crossdoc import dedupe_ranked
from arrowdedup.schema import embeddings_from
from tests.helpers import ROOT

TOL = 1e-5  # SPEC §5: kernels may disagree on pairs this close to the threshold
FAST = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
STORES = settings(max_examples=8, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow,
                                         HealthCheck.function_scoped_fixture])

TEXTS = ["alpha beta gamma", "alpha beta gamma delta", "the same words", "boilerplate footer",
         "copyright notice", "lorem ipsum dolor", "an entirely different sentence", "x",
         # Texts that state facts, so the fact guard has pairs to refuse and to allow.
         "listen on port 8080", "listen on port 9090", "do not restart", "restart it",
         "use --flag-a", "use --flag-a and port 8080", "enable it", "disable it",
         # Definitions of one type (the section rule lets them merge), and list entries
         # that are names (a name with a word added is another name).
         "SpanProcessor: processes spans", "SpanProcessors: processes spans",
         "Payment Service", "Payment Services", "key: Payment Service"]


SECTIONS = [None, "Intro", "Intro > Setup", "Intro > Usage", "intro >  SETUP", "Reference", ""]


@st.composite
def tables(draw: st.DrawFn) -> pl.DataFrame:
    """Small segments tables built to contain exact copies, near copies (a few base directions
    plus noise), null and zero embeddings, low-salience noise, several types and languages."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_docs = draw(st.integers(1, 4))
    sizes = [draw(st.integers(1, 14)) for _ in range(n_docs)]
    n = sum(sizes)
    dim = draw(st.sampled_from([3, 8, 24]))
    noise = draw(st.sampled_from([0.0, 0.01, 0.05, 0.3]))
    with_language = draw(st.booleans())
    salience_kind = draw(st.sampled_from(["none", "given", "given-with-noise"]))
    with_emb = draw(st.sampled_from(["fixed", "list64", "none"]))
    n_base = draw(st.integers(1, 4))
    bases = rng.normal(size=(n_base, dim))
    docs, positions = [], []
    for d, size in enumerate(sizes):
        docs += [f"doc-{d}"] * size
        positions += list(rng.permutation(size))
    data: dict[str, object] = {
        "doc_id": docs,
        "segment_id": [f"seg-{i:03d}" for i in rng.permutation(n)],
        "text": [TEXTS[i] for i in rng.integers(0, len(TEXTS), n)],
        "segment_type": [["paragraph", "heading", "list_item"][i]
                         for i in rng.integers(0, 3, n)],
        "position": pl.Series(positions, dtype=pl.Int32),
        "extra": list(range(n)),
    }
    if with_language:
        data["language"] = [["en", "de"][i] for i in rng.integers(0, 2, n)]
    if draw(st.booleans()):
        # Heading paths: siblings, a parent and its children, one written in another case.
        data["section"] = [SECTIONS[i] for i in rng.integers(0, len(SECTIONS), n)]
    if salience_kind != "none":
        pool = [0.0, 0.3, 0.5, 0.9, 1.0] + ([0.01, 0.04] if salience_kind != "given" else [])
        data["salience"] = pl.Series([pool[i] for i in rng.integers(0, len(pool), n)],
                                     dtype=pl.Float32)
    frame = pl.DataFrame(data)
    if with_emb != "none":
        vectors = bases[rng.integers(0, n_base, n)] + rng.normal(scale=noise, size=(n, dim))
        vectors *= rng.uniform(0.5, 3.0, size=(n, 1))  # cosine ignores the norm
        kind = rng.integers(0, 12, n)
        values: list[list[float] | None] = []
        for i in range(n):
            if kind[i] == 0:
                values.append(None)
            elif kind[i] == 1:
                values.append([0.0] * dim)
            else:
                values.append([float(x) for x in vectors[i]])
        if with_emb == "fixed":
            series = pl.Series("embedding", values, dtype=pl.List(pl.Float32)).cast(
                pl.Array(pl.Float32, dim))
        else:
            series = pl.Series("embedding", values, dtype=pl.List(pl.Float64))
        frame = frame.with_columns(series)
    return frame


configs = st.builds(
    lambda thr, mode, method, boost: DedupConfig(ingestion=IngestionConfig(
        similarity_threshold=thr, mode=mode, lsh_min_segments=1, lsh_method=method,
        boost_decay_mode=boost)),
    st.sampled_from([0.8, 0.9, 0.95, 1.0]),
    st.sampled_from([Mode.EXACT, Mode.LSH]),
    st.sampled_from([LshMethod.HYPERPLANE, LshMethod.MINHASH]),
    st.sampled_from(["Linear", "Logarithmic"]),
)


# ----------------------------------------------------------------------------- helpers


def _matrix(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """float64 embeddings and a usable mask, straight from the input (an independent path)."""
    if "embedding" not in frame.columns:
        return np.zeros((frame.height, 1)), np.zeros(frame.height, bool)
    rows = frame.get_column("embedding").to_list()
    dim = next((len(r) for r in rows if r is not None), 1)
    m = np.array([r if r is not None else [0.0] * dim for r in rows], dtype=np.float32)
    m = m.reshape(-1, dim).astype(np.float64)
    norms = np.linalg.norm(m, axis=1)
    usable = norms > 0
    m[usable] /= norms[usable, None]
    return m, usable


def _salience(frame: pl.DataFrame) -> list[float]:
    """The salience ingestion works with: the column, or the default scorer's (SPEC §3)."""
    if "salience" in frame.columns:
        return frame.get_column("salience").cast(pl.Float64).fill_null(0.0).to_list()
    values = DefaultSalience().score(frame, embeddings_from(frame))
    return pl.Series(values, dtype=pl.Float32).cast(pl.Float64).to_list()


def _group_key(frame: pl.DataFrame) -> list[tuple[str, ...]]:
    cols = ["doc_id", "segment_type"] + (["language"] if "language" in frame.columns else [])
    return list(frame.select(cols).iter_rows())


def _refused(frame: pl.DataFrame, i: int, j: int) -> bool:
    """The public fact rule, and the section rule: may row ``i`` not merge into row ``j``?"""
    lang = frame.get_column("language")[i] if "language" in frame.columns else None
    kind = frame.get_column("segment_type")[i]
    if fact_conflict(frame.get_column("text")[i], frame.get_column("text")[j],
                     segment_type=kind, language=lang) is not None:
        return True
    texts = frame.get_column("text")
    defined = _defined_type(texts[i])
    return kind != "page_furniture" and _sections_apart(frame, i, j) and \
        not _same_statement(frame, i, j) and not (
            defined is not None and defined == _defined_type(texts[j]))


def _defined_type(text: str) -> str | None:
    """The type a text defines ("SpanProcessor: ..."), lower case and singular."""
    found = re.match(r"\s*([A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*[a-z0-9])+)\s*[:：]", text)
    if found is None:
        return None
    term = found.group(1).lower()
    plural = term.endswith("s") and term[-2] not in "isu" and term[-2].isalpha()
    return term[:-1] if plural else term


def _levels(path: str | None) -> list[str]:
    return [" ".join(level.lower().split()) for level in (path or "").split(">")
            if level.strip()]


def _sections_apart(frame: pl.DataFrame, i: int, j: int) -> bool:
    """Sibling sections of one document: neither heading path starts the other."""
    if "section" not in frame.columns:
        return False
    a = _levels(frame.get_column("section")[i])
    b = _levels(frame.get_column("section")[j])
    docs = frame.get_column("doc_id")
    if not a or not b or docs[i] != docs[j]:
        return False
    k = min(len(a), len(b))
    return a[:k] != b[:k]


def _same_statement(frame: pl.DataFrame, i: int, j: int) -> bool:
    """The same text, layout aside (case, ASCII punctuation, markup and white space), and no
    lead-in (a text that introduces what follows it)."""
    from arrowdedup.facts.sections import LEAD_IN

    def form(text: str) -> str | None:
        if re.search(LEAD_IN, text):
            return None
        return re.sub(r"[\x00-\x2f\x3a-\x60\x7b-\x7f]+", " ", text.lower()).strip()

    texts = frame.get_column("text")
    a, b = form(texts[i]), form(texts[j])
    if a is None or a != b:
        return False
    # Boilerplate: the document writes it in three sections or more, and in half of them.
    doc = frame.get_column("doc_id")[i]
    rows = [(t, tuple(_levels(s))) for d, t, s in
            frame.select("doc_id", "text", "section").iter_rows() if d == doc and _levels(s)]
    written = {path for t, path in rows if form(t) == a}
    return len(written) >= 3 and 2 * len(written) >= len({path for _, path in rows})


def check_no_concept_loss_and_boundaries(frame: pl.DataFrame, result: IngestionResult,
                                         cfg: DedupConfig) -> None:
    dec = result.decisions
    assert dec.get_column("segment_id").to_list() == frame.get_column("segment_id").to_list()
    index = {s: i for i, s in enumerate(frame.get_column("segment_id").to_list())}
    actions = dec.get_column("action").cast(pl.String).to_list()
    reps = dec.get_column("representative_id").to_list()
    sims = dec.get_column("similarity").to_list()
    keys = _group_key(frame)
    texts = frame.get_column("text").to_list()
    sal = _salience(frame)
    unit, usable = _matrix(frame)
    thr = cfg.ingestion.similarity_threshold
    for i, (action, rep) in enumerate(zip(actions, reps, strict=True)):
        if action in ("kept", "filtered_low_salience"):
            assert rep is None
            if action == "filtered_low_salience":
                assert 0.0 < sal[i] < cfg.ingestion.salience_threshold
            continue
        j = index[rep]
        assert actions[j] == "kept", "a representative is always kept"
        assert keys[j] == keys[i], "a decision never links two documents, types or languages"
        if action == "dropped_exact":
            assert texts[j] == texts[i]
        else:
            assert action == "merged_near"
            assert usable[i] and usable[j]
            cos = float(unit[i] @ unit[j])
            assert cos >= thr - TOL, f"merged at cosine {cos} < {thr}"
            assert abs(sims[i] - cos) < 1e-4
            if cfg.ingestion.fact_guard:
                # No concept loss: the representative states every fact of what it absorbed.
                assert not _refused(frame, i, j), "a merge lost a fact"
    kept_ids = [s for s, a in zip(dec.get_column("segment_id").to_list(), actions, strict=True)
                if a == "kept"]
    assert result.kept.get_column("segment_id").to_list() == kept_ids  # input order


def check_exact_mode_is_complete(frame: pl.DataFrame, result: IngestionResult,
                                 cfg: DedupConfig) -> None:
    """No two kept segments of one group are near duplicates, and the greedy oracle agrees."""
    unit, usable = _matrix(frame)
    thr = cfg.ingestion.similarity_threshold
    keys = _group_key(frame)
    actions = result.decisions.get_column("action").cast(pl.String).to_list()
    kept = [i for i, a in enumerate(actions) if a == "kept" and usable[i]]
    for a_i, i in enumerate(kept):
        for j in kept[a_i + 1:]:
            if keys[i] == keys[j] and float(unit[i] @ unit[j]) >= thr + TOL:
                # Only the fact guard keeps two near duplicates apart.
                assert cfg.ingestion.fact_guard and (_refused(frame, i, j)
                                                     or _refused(frame, j, i))
    guard = (lambda r, s: _refused(frame, r, s)) if cfg.ingestion.fact_guard else None
    oracle = _oracle(frame, unit, usable, thr, cfg.ingestion.salience_threshold, guard)
    if oracle is not None:
        assert actions == oracle


def _oracle(frame: pl.DataFrame, unit: np.ndarray, usable: np.ndarray, thr: float,
            sal_thr: float, refused: Callable[[int, int], bool] | None = None
            ) -> list[str] | None:
    """SPEC §2 step by step, in plain Python; None when a pair sits within TOL of thr."""
    n = frame.height
    keys = _group_key(frame)
    texts = frame.get_column("text").to_list()
    pos = frame.get_column("position").to_list()
    sal = _salience(frame)
    out = ["kept"] * n
    groups: dict[tuple[str, ...], list[int]] = {}
    for i in range(n):
        groups.setdefault(keys[i], []).append(i)
    for rows in groups.values():
        rows.sort(key=lambda r: (-sal[r], pos[r], r))
        selected: list[int] = []
        for r in rows:
            if 0.0 < sal[r] < sal_thr:
                out[r] = "filtered_low_salience"
                continue
            if any(texts[s] == texts[r] for s in selected):
                out[r] = "dropped_exact"
                continue
            if usable[r]:
                pairs = [(s, float(unit[s] @ unit[r])) for s in selected if usable[s]]
                if any(abs(c - thr) < TOL for _, c in pairs):
                    return None
                if any(c >= thr and (refused is None or not refused(r, s)) for s, c in pairs):
                    out[r] = "merged_near"
                    continue
            selected.append(r)
    return out


def check_content_immutable(frame: pl.DataFrame, result: IngestionResult) -> None:
    ids = result.kept.select("segment_id")
    expected = frame.join(ids, on="segment_id", how="semi", maintain_order="left")
    carried = [c for c in frame.columns if c != "salience"]
    got = result.kept.select(carried).to_arrow()
    want = expected.select(carried).to_arrow()
    assert got.schema.equals(want.schema)
    assert got.equals(want)
    if "embedding" in frame.columns:
        a = result.kept.get_column("embedding").explode().to_numpy()
        b = expected.get_column("embedding").explode().to_numpy()
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), "embeddings bit-identical"
    if "salience" in frame.columns:
        boosted = result.kept.get_column("near_duplicate_count").to_numpy() > 0
        new = result.kept.get_column("salience").to_numpy()
        old = expected.get_column("salience").to_numpy()
        assert np.array_equal(new[~boosted], old[~boosted])
        assert (new[boosted] <= 1.0).all()


def _store_digest(root: Path) -> dict[str, str]:
    manifest = open_store(root).manifest
    files = {k: v[manifest["checksum"]] for k, v in manifest["files"].items()}
    version = open_store(root).version
    # Files the manifest does not list (indexes written by hooks) must be identical too.
    for path in sorted(version.rglob("*")):
        rel = str(path.relative_to(version))
        if path.is_file() and rel != "manifest.json" and rel not in files:
            files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


# ----------------------------------------------------------------------------- properties


@FAST
@given(frame=tables(), cfg=configs)
def test_no_concept_loss_boundary_and_immutability(frame: pl.DataFrame,
                                                   cfg: DedupConfig) -> None:
    result = ingest(frame, cfg)
    check_no_concept_loss_and_boundaries(frame, result, cfg)
    check_content_immutable(frame, result)
    if cfg.ingestion.mode is Mode.EXACT:
        check_exact_mode_is_complete(frame, result, cfg)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=tables(), cfg=configs)
def test_deterministic_across_thread_counts(frame: pl.DataFrame, cfg: DedupConfig) -> None:
    one = ingest(frame, cfg, threads=1)
    two = ingest(frame, cfg, threads=2)
    assert one.decisions.equals(two.decisions)
    assert one.kept.equals(two.kept)
    assert one.documents.equals(two.documents)


@STORES
@given(frame=tables(), cfg=configs)
def test_stores_byte_identical_and_bucket_independent(frame: pl.DataFrame, cfg: DedupConfig,
                                                      tmp_path_factory: pytest.TempPathFactory
                                                      ) -> None:
    base = tmp_path_factory.mktemp("det")
    a, b, c = base / "a", base / "b", base / "c"
    write_store(ingest(frame, cfg, threads=1), a, buckets=4)
    write_store(ingest(frame, cfg, threads=2), b, buckets=4)
    write_store(ingest(frame, cfg), c, buckets=1)
    assert _store_digest(a) == _store_digest(b)
    for root in (a, c):
        report = verify_store(root)
        assert report.ok, [str(p) for p in report.problems]
    dec_a = open_store(a).decisions().collect().sort("segment_id")
    dec_c = open_store(c).decisions().collect().sort("segment_id")
    assert dec_a.equals(dec_c), "decisions do not depend on the bucket count"


@pytest.mark.slow
def test_store_identical_across_processes(tmp_path: Path) -> None:
    """A separate interpreter (other hash seed, fresh JIT cache load) writes the same bytes."""
    rng = np.random.default_rng(5)
    n = 300
    table = pl.DataFrame({
        "doc_id": [f"d{i % 7}" for i in range(n)],
        "segment_id": [f"s{i}" for i in range(n)],
        "text": [TEXTS[i % len(TEXTS)] for i in range(n)],
        "segment_type": ["paragraph"] * n,
        "position": pl.Series(range(n), dtype=pl.Int32),
        "language": [["en", "de"][i % 2] for i in range(n)],
    }).with_columns(pl.Series("embedding", rng.normal(size=(n, 8)).astype(np.float32)))
    path = tmp_path / "in.parquet"
    table.write_parquet(path)
    here, there = tmp_path / "here", tmp_path / "there"
    from arrowdedup.pipeline.run import ingest_to_store

    ingest_to_store([path], here, threads=1)
    proc = subprocess.run(
        [sys.executable, "-m", "arrowdedup", "ingest", str(path), "--out", str(there), "-q",
         "--threads", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    assert _store_digest(here) == _store_digest(there)


@st.composite
def ranked(draw: st.DrawFn) -> pl.DataFrame:
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(0, 40))
    dim = draw(st.sampled_from([4, 16]))
    bases = rng.normal(size=(draw(st.integers(1, 5)), dim))
    vectors = bases[rng.integers(0, len(bases), n)] + rng.normal(
        scale=draw(st.sampled_from([0.0, 0.05, 0.2])), size=(n, dim))
    values = [None if rng.random() < 0.1 else [float(x) for x in v] for v in vectors]
    data: dict[str, object] = {
        "segment_id": [f"r{i}" for i in rng.permutation(n)],
        "doc_id": [f"d{i}" for i in rng.integers(0, 5, n)],
        "rrf": sorted(rng.random(n), reverse=True),
        "embedding": pl.Series(values, dtype=pl.List(pl.Float32)),
    }
    if draw(st.booleans()):
        data["language"] = [["en", "fr"][i] for i in rng.integers(0, 2, n)]
    return pl.DataFrame(data)


@FAST
@given(results=ranked(), thr=st.sampled_from([0.8, 0.9, 1.0]))
def test_retrieval_order_preserved(results: pl.DataFrame, thr: float) -> None:
    cfg = DedupConfig(retrieval=RetrievalConfig(similarity_threshold=thr))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = dedupe_ranked(results, cfg)
    ids = results.get_column("segment_id").to_list()
    kept = out.get_column("segment_id").to_list()
    position = {s: i for i, s in enumerate(ids)}
    assert [position[s] for s in kept] == sorted(position[s] for s in kept), "a subsequence"
    assert out.drop("displaced_ids").equals(
        results.join(out.select("segment_id"), on="segment_id", how="semi",
                     maintain_order="left")), "kept rows unchanged"
    unit, usable = _matrix(results)
    lang = results.get_column("language").to_list() if "language" in results.columns \
        else [None] * results.height
    kept_rows = [position[s] for s in kept]
    displaced = dict(zip(kept, out.get_column("displaced_ids").to_list(), strict=True))
    removed = set(ids) - set(kept)
    assert sorted(x for v in displaced.values() for x in v) == sorted(removed)
    for owner, victims in displaced.items():
        for v in victims:
            i, j = position[owner], position[v]
            assert i < j and lang[i] == lang[j] and usable[i] and usable[j]
            assert float(unit[i] @ unit[j]) >= thr - TOL
    for a_i, i in enumerate(kept_rows):
        for j in kept_rows[a_i + 1:]:
            if usable[i] and usable[j] and lang[i] == lang[j]:
                assert float(unit[i] @ unit[j]) < thr + TOL


@pytest.fixture(scope="module")
def search_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from arrowdedup.embed.embedders import get_embedder
    from tests.helpers import M2V_MODEL, need

    embedder = get_embedder(f"model2vec:{need(M2V_MODEL)}")
    rng = np.random.default_rng(33)
    n = 240
    words = ["span", "trace", "metric", "log", "exporter", "sampler", "agent", "collector"]
    # Few distinct sentences, so that many results are cross-document near copies.
    sentences = [" ".join(rng.choice(words, 4)) for _ in range(40)]
    texts = [sentences[int(i)] + ("" if rng.random() < 0.5 else f" note {i % 3}")
             for i in rng.integers(0, 40, n)]
    frame = pl.DataFrame({
        "doc_id": [f"d{i % 24}" for i in range(n)],
        "segment_id": [f"s{i:03d}" for i in range(n)],
        "text": texts,
        "segment_type": ["paragraph"] * n,
        "position": pl.Series([i // 24 for i in range(n)], dtype=pl.Int32),
        "language": [["en", "de"][i % 2] for i in range(n)],
    }).with_columns(pl.Series("embedding", embedder.encode(texts)))
    root = tmp_path_factory.mktemp("search") / "store"
    write_store(ingest(frame), root, embedding_model=embedder.name)
    return root


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 30),
       mode=st.sampled_from(["semantic", "keyword", "hybrid"]),
       thr=st.sampled_from([0.8, 0.9, 0.99]))
def test_search_results_keep_rank_order_and_have_no_duplicates(
    search_store: Path, seed: int, k: int, mode: str, thr: float
) -> None:
    from arrowdedup.retrieval.search import search
    from tests.helpers import M2V_MODEL

    rng = np.random.default_rng(seed)
    query = " ".join(rng.choice(["span", "trace", "metric", "log", "agent"], 2))
    cfg = DedupConfig(retrieval=RetrievalConfig(similarity_threshold=thr,
                                                min_relevance_score=0.0))
    result = search(search_store, query, k=k, mode=mode, config=cfg,
                    embedder=f"model2vec:{M2V_MODEL}")
    res = result.results
    assert res.height <= k and result.removed == result.before - result.after >= 0
    rrf = res.get_column("rrf").to_list()
    ids = res.get_column("segment_id").to_list()
    pairs = list(zip(rrf, ids, strict=True))
    assert pairs == sorted(pairs, key=lambda t: (-t[0], t[1])), "rank order, ties by id"
    store = open_store(search_store)
    frame = store.segments().collect()
    index = {s: i for i, s in enumerate(frame.get_column("segment_id").to_list())}
    unit, usable = _matrix(frame)
    lang = frame.get_column("language").to_list()
    rows = [index[s] for s in ids]
    texts = frame.get_column("text").to_list()
    types = frame.get_column("segment_type").to_list()
    for a, i in enumerate(rows):
        for j in rows[a + 1:]:
            if lang[i] == lang[j] and usable[i] and usable[j] and \
                    float(unit[i] @ unit[j]) >= thr + TOL:
                # Only the fact guard keeps a cosine duplicate: the better-ranked result
                # does not cover the later one's facts.
                assert fact_conflict(texts[j], texts[i], segment_type=types[j],
                                     language=lang[j]) is not None or \
                    fact_conflict(texts[j], texts[i], segment_type=types[i],
                                  language=lang[j]) is not None, "a cross-doc duplicate survived"
