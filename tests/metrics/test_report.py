"""`arrowdedup report`: one self-contained HTML page, rendered in headless Chromium.

Chromium is installed by the project (`make chromium`, a dependency of `make test`); the test
installs nothing and skips with the command to run when the binary is absent.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from arrowdedup.cli import app
from arrowdedup.metrics import connect, top_boosted
from tests.helpers.metrics_corpus import build_store, empty_frame, write_log

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1200,2000"]
PLOTS = ("Dedup ratio per document", "Dedup ratio per doc_type", "Salience boost",
         "Exact vs near vs filtered", "Retrieval dedup over searches")

runner = CliRunner()


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed: run `make chromium`")
    profile = tmp / "profile"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    build_store(tmp / "store")
    write_log(tmp / "store", "log", [(10, 7), (10, 10), (8, 4), (12, 11)])
    out = runner.invoke(app, ["report", str(tmp / "store"), "--out", str(tmp / "report.html")])
    assert out.exit_code == 0, out.output
    return tmp / "report.html"


def test_report_is_self_contained(report: Path) -> None:
    page = report.read_text(encoding="utf-8")
    sources = re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]*)['"]""", page)
    assert len(sources) == len(PLOTS)
    assert all(s.startswith("data:image/png;base64,") for s in sources)
    assert not re.search(r"https?://|<script|<link|@import|url\(", page)
    for title in (*PLOTS, "Warnings", "Most boosted segments and their merged duplicates"):
        assert f"<h2>{title}</h2>" in page
    for src in sources:  # every embedded image is a real PNG with content
        img = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
        assert img.format == "PNG" and img.width >= 600 and img.height >= 300
        assert np.asarray(img.convert("L")).std() > 5


def test_report_lists_warnings_and_the_most_boosted(report: Path) -> None:
    page = report.read_text(encoding="utf-8")
    con = connect(report.parent / "store")
    top = top_boosted(con, 10)
    assert top.height == 2 and top["doc_id"].to_list() == ["spam-1", "faq-1"]
    assert [len(d) for d in top["duplicates"].to_list()] == [5, 2]
    for seg in top["duplicates"][0]:
        assert seg["segment_id"] in page
    assert "spam-1" in page and "dedup_ratio_ingestion" in page


def test_report_renders_in_chromium(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    run = chromium(tmp_path, f"--screenshot={shot}", report.resolve().as_uri())
    assert shot.exists(), run.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(np.int16)
    assert pixels.shape[:2] == (2000, 1200)
    assert pixels.std() > 20  # not blank
    # Plot colours (saturated pixels) are on screen: the images were decoded and painted.
    saturation = pixels.max(axis=2) - pixels.min(axis=2)
    assert (saturation > 80).sum() > 5000

    # The same page plus a probe script reports each image's decoded size after load.
    probe = tmp_path / "probe.html"
    script = ("<script>window.addEventListener('load', () => { document.body.setAttribute("
              "'data-images', JSON.stringify([...document.images].map(i => "
              "[i.complete, i.naturalWidth, i.naturalHeight]))); });</script>")
    probe.write_text(report.read_text(encoding="utf-8").replace("</body>", script + "</body>"),
                     encoding="utf-8")
    run = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    found = re.search(r'data-images="([^"]*)"', run.stdout)
    assert found, run.stderr[-2000:]
    images = json.loads(found.group(1).replace("&quot;", '"'))
    assert len(images) == len(PLOTS)
    assert all(done and w >= 600 and h >= 300 for done, w, h in images)


def test_report_of_an_empty_store(tmp_path: Path) -> None:
    build_store(tmp_path / "s", empty_frame())
    out = runner.invoke(app, ["report", str(tmp_path / "s"), "--out", str(tmp_path / "r.html")])
    assert out.exit_code == 0, out.output
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == len(PLOTS)
    assert "No segment was boosted" in page and "no data yet" in page


def test_report_refuses_an_unwritable_path(tmp_path: Path) -> None:
    build_store(tmp_path / "s", empty_frame())
    out = runner.invoke(app, ["report", str(tmp_path / "s"), "--out",
                              str(tmp_path / "missing" / "r.html")])
    assert out.exit_code == 1 and out.output.startswith("error: cannot write the report")


def test_report_bytes_are_deterministic(report: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.html"
    out = runner.invoke(app, ["report", str(report.parent / "store"), "--out", str(again)])
    assert out.exit_code == 0, out.output
    assert again.read_bytes() == report.read_bytes()


LAYOUT_PROBE = """<script>window.addEventListener('load', () => {
  const box = e => { const r = e.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom]; };
  const blocks = [...document.body.children].map(e => [e.tagName, box(e)]);
  const cells = [...document.querySelectorAll('th, td')].map(e => [
    e.closest('table').previousElementSibling.textContent, e.tagName, box(e),
    e.scrollWidth > e.clientWidth + 1, e.textContent.length]);
  document.body.setAttribute('data-layout', JSON.stringify({
    width: window.innerWidth, page: document.documentElement.scrollWidth,
    body: box(document.body), blocks: blocks, cells: cells}));
});</script>"""


@pytest.fixture(scope="module")
def crowded_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every document above the high-dedup threshold, with long versioned ids: the warnings
    table lists them all, the case whose columns the browser squeezed to 1-3 characters."""
    from tests.helpers import segments_frame, unit

    tmp = tmp_path_factory.mktemp("crowded")
    rng = np.random.default_rng(3)
    texts, vectors, docs = [], [], []
    for d in range(24):
        doc = f"content/en/docs/v3.{d % 7}/reference/configuration/collector-{d:02d}"
        v = unit(rng.normal(size=16))
        for _i in range(4):
            texts.append(f"boilerplate {d}")  # exact copies: 75 % dedup in every document
            vectors.append(v)
            docs.append(doc)
    build_store(tmp / "store", segments_frame(texts, vectors, doc_id=docs))
    write_log(tmp / "store", "log", [(10, 4)] * 6)
    out = runner.invoke(app, ["report", str(tmp / "store"), "--out", str(tmp / "report.html")])
    assert out.exit_code == 0, out.output
    return tmp / "report.html"


@pytest.mark.parametrize("width", [1280, 800])
def test_report_layout_has_no_squeezed_clipped_or_overlapping_text(
    crowded_report: Path, tmp_path: Path, width: int
) -> None:
    probe = tmp_path / "layout.html"
    probe.write_text(crowded_report.read_text(encoding="utf-8").replace(
        "</body>", LAYOUT_PROBE + "</body>"), encoding="utf-8")
    run = chromium(tmp_path, f"--window-size={width},3000", "--virtual-time-budget=5000",
                   "--dump-dom", probe.as_uri())
    found = re.search(r'data-layout="([^"]*)"', run.stdout)
    assert found, run.stderr[-2000:]
    layout = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert layout["width"] == width
    # The page uses the window's width, and nothing runs off it sideways.
    left, _, right, _ = layout["body"]
    assert right - left >= 0.9 * width, layout["body"]
    assert layout["page"] <= width
    # Block elements (headings, tables, plots, paragraphs) follow each other without overlap.
    boxes = sorted((b for _, b in layout["blocks"] if b[3] > b[1]), key=lambda b: b[1])
    for upper, lower in itertools.pairwise(boxes):
        assert lower[1] >= upper[3] - 0.5, (upper, lower)
    # No cell clips its text, and no cell with text is squeezed below a few characters.
    warnings = [c for c in layout["cells"] if c[0] == "Warnings"]
    assert warnings, "the crowded store must raise warnings"
    for title, tag, (x0, _, x1, _), clipped, chars in layout["cells"]:
        assert not clipped, (title, tag)
        if chars >= 3:
            assert x1 - x0 >= 40, (title, tag, x1 - x0, chars)


def test_retrieval_warning_names_version_copies(tmp_path: Path) -> None:
    from arrowdedup.metrics import compute_warnings
    from arrowdedup.store import open_store
    from tests.helpers import segments_frame, unit

    rng = np.random.default_rng(5)
    texts, vectors, docs = [], [], []
    for version in ("3.5", "3.6", "3.7"):
        for i in range(5):  # the same page, copied into every version folder
            texts.append(f"Step {i} of the install guide.")
            vectors.append(unit(rng.normal(size=16)))
            docs.append(f"docs/v{version}/install")
    build_store(tmp_path / "store", segments_frame(texts, vectors, doc_id=docs))
    write_log(tmp_path / "store", "log", [(10, 3)] * 4)
    con = connect(tmp_path / "store")
    warnings = compute_warnings(con, open_store(tmp_path / "store").config.analytics)
    (retrieval,) = [w for w in warnings if w.metric == "dedup_ratio_retrieval"]
    assert "exact copy in another document" in retrieval.message
    assert "not too broad queries" in retrieval.message
    assert retrieval.doc_ids[:2] == ("docs/v3.5/install", "docs/v3.6/install")

    build_store(tmp_path / "plain")  # distinct documents: the queries are the suspect
    write_log(tmp_path / "plain", "log", [(10, 3)] * 4)
    con = connect(tmp_path / "plain")
    warnings = compute_warnings(con, open_store(tmp_path / "plain").config.analytics)
    (retrieval,) = [w for w in warnings if w.metric == "dedup_ratio_retrieval"]
    assert "queries too broad" in retrieval.message
