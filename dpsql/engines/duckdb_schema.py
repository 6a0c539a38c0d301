"""Check the policy against the real DuckDB schema and record each column's SQL type.

>>> import duckdb
>>> con = duckdb.connect(); _ = con.execute("CREATE TABLE t (x INTEGER)")
>>> from dpsql.policy import load_policy
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {"x": {"lower": 0, "upper": 9}}}}})
>>> bind_schema(p, con).tables["t"].columns["x"].sql_type
'INTEGER'
"""
from __future__ import annotations

import dataclasses

import duckdb

from dpsql.errors import PolicyError
from dpsql.policy import Policy, TablePolicy

NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                 "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL")
STRING_TYPES = ("VARCHAR",)
KEY_LITERALS_MAX = 256   # longer key sets live in TEMP tables (key_tables); measured crossover ~200-1000


def is_numeric(sql_type: str) -> bool:
    return sql_type.split("(")[0] in NUMERIC_TYPES


def is_string(sql_type: str) -> bool:
    return sql_type.split("(")[0] in STRING_TYPES


def _fail(message: str) -> PolicyError:
    return PolicyError("DP502", f"policy does not match the database: {message}")


def table_schema(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    """Column name (lower-cased) -> DuckDB type of a table in the main schema."""
    rows = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() "
        "WHERE schema_name = current_schema() AND database_name = current_database() AND lower(table_name) = ?",
        [table]).fetchall()
    return {name.lower(): dtype for name, dtype in rows}


def _bind_table(table: TablePolicy, con) -> TablePolicy:
    schema = table_schema(con, table.name)
    if not schema:
        raise _fail(f"table {table.name!r} (tables.{table.name}) does not exist")
    columns = {}
    for name, col in table.columns.items():
        path = f"tables.{table.name}.columns.{name}"
        if name not in schema:
            raise _fail(f"{path}: column {name!r} does not exist in table {table.name!r}")
        sql_type = schema[name]
        if col.bounded and not is_numeric(sql_type):
            raise _fail(f"{path}: bounds need a numeric column, but {name!r} is {sql_type}")
        keys = col.keys
        if keys is not None:
            try:
                keys = tuple(k for (k,) in con.execute(cast_keys(sql_type), [list(map(str, keys))]).fetchall())
            except duckdb.Error:
                raise _fail(f"{path}.keys: keys {list(col.keys)!r} do not all convert to {sql_type}") from None
            if len(set(keys)) != len(keys):
                raise _fail(f"{path}.keys: keys collide after conversion to {sql_type}")
        columns[name] = dataclasses.replace(col, sql_type=sql_type, keys=keys)
    if not table.row_level and table.privacy_unit not in schema:
        raise _fail(f"tables.{table.name}.privacy_unit: column {table.privacy_unit!r} does not exist")
    return dataclasses.replace(table, columns=columns)


def bind_schema(policy: Policy, con: duckdb.DuckDBPyConnection) -> Policy:
    """Return the policy with SQL types filled in and keys converted to the column types.

    Raises:
        PolicyError (DP502): a table or column is missing, bounds on a non-numeric column, bad keys.
    """
    tables = {name: _bind_table(t, con) for name, t in policy.tables.items()}
    return dataclasses.replace(policy, tables=tables)


def key_tables(policy: Policy, con: duckdb.DuckDBPyConnection, prefix: str) -> Policy:
    """Each key set longer than ``KEY_LITERALS_MAX`` copied into a TEMP table ``<prefix>_<n>(<same name>)``.

    A long IN list or array literal costs sqlglot and DuckDB's binder time on every query (100k keys:
    17 s a query); a join with a table of keys costs one hash join. Short sets stay literals, which
    DuckDB filters faster. The table and its one column share a random name no user column has.
    TEMP tables live in the connection, so a read-only database can have them.
    """
    tables = {}
    n = 0
    for tname, table in policy.tables.items():
        columns = {}
        for name, column in table.columns.items():
            if column.keys is not None and len(column.keys) > KEY_LITERALS_MAX:
                n += 1
                key_table = f"{prefix}_{n}"
                con.execute(f'CREATE TEMP TABLE "{key_table}" ("{key_table}" {column.sql_type})')
                con.execute(f'INSERT INTO "{key_table}" {cast_keys(column.sql_type)}', [[key_text(k) for k in column.keys]])
                column = dataclasses.replace(column, key_table=key_table)
            columns[name] = column
        tables[tname] = dataclasses.replace(table, columns=columns)
    return dataclasses.replace(policy, tables=tables)


def cast_keys(sql_type: str) -> str:
    """A query of the keys passed as one list of texts, each cast to the column's type."""
    return f"SELECT CAST(k AS {sql_type}) FROM (SELECT UNNEST(?) AS k)"


def key_text(value) -> str:
    """A key as SQL text that casts back to itself (booleans lower-case, dates in ISO form)."""
    if isinstance(value, bool):
        return str(value).lower()
    return value.isoformat() if hasattr(value, "isoformat") else str(value)
