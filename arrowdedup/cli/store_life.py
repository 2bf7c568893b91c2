"""A store's life on the command line: `ingest --update`, `delete`, `versions`, `rollback`,
`compact`, `prune` (each one library call of :mod:`arrowdedup.pipeline.update` or
:mod:`arrowdedup.store.versions`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..escape import escape
from ..store.layout import KEEP_VERSIONS
from .app import (
    JsonOpt,
    QuietOpt,
    app,
    clean_errors,
    compact_table,
    console,
    note,
    print_json,
    say,
    table_overhead,
)

if TYPE_CHECKING:
    from rich.table import Table

KeepOpt = Annotated[int, typer.Option(help="Versions kept after this run (older ones are "
                                           "pruned).")]


def _change_line(result: Any) -> str:
    c = result.changes or {}
    verb = "would change" if result.dry_run else "changed"
    return (f"{verb}: {c.get('added', 0)} added, {c.get('changed', 0)} changed, "
            f"{c.get('removed', 0)} removed, {c.get('unchanged', 0)} unchanged")


# A dry run's text output names this many documents of each kind (`--json` names them all).
SHOWN_IDS = 20


def _payload(result: Any) -> dict[str, Any]:
    ids = result.change_ids or {}
    return {"store": str(result.root), "version": result.version_id,
            "dry_run": bool(result.dry_run), "changes": dict(result.changes or {}),
            "doc_ids": {kind: list(ids.get(kind, ())) for kind in ("added", "changed",
                                                                    "removed")},
            "counts": result.counts,
            "timings": {k: float(v) for k, v in result.timings.items()}}


def change_id_lines(result: Any, limit: int = SHOWN_IDS) -> list[str]:
    """The documents a dry run would add, change and remove: per kind, a count and the first
    ``limit`` doc_ids, one a line."""
    lines: list[str] = []
    ids = result.change_ids or {}
    for kind, verb in (("added", "add"), ("changed", "change"), ("removed", "remove")):
        docs = list(ids.get(kind, ()))
        if not docs:
            continue
        shown = f", the first {limit}" if len(docs) > limit else ""
        lines.append(f"would {verb} {len(docs)} document(s){shown}:")
        lines.extend(f"  {d}" for d in docs[:limit])
        if len(docs) > limit:
            lines.append(f"  … and {len(docs) - limit} more (--json lists them all)")
    return lines


def _report(result: Any, *, quiet: bool, as_json: bool) -> None:
    if as_json:
        note(_change_line(result))
        print_json(_payload(result))
        return
    say(_change_line(result))
    if result.dry_run:
        for line in change_id_lines(result):
            say(line)
    if not result.dry_run and not quiet:
        from ..timings import line as stages_line

        say(result.summary())
        say(stages_line(result.timings))
    suffix = " (nothing written)" if result.dry_run else ""
    say(f"store: {result.root} (version {result.version_id}){suffix}")


def run_update(inputs: list[Path], out: Path, cfg: Any, *, quiet: bool, as_json: bool,
               **options: Any) -> None:
    """`ingest --update`: one :func:`arrowdedup.pipeline.update.update_store` call."""
    from ..pipeline.update import update_store

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
    keep_versions: KeepOpt = KEEP_VERSIONS,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove documents by doc_id, as a new version (an unknown id removes nothing)."""
    from ..errors import InputError
    from ..pipeline.update import delete_documents

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
    from ..store.versions import scan_versions

    infos, skipped = scan_versions(store)
    for name, why in skipped:
        note(f"skipped version {name}: {why}")
    if as_json:
        print_json([v.to_dict() for v in infos])
        return
    console.print(versions_table(infos, console.width))


def versions_table(infos: list[Any], width: int) -> Table:
    """The kept versions, one line each when that fits ``width``; otherwise two lines each
    (the id over its parent, the date over the time, counts in pairs), which fits 80
    columns. A version id is never cut nor wrapped: it is what ``rollback`` takes."""
    headers = ("", "id", "created_at", "parent", "docs", "segments", "added", "changed",
               "removed", "deltas")
    rows = [("*" if v.current else "", escape(v.id), escape((v.created_at or "")[:19]),
             escape(v.parent or "-"), str(v.documents), str(v.segments), str(v.added),
             str(v.changed), str(v.removed), str(v.deltas)) for v in infos]
    natural = sum(max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers))
    table = compact_table("Versions")
    if natural + table_overhead(len(headers)) <= width:
        for i, name in enumerate(headers):
            table.add_column(name, no_wrap=True, justify="right" if i > 3 else "left")
        for row in rows:
            table.add_row(*row)
        return table
    stacked = ("", "id\nparent", "created_at", "docs\nsegments", "added\nchanged",
               "removed\ndeltas")
    for i, name in enumerate(stacked):
        table.add_column(name, no_wrap=True, justify="right" if i > 2 else "left")
    for mark, vid, created, parent, *counts in rows:
        table.add_row(mark, f"{vid}\n{parent}", created.replace("T", "\n", 1),
                      *(f"{counts[i]}\n{counts[i + 1]}" for i in (0, 2, 4)))
    return table


@app.command()
@clean_errors
def rollback(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    version: Annotated[str | None, typer.Argument(
        help="Version id to make current (default: the current version's parent).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Make a kept version current again (one atomic switch; no version is written)."""
    from ..store.versions import rollback as do_rollback

    info = do_rollback(store, version)
    if as_json:
        print_json({"store": str(store), "current": info.to_dict()})
        return
    say(f"store: {store} (current version {info.id}, {info.documents} documents)")


@app.command()
@clean_errors
def compact(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    keep_versions: KeepOpt = KEEP_VERSIONS,
    as_json: JsonOpt = False,
) -> None:
    """Fold the current version's deltas into one base (a new version, the same data)."""
    from ..pipeline.update import compact_store

    before = _current_id(store)
    result = compact_store(store, keep_versions=keep_versions)
    if as_json:
        print_json({"store": str(store), "version": result.version_id, "from": before,
                    "compacted": result.version_id != before})
        return
    if result.version_id == before:
        say(f"store: {store} (version {before} has no deltas; nothing to compact)")
    else:
        say(f"store: {store} (version {result.version_id}, compacted from {before})")


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
                                           "always kept).")] = KEEP_VERSIONS,
    fold: Annotated[bool, typer.Option("--fold/--no-fold", help="First fold the current "
                                       "version's deltas into a compacted version (so the "
                                       "rows they replaced leave the disk).")] = True,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed and "
                                                            "remove nothing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Fold the current version's deltas, then remove old versions (never the current one,
    nor one a reader holds open)."""
    from ..pipeline.update import prune as do_prune

    done = do_prune(store, keep=keep, fold=fold, dry_run=dry_run)
    if as_json:
        print_json({"store": str(store), "dry_run": dry_run,
                    "folded_deltas": done.folded_deltas, "folded": done.folded,
                    "removed": list(done.removed), "held": list(done.held)})
        if done.held:
            note(f"kept {len(done.held)} version(s) a reader holds open; prune again later")
        return
    if done.folded_deltas:
        verb = "would fold" if dry_run else "folded"
        into = f" into {done.folded}" if done.folded else " into a compacted version"
        say(f"{verb} {done.folded_deltas} delta(s){into}")
    verb = "would remove" if dry_run else "removed"
    say(f"{verb} {len(done.removed)} version(s)"
        + (f": {', '.join(done.removed)}" if done.removed else ""))
    if done.held:
        note(f"kept {len(done.held)} version(s) a reader holds open: {', '.join(done.held)}; prune "
             "again later")
