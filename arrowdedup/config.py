"""Frozen, validated configuration in the JSON shape of SPEC section 7.

Python attributes are snake_case; the JSON keys are the spec's PascalCase names. Every section
validates itself on construction, so an invalid config cannot exist.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from .errors import ConfigError


class DecayMode(str, Enum):
    LINEAR = "Linear"
    LOGARITHMIC = "Logarithmic"


class Mode(str, Enum):
    EXACT = "Exact"
    LSH = "Lsh"


class LshMethod(str, Enum):
    MINHASH = "MinHash"
    HYPERPLANE = "Hyperplane"


Check = Callable[[Any], bool]


def _key(name: str, check: Check, rule: str, nested: type | None = None) -> Any:
    """Field metadata: the JSON key, the validity check, the rule shown when it fails, and the
    section class of a nested object."""
    return {"key": name, "check": check, "rule": rule, "nested": nested}


def _num(x: Any) -> bool:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:  # an integer beyond any float: out of every range
        return False


def _open01(x: Any) -> bool:  # (0, 1]
    return _num(x) and 0.0 < x <= 1.0


def _closed01(x: Any) -> bool:  # [0, 1]
    return _num(x) and 0.0 <= x <= 1.0


def _half01(x: Any) -> bool:  # [0, 1)
    return _num(x) and 0.0 <= x < 1.0


def _logbase(x: Any) -> bool:
    # Above 1 by the spec; the upper bound keeps a hostile value from zeroing every boost.
    return _num(x) and 1.0 < x <= MAX_FACTOR


def _bool(x: Any) -> bool:
    return isinstance(x, bool)


# Upper bounds. Every number has one, so no value can make a run hang, allocate without end
# or overflow to inf / NaN; each is far above any useful setting.
# A weight, boost or base: 1e6 times any score, count or log stays far below float overflow.
MAX_FACTOR = 1e6
# A count of segments (a group size, a per-document cap): beyond any store.
MAX_SEGMENTS = 10**12
# LshSeed: datasketch's MinHash seeds a 32-bit generator, so [0, 2**32 - 1] is the range
# every LSH method accepts (NumPy's default_rng, for Hyperplane, takes it too).
MAX_SEED = 2**32 - 1
# LshNumPerm: datasketch's MinHashLSH searches its band layout over every split of the
# permutations (~1.2 s at 1024, ~3 s at 2048 on one core) and every row keeps 8 bytes a
# permutation, so 1e8 hangs; 1024 is 8 KB a row.
MAX_NUM_PERM = 1024
# LshBands (Hyperplane): building the buckets holds 24 bytes a row and band, 12 KB a row at
# 512; a million bands hangs in the per-band loops while memory grows.
MAX_BANDS = 512
# LshShingleSize: each text costs words × size to shingle.
MAX_SHINGLE = 64
# Retrieval.WhereTimeoutMs: an hour.
MAX_TIMEOUT_MS = 3_600_000


def _int_in(lo: int, hi: int) -> Check:
    return lambda x: isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi


def _optional_int_in(lo: int, hi: int) -> Check:
    return lambda x: x is None or _int_in(lo, hi)(x)


def _num_in(lo: float, hi: float) -> Check:  # [lo, hi]
    return lambda x: _num(x) and lo <= x <= hi


def _positive_up_to(hi: float) -> Check:  # (0, hi]
    return lambda x: _num(x) and 0.0 < x <= hi


def _enum(kind: type[Enum]) -> Check:
    # isinstance(str) first: a JSON list or object is unhashable and must refuse, not raise.
    # Case-insensitive, like the CLI ("lsh", "LSH" and "Lsh" are one mode).
    return lambda x: isinstance(x, kind) or (
        isinstance(x, str) and enum_member(kind, x) is not None
    )


def enum_member(kind: type[Enum], value: str) -> Enum | None:
    """The member of ``kind`` whose value equals ``value`` ignoring case, or None."""
    folded = value.strip().casefold()
    for member in kind:
        if str(member.value).casefold() == folded:
            return member
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class IngestionConfig:
    enabled: bool = dataclasses.field(
        default=True, metadata=_key("Enabled", _bool, "true or false")
    )
    similarity_threshold: float = dataclasses.field(
        default=0.90, metadata=_key("SimilarityThreshold", _open01, "a number in (0, 1]")
    )
    salience_threshold: float = dataclasses.field(
        default=0.05, metadata=_key("SalienceThreshold", _half01, "a number in [0, 1)")
    )
    enable_salience_boost: bool = dataclasses.field(
        default=True, metadata=_key("EnableSalienceBoost", _bool, "true or false")
    )
    boost_per_near_duplicate: float = dataclasses.field(
        default=0.15, metadata=_key("BoostPerNearDuplicate", _num_in(0.0, MAX_FACTOR),
                                       "a number in [0, 1e6]")
    )
    max_salience_boost: float = dataclasses.field(
        default=1.0, metadata=_key("MaxSalienceBoost", _open01, "a number in (0, 1]")
    )
    boost_decay_mode: DecayMode = dataclasses.field(
        default=DecayMode.LOGARITHMIC,
        metadata=_key("BoostDecayMode", _enum(DecayMode), "'Linear' or 'Logarithmic'"),
    )
    log_base: float = dataclasses.field(
        default=2.0, metadata=_key("LogBase", _logbase, "a number > 1, at most 1e6")
    )
    mode: Mode = dataclasses.field(
        default=Mode.EXACT, metadata=_key("Mode", _enum(Mode), "'Exact' or 'Lsh'")
    )
    lsh_min_segments: int = dataclasses.field(
        default=10_000, metadata=_key("LshMinSegments", _int_in(1, MAX_SEGMENTS),
                                "an integer in [1, 1000000000000]")
    )
    lsh_method: LshMethod = dataclasses.field(
        default=LshMethod.HYPERPLANE,
        metadata=_key("LshMethod", _enum(LshMethod), "'MinHash' or 'Hyperplane'"),
    )
    lsh_seed: int = dataclasses.field(
        default=1, metadata=_key("LshSeed", _int_in(0, MAX_SEED),
                                   "an integer in [0, 4294967295] (2**32 - 1)")
    )
    lsh_num_perm: int = dataclasses.field(
        default=128, metadata=_key("LshNumPerm", _int_in(16, MAX_NUM_PERM),
                                     "an integer in [16, 1024]")
    )
    lsh_threshold: float = dataclasses.field(
        default=0.5, metadata=_key("LshThreshold", _open01, "a number in (0, 1]")
    )
    lsh_shingle_size: int = dataclasses.field(
        default=3, metadata=_key("LshShingleSize", _int_in(1, MAX_SHINGLE), "an integer in [1, 64]")
    )
    lsh_bands: int = dataclasses.field(
        default=64, metadata=_key("LshBands", _int_in(1, MAX_BANDS), "an integer in [1, 512]")
    )
    lsh_band_bits: int = dataclasses.field(
        default=16, metadata=_key("LshBandBits", _int_in(1, 62), "an integer in [1, 62]")
    )
    # Hyperplane: each row gets one SimHash signature of this many bits (at least 64, so any
    # LshBandBits fits); bands sample their bits from it, and bucket-mates far apart in
    # Hamming distance are dropped before the cosine.
    lsh_signature_bits: int = dataclasses.field(
        default=256,
        metadata=_key("LshSignatureBits",
                      lambda x: _int_in(64, 4096)(x) and x % 64 == 0,
                      "a multiple of 64 in [64, 4096]"),
    )
    max_segments_per_document: int | None = dataclasses.field(
        default=None,
        metadata=_key("MaxSegmentsPerDocument", _optional_int_in(1, MAX_SEGMENTS),
                      "null (no limit) or an integer in [1, 1000000000000]"),
    )
    # Measured crossover of the Numba scan and the BLAS-blocked kernel on the 2-core machines
    # (384-d, 50 % near copies): the blocked kernel is faster from ~3,000 segments on
    # (`python -m benchmarks.scale --parts crossover`).
    block_min_segments: int = dataclasses.field(
        default=3_000,
        metadata=_key("BlockMinSegments", _int_in(1, MAX_SEGMENTS),
                      "an integer in [1, 1000000000000]"),
    )
    # SPEC §2 step 4: merge only into a representative whose facts cover the segment's;
    # false gives the reference's cosine-only decisions.
    fact_guard: bool = dataclasses.field(
        default=True, metadata=_key("FactGuard", _bool, "true or false")
    )

    def __post_init__(self) -> None:
        _validate(self, "Ingestion")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RetrievalConfig:
    enabled: bool = dataclasses.field(
        default=True, metadata=_key("Enabled", _bool, "true or false")
    )
    similarity_threshold: float = dataclasses.field(
        default=0.90, metadata=_key("SimilarityThreshold", _open01, "a number in (0, 1]")
    )
    min_relevance_score: float = dataclasses.field(
        default=0.25, metadata=_key("MinRelevanceScore", _closed01, "a number in [0, 1]")
    )
    # SPEC §4 step 5: a result is a duplicate only if the selected one covers its facts.
    fact_guard: bool = dataclasses.field(
        default=True, metadata=_key("FactGuard", _bool, "true or false")
    )
    # A floor on the dense cosine of a result to the query (0 = off): RRF scores only ranks,
    # so without it an unrelated segment can top a store with few candidates.
    min_dense_similarity: float = dataclasses.field(
        default=0.0, metadata=_key("MinDenseSimilarity", _closed01, "a number in [0, 1]")
    )
    # How long a search's `where` predicate may run before it is stopped and refused: a text
    # pattern over a million segments takes ~2 s on a loaded 2-core machine, a runaway
    # subquery never ends.
    where_timeout_ms: int = dataclasses.field(
        default=10_000,
        metadata=_key("WhereTimeoutMs", _int_in(1, MAX_TIMEOUT_MS),
                      "an integer in [1, 3600000] (milliseconds)"),
    )

    def __post_init__(self) -> None:
        _validate(self, "Retrieval")


_WEIGHTS = "Rrf weights"


def _weight(name: str) -> Any:
    return _key(name, _num_in(0.0, MAX_FACTOR), "a number in [0, 1e6]")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SignalWeights:
    dense: float = dataclasses.field(default=1.0, metadata=_weight("Dense"))
    bm25: float = dataclasses.field(default=1.0, metadata=_weight("Bm25"))
    salience: float = dataclasses.field(default=0.3, metadata=_weight("Salience"))
    freshness: float = dataclasses.field(default=0.2, metadata=_weight("Freshness"))

    def __post_init__(self) -> None:
        _validate(self, _WEIGHTS)
        if self.dense + self.bm25 + self.salience + self.freshness <= 0:
            raise ConfigError(f"{_WEIGHTS}: at least one weight must be > 0; fix the Rrf "
                              "section")

    def as_dict(self) -> dict[str, float]:
        return {"dense": float(self.dense), "bm25": float(self.bm25),
                "salience": float(self.salience), "freshness": float(self.freshness)}


def _weights(x: Any) -> bool:
    return isinstance(x, SignalWeights)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RrfConfig:
    k: float = dataclasses.field(default=60.0, metadata=_key("K", _positive_up_to(MAX_FACTOR),
                                                              "a number in (0, 1e6]"))
    hybrid: SignalWeights = dataclasses.field(
        default_factory=SignalWeights,
        metadata=_key("Hybrid", _weights, "an object of weights", SignalWeights),
    )
    keyword: SignalWeights = dataclasses.field(
        default_factory=lambda: SignalWeights(dense=0.3, bm25=1.5, salience=0.2, freshness=0.1),
        metadata=_key("Keyword", _weights, "an object of weights", SignalWeights),
    )

    def __post_init__(self) -> None:
        _validate(self, "Rrf")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AnalyticsConfig:
    enable_logging: bool = dataclasses.field(
        default=True, metadata=_key("EnableLogging", _bool, "true or false")
    )
    enable_metrics: bool = dataclasses.field(
        default=True, metadata=_key("EnableMetrics", _bool, "true or false")
    )
    high_ingestion_dedup_threshold: float = dataclasses.field(
        default=0.50, metadata=_key("HighIngestionDedupThreshold", _closed01, "a number in [0, 1]")
    )
    high_retrieval_dedup_threshold: float = dataclasses.field(
        default=0.30, metadata=_key("HighRetrievalDedupThreshold", _closed01, "a number in [0, 1]")
    )
    high_salience_boost_threshold: float = dataclasses.field(
        default=0.60, metadata=_key("HighSalienceBoostThreshold", _closed01, "a number in [0, 1]")
    )
    low_ingestion_dedup_threshold: float = dataclasses.field(
        default=0.05, metadata=_key("LowIngestionDedupThreshold", _closed01, "a number in [0, 1]")
    )

    def __post_init__(self) -> None:
        _validate(self, "Analytics")


_Section = TypeVar("_Section")


def shown(value: Any, limit: int = 40) -> str:
    """``value`` for a one-line message: its repr cut to ``limit`` characters (an integer
    too long for Python to print is described by its size)."""
    try:
        text = repr(value)
    except ValueError:  # beyond sys.get_int_max_str_digits()
        return f"an integer of {int(value).bit_length()} bits"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _validate(obj: object, where: str) -> None:
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        meta = f.metadata
        if not meta["check"](value):
            raise ConfigError(
                f"{where}.{meta['key']} = {shown(value)} is invalid: it must be "
                f"{meta['rule']}; fix that key in the config"
            )
        if isinstance(f.default, Enum) and not isinstance(value, Enum):
            # Accept the JSON string and store the enum, so comparisons are by member.
            object.__setattr__(obj, f.name, enum_member(type(f.default), value))


def _parse_section(cls: type[_Section], raw: Any, where: str) -> _Section:
    if isinstance(raw, cls):
        return raw
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{where} must be a JSON object, got {type(raw).__name__}; fix the config"
        )
    fields = {f.metadata["key"]: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in fields:
            raise ConfigError(
                f"unknown key {where}.{key}; known keys: {', '.join(sorted(fields))}"
            )
        f = fields[key]
        if f.metadata["nested"] is not None:
            value = _parse_section(f.metadata["nested"], value, f"{where}.{key}")
        kwargs[f.name] = value
    try:
        return cls(**kwargs)
    except ConfigError as err:
        # A weights object validates itself as "Rrf weights"; here its key's path is known.
        if cls is SignalWeights and str(err).startswith(_WEIGHTS):
            raise ConfigError(where + str(err)[len(_WEIGHTS):]) from err
        raise


_SECTIONS: dict[str, tuple[str, type]] = {
    "Ingestion": ("ingestion", IngestionConfig),
    "Retrieval": ("retrieval", RetrievalConfig),
    "Rrf": ("rrf", RrfConfig),
    "Analytics": ("analytics", AnalyticsConfig),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class DedupConfig:
    """The whole configuration: one frozen section per phase.

    ``DedupConfig()`` is the spec's defaults; ``DedupConfig.from_json`` reads the spec's JSON.
    """

    ingestion: IngestionConfig = dataclasses.field(default_factory=IngestionConfig)
    retrieval: RetrievalConfig = dataclasses.field(default_factory=RetrievalConfig)
    rrf: RrfConfig = dataclasses.field(default_factory=RrfConfig)
    analytics: AnalyticsConfig = dataclasses.field(default_factory=AnalyticsConfig)

    def __post_init__(self) -> None:
        for key, (attr, cls) in _SECTIONS.items():
            if not isinstance(getattr(self, attr), cls):
                raise ConfigError(f"DedupConfig.{attr} must be a {cls.__name__} ({key} section)")

    @classmethod
    def from_json(cls, source: str | Path | Mapping[str, Any]) -> DedupConfig:
        """Read a config from a JSON file path, a JSON string, or a mapping.

        Accepts ``{"DocSummarizer": {"Deduplication": {...}}}``, ``{"Deduplication": {...}}``
        or the inner object. Missing keys take the defaults.
        """
        raw: Any
        if isinstance(source, Mapping):
            raw = source
        else:
            text_source = str(source)
            if isinstance(source, str) and text_source.lstrip().startswith("{"):
                text = text_source
                origin = "the JSON string"
            else:
                path = Path(source)
                try:
                    # utf-8-sig: a file saved with a byte-order mark (Windows editors) is
                    # the same JSON.
                    text = path.read_text(encoding="utf-8-sig")
                except (OSError, UnicodeDecodeError, ValueError) as err:
                    reason = err.strerror if isinstance(err, OSError) and err.strerror else err
                    raise ConfigError(
                        f"cannot read config file {shown(str(path), 200)}: {reason}; give a "
                        "readable UTF-8 JSON file"
                    ) from err
                origin = str(path)
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as err:
                raise ConfigError(
                    f"config {origin} is not valid JSON ({err.msg} at line {err.lineno}, "
                    f"column {err.colno}); fix the syntax"
                ) from err
            except (ValueError, RecursionError) as err:
                # An integer of thousands of digits, or arrays nested thousands deep: no
                # config key takes either.
                raise ConfigError(
                    f"config {origin} cannot be read as a config ({type(err).__name__}: "
                    f"{str(err).splitlines()[0] if str(err) else 'nested too deep'}); "
                    "fix the JSON"
                ) from err
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: Any) -> DedupConfig:
        if not isinstance(raw, Mapping):
            raise ConfigError(
                f"config must be a JSON object, got {type(raw).__name__}; "
                'write {"Deduplication": {...}}'
            )
        where = ""
        if "DocSummarizer" in raw:
            if set(raw) != {"DocSummarizer"}:
                extra = sorted(set(raw) - {"DocSummarizer"})
                raise ConfigError(f"unknown top-level key(s) {extra} beside DocSummarizer")
            raw = raw["DocSummarizer"]
            where = "DocSummarizer."
            if not isinstance(raw, Mapping):
                raise ConfigError("DocSummarizer must be a JSON object; fix the config")
            if set(raw) != {"Deduplication"}:
                extra = sorted(set(raw) - {"Deduplication"})
                raise ConfigError(
                    f"unknown key(s) {extra} in DocSummarizer; only Deduplication is read"
                )
        if "Deduplication" in raw:
            if set(raw) != {"Deduplication"}:
                extra = sorted(set(raw) - {"Deduplication"})
                raise ConfigError(f"unknown key(s) {extra} beside {where}Deduplication")
            raw = raw["Deduplication"]
            where += "Deduplication."
            if not isinstance(raw, Mapping):
                raise ConfigError(f"{where.rstrip('.')} must be a JSON object; fix the config")
        kwargs: dict[str, Any] = {}
        for key, value in raw.items():
            if key not in _SECTIONS:
                raise ConfigError(
                    f"unknown key {where}{key}; known sections: {', '.join(_SECTIONS)}"
                )
            attr, section_cls = _SECTIONS[key]
            kwargs[attr] = _parse_section(section_cls, value, f"{where}{key}")
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The config in the spec's JSON shape (``{"Deduplication": {...}}``), every key set."""
        return {"Deduplication": {key: _dump(getattr(self, attr)) for key, (attr, _) in
                                  _SECTIONS.items()}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)


def _dump(section: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(section):  # type: ignore[arg-type]
        value = getattr(section, f.name)
        if isinstance(value, Enum):
            value = value.value
        elif dataclasses.is_dataclass(value):
            value = _dump(value)
        out[f.metadata["key"]] = value
    return out


def resolve_config(config: DedupConfig | Mapping[str, Any] | str | Path | None) -> DedupConfig:
    """``None`` gives the defaults; a mapping or path is read with ``from_json``."""
    if config is None:
        return DedupConfig()
    if isinstance(config, DedupConfig):
        return config
    return DedupConfig.from_json(config)
