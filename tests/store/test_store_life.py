"""The store's life (issue 14): updates, deletes, versions, rollback, prune, compact."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from arrowdedup import StoreError, ingest, open_store, write_store
from arrowdedup.cli import app
from arrowdedup.config import DedupConfig, Mode
from arrowdedup.pipeline.run import ingest_to_store
from arrowdedup.pipeline.update import compact_store, delete_documents, prune, update_store
from arrowdedup.retrieval.bm25_layers import LayeredBm25, load_store_bm25
from arrowdedup.retrieval.search import search
from arrowdedup.store import store_lock
from arrowdedup.store.integrity import manifest_text
from arrowdedup.store.verify import verify_store
from arrowdedup.store.versions import list_versions, rollback
from tests.helpers.store import corpus_of

runner = CliRunner()


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    keys = ["doc_id", "position"] if "position" in frame.columns else ["doc_id"]
    return frame.sort(keys).select(sorted(frame.columns))


def assert_same_data(a: object, b: object) -> None:
    """Kept segments, decisions and documents equal row for row, sorted by (doc_id, position)."""
    sa, sb = open_store(a), open_store(b)  # type: ignore[arg-type]
    for name in ("segments", "decisions", "documents"):
        x = _sorted(getattr(sa, name)().collect())
        y = _sorted(getattr(sb, name)().collect())
        assert x.equals(y), f"{name} differ"
    va, vb = sa.vectors(), sb.vectors()
    assert va is not None and vb is not None and va.shape == vb.shape
    ia = sa.segments(with_embeddings=False).select("segment_id").collect()["segment_id"]
    ib = sb.segments(with_embeddings=False).select("segment_id").collect()["segment_id"]
    order_a, order_b = np.argsort(ia.to_numpy()), np.argsort(ib.to_numpy())
    np.testing.assert_array_equal(np.asarray(va)[order_a], np.asarray(vb)[order_b])


def _store(tmp_path: Path, state: dict[int, int], name: str = "s",
           config: DedupConfig | None = None) -> Path:
    root = tmp_path / name
    ingest_to_store(corpus_of(state), root, config=config, buckets=4, quiet=True)
    return root


# ----------------------------------------------------------------------------- updates


def test_update_and_delete_equal_a_rebuild(tmp_path: Path) -> None:
    state = {i: 0 for i in range(8)}
    root = _store(tmp_path, state)
    state2 = {**state, 2: 1, 9: 0}  # doc-2 changed, doc-9 added
    result = update_store(root, corpus_of(state2))
    assert dict(result.changes or {}) == {"added": 1, "changed": 1, "removed": 0,
                                          "unchanged": 7}
    gone = delete_documents(root, ["doc-5"])
    assert gone.changes and gone.changes["removed"] == 1
    del state2[5]
    assert_same_data(root, _store(tmp_path, state2, "ref"))
    m = open_store(root).manifest
    assert m["counts"]["documents"] == 8 and len(m["layers"]) == 3
    assert m["life"] == {"added": 0, "changed": 0, "removed": 1}
    # Only the changed and new documents were written: the delta holds their rows alone.
    first = open_store(root).layers()[1]
    ids = pl.read_parquet(first.path / "decisions" / "part-00000.parquet")["doc_id"]
    assert sorted(ids.unique().to_list()) == ["doc-2", "doc-9"]
    assert verify_store(root).ok


def test_noop_update_writes_nothing_and_dry_run_writes_nothing(tmp_path: Path) -> None:
    state = {i: 0 for i in range(5)}
    root = _store(tmp_path, state)
    before = open_store(root).run_id
    same = update_store(root, corpus_of(state))
    assert same.version_id == before and same.changes == {"added": 0, "changed": 0,
                                                          "removed": 0, "unchanged": 5}
    dry = update_store(root, corpus_of({**state, 1: 3}), delete_missing=True, dry_run=True)
    assert dry.dry_run and dry.changes == {"added": 0, "changed": 1, "removed": 0,
                                           "unchanged": 4}
    dry = update_store(root, corpus_of({0: 0}), delete_missing=True, dry_run=True)
    assert dry.changes and dry.changes["removed"] == 4
    assert [v.id for v in list_versions(root)] == [before]


def test_delete_missing_mirrors_the_input(tmp_path: Path) -> None:
    root = _store(tmp_path, {i: 0 for i in range(6)})
    update_store(root, corpus_of({0: 0, 1: 2}), delete_missing=True)
    assert_same_data(root, _store(tmp_path, {0: 0, 1: 2}, "ref"))


def test_unknown_delete_id_names_it_and_deletes_nothing(tmp_path: Path) -> None:
    root = _store(tmp_path, {0: 0, 1: 0})
    before = open_store(root).run_id
    with pytest.raises(StoreError, match=r"no document 'doc-7'.*nothing was deleted"):
        delete_documents(root, ["doc-0", "doc-7"])
    assert open_store(root).run_id == before
    assert open_store(root).documents().collect().height == 2


def test_refusals_name_replace_and_update(tmp_path: Path) -> None:
    root = _store(tmp_path, {0: 0, 1: 0})
    other = dataclasses.replace(DedupConfig(), ingestion=dataclasses.replace(
        DedupConfig().ingestion, similarity_threshold=0.8))
    with pytest.raises(StoreError, match=r"config differs.*--replace"):
        update_store(root, corpus_of({0: 1}), config=other)
    # A store decided under other rules takes no update.
    manifest = root / "current" / "manifest.json"
    saved = manifest.read_text()
    manifest.write_text(manifest_text({**json.loads(saved), "rules": "0"}))
    with pytest.raises(StoreError, match=r"rules version '0'.*--replace"):
        update_store(root, corpus_of({0: 1}))
    manifest.write_text(saved)
    # No silent replacement: another input needs --update or --replace.
    with pytest.raises(StoreError, match=r"other inputs.*--update.*--replace"):
        ingest_to_store(corpus_of({5: 0}), root, quiet=True)
    replaced = ingest_to_store(corpus_of({5: 0}), root, quiet=True, replace=True)
    assert replaced.counts["documents"] == 1
    # Re-ingesting the same input is no replacement.
    ingest_to_store(corpus_of({5: 0}), root, quiet=True)
    # A store written before this change (no fingerprints) reads as before, refuses --update.
    old = tmp_path / "old"
    write_store(ingest(corpus_of({0: 0})), old, buckets=2)
    assert open_store(old).documents().collect().height == 1
    with pytest.raises(StoreError, match=r"older arrowdedup.*--replace"):
        update_store(old, corpus_of({0: 1}))


def test_concurrent_update_is_refused_by_the_lock(tmp_path: Path) -> None:
    root = _store(tmp_path, {0: 0})
    with store_lock(root), pytest.raises(StoreError, match="being written by process"):
        update_store(root, corpus_of({0: 1}))
    with store_lock(root), pytest.raises(StoreError, match="being written by process"):
        delete_documents(root, ["doc-0"])


STEPS = st.lists(st.tuples(st.sampled_from(["add", "change", "delete", "noop"]),
                           st.integers(0, 5)), min_size=1, max_size=4)


@pytest.mark.parametrize("mode", [Mode.EXACT, Mode.LSH])
@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_any_history_equals_a_rebuild(tmp_path_factory: pytest.TempPathFactory, mode: Mode,
                                      steps: list[tuple[str, int]]) -> None:
    cfg = DedupConfig()
    cfg = dataclasses.replace(cfg, ingestion=dataclasses.replace(
        cfg.ingestion, mode=mode, lsh_min_segments=10))
    tmp = tmp_path_factory.mktemp("life")
    state = {0: 0, 1: 0, 2: 0}
    root = _store(tmp, state, config=cfg)
    for n, (op, i) in enumerate(steps):
        if op == "add" and i not in state:
            state[i] = 0
            update_store(root, corpus_of(state))
        elif op == "change" and i in state:
            state[i] += n + 1
            update_store(root, corpus_of(state))
        elif op == "delete" and i in state and len(state) > 1:
            del state[i]
            delete_documents(root, [f"doc-{i}"])
        else:
            update_store(root, corpus_of(state))  # a no-op
        assert_same_data(root, _store(tmp, state, f"ref{n}", cfg))
    compact_store(root)
    assert not open_store(root).is_layered
    assert_same_data(root, _store(tmp, state, "ref-final", cfg))


# ----------------------------------------------------------------------------- retrieval


def test_search_on_deltas_equals_a_store_built_from_scratch(tmp_path: Path) -> None:
    state = {i: 0 for i in range(8)}
    root = _store(tmp_path, state)
    for step in range(3):
        state[step] = step + 1
        state[10 + step] = 0
        update_store(root, corpus_of(state))
    delete_documents(root, ["doc-6"])
    del state[6]
    ref = _store(tmp_path, state, "ref")
    layered, scratch = open_store(root), open_store(ref)
    index = load_store_bm25(layered)
    assert isinstance(index, LayeredBm25)
    ids_a = layered.segments().select("segment_id").collect()["segment_id"].to_list()
    ids_b = scratch.segments().select("segment_id").collect()["segment_id"].to_list()
    texts = scratch.segments().select("text").collect()["text"].to_list()
    for q in [" ".join(t.split()[:3]) for t in texts[:12]] + ["step 2 not"]:
        a = dict(zip(ids_a, index.scores(q).tolist(), strict=True))
        ref_index = load_store_bm25(scratch)
        assert ref_index is not None
        b = dict(zip(ids_b, ref_index.scores(q).tolist(), strict=True))
        assert a == b, q
    rng = np.random.default_rng(3)
    for _ in range(4):
        v = rng.standard_normal(8).astype(np.float32)
        ra = search(root, v, k=5, mode="semantic")
        rb = search(ref, v, k=5, mode="semantic")
        assert ra.results["segment_id"].to_list() == rb.results["segment_id"].to_list()
    # The retrieval log carries over the versions.
    assert len(list((root / "retrieval_log").glob("*.parquet"))) >= 4


def test_search_view_copies_the_live_vectors_of_a_layered_version_once(tmp_path: Path) -> None:
    """The view of a version with deltas scans one matrix of its live rows (what a compacted
    store scans), with the same rows, unit vectors and cosines as the layered reader."""
    from arrowdedup.retrieval.search import store_view

    state = {i: 0 for i in range(8)}
    root = _store(tmp_path, state)
    state[1] = 1
    update_store(root, corpus_of(state))
    delete_documents(root, ["doc-2"])
    layered = open_store(root)
    stored = layered.vectors()
    assert stored is not None and stored.live is not None  # replaced and deleted rows skipped
    view = store_view(layered)
    assert view.vectors is not None
    assert view.vectors.live is None and len(view.vectors.parts) == 1
    assert view.vectors.shape == stored.shape
    rows = np.arange(len(stored))
    np.testing.assert_array_equal(view.vectors.rows(rows), stored.rows(rows))
    np.testing.assert_array_equal(view.vectors.unit(rows), stored.unit(rows))
    q = np.random.default_rng(5).standard_normal((2, stored.dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    np.testing.assert_allclose(view.vectors.scores(q), stored.scores(q), atol=1e-6)
    assert stored.contiguous() is not stored and view.vectors.contiguous() is view.vectors


def test_changes_view_lists_the_history(tmp_path: Path) -> None:
    from arrowdedup.metrics.views import connect

    root = _store(tmp_path, {0: 0, 1: 0})
    update_store(root, corpus_of({0: 1, 1: 0, 2: 0}))
    delete_documents(root, ["doc-1"])
    con = connect(root)
    rows = con.sql("SELECT version, doc_id, change FROM changes ORDER BY seq, doc_id") \
        .fetchall()
    versions = [v.id for v in list_versions(root)]
    assert [r[1:] for r in rows] == [("doc-0", "added"), ("doc-1", "added"),
                                     ("doc-0", "changed"), ("doc-2", "added"),
                                     ("doc-1", "removed")]
    assert [r[0] for r in rows] == [versions[0]] * 2 + [versions[1]] * 2 + [versions[2]]
    # The views read the current version, deltas merged.
    n = con.sql("SELECT count(DISTINCT doc_id) FROM segments").fetchall()[0]
    assert n == (2,)
    assert con.sql("SELECT count(*) FROM documents").fetchall() == [(2,)]


# ----------------------------------------------------------------------------- versions


def test_versions_rollback_prune_and_pinned_readers(tmp_path: Path) -> None:
    state = {0: 0, 1: 0}
    root = _store(tmp_path, state)
    for step in range(6):
        state[0] = step + 1
        update_store(root, corpus_of(state), keep_versions=5)
    infos = list_versions(root)
    assert len(infos) == 5 and infos[-1].current and infos[-1].parent == infos[-2].id
    # Readers keep reading the version they opened whole, through rollback and prune.
    old = open_store(root, version=infos[2].id)
    newest = open_store(root)
    rolled = rollback(root, infos[1].id)
    assert rolled.id == infos[1].id and open_store(root).run_id == infos[1].id
    assert newest.run_id == infos[-1].id
    assert len(list_versions(root)) == 5, "rollback writes no version"
    pruned = prune(root, keep=1, fold=False)
    assert pruned.held == [infos[2].id] and pruned.removed == [infos[0].id, infos[3].id]
    assert pruned.folded is None
    for reader in (old, newest):
        counts = reader.manifest["counts"]
        assert reader.segments().collect().height == counts["segments_kept"]
        assert reader.decisions().collect().height == counts["segments_in"]
        vectors = reader.vectors()
        assert vectors is not None and len(vectors) == counts["segments_kept"]
    assert verify_store(root, version=infos[2].id).ok
    old.close()
    pruned = prune(root, keep=1, fold=False)
    assert pruned.removed == [infos[2].id] and not pruned.held
    assert [v.id for v in list_versions(root)] == [infos[1].id, infos[-1].id]
    assert verify_store(root).ok


def _disk_bytes(root: Path) -> int:
    """Bytes on disk, a hard-linked file counted once."""
    inodes = {p.stat().st_ino: p.stat().st_size for p in root.rglob("*") if p.is_file()}
    return sum(inodes.values())


def _history(root: Path) -> list[tuple[object, ...]]:
    from arrowdedup.metrics.views import connect

    return connect(root).sql("SELECT seq, version, doc_id, change FROM changes "
                             "ORDER BY seq, doc_id").fetchall()


def _changed_one_by_one(tmp_path: Path, documents: int, updates: int
                        ) -> tuple[Path, dict[int, int]]:
    """A store of ``documents`` documents, then ``updates`` updates that each change one."""
    state = {i: 0 for i in range(documents)}
    root = _store(tmp_path, state)
    for step in range(updates):
        state[step] = 1
        update_store(root, corpus_of(state))
    return root, state


def test_prune_folds_the_deltas_and_keeps_the_history(tmp_path: Path) -> None:
    root, state = _changed_one_by_one(tmp_path, 6, 3)
    delete_documents(root, ["doc-5"])
    before = open_store(root)
    data = {n: _sorted(getattr(before, n)().collect())
            for n in ("segments", "decisions", "documents")}
    history = _history(root)
    assert before.is_layered and len(before.layers()) == 5
    assert open_store(root).change_history().rows() == [(s, v, d, c) for s, v, d, c in history]
    disk = _disk_bytes(root)
    ids = [v.id for v in list_versions(root)]
    before.close()

    dry = prune(root, keep=1, dry_run=True)
    assert dry.dry_run and dry.folded is None and dry.folded_deltas == 4
    assert dry.removed == ids, "the fold's version becomes current: every other one goes"
    assert [v.id for v in list_versions(root)] == ids and _disk_bytes(root) == disk

    done = prune(root, keep=1)
    assert done.folded_deltas == 4 and done.folded is not None and done.removed == ids
    assert [v.id for v in list_versions(root)] == [done.folded]
    after = open_store(root)
    assert not after.is_layered and after.run_id == done.folded
    for name, frame in data.items():
        assert _sorted(getattr(after, name)().collect()).equals(frame), name
    assert _history(root) == history, "folding keeps the change history"
    assert _disk_bytes(root) < disk
    assert verify_store(root).ok
    after.close()

    # Updates after the fold continue the history; a second fold carries it again.
    state[4] = 1
    update_store(root, corpus_of(state))
    grown = _history(root)
    assert grown[:len(history)] == history
    assert {r[0] for r in grown[len(history):]} == {history[-1][0] + 1}  # type: ignore[operator]
    assert prune(root, keep=2).folded_deltas == 1
    assert len(list_versions(root)) == 2
    assert _history(root) == grown
    assert prune(root, keep=2).folded is None, "nothing left to fold"


def test_disk_use_shares_unchanged_files(tmp_path: Path) -> None:
    root, _ = _changed_one_by_one(tmp_path, 10, 4)
    once = sum(p.stat().st_size for p in (root / "current").resolve().rglob("*") if p.is_file())
    assert _disk_bytes(root) < 2.0 * once  # hard links: 5 versions, far less than 5 copies


# ----------------------------------------------------------------------------- CLI


def _write(frame: pl.DataFrame, path: Path) -> Path:
    frame.write_parquet(path)
    return path


def test_cli_life(tmp_path: Path) -> None:
    src = _write(corpus_of({0: 0, 1: 0, 2: 0}), tmp_path / "a.parquet")
    store = str(tmp_path / "s")
    assert runner.invoke(app, ["ingest", str(src), "--out", store, "-q"]).exit_code == 0
    other = _write(corpus_of({0: 1, 1: 0, 3: 0}), tmp_path / "b.parquet")
    refused = runner.invoke(app, ["ingest", str(other), "--out", store, "-q"])
    assert refused.exit_code == 1 and "--update" in refused.output and "--replace" in refused.output
    dry = runner.invoke(app, ["ingest", str(other), "--out", store, "--update", "--dry-run",
                              "--delete-missing"])
    assert dry.exit_code == 0, dry.output
    assert "would change: 1 added, 1 changed, 1 removed, 1 unchanged" in dry.output
    done = runner.invoke(app, ["ingest", str(other), "--out", store, "--update", "--json"])
    assert done.exit_code == 0, done.output
    ids = tmp_path / "ids.txt"
    ids.write_text("doc-1\n\ndoc-3\n")
    gone = runner.invoke(app, ["delete", store, "--from-file", str(ids)])
    assert gone.exit_code == 0 and "2 removed" in gone.output
    bad = runner.invoke(app, ["delete", store, "doc-42"])
    assert bad.exit_code == 1 and "doc-42" in bad.output
    listed = runner.invoke(app, ["versions", store, "--json"])
    rows = json.loads(listed.stdout)
    assert len(rows) == 3 and rows[-1]["current"] and rows[-1]["removed"] == 2
    assert {"id", "created_at", "parent", "current", "documents", "segments", "added",
            "changed", "removed"} <= set(rows[0])
    assert runner.invoke(app, ["rollback", store]).exit_code == 0
    rows = json.loads(runner.invoke(app, ["versions", store, "--json"]).stdout)
    assert rows[1]["current"] and len(rows) == 3
    assert runner.invoke(app, ["rollback", store, rows[2]["id"]]).exit_code == 0
    compacted = runner.invoke(app, ["compact", store])
    assert compacted.exit_code == 0 and "compacted from" in compacted.output
    dry = runner.invoke(app, ["prune", store, "--keep", "1", "--dry-run"])
    assert dry.exit_code == 0 and "would remove 3 version(s)" in dry.output
    assert runner.invoke(app, ["prune", store, "--keep", "1"]).exit_code == 0
    assert len(json.loads(runner.invoke(app, ["versions", store, "--json"]).stdout)) == 1
    assert runner.invoke(app, ["verify", store]).exit_code == 0


def test_cli_prune_folds(tmp_path: Path) -> None:
    root = _store(tmp_path, {0: 0, 1: 0})
    update_store(root, corpus_of({0: 1, 1: 0}))
    dry = runner.invoke(app, ["prune", str(root), "--keep", "1", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would fold 1 delta(s)" in dry.output and "would remove 2 version(s)" in dry.output
    kept = runner.invoke(app, ["prune", str(root), "--keep", "2", "--no-fold"])
    assert kept.exit_code == 0 and "fold" not in kept.output and "removed 0" in kept.output
    done = runner.invoke(app, ["prune", str(root), "--keep", "1"])
    assert done.exit_code == 0 and "folded 1 delta(s) into" in done.output
    assert not open_store(root).is_layered and len(list_versions(root)) == 1


# ----------------------------------------------------------------------------- crashes


POINTS = ("locked", "files-written", "manifest-written", "renamed", "switched")


def test_sigkill_at_each_write_point_of_an_update(tmp_path: Path) -> None:
    """An update killed at each write point leaves the previous version current and whole
    (or, killed after the switch, the new one)."""
    from tests.helpers.store import cli_process, kill, wait_for_pause

    first = _write(corpus_of({0: 0, 1: 0, 2: 0}), tmp_path / "a.parquet")
    second = _write(corpus_of({0: 1, 1: 0, 2: 0, 3: 0}), tmp_path / "b.parquet")
    roots = {p: tmp_path / p for p in POINTS}
    before = {}
    for root in roots.values():
        ingest_to_store([first], root, quiet=True)
        before[root] = open_store(root).run_id
    procs = {point: cli_process(["ingest", str(second), "--out", str(root), "--update", "-q"],
                         pause=point) for point, root in roots.items()}
    try:
        for point, proc in procs.items():
            wait_for_pause(proc, point)
            kill(proc)
    finally:
        for proc in procs.values():
            proc.kill()
    for point, root in roots.items():
        current = open_store(root)
        if point == "switched":
            assert current.run_id != before[root]
            assert_same_data(root, _store(tmp_path, {0: 1, 1: 0, 2: 0, 3: 0}, f"ref-{point}"))
        else:
            assert current.run_id == before[root], point
            assert_same_data(root, _store(tmp_path, {0: 0, 1: 0, 2: 0}, f"ref-{point}"))
        assert verify_store(root).ok
        # The next update recovers the dead writer's lock and cleans up.
        update_store(root, [second])
        assert not list((root / "versions").glob(".tmp-*"))


# ----------------------------------------------------------------------------- folders


def test_folder_update_re_extracts_only_changed_files(tmp_path: Path) -> None:
    from tests.helpers import M2V_MODEL, need

    need(M2V_MODEL)
    embedder = f"model2vec:{M2V_MODEL}"
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(4):
        (folder / f"page{i}.md").write_text(
            f"# Page {i}\n\nStep {i}: run the installer with --flag-{i}.\n\n"
            f"Page {i} explains setting {i} in detail, with a second sentence.\n",
            encoding="utf-8")
    root = tmp_path / "s"
    ingest_to_store([folder], root, embedder=embedder, quiet=True)
    (folder / "page1.md").write_text("# Page 1\n\nA new text for page one, version 2.\n",
                                     encoding="utf-8")
    (folder / "page4.md").write_text("# Page 4\n\nA page added later.\n", encoding="utf-8")
    (folder / "page3.md").unlink()
    result = update_store(root, [folder], delete_missing=True)
    assert dict(result.changes or {}) == {"added": 1, "changed": 1, "removed": 1,
                                          "unchanged": 2}
    assert result.store.manifest["extract"]["files"] == 2  # page1 and page4 only
    ref = tmp_path / "ref"
    ingest_to_store([folder], ref, embedder=embedder, quiet=True)
    assert_same_data(root, ref)
    again = update_store(root, [folder], delete_missing=True)
    assert again.version_id == result.version_id and again.changes and \
        again.changes["unchanged"] == 4


def test_top_n_breaks_boundary_ties_by_key_not_row_order() -> None:
    from arrowdedup.retrieval.dense import top_n

    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.1, 0.5], dtype=np.float32)
    key = np.array([4, 0, 2, 5, 1, 3])
    for positive_only in (False, True):
        got = top_n(scores, 3, positive_only=positive_only, tie_key=key)
        assert sorted(got.tolist()) == [1, 2, 5]  # 0.9, then the two ties with the least keys
        flipped = top_n(scores[::-1].copy(), 3, positive_only=positive_only,
                        tie_key=key[::-1].copy())
        assert sorted((5 - flipped).tolist()) == [1, 2, 5]


def test_update_of_a_few_files_equals_a_full_ingest(tmp_path: Path) -> None:
    """An update that re-extracts a few files reads back as a full ingest of the folder does:
    a file whose rows lack a column other documents have (``language``, set by front matter
    elsewhere) and search works on it (the layers were concatenated by position: 'schema
    lengths differ'), and near merges have the full ingest's similarity bits."""
    import shutil

    from tests.helpers import M2V_MODEL, ROOT, need

    embedder = f"model2vec:{need(M2V_MODEL)}"
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "data" / "sample", docs)
    ingest_to_store(docs, tmp_path / "s", embedder=embedder, quiet=True)
    with (docs / "README.md").open("a", encoding="utf-8") as f:
        f.write("\n\nA closing paragraph about exporters and the batching of spans.\n")
    # Pages with near merges: the update decides them on its own few rows, a full ingest on
    # the corpus's; the similarities must be the same bits (the kernel is chosen for both as
    # for the whole corpus, whose size is past SMALL_INPUT_ROWS).
    for page in ("invoices", "meters", "pagination", "testing"):
        with (docs / "docs" / f"{page}.md").open("a", encoding="utf-8") as f:
            f.write("\n\nOne more closing line for this page.\n")
    from arrowdedup.pipeline.update import update_store

    update_store(tmp_path / "s", docs, quiet=True)
    ingest_to_store(docs, tmp_path / "full", embedder=embedder, quiet=True)
    updated, full = open_store(tmp_path / "s"), open_store(tmp_path / "full")
    assert updated.is_layered
    a = updated.segments().collect().sort("segment_id")
    b = full.segments().collect().sort("segment_id").select(a.columns)
    assert "language" in a.columns and a.equals(b)
    da = updated.decisions().collect().sort("segment_id")
    db = full.decisions().collect().sort("segment_id").select(da.columns)
    assert da.get_column("similarity").is_not_null().sum() >= 4 and da.equals(db)
    hits = search(tmp_path / "s", "batching of spans", k=3).results
    assert hits.height > 0
