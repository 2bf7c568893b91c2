"""A store's life on the command line: `ingest --update`, `delete`, `versions`, `rollback`,
`compact`, `prune` (each one library call of :mod:`arrowdedup.update` or
:mod:`arrowdedup.store.versions`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .app import JsonOpt, QuietOpt, app, clean_errors, compact_table, console, note, print_json

KeepOpt = Annotated[int, typer.Option(help="Versions kept after this run (older ones are "
                                           "pruned).")]


def _change_line(result: Any) -> str:
    c = result.changes or {}
    verb = "would change" if result.dry_run else "changed"
    return (f"{verb}: {c.get('added', 0)} added, {c.get('changed', 0)} changed, "
            f"{c.get('removed', 0)} removed, {c.get('unchanged', 0)} unchanged")


def _payload(result: Any) -> dict[str, Any]:
    return {"store": str(result.root), "version": result.version_id,
            "dry_run": bool(result.dry_run), "changes": dict(result.changes or {}),
            "counts": result.counts,
            "timings": {k: float(v) for k, v in result.timings.items()}}


def _report(result: Any, *, quiet: bool, as_json: bool) -> None:
    if as_json:
        note(_change_line(result))
        print_json(_payload(result))
        return
    console.print(_change_line(result), markup=False)
    if not result.dry_run and not quiet:
        from ..timings import line as stages_line

        console.print(result.summary(), markup=False)
        console.print(stages_line(result.timings), markup=False)
    suffix = " (nothing written)" if result.dry_run else ""
    console.print(f"store: {result.root} (version {result.version_id}){suffix}", markup=False)


def run_update(inputs: list[Path], out: Path, cfg: Any, *, quiet: bool, as_json: bool,
               **options: Any) -> None:
    """`ingest --update`: one :func:`arrowdedup.update.update_store` call."""
    from ..update import update_store

    result = update_store(out, inputs, config=cfg, **options)
    _report(result, quiet=quiet, as_json=as_json)


@app.command()
@clean_errors
def delete(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    doc_ids: Annotated[list[str] | None, typer.Argument(help="doc_id of each document to "
                                                              "remove.")] = None,
    from_file: Annotated[Path | None, typer.Option(
        "--from-file", help="A file of doc_ids to remove, one per line.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed and "
                                                            "write nothing.")] = False,
    keep_versions: KeepOpt = 5,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove documents by doc_id, as a new version (an unknown id removes nothing)."""
    from ..errors import InputError
    from ..update import delete_documents

    ids = list(doc_ids or [])
    if from_file is not None:
        try:
            text = from_file.read_text(encoding="utf-8")
        except OSError as err:
            raise InputError(f"cannot read --from-file {from_file} ({err.strerror or err}); "
                             "check the path") from err
        ids += [line.strip() for line in text.splitlines() if line.strip()]
    if not ids:
        raise InputError("no doc_id given; name the documents to delete, or pass "
                         "--from-file F (one doc_id per line)")
    result = delete_documents(store, ids, dry_run=dry_run, keep_versions=keep_versions)
    _report(result, quiet=quiet, as_json=as_json)


@app.command()
@clean_errors
def versions(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    as_json: JsonOpt = False,
) -> None:
    """List the kept versions, oldest first, and which one is current."""
    from ..store.versions import list_versions

    infos = list_versions(store)
    if as_json:
        print_json([v.to_dict() for v in infos])
        return
    table = compact_table("Versions")
    for name in ("", "id", "created_at", "parent", "docs", "segments", "added", "changed",
                 "removed", "deltas"):
        table.add_column(name, no_wrap=True)
    for v in infos:
        table.add_row("*" if v.current else "", v.id, (v.created_at or "")[:19],
                      v.parent or "-", str(v.documents), str(v.segments), str(v.added),
                      str(v.changed), str(v.removed), str(v.deltas))
    console.print(table)


@app.command()
@clean_errors
def rollback(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    version: Annotated[str | None, typer.Argument(
        help="Version id to make current (default: the current version's parent).")] = None,
) -> None:
    """Make a kept version current again (one atomic switch; no version is written)."""
    from ..store.versions import rollback as do_rollback

    info = do_rollback(store, version)
    console.print(f"store: {store} (current version {info.id}, {info.documents} documents)",
                  markup=False)


@app.command()
@clean_errors
def compact(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    keep_versions: KeepOpt = 5,
) -> None:
    """Fold the current version's deltas into one base (a new version, the same data)."""
    from ..update import compact_store

    before = _current_id(store)
    result = compact_store(store, keep_versions=keep_versions)
    if result.version_id == before:
        console.print(f"store: {store} (version {before} has no deltas; nothing to compact)",
                      markup=False)
    else:
        console.print(f"store: {store} (version {result.version_id}, compacted from "
                      f"{before})", markup=False)


def _current_id(store: Path) -> str:
    from ..store import open_store

    st = open_store(store)
    try:
        return st.run_id
    finally:
        st.close()


@app.command()
@clean_errors
def prune(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    keep: Annotated[int, typer.Option(help="Newest versions to keep (the current one is "
                                           "always kept).")] = 5,
    fold: Annotated[bool, typer.Option("--fold/--no-fold", help="First fold the current "
                                       "version's deltas into a compacted version (so the "
                                       "rows they replaced leave the disk).")] = True,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed and "
                                                            "remove nothing.")] = False,
) -> None:
    """Fold the current version's deltas, then remove old versions (never the current one,
    nor one a reader holds open)."""
    from ..update import prune as do_prune

    done = do_prune(store, keep=keep, fold=fold, dry_run=dry_run)
    if done.folded_deltas:
        verb = "would fold" if dry_run else "folded"
        into = f" into {done.folded}" if done.folded else " into a compacted version"
        console.print(f"{verb} {done.folded_deltas} delta(s){into}", markup=False)
    verb = "would remove" if dry_run else "removed"
    console.print(f"{verb} {len(done.removed)} version(s)"
                  + (f": {', '.join(done.removed)}" if done.removed else ""), markup=False)
    if done.held:
        note(f"kept {len(done.held)} version(s) a reader holds open: {', '.join(done.held)}; prune "
             "again later")
