"""How much work a query asks for, checked before any planning (dpsql/limits.py): the SQL text, the
outputs and the table references (DP314), and the groups of a DP query (DP315). They depend on the
SQL, the policy and the limits only, never on the data, so these refusals are free and tell nothing.

Planning is linear in the size of the query, so bounding the text, the outputs and the tables bounds
planning's time: benchmarks/planning.py measures it.

>>> from dpsql.frontend.parse import parse
>>> from dpsql.limits import WorkLimits
>>> sql = "SELECT a, COUNT(*) FROM t GROUP BY a ORDER BY 2"
>>> len(outputs(parse(sql)))
4
>>> check_shape(parse(sql), sql, WorkLimits(max_outputs=3))
Traceback (most recent call last):
...
dpsql.errors.UnsupportedConstruct: error[DP314]: the query has more than 3 outputs (SELECT items, GROUP BY items, ORDER BY terms and HAVING aggregates)...
"""
from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedConstruct
from dpsql.sql.positions import span
from dpsql.frontend.scope import AGGREGATES
from dpsql.limits import WorkLimits

RULE = "bounded_work"


def _refuse(code: str, message: str, hint: str, sql: str, node: exp.Expression | None = None) -> UnsupportedConstruct:
    start, end = span(node, sql) if node is not None else (None, None)
    return UnsupportedConstruct(code, message, hint=hint, sql=sql if node is not None else None, start=start, end=end,
                                rule=RULE)


def check_text(sql: str, limits: WorkLimits) -> None:
    """DP314: the SQL text is longer than ``limits.max_sql`` characters (before it is parsed)."""
    if isinstance(sql, str) and len(sql) > limits.max_sql:
        raise _refuse("DP314", f"the query is {len(sql)} characters long, more than the limit of {limits.max_sql}",
                      "shorten it: a long IN list or CASE can often be a public table, or several queries", sql)


def outputs(statement: exp.Expression) -> list[exp.Expression]:
    """Every item the query would plan an output for, at every level: SELECT items, GROUP BY items,
    ORDER BY terms and the aggregates of HAVING."""
    found: list[exp.Expression] = []
    for select in statement.find_all(exp.Select):
        found += select.expressions
        for clause in ("group", "order"):
            node = select.args.get(clause)
            found += node.expressions if node is not None else []
        having = select.args.get("having")
        found += list(having.find_all(AGGREGATES)) if having is not None else []
    return found


def _first_past(nodes: list[exp.Expression], limit: int) -> exp.Expression:
    """The node after the first ``limit`` in the order they are written (for the caret)."""
    return sorted(nodes, key=lambda n: span(n)[0] or 0)[limit]


def check_shape(statement: exp.Expression, sql: str, limits: WorkLimits) -> None:
    """DP314: more outputs or table references than the limits allow; the caret on the first past them."""
    found = outputs(statement)
    if len(found) > limits.max_outputs:
        raise _refuse("DP314", f"the query has more than {limits.max_outputs} outputs (SELECT items, GROUP BY items, "
                      "ORDER BY terms and HAVING aggregates)", "split it into several queries", sql,
                      _first_past(found, limits.max_outputs))
    tables = list(statement.find_all(exp.Table))
    if len(tables) > limits.max_tables:
        raise _refuse("DP314", f"the query reads more than {limits.max_tables} tables (each reference to a table, "
                      "a subquery's or a CTE's, counts)", "join fewer tables, or split it into several queries",
                      sql, _first_past(tables, limits.max_tables))


def check_groups(partitions: int | None, statement: exp.Expression, sql: str, limits: WorkLimits) -> None:
    """DP315: a DP query over public keys whose groups (every combination of its keys, all released)
    are more than ``limits.max_rows``; known from the policy and the query alone. (Groups chosen by
    partition selection are not known in advance: they are at most one per row.)"""
    if partitions is not None and partitions > limits.max_rows:
        group = statement.args.get("group")
        raise _refuse("DP315", f"the query releases {partitions} groups (every combination of its keys), more than "
                      f"the limit of {limits.max_rows} rows", "group by fewer columns, or by coarser keys "
                      "(date_trunc, wider bins)", sql, group)
