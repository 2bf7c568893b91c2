"""Writes the committed test PDFs and spreadsheets of ``data/documents`` (see its README).

``python -m benchmarks.documents [OUT]`` rebuilds them: the PDFs from the English
OpenTelemetry docs of ``../shared/data/corpus`` (CC-BY-4.0, © OpenTelemetry Authors), laid out
here line by line with fpdf2 and the DejaVu fonts that matplotlib ships, so that each PDF's
source text is known exactly (``<name>.pdf.source`` beside it, one segment per line); the
invoices and spreadsheets from Tallybird, the fictional billing API of ``data/sample``.

The layouts are deliberate: the two-column PDF is written row by row (left line, right line,
…) so that its content stream is *not* in reading order; the running-header PDF has a header
and a "Page N of M" footer on every page; long words are hyphenated at line ends in one PDF.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "documents"
CORPUS = ROOT.parent / "shared" / "data" / "corpus" / "opentelemetry.io" / "content" / "en"

# (output name, source docs under CORPUS, layout options)
PDFS: tuple[tuple[str, tuple[str, ...], dict[str, Any]], ...] = (
    ("otel-observability-primer", ("docs/concepts/observability-primer.md",),
     {"columns": 1}),
    ("otel-components-two-columns", ("docs/concepts/components.md",), {"columns": 2}),
    ("otel-distributions-running-headers", ("docs/concepts/distributions.md",),
     {"columns": 1, "header": "OpenTelemetry documentation: Distributions", "footer": True}),
    ("otel-glossary-multipage", ("docs/concepts/glossary.md",),
     {"columns": 1, "footer": True, "hyphenate": True}),
)
ORDERS = (
    ("A-1040", "C-204", dt.date(2026, 3, 2), "Growth", 2, 149.0, "paid"),
    ("A-1041", "C-311", dt.date(2026, 3, 5), "Starter", 1, 29.0, "paid"),
    ("A-1042", "C-204", dt.date(2026, 3, 9), "Scale", 3, 499.0, "open"),
    ("A-1043", "C-118", dt.date(2026, 3, 14), "Growth", 1, 149.0, "refunded"),
    ("A-1044", "C-311", dt.date(2026, 3, 21), "Starter", 4, 29.0, "paid"),
    ("A-1045", "C-402", dt.date(2026, 4, 1), "Scale", 1, 499.0, "open"),
)
CUSTOMERS = (
    ("C-118", "Fernhill Analytics", "DE", dt.date(2024, 11, 3)),
    ("C-204", "Northwind Freight", "US", dt.date(2025, 1, 17)),
    ("C-311", "Kestrel Labs", "FR", dt.date(2025, 6, 30)),
    ("C-402", "Orchid Health", "JP", dt.date(2026, 2, 12)),
)
PLANS = (
    ("starter", "Starter", 29.0, 10_000, dt.date(2023, 5, 1)),
    ("growth", "Growth", 149.0, 100_000, dt.date(2023, 5, 1)),
    ("scale", "Scale", 499.0, 1_000_000, dt.date(2024, 2, 15)),
    ("enterprise", "Enterprise", 1999.0, 10_000_000, dt.date(2025, 9, 1)),
)


def _fonts() -> tuple[Path, Path]:
    import matplotlib

    base = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    return base / "DejaVuSans.ttf", base / "DejaVuSans-Bold.ttf"


def source_blocks(paths: Sequence[str]) -> list[tuple[str, int, str]]:
    """(type, heading level, text) of the headings, paragraphs and list items of the docs."""
    from arrowdedup.extract import extract

    frame = extract([CORPUS / p for p in paths], root=CORPUS)
    frame = frame.filter(frame["segment_type"].is_in(["heading", "paragraph", "list_item"]))
    out = []
    for row in frame.iter_rows(named=True):
        text = " ".join(str(row["text"]).split())
        out.append((row["segment_type"], int(row["heading_level"] or 0), text))
    return out


class Layout:
    """Lines placed on pages and columns by a greedy wrapper; rendered at the end."""

    def __init__(self, columns: int = 1, hyphenate: bool = False) -> None:
        from fpdf import FPDF

        self.pdf = FPDF(format="A4", unit="pt")
        self.pdf.set_auto_page_break(False)
        regular, bold = _fonts()
        self.pdf.add_font("DejaVu", "", str(regular))
        self.pdf.add_font("DejaVu", "B", str(bold))
        self.columns = columns
        self.hyphenate = hyphenate
        self.margin, self.gutter = 56.0, 24.0
        self.top, self.bottom = 80.0, 842.0 - 80.0
        self.width = (595.0 - 2 * self.margin - self.gutter * (columns - 1)) / columns
        self.lines: list[tuple[int, int, float, float, str, str, float]] = []
        self.page, self.column, self.y = 0, 0, self.top

    def _advance(self, height: float) -> None:
        if self.y + height > self.bottom:
            self.column += 1
            if self.column >= self.columns:
                self.column, self.page = 0, self.page + 1
            self.y = self.top

    def _wrap(self, text: str, width: float) -> list[str]:
        lines: list[str] = []
        line = ""
        for word in text.split(" "):
            trial = f"{line} {word}" if line else word
            if self.pdf.get_string_width(trial) <= width:
                line = trial
                continue
            if self.hyphenate and len(word) >= 8 and word.isalpha():
                for cut in range(len(word) - 3, 2, -1):
                    head = f"{line} {word[:cut]}-" if line else f"{word[:cut]}-"
                    if self.pdf.get_string_width(head) <= width:
                        lines.append(head)
                        line = word[cut:]
                        break
                else:
                    lines.append(line)
                    line = word
                continue
            if line:
                lines.append(line)
            line = word
        if line:
            lines.append(line)
        return lines

    def block(self, kind: str, level: int, text: str) -> None:
        size = {1: 18.0, 2: 14.0, 3: 12.0}.get(level, 11.5) if kind == "heading" else 10.0
        style = "B" if kind == "heading" else ""
        self.pdf.set_font("DejaVu", style, size)
        indent = 14.0 if kind == "list_item" else 0.0
        body = f"• {text}" if kind == "list_item" else text
        pitch = size * 1.35
        self._advance(pitch * (2 if kind == "heading" else 1))
        for i, line in enumerate(self._wrap(body, self.width - indent - (12 if indent else 0))):
            self._advance(pitch)
            x = self.margin + self.column * (self.width + self.gutter) + indent + (
                12.0 if kind == "list_item" and i else 0.0)
            self.lines.append((self.page, self.column, self.y, x, style, line, size))
            self.y += pitch
        self.y += size * 0.9  # paragraph spacing

    def render(self, path: Path, header: str | None, footer: bool) -> None:
        pages = self.page + 1
        for page in range(pages):
            self.pdf.add_page()
            if header:
                self.pdf.set_font("DejaVu", "", 8.5)
                self.pdf.text(self.margin, 40, header)
            # Row by row across the columns: the stream order is not the reading order.
            rows = sorted((ln for ln in self.lines if ln[0] == page), key=lambda ln: (ln[2], ln[1]))
            for _, _, y, x, style, line, size in rows:
                self.pdf.set_font("DejaVu", style, size)
                self.pdf.text(x, y + size, line)
            if footer:
                self.pdf.set_font("DejaVu", "", 8.5)
                self.pdf.text(self.margin, 842 - 40, f"Page {page + 1} of {pages}")
        self.pdf.output(str(path))


def write_pdf(path: Path, blocks: list[tuple[str, int, str]], *, columns: int = 1,
              header: str | None = None, footer: bool = False, hyphenate: bool = False) -> None:
    layout = Layout(columns, hyphenate)
    for kind, level, text in blocks:
        layout.block(kind, level, text)
    layout.render(path, header, footer)


def write_invoice(path: Path, order: tuple[Any, ...]) -> list[tuple[str, int, str]]:
    """An invoice page naming its order id, with a table of line items; returns its text."""
    from fpdf import FPDF

    order_id, customer, day, plan, qty, price, status = order
    customer_name = next(c[1] for c in CUSTOMERS if c[0] == customer)
    pdf = FPDF(format="A4", unit="pt")
    regular, bold = _fonts()
    pdf.add_font("DejaVu", "", str(regular))
    pdf.add_font("DejaVu", "B", str(bold))
    pdf.add_page()
    pdf.set_auto_page_break(False)
    text: list[tuple[str, int, str]] = []

    def line(x: float, y: float, s: str, size: float = 10.0, style: str = "") -> None:
        pdf.set_font("DejaVu", style, size)
        pdf.text(x, y, s)

    title = f"Invoice INV-{order_id[2:]}"
    line(56, 90, title, 18, "B")
    text.append(("heading", 1, title))
    intro = (f"Tallybird invoice for order {order_id}, placed by {customer_name} "
             f"(customer {customer}) on {day.isoformat()}.")
    line(56, 120, intro)
    text.append(("paragraph", 0, intro))
    line(56, 160, "Line items", 13, "B")
    text.append(("heading", 2, "Line items"))
    header = ("Item", "Quantity", "Unit price", "Amount")
    xs = (56, 260, 360, 460)
    for x, h in zip(xs, header, strict=True):
        line(x, 190, h, 10, "B")
    items = [(f"{plan} plan, monthly", qty, price), ("Overage, 1,000 events", 2, 4.5)]
    y = 210
    for item, q, p in items:
        cells = (item, str(q), f"{p:.2f} EUR", f"{q * p:.2f} EUR")
        for x, c in zip(xs, cells, strict=True):
            line(x, y, c)
        text.append(("table_row", 0, "; ".join(f"{h}: {c}" for h, c in
                                                 zip(header, cells, strict=True))))
        y += 18
    total = sum(q * p for _, q, p in items)
    closing = (f"Total due: {total:.2f} EUR. Status: {status}. Quote order {order_id} "
               "on any payment or support request.")
    line(56, y + 30, closing)
    text.append(("paragraph", 0, closing))
    pdf.output(str(path))
    return text


def write_spreadsheets(out: Path) -> None:
    import xlsxwriter
    import xlwt
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    book = xlsxwriter.Workbook(str(out / "tallybird-purchases.xlsx"))
    date_fmt = book.add_format({"num_format": "yyyy-mm-dd"})
    sheet = book.add_worksheet("Orders")
    sheet.write_row(0, 0, ["order_id", "customer_id", "order_date", "plan", "quantity",
                           "unit_price", "status"])
    for r, (oid, cid, day, plan, qty, price, status) in enumerate(ORDERS, start=1):
        sheet.write_string(r, 0, oid)
        sheet.write_string(r, 1, cid)
        sheet.write_datetime(r, 2, dt.datetime.combine(day, dt.time()), date_fmt)
        sheet.write_string(r, 3, plan)
        sheet.write_number(r, 4, qty)
        sheet.write_number(r, 5, price)
        sheet.write_string(r, 6, status)
    sheet = book.add_worksheet("Customers")
    sheet.write_row(0, 0, ["customer_id", "name", "country", "customer_since"])
    for r, (cid, name, country, since) in enumerate(CUSTOMERS, start=1):
        sheet.write_row(r, 0, [cid, name, country])
        sheet.write_datetime(r, 3, dt.datetime.combine(since, dt.time()), date_fmt)
    book.close()

    xls = xlwt.Workbook()
    ws = xls.add_sheet("Plans")
    style = xlwt.easyxf(num_format_str="YYYY-MM-DD")
    for c, name in enumerate(["code", "name", "monthly_price", "included_events", "launched"]):
        ws.write(0, c, name)
    for r, (code, name, price, events, launched) in enumerate(PLANS, start=1):
        ws.write(r, 0, code)
        ws.write(r, 1, name)
        ws.write(r, 2, price)
        ws.write(r, 3, events)
        ws.write(r, 4, dt.datetime.combine(launched, dt.time()), style)
    xls.save(str(out / "tallybird-plans.xls"))

    ods = OpenDocumentSpreadsheet()
    table = Table(name="Pages")
    rows = [["page", "title", "segments", "words"]]
    for name, docs, _ in PDFS:
        blocks = source_blocks(docs)
        rows.append([name, blocks[0][2], str(len(blocks)),
                     str(sum(len(t.split()) for _, _, t in blocks))])
    for i, values in enumerate(rows):
        tr = TableRow()
        for j, v in enumerate(values):
            numeric = i > 0 and j >= 2
            cell = TableCell(valuetype="float", value=v) if numeric else \
                TableCell(valuetype="string")
            cell.addElement(P(text=v))
            tr.addElement(cell)
        table.addElement(tr)
    ods.spreadsheet.addElement(table)
    ods.save(str(out / "otel-pdf-pages.ods"))


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else OUT
    out.mkdir(parents=True, exist_ok=True)
    if not CORPUS.exists():
        raise SystemExit("../shared/data/corpus is absent: the PDFs are made from its text")
    for name, docs, options in PDFS:
        blocks = source_blocks(docs)
        write_pdf(out / f"{name}.pdf", blocks, **options)
        (out / f"{name}.pdf.source").write_text("\n".join(t for _, _, t in blocks) + "\n")
    text = write_invoice(out / "invoice-A-1042.pdf", ORDERS[2])
    (out / "invoice-A-1042.pdf.source").write_text("\n".join(t for _, _, t in text) + "\n")
    write_spreadsheets(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
