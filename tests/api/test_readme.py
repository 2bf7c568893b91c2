"""The README's Python example runs and says what the README says it does."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import README


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_python_example_runs(tmp_path: Path, capsys) -> None:
    blocks = python_blocks()
    assert blocks, "README has no Python example"
    # The retrieval block continues the first one (where=, min_cosine=, cosine).
    code = "\n".join(blocks[:2]).replace("/tmp/arrowdedup-readme-store",
                                         str(tmp_path / "store"))
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "Deduplication: 4 → 2 segments" in out
    assert "Post-ranking deduplication: 2 → 2 segments" in out and "cosine" in out
    decisions = namespace["result"].decisions  # type: ignore[attr-defined]
    assert decisions.get_column("action").cast(pl.String).to_list() == [
        "kept", "merged_near", "dropped_exact", "kept"]
    assert decisions.get_column("representative_id").to_list() == [None, "g#0", "g#0", None]


def test_readme_names_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text


def test_readme_config_block_is_valid() -> None:
    from arrowdedup import DedupConfig

    text = README.read_text(encoding="utf-8")
    block = re.findall(r"```json\n(.*?)```", text, flags=re.S)[0]
    assert DedupConfig.from_json(block) == DedupConfig()


def session_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- session:start -->", 1)[1].split("<!-- session:end -->", 1)[0]
    return [line[2:] for line in block.splitlines() if line.startswith("$ arrowdedup ")]


def test_readme_session_replays_cleanly_at_80_columns(tmp_path: Path, monkeypatch) -> None:
    """A new user's session on the bundled sample, as the README shows it, at 80 columns."""
    import json
    import shlex

    from rich.cells import cell_len
    from typer.testing import CliRunner

    from arrowdedup.cli import app
    from tests.helpers import M2V_MODEL, ROOT, need

    need(M2V_MODEL)
    work = tmp_path / "work"
    work.mkdir()
    (work / "data").symlink_to(ROOT / "data")
    (tmp_path / "shared").symlink_to(M2V_MODEL.parent.parent.parent)  # ../shared
    monkeypatch.chdir(work)
    commands = session_commands()
    # The path a new user takes: ingest -> search -> context -> merges -> verify.
    steps = [shlex.split(c)[1] for c in commands]
    for step in ("ingest", "search", "context", "merges", "verify"):
        assert step in steps, f"the README session lacks `arrowdedup {step}`"
    assert steps.index("ingest") < steps.index("search") < steps.index("context") \
        < steps.index("merges") < steps.index("verify")
    runner = CliRunner()
    readme = README.read_text(encoding="utf-8")
    for command in commands:
        args = shlex.split(command)[1:]
        result = runner.invoke(app, args, env={"COLUMNS": "80"})
        assert result.exit_code == 0, (command, result.stderr)
        assert "Traceback" not in result.stderr, command
        if "--json" in args:
            json.loads(result.stdout)
            continue
        if args[0] != "context":  # the context is Markdown for a prompt, not for the terminal
            wide = [x for x in result.stdout.splitlines() if cell_len(x) > 80]
            assert not wide, (command, wide[:2])
        if args[0] == "search":  # the README shows this table as it is printed
            for line in result.stdout.splitlines()[1:12]:
                assert line.rstrip() in readme, (command, line)
        if args[0] == "ingest":
            assert "ignored" not in result.stderr  # the sample has no stray files
        if args[0] == "context":
            assert result.stdout.startswith("# Context for: how do I send my first event")
            assert len(result.stdout) <= 2001
        if args[0] == "merges":  # ids whole on one line, not folded into "docs/au thentic"
            assert "Near-duplicate merges" in result.stdout
            assert "│ docs/authentication │" in result.stdout
    assert (work / "report.html").exists()


FRAMEWORKS = {
    "langchain": ("ingestion: 234 → ", "EmbeddingsRedundantFilter keeps", "only arrowdedup keeps"),
    "llamaindex": ("the docstore keeps", "retrieval: "),
    "haystack": ("the writer keeps",),
    "datasets": ("distinct texts:", "Deduplication: "),
}


def framework_blocks() -> dict[str, str]:
    """The README's framework examples, by extra (each starts with its pip command)."""
    out = {}
    for block in python_blocks():
        first = block.splitlines()[0]
        if first.startswith("# pip install 'arrowdedup["):
            extras = first.split("[", 1)[1].split("]", 1)[0]
            out[extras.split(",")[0]] = block
    return out


@pytest.mark.parametrize("extra", sorted(FRAMEWORKS))
def test_readme_framework_example_runs(extra: str, tmp_path: Path, monkeypatch, capsys) -> None:
    """Each framework's example, as a user runs it from the project root, on the bundled
    sample with the shared Model2Vec model (or the packaged MiniLM)."""
    from tests.helpers import M2V_MODEL, ROOT, need

    need(M2V_MODEL)
    pytest.importorskip({"langchain": "langchain_community", "llamaindex": "llama_index.core",
                         "haystack": "haystack", "datasets": "datasets"}[extra],
                        reason=f"the [{extra}] extra is not installed")
    block = framework_blocks().get(extra)
    assert block is not None, f"README has no {extra} example"
    work = tmp_path / "work"
    work.mkdir()
    (work / "data").symlink_to(ROOT / "data")
    (tmp_path / "shared").symlink_to(M2V_MODEL.parent.parent.parent)  # ../shared
    monkeypatch.chdir(work)
    exec(compile(block, f"README.md ({extra})", "exec"), {})
    out = capsys.readouterr().out
    for expected in FRAMEWORKS[extra]:
        assert expected in out, (extra, expected, out)
