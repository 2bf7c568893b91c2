"""Careless updates: a document is never replaced from another file than the one the store
recorded for it (another folder's page of the same doc_id, a moved checkout) unless
`--allow-moved-sources`; `--dry-run` names the documents it would add, change and remove."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arrowdedup import StoreError, open_store
from arrowdedup.cli import app
from arrowdedup.pipeline.run import ingest_to_store
from arrowdedup.pipeline.update import update_store
from arrowdedup.store.source_files import Moved, moved_summary

runner = CliRunner()


@pytest.fixture(scope="module")
def model() -> str:
    from tests.helpers import M2V_MODEL, need

    return f"model2vec:{need(M2V_MODEL)}"


def _page(folder: Path, name: str, text: str) -> None:
    path = folder / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {name}\n\n{text}\n\nA second paragraph of {name}, to have two.\n",
                    encoding="utf-8")


def _docs(folder: Path, names: list[str], tag: str = "") -> Path:
    for name in names:
        _page(folder, name, f"The {name} page{tag} explains how to configure {name} well.")
    return folder


def _store(tmp_path: Path, model: str, names: list[str]) -> tuple[Path, Path]:
    folder = _docs(tmp_path / "docs", names)
    root = tmp_path / "store"
    ingest_to_store([folder], root, embedder=model, quiet=True)
    return folder, root


def _text_of(root: Path, doc_id: str) -> str:
    seg = open_store(root).segments(with_embeddings=False).collect()
    return " ".join(seg.filter(seg["doc_id"] == doc_id).get_column("text").to_list())


def test_another_folders_page_of_the_same_id_is_refused(tmp_path: Path, model: str) -> None:
    folder, root = _store(tmp_path, model, ["faq", "guide"])
    other = _docs(tmp_path / "other", ["faq", "intro"], tag=" of the other folder")
    before = open_store(root).run_id
    with pytest.raises(StoreError) as info:
        update_store(root, [other])
    message = str(info.value)
    assert "\n" not in message
    assert "'faq'" in message and str(folder / "faq.md") in message \
        and str(other / "faq.md") in message and "--allow-moved-sources" in message
    assert open_store(root).run_id == before  # nothing written
    # The dry run is refused the same way: it says what the real run would do.
    with pytest.raises(StoreError, match="--allow-moved-sources"):
        update_store(root, [other], dry_run=True)
    # Allowed: the other folder's faq replaces the store's, and its path is recorded.
    done = update_store(root, [other], allow_moved_sources=True)
    assert done.change_ids is not None
    assert list(done.change_ids["changed"]) == ["faq"] and list(done.change_ids["added"]) == \
        ["intro"]
    assert "other folder" in _text_of(root, "faq")
    recorded = open_store(root).manifest["source_files"]
    assert recorded[str(other / "faq.md")]["doc_ids"] == ["faq"]
    assert str(folder / "faq.md") not in recorded  # the old file no longer vouches for it
    assert str(folder / "guide.md") in recorded
    # The next update from the other folder compares with the new record: nothing moved.
    again = update_store(root, [other])
    assert again.changes is not None and again.changes["changed"] == 0
    # And going back to the first folder is a move again.
    with pytest.raises(StoreError, match=r"'faq' was ingested from .*other"):
        update_store(root, [folder])


def test_an_edited_file_at_its_recorded_path_is_an_ordinary_change(tmp_path: Path,
                                                                   model: str) -> None:
    folder, root = _store(tmp_path, model, ["faq", "guide"])
    _page(folder, "faq", "A new answer.")
    result = update_store(root, [folder])
    assert result.change_ids is not None and list(result.change_ids["changed"]) == ["faq"]


def test_a_moved_checkout_is_refused_naming_both_roots(tmp_path: Path, model: str) -> None:
    names = ["faq", "guide", "sub/deep", "sub/other"]
    folder, root = _store(tmp_path, model, names)
    moved = tmp_path / "elsewhere" / "docs"
    moved.parent.mkdir()
    shutil.move(str(folder), str(moved))
    with pytest.raises(StoreError) as info:
        update_store(root, [moved])
    message = str(info.value)
    assert "\n" not in message and "--allow-moved-sources" in message
    assert "3 more document(s) likewise" in message
    assert f"now under {moved} instead of {folder}" in message
    result = update_store(root, [moved], allow_moved_sources=True)
    # The same bytes under a new root: no document changes, the new paths are recorded.
    assert result.changes is not None and result.changes["unchanged"] == 4 \
        and result.changes["changed"] == 0
    recorded = open_store(root).manifest["source_files"]
    assert sorted(recorded) == sorted(str(moved / f"{n}.md") for n in names)
    assert update_store(root, [moved]).changes["unchanged"] == 4  # type: ignore[index]


def test_a_workbook_moved_is_caught_by_its_sheets(tmp_path: Path, model: str) -> None:
    import xlsxwriter


    def book(path: Path, value: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        wb = xlsxwriter.Workbook(str(path))
        sheet = wb.add_worksheet("Prices")
        sheet.write_row(0, 0, ["item", "price"])
        sheet.write_row(1, 0, ["widget", value])
        wb.close()

    book(tmp_path / "a" / "prices.xlsx", 3)
    root = tmp_path / "store"
    ingest_to_store([tmp_path / "a"], root, embedder=model, quiet=True)
    book(tmp_path / "b" / "prices.xlsx", 4)
    with pytest.raises(StoreError, match=r"'prices#Prices'.*a/prices\.xlsx.*b/prices\.xlsx"):
        update_store(root, [tmp_path / "b"])


def test_moved_summary_without_a_common_root() -> None:
    text = moved_summary([Moved("a", "/x/a.md", "/y/a.md"), Moved("b", "/x/b.md", "/z/b.md")])
    assert text.startswith("document 'a' was ingested from /x/a.md, and this update would "
                           "replace it with /y/a.md (1 more document(s) likewise)")


# ----------------------------------------------------------------------------- CLI


def test_cli_refuses_and_the_flag_allows(tmp_path: Path, model: str) -> None:
    folder, root = _store(tmp_path, model, ["faq", "guide"])
    other = _docs(tmp_path / "other", ["faq"], tag=" of the other folder")
    base = ["ingest", str(other), "--out", str(root), "--update", "--embedder", model]
    out = runner.invoke(app, base)
    assert out.exit_code == 1
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert str(folder / "faq.md") in lines[0] and str(other / "faq.md") in lines[0]
    assert "--allow-moved-sources" in lines[0]
    out = runner.invoke(app, [*base, "--allow-moved-sources", "-q"])
    assert out.exit_code == 0, out.output
    assert "other folder" in _text_of(root, "faq")
    # The flag belongs to an update.
    out = runner.invoke(app, ["ingest", str(other), "--out", str(tmp_path / "new"),
                              "--embedder", model, "--allow-moved-sources"])
    assert out.exit_code == 1 and "--update" in out.output


def test_cli_dry_run_names_the_documents(tmp_path: Path, model: str) -> None:
    names = [f"page{i:02d}" for i in range(3)]
    folder, root = _store(tmp_path, model, names)
    _docs(folder, [f"new{i:02d}" for i in range(25)])
    _page(folder, "page00", "Changed text of page zero.")
    (folder / "page02.md").unlink()
    before = open_store(root).run_id
    args = ["ingest", str(folder), "--out", str(root), "--update", "--delete-missing",
            "--dry-run", "--embedder", model]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    text = out.output
    assert "would change: 25 added, 1 changed, 1 removed, 1 unchanged" in text
    assert "would add 25 document(s), the first 20:" in text
    shown = [f"new{i:02d}" for i in range(25) if f"  new{i:02d}\n" in text]
    assert shown == [f"new{i:02d}" for i in range(20)]
    assert "… and 5 more (--json lists them all)" in text
    assert "would change 1 document(s):\n  page00\n" in text
    assert "would remove 1 document(s):\n  page02\n" in text
    out = runner.invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    payload = json.loads(out.stdout)
    assert payload["dry_run"] is True
    assert payload["doc_ids"] == {"added": [f"new{i:02d}" for i in range(25)],
                                  "changed": ["page00"], "removed": ["page02"]}
    assert open_store(root).run_id == before  # nothing was written


def test_library_dry_run_lists_every_id(tmp_path: Path, model: str) -> None:
    folder, root = _store(tmp_path, model, ["a", "b"])
    _docs(folder, ["c"])
    (folder / "b.md").unlink()
    dry = update_store(root, [folder], delete_missing=True, dry_run=True)
    assert dry.dry_run and dry.change_ids == {"added": ("c",), "changed": (),
                                              "removed": ("b",)}


def test_cli_delete_dry_run_names_the_documents_too(tmp_path: Path, model: str) -> None:
    _, root = _store(tmp_path, model, ["a", "b", "c"])
    out = runner.invoke(app, ["delete", str(root), "a", "c", "--dry-run"])
    assert out.exit_code == 0, out.output
    assert "would remove 2 document(s):\n  a\n  c\n" in out.output
    payload = json.loads(runner.invoke(app, ["delete", str(root), "a", "--dry-run",
                                             "--json"]).stdout)
    assert payload["doc_ids"] == {"added": [], "changed": [], "removed": ["a"]}
    assert sorted(open_store(root).documents().collect().get_column("doc_id").to_list()) == \
        ["a", "b", "c"]
