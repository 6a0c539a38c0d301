"""Check the policy against the real DuckDB schema and record each column's SQL type; check that every
key a link references is unique in the data (once per data version).

>>> import duckdb
>>> con = duckdb.connect(); _ = con.execute("CREATE TABLE t (x INTEGER)")
>>> from dpsql.policy import load_policy
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row", "columns": {"x": {"lower": 0, "upper": 9}}}}})
>>> bind_schema(p, con).tables["t"].columns["x"].sql_type
'INTEGER'
"""
from __future__ import annotations

import dataclasses
import datetime
import threading

import duckdb
from sqlglot import exp

from dpsql.errors import PolicyError
from dpsql.sql.compare import BARE, Form, key_form, pairing
from dpsql.sql.literals import key_text
from dpsql.sql.types import is_numeric, temporal_type
from dpsql.policy.model import ColumnPolicy, Link, Policy, TablePolicy

KEY_LITERALS_MAX = 256   # longer key sets live in TEMP tables (key_tables); measured crossover ~200-1000


def _fail(message: str) -> PolicyError:
    return PolicyError("DP502", f"policy does not match the database: {message}")


# Where an unqualified name resolves: the connection's TEMP catalog first (TEMP tables, registered
# DataFrames, dpsql's copies of sources), then the database's current schema.
_CATALOGS = ("((database_name = 'temp' AND schema_name = 'main') OR "
             "(database_name = current_database() AND schema_name = current_schema()))")


def table_schema(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    """Column name (lower-cased) -> DuckDB type of a table or view, as an unqualified name finds it."""
    rows = con.execute(
        f"SELECT database_name = 'temp', column_name, data_type FROM duckdb_columns() WHERE {_CATALOGS} "
        "AND lower(table_name) = ? ORDER BY 1 DESC, column_index", [table]).fetchall()
    first = rows[0][0] if rows else None
    return {name.lower(): dtype for temp, name, dtype in rows if temp == first}


def _bind_table(table: TablePolicy, schema: dict[str, str], con, origin: str = "") -> TablePolicy:
    columns = {}
    for name, col in table.columns.items():
        path = f"tables.{table.name}.columns.{name}"
        if name not in schema:
            raise _fail(f"{path}: column {name!r} does not exist in table {table.name!r}{origin} "
                        f"(its columns: {', '.join(schema)})")
        sql_type = schema[name]
        if col.bounded and not is_numeric(sql_type):
            dated = " (a DATE or TIMESTAMP column takes dates: lower: 1992-01-01)" if temporal_type(sql_type) else ""
            raise _fail(f"{path}: number bounds need a numeric column, but {name!r} is {sql_type}{origin}{dated}")
        _check_date_bounds(col, sql_type, path)
        keys = col.keys
        if keys is not None:
            try:
                keys = tuple(k for (k,) in con.execute(cast_keys(sql_type), [list(map(str, keys))]).fetchall())
            except duckdb.Error:
                raise _fail(f"{path}.keys: keys {list(col.keys)!r} do not all convert to {sql_type}{origin}") from None
            if len(set(keys)) != len(keys) or _collide(con, table.name, name, sql_type, col.keys):
                raise _fail(f"{path}.keys: keys collide after conversion to {sql_type} (as the column compares "
                            "them: its collation too, e.g. 'a' and 'A' for a NOCASE column)")
        columns[name] = dataclasses.replace(col, sql_type=sql_type, keys=keys)
    if not table.row_level and table.privacy_unit not in schema:
        raise _fail(f"tables.{table.name}.privacy_unit: column {table.privacy_unit!r} does not exist{origin}")
    if table.public:
        # Every column of a public table is readable: the undeclared ones too, with their types.
        for name, sql_type in schema.items():
            columns.setdefault(name, ColumnPolicy(name=name, sql_type=sql_type))
    return dataclasses.replace(table, columns=columns)


def _collide(con: duckdb.DuckDBPyConnection, table: str, column: str, sql_type: str, keys) -> bool:
    """Are two keys one value as the column compares them, with its collation (not in its type's
    name)? A row would then meet both: joined with a long key set, counted twice. No row is read."""
    distinct = con.execute(f"SELECT COUNT(DISTINCT v) FROM (SELECT {_quoted(column)} AS v FROM {_quoted(table)} "
                           f"WHERE false UNION ALL {cast_keys(sql_type)})", [list(map(str, keys))]).fetchall()[0][0]
    return distinct != len(keys)


def _check_date_bounds(col: ColumnPolicy, sql_type: str, path: str) -> None:
    """Date bounds belong to a DATE column (days) or a TIMESTAMP column (days or instants)."""
    if col.dates is None:
        return
    kind = temporal_type(sql_type)
    if kind is None:
        raise _fail(f"{path}: date bounds need a DATE or TIMESTAMP column, but {col.name!r} is {sql_type}")
    if kind == "DATE" and any(isinstance(d, datetime.datetime) for d in col.dates):
        raise _fail(f"{path}: {col.name!r} is a DATE: its bounds are days (1992-01-01), not instants")


def _bind_link(link: Link, schemas: dict[str, dict[str, str]]) -> None:
    """Both ends of a link exist and the comparison builder can compare them on every row
    (sql/compare.py: the form the link is joined in, and its key checked unique in)."""
    path = f"tables.{link.table}.privacy_unit"
    via = schemas[link.table].get(link.column)
    if via is None:
        raise _fail(f"{path}.via: column {link.column!r} does not exist in table {link.table!r}")
    key = schemas[link.references_table].get(link.references_column)
    if key is None:
        raise _fail(f"{path}.references: column {link.references_column!r} does not exist in table "
                    f"{link.references_table!r}")
    if pairing(via, key) is None:
        raise _fail(f"{path}: {link} compares {via} with {key}; a link needs columns of one kind "
                    "(numbers, text, dates and timestamps; a TIMESTAMP WITH TIME ZONE only with its own type)")


def bind_schema(policy: Policy, con: duckdb.DuckDBPyConnection, origins: dict[str, str] | None = None) -> Policy:
    """Return the policy with SQL types filled in and keys converted to the column types (``origins``:
    where a table's rows were read from, named in the errors).

    Raises:
        PolicyError (DP502): a table or column is missing, bounds on a non-numeric column, bad keys,
        a link between columns of different kinds.
    """
    schemas = {}
    for name in policy.tables:
        schemas[name] = table_schema(con, name)
        if not schemas[name]:
            raise _fail(f"table {name!r} (tables.{name}) does not exist")
    for link in policy.links:
        _bind_link(link, schemas)
    origins = {name: f" (read from {origin})" for name, origin in (origins or {}).items()}
    tables = {name: _bind_table(t, schemas[name], con, origins.get(name, "")) for name, t in policy.tables.items()}
    return dataclasses.replace(policy, tables=tables)


# (data version, table, the key as compared) -> whether it held a repeated value: the data of one version
# does not change, so each referenced key is checked once per version, not per connection or query.
_UNIQUE_CHECKED: dict[tuple[str, str, str], bool] = {}
_UNIQUE_LOCK = threading.Lock()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def declared_unique(con: duckdb.DuckDBPyConnection, table: str, *columns: str) -> bool:
    """Does DuckDB itself enforce ``columns`` unique together (a PRIMARY KEY or UNIQUE constraint on
    some of them)? Read from the table the name resolves to (a TEMP table shadows the database's)."""
    rows = con.execute(
        f"SELECT database_name = 'temp', constraint_column_names FROM duckdb_constraints() WHERE {_CATALOGS} "
        "AND lower(table_name) = ? AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')", [table]).fetchall()
    temp = bool(con.execute("SELECT 1 FROM duckdb_columns() WHERE database_name = 'temp' AND schema_name = 'main' "
                            "AND lower(table_name) = ? LIMIT 1", [table]).fetchall())
    wanted = {c.lower() for c in columns}
    return any(in_temp == temp and {n.lower() for n in names} <= wanted for in_temp, names in rows)


def repeats(con: duckdb.DuckDBPyConnection, table: str, keys: list[str]) -> bool:
    """Does one tuple of ``keys`` (SQL over ``table``'s columns, as a comparison writes them; none
    NULL: NULL matches no row) occur twice? One hash aggregation (about 0.6 s per million rows on two cores)."""
    sql = (f"SELECT 1 FROM {_quoted(table)} WHERE {' AND '.join(f'({k}) IS NOT NULL' for k in keys)} "
           f"GROUP BY {', '.join(keys)} HAVING COUNT(*) > 1 LIMIT 1")
    return bool(con.execute(sql).fetchall())


def repeats_a_value(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    """Does a non-NULL value occur twice in ``table.column``? A key DuckDB enforces unique is not read."""
    return not declared_unique(con, table, column) and repeats(con, table, [_quoted(column)])


def compared(form: Form, column: str) -> str:
    """``column`` as a comparison in ``form`` writes it (sql/compare.py), as SQL."""
    return form.apply(exp.column(column, quoted=True)).sql(dialect="duckdb")


def repeats_as_compared(con: duckdb.DuckDBPyConnection, table: str, columns: list[tuple[str, Form]]) -> bool:
    """Does one tuple of ``columns``, each in the form a comparison writes it, occur twice? Read as they
    are when every form is bare; a constraint DuckDB enforces answers when every form is exact."""
    if all(f == BARE for _, f in columns) and len(columns) == 1:
        return repeats_a_value(con, table, columns[0][0])
    if all(f.exact for _, f in columns) and declared_unique(con, table, *(c for c, _ in columns)):
        return False
    return repeats(con, table, [compared(f, c) for c, f in columns])


def check_referenced_keys(policy: Policy, con: duckdb.DuckDBPyConnection, data_version: str | None) -> None:
    """Every key a link references is unique in its table as the link compares it (in the form the
    comparison builder writes: a BIGINT key against a DOUBLE ``via`` as DOUBLE, where 2**60 and
    2**60 + 1 are one value), so each row reaches one row, hence one person.

    Run on the trusted connection when the policy is bound; the outcome is kept per ``data_version``
    (None: not kept). The error is for the data owner setting up: it names the table and column, never
    a value or a count.

    Raises:
        PolicyError (DP504): a referenced key holds a repeated value.
    """
    checked: dict[tuple[str, str], bool] = {}
    for link in policy.links:
        via = policy.tables[link.table].columns[link.column].sql_type
        form = key_form(policy.tables[link.references_table].columns[link.references_column].sql_type, via)
        assert form is not None   # _bind_link refused the link otherwise
        target = (link.references_table, compared(form, link.references_column))
        key = (data_version, *target) if data_version is not None else None
        with _UNIQUE_LOCK:
            repeated = checked.get(target, _UNIQUE_CHECKED.get(key) if key is not None else None)
        if repeated is None:
            repeated = repeats_as_compared(con, link.references_table, [(link.references_column, form)])
            if key is not None:
                with _UNIQUE_LOCK:
                    _UNIQUE_CHECKED[key] = repeated
        checked[target] = repeated
        if repeated:
            raise _not_unique(link, form, via)


def _not_unique(link: Link, form: Form, via: str) -> PolicyError:
    compared_as = "" if form == BARE else f" as {link.table}.{link.column} ({via}) compares it: " \
        f"{compared(form, link.references_column)}"
    return PolicyError(
        "DP504", f"the policy does not hold for this database: {link.references_table}.{link.references_column} is "
                 f"not unique in table {link.references_table!r}{compared_as}, but tables.{link.table}.privacy_unit "
                 f"references it ({link})",
        hint="a link must reference a unique key (each row must reach exactly one row, hence one person); "
             "reference another column, make the key unique in the data, or declare the link between columns "
             "of one type (keys that differ can be equal in a common type: 2**60 and 2**60 + 1 as DOUBLE)")


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
