"""Spreadsheets (issue 16): one document per sheet, typed values, keys, summaries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import xlsxwriter

from arrowdedup.errors import InputError
from arrowdedup.extract import extract, extract_documents
from arrowdedup.extract.tabular import detect_key_columns, is_id_name
from tests.helpers import DOCS


def test_one_document_per_sheet_with_typed_values_and_detected_keys():
    result = extract_documents(DOCS / "tallybird-purchases.xlsx")
    frame = result.segments
    assert frame["doc_id"].unique(maintain_order=True).to_list() == [
        "tallybird-purchases#Orders", "tallybird-purchases#Customers"]
    orders = frame.filter(pl.col("doc_id") == "tallybird-purchases#Orders")
    rows = orders.filter(pl.col("segment_type") == "table_row")
    assert rows.height == 6
    assert rows["text"][2] == ("order_id: A-1042; customer_id: C-204; order_date: 2026-03-09; "
                              "plan: Scale; quantity: 3; unit_price: 499; status: open")
    assert rows["keys"][2].to_list() == ["order_id: A-1042", "customer_id: C-204"]
    values = json.loads(rows["row_values"][2])
    assert values == {"order_id": "A-1042", "customer_id": "C-204", "order_date": "2026-03-09",
                      "plan": "Scale", "quantity": 3, "unit_price": 499, "status": "open"}
    assert rows["segment_id"][0] == "tallybird-purchases#Orders#0"
    assert set(orders["doc_type"]) == {"xlsx"}
    assert "keys of tallybird-purchases#Orders: order_id, customer_id (detected)" in \
        result.keys_report()


def test_summary_segment_from_column_statistics():
    frame = extract(DOCS / "tallybird-purchases.xlsx")
    summary = frame.filter(pl.col("segment_type") == "table_summary")
    assert summary.height == 2
    text = summary["text"][0]
    assert text.startswith("tallybird-purchases#Orders: 6 rows, 7 columns.")
    assert "order_date (date, 2026-03-02 to 2026-04-01)" in text
    assert "quantity (integer, 1 to 4, mean 2)" in text
    assert "status (text, 3 distinct; top paid ×3, open ×2, refunded ×1)" in text
    # The summary is no row's neighbour.
    assert summary["neighbours_before"].list.len().sum() == 0
    assert not frame["neighbours_after"].explode().is_in(summary["segment_id"].implode()).any()


@pytest.mark.parametrize("name", ["tallybird-plans.xls", "otel-pdf-pages.ods"])
def test_xls_and_ods(name):
    frame = extract(DOCS / name).filter(pl.col("segment_type") == "table_row")
    assert frame.height == 4
    assert frame["doc_id"][0].startswith(Path(name).stem + "#")
    assert all(json.loads(v) for v in frame["row_values"])


def test_xlsm_and_given_key_columns(tmp_path):
    shutil.copy(DOCS / "tallybird-purchases.xlsx", tmp_path / "book.xlsm")
    result = extract_documents(tmp_path, key_columns="customer_id")
    rows = result.segments.filter(pl.col("segment_type") == "table_row")
    assert rows["keys"].to_list()[0] == ["customer_id: C-204"]
    assert result.keys_report() == [
        "keys of book#Orders: customer_id (given)", "keys of book#Customers: customer_id (given)"]
    with pytest.raises(InputError, match=r"key column.*'nope'.*--key-columns"):
        extract(tmp_path, key_columns="nope")
    off = extract(tmp_path, detect_keys=False)
    assert off["keys"].null_count() == off.height


def test_empty_sheets_and_merged_cells(tmp_path):
    book = xlsxwriter.Workbook(str(tmp_path / "m.xlsx"))
    book.add_worksheet("Empty")
    sheet = book.add_worksheet("Merged")
    sheet.write_row(0, 0, ["region", "sku", "units"])
    sheet.merge_range(1, 0, 2, 0, "North")
    sheet.write_row(1, 1, ["SKU-1", 3])
    sheet.write_row(2, 1, ["SKU-2", 5])
    book.close()
    frame = extract(tmp_path / "m.xlsx")
    assert set(frame["doc_id"]) == {"m#Merged"}
    rows = frame.filter(pl.col("segment_type") == "table_row")
    assert rows["text"].to_list() == ["region: North; sku: SKU-1; units: 3",
                                      "sku: SKU-2; units: 5"]
    assert rows["keys"].to_list() == [["sku: SKU-1"], ["sku: SKU-2"]]


def test_corrupt_workbook_is_one_line_and_skippable(tmp_path):
    (tmp_path / "bad.xlsx").write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "ok.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match=r"bad\.xlsx: not a readable spreadsheet"):
        extract(tmp_path / "bad.xlsx")
    result = extract_documents(tmp_path, skip_bad_files=True)
    assert [s.path for s in result.skipped] == ["bad.xlsx"]
    assert "\n" not in result.skipped[0].reason


def test_key_detection_by_name_and_by_value():
    for name in ("id", "order_id", "CustomerID", "orderId", "sku", "product_code", "api_key"):
        assert is_id_name(name), name
    for name in ("paid", "valid", "name", "country", "monkey"):
        assert not is_id_name(name), name
    frame = pl.DataFrame({
        "ref": ["A-1042", "A-1043", "A-1042"],  # a foreign key: repeats are fine
        "title": ["Order one", "Order two", "Order three"],
        "day": ["2026-01-02", "2026-01-03", "2026-01-04"],
        "amount": [1.5, 2.5, 3.5],
    })
    assert detect_key_columns(frame) == ["ref"]


def test_hundred_thousand_rows_stay_columnar(tmp_path):
    n = 20_000
    frame = pl.DataFrame({"order_id": [f"A-{i}" for i in range(n)],
                          "amount": [i * 0.5 for i in range(n)]})
    frame.write_csv(tmp_path / "big.csv")
    out = extract(tmp_path / "big.csv")
    assert out.filter(pl.col("segment_type") == "table_row").height == n
    assert out["keys"][n - 1].to_list() == [f"order_id: A-{n - 1}"]


def test_cli_reports_detected_keys_and_turns_detection_off(tmp_path):
    from typer.testing import CliRunner

    from arrowdedup.cli import app

    out = tmp_path / "s.parquet"
    res = CliRunner().invoke(app, ["extract", str(DOCS / "tallybird-purchases.xlsx"), "--out",
                                   str(out)])
    assert res.exit_code == 0, res.output
    assert "keys of tallybird-purchases#Orders: order_id, customer_id (detected)" in res.output
    assert pl.read_parquet(out)["keys"].null_count() < pl.read_parquet(out).height
    res = CliRunner().invoke(app, ["extract", str(DOCS / "tallybird-purchases.xlsx"), "--out",
                                   str(out), "--no-detect-keys"])
    assert res.exit_code == 0, res.output
    assert "keys of" not in res.output
    assert pl.read_parquet(out)["keys"].null_count() == pl.read_parquet(out).height


def test_ingest_cli_reports_the_key_columns(tmp_path):
    from typer.testing import CliRunner

    from arrowdedup.cli import app
    from tests.helpers import M2V_MODEL, need

    model = need(M2V_MODEL)
    res = CliRunner().invoke(app, ["ingest", str(DOCS / "tallybird-plans.xls"), "--out",
                                   str(tmp_path / "store"), "--embedder", f"model2vec:{model}"])
    assert res.exit_code == 0, res.output
    assert "keys of tallybird-plans#Plans: code (detected)" in res.output
