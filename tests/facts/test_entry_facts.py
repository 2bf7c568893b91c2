"""List entries that are names, and definitions of a type (rules 20.0): a label merges only into
the same name, layout aside; a type's definitions are not refused for their sections; a type
name's plural is the same identifier. Every decision path gives the same decisions."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from arrowdedup import DedupConfig, IngestionConfig, fact_conflict, ingest
from arrowdedup.facts.entries import LABEL, PART, ROLE_SHIFT, SUBJECT, defined_type, label_rows
from arrowdedup.facts.sections import lead_ins
from arrowdedup.retrieval.crossdoc import dedupe_ranked
from tests.helpers import segments_frame, unit

RNG = np.random.default_rng(20)
BASES = [unit(RNG.normal(size=16)) for _ in range(3)]


def near(pair: int) -> np.ndarray:
    """A vector near the ``pair``-th direction (each pair of the guide has its own)."""
    return unit(BASES[pair] + RNG.normal(scale=1e-3, size=16))


@pytest.mark.parametrize(("a", "b"), [
    ("Servicio de Pago", "Servicio de Pagos"),  # an inflection: another service of a list
    ("OpenTelemetry .NET", "OpenTelemetry .NET Contrib"),  # a word added: another repository
    ("Payment Service", "The payment service handles refunds and charges."),
    ("Payment Service", "Payment Service and Checkout Service"),
])
def test_a_list_entry_that_is_a_name_merges_only_into_that_name(a: str, b: str) -> None:
    assert fact_conflict(a, b, segment_type="list_item", language="en") == "content"


@pytest.mark.parametrize(("a", "b"), [
    ("Install the agent", "Install the OpenTelemetry agent"),  # not a name: B says more
    ("- Servicio de Pago", "1. servicio de  pago"),  # layout and letter case aside
    ("W3C Baggage", '"baggage": W3C Baggage'),  # the name as one side of a colon
    ("go.opentelemetry.io/otel/sdk/metric", "Metrics SDK: go.opentelemetry.io/otel/sdk/metric"),
    ("W3C Trace Context", "W3C Trace Context: the propagation format"),
])
def test_the_same_name_merges(a: str, b: str) -> None:
    assert fact_conflict(a, b, segment_type="list_item", language="en") is None


@pytest.mark.parametrize("text", [
    "Install the agent.",  # a sentence
    "Configure the exporter:",  # a lead-in
    "key: value",  # a key and its value
    "one two three four five six seven",  # longer than a name
    "set ebpf in the list",  # an instruction: its words are not capitalised
    "Install the agent",
])
def test_what_is_not_a_label(text: str) -> None:
    texts = pl.Series([text])
    # The caller passes the lead-ins among the rows to skip, as the signatures do.
    rows = label_rows(texts, pl.Series(["list_item"]), lead_ins(texts).to_numpy())
    assert rows.size == 0


def test_headings_and_paragraphs_are_not_labels() -> None:
    """Heading inflections are style ("Use ..." / "Using ..."), and the heading rule asks equal
    facts already; a paragraph is prose."""
    texts = pl.Series(["Rastro", "Rastro", "Rastro"])
    kinds = pl.Series(["heading", "paragraph", "list_item"])
    assert label_rows(texts, kinds, np.zeros(3, dtype=bool)).tolist() == [2]
    assert fact_conflict("Rastro", "Rastros", segment_type="heading", language="pt") is None


def test_a_type_name_plural_is_the_same_identifier() -> None:
    for a, b in (("SpanProcessors: Processes spans.", "SpanProcessor: Processes spans."),
                 ("Add SpanExporters to the pipeline.", "Add a SpanExporter to the pipeline.")):
        assert fact_conflict(a, b, language="en") is None, (a, b)
        assert fact_conflict(b, a, language="en") is None, (b, a)
    # Not a plural: names that end in "us", "is" or "ss", and identifiers with other characters.
    for a, b in (("Move from OpenCensus.", "Move from OpenCensu."),
                 ("Use max_retries here.", "Use max_retrie here."),
                 ("Call getSpans first.", "Call getSpan first.")):
        assert fact_conflict(a, b, language="en") == "identifier", (a, b)


def test_defined_type() -> None:
    texts = pl.Series(["SpanProcessors: x", "MetricReader：集約", "Protocols: A and B",
                       "OpenCensus: y", "see SpanProcessor: z", "CAP_NET_RAW: w"])
    assert defined_type(texts).to_list() == ["SpanProcessor", "MetricReader", None,
                                             "OpenCensus", None, None]


def sdk_guide() -> pl.DataFrame:
    """Two sibling sections define the same types (the SDK's components and its extension
    interfaces); two sibling providers state the same kind of sentence."""
    rows = [
        ("SDK > Components > TracerProvider", "SpanProcessors: Processes spans when they start "
         "and end (in conjunction with associated exporters).", 0.9),
        ("SDK > Extension interfaces", "SpanProcessor: Processes spans when they start and "
         "end.", 0.5),
        ("Providers > Alpha", "Supported: HTTP and gRPC.", 0.5),
        ("Providers > Gamma", "Supported: HTTP, gRPC and Kafka.", 0.9),
        ("Links", "Servicio de Pago", 0.5),
        ("Links", "Servicio de Pagos", 0.9),
    ]
    types = ["list_item"] * 2 + ["paragraph"] * 2 + ["list_item"] * 2
    return segments_frame([t for _, t, _ in rows], [near(i // 2) for i in range(len(rows))],
                          doc_id="sdk",
                          segment_type=types, salience=[s for _, _, s in rows],
                          section=[p for p, _, _ in rows])


def _by_id(frame: pl.DataFrame) -> dict[str, dict]:
    return {r["segment_id"]: r for r in frame.iter_rows(named=True)}


@pytest.mark.parametrize("mode", ["exact", "lsh"])
def test_definitions_of_one_type_merge_across_sections(mode: str) -> None:
    cfg = DedupConfig(ingestion=IngestionConfig(mode=mode))
    rows = _by_id(ingest(sdk_guide(), cfg).decisions)
    assert rows["s1"]["action"] == "merged_near"
    assert rows["s1"]["representative_id"] == "s0"
    # The providers' sentence has no type for a subject: still a statement about each.
    assert rows["s2"]["action"] == "kept" and rows["s2"]["guard_reason"] == "section"
    # Two entries of a list of links: two names.
    assert rows["s4"]["action"] == "kept" and rows["s4"]["guard_reason"] == "content"
    assert rows["s4"]["guard_detail"] == "another name: Servicio de Pago ≠ Servicio de Pagos"


def test_fact_guard_off_ignores_names_and_subjects() -> None:
    cfg = DedupConfig(ingestion=IngestionConfig(fact_guard=False))
    rows = _by_id(ingest(sdk_guide(), cfg).decisions)
    assert all(rows[s]["action"] == "merged_near" for s in ("s1", "s2", "s4"))


def test_retrieval_refuses_another_name() -> None:
    frame = sdk_guide().filter(pl.col("segment_id").is_in(["s5", "s4"])).reverse()
    kept = dedupe_ranked(frame)
    assert kept.get_column("segment_id").to_list() == ["s5", "s4"]


def test_entry_tokens_have_their_roles() -> None:
    from arrowdedup.facts.guard import signature_arrays

    offsets, values = signature_arrays(
        pl.Series(["Servicio de Pago", "SpanProcessor: x", "key: Value"]),
        segment_type=pl.Series(["list_item", "paragraph", "list_item"]))
    roles = [sorted({int(v >> ROLE_SHIFT) & 3 for v in values[offsets[r]:offsets[r + 1]]
                     if int(v >> 60) == 12}) for r in range(3)]
    assert roles == [[LABEL, PART], [SUBJECT], [PART]]
