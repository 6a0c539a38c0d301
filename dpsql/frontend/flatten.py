"""Flatten CTEs and FROM-subqueries that only filter and project rows of a private table.

``SELECT COUNT(*) FROM (SELECT age AS a FROM people WHERE sex = 'F') s WHERE s.a > 30`` becomes
``SELECT COUNT(*) FROM people WHERE (sex = 'F') AND (age > 30)``: every outer column is replaced by
the expression it names, so the validator sees the real columns (an identifier behind an alias is
still an identifier) and the error positions point into the inner query.

>>> from dpsql.frontend.parse import parse
>>> flatten(parse("WITH t AS (SELECT age AS a FROM people WHERE age > 1) SELECT COUNT(a) FROM t"), "").sql()
'SELECT COUNT(age) FROM people WHERE (age > 1)'
"""
from __future__ import annotations

from sqlglot import exp

from dpsql.errors import UnsupportedConstruct
from dpsql.sql.positions import span
from dpsql.frontend.suggest import did_you_mean

MAX_DEPTH = 16


def _refuse(code: str, message: str, node, sql: str, hint: str = "") -> UnsupportedConstruct:
    start, end = span(node, sql)
    err = UnsupportedConstruct(code, message, hint=hint, sql=sql, start=start, end=end)
    err.rule = "flatten_subqueries"
    return err


def inline_ctes(select: exp.Select, sql: str) -> None:
    """Replace references to CTEs in FROM by the CTE's query, as a subquery."""
    with_ = select.args.get("with_")
    if with_ is None:
        return
    if with_.args.get("recursive"):
        raise _refuse("DP102", "recursive CTEs are not supported", with_, sql)
    ctes: dict[str, exp.Expression] = {}
    for cte in with_.expressions:
        body = cte.this
        if isinstance(body, exp.Select):
            inline_ctes(body, sql)
            _replace_cte_tables(body, ctes)
        ctes[cte.alias.lower()] = body
    select.set("with_", None)
    _replace_cte_tables(select, ctes)


def _replace_cte_tables(select: exp.Select, ctes: dict[str, exp.Expression]) -> None:
    source = select.args.get("from_")
    table = source.this if source is not None else None
    if isinstance(table, exp.Table) and not table.args.get("db") and table.name.lower() in ctes:
        alias = table.alias or table.name
        sub = exp.Subquery(this=ctes[table.name.lower()].copy(), alias=exp.TableAlias(this=exp.to_identifier(alias)))
        source.set("this", sub)


def _check_row_wise(inner: exp.Expression, sql: str) -> exp.Select:
    if not isinstance(inner, exp.Select):
        raise _refuse("DP102", "a subquery in FROM must be a plain SELECT", inner, sql)
    if inner.args.get("from_") is None:
        raise _refuse("DP201", "a subquery or CTE must read a table of the policy: FROM is missing", inner, sql)
    if inner.meta.get("dp") is not None:
        raise _refuse("DP308", "WITH DIFFERENTIAL_PRIVACY belongs on the outermost SELECT", inner, sql)
    for key, what in (("group", "GROUP BY"), ("having", "HAVING"), ("limit", "LIMIT"), ("offset", "OFFSET"),
                      ("distinct", "DISTINCT"), ("qualify", "QUALIFY")):
        if inner.args.get(key):
            hint = "LIMIT in a subquery would pick rows by storage order" if key in ("limit", "offset") else ""
            raise _refuse("DP102", f"a subquery in FROM may only filter and project rows, not use {what}",
                          inner.args[key] if not isinstance(inner.args[key], list) else inner.args[key][0],
                          sql, hint)
    if any(isinstance(n, (exp.AggFunc, exp.Window)) for n in inner.walk()):
        raise _refuse("DP102", "a subquery in FROM may only filter and project rows, not aggregate",
                      next(n for n in inner.walk() if isinstance(n, (exp.AggFunc, exp.Window))), sql)
    return inner


def _projections(inner: exp.Select, sql: str) -> tuple[dict[str, exp.Expression], bool]:
    """Output name -> expression of a row-wise subquery, and whether it passes every column (*)."""
    names, star = {}, False
    for item in inner.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            star = True
            continue
        name = item.alias_or_name.lower()
        if not name:
            raise _refuse("DP102", "name this subquery column with AS", item, sql)
        names[name] = item.unalias()
    return names, star


def _merge(outer: exp.Select, sql: str) -> bool:
    """Merge the FROM-subquery of ``outer`` into it; False when FROM is not a subquery."""
    source = outer.args.get("from_")
    sub = source.this if source is not None else None
    if not isinstance(sub, exp.Subquery):
        return False
    inner = _check_row_wise(sub.this, sql)
    if inner.args.get("joins") and outer.args.get("joins"):
        raise _refuse("DP102", "a joined subquery may not itself be joined: join the tables in one FROM",
                      inner.args["joins"][0], sql)
    names, star = _projections(inner, sql)
    alias = sub.alias.lower() if sub.alias else None

    def substitute(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            return node
        if node.table and node.table.lower() != alias:
            raise _refuse("DP202", f"unknown table or alias {node.table!r} in {node.sql()}", node, sql)
        # An output alias in HAVING/ORDER BY/GROUP BY names the outer SELECT's column, not the subquery's.
        outer_aliases = {e.alias.lower() for e in outer.expressions if isinstance(e, exp.Alias)}
        name = node.name.lower()
        if not node.table and name in outer_aliases and name not in names and \
                node.find_ancestor(exp.Having, exp.Order, exp.Group) is not None:
            return node
        if name in names:
            return names[name].copy()
        if star:
            return exp.column(node.name, quoted=node.this.quoted)
        raise _refuse("DP202", f"unknown column {node.name!r}: the subquery does not select it", node, sql,
                      hint=did_you_mean(node.name, names) or f"it selects {', '.join(sorted(names))}")

    for key in ("expressions", "where", "group", "having", "order"):
        value = outer.args.get(key)
        if isinstance(value, list):
            outer.set(key, [v.transform(substitute) for v in value])
        elif value is not None:
            outer.set(key, value.transform(substitute))
    inner_where = inner.args.get("where")
    if inner_where is not None:
        outer_where = outer.args.get("where")
        condition = exp.Paren(this=inner_where.this)
        if outer_where is not None:
            condition = exp.and_(condition, exp.Paren(this=outer_where.this), copy=False)
        outer.set("where", exp.Where(this=condition))
    outer.set("from_", inner.args["from_"])
    if inner.args.get("joins"):   # the subquery's joins become the outer query's (frontend/joins.py checks them)
        outer.set("joins", inner.args["joins"])
    # Projections the outer query never used still count as references (an identifier in one is
    # refused): the validator reads them from here.
    outer.meta.setdefault("dropped", []).extend(e.copy() for e in names.values())
    return True


def flatten(select: exp.Expression, sql: str) -> exp.Expression:
    """Inline CTEs and merge row-wise FROM-subqueries into the outer SELECT (in place; returned)."""
    if not isinstance(select, exp.Select):
        return select
    inline_ctes(select, sql)
    for _ in range(MAX_DEPTH):
        if not _merge(select, sql):
            return select
    raise _refuse("DP102", f"subqueries nested more than {MAX_DEPTH} deep", select, sql)
