"""The DuckDB view ``keys`` (``doc_id``, ``segment_id``, ``key``, ``value``): one row per
"column: value" key of a kept segment, so analysts can join across files::

    SELECT a.doc_id, b.doc_id FROM keys a JOIN keys b USING (key, value)
    WHERE a.doc_id <> b.doc_id

A key without ": " has a NULL ``key`` and the whole string as ``value``. A store without a
``keys`` column has an empty view with these columns.
"""

from __future__ import annotations

import duckdb

KEYS_SQL = """
    SELECT doc_id, segment_id,
           CASE WHEN strpos(k, ': ') > 0 THEN substr(k, 1, strpos(k, ': ') - 1) END AS key,
           CASE WHEN strpos(k, ': ') > 0 THEN substr(k, strpos(k, ': ') + 2) ELSE k END
               AS value
    FROM (SELECT CAST(doc_id AS VARCHAR) AS doc_id, CAST(segment_id AS VARCHAR) AS segment_id,
                 unnest(keys) AS k FROM segments)
    WHERE k IS NOT NULL
"""
EMPTY_SQL = ("SELECT CAST(NULL AS VARCHAR) AS doc_id, CAST(NULL AS VARCHAR) AS segment_id, "
             "CAST(NULL AS VARCHAR) AS key, CAST(NULL AS VARCHAR) AS value WHERE false")


def create_keys_view(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create ``keys`` over the ``segments`` view of ``con``."""
    columns = {row[0]: row[1] for row in con.sql("DESCRIBE segments").fetchall()}
    usable = columns.get("keys", "").endswith("[]")
    con.execute(f"CREATE OR REPLACE VIEW keys AS {KEYS_SQL if usable else EMPTY_SQL}")
