"""Every config value is bounded: out-of-range values are one ConfigError naming the key, the
range and the fix (never a hang, never a traceback); in-range values are accepted and work."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from arrowdedup import ConfigError, DedupConfig, ingest
from arrowdedup.cli import app
from arrowdedup.config import (
    AnalyticsConfig,
    IngestionConfig,
    LshMethod,
    Mode,
    RetrievalConfig,
    RrfConfig,
    SignalWeights,
)
from tests.helpers import segments_frame, unit

runner = CliRunner()
INF = math.inf


@dataclasses.dataclass(frozen=True)
class Bound:
    """The documented range of one key (the oracle: written here, not read from config.py)."""

    kind: str  # "int", "float" or "multiple64"
    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False
    nullable: bool = False


ING = {
    "SimilarityThreshold": Bound("float", 0, 1, lo_open=True),
    "SalienceThreshold": Bound("float", 0, 1, hi_open=True),
    "BoostPerNearDuplicate": Bound("float", 0, 1e6),
    "MaxSalienceBoost": Bound("float", 0, 1, lo_open=True),
    "LogBase": Bound("float", 1, 1e6, lo_open=True),
    "LshMinSegments": Bound("int", 1, 10**12),
    "LshSeed": Bound("int", 0, 2**32 - 1),
    "LshNumPerm": Bound("int", 16, 1024),
    "LshThreshold": Bound("float", 0, 1, lo_open=True),
    "LshShingleSize": Bound("int", 1, 64),
    "LshBands": Bound("int", 1, 512),
    "LshBandBits": Bound("int", 1, 62),
    "LshSignatureBits": Bound("multiple64", 64, 4096),
    "MaxSegmentsPerDocument": Bound("int", 1, 10**12, nullable=True),
    "BlockMinSegments": Bound("int", 1, 10**12),
}
RET = {
    "SimilarityThreshold": Bound("float", 0, 1, lo_open=True),
    "MinRelevanceScore": Bound("float", 0, 1),
    "MinDenseSimilarity": Bound("float", 0, 1),
    "WhereTimeoutMs": Bound("int", 1, 3_600_000),
}
WEIGHTS = {k: Bound("float", 0, 1e6) for k in ("Dense", "Bm25", "Salience", "Freshness")}
ANA = {k: Bound("float", 0, 1) for k in (
    "HighIngestionDedupThreshold", "HighRetrievalDedupThreshold",
    "HighSalienceBoostThreshold", "LowIngestionDedupThreshold")}
# (JSON path to the section, its keys' bounds)
SECTIONS: list[tuple[tuple[str, ...], dict[str, Bound]]] = [
    (("Ingestion",), ING),
    (("Retrieval",), RET),
    (("Rrf",), {"K": Bound("float", 0, 1e6, lo_open=True)}),
    (("Rrf", "Hybrid"), WEIGHTS),
    (("Rrf", "Keyword"), WEIGHTS),
    (("Analytics",), ANA),
]
KEYS = [(path, key, bound) for path, bounds in SECTIONS for key, bound in bounds.items()]


def _doc(path: tuple[str, ...], key: str, value: Any) -> dict[str, Any]:
    inner: dict[str, Any] = {key: value}
    for name in reversed(path):
        inner = {name: inner}
    return {"Deduplication": inner}


def _numeric_fields(cls: type) -> set[str]:
    out = set()
    for f in dataclasses.fields(cls):
        if f.metadata.get("nested") is None and f.type in ("int", "float", "int | None"):
            out.add(f.metadata["key"])
    return out


def test_the_table_covers_every_numeric_key() -> None:
    """A key added to the config without a bound here fails this test."""
    assert _numeric_fields(IngestionConfig) == set(ING)
    assert _numeric_fields(RetrievalConfig) == set(RET)
    assert _numeric_fields(RrfConfig) == {"K"}
    assert _numeric_fields(SignalWeights) == set(WEIGHTS)
    assert _numeric_fields(AnalyticsConfig) == set(ANA)


def _outside(bound: Bound) -> list[Any]:
    """Values the key must refuse: past each end, non-finite, of the wrong type."""
    values: list[Any] = [math.nan, INF, -INF, True, False, "1", [1], {"a": 1}, 10**5000,
                         -(10**5000), 1e308, -1e308]
    if not bound.nullable:
        values.append(None)
    if bound.kind == "float":
        values += [bound.lo if bound.lo_open else bound.lo - max(1e-9, abs(bound.lo) * 1e-9),
                   bound.hi if bound.hi_open else bound.hi * (1 + 1e-9) + 1e-9,
                   bound.hi * 10 + 1, bound.lo - 1]
    else:
        lo, hi = int(bound.lo), int(bound.hi)
        values += [lo - 1, hi + 1, hi * 1000, 1e11, float(lo), float(hi), float(lo) + 0.5]
        if bound.kind == "multiple64":
            values += [lo + 1, hi - 1]
    return values


def _refused(path: tuple[str, ...], key: str, value: Any) -> None:
    t = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        DedupConfig.from_json(_doc(path, key, value))
    message = str(info.value)
    assert f"{'.'.join(path)}.{key} = " in message, message
    assert "\n" not in message and len(message) < 300, message
    assert "must be" in message and "fix" in message, message
    assert time.perf_counter() - t < 5


@pytest.mark.parametrize(("path", "key", "bound"), KEYS,
                         ids=[f"{'.'.join(p)}.{k}" for p, k, _ in KEYS])
def test_every_out_of_range_value_is_one_line_naming_the_key(
        path: tuple[str, ...], key: str, bound: Bound) -> None:
    for value in _outside(bound):
        _refused(path, key, value)


def _inside(bound: Bound) -> st.SearchStrategy[Any]:
    if bound.kind == "float":
        return st.floats(bound.lo, bound.hi, exclude_min=bound.lo_open,
                         exclude_max=bound.hi_open, allow_nan=False)
    if bound.kind == "multiple64":
        return st.integers(1, int(bound.hi) // 64).map(lambda n: n * 64)
    ints = st.integers(int(bound.lo), int(bound.hi))
    return st.one_of(st.none(), ints) if bound.nullable else ints


def _beyond(bound: Bound) -> st.SearchStrategy[Any]:
    """Numbers outside the range (and, for integer keys, any non-integral float)."""
    if bound.kind == "float":
        below = st.floats(max_value=bound.lo, exclude_max=not bound.lo_open, allow_nan=False,
                          allow_infinity=True)
        above = st.floats(min_value=bound.hi, exclude_min=not bound.hi_open, allow_nan=False,
                          allow_infinity=True)
        # -0.0 equals a closed lower bound of 0: it is inside, not beyond.
        return st.one_of(below, above, st.just(math.nan)).filter(
            lambda x: not (x == bound.lo and not bound.lo_open)
            and not (x == bound.hi and not bound.hi_open))
    lo, hi = int(bound.lo), int(bound.hi)
    return st.one_of(st.integers(max_value=lo - 1), st.integers(min_value=hi + 1),
                     st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_every_key(data: st.DataObject) -> None:
    """Any value inside the range is accepted and read back; any value outside is refused
    in one line naming the key."""
    path, key, bound = data.draw(st.sampled_from(KEYS))
    good = data.draw(_inside(bound))
    cfg = DedupConfig.from_json(json.loads(json.dumps(_doc(path, key, good))))
    dumped = cfg.to_dict()["Deduplication"]
    for name in path:
        dumped = dumped[name]
    assert dumped[key] == good
    _refused(path, key, data.draw(_beyond(bound)))


def test_the_message_gives_the_range_and_the_fix() -> None:
    with pytest.raises(ConfigError) as info:
        DedupConfig.from_json({"Ingestion": {"LshBands": 1_000_000}})
    assert str(info.value) == ("Ingestion.LshBands = 1000000 is invalid: it must be an integer "
                               "in [1, 512]; fix that key in the config")
    with pytest.raises(ConfigError, match=r"LshNumPerm = 100000000\.0 .*\[16, 1024\]"):
        DedupConfig.from_json('{"Ingestion": {"LshNumPerm": 1e8}}')
    with pytest.raises(ConfigError, match=r"LshSeed = 4294967296 .*\[0, 4294967295\]"):
        DedupConfig.from_json({"Ingestion": {"LshSeed": 2**32}})
    with pytest.raises(ConfigError, match=r"LshSeed = an integer of 16610 bits"):
        IngestionConfig(lsh_seed=10**5000)  # too long for Python to print


@pytest.mark.parametrize("text", [
    '{"Ingestion": {"LshSeed": ' + "9" * 5000 + "}}",  # past Python's int-parsing limit
    '{"Ingestion": ' * 100_000,  # nested past the JSON decoder's recursion limit
])
def test_hostile_json_is_one_line(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        DedupConfig.from_json(text)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def _frame(n: int = 40):
    rng = np.random.default_rng(3)
    base = [unit(rng.normal(size=16)) for _ in range(n // 2)]
    vectors = base + [unit(v + 0.01 * rng.normal(size=16)) for v in base]
    texts = [f"segment {i % (n // 2)} of the corpus, about topic {i % 7}" for i in range(n)]
    return segments_frame(texts, vectors, doc_id=["d"] * n)


@pytest.mark.parametrize("method", [LshMethod.MINHASH, LshMethod.HYPERPLANE])
@pytest.mark.parametrize("seed", [0, 1, 2**31, 2**32 - 1])
def test_every_seed_works_in_every_method(method: LshMethod, seed: int) -> None:
    """A seed one method accepts works in all of them (MinHash once died at >= 2**32)."""
    cfg = DedupConfig.from_json({"Ingestion": {"Mode": "Lsh", "LshMinSegments": 1,
                                               "LshMethod": method.value, "LshSeed": seed}})
    a = ingest(_frame(), cfg)
    b = ingest(_frame(), cfg)
    assert a.final_count < a.original_count  # the near copies are found
    assert a.decisions.equals(b.decisions)  # and seeded: the same run twice


@pytest.mark.parametrize(("method", "extra"), [
    (LshMethod.MINHASH, {"LshNumPerm": 1024, "LshShingleSize": 64}),
    (LshMethod.HYPERPLANE, {"LshBands": 512, "LshBandBits": 62, "LshSignatureBits": 4096}),
])
def test_the_upper_bounds_run_in_bounded_time(method: LshMethod, extra: dict[str, int]) -> None:
    cfg = DedupConfig.from_json({"Ingestion": {"Mode": Mode.LSH.value, "LshMinSegments": 1,
                                               "LshMethod": method.value, **extra}})
    t = time.perf_counter()
    result = ingest(_frame(), cfg)
    assert result.original_count == 40
    assert time.perf_counter() - t < 120  # seconds on a loaded machine; unbounded hung


@pytest.mark.parametrize(("doc", "needle"), [
    ({"Ingestion": {"LshBands": 1_000_000}}, "Ingestion.LshBands"),
    ({"Ingestion": {"LshBands": 1e11}}, "Ingestion.LshBands"),
    ({"Ingestion": {"LshNumPerm": 100_000_000}}, "Ingestion.LshNumPerm"),
    ({"Ingestion": {"LshSeed": 2**40}}, "Ingestion.LshSeed"),
    ({"Retrieval": {"WhereTimeoutMs": 0}}, "Retrieval.WhereTimeoutMs"),
])
def test_cli_refuses_in_one_line(tmp_path: Path, doc: dict[str, Any], needle: str) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(doc))
    src = tmp_path / "seg.parquet"
    _frame().write_parquet(src)
    t = time.perf_counter()
    out = runner.invoke(app, ["ingest", str(src), "--out", str(tmp_path / "s"),
                              "--config", str(cfg)])
    assert time.perf_counter() - t < 60
    assert out.exit_code == 1
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("error: ")
    assert not (tmp_path / "s").exists()
