"""The README's Python example runs and says what the README says it does."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_python_example_runs(tmp_path: Path, capsys) -> None:
    blocks = python_blocks()
    assert blocks, "README has no Python example"
    code = blocks[0].replace("/tmp/arrowdedup-readme-store", str(tmp_path / "store"))
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "Deduplication: 4 → 2 segments" in out
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
