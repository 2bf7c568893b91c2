"""Extraction: every format, front matter, sections, neighbours, ids, languages, errors, CLI."""

from __future__ import annotations

import datetime as dt
import json
import os
import string
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from arrowdedup.cli import app
from arrowdedup.dedup.salience import title_mask
from arrowdedup.errors import ArrowDedupError, ConfigError, InputError
from arrowdedup.extract import SCHEMA, compile_language_pattern, extract, extract_documents
from arrowdedup.facts.entries import PART, ROLE_SHIFT
from arrowdedup.facts.guard import fact_signatures
from arrowdedup.schema import validate
from tests.helpers import OTEL_CONTENT, ROOT, need

MARKDOWN = """---
title: Getting Started
date: 2024-03-05
lang: en
---

Intro paragraph that is
wrapped over two lines.
{.lead}

## Install {#install}

- item one
- item two

  second paragraph of item two
  - nested item

> a quote
> that continues

```go
{{< tabpane >}}
func main() {

    fmt.Println("{{% param vers %}}")
}
```

    indented code
    block

{{% alert title="Note" %}}
Alert body {{< ref "x" >}} text.
{{% /alert %}}

    {{% /tab %}} {{% tab Docker %}}

| Name | Value |
|------|-------|
| a    | 1     |
| b    |       |

<div class="x"><a href="#">Learn More</a><script>var x = 1;</script></div>

Write `{{</* figure */>}}` to get a figure.

### Deeper

deep text

## Configure

configure text
"""


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def rows(frame: pl.DataFrame) -> list[dict[str, object]]:
    return frame.to_dicts()


@pytest.fixture()
def md_frame(tmp_path: Path) -> pl.DataFrame:
    write(tmp_path / "docs" / "start.md", MARKDOWN)
    return extract(tmp_path)


# ---------------------------------------------------------------- Markdown


def test_markdown_segments_types_and_text(md_frame: pl.DataFrame) -> None:
    got = md_frame.select("text", "segment_type").rows()
    assert got == [
        ("Getting Started", "heading"),
        ("Intro paragraph that is wrapped over two lines.", "paragraph"),
        ("Install", "heading"),
        ("item one", "list_item"),
        ("item two\n\nsecond paragraph of item two", "list_item"),
        ("nested item", "list_item"),
        ("a quote that continues", "quote"),
        ('func main() {\n\n    fmt.Println("{{% param vers %}}")\n}', "code"),
        ("indented code\nblock", "code"),
        ("Alert body text.", "paragraph"),
        ("Name: a\nValue: 1", "table_row"),
        ("Name: b", "table_row"),
        ("Learn More", "paragraph"),
        ("Write {{< figure >}} to get a figure.", "paragraph"),
        ("Deeper", "heading"),
        ("deep text", "paragraph"),
        ("Configure", "heading"),
        ("configure text", "paragraph"),
    ]


def test_markdown_front_matter_and_doc_columns(md_frame: pl.DataFrame) -> None:
    assert md_frame.schema == pl.Schema(SCHEMA)
    first = md_frame.row(0, named=True)
    assert first["doc_id"] == "docs/start"
    assert first["segment_id"] == "docs/start#0"
    assert first["title"] == "Getting Started"
    assert first["heading_level"] == 1
    assert first["created_at"] == dt.datetime(2024, 3, 5, tzinfo=dt.UTC)
    assert set(md_frame["language"]) == {"en"}
    assert set(md_frame["doc_type"]) == {"markdown"}
    assert md_frame["position"].to_list() == list(range(md_frame.height))
    assert md_frame["keys"].null_count() == md_frame.height
    # No front-matter text leaks into the segments.
    assert not md_frame.filter(pl.col("text").str.contains("date:|title:")).height
    validate(md_frame)


def test_markdown_sections_and_heading_levels(md_frame: pl.DataFrame) -> None:
    by_text = {r["text"]: r for r in rows(md_frame)}
    intro = by_text["Intro paragraph that is wrapped over two lines."]
    assert intro["section"] == "Getting Started"
    assert by_text["item one"]["section"] == "Getting Started > Install"
    assert by_text["Deeper"]["section"] == "Getting Started > Install > Deeper"
    assert by_text["deep text"]["section"] == "Getting Started > Install > Deeper"
    assert by_text["configure text"]["section"] == "Getting Started > Configure"
    assert by_text["Install"]["heading_level"] == 2
    assert by_text["Deeper"]["heading_level"] == 3
    assert by_text["item one"]["heading_level"] is None


def test_markdown_neighbours_stay_in_the_section(md_frame: pl.DataFrame) -> None:
    ids = dict(zip(md_frame["text"], md_frame["segment_id"], strict=True))
    by_text = {r["text"]: r for r in rows(md_frame)}
    item = by_text["item one"]
    assert item["neighbours_before"] == [ids["Install"]]
    assert item["neighbours_after"] == [
        ids["item two\n\nsecond paragraph of item two"], ids["nested item"],
        ids["a quote that continues"],
    ]
    # Nearest first, at most 3, never across a heading.
    last = by_text["Write {{< figure >}} to get a figure."]
    assert last["neighbours_before"] == [
        ids["Learn More"], ids["Name: b"], ids["Name: a\nValue: 1"]
    ]
    assert last["neighbours_after"] == []
    assert by_text["deep text"]["neighbours_before"] == [ids["Deeper"]]
    assert by_text["Configure"]["neighbours_before"] == []


def test_neighbours_count_is_configurable(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "p1\n\np2\n\np3\n\np4\n")
    one = extract(tmp_path, neighbours=1)
    assert one["neighbours_before"].to_list() == [[], ["a#0"], ["a#1"], ["a#2"]]
    assert one["neighbours_after"].to_list() == [["a#1"], ["a#2"], ["a#3"], []]
    none = extract(tmp_path, neighbours=0)
    assert none["neighbours_before"].to_list() == [[]] * 4
    with pytest.raises(ConfigError, match="neighbours"):
        extract(tmp_path, neighbours=-1)


def test_front_matter_title_is_the_salience_title(md_frame: pl.DataFrame) -> None:
    mask = title_mask(md_frame)
    assert mask.tolist() == [True] + [False] * (md_frame.height - 1)


def test_title_from_first_h1_without_front_matter(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "intro\n\n# Real Title\n\ntext\n\n# Second\n")
    frame = extract(tmp_path)
    assert set(frame["title"]) == {"Real Title"}
    assert frame.filter(pl.col("segment_type") == "heading")["text"].to_list() == [
        "Real Title", "Second"
    ]
    assert frame["section"].to_list() == [None, "Real Title", "Real Title", "Second"]
    assert title_mask(frame).tolist() == [False, True, False, False]


def test_front_matter_title_equal_to_h1_is_not_repeated(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "---\ntitle: Same\n---\n# Same\n\nbody\n")
    frame = extract(tmp_path)
    assert frame.select("text", "segment_type").rows() == [
        ("Same", "heading"), ("body", "paragraph")
    ]


def test_code_block_with_blank_lines_is_one_segment(tmp_path: Path) -> None:
    code = "def f():\n\n    return 1\n\n\nprint(f())"
    write(tmp_path / "a.md", f"text\n\n```python\n{code}\n```\n\n~~~\nother\n~~~\n")
    frame = extract(tmp_path)
    assert frame.select("text", "segment_type").rows() == [
        ("text", "paragraph"), (code, "code"), ("other", "code")
    ]


def test_shortcodes_and_template_actions(tmp_path: Path) -> None:
    write(tmp_path / "a.md", (
        "{{< tabpane text=true >}}\n{{% tab Go %}}\n\nGo text\n\n{{% /tab %}}\n"
        "{{< /tabpane >}}\n\n{{% alert\n  title=\"Multi-line tag\" %}}\nInside {{< b >}}x\n"
        "{{% /alert %}}\n\n{{ if $x }}\nThe list for {{ $name }}.\n{{ end }}\n\n"
        "> [!NOTE]\n>\n> Noted.\n"
    ))
    frame = extract(tmp_path)
    assert frame.select("text", "segment_type").rows() == [
        ("Go text", "paragraph"),
        ("Inside x", "paragraph"),
        ("The list for {{ $name }}.", "paragraph"),
        ("Noted.", "quote"),
    ]


def test_toml_front_matter_and_timestamps(tmp_path: Path) -> None:
    write(tmp_path / "t.md", '+++\ntitle = "Toml"\ndate = 2024-05-06T07:08:09+02:00\n+++\nbody\n')
    write(tmp_path / "y.md", "---\ndate: '2023-01-02T03:04:05Z'\nlanguage: fr\n---\ncorps\n")
    frame = extract(tmp_path)
    got = {r["doc_id"]: r for r in rows(frame)}
    assert got["t"]["created_at"] == dt.datetime(2024, 5, 6, 5, 8, 9, tzinfo=dt.UTC)
    assert got["t"]["title"] == "Toml"
    assert got["y"]["created_at"] == dt.datetime(2023, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert got["y"]["language"] == "fr"
    assert got["t"]["language"] is None


def test_crlf_and_bom_are_normalised(tmp_path: Path) -> None:
    text = "\ufeff---\r\ntitle: T\r\n---\r\nline one\r\nline two\r\n\r\nnext\r\n"
    write(tmp_path / "a.md", text.encode())
    frame = extract(tmp_path)
    assert frame["text"].to_list() == ["T", "line one line two", "next"]


# ---------------------------------------------------------------- other formats


def test_plain_text_paragraphs(tmp_path: Path) -> None:
    write(tmp_path / "notes.txt", "First line\nsecond line\n\n  \n\nSecond para\n\n\n")
    frame = extract(tmp_path)
    assert frame.select("text", "segment_type", "doc_type").rows() == [
        ("First line\nsecond line", "paragraph", "text"),
        ("Second para", "paragraph", "text"),
    ]
    assert frame["section"].to_list() == [None, None]
    assert frame["neighbours_after"].to_list() == [["notes#1"], []]


HTML = """<!doctype html>
<html lang="de"><head><title>Seite</title><style>p {}</style></head>
<body>
<nav><a href="/">Home</a> <a href="/x">Menu</a></nav>
<h1>Überschrift</h1>
<p>Erster <b>Absatz</b>,<br>zweite Zeile.</p>
<div>Loser Text<p>im div</p></div>
<ul><li>Punkt eins</li><li><p>Punkt zwei</p></li></ul>
<blockquote>Ein Zitat</blockquote>
<pre>code  line 1
  line 2</pre>
<script>console.log("nope")</script>
<h2>Tabelle</h2>
<table><tr><th>Name</th><th>Wert</th></tr><tr><td>a</td><td>1</td></tr></table>
<figure><img src="x.png"><figcaption>Bildunterschrift</figcaption></figure>
<!-- a comment -->
</body></html>
"""


def test_html_visible_blocks(tmp_path: Path) -> None:
    write(tmp_path / "page.html", HTML)
    frame = extract(tmp_path)
    assert frame.select("text", "segment_type").rows() == [
        ("Überschrift", "heading"),
        ("Erster Absatz,\nzweite Zeile.", "paragraph"),
        ("Loser Text", "paragraph"),
        ("im div", "paragraph"),
        ("Punkt eins", "list_item"),
        ("Punkt zwei", "list_item"),
        ("Ein Zitat", "quote"),
        ("code  line 1\n  line 2", "code"),
        ("Tabelle", "heading"),
        ("Name: a\nWert: 1", "table_row"),
        ("Bildunterschrift", "caption"),
    ]
    assert set(frame["title"]) == {"Seite"}
    assert set(frame["language"]) == {"de"}
    assert set(frame["doc_type"]) == {"html"}
    assert frame["section"][-1] == "Überschrift > Tabelle"
    assert frame["heading_level"].to_list()[:1] == [1]


def test_inline_code_keeps_its_fact_without_its_backticks(tmp_path: Path) -> None:
    # The text shows inline code without backticks, but the fact guard still reads each span
    # as an identifier: two commands that differ only inside the code do not look alike.
    write(tmp_path / "checks.md", (
        "# Checks\n\nIf this check fails, run `npm run fix:dict` locally.\n\n"
        "If this check fails, run `npm run fix:format` locally.\n\n"
        "- set `ebpf` in the list\n\n"
        "## The `--all` flag\n"))
    write(tmp_path / "page.html", (
        "<html><body><p>If this check fails, run <code>npm run fix:dict</code> locally.</p>"
        "<p>If this check fails, run <code>npm run fix:format</code> locally.</p>"
        "</body></html>"))
    for name in ("checks", "page"):
        frame = extract(tmp_path / f"{name}.md" if name == "checks" else tmp_path / "page.html")
        rows = frame.filter(pl.col("text").str.contains("check fails"))
        assert rows["text"].to_list()[0] == "If this check fails, run npm run fix:dict locally."
        first, second = rows["fact_signature"].to_list()
        assert first != second
        plain = fact_signatures(rows["text"]).to_list()
        # Without the terms the two commands state the same facts (their words differ).
        assert [v for v in plain[0] if v >> 60 < 8] == [v for v in plain[1] if v >> 60 < 8]
        assert set(plain[0]) < set(first)
    frame = extract(tmp_path / "checks.md")
    backticked = fact_signatures(pl.Series(["set `ebpf` in the list"])).to_list()[0]
    item = frame.filter(pl.col("segment_type") == "list_item")["fact_signature"].to_list()[0]
    # Beside its section tokens (kind 15: where the item stands) and the form it offers a
    # list entry that names it (kind 12, role PART: entry_facts), the backticked text's facts.
    offered = (12 << 60) | (PART << ROLE_SHIFT)
    assert [v for v in item if v >> 60 < 15 and v >> 58 != offered >> 58] == backticked
    assert any(v >> 58 == offered >> 58 for v in item)
    assert {v >> 60 for v in item if v >> 60 >= 15} in (set(), {15})


CSV = 'sku,name,price,note\nA-1,Widget,9.50,"multi\nline"\nA-2,Gadget,007,\n,,,\n'


def test_csv_rows_and_keys(tmp_path: Path) -> None:
    write(tmp_path / "products.csv", CSV)
    everything = extract(tmp_path, key_columns="sku, name")
    assert everything["segment_type"].to_list()[-1] == "table_summary"
    frame = everything.filter(pl.col("segment_type") == "table_row")
    assert frame.select("text", "segment_type", "doc_type").rows() == [
        ("sku: A-1\nname: Widget\nprice: 9.50\nnote: multi\nline", "table_row", "csv"),
        ("sku: A-2\nname: Gadget\nprice: 007", "table_row", "csv"),
    ]
    assert frame["keys"].to_list() == [
        ["sku: A-1", "name: Widget"], ["sku: A-2", "name: Gadget"]
    ]
    assert frame["segment_id"].to_list() == ["products#0", "products#1"]
    assert frame["neighbours_after"].to_list() == [["products#1"], []]
    assert frame.schema == pl.Schema({k: v for k, v in SCHEMA.items() if k != "language"})
    without = extract(tmp_path, detect_keys=False)
    assert without["keys"].null_count() == 3
    detected = extract_documents(tmp_path)
    assert detected.segments["keys"].to_list()[:2] == [["sku: A-1"], ["sku: A-2"]]
    assert detected.keys_report() == ["keys of products: sku (detected)"]


def test_tsv_keeps_quotes_literal(tmp_path: Path) -> None:
    write(tmp_path / "pairs.tsv", 'id\ttext\n1\tsaid "hi" there\n2\tplain\n')
    frame = extract(tmp_path).filter(pl.col("segment_type") == "table_row")
    assert frame["text"].to_list() == ['id: 1\ntext: said "hi" there', "id: 2\ntext: plain"]
    assert set(frame["doc_type"]) == {"tsv"}


def test_csv_blank_lines_before_the_header(tmp_path: Path) -> None:
    write(tmp_path / "b.csv", "\n\nx,y\n1,2\n")
    write(tmp_path / "h.csv", "\nonly,header\n")
    frame = extract(tmp_path).filter(pl.col("segment_type") == "table_row")
    assert frame.select("doc_id", "text").rows() == [("b", "x: 1\ny: 2")]


def test_csv_missing_key_column_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "p.csv", CSV)
    with pytest.raises(InputError, match=r"p\.csv.*key column.*'nope'.*--key-columns"):
        extract(tmp_path, key_columns=["nope"])


def test_jsonl_and_parquet_pass_through(tmp_path: Path) -> None:
    table = pl.DataFrame({
        "doc_id": ["d", "d"], "segment_id": ["d#0", "d#1"], "text": ["a", "b"],
        "segment_type": ["paragraph", "paragraph"], "position": [0, 1], "extra": [1.5, 2.5],
    })
    table.write_ndjson(tmp_path / "seg.jsonl")
    got = extract(tmp_path / "seg.jsonl")
    assert got.equals(table)
    table.write_parquet(tmp_path / "seg.parquet")
    assert extract(tmp_path / "seg.parquet").equals(table)


def test_passthrough_mixes_with_extracted(tmp_path: Path) -> None:
    pl.DataFrame({
        "doc_id": ["zz"], "segment_id": ["zz#0"], "text": ["given"],
        "segment_type": ["sentence"], "position": [0],
    }).write_parquet(tmp_path / "z.parquet")
    write(tmp_path / "a.md", "hello\n")
    frame = extract(tmp_path)
    assert frame["segment_id"].to_list() == ["a#0", "zz#0"]  # file order: a.md, z.parquet
    assert frame["text"].to_list() == ["hello", "given"]
    validate(frame)


def test_invalid_passthrough_names_the_file(tmp_path: Path) -> None:
    write(tmp_path / "bad.jsonl", '{"doc_id": "d", "text": "x"}\n')
    with pytest.raises(InputError, match=r"bad\.jsonl.*missing required column"):
        extract(tmp_path)
    write(tmp_path / "broken.jsonl", '{"doc_id": \n')
    with pytest.raises(InputError, match=r"broken\.jsonl"):
        extract(tmp_path / "broken.jsonl")


# ---------------------------------------------------------------- files, ids, languages


def make_tree(root: Path) -> None:
    write(root / "content" / "en" / "docs" / "a.md", "# A\n\nenglish text\n")
    write(root / "content" / "fr" / "docs" / "a.md", "# A\n\ntexte français\n")
    write(root / "content" / "ja" / "b.md", "---\nlanguage: ja-JP\n---\n本文\n")
    write(root / "content" / "en" / ".hidden.md", "hidden\n")
    write(root / "content" / ".git" / "x.md", "hidden dir\n")
    write(root / "content" / "en" / "image.png", b"\x89PNG")


def test_directory_walk_ids_and_order(tmp_path: Path) -> None:
    make_tree(tmp_path)
    result = extract_documents(tmp_path)
    frame = result.segments
    assert result.files == ("content/en/docs/a.md", "content/fr/docs/a.md", "content/ja/b.md")
    assert frame["doc_id"].unique(maintain_order=True).to_list() == [
        "content/en/docs/a", "content/fr/docs/a", "content/ja/b"
    ]
    assert frame["segment_id"].to_list()[:2] == ["content/en/docs/a#0", "content/en/docs/a#1"]
    assert "language" in frame.columns  # the ja file's front matter
    assert frame.filter(pl.col("doc_id") == "content/en/docs/a")["language"].to_list() == [None] * 2


def test_root_and_file_arguments(tmp_path: Path) -> None:
    make_tree(tmp_path)
    content = tmp_path / "content"
    assert set(extract(content)["doc_id"]) == {"en/docs/a", "fr/docs/a", "ja/b"}
    single = extract(content / "en" / "docs" / "a.md")
    assert set(single["doc_id"]) == {"a"}
    rooted = extract([content / "fr" / "docs" / "a.md"], root=content)
    assert set(rooted["doc_id"]) == {"fr/docs/a"}
    with pytest.raises(InputError, match="not inside the root"):
        extract([tmp_path / "content" / "en" / "docs" / "a.md"], root=content / "fr")


def test_language_from_path(tmp_path: Path) -> None:
    make_tree(tmp_path)
    frame = extract(tmp_path, language_from_path="content/{lang}/**")
    langs = dict(frame.group_by("doc_id").agg(pl.col("language").first()).iter_rows())
    assert langs == {"content/en/docs/a": "en", "content/fr/docs/a": "fr",
                     "content/ja/b": "ja-JP"}  # front matter wins over the path
    # The pattern may start with the root's own name, or be relative to the root.
    from_content = extract(tmp_path / "content", language_from_path="content/{lang}/**")
    relative = extract(tmp_path / "content", language_from_path="{lang}/**")
    assert from_content.equals(relative)
    assert set(relative["language"]) == {"en", "fr", "ja-JP"}
    # Files the pattern does not match get no language.
    partial = extract(tmp_path, language_from_path="content/{lang}/docs/*.md")
    assert partial.filter(pl.col("doc_id") == "content/ja/b")["language"].to_list() == ["ja-JP"]
    assert set(partial.filter(pl.col("doc_id") != "content/ja/b")["language"]) == {"en", "fr"}


def test_language_column_absent_without_languages(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "text\n")
    assert "language" not in extract(tmp_path).columns


def test_language_pattern_syntax() -> None:
    regex = compile_language_pattern("content/{lang}/**")
    assert regex.fullmatch("content/pt-BR/docs/x.md").group("lang") == "pt-BR"  # type: ignore[union-attr]
    assert regex.fullmatch("other/en/x.md") is None
    star = compile_language_pattern("**/{lang}.md")
    assert star.fullmatch("a/b/de.md").group("lang") == "de"  # type: ignore[union-attr]
    assert star.fullmatch("de.md").group("lang") == "de"  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match=r"\{lang\}"):
        compile_language_pattern("content/**")


def test_ids_and_bytes_are_stable_across_runs(tmp_path: Path) -> None:
    make_tree(tmp_path / "docs")
    write(tmp_path / "docs" / "t.csv", CSV)
    write(tmp_path / "docs" / "p.html", HTML)
    first = extract(tmp_path / "docs", language_from_path="content/{lang}/**")
    second = extract(tmp_path / "docs", language_from_path="content/{lang}/**")
    assert first.equals(second)
    first.write_parquet(tmp_path / "1.parquet")
    second.write_parquet(tmp_path / "2.parquet")
    assert (tmp_path / "1.parquet").read_bytes() == (tmp_path / "2.parquet").read_bytes()


def test_worker_processes_give_the_same_table(tmp_path: Path) -> None:
    for i in range(6):
        write(tmp_path / f"d{i}.md", f"# Doc {i}\n\npara {i}\n\n- item {i}\n")
    write(tmp_path / "bad.md", b"\xff\xfe")
    serial = extract_documents(tmp_path, workers=1, skip_bad_files=True)
    parallel = extract_documents(tmp_path, workers=2, skip_bad_files=True)
    assert serial.segments.equals(parallel.segments)
    assert serial.skipped == parallel.skipped
    assert [s.path for s in parallel.skipped] == ["bad.md"]


# ---------------------------------------------------------------- errors


BAD_FILES = {
    "latin1.md": ("café au lait\n".encode("latin-1"), r"latin1\.md is not valid UTF-8.*byte 0xe9"),
    "yaml.md": (b"---\ntitle: [unclosed\n---\nbody\n", r"yaml\.md: broken YAML front matter"),
    "open.md": (b"---\ntitle: x\nbody\n", r"open\.md: the front matter .* never closed"),
    "list.md": (b"---\n- a\n- b\n---\nbody\n", r"list\.md: the front matter is a list"),
    "date.md": (b"---\ndate: yesterday\n---\nbody\n", r"date\.md: front matter date 'yesterday'"),
    "ragged.csv": (b"a,b\n1,2\n3\n4,5,6\n", r"ragged\.csv: ragged rows: lines 3, 4 .*header has 2"),
    "dup.csv": (b"a,a\n1,2\n", r"dup\.csv: duplicate column name"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_file_is_a_clear_input_error(tmp_path: Path, name: str) -> None:
    data, message = BAD_FILES[name]
    write(tmp_path / name, data)
    write(tmp_path / "good.md", "fine\n")
    with pytest.raises(InputError, match=message) as info:
        extract(tmp_path)
    assert "--skip-bad-files" in str(info.value)


def test_skip_bad_files_lists_them(tmp_path: Path) -> None:
    for name, (data, _) in BAD_FILES.items():
        write(tmp_path / name, data)
    write(tmp_path / "good.md", "fine\n")
    os.symlink(tmp_path / "missing-target.md", tmp_path / "dangling.md")
    result = extract_documents(tmp_path, skip_bad_files=True)
    assert result.segments["text"].to_list() == ["fine"]
    assert result.files == ("good.md",)
    assert sorted(s.path for s in result.skipped) == sorted([*BAD_FILES, "dangling.md"])
    reasons = {s.path: s.reason for s in result.skipped}
    assert "cannot read" in reasons["dangling.md"]
    assert "not valid UTF-8" in reasons["latin1.md"]
    manifest = result.manifest()
    assert manifest["files"] == 1
    assert {"path": "ragged.csv", "reason": reasons["ragged.csv"]} in manifest["skipped_files"]
    assert "1 files (8 skipped)" in result.summary()


@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_is_refused_never_read(tmp_path: Path) -> None:
    """Opening a named pipe waits for a writer: a pipe among the documents (or given alone)
    is refused by name, or skipped with skip_bad_files, and never opened, not even to record
    its hash for a later --update. Before, the run hung."""
    from arrowdedup.extract.discover import discover_files
    from arrowdedup.store.source_files import file_records

    write(tmp_path / "good.md", "fine\n")
    os.mkfifo(tmp_path / "pipe.md")
    for source in (tmp_path, tmp_path / "pipe.md"):
        with pytest.raises(InputError, match=r"pipe\.md is not a regular file"):
            extract(source)
    result = extract_documents(tmp_path, skip_bad_files=True)
    assert result.files == ("good.md",)
    assert [s.path for s in result.skipped] == ["pipe.md"]
    # Skipped under --skip-bad-files: the reason does not tell the run to use it.
    assert "not a regular file" in result.skipped[0].reason
    assert "--skip-bad-files" not in result.skipped[0].reason
    records = file_records(discover_files([tmp_path], None), ["good", "pipe"])
    assert [Path(p).name for p in records] == ["good.md"]


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses names that are not UTF-8")
def test_a_file_name_that_is_not_utf8_is_refused_by_name(tmp_path: Path) -> None:
    """A name with bytes that are not UTF-8 can be no doc_id: refused with the name shown
    escaped (or skipped), never a UnicodeEncodeError from deep inside the table building."""
    write(tmp_path / "good.md", "fine\n")
    bad = os.fsdecode(bytes(tmp_path) + b"/bad\xffname.md")
    with open(bad, "w", encoding="utf-8") as fh:
        fh.write("# B\n\nText.\n")
    with pytest.raises(InputError, match=r"bad\\xffname\.md: the file name is not valid UTF-8"):
        extract(tmp_path)
    result = extract_documents(tmp_path, skip_bad_files=True)
    assert result.files == ("good.md",)
    assert [s.path for s in result.skipped] == ["bad\\xffname.md"]
    json.dumps(result.manifest(), ensure_ascii=False).encode("utf-8")  # writable as UTF-8


def test_doc_id_collision(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "markdown\n")
    write(tmp_path / "a.txt", "text\n")
    with pytest.raises(InputError, match=r"a\.txt and a\.md both map to doc_id 'a'"):
        extract(tmp_path)
    result = extract_documents(tmp_path, skip_bad_files=True)
    assert result.segments["text"].to_list() == ["markdown"]
    assert [s.path for s in result.skipped] == ["a.txt"]


def test_path_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        extract(tmp_path / "nope")
    with pytest.raises(InputError, match="no documents found"):
        extract(tmp_path)
    write(tmp_path / "x.docx", b"PK")
    with pytest.raises(InputError, match=r"unknown document type '\.docx'"):
        extract(tmp_path / "x.docx")
    with pytest.raises(InputError, match="no input paths"):
        extract([])


def test_empty_documents_give_an_empty_typed_table(tmp_path: Path) -> None:
    write(tmp_path / "empty.md", "")
    write(tmp_path / "blank.txt", "\n\n")
    result = extract_documents(tmp_path)
    assert result.segments.height == 0
    assert result.files == ("blank.txt", "empty.md")
    assert "segment_id" in result.segments.columns


# ---------------------------------------------------------------- CLI


def test_cli_writes_parquet_and_prints_summary(tmp_path: Path) -> None:
    write(tmp_path / "docs" / "a.md", MARKDOWN)
    write(tmp_path / "docs" / "p.csv", CSV)
    out = tmp_path / "out" / "segments.parquet"
    res = CliRunner().invoke(app, ["extract", str(tmp_path / "docs"), "--out", str(out),
                                   "--key-columns", "sku"])
    assert res.exit_code == 0, res.output
    assert "extracted 2 files → 21 segments" in res.output  # 4 rows + 1 table summary
    assert "keys of p: sku (given)" in res.output
    assert "table_row 4" in res.output
    written = pl.read_parquet(out)
    assert written.equals(extract(tmp_path / "docs", key_columns="sku"))
    assert not [p for p in out.parent.iterdir() if p.name != "segments.parquet"]  # no temp left


def test_cli_bad_file_and_skip(tmp_path: Path) -> None:
    write(tmp_path / "docs" / "bad.md", b"\xff")
    write(tmp_path / "docs" / "good.md", "ok\n")
    out = tmp_path / "s.parquet"
    res = CliRunner().invoke(app, ["extract", str(tmp_path / "docs"), "--out", str(out)])
    assert res.exit_code == 1
    assert "error:" in res.output and "bad.md is not valid UTF-8" in res.output
    assert "Traceback" not in res.output
    assert not out.exists()
    res = CliRunner().invoke(app, ["extract", str(tmp_path / "docs"), "--out", str(out),
                                   "--skip-bad-files", "--language-from-path", "{lang}.md"])
    assert res.exit_code == 0, res.output
    assert "skipped bad.md: " in res.output and "not valid UTF-8" in res.output  # name, reason
    assert "1 files (1 skipped)" in res.output
    assert pl.read_parquet(out)["language"].to_list() == ["good"]


# ---------------------------------------------------------------- real corpus smoke test


def test_real_corpus_files() -> None:
    content = need(OTEL_CONTENT)
    picks = [
        content / "en" / "_index.md",
        content / "en" / "docs" / "demo" / "docker-deployment.md",
        content / "ja" / "docs" / "collector" / "installation.md",
    ]
    picks = [p for p in picks if p.exists()]
    if not picks:
        pytest.skip("none of the picked files is in ../shared/data's corpus (another version)")
    frame = extract(picks, root=content, language_from_path="{lang}/**")
    validate(frame)
    assert frame.height > 20
    prose = frame.filter(pl.col("segment_type") != "code")
    assert not prose.filter(pl.col("text").str.contains(r"\{\{[<%]")).height  # shortcodes gone
    assert not frame.filter(pl.col("text").str.strip_chars() == "").height
    docs = frame.group_by("doc_id").agg(pl.col("title").first(), pl.col("language").first())
    assert docs.filter(pl.col("title").is_null()).height == 0
    assert set(docs["language"]) <= {"en", "ja"}
    assert set(frame["segment_type"]) >= {"heading", "paragraph", "code"}


# ---------------------------------------------------------------- fuzz

_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("-#>*`|{}<%/+:\n\t ,\"'=[]()!_~.")),
        st.sampled_from(list(string.ascii_letters + string.digits)),
        st.characters(codec="utf-8"),
    ),
    max_size=300,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXT, suffix=st.sampled_from([".md", ".csv", ".tsv", ".txt", ".html"]))
def test_fuzz_any_text_extracts_or_refuses_cleanly(text: str, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"doc{suffix}"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            frame = extract(path)
        except ArrowDedupError:
            return
        validate(frame)
        assert frame["segment_id"].is_unique().all()
        assert frame.filter(pl.col("text").str.strip_chars() == "").height == 0


_PLAIN = st.text(alphabet=st.sampled_from(list("ab cd\n\t#->+=:.,;'\"()/|%$@^~1-é中")),
                 max_size=200)


@settings(max_examples=80, deadline=None)
@given(text=_PLAIN)
def test_plain_text_fast_path_equals_the_inline_parser(text: str) -> None:
    # Inline content without inline syntax skips markdown-it's inline parser; it must give
    # exactly what the parser gives.
    import re

    from arrowdedup.extract import markdown

    text = text.lstrip("-+")  # front matter is not what this test is about
    fast = markdown.parse_markdown(text, "x.md")
    saved = markdown._INLINE_SYNTAX
    markdown._INLINE_SYNTAX = re.compile("")  # every inline token through the parser
    try:
        slow = markdown.parse_markdown(text, "x.md")
    finally:
        markdown._INLINE_SYNTAX = saved
    assert (fast.texts, fast.types, fast.sections) == (slow.texts, slow.types, slow.sections)



@pytest.mark.slow
def test_extraction_benchmark_quick() -> None:
    need(OTEL_CONTENT)
    from benchmarks import extraction

    result = extraction.run(quick=True)
    figures = result["figures"]
    assert figures["files"] > 700 and figures["segments"] > 20_000
    assert figures["serial_seconds"] > 0 and figures["parallel_seconds"] > 0
    assert result["tables"][0]["rows"][0][1] == figures["files"]


def test_unsupported_and_binary_files_are_reported_not_ignored(tmp_path: Path) -> None:
    write(tmp_path / "docs" / "good.md", "# Good\n\nSome text.\n")
    write(tmp_path / "docs" / "img" / "logo.png", b"\x89PNG\r\n\x1a\n\0\0")
    write(tmp_path / "docs" / "model.bin", b"\0\1\2")
    write(tmp_path / "docs" / "fake.md", bytes(range(256)))
    write(tmp_path / "docs" / ".hidden.bin", b"\0")
    result = extract_documents(tmp_path / "docs", skip_bad_files=True)
    assert result.unsupported == ("img/logo.png", "model.bin")
    assert [s.path for s in result.skipped] == ["fake.md"]
    assert "is a binary file, not text" in result.skipped[0].reason
    assert "iconv" not in result.skipped[0].reason
    assert "2 of unsupported types ignored" in result.summary()
    assert result.manifest()["unsupported_files"] == ["img/logo.png", "model.bin"]
    lines = result.left_out()
    assert lines[0].startswith("skipped fake.md: ") and "binary file" in lines[0]
    assert lines[-1].startswith("ignored 2 file(s) of unsupported types: img/logo.png, model.bin")
    with pytest.raises(InputError, match="binary file, not text"):
        extract_documents(tmp_path / "docs" / "fake.md")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1"))  # text in another encoding
    with pytest.raises(InputError, match="not valid UTF-8"):
        extract_documents(latin1)


def test_doc_version_from_path(tmp_path: Path) -> None:
    for version in ("3.9", "3.10"):
        write(tmp_path / "docs" / f"v{version}" / "install.md", "# Install\n\nRun it.\n")
    write(tmp_path / "docs" / "index.md", "# Index\n")
    frame = extract(tmp_path / "docs", doc_version_from_path="docs/v{version}/**")
    versions = dict(zip(frame["doc_id"], frame["doc_version"], strict=True))
    assert versions == {"v3.10/install": "3.10", "v3.9/install": "3.9", "index": None}
    with pytest.raises(ConfigError, match=r"must contain \{version\} exactly once"):
        extract(tmp_path / "docs", doc_version_from_path="docs/**")


def test_fenced_code_keeps_its_language(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "# A\n\n```yaml\n# not a heading\nkey: 1\n```\n\n```\nplain\n```\n")
    frame = extract(tmp_path / "a.md").filter(pl.col("segment_type") == "code")
    assert frame["code_language"].to_list() == ["yaml", None]


def test_extract_to_an_unwritable_place_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "words\n")
    blocker = tmp_path / "file"
    blocker.write_text("x")  # a file where a folder would have to be
    out = CliRunner().invoke(app, ["extract", str(tmp_path / "a.md"), "-o",
                                   str(blocker / "sub" / "out.parquet")])
    assert out.exit_code == 1, out.output
    assert out.output.startswith("error: cannot write --out") and "Traceback" not in out.output


def test_skipped_files_one_line_each_then_a_count() -> None:
    from arrowdedup.extract.core import skipped_lines

    many = [(f"d/{i}.md", "is a binary file, not text") for i in range(25)]
    lines = skipped_lines(many)
    assert lines[:2] == ["skipped d/0.md: is a binary file, not text",
                         "skipped d/1.md: is a binary file, not text"]
    assert len(lines) == 21 and lines[-1].startswith("skipped 5 more unreadable file(s)")
    assert skipped_lines(many[:1]) == ["skipped d/0.md: is a binary file, not text"]
    assert skipped_lines([]) == []


_LAZY = """
import json, sys
import arrowdedup.cli  # every command's options, --max-cells & co. among them
before = "arrowdedup.extract.core" in sys.modules
import arrowdedup as ad
from arrowdedup.extract import ExtractLimits, markdown
ex = sys.modules["arrowdedup.extract"]  # the package (the attribute is the function)
limits_alone = "arrowdedup.extract.core" not in sys.modules
print(json.dumps([before, limits_alone, callable(ad.extract), ad.extract is ex.extract,
                  ExtractLimits.__module__, markdown.__name__,
                  sorted(dir(ex)) == sorted(ex.__all__)]))
"""


def test_the_cli_reads_extract_limits_without_loading_the_parsers():
    """Commands that read no documents (search, context, --help) do not pay for the parsers;
    every name of the package still resolves, and ``arrowdedup.extract`` stays the function."""
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _LAZY], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == [False, True, True, True, "arrowdedup.extract.limits",
                                       "arrowdedup.extract.markdown", True]
