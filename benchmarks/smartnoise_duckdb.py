"""SmartNoise SQL (``smartnoise-sql``, OpenDP) over a DuckDB connection, for the comparison runs.

SmartNoise has no DuckDB reader. Its PostgreSQL reader emits SQL that DuckDB runs as written with
one exception: user-level reservoir sampling orders a window by ``RANDOM()``, and DuckDB 2.0 refuses
a volatile window ORDER BY. ``DuckDBReader`` moves that random draw into a column of the window's
input (the same draw, made once per row, as dpsql does it), so SmartNoise's exact aggregates run
inside DuckDB on the same data as dpsql; its noise is then added in Python by OpenDP.

Needs the optional ``bench`` extra: ``pip install '.[bench]'``.
"""
from __future__ import annotations

import sqlglot
from sqlglot import exp

RANDOM_KEY = "__sn_random"


def available() -> str | None:
    """None when SmartNoise SQL imports, else why not."""
    try:
        import snsql  # noqa: F401
    except Exception as error:   # a missing or broken optional dependency
        return f"smartnoise-sql not importable ({type(error).__name__}: {error}); pip install '.[bench]'"
    return None


def materialise_random_order(sql: str) -> str:
    """``ROW_NUMBER() OVER (... ORDER BY RANDOM())`` -> the same window ordered by a random column.

    >>> print(materialise_random_order("SELECT *, ROW_NUMBER() OVER (PARTITION BY u ORDER BY RANDOM()) AS rn FROM (SELECT u FROM t) AS c"))
    SELECT * EXCLUDE (__sn_random), ROW_NUMBER() OVER (PARTITION BY u ORDER BY __sn_random) AS rn FROM (SELECT *, RANDOM() AS __sn_random FROM (SELECT u FROM t) AS c) AS c
    """
    tree = sqlglot.parse_one(sql, read="postgres")
    windows = [w for w in tree.find_all(exp.Window) if any(isinstance(o.this, exp.Rand) for o in
                                                             (w.args.get("order") or exp.Order()).expressions)]
    for window in windows:
        select = window.parent_select
        source = select.args["from_"].this
        alias = source.alias_or_name
        for ordered in window.args["order"].expressions:
            if isinstance(ordered.this, exp.Rand):
                ordered.set("this", exp.column(RANDOM_KEY))
        inner = exp.select("*", exp.alias_(exp.Rand(), RANDOM_KEY)).from_(source.copy())
        source.replace(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias))))
        star = next((p for p in select.expressions if isinstance(p, exp.Star)), None)
        if star is not None:
            star.set("except_", [exp.column(RANDOM_KEY)])
    return tree.sql(dialect="duckdb")


def reader(con, metadata: dict, epsilon: float, delta: float):
    """A SmartNoise PrivateReader whose exact aggregates run on ``con`` (a DuckDB connection)."""
    from snsql import Privacy
    from snsql.sql.private_reader import PrivateReader
    from snsql.sql.reader.postgres import PostgresReader

    class DuckDBReader(PostgresReader):
        def execute(self, query, *ignore, accuracy: bool = False):
            cursor = self.conn.execute(materialise_random_order(str(query)))
            if cursor.description is None:
                return []
            return [tuple(d[0] for d in cursor.description)] + cursor.fetchall()

    return PrivateReader(DuckDBReader(conn=con), metadata, privacy=Privacy(epsilon=epsilon, delta=delta))


def pandas_reader(df, metadata: dict, epsilon: float, delta: float):
    """SmartNoise's own local path: its pandas reader, which loads the frame into in-memory SQLite."""
    from snsql import Privacy
    from snsql.sql.private_reader import PrivateReader
    return PrivateReader.from_connection(df, privacy=Privacy(epsilon=epsilon, delta=delta), metadata=metadata)


def metadata(table: str, columns: dict, *, unit: str | None, max_ids: int, censor_dims: bool) -> dict:
    """SmartNoise metadata for one table in DuckDB's ``main`` schema.

    ``columns`` maps a name to ("int" | "float", lower, upper), bounds None for keys.
    ``unit`` None is row privacy; else the private-id column, with at most ``max_ids`` rows per unit.
    """
    spec: dict = {"row_privacy": unit is None, "censor_dims": censor_dims, "max_ids": max_ids}
    for name, (kind, lower, upper) in columns.items():
        spec[name] = {"type": kind}
        if lower is not None:
            spec[name].update(lower=lower, upper=upper)
    if unit is not None:
        spec[unit] = {"type": "int", "private_id": True}
    return {"": {"main": {table: spec}}}
