"""Hostile input files, written byte by byte as an attacker would (no spreadsheet library):
workbooks with far cells or shared-string bombs, wide CSVs, and a reader of the peak RSS of a
whole process tree (the parent and every worker)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
    'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-'
    'officedocument.spreadsheetml.sheet.main+xml"/>'
    '{sheets}'
    '<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-'
    'officedocument.spreadsheetml.sharedStrings+xml"/></Types>'
)
_SHEET_TYPE = ('<Override PartName="/xl/worksheets/sheet{n}.xml" ContentType="application/'
               'vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>')
_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>'
)
_MAIN = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
_NS = ('xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
       'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"')


def column_letters(index: int) -> str:
    """1 → A, 27 → AA, 16384 → XFD."""
    out = ""
    while index:
        index, rest = divmod(index - 1, 26)
        out = chr(65 + rest) + out
    return out


def write_xlsx(path: Path, sheets: Sequence[str], shared: Sequence[str] = (),
               *, dimension: Sequence[str | None] | None = None) -> Path:
    """An xlsx whose sheets hold the given ``<sheetData>`` bodies (raw XML) verbatim."""
    dims = list(dimension) if dimension is not None else [None] * len(sheets)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", _CONTENT_TYPES.format(sheets="".join(
            _SHEET_TYPE.format(n=i + 1) for i in range(len(sheets)))))
        z.writestr("_rels/.rels", _RELS)
        z.writestr("xl/workbook.xml", (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<workbook {_NS}><sheets>'
            + "".join(f'<sheet name="Sheet{i + 1}" sheetId="{i + 1}" r:id="rId{i + 1}"/>'
                      for i in range(len(sheets)))
            + "</sheets></workbook>"))
        z.writestr("xl/_rels/workbook.xml.rels", (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns='
            '"http://schemas.openxmlformats.org/package/2006/relationships">'
            + "".join(f'<Relationship Id="rId{i + 1}" Type="http://schemas.openxmlformats.org/'
                      f'officeDocument/2006/relationships/worksheet" '
                      f'Target="worksheets/sheet{i + 1}.xml"/>' for i in range(len(sheets)))
            + f'<Relationship Id="rId{len(sheets) + 1}" Type="http://schemas.openxmlformats.org/'
              'officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/>'
            + "</Relationships>"))
        for i, (body, dim) in enumerate(zip(sheets, dims, strict=True)):
            head = f'<dimension ref="{dim}"/>' if dim else ""
            z.writestr(f"xl/worksheets/sheet{i + 1}.xml", (
                f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<worksheet {_NS}>'
                f"{head}<sheetData>{body}</sheetData></worksheet>"))
        z.writestr("xl/sharedStrings.xml", (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<sst {_MAIN} '
            f'count="{len(shared)}" uniqueCount="{len(shared)}">'
            + "".join(f"<si><t>{s}</t></si>" for s in shared) + "</sst>"))
    return path


def far_cell_xlsx(path: Path, ref: str) -> Path:
    """A1 holds a header, one more cell sits at ``ref`` (e.g. XFD1048576): tiny on disk, a
    bounding box of billions of cells once a reader materialises it."""
    row = int("".join(c for c in ref if c.isdigit()))
    return write_xlsx(path, [
        '<row r="1"><c r="A1" t="inlineStr"><is><t>name</t></is></c></row>'
        f'<row r="{row}"><c r="{ref}"><v>1</v></c></row>'], dimension=[f"A1:{ref}"])


def shared_string_bomb_xlsx(path: Path, rows: int = 100_000, size: int = 20_000) -> Path:
    """``rows`` rows whose one cell points at the same ``size``-byte shared string."""
    body = '<row r="1"><c r="A1" t="inlineStr"><is><t>text</t></is></c></row>' + "".join(
        f'<row r="{r}"><c r="A{r}" t="s"><v>0</v></c></row>' for r in range(2, rows + 2))
    return write_xlsx(path, [body], ["x" * size])


def table_xlsx(path: Path, rows: int, columns: int) -> Path:
    """An ordinary sheet: a header row and ``rows`` rows of numbers."""
    head = '<row r="1">' + "".join(
        f'<c r="{column_letters(c)}1" t="inlineStr"><is><t>c{c}</t></is></c>'
        for c in range(1, columns + 1)) + "</row>"
    body = "".join(
        f'<row r="{r}">' + "".join(f'<c r="{column_letters(c)}{r}"><v>{r * c}</v></c>'
                                   for c in range(1, columns + 1)) + "</row>"
        for r in range(2, rows + 2))
    return write_xlsx(path, [head + body],
                      dimension=[f"A1:{column_letters(columns)}{rows + 1}"])


def wide_csv(path: Path, columns: int, rows: int = 1) -> Path:
    """A header of ``columns`` names and ``rows`` rows of small numbers."""
    with path.open("w", encoding="utf-8") as f:
        f.write(",".join(f"col{i}" for i in range(columns)) + "\n")
        for r in range(rows):
            f.write(",".join(str((r + i) % 10) for i in range(columns)) + "\n")
    return path


def hostile_folder(folder: Path, wide_columns: int = 1_000_000) -> Path:
    """The issue's reproductions side by side (far cells at XFD1048576 and ZZ200000, a
    shared-string bomb, a CSV of ``wide_columns`` columns) beside an ordinary workbook and a
    Markdown file."""
    folder.mkdir()
    far_cell_xlsx(folder / "far.xlsx", "XFD1048576")
    far_cell_xlsx(folder / "zz.xlsx", "ZZ200000")
    shared_string_bomb_xlsx(folder / "bomb.xlsx")
    wide_csv(folder / "wide.csv", wide_columns)
    table_xlsx(folder / "fine.xlsx", rows=50, columns=4)
    (folder / "notes.md").write_text("# Notes\n\nA paragraph that is fine to read.\n")
    return folder


# ----------------------------------------------------------------------------- memory


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants, from /proc (0 when gone)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{entry}/statm", "rb") as f:
                rss[int(entry)] = int(f.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total


def run_measured(cmd: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
                 cwd: str | Path | None = None, kill_above: int = 0,
                 ) -> tuple[subprocess.CompletedProcess[str], int, float]:
    """Run ``cmd``; its result, the peak RSS of its process tree (bytes, polled every 50 ms)
    and the wall time in seconds. Past ``timeout`` seconds, or ``kill_above`` bytes (the
    machine's safety, for measuring code without bounds; 0: no limit), the tree is killed
    (return code -9)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=cwd, start_new_session=True)
    peak = 0
    done = threading.Event()

    def poll() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            if kill_above and peak > kill_above:
                os.killpg(proc.pid, 9)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.communicate()
        done.set()
        watcher.join()
    return (subprocess.CompletedProcess(cmd, proc.returncode, out, err), peak,
            time.perf_counter() - start)
