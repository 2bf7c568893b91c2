"""DuckDB views over a store's Parquet files: the SPEC §8 metrics as SQL.

The views read ``STORE/current/...`` through the ``current`` symlink, so a new ingest (which
swaps the symlink) is visible to an open connection without rebuilding anything: views, not
copies. The retrieval log is read from ``STORE/retrieval_log/*.parquet``; while no search has
been logged it is an empty relation with the log's columns, and the first search shows up in it
without reconnecting.

Definitions (a "removed" segment is any decision other than ``kept``: exact, near or filtered,
matching ``documents.dedup_ratio``):

- ``dedup_ratio_ingestion``: removed / all decisions; NULL for an empty store.
- ``dedup_ratio_retrieval``: sum(removed) / sum(before) over the logged searches; NULL without
  searches.
- ``avg_salience_boost``: the mean over documents of each document's mean ``salience_boost``
  over its kept segments; NULL without kept segments.
- ``max_salience_boost``: the largest ``salience_boost`` of any kept segment; NULL without.
- ``guard_refused_merges``: how many segments the fact guard kept from a merge that cosine
  alone would have made (decisions with a ``guard_refused_id``); NULL for stores written
  before the guard.
- ``merges`` / ``guard_refusals``: each near merge (each refusal, with its ``reason``) with the
  segment's and the representative's text side by side, similarity, document and type.
- ``dedup_by_doc_type`` / ``dedup_by_language``: ``doc_type``/``language``, ``documents``,
  ``segments`` (segments in), ``value`` (removed / segments), ordered by the key, NULL last.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from ..errors import StoreError
from ..store import CURRENT, Store, open_store
from ..store.layout import (
    DECISIONS,
    DOCUMENTS,
    HISTORY,
    PART_GLOB,
    RETRIEVAL_LOG,
    SEGMENTS,
    TOMBSTONES,
)
from .keys import create_keys_view

CORPUS_METRICS = (
    "dedup_ratio_ingestion",
    "dedup_ratio_retrieval",
    "avg_salience_boost",
    "max_salience_boost",
    "guard_refused_merges",
)

# Column name → DuckDB type of the retrieval log (written by the retrieval engine).
RETRIEVAL_LOG_COLUMNS: dict[str, str] = {
    "time": "TIMESTAMPTZ",
    "run_id": "VARCHAR",
    "query_hash": "VARCHAR",
    "mode": "VARCHAR",
    "k": "INTEGER",
    "before": "BIGINT",
    "after": "BIGINT",
    "removed": "BIGINT",
    "timings": "VARCHAR",
}


def _literal(path: Path | str) -> str:
    """A SQL string literal for a path."""
    return "'" + str(path).replace("'", "''") + "'"


def _retrieval_log_sql(log_dir: Path) -> str:
    # An empty typed relation UNION BY NAME the files (``allow_empty``: no file yet is no row),
    # so the view has the log's columns before the first search and sees later searches. The
    # writer has one fixed schema; read_parquet's own union_by_name would double the cost of
    # reading the (one file per search) log.
    typed = ", ".join(f'CAST(NULL AS {t}) AS "{c}"' for c, t in RETRIEVAL_LOG_COLUMNS.items())
    files = f"read_parquet({_literal(log_dir / '*.parquet')}, allow_empty = true)"
    cols = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in RETRIEVAL_LOG_COLUMNS.items())
    return (f"SELECT {cols} FROM (SELECT {typed} WHERE false "
            f"UNION ALL BY NAME SELECT * FROM {files})")


def _group_view(key: str, key_source: str, join: str) -> str:
    return f"""
        SELECT {key_source} AS {key},
               count(DISTINCT d.doc_id) AS documents,
               count(*) AS segments,
               count(*) FILTER (WHERE d.action <> 'kept') / count(*) AS value
        FROM decisions AS d {join}
        GROUP BY 1
        ORDER BY 1 NULLS LAST
    """


METRIC_SQL: dict[str, str] = {
    "dedup_ratio_ingestion": """
        SELECT CASE WHEN count(*) = 0 THEN NULL
                    ELSE count(*) FILTER (WHERE action <> 'kept') / count(*) END AS value
        FROM decisions
    """,
    "dedup_ratio_retrieval": """
        SELECT CASE WHEN coalesce(sum("before"), 0) = 0 THEN NULL
                    ELSE sum(removed) / sum("before") END AS value
        FROM retrieval_log
    """,
    "avg_salience_boost": """
        SELECT avg(doc_boost) AS value
        FROM (SELECT doc_id, avg(salience_boost) AS doc_boost FROM segments GROUP BY doc_id)
    """,
    "max_salience_boost": "SELECT max(salience_boost) AS value FROM segments",
    "dedup_by_doc_type": _group_view(
        "doc_type", "doc.doc_type", "JOIN documents AS doc ON doc.doc_id = d.doc_id"
    ),
}


def store_root(store: str | Path | Store) -> Path:
    """The absolute store directory (not the resolved version: views follow ``current``)."""
    root = store.root if isinstance(store, Store) else Path(store)
    opened = open_store(root)  # refuses a path that is not a store, with the fix
    return Path(opened.root).absolute()


def connect(
    store: str | Path | Store, con: duckdb.DuckDBPyConnection | None = None
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (``con`` or a new in-memory one) with the store's views.

    Views: ``segments``, ``decisions``, ``documents`` (deltas merged), ``changes`` (the
    documents each version added, changed and removed), ``retrieval_log`` and the metrics
    ``dedup_ratio_ingestion``, ``dedup_ratio_retrieval``, ``avg_salience_boost``,
    ``max_salience_boost`` (one row, one column ``value``), ``dedup_by_doc_type`` (plus
    ``dedup_by_language`` when the decisions carry a ``language`` column).

    The connection has full DuckDB access (files, extensions, several statements, no time
    limit): it is for the store's owner; never run untrusted SQL on it (``search(where=...)``
    is the sandboxed filter).
    """
    root = store_root(store)
    current = root / CURRENT
    con = con if con is not None else duckdb.connect()
    base = {
        "segments": f"SELECT * FROM read_parquet({_literal(current / SEGMENTS / '*.parquet')})",
        "decisions": f"SELECT * FROM read_parquet({_literal(current / DECISIONS / '*.parquet')})",
        "documents": f"SELECT * FROM read_parquet({_literal(current / DOCUMENTS)})",
        "retrieval_log": _retrieval_log_sql(root / RETRIEVAL_LOG),
    }
    opened = open_store(root)
    try:
        check_view_files(opened)
        base["changes"] = changes_sql(opened, current)
        if opened.is_layered:
            base.update(layered_sql(opened, current))
    finally:
        opened.close()
    try:
        for name, sql in base.items():
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
        for name, sql in METRIC_SQL.items():
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
        decision_columns = {row[0] for row in con.sql("DESCRIBE decisions").fetchall()}
        for name, sql in explain_views(decision_columns).items():
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
        if "language" in decision_columns:
            con.execute("CREATE OR REPLACE VIEW dedup_by_language AS "
                        + _group_view("language", "d.language", ""))
        else:
            con.execute("DROP VIEW IF EXISTS dedup_by_language")
        create_keys_view(con)
    except duckdb.Error as err:
        raise StoreError(
            f"cannot open the Parquet files of store {root} in DuckDB ({err}); "
            "run `arrowdedup verify` on it or re-ingest"
        ) from err
    return con


def check_view_files(store: Store) -> None:
    """Check the Parquet files the views read against their block checksums. DuckDB reads
    them itself, by byte ranges we do not see, so each is checked whole (once per process;
    the embeddings are not among them). The views follow ``current``: a version that becomes
    current later is checked by the next ``connect``."""
    from ..store.integrity import check_parquet
    from ..store.layout import CHANGES, DECISIONS, DOCUMENTS, SEGMENTS, TOMBSTONES

    for path in sorted(store.version.rglob("*.parquet")):
        if path.parent.name in (SEGMENTS, DECISIONS) or \
                path.name in (DOCUMENTS, TOMBSTONES, CHANGES, HISTORY):
            guard = store.guard(path)
            if guard is not None:
                check_parquet(guard, None)


def _files_sql(paths: list[Path]) -> str:
    return "[" + ", ".join(_literal(p) for p in paths) + "]"


def layered_sql(store: Store, current: Path) -> dict[str, str]:
    """``segments``, ``decisions``, ``documents`` of a version with deltas: each layer's rows
    whose doc_id no later layer's tombstones name. The layer list is the current version's
    when the connection is made: after an update, reconnect to see it."""
    layers = store.layers()
    rel = [current / layer.name if layer.name else current for layer in layers]
    out: dict[str, str] = {}
    for view, pattern in (("segments", f"{SEGMENTS}/{PART_GLOB}"),
                          ("decisions", f"{DECISIONS}/{PART_GLOB}"),
                          ("documents", DOCUMENTS)):
        selects = []
        for i, (layer, path) in enumerate(zip(layers, rel, strict=True)):
            files = sorted(layer.path.glob(pattern))
            if not files:
                continue
            linked = [path / f.relative_to(layer.path) for f in files]
            sql = f"SELECT * FROM read_parquet({_files_sql(linked)})"
            later = [p / TOMBSTONES for p, lay in zip(rel[i + 1:], layers[i + 1:], strict=True)
                     if (lay.path / TOMBSTONES).exists()]
            if later:
                sql += (f" WHERE CAST(doc_id AS VARCHAR) NOT IN (SELECT doc_id FROM "
                        f"read_parquet({_files_sql(later)}))")
            selects.append(sql)
        out[view] = " UNION ALL BY NAME ".join(selects)
    return out


def changes_sql(store: Store, current: Path) -> str:
    """``changes``: ``seq`` (0 for the first version, then one per later version),
    ``version``, ``doc_id``, ``change`` (added / changed / removed), one row per document each
    version of the current version's lineage brought, read from the files
    :meth:`Store.change_layers` names (:meth:`Store.change_history` is the same table in
    Python)."""
    carried, deltas = store.change_layers()
    if carried:
        selects = [f"SELECT seq, version, doc_id, change FROM "
                   f"read_parquet({_literal(current / HISTORY)})"]
    else:
        base_id = str(store.manifest.get("base") or store.run_id)
        selects = [f"SELECT CAST(0 AS BIGINT) AS seq, {_literal(base_id)} AS version, "
                   f"CAST(doc_id AS VARCHAR) AS doc_id, 'added' AS change FROM "
                   f"read_parquet({_literal(current / DOCUMENTS)})"]
    for seq, version, rel in deltas:
        selects.append(f"SELECT CAST({seq} AS BIGINT) AS seq, {_literal(version)} AS version, "
                       f"doc_id, change FROM read_parquet({_literal(current / rel)})")
    return " UNION ALL ".join(selects)


def explain_views(decision_columns: set[str]) -> dict[str, str]:
    """``merges`` and ``guard_refusals``: each removed (or refused) segment beside the segment
    that stands (or stood) for it, with both texts. Stores written before the fact guard have
    no ``text`` / guard columns in their decisions: the texts then come from nowhere for
    removed rows (NULL) and ``guard_refusals`` is empty."""
    seg_text = "d.text" if "text" in decision_columns else "CAST(NULL AS VARCHAR)"
    merges = f"""
        SELECT d.doc_id, r.segment_type, d.segment_id, {seg_text} AS segment_text,
               d.representative_id, r.text AS representative_text, d.similarity
        FROM decisions AS d JOIN segments AS r ON r.segment_id = d.representative_id
        WHERE d.action = 'merged_near'
        ORDER BY d.doc_id, d.segment_id
    """
    if {"guard_refused_id", "guard_reason"} <= decision_columns:
        detail = ("d.guard_detail" if "guard_detail" in decision_columns
                  else "CAST(NULL AS VARCHAR)")
        refusals = f"""
            SELECT d.doc_id, r.segment_type, d.segment_id,
                   coalesce({seg_text}, own.text) AS segment_text,
                   d.guard_refused_id AS representative_id, r.text AS representative_text,
                   CAST(d.guard_reason AS VARCHAR) AS reason, {detail} AS detail,
                   CAST(d.action AS VARCHAR) AS action, d.representative_id AS merged_into
            FROM decisions AS d
            JOIN segments AS r ON r.segment_id = d.guard_refused_id
            LEFT JOIN segments AS own ON own.segment_id = d.segment_id
            WHERE d.guard_refused_id IS NOT NULL
            ORDER BY d.doc_id, d.segment_id
        """
        refused = """SELECT CASE WHEN count(*) = 0 THEN NULL ELSE
                            count(*) FILTER (WHERE guard_refused_id IS NOT NULL) END AS value
                     FROM decisions"""
    else:
        refusals = """SELECT NULL::VARCHAR AS doc_id, NULL::VARCHAR AS segment_type,
                      NULL::VARCHAR AS segment_id, NULL::VARCHAR AS segment_text,
                      NULL::VARCHAR AS representative_id, NULL::VARCHAR AS representative_text,
                      NULL::VARCHAR AS reason, NULL::VARCHAR AS detail, NULL::VARCHAR AS action,
                      NULL::VARCHAR AS merged_into WHERE false"""
        refused = "SELECT NULL::BIGINT AS value"
    return {"merges": merges, "guard_refusals": refusals, "guard_refused_merges": refused}


def merge_examples(store: str | Path | Store, *, doc_id: str | None = None,
                   refused: bool = False, limit: int | None = 20) -> pl.DataFrame:
    """Rows of the ``merges`` (or, with ``refused``, ``guard_refusals``) view, optionally of one
    document, in document order: what was merged (or kept apart) beside what stands for it."""
    con = connect(store)
    try:
        view = "guard_refusals" if refused else "merges"
        sql = f"SELECT * FROM {view}"
        params: list[object] = []
        if doc_id is not None:
            sql += " WHERE doc_id = ?"
            params.append(doc_id)
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return con.sql(sql, params=params).pl()
    finally:
        con.close()


def metric_views(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The metric views present on ``con`` (the corpus metrics and the group breakdowns)."""
    names = {row[0] for row in con.sql(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    wanted = (*CORPUS_METRICS, "dedup_by_doc_type", "dedup_by_language")
    return [n for n in wanted if n in names]


def corpus_metrics(con: duckdb.DuckDBPyConnection) -> dict[str, float | None]:
    """Each corpus-level metric's value (None when there is no data yet): a count stays an
    ``int`` (``guard_refused_merges`` prints as 638, not 638.0), a ratio is a ``float``."""
    out: dict[str, float | None] = {}
    for name in CORPUS_METRICS:
        rows = con.sql(f"SELECT value FROM {name}").fetchall()
        value = rows[0][0] if rows else None
        out[name] = None if value is None else value if isinstance(value, int) else float(value)
    return out
