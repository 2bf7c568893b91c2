"""PDF extraction (issue 16): the committed PDFs of data/documents and generated edge cases."""

from __future__ import annotations

import difflib
import textwrap
import unicodedata
from pathlib import Path

import fpdf
import polars as pl
import pytest

from arrowdedup.errors import InputError
from arrowdedup.extract import extract, extract_documents
from arrowdedup.extract.isolated import parse_isolated
from arrowdedup.extract.pdflayout import _join, clean, mask_digits
from tests.helpers import DOCS

PDFS = sorted(DOCS.glob("*.pdf"))


def _fidelity(pdf: Path) -> float:
    frame = extract(pdf).filter(pl.col("segment_type") != "page_furniture").sort("position")
    got = [unicodedata.normalize("NFKC", w) for w in " ".join(frame["text"]).split()]
    src = [unicodedata.normalize("NFKC", w)
           for w in pdf.with_suffix(".pdf.source").read_text().split()]
    matcher = difflib.SequenceMatcher(None, src, got, autojunk=False)
    return sum(b.size for b in matcher.get_matching_blocks()) / len(src)


def test_committed_pdfs_are_there():
    assert len(PDFS) >= 5


@pytest.mark.parametrize("pdf", PDFS, ids=lambda p: p.stem)
def test_words_recovered_in_order(pdf):
    assert _fidelity(pdf) >= 0.98


def test_two_column_pdf_is_read_column_by_column():
    frame = extract(DOCS / "otel-components-two-columns.pdf")
    texts = frame["text"].to_list()
    # The stream interleaves the columns line by line; the paragraphs must come out whole.
    collector = next(t for t in texts if t.startswith("The OpenTelemetry Collector is"))
    assert "receive, process, and export telemetry data" in collector
    assert texts.index("Collector") < texts.index(collector)


def test_headings_sections_pages_and_neighbours():
    frame = extract(DOCS / "otel-observability-primer.pdf")
    headings = frame.filter(pl.col("segment_type") == "heading")
    assert headings["text"][0] == "Observability primer"
    assert headings["heading_level"][0] == 1
    assert headings["heading_level"].drop_nulls().max() > 1
    row = frame.filter(pl.col("text").str.starts_with("Telemetry refers to data")) \
        .row(0, named=True)
    assert row["section"] == "Observability primer > Reliability and metrics"
    assert row["page_start"] >= 1 and row["page_end"] >= row["page_start"]
    ids = set(frame["segment_id"])
    for before, after in frame.select("neighbours_before", "neighbours_after").iter_rows():
        assert set(before) | set(after) <= ids
    assert frame["page_end"].max() == 3
    by_id = dict(zip(frame["segment_id"], frame["section"], strict=True))
    for sid, after in zip(frame["segment_id"], frame["neighbours_after"], strict=True):
        assert all(by_id[n] == by_id[sid] for n in after)
    # A paragraph that runs over a page break is one segment spanning two pages.
    assert frame.filter(pl.col("page_end") > pl.col("page_start")).height >= 1


def test_running_headers_and_footers_are_page_furniture():
    frame = extract(DOCS / "otel-distributions-running-headers.pdf")  # 2 pages
    furniture = frame.filter(pl.col("segment_type") == "page_furniture")
    assert sorted(furniture["text"]) == sorted(
        ["OpenTelemetry documentation: Distributions"] * 2 + ["Page 1 of 2", "Page 2 of 2"])
    assert furniture["neighbours_before"].list.len().sum() == 0
    content = frame.filter(pl.col("segment_type") != "page_furniture")
    assert not content["text"].str.contains("Page 1 of 2").any()
    assert not content["neighbours_after"].explode().is_in(furniture["segment_id"].implode()).any()
    # Digits masked: the two footers share one content hash, nothing else shares it.
    hashes = furniture.filter(pl.col("text").str.starts_with("Page"))["content_hash"]
    assert hashes.n_unique() == 1
    assert not content["content_hash"].is_in(hashes.implode()).any()


def test_table_rows_from_a_pdf_table():
    frame = extract(DOCS / "invoice-A-1042.pdf")
    rows = frame.filter(pl.col("segment_type") == "table_row")["text"].to_list()
    assert rows[0] == "Item: Scale plan, monthly; Quantity: 3; Unit price: 499.00 EUR; " \
                      "Amount: 1497.00 EUR"


def _font() -> tuple[str, str]:
    import matplotlib

    base = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    return str(base / "DejaVuSans.ttf"), str(base / "DejaVuSans-Bold.ttf")


def _pdf(path: Path, lines: list[str], *, pages: int = 1, **kw) -> Path:
    pdf = fpdf.FPDF(format="A4", unit="pt")
    regular, _ = _font()
    pdf.add_font("DejaVu", "", regular)
    for p in range(pages):
        pdf.add_page()
        pdf.set_font("DejaVu", "", 10)
        for i, line in enumerate(lines):
            pdf.text(56, 100 + 14 * i, line.replace("{page}", str(p + 1)))
    if kw.get("password"):
        pdf.set_encryption(owner_password="owner", user_password=kw["password"])
    pdf.output(str(path))
    return path


def test_hyphenation_and_ligatures_are_normalised(tmp_path):
    path = _pdf(tmp_path / "h.pdf", ["The signals are collec-", "ted by an eﬃcient ﬁlter."])
    text = extract(path)["text"].to_list()
    assert text == ["The signals are collected by an efficient filter."]
    assert clean("a\u00a0b\u200bc ﬂ") == "a bc fl"
    assert _join("Open-", "Telemetry") == "Open-Telemetry"  # a compound keeps its hyphen
    assert _join("wait -", "no") == "wait - no"
    assert mask_digits("Page 12 of 30") == "Page 0 of 0"


def test_furniture_in_a_two_page_pdf(tmp_path):
    path = _pdf(tmp_path / "two.pdf", ["Body text that differs {page} " + "x" * 10],
                pages=2)
    frame = extract(path)
    assert (frame["segment_type"] != "page_furniture").all()  # body lines are not furniture


def test_encrypted_pdf_is_refused(tmp_path):
    path = _pdf(tmp_path / "secret.pdf", ["hidden"], password="pw")
    with pytest.raises(InputError, match="encrypted"):
        extract(path)


def test_pdf_without_text_layer(tmp_path):
    pdf = fpdf.FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 50, style="F")
    pdf.output(str(tmp_path / "scan.pdf"))
    with pytest.raises(InputError, match="no text layer; OCR is not supported"):
        extract(tmp_path / "scan.pdf")


def test_corrupt_pdf_is_skipped_and_reported(tmp_path):
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.7\n garbage \x00\x01")
    (tmp_path / "truncated.pdf").write_bytes((DOCS / "invoice-A-1042.pdf").read_bytes()[:900])
    _pdf(tmp_path / "good.pdf", ["A fine paragraph."])
    with pytest.raises(InputError, match="corrupt"):
        extract(tmp_path / "bad.pdf")
    result = extract_documents(tmp_path, skip_bad_files=True)
    assert result.files == ("good.pdf",)
    assert {s.path for s in result.skipped} == {"bad.pdf", "truncated.pdf"}
    assert all("\n" not in s.reason for s in result.skipped)


def test_huge_page_is_extracted(tmp_path):
    pdf = fpdf.FPDF(format=(3000, 3000), unit="pt")
    regular, _ = _font()
    pdf.add_font("DejaVu", "", regular)
    pdf.add_page()
    pdf.set_font("DejaVu", "", 9)
    for i in range(250):
        pdf.text(40, 40 + 11 * i, f"Line {i} of a very large page with words.")
    pdf.output(str(tmp_path / "huge.pdf"))
    frame = extract(tmp_path / "huge.pdf")
    assert frame["text"].str.count_matches("very large page").sum() == 250


def test_a_native_crash_in_the_parser_skips_only_that_file(tmp_path):
    # A parser module that aborts the process (SIGABRT, as a crash in C code would) on one file.
    module = tmp_path / "crashing.py"
    module.write_text(textwrap.dedent("""
        import os
        def parse_pdf(path, display):
            if display == "crash.pdf":
                os.abort()
            return {"texts": [display]}
    """))
    tasks = [(str(tmp_path / n), n) for n in ("a.pdf", "crash.pdf", "b.pdf", "c.pdf")]
    out = parse_isolated(tasks, 2, module=module)
    assert [o.get("texts") for o in out] == [["a.pdf"], None, ["b.pdf"], ["c.pdf"]]
    assert "crashed" in out[1]["error"] and "signal 6" in out[1]["error"]


def test_output_does_not_depend_on_workers():
    one = extract_documents(DOCS, workers=1).segments
    two = extract_documents(DOCS, workers=2).segments
    assert one.equals(two)


def test_bold_heading_at_body_size_but_not_a_bold_lead_in(tmp_path):
    pdf = fpdf.FPDF(format="A4", unit="pt")
    regular, bold = _font()
    pdf.add_font("DejaVu", "", regular)
    pdf.add_font("DejaVu", "B", bold)
    pdf.add_page()
    pdf.set_font("DejaVu", "B", 10)
    pdf.text(56, 100, "Configuration")
    pdf.text(56, 130, "Note:")
    width = pdf.get_string_width("Note: ")
    pdf.set_font("DejaVu", "", 10)
    pdf.text(56 + width, 130, "the collector reads its settings at start")
    for i in range(6):
        pdf.text(56, 144 + 14 * i, f"and this body line number {i} goes on with regular words")
    pdf.output(str(tmp_path / "b.pdf"))
    frame = extract(tmp_path / "b.pdf")
    assert frame.select("segment_type", "heading_level").row(0) == ("heading", 1)
    assert frame["text"][0] == "Configuration"
    assert frame["segment_type"][1] == "paragraph"
    assert frame["text"][1].startswith("Note: the collector reads its settings at start and")
    assert frame["section"][1] == "Configuration"


def test_two_columns_written_column_by_column(tmp_path):
    # The common case (a paper): the stream holds the left column, then the right one.
    pdf = fpdf.FPDF(format="A4", unit="pt")
    regular, _ = _font()
    pdf.add_font("DejaVu", "", regular)
    pdf.add_page()
    pdf.set_font("DejaVu", "", 10)
    left = [f"left column line {i} about tracing spans" for i in range(20)]
    right = [f"right column line {i} about metric streams" for i in range(20)]
    for i, line in enumerate(left):
        pdf.text(56, 100 + 13 * i, line)
    for i, line in enumerate(right):
        pdf.text(320, 100 + 13 * i, line)
    pdf.output(str(tmp_path / "cols.pdf"))
    text = " ".join(extract(tmp_path / "cols.pdf").sort("position")["text"])
    assert text == " ".join(left + right)
