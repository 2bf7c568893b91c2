"""Context worth pasting into a prompt: fenced code, heading levels, sources, a budget."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from arrowdedup import build_context, ingest_to_store
from tests.helpers import M2V_MODEL, OTEL_CONTENT, need

PAGE = """---
title: Collector configuration
---

# Collector configuration

The collector reads its settings from one YAML file at start-up.

## Server file

Create the server file before you start the collector.

```yaml
# server.config.yaml
receivers:
  otlp: {}
```

Restart the collector after every change to the server file.

### Ports

The collector listens on port 4317 for OTLP over gRPC.
"""

OTHER = """# Install

Install the collector with your package manager, then create the server file.

```sh
apt-get install collector
```
"""


def _docs_store(tmp_path_factory: pytest.TempPathFactory, name: str, pages: dict[str, str]
                ) -> Path:
    """A store of Markdown ``pages`` (file name → text), embedded with Model2Vec."""
    need(M2V_MODEL)
    tmp = tmp_path_factory.mktemp(name)
    docs = tmp / "docs"
    docs.mkdir()
    for file, text in pages.items():
        (docs / file).write_text(text, encoding="utf-8")
    ingest_to_store(docs, tmp / "store", embedder=f"model2vec:{M2V_MODEL}", quiet=True)
    return tmp / "store"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _docs_store(tmp_path_factory, "ctx", {"configuration.md": PAGE, "install.md": OTHER})


def test_code_is_fenced_with_its_language_and_headings_stay_below_the_block(store: Path) -> None:
    ctx = build_context(store, "server config yaml receivers", k=6, expand=3)
    md = ctx.markdown()
    assert "```yaml\n# server.config.yaml\nreceivers:" in md
    # Outside fences, only the title is H1 and only document blocks are H2.
    outside = re.sub(r"```.*?```", "", md, flags=re.S)
    h1 = [line for line in outside.splitlines() if re.match(r"#\s", line)]
    h2 = [line for line in outside.splitlines() if re.match(r"##\s", line)]
    assert h1 == ["# Context for: server config yaml receivers"]
    assert set(h2) <= {"## Collector configuration", "## Install"}
    assert re.search(r"^#{3,6} Server file$", md, flags=re.M)  # a level-2 heading, demoted
    assert "source: `configuration`" in md


def test_each_segment_says_where_it_is_from_and_why_it_is_there(store: Path) -> None:
    ctx = build_context(store, "which port does the collector listen on", k=1, expand=2)
    md = ctx.markdown()
    assert "retrieved #1" in md and "expanded: context for #1" in md
    assert re.search(r"section: Collector configuration > Server file > Ports", md)
    assert set(ctx.segments["origin"]) == {"retrieved", "expanded"}


def test_max_chars_packs_the_best_whole_segments(store: Path) -> None:
    full = build_context(store, "collector server file", k=8, expand=2)
    budget = len(full.markdown()) // 2
    ctx = build_context(store, "collector server file", k=8, expand=2, max_chars=budget)
    md = ctx.markdown()
    assert len(md) <= budget
    assert 0 < ctx.segments.height < full.segments.height
    assert ctx.left_out == full.segments.height - ctx.segments.height
    assert f"left out to stay within {budget:,} characters" in md
    for text in ctx.segments["text"]:  # whole segments only
        assert text.strip().splitlines()[0] in md
    best = full.segments.filter(full.segments["origin"] == "retrieved").sort("rank")
    assert best["segment_id"][0] in ctx.segments["segment_id"].to_list()
    assert ctx.tokens_estimate() == (len(md) + 3) // 4


UPGRADE = """# Upgrade

## Upgrade the agent

To upgrade the agent in place, run the following command:

```sh
agentctl upgrade --channel stable
```

Check the version afterwards; the agent restarts by itself.

## Roll back

Roll back to the previous package when the agent does not start.
"""


@pytest.fixture(scope="module")
def command_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _docs_store(tmp_path_factory, "cmd", {"upgrade.md": UPGRADE, "install.md": OTHER})


QUERY = "upgrade the agent in place"


def test_the_command_a_result_introduces_is_in_the_context(command_store: Path) -> None:
    ctx = build_context(command_store, QUERY, k=1, mode="keyword")
    assert ctx.search.results["segment_id"].to_list() == ["upgrade#2"]  # the lead-in alone
    code = ctx.segments.filter(pl.col("segment_id") == "upgrade#3").row(0, named=True)
    assert code["origin"] == "expanded" and code["introduced_by"] == "upgrade#2"
    assert code["rank"] == 1
    md = ctx.markdown()
    assert "expanded: code introduced by `upgrade#2`, context for #1" in md
    assert "```sh\nagentctl upgrade --channel stable\n```" in md
    # Only the code is added (expand=0 adds no other neighbour), and it follows its lead-in.
    assert ctx.segments["segment_id"].to_list() == ["upgrade#2", "upgrade#3"]
    assert md.index("run the following command:") < md.index("agentctl upgrade")


def test_a_budget_takes_the_command_before_other_neighbours(command_store: Path) -> None:
    full = build_context(command_store, QUERY, k=1, mode="keyword", expand=3)
    assert full.segments.height > 2  # neighbours besides the command
    ctx = build_context(command_store, QUERY, k=1, mode="keyword", expand=3,
                        max_chars=len(build_context(command_store, QUERY, k=1,
                                                    mode="keyword").markdown()) + 100)
    assert ctx.segments["segment_id"].to_list() == ["upgrade#2", "upgrade#3"]
    assert ctx.left_out == full.segments.height - 2


def test_expansions_satisfy_where(command_store: Path) -> None:
    where = "segment_type <> 'code'"
    ctx = build_context(command_store, QUERY, k=1, mode="keyword", expand=3, where=where)
    assert "upgrade#2" in ctx.segments["segment_id"].to_list()
    assert "code" not in ctx.segments["segment_type"].to_list()
    assert ctx.segments.filter(pl.col("origin") == "expanded").height >= 1  # prose neighbours
    only = build_context(command_store, QUERY, k=1, mode="keyword", expand=3,
                         where="doc_id = 'upgrade' AND segment_type = 'paragraph'")
    assert set(only.segments["segment_type"]) == {"paragraph"}


def test_introductions_are_recognised() -> None:
    from arrowdedup.retrieval.context import introduces_code

    for text in ("To unpack the gzipped tarball, run the following command:",
                 "On the last page, next_cursor is null and the loop below stops.",
                 "Add the following configuration to the collector",
                 "次のコマンドを実行します：", "Führen Sie den folgenden Befehl aus:"):
        assert introduces_code(text), text
    for text in ("Restart the collector after every change.", "The table below lists ports.",
                 "Ratio 3:1 is fine."):
        assert not introduces_code(text), text


def test_code_follows_by_position_without_neighbour_columns(tmp_path: Path) -> None:
    from arrowdedup import ingest_to_store as job
    from arrowdedup.retrieval.context import _following
    from arrowdedup.retrieval.search import store_view
    from arrowdedup.store import open_store

    frame = pl.DataFrame({
        "doc_id": ["d"] * 4, "segment_id": ["d#0", "d#1", "d#2", "d#3"],
        "text": ["Install it with the following command:", "pip install thing",
                 "pip install thing[extra]", "Then you are done."],
        "segment_type": ["paragraph", "code", "code", "paragraph"],
        "section": ["Install"] * 3 + ["Next"],
        "position": pl.Series([0, 1, 2, 3], dtype=pl.Int32),
    })
    job(frame, tmp_path / "s", buckets=1, quiet=True)
    view = store_view(open_store(tmp_path / "s"))
    assert "neighbours_after" not in view.frame.columns
    assert [view.segment_ids[r] for r in _following(view, view.row_of("d#0"))] == ["d#1", "d#2"]
    ctx = build_context(tmp_path / "s", "install it", k=1, mode="keyword")
    assert ctx.segments["segment_id"].to_list() == ["d#0", "d#1", "d#2"]
    assert ctx.segments["introduced_by"].to_list() == [None, "d#0", "d#0"]


def test_real_corpus_lead_in_brings_its_command(tmp_path: Path) -> None:
    """The case a new user met: the result says "run the following command:" and the
    context lacked the command (OpenTelemetry's Windows install page, ../shared/data)."""
    need(M2V_MODEL)
    en = need(OTEL_CONTENT / "en")
    files = sorted((en / "docs" / "collector" / "install" / "binary").glob("*.md"))
    ingest_to_store(files, tmp_path / "s", embedder=f"model2vec:{M2V_MODEL}", root=en,
                    quiet=True)
    ctx = build_context(tmp_path / "s", "run the following command to unpack the gzipped "
                        "tarball", k=2)
    lead = "docs/collector/install/binary/windows#6"
    command = "docs/collector/install/binary/windows#7"
    assert lead in ctx.search.results["segment_id"].to_list()
    assert command not in ctx.search.results["segment_id"].to_list()  # not retrieved itself
    row = ctx.segments.filter(pl.col("segment_id") == command).row(0, named=True)
    assert row["origin"] == "expanded" and row["introduced_by"] == lead
    assert row["text"].startswith("Invoke-WebRequest")
    assert "```powershell\nInvoke-WebRequest" in ctx.markdown()
