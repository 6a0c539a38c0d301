"""Semi- and anti-joins: ``[NOT] EXISTS (SELECT ... FROM t WHERE ...)`` and ``x [NOT] IN (SELECT y FROM
t WHERE ...)`` as conditions of WHERE (top-level, joined by AND), checked here and moved into the
joined relation's SQL (frontend/relation.py), where they filter rows exactly as in the user's WHERE.

Why it is safe: a row is kept or dropped by rows of ``t`` that belong to the same person (a private
``t`` must be tied to the row's unit: along a declared link, as a sibling under one parent key, or on
the unit's key) or to nobody (a public ``t``). Removing one person then changes only that person's
rows of the relation, so contribution bounding still bounds them. A subquery reads one table, with
conditions of three kinds: ties and comparisons with the outer row's columns (written by the
comparison builder, sql/compare.py, so they cannot fail), and filters on its own columns,
validated like a WHERE (the same rules) and guarded like one (``sql/guard.py``).

A tie along a link compares in the link's form, the one its key was checked unique in; a tie between
two tables that reference one key (siblings, or two copies of one table) compares keys of one type,
so two equal keys reach the same parent row: keys of two types (a DOUBLE and a BIGINT) could be equal
in the common type while their parents differ.
"""
from __future__ import annotations

import dataclasses

from sqlglot import exp

from dpsql.errors import PrivacyViolation, UnsupportedConstruct
from dpsql.sql.positions import clause_name, closed_end, span
from dpsql.sql.compare import compare, normal
from dpsql.frontend.relation import Instance, conjuncts, resolve
from dpsql.frontend.validate import validate
from dpsql.sql.guard import guarded, quoted
from dpsql.sql.totality import narrow_dates
from dpsql.policy.model import Policy, TablePolicy

COMPARE = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


def _refuse(code: str, message: str, node, sql: str, hint: str = "", cls=UnsupportedConstruct,
            rule: str = "semi_joins_tied_to_the_person"):
    start, end = span(node, sql)
    if isinstance(node, exp.Exists) and start is not None:
        # EXISTS and SELECT carry no position: start the caret at the keyword, close its parenthesis
        keyword = sql.upper().rfind("EXISTS", 0, start)
        if keyword >= 0:
            start, end = keyword, closed_end(sql, keyword, end, node)
    err = cls(code, message, hint=hint, sql=sql, start=start, end=end)
    err.rule = rule
    return err


def is_semijoin(node: exp.Expression) -> bool:
    inner = node.this if isinstance(node, exp.Not) else node
    return isinstance(inner, exp.Exists) or (isinstance(inner, exp.In) and inner.args.get("query") is not None)


def extract(select: exp.Select) -> list[exp.Expression]:
    """Remove WHERE's top-level semi-joins from the query and return them (others stay and are refused)."""
    where = select.args.get("where")
    parts = conjuncts(where.this if where is not None else None)
    found = [p for p in parts if is_semijoin(p)]
    if found:
        kept = [p for p in parts if not is_semijoin(p)]
        select.set("where", exp.Where(this=exp.and_(*kept, copy=False)) if kept else None)
    return found


def lower(found: list[exp.Expression], sql: str, instances: dict[str, Instance], policy: Policy) -> list[exp.Expression]:
    """Each semi-join checked and written as SQL over the relation's tables (aliases as in the source)."""
    root = next((i.table.root for i in instances.values() if not i.table.public), None)
    return [_semijoin(node, n, sql, instances, policy, root) for n, node in enumerate(found, start=1)]


def _semijoin(node: exp.Expression, n: int, sql: str, instances: dict[str, Instance], policy: Policy,
              root: str | None) -> exp.Expression:
    negated = isinstance(node, exp.Not)
    inner = node.this if negated else node
    query = inner.this if isinstance(inner, exp.Exists) else inner.args["query"]
    query = query.this if isinstance(query, exp.Subquery) else query
    table, alias = _one_table(query, sql, policy)
    local, correlated = _split(query, alias, table, instances, sql)
    if isinstance(inner, exp.In):
        correlated.append(_membership(inner, query, alias, table, instances, sql))
    ties = [c for c in correlated if _tie(c, table, instances, sql)]
    for correlation in correlated:
        _check_correlation(correlation, correlation in ties, table, instances, sql)
    if not table.public and (root is None or table.root != root or not ties):
        raise _refuse("DP206", f"this subquery reads {table.name}, a private table, without tying its rows to the "
                               "person of the row it filters: it would let other persons' rows decide", inner, sql,
                      cls=PrivacyViolation,
                      hint="correlate it along a link (e.g. l_orderkey = o_orderkey) or on the unit's key")
    name = f"__semi{n}"
    conditions = [_correlation(c, name, table, instances, sql) for c in correlated]
    if local:
        conditions.append(guarded_filter(local, table, query.args["from_"].this, name, sql, policy))
    body = exp.select(exp.Literal.number(1)).from_(
        exp.Table(this=exp.to_identifier(table.name, quoted=True), alias=exp.TableAlias(this=exp.to_identifier(name))))
    if conditions:
        body = body.where(exp.and_(*conditions, copy=False), copy=False)
    result: exp.Expression = exp.Exists(this=body)
    if not negated:
        return result
    if isinstance(inner, exp.In):
        # x NOT IN (SELECT y ...) is NULL, not TRUE, when x is NULL or some y is NULL: kept exactly
        # (the subquery's table is public here: its NULLs are nobody's).
        y = exp.column(correlated[-1][0].name.lower(), name, quoted=True)
        nulls = exp.select(exp.Literal.number(1)).from_(body.args["from_"].this.copy()).where(
            exp.and_(exp.Is(this=y, expression=exp.Null()), *conditions[len(correlated):]), copy=False)
        x = correlated[-1][1]
        outer = exp.column(x.name.lower(), resolve(x, instances), quoted=True)
        return exp.and_(exp.Not(this=result), exp.Not(this=exp.Is(this=outer, expression=exp.Null())),
                        exp.Not(this=exp.Exists(this=nulls)))
    return exp.Not(this=result)


def _one_table(query: exp.Expression, sql: str, policy: Policy) -> tuple[TablePolicy, str]:
    """The subquery is one SELECT of one table of the policy, filtering rows only."""
    if not isinstance(query, exp.Select) or query.args.get("from_") is None:
        raise _refuse("DP204", "an EXISTS/IN subquery must be one SELECT from a table", query, sql)
    for key in ("joins", "group", "having", "limit", "offset", "order", "distinct", "with_", "qualify"):
        if query.args.get(key):
            value = query.args[key]
            raise _refuse("DP204", f"an EXISTS/IN subquery may only filter one table's rows, not use "
                                   f"{clause_name(key)}", value[0] if isinstance(value, list) else value, sql)
    for node in query.walk():
        if node is not query and isinstance(node, (exp.Select, exp.AggFunc, exp.Window)):
            raise _refuse("DP204", "an EXISTS/IN subquery may not aggregate or nest another subquery", node, sql)
    source = query.args["from_"].this
    if not isinstance(source, exp.Table) or source.name.lower() not in policy.tables or source.args.get("db"):
        raise _refuse("DP201", "an EXISTS/IN subquery must read a table of the policy", source, sql)
    return policy.tables[source.name.lower()], (source.alias or source.name).lower()


def _inner(column: exp.Column, alias: str, table: TablePolicy) -> bool:
    if column.table:
        return column.table.lower() == alias
    return column.name.lower() in table.columns


def _split(query: exp.Select, alias: str, table: TablePolicy, instances: dict[str, Instance],
           sql: str) -> tuple[list[exp.Expression], list[tuple[exp.Column, exp.Column, exp.Expression]]]:
    """WHERE's conditions on the subquery's own columns, and its comparisons inner column <op> outer column."""
    where = query.args.get("where")
    local, correlated = [], []
    for part in conjuncts(where.this if where is not None else None):
        columns = [c for c in part.find_all(exp.Column) if not isinstance(c.this, exp.Star)]
        outer = [c for c in columns if not _inner(c, alias, table)]
        if not outer:
            local.append(part)
            continue
        sides = (part.this, part.expression) if isinstance(part, COMPARE) else (None, None)
        if not all(isinstance(s, exp.Column) for s in sides) or \
                sum(_inner(s, alias, table) for s in sides) != 1 or resolve(outer[0], instances) is None:
            raise _refuse("DP204", "a condition of the subquery that reads the outer query must compare one of "
                                   "its columns with one outer column", part, sql)
        a, b = sides
        inner_col, outer_col = (a, b) if _inner(a, alias, table) else (b, a)
        correlated.append((inner_col, outer_col, part))
    return local, correlated


def _membership(node: exp.In, query: exp.Select, alias: str, table: TablePolicy, instances: dict[str, Instance],
                sql: str) -> tuple[exp.Column, exp.Column, exp.Expression]:
    """``x IN (SELECT y ...)`` as the correlation y = x (NOT IN over a private table is refused: one
    NULL y anywhere would turn every row's answer NULL, letting another person decide)."""
    outer, items = node.this, query.expressions
    if not isinstance(outer, exp.Column) or resolve(outer, instances) is None or len(items) != 1 or \
            not isinstance(items[0].unalias(), exp.Column) or not _inner(items[0].unalias(), alias, table):
        raise _refuse("DP204", "IN (SELECT ...) must compare a column of the query with one column of the subquery",
                      node, sql)
    if isinstance(node.parent, exp.Not) and not table.public:
        raise _refuse("DP204", "NOT IN over a private table is not supported: one NULL would change every row",
                      node.parent, sql, hint="write NOT EXISTS (SELECT ... WHERE y = x)")
    return items[0].unalias(), outer, node


def guarded_filter(parts: list[exp.Expression], table: TablePolicy, node: exp.Table, alias: str, sql: str,
                   policy: Policy) -> exp.Expression:
    """Filters on one table's own columns (a subquery's WHERE, a LEFT JOIN's ON): they pass the rules
    a WHERE passes (no identifier, known columns, kinds, bounded strings), checked on a probe query
    over that table alone, and are guarded as a WHERE is; columns qualified by ``alias``."""
    alone = dataclasses.replace(table, path=(), root_unit=None)   # checked as one table
    probe = exp.select(exp.Count(this=exp.Star())).from_(node.copy()).where(
        exp.and_(*[p.copy() for p in parts]), copy=False)
    validate(probe, sql, dataclasses.replace(policy, tables={**policy.tables, table.name: alone}))
    types = lambda column: table.columns[column].sql_type if column in table.columns else None  # noqa: E731
    condition = guarded(narrow_dates(quoted(exp.and_(*[p.copy() for p in parts])), types), types)
    return condition.transform(lambda c: exp.column(c.name, alias, quoted=True) if isinstance(c, exp.Column) else c)


def _tie(correlation, table: TablePolicy, instances: dict[str, Instance], sql: str) -> bool:
    """Whether an equality puts the subquery's rows with the outer row's person: a link either way,
    siblings under one parent key, or both sides the unit's key (these two: keys of one type)."""
    inner_col, outer_col, node = correlation
    if not isinstance(node, (exp.EQ, exp.In)) or table.public:
        return False
    outer = instances[resolve(outer_col, instances)].table
    if outer.public:
        return False
    i, o = inner_col.name.lower(), outer_col.name.lower()
    mine, theirs = table.link, outer.link
    if mine is not None and mine.column == i and mine.references_table == outer.name and mine.references_column == o:
        return True
    if theirs is not None and theirs.column == o and theirs.references_table == table.name and theirs.references_column == i:
        return True
    siblings = mine is not None and theirs is not None and mine.column == i and theirs.column == o and \
        (mine.references_table, mine.references_column) == (theirs.references_table, theirs.references_column)
    if not siblings and not (table.unit_key is not None and outer.unit_key is not None and i == table.unit_key
                             and o == outer.unit_key):
        return False
    types = [normal(t.columns[c].sql_type) if c in t.columns else None for t, c in ((table, i), (outer, o))]
    if types[0] != types[1]:
        raise _refuse("DP206", f"{node.sql()} ties keys of two types ({types[0]}, {types[1]}): two different keys "
                               "could be equal in their common type and tie rows of two persons", node, sql,
                      cls=PrivacyViolation, hint="tie rows along a declared link, or by keys of one type")
    return True


def _check_correlation(correlation, tie: bool, table: TablePolicy, instances: dict[str, Instance], sql: str) -> None:
    """A comparison with the outer row reads an identifier only to tie rows to their person (its types
    are the comparison builder's to check: ``_correlation``)."""
    inner_col, outer_col, node = correlation
    outer = instances[resolve(outer_col, instances)].table
    i, o = inner_col.name.lower(), outer_col.name.lower()
    if not tie and (table.is_identifier(i) or outer.is_identifier(o)):
        raise _refuse("DP203", f"{inner_col.sql()} or {outer_col.sql()} identifies a person: a subquery may use it "
                               "only to tie its rows to the same person", node, sql, cls=PrivacyViolation)


def _correlation(correlation, name: str, table: TablePolicy, instances: dict[str, Instance],
                 sql: str) -> exp.Expression:
    """inner <op> outer with the columns qualified (the subquery's by its alias, the outer's by theirs),
    as the comparison builder writes it: total on every row (sql/compare.py)."""
    inner_col, outer_col, node = correlation
    op = exp.EQ if isinstance(node, exp.In) else type(node)
    left_inner = isinstance(node, exp.In) or node.this is inner_col
    alias = resolve(outer_col, instances)
    sides = []
    for column, owner, qualifier in ((inner_col, table, name), (outer_col, instances[alias].table, alias)):
        policy = owner.columns.get(column.name.lower())
        if policy is None:
            raise _refuse("DP202", f"unknown column {column.name!r} in table {owner.name!r}", node, sql,
                          rule="known_columns")
        sides.append((exp.column(column.name.lower(), qualifier, quoted=True), policy.sql_type))
    left, right = sides if left_inner else sides[::-1]
    return compare(op, *left, *right, node=node, sql=sql)
