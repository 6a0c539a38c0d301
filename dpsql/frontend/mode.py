"""MODE(x), the most frequent value, as the top-1 group of x by count (issue 23, plan/top_k.py):

    SELECT MODE(x) [AS a] FROM t [WHERE ...]
    SELECT x AS a FROM t [WHERE ...] GROUP BY x ORDER BY COUNT(*) DESC LIMIT 1    (what is planned)

The output is named ``mode(x)`` without an alias, as DuckDB names it. Its candidates are x's groups:
its public keys (every one, empty ones included: a key no row holds may be chosen, where DuckDB's MODE
would not see it), or with delta > 0 those partition selection releases (none may pass: no row). The
one group is chosen by the exponential mechanism at the whole epsilon (half beside partition
selection's count), and its count is not released. MODE beside anything else, nested, or in a query
that groups, orders or limits is refused (DP303): the rewrite would change what those mean.

>>> import sqlglot
>>> from dpsql.frontend.dialect import Dpsql
>>> mode_as_top_one(sqlglot.parse_one("SELECT MODE(zip) FROM t WHERE age > 3", read=Dpsql), "").sql()
'SELECT zip AS "mode(zip)" FROM t WHERE age > 3 GROUP BY zip ORDER BY COUNT(*) DESC LIMIT 1'
"""
from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedConstruct
from dpsql.sql.positions import span

CLAUSES = ("group", "having", "order", "limit", "offset", "distinct", "qualify")


def mode_as_top_one(statement: exp.Expression, sql: str) -> exp.Expression:
    """The statement with its MODE(x) written as the top-1 group of x (module docstring); unchanged
    without MODE."""
    modes = list(statement.find_all(exp.Mode))
    if not modes:
        return statement
    items = statement.expressions if isinstance(statement, exp.Select) else []
    node = items[0].unalias() if len(items) == 1 else None
    alone = isinstance(node, exp.Mode) and len(modes) == 1 and not any(statement.args.get(c) for c in CLAUSES)
    argument = node.this if isinstance(node, exp.Mode) else None
    if not alone or argument is None or isinstance(argument, (exp.Star, exp.Distinct)) or \
            any(isinstance(v, exp.Expression) for k, v in node.args.items() if k != "this"):
        start, end = span(modes[0], sql)
        err = UnsupportedConstruct("DP303", "MODE(x) is answered alone: one MODE of one column or expression, the "
                                   "query's only output, without GROUP BY, HAVING, ORDER BY or LIMIT",
                                   hint="write SELECT MODE(x) FROM t [WHERE ...]; for the most frequent values "
                                        "per group or several of them: SELECT x, COUNT(*) AS n FROM t GROUP BY x "
                                        "ORDER BY n DESC LIMIT k", sql=sql, start=start, end=end)
        err.rule = "mode_alone"
        raise err
    name = items[0].alias if isinstance(items[0], exp.Alias) else f"mode({argument.sql(dialect='duckdb')})"
    out = statement.copy()
    out.set("expressions", [exp.alias_(argument.copy(), name, quoted=True)])
    out.set("group", exp.Group(expressions=[argument.copy()]))
    out.set("order", exp.Order(expressions=[exp.Ordered(this=exp.Count(this=exp.Star()), desc=True)]))
    out.set("limit", exp.Limit(expression=exp.Literal.number(1)))
    return out
