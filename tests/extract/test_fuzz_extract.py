"""Fuzzing the extractors with hostile files (issue 45): workbooks, CSVs, PDFs and Markdown,
random, bit-flipped, truncated, with huge dimensions, deep nesting, binary garbage, NUL bytes
and giant lines. Each batch is one folder extracted with ``skip_bad_files``: every file is
either read or skipped with one line that names it, within a bounded time and with the
extraction workers held to a bounded memory; nothing else escapes (no traceback, no native
abort, no other library's output)."""

from __future__ import annotations

import random
import zipfile
from pathlib import Path

import pytest

from arrowdedup.errors import ArrowDedupError
from arrowdedup.extract import ExtractLimits, extract_documents
from tests.helpers import DOCS
from tests.helpers.hostile import (
    column_letters,
    far_cell_xlsx,
    shared_string_bomb_xlsx,
    table_xlsx,
    write_xlsx,
)

# Small limits keep every case cheap; a file past one is a clean refusal all the same.
LIMITS = ExtractLimits(max_cells=200_000, max_columns=500, max_text_bytes=8 << 20,
                       timeout=120, memory=768 << 20)
CASES = 12  # random cases per kind (seeded: the same files on every run)


def flip_bits(data: bytes, rng: random.Random, flips: int) -> bytes:
    out = bytearray(data)
    for _ in range(flips):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def mutations(seed: bytes, rng: random.Random) -> list[bytes]:
    """Bit flips, truncations, spliced garbage and pure garbage of ``seed``."""
    out = []
    for k in range(CASES):
        kind = k % 4
        if kind == 0:
            out.append(flip_bits(seed, rng, rng.randint(1, 40)))
        elif kind == 1:
            out.append(seed[:rng.randrange(1, len(seed))])
        elif kind == 2:
            at = rng.randrange(len(seed))
            out.append(seed[:at] + rng.randbytes(rng.randint(1, 4096)) + seed[at:])
        else:
            out.append(rng.randbytes(rng.randint(0, 20_000)))
    return out


def check_batch(folder: Path, expect_read: set[str]) -> None:
    """Extract ``folder``: every file is read or skipped with one line naming it."""
    result = extract_documents(folder, skip_bad_files=True, limits=LIMITS, workers=2)
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    done = set(result.files)
    skipped = {s.path: s.reason for s in result.skipped}
    assert done | set(skipped) == names - set(result.unsupported)
    for path, reason in skipped.items():
        assert "\n" not in reason and reason.strip(), (path, reason)
        assert Path(path).name in reason, (path, reason)
        assert "Traceback" not in reason
    assert expect_read <= done, (expect_read - done, skipped)


def refusals_are_one_line(paths: list[Path]) -> None:
    """Without ``skip_bad_files`` a bad file is one ArrowDedupError line, never another."""
    for path in paths:
        try:
            extract_documents(path, limits=LIMITS)
        except ArrowDedupError as err:
            assert "\n" not in str(err) and path.name in str(err)


# ----------------------------------------------------------------------------- workbooks


def _xlsx_cases(folder: Path, rng: random.Random) -> set[str]:
    table_xlsx(folder / "valid.xlsx", rows=20, columns=4)
    seed = (folder / "valid.xlsx").read_bytes()
    for i, data in enumerate(mutations(seed, rng)):
        (folder / f"mutated-{i}.xlsx").write_bytes(data)
    # Hostile shapes, each past a limit or odd but valid.
    far_cell_xlsx(folder / "far.xlsx", "XFD1048576")
    far_cell_xlsx(folder / "zz.xlsx", "ZZ200000")
    shared_string_bomb_xlsx(folder / "bomb.xlsx", rows=5_000, size=5_000)
    for i in range(CASES):
        refs = [f"{column_letters(rng.randint(1, 16384))}{rng.randint(1, 1048576)}"
                for _ in range(rng.randint(1, 6))]
        body = "".join(f'<row><c r="{r}"><v>{rng.random()}</v></c></row>' for r in refs)
        write_xlsx(folder / f"random-refs-{i}.xlsx", [body])
    # The sheet part decompresses to far more than its size (a zip bomb in a workbook).
    with zipfile.ZipFile(folder / "valid.xlsx") as z:
        parts = {n: z.read(n) for n in z.namelist()}
    with zipfile.ZipFile(folder / "zipbomb.xlsx", "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            if name == "xl/worksheets/sheet1.xml":
                data = data.replace(b"<sheetData>", b"<sheetData>" + b" " * (200 << 20))
            z.writestr(name, data)
    return {"valid.xlsx"}


@pytest.mark.timeout(900)
def test_fuzz_workbooks(tmp_path):
    rng = random.Random(45)
    folder = tmp_path / "books"
    folder.mkdir()
    expect = _xlsx_cases(folder, rng)
    for name in ("tallybird-plans.xls", "otel-pdf-pages.ods"):
        seed = (DOCS / name).read_bytes()
        suffix = Path(name).suffix
        for i, data in enumerate(mutations(seed, rng)[:6]):
            (folder / f"{Path(name).stem}-{i}{suffix}").write_bytes(data)
    check_batch(folder, expect)
    refusals_are_one_line([folder / "far.xlsx", folder / "mutated-0.xlsx"])


# ----------------------------------------------------------------------------- CSV


def _csv_cases(folder: Path, rng: random.Random) -> set[str]:
    valid = "id,name,amount\n" + "".join(f"A-{i},item {i},{i * 1.5}\n" for i in range(50))
    (folder / "valid.csv").write_text(valid, encoding="utf-8")
    for i, data in enumerate(mutations(valid.encode(), rng)):
        (folder / f"mutated-{i}.csv").write_bytes(data)
    cases: dict[str, bytes] = {
        "nul.csv": b"a,b\n1,\x002\n",
        "giant-line.csv": b"a,b\n" + b"x" * (4 << 20) + b",1\n",
        "giant-field-quoted.csv": b'a,b\n"' + b"y" * (2 << 20) + b'",1\n',
        "unbalanced-quote.csv": b'a,b\n"1,2\n3,4\n',
        "wide.csv": (",".join(f"c{i}" for i in range(100_000)) + "\n").encode(),
        "many-lines.csv": b"a,b\n" + b"1,2\n" * 200_000,
        "only-newlines.csv": b"\n" * 100_000,
        "ragged.csv": b"a,b\n1\n1,2,3\n",
        "latin1.csv": "a,b\ncaf\xe9,1\n".encode("latin-1"),
        "bom-crlf.csv": b"\xef\xbb\xbfa,b\r\n1,2\r\n",
        "dup-header.csv": b"a,a\n1,2\n",
        "tabs.tsv": b"a\tb\n1\t2\n" + b"\t".join([b"x"] * 5000) + b"\n",
    }
    for name, data in cases.items():
        (folder / name).write_bytes(data)
    return {"valid.csv", "bom-crlf.csv"}


@pytest.mark.timeout(900)
def test_fuzz_csv(tmp_path):
    folder = tmp_path / "csv"
    folder.mkdir()
    expect = _csv_cases(folder, random.Random(46))
    check_batch(folder, expect)
    refusals_are_one_line([folder / "wide.csv", folder / "nul.csv", folder / "many-lines.csv"])


# ----------------------------------------------------------------------------- PDF


@pytest.mark.timeout(900)
def test_fuzz_pdfs(tmp_path):
    rng = random.Random(47)
    folder = tmp_path / "pdf"
    folder.mkdir()
    seed = (DOCS / "invoice-A-1042.pdf").read_bytes()
    (folder / "valid.pdf").write_bytes(seed)
    for i, data in enumerate(mutations(seed, rng)):
        (folder / f"mutated-{i}.pdf").write_bytes(data)
    (folder / "empty.pdf").write_bytes(b"")
    (folder / "header-only.pdf").write_bytes(b"%PDF-1.7\n")
    # Deeply nested arrays and a huge declared object count.
    (folder / "nested.pdf").write_bytes(b"%PDF-1.4\n1 0 obj\n" + b"[" * 100_000 + b"]" * 100_000
                                        + b"\nendobj\ntrailer\n<< /Size 999999999 >>\n%%EOF\n")
    (folder / "nul.pdf").write_bytes(b"%PDF-1.4\n" + b"\x00" * 100_000)
    check_batch(folder, {"valid.pdf"})


# ----------------------------------------------------------------------------- Markdown


def _markdown_cases(folder: Path, rng: random.Random) -> set[str]:
    valid = "# Title\n\nA paragraph.\n\n## Part\n\n- one\n- two\n\n```python\nx = 1\n```\n"
    (folder / "valid.md").write_text(valid, encoding="utf-8")
    for i, data in enumerate(mutations(valid.encode(), rng)):
        (folder / f"mutated-{i}.md").write_bytes(data)
    depth = 20_000
    cases: dict[str, str | bytes] = {
        "deep-quotes.md": ">" * depth + " deep\n",
        "deep-lists.md": "".join("  " * i + "- item\n" for i in range(2_000)),
        "deep-brackets.md": "[" * depth + "x" + "]" * depth + "\n",
        "deep-emphasis.md": "*" * depth + "x" + "*" * depth + "\n",
        "giant-line.md": "word " * 1_000_000 + "\n",
        "giant-heading.md": "#" * 6 + " " + "h" * 2_000_000 + "\n",
        "nul.md": b"# A\n\nsome \x00 text\n",
        "garbage.md": rng.randbytes(50_000),
        "front-matter-bomb.md": "---\na: &a [" + ",".join(["x"] * 1000) + "]\n"
        + "".join(f"b{i}: &b{i} [*{'a' if i == 0 else f'b{i - 1}'}, "
                  f"*{'a' if i == 0 else f'b{i - 1}'}]\n" for i in range(30))
        + "---\n\n# Body\n",
        "control.md": "# T\n\n\x1b]0;title\x07\x1b[2J text\n" + "Plain words. " * 50 + "\n",
        "html-heavy.md": "<div>" * 5000 + "x" + "</div>" * 5000 + "\n",
    }
    for name, data in cases.items():
        path = folder / name
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    return {"valid.md", "deep-lists.md", "control.md"}


@pytest.mark.timeout(900)
def test_fuzz_markdown(tmp_path):
    folder = tmp_path / "md"
    folder.mkdir()
    expect = _markdown_cases(folder, random.Random(48))
    check_batch(folder, expect)
