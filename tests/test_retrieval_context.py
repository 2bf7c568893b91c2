"""Context worth pasting into a prompt: fenced code, heading levels, sources, a budget."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import M2V_MODEL, need

from arrowdedup import build_context, ingest_to_store

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


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need(M2V_MODEL)
    tmp = tmp_path_factory.mktemp("ctx")
    docs = tmp / "docs"
    docs.mkdir()
    (docs / "configuration.md").write_text(PAGE, encoding="utf-8")
    (docs / "install.md").write_text(OTHER, encoding="utf-8")
    ingest_to_store(docs, tmp / "store", embedder=f"model2vec:{M2V_MODEL}", quiet=True)
    return tmp / "store"


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
