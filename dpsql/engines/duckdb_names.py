"""DuckDB's own name for an unaliased output expression: the text its parser prints it back as
(``SUM(age+1)`` is ``sum((age + 1))``, ``COUNT(*)`` is ``count_star()``, ``EXTRACT(YEAR FROM d)`` is
``date_part('YEAR', d)``), so a result's columns are named exactly as plain DuckDB names them (issue 25,
item 1; frontend/names.py names the aliases and columns).

The expression is only parsed (``json_serialize_sql``) and printed (``json_deserialize_sql``), by a
connection of its own that holds no data and is locked down: nothing is bound or run, and the name is a
function of the SQL text alone.

>>> expression_name("SUM(age + 1)")
'sum((age + 1))'
"""
from __future__ import annotations

import functools
import json
import threading

import duckdb

_PREFIX = "SELECT "
_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _printer() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.execute("SELECT json_deserialize_sql(json_serialize_sql('SELECT 1'))")   # json loaded before the lock
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


@functools.lru_cache(maxsize=4096)
def expression_name(text: str) -> str | None:
    """DuckDB's output name of the expression ``text`` (in DuckDB's dialect), or None when its parser
    cannot read it alone (the caller keeps its own name)."""
    try:
        with _lock:
            tree = _printer().execute("SELECT json_serialize_sql(?)", [_PREFIX + text]).fetchone()[0]
            if not _one_expression(json.loads(tree)):
                return None
            value = _printer().execute("SELECT json_deserialize_sql(?::JSON)", [tree]).fetchone()[0]
    except (duckdb.Error, ValueError, TypeError):
        return None
    if not isinstance(value, str) or not value.startswith(_PREFIX):
        return None
    return value[len(_PREFIX):]


def _one_expression(tree: dict) -> bool:
    """Whether the parsed text is one SELECT of one expression and nothing else (no FROM, no clause)."""
    statements = tree.get("statements") if not tree.get("error") else None
    if not isinstance(statements, list) or len(statements) != 1:
        return False
    node = statements[0].get("node", {})
    return (node.get("type") == "SELECT_NODE" and len(node.get("select_list", [])) == 1
            and node.get("from_table", {}).get("type") == "EMPTY" and not node.get("where_clause")
            and not node.get("modifiers") and not node.get("group_expressions") and not node.get("having"))
