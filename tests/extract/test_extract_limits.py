"""Every extractor bounded and contained (issue 45): hostile workbooks and wide CSVs are
refused in one line naming the limit and its option before anything large is allocated,
readers run in workers held to time and memory limits, workers never outlive their run, and
symbolic links out of a documents folder are not followed unless asked for."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from arrowdedup.cli import app
from arrowdedup.errors import ConfigError, InputError
from arrowdedup.extract import ExtractLimits, extract, extract_documents
from arrowdedup.extract.isolated import Task, parse_isolated, run_isolated
from arrowdedup.extract.sheet_scan import scan_workbook
from tests.helpers import M2V_MODEL, ROOT, need
from tests.helpers.hostile import (
    far_cell_xlsx,
    hostile_folder,
    run_measured,
    shared_string_bomb_xlsx,
    table_xlsx,
    wide_csv,
    write_xlsx,
)

pytestmark = pytest.mark.timeout(600)


# ----------------------------------------------------------------------------- workbooks


def test_a_far_cell_is_refused_before_the_reader_allocates(tmp_path):
    # A1 and XFD1048576: 17 billion cells to a reader that fills the rectangle (549 GB).
    far_cell_xlsx(tmp_path / "far.xlsx", "XFD1048576")
    started = time.perf_counter()
    with pytest.raises(InputError) as err:
        extract(tmp_path / "far.xlsx")
    message = str(err.value)
    assert "\n" not in message
    assert "far.xlsx" in message and "16,384 columns" in message and "--max-columns" in message
    assert time.perf_counter() - started < 120
    # Past the column limit too: the cells limit names the rectangle.
    problem = scan_workbook(tmp_path / "far.xlsx", "far.xlsx", "xlsx",
                            ExtractLimits(max_columns=20_000))
    assert problem is not None and "17,179,869,184 cells" in problem and "--max-cells" in problem


def test_a_small_workbook_with_a_cell_at_zz200000(tmp_path):
    far_cell_xlsx(tmp_path / "zz.xlsx", "ZZ200000")
    assert (tmp_path / "zz.xlsx").stat().st_size < 4096
    result = extract_documents(tmp_path, skip_bad_files=True)
    assert result.files == ()
    (skipped,) = result.skipped
    assert skipped.path == "zz.xlsx"
    assert "140,400,000 cells" in skipped.reason and "--max-cells" in skipped.reason
    # Raised past it, the scan lets it through (the reader then reads A1 and ZZ200000).
    limits = ExtractLimits(max_cells=200_000_000)
    assert scan_workbook(tmp_path / "zz.xlsx", "zz.xlsx", "xlsx", limits) is None


def test_shared_strings_count_once_per_cell(tmp_path):
    # 20,000 cells pointing at one 5 KB string: 100 MB of text from a 100 KB file.
    shared_string_bomb_xlsx(tmp_path / "bomb.xlsx", rows=20_000, size=5_000)
    with pytest.raises(InputError, match=r"bomb\.xlsx: .*more than 64 MB of text.*--max-text-mb"):
        extract(tmp_path / "bomb.xlsx")
    small = ExtractLimits(max_text_bytes=1 << 20)
    # 100 MB of cell text takes more than the default worker memory to read: raised too.
    frame = extract(tmp_path / "bomb.xlsx",
                    limits=ExtractLimits(max_text_bytes=200 << 20, memory=4096 << 20))
    assert frame.filter(pl.col("segment_type") == "table_row").height == 20_000
    with pytest.raises(InputError, match="--max-text-mb"):
        extract(tmp_path / "bomb.xlsx", limits=small)


def test_markup_that_expands_without_text_is_bounded(tmp_path):
    # One attribute of 80 MB compresses to 80 KB: no text, no cells, only time.
    write_xlsx(tmp_path / "attr.xlsx", ['<row r="1"><c r="A1" x="' + "a" * (80 << 20)
                                        + '"><v>1</v></c></row>'])
    problem = scan_workbook(tmp_path / "attr.xlsx", "attr.xlsx", "xlsx",
                            ExtractLimits(max_text_bytes=4 << 20))
    assert problem is not None and "more than 64 MB of XML" in problem
    assert "--max-text-mb" in problem


def test_a_workbook_within_the_limits_reads_as_before(tmp_path):
    table_xlsx(tmp_path / "t.xlsx", rows=30, columns=6)
    frame = extract(tmp_path / "t.xlsx")
    rows = frame.filter(pl.col("segment_type") == "table_row")
    assert rows.height == 30
    assert rows["text"][0] == "c1: 2; c2: 4; c3: 6; c4: 8; c5: 10; c6: 12"
    assert json.loads(rows["row_values"][1]) == {f"c{c}": 3 * c for c in range(1, 7)}
    with pytest.raises(InputError, match=r"6 columns, past the limit of 5 \(--max-columns\)"):
        extract(tmp_path / "t.xlsx", limits=ExtractLimits(max_columns=5))
    with pytest.raises(InputError, match=r"--max-cells"):
        extract(tmp_path / "t.xlsx", limits=ExtractLimits(max_cells=100))


def test_cells_without_references_and_a_lying_dimension(tmp_path):
    # Cells may omit r= (each follows the previous one); <dimension> may claim anything.
    write_xlsx(tmp_path / "a.xlsx", [
        '<row><c t="inlineStr"><is><t>k</t></is></c><c t="inlineStr"><is><t>v</t></is></c>'
        '</row><row><c><v>1</v></c><c><v>2</v></c></row>'], dimension=["A1:XFD1048576"])
    frame = extract(tmp_path / "a.xlsx").filter(pl.col("segment_type") == "table_row")
    assert frame["text"].to_list() == ["k: 1; v: 2"]
    write_xlsx(tmp_path / "wide.xlsx", ["<row>" + "<c><v>1</v></c>" * 3000 + "</row>"])
    with pytest.raises(InputError, match="--max-columns"):
        extract(tmp_path / "wide.xlsx")


def test_ods_repeated_cells_count_each_repeat(tmp_path):
    import zipfile

    def ods(path: Path, body: str) -> None:
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
            z.writestr("content.xml", (
                '<?xml version="1.0" encoding="UTF-8"?><office:document-content '
                'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
                'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
                'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0">'
                '<office:body><office:spreadsheet><table:table table:name="S">'
                f"{body}</table:table></office:spreadsheet></office:body>"
                "</office:document-content>"))

    # A value repeated over 100k columns and 1M rows: a trillion cells from a few bytes.
    ods(tmp_path / "bomb.ods", '<table:table-row table:number-rows-repeated="1000000">'
        '<table:table-cell table:number-columns-repeated="100000" office:value-type="float" '
        'office:value="1"><text:p>1</text:p></table:table-cell></table:table-row>')
    problem = scan_workbook(tmp_path / "bomb.ods", "bomb.ods", "ods", ExtractLimits())
    assert problem is not None and "--max-columns" in problem
    problem = scan_workbook(tmp_path / "bomb.ods", "bomb.ods", "ods",
                            ExtractLimits(max_columns=200_000))
    assert problem is not None and "--max-cells" in problem
    # The empty tail every LibreOffice sheet ends with costs nothing.
    ods(tmp_path / "tail.ods", '<table:table-row><table:table-cell office:value-type="string">'
        '<text:p>a</text:p></table:table-cell><table:table-cell '
        'table:number-columns-repeated="16383"/></table:table-row>'
        '<table:table-row table:number-rows-repeated="1048575"><table:table-cell '
        'table:number-columns-repeated="16384"/></table:table-row>')
    assert scan_workbook(tmp_path / "tail.ods", "tail.ods", "ods", ExtractLimits()) is None


# ----------------------------------------------------------------------------- CSV / TSV


def test_a_wide_csv_header_is_refused_fast(tmp_path):
    wide_csv(tmp_path / "wide.csv", 100_000)
    started = time.perf_counter()
    with pytest.raises(InputError, match=r"wide\.csv: the header has 100,000 columns, past "
                                         r"the limit of 2,000 \(--max-columns\)"):
        extract(tmp_path / "wide.csv")
    assert time.perf_counter() - started < 120


def test_a_wide_csv_within_a_raised_limit_is_read_in_bounded_time(tmp_path):
    # The statistics of every column come from one pass, not one Polars call per column.
    wide_csv(tmp_path / "wide.csv", 5_000, rows=20)
    started = time.perf_counter()
    result = extract_documents(tmp_path / "wide.csv", limits=ExtractLimits(max_columns=5_000))
    assert time.perf_counter() - started < 300
    rows = result.segments.filter(pl.col("segment_type") == "table_row")
    assert rows.height == 20
    assert rows["text"][0].startswith("col0: 0\ncol1: 1\ncol2: 2")
    summary = result.segments.filter(pl.col("segment_type") == "table_summary")["text"][0]
    assert summary.startswith("wide: 20 rows, 5000 columns. col0 (integer, 0 to 9, mean 4.5)")


def test_csv_cells_and_text_limits(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\n" + "".join(f"{i},{i}\n" for i in range(1000)), encoding="utf-8")
    with pytest.raises(InputError, match=r"t\.csv: it holds up to 2,00\d cells.*--max-cells"):
        extract(path, limits=ExtractLimits(max_cells=1000))
    with pytest.raises(InputError, match=r"t\.csv: the file holds .* of text.*--max-text-mb"):
        extract(path, limits=ExtractLimits(max_text_bytes=1000))
    assert extract(path).height == 1001  # rows and the summary


def test_limits_are_validated():
    with pytest.raises(ConfigError, match=r"max_cells must be a whole number >= 1.*--max-cells"):
        ExtractLimits(max_cells=0)
    with pytest.raises(ConfigError, match=r"timeout.*--extract-timeout"):
        ExtractLimits(timeout=float("nan"))


# ----------------------------------------------------------------------------- workers


def _module(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "reader.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_a_reader_past_the_time_limit_is_stopped(tmp_path):
    module = _module(tmp_path, """
        import time
        def parse_pdf(path, display):
            if display == "slow.pdf":
                time.sleep(600)
            return {"texts": [display]}
    """)
    tasks = [(str(tmp_path / n), n) for n in ("a.pdf", "slow.pdf", "b.pdf")]
    started = time.perf_counter()
    out = parse_isolated(tasks, 1, module=module, limits=ExtractLimits(timeout=3))
    assert time.perf_counter() - started < 120
    assert [o.get("texts") for o in out] == [["a.pdf"], None, ["b.pdf"]]
    assert out[1]["error"].startswith("slow.pdf: the PDF parser took more than 3 s")
    assert "--extract-timeout" in out[1]["error"]


def test_a_reader_past_the_memory_limit_is_stopped(tmp_path, capfd):
    module = _module(tmp_path, """
        import sys, time
        def parse_pdf(path, display):
            print("a library's warning", file=sys.stderr)
            if display == "big.pdf":
                hog = []
                for _ in range(40):
                    hog.append(b"x" * (25 << 20))  # 1 GB in all, 25 MB at a time
                    time.sleep(0.05)
            return {"texts": [display]}
    """)
    tasks = [(str(tmp_path / n), n) for n in ("big.pdf", "a.pdf")]
    out = parse_isolated(tasks, 1, module=module, limits=ExtractLimits(memory=300 << 20))
    assert "needed more than 300 MB of memory" in out[0]["error"]
    assert "--extract-memory-mb" in out[0]["error"]
    assert out[1] == {"texts": ["a.pdf"]}
    captured = capfd.readouterr()
    assert "a library's warning" not in captured.err + captured.out


def test_an_allocation_failure_is_reported_as_memory(tmp_path):
    module = _module(tmp_path, """
        import os, sys
        def parse_pdf(path, display):
            sys.stderr.write("memory allocation of 549755813888 bytes failed\\n")
            sys.stderr.flush()
            os.abort()
    """)
    (out,) = run_isolated([Task(str(module), "parse_pdf", ("x", "x.xlsx"), "x.xlsx",
                                "the spreadsheet reader")], 1)
    assert out["error"].startswith("x.xlsx: the spreadsheet reader needed more than")


_SLOW_RUN = """
import signal, sys, time
# As in a terminal (a background job of a shell starts with SIGINT ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {root!r})
from arrowdedup.extract.isolated import parse_isolated
print("started", flush=True)
parse_isolated([({path!r}, "slow.pdf")], 1, module={module!r})
"""


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_workers_never_outlive_their_run(tmp_path, how):
    module = _module(tmp_path, """
        import time
        def parse_pdf(path, display):
            time.sleep(600)
    """)
    script = tmp_path / "run.py"
    script.write_text(_SLOW_RUN.format(root=str(ROOT), path=str(tmp_path / "slow.pdf"),
                                       module=str(module)))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == b"started"
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while not workers and time.monotonic() < deadline:
            workers = _children(parent.pid)
            time.sleep(0.2)
        assert workers, "the worker did not start"
        time.sleep(1.0)  # let it reach the sleep
        os.kill(parent.pid, how)
        parent.wait(timeout=60)
        deadline = time.monotonic() + 30
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), f"worker(s) {workers} outlived the run"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    if how == signal.SIGINT:
        assert parent.stderr is not None
        assert b"KeyboardInterrupt" in parent.stderr.read()  # the parent's, not the worker's


# ----------------------------------------------------------------------------- symlinks


def test_links_out_of_the_folder_are_not_followed_unless_asked(tmp_path):
    docs, elsewhere = tmp_path / "docs", tmp_path / "elsewhere"
    docs.mkdir()
    (elsewhere / "deep").mkdir(parents=True)
    (docs / "a.md").write_text("# A\n\nInside the folder.\n")
    (elsewhere / "secret.md").write_text("# Secret\n\nOutside the folder.\n")
    (elsewhere / "deep" / "more.md").write_text("# More\n\nAlso outside.\n")
    (docs / "secret.md").symlink_to(elsewhere / "secret.md")
    (docs / "linked").symlink_to(elsewhere / "deep")
    (docs / "alias.md").symlink_to(docs / "a.md")  # inside: read as before

    result = extract_documents(docs)
    assert sorted(result.segments["doc_id"].unique()) == ["a", "alias"]
    assert result.external_links == ("linked", "secret.md")
    lines = result.left_out()
    assert lines == [
        "not followed: linked (a symbolic link to outside the folder; follow such links with "
        "--follow-external-symlinks)",
        "not followed: secret.md (a symbolic link to outside the folder; follow such links "
        "with --follow-external-symlinks)"]
    assert result.manifest()["external_links"] == ["linked", "secret.md"]

    followed = extract_documents(docs, follow_external_symlinks=True)
    assert sorted(followed.segments["doc_id"].unique()) == ["a", "alias", "linked/more",
                                                             "secret"]
    assert followed.external_links == ()


# ----------------------------------------------------------------------------- CLI


def test_cli_skips_a_file_past_a_limit_in_one_line_and_refuses_it_without(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nFine text.\n")
    far_cell_xlsx(docs / "far.xlsx", "XFD1048576")
    runner = CliRunner()
    res = runner.invoke(app, ["extract", str(docs), "--out", str(tmp_path / "s.parquet"),
                              "--skip-bad-files"])
    assert res.exit_code == 0, res.output
    named = [line for line in res.output.splitlines() if "far.xlsx:" in line]
    assert len(named) == 1 and "--max-columns" in named[0]
    res = runner.invoke(app, ["extract", str(docs), "--out", str(tmp_path / "t.parquet")])
    assert res.exit_code == 1
    assert res.output.count("\n") == 1 and "--max-columns" in res.output
    res = runner.invoke(app, ["extract", str(docs), "--out", str(tmp_path / "u.parquet"),
                              "--max-columns", "20000", "--max-cells", "0"])
    assert res.exit_code == 1 and "--max-cells" in res.output


def test_ingest_of_hostile_files_is_bounded(tmp_path):
    """The issue's reproductions in one folder: exit 0 under --skip-bad-files, one line per
    skipped file, and a peak RSS of the whole process tree (workers included) <= 1.5 GB."""
    need(M2V_MODEL)
    folder = hostile_folder(tmp_path / "hostile")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    res, peak, _ = run_measured(
        [sys.executable, "-m", "arrowdedup", "ingest", str(folder), "--out",
         str(tmp_path / "store"), "--skip-bad-files", "-q", "-e", f"model2vec:{M2V_MODEL}"],
        timeout=560, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    for name, option in (("far.xlsx", "--max-columns"), ("zz.xlsx", "--max-cells"),
                         ("bomb.xlsx", "--max-text-mb"), ("wide.csv", "--max-columns")):
        lines = [line for line in res.stderr.splitlines() if f"{name}:" in line]
        assert len(lines) == 1 and option in lines[0], res.stderr
    assert "Traceback" not in res.stderr and "dtype" not in res.stderr
    assert peak <= 1.5 * 2**30, f"peak RSS {peak / 2**30:.2f} GB"
