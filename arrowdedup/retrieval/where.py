"""``search(where=...)``: a SQL filter over the store's segments, run sandboxed in DuckDB (one
expression, no files, no extensions, bounded memory and time), giving the allowed rows.
"""

from __future__ import annotations

import threading

import numpy as np

from ..config import RetrievalConfig, shown
from ..errors import InputError
from ..store import Store

# DuckDB memory a `where` predicate may use: a text pattern over a million segments needs far
# less than 256 MB (the segments are scanned from Arrow, not copied); a list of 150M integers
# built by a subquery took 2.5 GB in 7 s, inside the time limit.
WHERE_MEMORY_LIMIT_MB = 512


def filter_rows(store: Store, where: str, timeout_ms: int | None = None) -> np.ndarray:
    """Store rows (``Store.segments()`` order) whose segment satisfies the DuckDB SQL
    predicate ``where``; any column of the segments table can be named (embeddings aside).

    The predicate may come from a user further up (a web form), so it is sandboxed: it is one
    expression (never several statements, never text that closes the ``WHERE`` around it); its
    connection reaches the registered segments and nothing else (no file read or written, no
    COPY, INSTALL, LOAD or ATTACH); it is stopped after ``timeout_ms`` milliseconds
    (``Retrieval.WhereTimeoutMs``; None: its default) or past :data:`WHERE_MEMORY_LIMIT_MB`."""
    import duckdb

    if timeout_ms is None:
        timeout_ms = RetrievalConfig().where_timeout_ms

    frame = store.segments(with_embeddings=False).collect()
    table = frame.with_row_index("__row").to_arrow()
    cols = ", ".join(c for c in frame.columns)

    def refuse(why: str, err: BaseException | None = None) -> InputError:
        return InputError(
            f"--where {shown(where, 200)} is not a valid filter: {why}; write one DuckDB SQL "
            f"predicate over the segment columns ({cols}), e.g. \"doc_id LIKE 'docs/%'\"")

    # On a line of its own, so a `--` comment in the predicate cannot swallow the parenthesis.
    sql = f"SELECT __row FROM segments WHERE (\n{where}\n) ORDER BY __row"
    problem = _not_one_expression(where, sql)
    if problem is not None:
        raise refuse(problem)
    con = duckdb.connect(config={"enable_external_access": False})
    timer: threading.Timer | None = None
    try:
        # DuckDB draws a progress bar on stdout for a query past two seconds.
        con.execute("SET enable_progress_bar = false")
        con.execute(f"SET memory_limit = '{WHERE_MEMORY_LIMIT_MB}MB'")
        con.register("segments", table)
        # DuckDB has no per-query timeout: a timer interrupts the connection (a fresh one,
        # closed below, so a late interrupt cannot reach another query).
        timer = threading.Timer(timeout_ms / 1000.0, con.interrupt)
        timer.daemon = True
        timer.start()
        try:
            rel = con.sql(sql)
            rows = rel.fetchnumpy()["__row"] if rel is not None else np.empty(0)
            rows = np.asarray(rows, dtype=np.int64)
            if rows.size and (rows[0] < 0 or rows[-1] >= frame.height
                              or np.any(np.diff(rows) <= 0)):
                # Rows no segment has: the text was more than a predicate (`...) UNION ...`).
                raise duckdb.Error("it selects rows that are not segments of the store")
        except duckdb.InterruptException as err:
            raise InputError(
                f"--where {shown(where, 200)} ran longer than Retrieval.WhereTimeoutMs "
                f"({timeout_ms} ms) and was stopped; narrow the predicate, or raise "
                "Retrieval.WhereTimeoutMs in the config") from err
        except duckdb.OutOfMemoryException as err:
            raise InputError(
                f"--where {shown(where, 200)} needed more than {WHERE_MEMORY_LIMIT_MB} MB and "
                "was stopped; a filter is a condition on each segment: narrow the predicate"
            ) from err
        except duckdb.Error as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else \
                type(err).__name__
            raise refuse(first, err) from err
    finally:
        if timer is not None:
            timer.cancel()
        con.close()
    return rows


def _not_one_expression(where: str, sql: str) -> str | None:
    """Why ``where`` is not one SQL expression inside ``sql`` (None: it is). Judged on
    DuckDB's own tokens and statements, so a ``;`` or ``)`` inside a string literal, a quoted
    name or a comment counts for nothing."""
    import duckdb

    try:
        tokens = duckdb.tokenize(where)
    except duckdb.Error as err:
        return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    depth = 0
    starts = [start for start, _ in tokens] + [len(where)]
    for (start, kind), end in zip(tokens, starts[1:], strict=True):
        if kind != duckdb.token_type.operator:
            continue
        for ch in where[start:end]:
            if ch == ";":
                return "it holds several statements (a ';'), and a filter is one expression"
            depth += ch == "("
            depth -= ch == ")"
            if depth < 0:
                return ("a ')' closes more than it opened, so the text is more than one "
                        "expression")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as err:
        return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if len(statements) != 1:
        return "it holds several statements, and a filter is one expression"
    return None
