"""Text from documents never drives the terminal, and every table is usable at 80 columns.

Documents, doc_ids and file names here carry real terminal sequences: OSC 0 (window title),
OSC 52 (clipboard), BEL, BS, CR, CSI 2J (clear screen), a C1 CSI, newlines inside ids and the
bidi overrides and isolates. Every command that prints runs on them through the CLI runner
(piped) at 80 columns, and ``context``, ``versions`` and ``search`` also on a real terminal
(a pty): no raw control character reaches the output, no version id is cut, no header is cut.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from arrowdedup.cli import app
from arrowdedup.cli.app import wrap_id
from arrowdedup.escape import escape
from tests.helpers import M2V_MODEL, ROOT, need, on_a_terminal, segments_frame, unit

runner = CliRunner()
ESC = "\x1b"
OSC_TITLE = f"{ESC}]0;pwned{ESC}\\"
OSC_CLIPBOARD = f"{ESC}]52;c;ZWNobyBoaQ==\x07"
CLEAR = f"{ESC}[2J"
HOSTILE = (f"title {OSC_TITLE} clip {OSC_CLIPBOARD} bell \x07 back\x08\x08 clear {CLEAR} "
           f"c1 \x9b31m bidi \u202eevil\u202c iso \u2066x\u2069 cr\rover")
# Anything that can drive a terminal: C0 but newline (tab too), DEL, C1, the bidi controls.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
VERSION_ID = re.compile(r"\d{8}T\d{6}-[0-9a-f]*")


def run(args: list[str], width: int = 80) -> tuple[int, str, str]:
    result = runner.invoke(app, args, env={"COLUMNS": str(width)})
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def assert_safe(text: str, where: object) -> None:
    found = RAW.findall(text)
    assert not found, f"{where}: raw control characters {found!r} in {text[:2000]!r}"


def assert_fits(text: str, width: int = 80) -> None:
    wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not wide, f"{len(wide)} line(s) wider than {width}: {wide[:3]}"


def assert_version_ids_whole(text: str, where: object) -> None:
    cut = [m for m in VERSION_ID.findall(text) if len(m) != len("20261207T102219-0abcdef1")]
    assert not cut, f"{where}: version ids cut: {cut}"


# ----------------------------------------------------------------------------- the function


def test_escape_shows_every_control_character() -> None:
    shown = escape(f"a{OSC_CLIPBOARD}b\nc\td\u202ee\x9bf\rg{CLEAR}\x08\x7f\u2066")
    assert not RAW.search(shown) and "\n" not in shown and "\t" not in shown
    assert shown == ("a\\x1b]52;c;ZWNobyBoaQ==\\x07b\\nc\\td\\u202ee\\x9bf\\rg\\x1b[2J"
                     "\\x08\\x7f\\u2066")
    assert escape("plain words, ünïcode 日本語") == "plain words, ünïcode 日本語"
    assert escape(42) == "42"


def test_escape_keeps_the_layout_of_free_text_when_asked() -> None:
    text = f"# Title {OSC_TITLE}\n\n```sh\necho {CLEAR}\tdone\n```\n"
    shown = escape(text, keep_layout=True)
    assert shown == "# Title \\x1b]0;pwned\\x1b\\\n\n```sh\necho \\x1b[2J\tdone\n```\n"
    # Removed: whole sequences go (no "]0;pwned" left), the Markdown's newlines and tab stay.
    assert escape(text, keep_layout=True, remove=True) == "# Title \n\n```sh\necho \tdone\n```\n"
    removed = escape(HOSTILE, keep_layout=True, remove=True)
    assert not RAW.search(removed) and "pwned" not in removed and "ZWNo" not in removed
    assert "bidi evil" in removed and "iso x" in removed and "crover" in removed


def test_an_unterminated_osc_takes_at_most_its_line() -> None:
    assert escape(f"a {ESC}]0;never ends\nnext line", keep_layout=True, remove=True) == \
        "a \nnext line"


@pytest.mark.parametrize("text, width, lines, expected", [
    ("guides/operations-and-maintenance/configuring-the-collector-pipeline", 22, 2,
     "guides/operations-and-\n…collector-pipeline"),
    ("guides/operations-and-maintenance/configuring", 40, 2,
     "guides/operations-and-maintenance/\nconfiguring"),
    ("docs/v3.5/install", 40, 2, "docs/v3.5/install"),
    ("20261207T102219-0abcdef1", 24, 1, "20261207T102219-0abcdef1"),
    ("new\nline", 22, 2, "new\\nline"),
    ("a" * 30, 10, 2, "aaaaa…aaaa"),
])
def test_ids_wrap_only_at_separators(text: str, width: int, lines: int, expected: str) -> None:
    assert wrap_id(text, width, lines) == expected


def test_wrapped_ids_never_break_inside_a_word() -> None:
    rng = np.random.default_rng(3)
    words = ["operations", "maintenance", "collector", "pipeline", "v3", "x", "configuring"]
    for _ in range(300):
        parts = rng.choice(words, size=int(rng.integers(1, 9)))
        seps = rng.choice(list("/-_."), size=len(parts))
        text = "".join(p + s for p, s in zip(parts, seps, strict=True))[:-1]
        width, lines = int(rng.integers(12, 40)), int(rng.integers(1, 4))
        out = wrap_id(text, width, lines).split("\n")
        assert len(out) <= lines and all(len(r) <= width for r in out), (text, out)
        if "…" not in "".join(out):  # wrapped whole: every break follows a separator
            assert "".join(out) == text and all(r[-1] in "/-_." for r in out[:-1]), out
            continue
        # Shortened: the head rows start the id, the last row ("…" + tail) ends it, and the
        # tail starts after a separator (every word here fits the width, so none is cut).
        *head, last = out
        assert text.startswith("".join(head)) and all(r[-1] in "/-_." for r in head), out
        assert last.startswith("…") and "…" not in last[1:], out
        tail = last[1:]
        assert text.endswith(tail) and text[-len(tail) - 1] in "/-_.", (text, out)


# ----------------------------------------------------------------------------- a hostile corpus


def hostile_docs(root: Path) -> Path:
    """Documents whose texts, names and table headers hold terminal sequences."""
    docs = root / "docs"
    guide = docs / "guides" / "operations-and-maintenance"
    guide.mkdir(parents=True)
    para = f"The collector pipeline {HOSTILE} receives spans from every agent."
    (guide / "configuring-the-collector-pipeline.md").write_text(
        f"# Setup {OSC_TITLE}\n\n{para}\n\n{para}\n\n```sh\necho {CLEAR} hi\n```\n",
        encoding="utf-8")
    (docs / f"bad{ESC}]0;x\x07name\u202e.md").write_text(
        f"# Name {CLEAR}\n\nA file with a hostile name {ESC}[31mred.\n\n"
        "Another paragraph about exporters and receivers.\n", encoding="utf-8")
    (docs / f"new\nline{CLEAR}.md").write_text(
        "# Newline\n\nA file name with a newline in it and spans.\n", encoding="utf-8")
    (docs / "c1\x9bcr\rname.md").write_text("# C1\n\nA name with a C1 CSI and a CR.\n",
                                           encoding="utf-8")
    (docs / "faq.md").write_text(
        "# FAQ\n\nHow do I configure the exporter?\n\n"
        "Use the exporter config block in the collector file.\n\n"
        "Use the exporter config block in the collector file!\n", encoding="utf-8")
    (docs / f"table{CLEAR}.csv").write_text(
        f"id,name{OSC_TITLE},desc\n1,a{CLEAR},first row text about spans\n"
        "2,b\u202e,second row text about spans\n", encoding="utf-8")
    (docs / f"binary{OSC_CLIPBOARD}.md").write_bytes(bytes(range(256)) * 4)
    return docs


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    need(M2V_MODEL)
    tmp = tmp_path_factory.mktemp("hostile")
    docs = hostile_docs(tmp)
    store = tmp / "store"
    spec = f"model2vec:{M2V_MODEL}"
    code, out, err = run(["ingest", str(docs), "--out", str(store), "-e", spec,
                          "--skip-bad-files"])
    assert code == 0, err
    first = {"out": out, "err": err}
    # A second version (the versions table then has a parent), with one more document.
    (docs / f"added{CLEAR}.md").write_text(f"# Added\n\nUse the config block {CLEAR}.\n",
                                            encoding="utf-8")
    code, _, err = run(["ingest", str(docs), "--out", str(store), "--update",
                        "--skip-bad-files", "-q"])
    assert code == 0, err
    pairs = tmp / f"pairs{CLEAR}.tsv"
    pairs.write_text("sentence1\tsentence2\tlabel\n"
                     "The cat sat on the mat.\tA cat sat on the mat.\t1\n"
                     f"Open the {OSC_TITLE} door.\tClose the window.\t0\n"
                     "The server restarts nightly.\tThe server reboots every night.\t1\n",
                     encoding="utf-8")
    return {"docs": docs, "store": store, "spec": spec, "tmp": tmp, "first": first,
            "pairs": pairs}


def test_ingest_prints_names_as_escapes_and_ids_wrapped(hostile: dict[str, object]) -> None:
    out, err = hostile["first"]["out"], hostile["first"]["err"]  # type: ignore[index]
    assert_safe(out + err, "ingest")
    assert_fits(out)
    # The stderr notes name the files, escaped: "skipped …" and "keys of …".
    assert "skipped binary\\x1b]52;c;ZWNobyBoaQ==\\x07.md: " in err
    assert "keys of table\\x1b[2J: id (detected)" in err
    # A run given --skip-bad-files is not told to skip the file with it.
    assert "--skip-bad-files" not in err and "is a binary file" in err
    # The id wraps after a '-' (never "operations-an" / "…d-maintenance").
    assert "guides/operations-" in out and "operations-an\n" not in out
    assert "new\\nline\\x1b[2J" in out and "c1\\x9bcr\\rname" in out


def _commands(h: dict[str, object]) -> dict[str, list[str]]:
    store, docs, spec, tmp = (str(h["store"]), str(h["docs"]), str(h["spec"]), h["tmp"])
    assert isinstance(tmp, Path)
    return {
        "ingest": ["ingest", docs, "--out", str(tmp / "again"), "-e", spec,
                   "--skip-bad-files"],
        "extract": ["extract", docs, "--out", str(tmp / "x.parquet"), "--skip-bad-files"],
        "verbose": ["-v", "extract", docs, "--out", str(tmp / "v.parquet"),
                    "--skip-bad-files"],
        "update": ["ingest", docs, "--out", store, "--update", "--dry-run",
                   "--skip-bad-files"],
        "search": ["search", store, "collector pipeline spans", "-k", "6"],
        "context": ["context", store, "collector pipeline spans", "-k", "6", "--expand", "3"],
        "merges": ["merges", store],
        "stats": ["stats", store],
        "stats-sql": ["stats", store, "--sql",
                      "SELECT doc_id, doc_id AS \"h\x1b[2J\" FROM documents"],
        "versions": ["versions", store],
        "verify": ["verify", store],
        "report": ["report", store, "--out", str(tmp / "report.html")],
        "calibrate": ["calibrate", str(h["pairs"]), "-e", spec],
        "delete": ["delete", store, f"table{CLEAR}", "--dry-run"],
        "prune": ["prune", store, "--dry-run"],
        "compact": ["compact", str(tmp / "again")],
        "rollback": ["rollback", str(tmp / "again")],
    }


def _second_store(h: dict[str, object], name: str) -> None:
    """``compact`` and ``rollback`` change a store: they get their own, with two versions
    for ``rollback`` to go back from."""
    if name in ("compact", "rollback"):
        for _ in range(2 if name == "rollback" else 1):
            code, _, err = run([*_commands(h)["ingest"], "-q"])
            assert code == 0, err


COMMAND_NAMES = ("ingest", "extract", "verbose", "update", "search", "context", "merges",
                 "stats", "stats-sql", "versions", "verify", "report", "calibrate", "delete",
                 "prune", "compact", "rollback")


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_every_command_at_80_columns_prints_no_control_character(
        hostile: dict[str, object], name: str) -> None:
    args = _commands(hostile)[name]
    _second_store(hostile, name)
    code, out, err = run(args)
    assert code == 0, (name, err)
    assert_safe(out + err, name)
    if name != "context":  # Markdown, whose lines are the documents' own
        assert_fits(out)
    assert_version_ids_whole(out + err, name)
    if name == "verbose":  # the log line names the skipped file, escaped
        assert re.search(r"skipped \S*binary\\x1b\]52;c;", err), err
    if name not in ("search", "context"):  # whose text column may end a word with "…"
        assert not re.search(r"(^|\s)\w{1,4}…", out), (name, out)  # no "se… c…" header


# "stats-sql" is the stats command with --sql: its --json is the case "stats".
@pytest.mark.parametrize("name", [n for n in COMMAND_NAMES if n != "stats-sql"])
def test_every_command_has_json(hostile: dict[str, object], name: str) -> None:
    """The README: every command takes --json and prints one JSON document on stdout."""
    args = _commands(hostile)[name]
    _second_store(hostile, name)
    code, out, err = run([*args, "--json"])
    assert code == 0, (name, err)
    json.loads(out)
    assert_safe(out + err, name)


def test_every_registered_command_takes_json() -> None:
    names = sorted(c.name or c.callback.__name__  # type: ignore[union-attr]
                   for c in app.registered_commands)
    for name in names:
        code, out, _ = run([name, "--help"], 200)
        assert code == 0 and "--json" in out, name


def test_versions_at_80_columns_keeps_ids_and_headers_whole(hostile: dict[str, object]) -> None:
    from arrowdedup.store.versions import list_versions

    code, out, _ = run(["versions", str(hostile["store"])])
    assert code == 0
    assert_fits(out)
    infos = list_versions(hostile["store"])  # type: ignore[arg-type]
    assert len(infos) >= 2
    for v in infos:
        assert v.id in out
        if v.parent:
            assert v.parent in out
    for header in ("id", "parent", "created_at", "docs", "segments", "added", "changed",
                   "removed", "deltas"):
        assert re.search(rf"(^|\s){header}(\s|$)", out, re.M), (header, out)
    assert "…" not in out
    code, wide, _ = run(["versions", str(hostile["store"])], 200)
    assert code == 0 and all(v.id in wide for v in infos)


def test_merges_table_keeps_its_header(hostile: dict[str, object]) -> None:
    code, out, _ = run(["merges", str(hostile["store"])])
    assert code == 0 and "doc_id" in out and "do…" not in out


# ----------------------------------------------------------------------------- context


def test_context_piped_is_markdown_without_control_characters(
        hostile: dict[str, object]) -> None:
    code, out, err = run(["context", str(hostile["store"]), "collector pipeline spans",
                          "-k", "6", "--expand", "3"])
    assert code == 0, err
    assert_safe(out, "context")
    assert "\\x1b" not in out  # removed, not shown: Markdown for a prompt
    assert "pwned" not in out and "ZWNo" not in out  # the sequences' payloads went too
    assert "receives spans from every agent" in out and "bidi evil" in out
    assert "```sh\necho  hi\n```" in out  # the fence and its newlines stay


def _on_a_terminal(args: list[str]) -> str:
    """stdout of an ``arrowdedup`` run whose stdout is a terminal (a pty)."""
    env = dict(os.environ, COLUMNS="80", PYTHONPATH=str(ROOT))
    env.pop("NO_COLOR", None)
    out = on_a_terminal(args, env, stream="stdout")
    # The terminal turns "\n" into "\r\n"; rich styles headers with SGR codes (ours, safe).
    return re.sub(r"\x1b\[[0-9;]*m", "", out.decode("utf-8").replace("\r\n", "\n"))


def test_context_on_a_terminal_shows_control_characters_and_no_osc(
        hostile: dict[str, object]) -> None:
    out = _on_a_terminal(["context", str(hostile["store"]), "collector pipeline spans",
                          "-k", "6", "--expand", "3"])
    assert "\x1b]" not in out  # no OSC at all: no hyperlink, no title of our own
    assert_safe(out, "context on a terminal")
    assert "\\x1b]0;pwned\\x1b\\" in out and "\\x07" in out and "\\u202e" in out
    assert "\\x1b[2J" in out
    assert "```sh\necho \\x1b[2J hi\n```" in out


@pytest.mark.parametrize("command", ["versions", "search", "merges"])
def test_tables_on_a_terminal_show_control_characters(hostile: dict[str, object],
                                                      command: str) -> None:
    args = [command, str(hostile["store"])]
    if command == "search":
        args += ["collector pipeline spans", "-k", "6"]
    out = _on_a_terminal(args)
    assert "\x1b]" not in out
    assert_safe(out, command)
    assert_fits(out)
    assert_version_ids_whole(out, command)


# ----------------------------------------------------------------------------- item 11 and 7


def test_skip_hint_only_without_the_flag(tmp_path: Path) -> None:
    docs = tmp_path / "d"
    docs.mkdir()
    (docs / "ok.md").write_text("# A\n\nSome words.\n", encoding="utf-8")
    (docs / "blob.md").write_bytes(bytes(range(256)) * 4)
    code, _, err = run(["extract", str(docs), "--out", str(tmp_path / "a.parquet")])
    assert code == 1 and "--skip-bad-files" in err  # the way out is offered
    code, _, err = run(["extract", str(docs), "--out", str(tmp_path / "b.parquet"),
                        "--skip-bad-files"])
    assert code == 0 and "skipped blob.md: " in err
    # One line names the file and the reason.
    (line,) = [x for x in err.splitlines() if "blob.md" in x]
    assert line.startswith("skipped blob.md: ") and "is a binary file" in line
    assert "--skip-bad-files" not in err
    code, out, _ = run(["extract", str(docs), "--out", str(tmp_path / "c.parquet"),
                        "--skip-bad-files", "--json"])
    assert code == 0
    (skipped,) = json.loads(out)["skipped_files"]
    assert "--skip-bad-files" not in skipped["reason"]


@pytest.fixture(scope="module")
def many_merges(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 30 documents with one near merge each; doc_types ``$x_$`` and one that
    clears the screen."""
    from arrowdedup import ingest_to_store

    rng = np.random.default_rng(0)
    texts, embeddings, docs = [], [], []
    for i in range(30):
        base = unit(rng.normal(size=8))
        texts += [f"alpha beta {i} words here", f"alpha beta {i} words here!"]
        embeddings += [base, unit(base + 0.001)]
        docs += [f"guides/operations-and-maintenance/page-{i:02d}{CLEAR}"] * 2
    frame = segments_frame(texts, embeddings, doc_id=docs, salience=[0.9, 0.5] * 30,
                           doc_type=["$x_$"] * 30 + [f"type{CLEAR}"] * 30)
    root = tmp_path_factory.mktemp("merges") / "s"
    ingest_to_store(frame, root, quiet=True, config={"Ingestion": {"FactGuard": False}})
    return root


def test_merges_json_returns_every_row_unless_n(many_merges: Path) -> None:
    code, out, _ = run(["merges", str(many_merges), "--json"])
    assert code == 0 and len(json.loads(out)) == 30
    code, out, _ = run(["merges", str(many_merges), "--json", "-n", "3"])
    assert code == 0 and len(json.loads(out)) == 3
    code, out, _ = run(["merges", str(many_merges)])  # the table: the first 20
    assert code == 0 and out.count("page-") == 20
    assert_safe(out, "merges")
    assert_fits(out)


def test_report_draws_a_dollar_label(many_merges: Path, tmp_path: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        # matplotlib's "Glyph 27 missing from font" for an ESC in a label fails the test.
        warnings.simplefilter("error", UserWarning)
        code, out, err = run(["report", str(many_merges), "--out", str(tmp_path / "r.html")])
    assert code == 0, err
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "$x_$" in page and "Traceback" not in err
    code, out, _ = run(["report", str(many_merges), "--out", str(tmp_path / "j.html"),
                        "--json"])
    assert code == 0 and json.loads(out)["report"] == str(tmp_path / "j.html")


def test_doc_type_figure_label_is_drawn_as_written() -> None:
    """The escaped label is drawn as the text itself, not as mathtext."""
    import io

    from matplotlib.figure import Figure

    from arrowdedup.metrics.report import _label

    fig = Figure()
    ax = fig.add_subplot()
    ax.bar([_label("$x_$"), _label("a$b")], [1, 2])
    fig.savefig(io.BytesIO(), format="png")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["\\$x_\\$", "a\\$b"]
    assert not any(t._preprocess_math(t.get_text())[1] for t in ax.get_xticklabels())


def test_counts_are_integers(many_merges: Path) -> None:
    code, out, _ = run(["stats", str(many_merges), "--json"])
    assert code == 0
    data = json.loads(out)
    assert isinstance(data["guard_refused_merges"], int)
    assert all(isinstance(r["documents"], int) and isinstance(r["segments"], int)
               for r in data["dedup_by_doc_type"])
    code, out, _ = run(["stats", str(many_merges), "--format", "prometheus"])
    assert code == 0
    assert 'arrowdedup_documents_by_doc_type{doc_type="$x_$"} 15\n' in out
    assert not re.search(r"_by_doc_type\{[^}]*\} \d+\.0\n", out)
    code, out, _ = run(["stats", str(many_merges), "--sql",
                        "SELECT sum(original_count)::DOUBLE AS n FROM documents"])
    assert code == 0 and " 60 " in out and "60.0" not in out


def test_prometheus_labels_exact_when_piped_escaped_on_a_terminal(many_merges: Path) -> None:
    code, out, _ = run(["stats", str(many_merges), "--format", "prometheus"])
    assert code == 0 and f'doc_type="type{CLEAR}"' in out  # a scraper reads the value
    shown = _on_a_terminal(["stats", str(many_merges), "--format", "prometheus"])
    assert 'doc_type="type\\x1b[2J"' in shown
    assert_safe(shown, "prometheus on a terminal")


def test_stats_table_escapes_doc_types(many_merges: Path) -> None:
    code, out, _ = run(["stats", str(many_merges)])
    assert code == 0 and "type\\x1b[2J" in out and "$x_$" in out
    assert_safe(out, "stats")
    assert_fits(out)
