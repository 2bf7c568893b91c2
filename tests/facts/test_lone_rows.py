"""Lone rows (facts.lone_rows): rows the fact guard refuses against every other row of their
document, at which a kernel's scan stops after the first refusal. The rule must never mark a
row some other row could cover, and stopping early must change no decision in any kernel."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrowdedup import DedupConfig, IngestionConfig, ingest
from arrowdedup.dedup import kernels
from arrowdedup.facts.guard import conflict_reasons
from arrowdedup.facts.lone import lone_rows
from arrowdedup.facts.tables import (
    CODE,
    DATE,
    EQUAL,
    IDENTIFIER,
    KIND_SHIFT,
    NAME,
    NEGATION,
    NUMBER,
    OFF,
    OPPOSITE,
    SUBSET,
    VERSION,
)
from tests.helpers import segments_frame


def _signatures(data: st.DataObject, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random sorted signatures over a small pool of every fact kind (so that shared and
    unshared facts are both common) and random guard modes, code and unguarded rows included."""
    kinds = [NUMBER, DATE, VERSION, NEGATION, IDENTIFIER, NAME, OPPOSITE, 0]
    pool = sorted({(int(k) << int(KIND_SHIFT)) | data.draw(st.integers(1, 40))
                   for k in kinds for _ in range(2)})
    offsets = [0]
    values: list[int] = []
    for _ in range(n):
        chosen = sorted(set(data.draw(st.lists(st.sampled_from(pool), max_size=4))))
        values += chosen
        offsets.append(len(values))
    modes = data.draw(st.lists(st.sampled_from([SUBSET, SUBSET, EQUAL, CODE, OFF]),
                               min_size=n, max_size=n))
    return (np.array(offsets, np.int64), np.array(values, np.uint64),
            np.array(modes, np.int8))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), sizes=st.lists(st.integers(1, 12), min_size=1, max_size=4))
def test_a_lone_row_is_refused_by_every_other_row_of_its_group(data, sizes) -> None:
    n = sum(sizes)
    f_off, f_val, modes = _signatures(data, n)
    order = np.array(data.draw(st.permutations(list(range(n)))), np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    lone = lone_rows(order, offsets, f_off, f_val, modes, min_rows=0)
    for g in range(len(sizes)):
        rows = order[offsets[g]:offsets[g + 1]]
        for r in rows[lone[rows]]:
            others = rows[rows != r]
            if others.size:
                why = conflict_reasons(f_off, f_val, modes, np.full(others.size, r), others)
                assert (why != 0).all(), (r, others[why == 0])


def test_small_groups_are_not_looked_at() -> None:
    f_off = np.array([0, 1, 2], np.int64)
    f_val = np.array([(int(NUMBER) << int(KIND_SHIFT)) | 1, (int(NUMBER) << int(KIND_SHIFT)) | 2],
                     np.uint64)
    modes = np.zeros(2, np.int8)
    order, offsets = np.arange(2, dtype=np.int64), np.array([0, 2], np.int64)
    assert lone_rows(order, offsets, f_off, f_val, modes, min_rows=0).tolist() == [True, True]
    assert not lone_rows(order, offsets, f_off, f_val, modes).any()  # 2 < LONE_MIN_ROWS


def _alike_table(rows: int, seed: int) -> pl.DataFrame:
    """One document of rows that all embed alike (cosine ~0.99) and differ by their key
    number, plus a few rows that repeat another row's numbers in other words (mergeable)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=32)
    texts, vecs = [], []
    for i in range(rows):
        texts.append(f"Order {1000 + i}: 3 boxes shipped to depot {i % 7}.")
        vecs.append(base + 0.05 * rng.normal(size=32))
    for i in range(0, rows, 50):
        texts.append(f"Order {1000 + i}: 3 boxes shipped to the depot {i % 7}.")
        vecs.append(base + 0.05 * rng.normal(size=32))
    frame = segments_frame(texts, [v / np.linalg.norm(v) for v in vecs],
                           segment_type="paragraph",
                           salience=[float(x) for x in rng.uniform(0.3, 1.0, len(texts))])
    return frame


@pytest.mark.parametrize("kernel", ["scan", "blocked", "lsh"])
def test_stopping_at_lone_rows_changes_no_decision(kernel, monkeypatch) -> None:
    frame = _alike_table(600, seed=4)
    base = DedupConfig()
    ing = base.ingestion
    if kernel == "blocked":
        ing = dataclasses.replace(ing, block_min_segments=100)
    elif kernel == "lsh":
        ing = dataclasses.replace(ing, mode="LSH", lsh_min_segments=100)
    cfg = dataclasses.replace(base, ingestion=IngestionConfig(**dataclasses.asdict(ing)))
    fast = ingest(frame, cfg).decisions
    calls = []
    real = kernels.lone_of

    def never_lone(*args):
        calls.append(int(real(*args).sum()))
        return np.zeros(args[4].shape[0], dtype=bool)

    monkeypatch.setattr(kernels, "lone_of", never_lone)
    slow = ingest(frame, cfg).decisions
    assert calls and calls[0] > 500  # the key numbers made most rows lone
    assert fast.equals(slow)
    actions = fast.get_column("action").cast(pl.String)
    assert (actions == "merged_near").sum() > 0  # the reworded repeats still merge
    assert fast.get_column("guard_refused_id").drop_nulls().len() > 500
