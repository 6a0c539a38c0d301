"""DuckDB's own catalogs and schemas, which a query may not name (DP201), and the fix said when it does.

A table qualified by one of them (``main.people``, ``temp.people``, ``system.main.x``) says where
DuckDB should look, and so could name another relation than the one the policy describes and dpsql
checked: dpsql reads sources and DataFrames into TEMP tables, and a TEMP table comes before ``main``'s
of the same name; ``information_schema`` and ``pg_catalog`` describe the database itself. So such
a name is refused, not read as the bare name; any other qualifier (SmartNoise's ``PUMS.PUMS``) is
not a place in DuckDB and is dropped by the parser (frontend/parse.py).

>>> import sqlglot
>>> qualified_table_hint(sqlglot.parse_one("SELECT 1 FROM system.main.people AS p").find(exp.Table))[:44]
'write FROM people (without its system.main.)'
"""
from __future__ import annotations

from sqlglot import exp

ENGINE_SCHEMAS = frozenset({"main", "temp", "system", "memory", "information_schema", "pg_catalog"})


def qualified_table_hint(table: exp.Table) -> str:
    """The hint of a refused qualified table name: write it bare, and why the qualifier is not accepted."""
    qualifier = "".join(f"{table.args[k].name}." for k in ("catalog", "db") if table.args.get(k) is not None)
    return (f"write FROM {table.name} (without its {qualifier}): the policy's tables are named "
            "unqualified; a schema of DuckDB's own (main, temp, system, ...) could name another relation "
            "than the one the policy describes, so it is refused rather than dropped")
