"""The names plain DuckDB gives a query's outputs, read from the query as the analyst wrote it, before
the flattening and join passes rename its columns (issue 25, item 1).

DuckDB names an output by its alias; an unaliased column by the column it binds to (through a
FROM-subquery or a CTE: the name that subquery gives it; a table's column: its name in the table); and
any other expression by its own printed text (``sum((age + 1))``). The first two are read here; the
third needs DuckDB's printer, so it is left as None for the caller (engines/duckdb_names.py). Names are
a function of the SQL text and the policy alone: they reveal nothing about the data.

>>> from dpsql.frontend.parse import parse
>>> output_names(parse("WITH t AS (SELECT sex AS g FROM people) SELECT t.g, COUNT(*) AS n, SUM(x) FROM t"), {})
['g', 'n', None]
"""
from __future__ import annotations

from typing import Mapping

from sqlglot import exp

MAX_DEPTH = 32   # CTEs and subqueries nested deeper are named by the column as written


def output_names(select: exp.Expression, tables: Mapping) -> list[str | None]:
    """Each SELECT item's output name as DuckDB gives it, or None for an unaliased expression other than
    a column (DuckDB prints it). ``tables``: the policy's tables, by lower-case name."""
    if not isinstance(select, exp.Select):
        return []
    names: list[str | None] = []
    for item in select.expressions:
        if isinstance(item, exp.Alias):
            names.append(item.alias)
        elif isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
            names.append(_column_name(item.name, item.table, select, _ctes(select, {}), tables, 0))
        else:
            names.append(None)
    return names


def _ctes(select: exp.Select, outer: Mapping[str, exp.Expression]) -> dict[str, exp.Expression]:
    """The CTEs ``select`` sees by lower-case name (its own shadow the outer ones)."""
    ctes = dict(outer)
    with_ = select.args.get("with_")
    for cte in (with_.expressions if with_ is not None else []):
        ctes[cte.alias.lower()] = cte
    return ctes


def _sources(select: exp.Select) -> list[exp.Expression]:
    """The FROM item and the joined ones, in order."""
    source = select.args.get("from_")
    items = [source.this] if source is not None else []
    return items + [j.this for j in select.args.get("joins") or []]


def _column_name(name: str, qualifier: str, select: exp.Select, ctes: Mapping[str, exp.Expression],
                 tables: Mapping, depth: int) -> str:
    """The name DuckDB binds ``qualifier.name`` to in ``select``: an alias of the subquery or CTE it
    comes from, or the table's own column name; as written when it cannot tell."""
    if depth > MAX_DEPTH:
        return name
    for source in _sources(select):
        alias = source.alias_or_name
        if qualifier and alias.lower() != qualifier.lower():
            continue
        found = _from_source(name, source, ctes, tables, depth)
        if found is not None or qualifier:
            return found or name
    return name


def _from_source(name: str, source: exp.Expression, ctes: Mapping[str, exp.Expression], tables: Mapping,
                 depth: int) -> str | None:
    """The name ``name`` has in one FROM source, or None when the source has no such column."""
    body = None
    if isinstance(source, exp.Subquery):
        body = source.this
    elif isinstance(source, exp.Table) and not source.args.get("db") and source.name.lower() in ctes:
        body = ctes[source.name.lower()].this
    elif isinstance(source, exp.Table):
        table = tables.get(source.name.lower())
        known = getattr(table, "columns", None) or {}
        return name.lower() if name.lower() in known else None
    if not isinstance(body, exp.Select):
        return None
    for item in body.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            return _column_name(name, item.table if isinstance(item, exp.Column) else "", body,
                                _ctes(body, ctes), tables, depth + 1)
        if item.alias_or_name.lower() == name.lower():
            if isinstance(item, exp.Column):
                return _column_name(item.name, item.table, body, _ctes(body, ctes), tables, depth + 1)
            return item.alias_or_name
    return None
