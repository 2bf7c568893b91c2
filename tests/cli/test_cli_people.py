"""The command line as a new user meets it (issue: narrow terminals, clean output, filters).

Every command is run at 80 and 200 columns (``COLUMNS``, as a pipe or CI sees it): no line is
wider than the terminal, tables keep every column, ids are shortened from the middle, help is
wrapped, not cut. ``--json`` prints one JSON document on stdout and nothing else.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from arrowdedup.cli import app
from arrowdedup.store.integrity import manifest_text
from tests.helpers import M2V_MODEL, ROOT, need, on_a_terminal

SAMPLE = ROOT / "data" / "sample"
# Every registered command, so a new one is held to the same rules.
COMMANDS = tuple(sorted(c.name or c.callback.__name__  # type: ignore[union-attr]
                        for c in app.registered_commands))
runner = CliRunner()


def run(args: list[str], width: int = 80) -> tuple[int, str, str]:
    result = runner.invoke(app, args, env={"COLUMNS": str(width)})
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def assert_fits(text: str, width: int) -> None:
    wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not wide, f"{len(wide)} line(s) wider than {width}: {wide[:3]}"


def sample_copy(tmp: Path) -> Path:
    """The sample corpus plus two versions of one page, an image and a binary '.md'."""
    docs = tmp / "sample"
    shutil.copytree(SAMPLE, docs, ignore=shutil.ignore_patterns("README.md"))
    for version in ("3.9", "3.10"):
        folder = docs / "docs" / f"v{version}"
        folder.mkdir(parents=True)
        page = (SAMPLE / "docs" / "quickstart.md").read_text(encoding="utf-8")
        (folder / "quickstart.md").write_text(page, encoding="utf-8")
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (docs / "blob.md").write_bytes(bytes(range(256)) * 4)
    return docs


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    need(M2V_MODEL)
    tmp = tmp_path_factory.mktemp("people")
    docs = sample_copy(tmp)
    store = tmp / "store"
    spec = f"model2vec:{M2V_MODEL}"
    code, _out, err = run(["ingest", str(docs), "--out", str(store), "-e", spec,
                          "--skip-bad-files", "--doc-version-from-path", "docs/v{version}/**"])
    assert code == 0, err
    return docs, store, spec


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_is_wrapped_not_cut(command: str | None, width: int) -> None:
    code, out, _ = run([command, "--help"] if command else ["--help"], width)
    assert code == 0
    assert_fits(out, width)
    assert not re.search(r"[\w-]…", out)  # nothing cut off mid-word ("--language-from-p…")
    if command == "ingest":
        assert "--language-from-path" in out and "--doc-version-from-path" in out
        assert "pip install 'arrowdedup[ray]'" in " ".join(out.split())


def test_version() -> None:
    from arrowdedup import __version__

    code, out, _ = run(["--version"])
    assert code == 0 and out.strip() == f"arrowdedup {__version__}"


@pytest.mark.parametrize("width", [80, 200])
def test_ingest_table_is_readable(built: tuple[Path, Path, str], tmp_path: Path,
                                  width: int) -> None:
    docs, _, spec = built
    code, out, err = run(["ingest", str(docs), "--out", str(tmp_path / "s"), "-e", spec,
                          "--skip-bad-files"], width)
    assert code == 0, err
    assert_fits(out, width)
    header = next(line for line in out.splitlines() if line.startswith("doc_id"))
    for col in ("type", "in", "out", "exact", "near", "filt", "dedup", "boost"):
        assert f" {col}" in header
    assert "reference/endpoints" in out  # a 19-character id fits whole even at 80
    if width == 200:
        assert "blog/2026-05-counting-usage-exactly-once" in out
    # What was left out is said, on stderr, with the reason.
    assert "skipped blob.md: " in err
    assert "is a binary file, not text" in err and "iconv" not in err
    assert "ignored 1 file(s) of unsupported types: logo.png" in err


@pytest.mark.parametrize("width", [80, 200])
def test_search_keeps_every_column_and_wraps_the_text(built: tuple[Path, Path, str],
                                                      width: int) -> None:
    _, store, _ = built
    code, out, err = run(["search", str(store), "how often are failed webhooks retried",
                          "-k", "4"], width)  # no --embedder: the store remembers it
    assert code == 0, err
    assert_fits(out, width)
    for col in ("score", "cosine", "segment", "ranks d/b/s/f", "text"):
        assert col in out
    assert "retr" in out.lower()  # the text column is there, with words in it
    assert "Post-ranking deduplication" in err


def test_search_prefers_the_newest_version_and_filters(built: tuple[Path, Path, str]) -> None:
    _, store, _ = built
    code, out, _ = run(["search", str(store), "quickstart create a test-mode API key", "-k",
                        "3", "--json"])
    assert code == 0
    hits = json.loads(out)["results"]
    versioned = [h["doc_id"] for h in hits if h["doc_id"].startswith("docs/v")]
    assert versioned and set(versioned) == {"docs/v3.10/quickstart"}
    code, out, _ = run(["search", str(store), "create a test-mode API key", "--json",
                        "--where", "doc_id LIKE 'docs/v3.9/%'"])
    assert code == 0
    assert {h["doc_id"] for h in json.loads(out)["results"]} == {"docs/v3.9/quickstart"}


@pytest.mark.parametrize("width", [80, 200])
def test_stats_verify_extract_context_report_fit(built: tuple[Path, Path, str],
                                                 tmp_path: Path, width: int) -> None:
    docs, store, _ = built
    for args in (["stats", str(store)], ["verify", str(store)],
                 ["extract", str(docs), "--out", str(tmp_path / "seg.parquet"),
                  "--skip-bad-files"],
                 ["context", str(store), "webhook retries", "-k", "2"],
                 ["merges", str(store)], ["merges", str(store), "--refused"],
                 ["report", str(store), "--out", str(tmp_path / "r.html")]):
        code, out, err = run(args, width)
        assert code == 0, (args, err)
        if args[0] != "context":  # Markdown for a prompt: its lines are the documents'
            assert_fits(out, width)


@pytest.mark.parametrize("width", [80, 200])
def test_calibrate_table_fits(tmp_path: Path, width: int) -> None:
    need(M2V_MODEL)
    pairs = tmp_path / "pairs.tsv"
    rows = ["sentence1\tsentence2\tlabel",
            "The cat sat on the mat.\tA cat was sitting on the mat.\t1",
            "Rotate the keys every 90 days.\tKeys rotate every 90 days.\t1",
            "The server listens on port 4317.\tBake the bread for an hour.\t0",
            "Enable TLS on the collector.\tDisable TLS on the collector.\t0"]
    pairs.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, out, err = run(["calibrate", str(pairs), "--embedder", f"model2vec:{M2V_MODEL}"],
                         width)
    assert code == 0, err
    assert_fits(out, width)
    assert "precision" in out and "false merges" in out
    code, out, _ = run(["calibrate", str(pairs), "-e", f"model2vec:{M2V_MODEL}", "--json"])
    assert code == 0 and json.loads(out)


def test_json_everywhere_is_one_document_on_stdout(built: tuple[Path, Path, str],
                                                   tmp_path: Path) -> None:
    docs, store, spec = built
    calls = {
        "ingest": ["ingest", str(docs), "--out", str(tmp_path / "s"), "-e", spec,
                   "--skip-bad-files", "--json"],
        "extract": ["extract", str(docs), "--out", str(tmp_path / "x.parquet"),
                    "--skip-bad-files", "--json"],
        "search": ["search", str(store), "rate limit", "--json"],
        "context": ["context", str(store), "rate limit", "--json"],
        "verify": ["verify", str(store), "--json"],
        "stats": ["stats", str(store), "--format", "json"],
    }
    for name, args in calls.items():
        code, out, err = run(args)
        assert code == 0, (name, err)
        payload = json.loads(out)  # the whole of stdout is one JSON document
        assert isinstance(payload, dict), name
    code, out, err = run(calls["ingest"])
    payload = json.loads(out)
    assert payload["counts"]["documents"] == 34 and payload["version"]  # 32 + 2 versions
    assert payload["timings"]["embed"] >= 0
    assert "Deduplication:" in err and "Deduplication:" not in out


def test_embedder_is_remembered_and_a_lost_one_named(built: tuple[Path, Path, str],
                                                     tmp_path: Path) -> None:
    docs, store, _ = built
    code, _out, err = run(["context", str(store), "idempotency key"])
    assert code == 0, err
    # A re-ingest without --embedder uses the store's model (no 17 s MiniLM load, no refusal).
    copy = tmp_path / "store"
    shutil.copytree(store, copy, symlinks=True)
    code, _, err = run(["ingest", str(docs), "--out", str(copy), "--skip-bad-files", "-q"])
    assert code == 0, err
    # Another model is refused before it is loaded: MiniLM's libraries are never imported.
    probe = ("import sys\nfrom typer.testing import CliRunner\nfrom arrowdedup.cli import app\n"
             f"r = CliRunner().invoke(app, ['ingest', {str(docs)!r}, '--out', {str(copy)!r}, "
             "'-e', 'minilm', '-q', '--skip-bad-files'])\n"
             "print(r.exit_code, 'sentence_transformers' in sys.modules, 'torch' in sys.modules)\n"
             "print(r.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120, check=False)
    assert proc.stdout.splitlines()[0] == "1 False False", proc.stdout + proc.stderr
    assert "built with embedding model 'model2vec:" in proc.stdout
    # The recorded model directory is gone: one line that names --embedder.
    manifest = json.loads((copy / "current" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["embedder"]["spec"].startswith("model2vec:")
    moved = tmp_path / "moved"
    moved.mkdir()
    lost = dict(manifest, embedder=dict(manifest["embedder"],
                                        spec=f"model2vec:{moved / 'gone'}"))
    (copy / "current" / "manifest.json").write_text(manifest_text(lost),
                                                    encoding="utf-8")
    code, _, err = run(["search", str(copy), "idempotency"])
    assert code == 1
    assert "no longer exists" in err and "--embedder model2vec:PATH" in err
    assert len(err.strip().splitlines()) == 1


def test_spellings_are_consistent(tmp_path: Path) -> None:
    import arrowdedup as ad
    from arrowdedup.config import Mode

    assert ad.metrics.connect is not None and ad.retrieval.search is ad.search
    assert ad.DedupConfig.from_json({"Ingestion": {"Mode": "lsh"}}).ingestion.mode is Mode.LSH
    assert ad.DedupConfig.from_json({"Ingestion": {"Mode": "LSH"}}).ingestion.mode is Mode.LSH
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.md").write_text("# A\n\nSome words here.\n", encoding="utf-8")
    code, _, err = run(["extract", str(tmp_path / "d"), "--out", str(tmp_path / "a.parquet"),
                        "--root", str(tmp_path)])
    assert code == 0, err
    need(M2V_MODEL)
    code, _, err = run(["ingest", str(tmp_path / "d"), "--out", str(tmp_path / "s"), "-e",
                        f"model2vec:{M2V_MODEL}", "--root", str(tmp_path), "--mode", "LSH",
                        "-q"])
    assert code == 0, err
    assert ad.open_store(tmp_path / "s").segments().collect()["doc_id"][0] == "d/a"


def _cli(args: list[str], **kw: object) -> subprocess.Popen[str]:
    env = dict(os.environ, COLUMNS="80", PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "arrowdedup", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, **kw)


def test_verbose_shows_only_arrowdedup_lines(tmp_path: Path) -> None:
    proc = _cli(["-v", "extract", str(SAMPLE), "--out", str(tmp_path / "s.parquet")])
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "extracted" in out
    assert "markdown_it" not in err and "matplotlib" not in err and "DEBUG" not in err
    assert len(err.splitlines()) < 50


@pytest.mark.parametrize("delay", [0.3, 2.5])
def test_ctrl_c_is_one_line_and_exit_130(tmp_path: Path, delay: float) -> None:
    big = tmp_path / "docs"
    big.mkdir()
    text = (SAMPLE / "changelog.md").read_text(encoding="utf-8")
    for i in range(400):  # enough Markdown (>4 MB) for worker processes
        (big / f"page-{i:03d}.md").write_text(text * 3, encoding="utf-8")
    proc = _cli(["extract", str(big), "--out", str(tmp_path / "s.parquet")],
                start_new_session=True)
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal does: the whole process group
    _out, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the run finished before the interrupt")
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err


@pytest.mark.parametrize("where", ["command", "start-up"])
def test_ctrl_c_inside_an_exec_of_a_string_still_exits_130(tmp_path: Path, where: str) -> None:
    # A Ctrl-C that lands while namedtuple, dataclasses or typing exec a string (as they do
    # while modules import) left CPython's mark of an unhandled interrupt: a process run with
    # ``-m`` then ended by SIGINT (-2) after printing our line. Each handler clears the mark.
    if where == "command":
        handle = ("from arrowdedup.cli.app import clean_errors, err_console\n"
                  "import typer\n"
                  # rich's first print runs imports of its own, whose exec of a string
                  # would clear the mark by chance: print once before.
                  "err_console.print('ready', markup=False, soft_wrap=True)\n"
                  "@clean_errors\n"
                  "def command():\n"
                  "    exec('raise KeyboardInterrupt')\n"
                  "try:\n"
                  "    command()\n"
                  "except typer.Exit as done:\n"
                  "    sys.exit(done.exit_code)\n")
    else:  # what ``python -m arrowdedup`` does when its imports are interrupted
        handle = ("from arrowdedup._interrupt import interrupt_handled\n"
                  "try:\n"
                  "    exec('raise KeyboardInterrupt')\n"
                  "except KeyboardInterrupt:\n"
                  "    interrupt_handled()\n"
                  "    sys.exit(130)\n")
    # Run as a module, like the CLI: ``-c`` exits from inside the interpreter's error print,
    # before the mark is looked at.
    package = tmp_path / "interrupted"
    package.mkdir()
    (package / "__main__.py").write_text("import sys\n" + handle, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    done = subprocess.run([sys.executable, "-m", "interrupted"], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr


def test_results_are_frozen(built: tuple[Path, Path, str]) -> None:
    import dataclasses

    import arrowdedup as ad

    _, store, _ = built
    res = ad.search(store, "webhooks", k=2)
    ctx = ad.build_context(store, "webhooks", k=1)
    for obj, field in ((res, "k"), (ctx, "query")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, None)


def _stderr(args: list[str], *, tty: bool) -> str:
    """stderr of an ``arrowdedup`` run whose stderr is (or is not) a terminal."""
    env = dict(os.environ, COLUMNS="80", PYTHONPATH=str(ROOT))
    if not tty:
        return subprocess.run([sys.executable, "-m", "arrowdedup", *args], env=env,
                              capture_output=True, text=True, timeout=300, check=True).stderr
    return on_a_terminal(args, env, stream="stderr").decode("utf-8", "replace")


def _ingest_stderr(docs: Path, out: Path, spec: str, *, tty: bool) -> str:
    """stderr of a documents ingest run whose stderr is (or is not) a terminal."""
    return _stderr(["ingest", str(docs), "--out", str(out), "-e", spec, "--skip-bad-files"],
                   tty=tty)


def test_progress_on_a_terminal_only(built: tuple[Path, Path, str], tmp_path: Path) -> None:
    docs, _, spec = built
    on_tty = _ingest_stderr(docs, tmp_path / "a", spec, tty=True)
    for stage in ("extracting", "loading the embedder", "embedding (model2vec",
                  "deduplicating buckets", "writing the store"):
        assert stage in on_tty, on_tty[-2000:]
    piped = _ingest_stderr(docs, tmp_path / "b", spec, tty=False)
    for stage in ("extracting", "embedding", "deduplicating", "writing"):
        assert stage not in piped
    assert "\x1b[" not in piped  # no bars, no escape codes
    assert piped.startswith("skipped blob.md: ")


def test_progress_of_a_segments_table_on_a_terminal_only(built: tuple[Path, Path, str],
                                                         tmp_path: Path) -> None:
    docs, _, _ = built
    table = tmp_path / "segments.parquet"
    code, _, err = run(["extract", str(docs), "--out", str(table), "--skip-bad-files", "-q"])
    assert code == 0, err
    args = ["ingest", str(table), "--buckets", "4"]
    on_tty = _stderr([*args, "--out", str(tmp_path / "a")], tty=True)
    for stage in ("reading the segments", "deduplicating buckets", "writing the store"):
        assert stage in on_tty, on_tty[-2000:]
    assert "/4" in on_tty  # the dedup bar counts buckets
    # A table is neither extracted nor embedded (SPEC: tables are never embedded).
    assert "extracting" not in on_tty and "embedding" not in on_tty
    piped = _stderr([*args, "--out", str(tmp_path / "b")], tty=False)
    assert piped == "" and "\x1b[" not in piped  # no bars, no escape codes, no lines


def test_context_brings_the_code_a_result_introduces(built: tuple[Path, Path, str]) -> None:
    """The sample's pagination page says "the loop below stops"; the loop is the answer."""
    _, store, _ = built
    code, out, err = run(["context", str(store), "loop over every page of invoices", "-k", "3"])
    assert code == 0, err
    assert "retrieved #" in out and "docs/pagination#5" in out
    assert "expanded: code introduced by `docs/pagination#5`" in out
    assert "```python\ncursor = None\nwhile True:" in out
    code, out, _ = run(["context", str(store), "loop over every page of invoices", "-k", "3",
                        "--where", "segment_type <> 'code'", "--json"])
    assert code == 0
    assert all(s["segment_type"] != "code" for s in json.loads(out)["segments"])


def test_data_is_printed_as_data_never_as_markup_or_terminal_codes(tmp_path: Path) -> None:
    """Segment texts and doc_ids are the corpus's words: Rich markup in them ("[/]",
    "[link=...]") is printed as written (it raised MarkupError mid-table), and control
    characters (an ESC that starts a terminal escape sequence) are shown as \\x1b escapes, so
    a document cannot recolour, move or retitle the reader's terminal."""
    import numpy as np

    from arrowdedup import ingest_to_store
    from tests.helpers import segments_frame, unit

    rng = np.random.default_rng(0)
    base = unit(rng.normal(size=8))
    texts = ["[/] nothing to close [bold red]RED[/bold red] \x1b]0;pwned\x07 title",
             "[/] nothing to close [bold red]RED[/bold red] \x1b[31m near copy",
             "plain text", "other words"]
    embeddings = [base, unit(base + 0.01), unit(rng.normal(size=8)), unit(rng.normal(size=8))]
    frame = segments_frame(texts, embeddings, doc_id=["[/]doc\x1b[2J", "[/]doc\x1b[2J", "d2",
                                                      "d2"], salience=[0.9, 0.5, 0.5, 0.5])
    root = tmp_path / "s"
    ingest_to_store(frame, root, quiet=True, config={"Ingestion": {"FactGuard": False}})
    for args in (["merges", str(root)], ["stats", str(root)], ["versions", str(root)]):
        out = runner.invoke(app, args)
        assert out.exit_code == 0, (args, out.output)
        assert "\x1b" not in out.output and "\x07" not in out.output, (args, out.output)
    merges = runner.invoke(app, ["merges", str(root)]).output
    assert "[bold" in merges and "[/]" in merges  # the markup as written, not consumed
    assert "\\x1b" in merges  # shown, not obeyed
