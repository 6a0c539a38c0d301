"""A query that compares its rows with an aggregate of private data, split into stages (issue 24):

    SELECT ... FROM customer WHERE c_acctbal > (SELECT AVG(c_acctbal) FROM customer WHERE ...)
    stage 1   SELECT AVG(c_acctbal) FROM customer WHERE ...        an ordinary DP query, released first
    stage 2   SELECT ... FROM customer WHERE c_acctbal > <value>    an ordinary DP query; the value a literal

Privacy: stage 1 is a DP release at its share of the query's budget, through the whole pipeline (its
rules, bounds and noise). Stage 2 reads the rows again with stage 1's *released* value as a constant:
post-processing of stage 1 composed with a DP release of its own at the rest of the budget, so the
query costs the sum (sequential composition), charged once for both (api/connection.py). The value is
noisy, so the rows stage 2 keeps are chosen by a noisy threshold (the plan says so).

A stage is a scalar subquery (an aggregate without GROUP BY, one output) over at least one private
table, uncorrelated, anywhere in the statement but inside another subquery's stage or an EXISTS/IN
(semi-joins stay what they are). What stays refused (DP317): a correlated one (it would need one value
per outer row: per key), one that groups, has several outputs or nests a stage of its own, and more
than ``MAX_STAGES`` of them. A scalar subquery over public tables only is not a stage (unchanged).

>>> import sqlglot
>>> from dpsql.policy import load_policy
>>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "row",
...     "columns": {"x": {"type": "int", "lower": 0, "upper": 9}}}}})
>>> s = split(sqlglot.parse_one("SELECT COUNT(*) FROM t WHERE x > (SELECT AVG(x) FROM t)"), "", p)
>>> s.inner, s.outer_sql([4.5])
(('SELECT AVG(x) FROM t',), 'SELECT COUNT(*) FROM t WHERE x > CAST(4.5 AS DOUBLE)')
"""
from __future__ import annotations

import datetime
import decimal
import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from sqlglot import exp

from dpsql.errors import DpsqlError, UnsupportedConstruct
from dpsql.frontend.dialect import Dpsql
from dpsql.frontend.options import QueryOptions, query_options
from dpsql.frontend.correlated import TABLE, correlated, probe, tables
from dpsql.policy.model import Policy, TablePolicy
from dpsql.sql.literals import temporal_literal
from dpsql.sql.positions import span

MAX_STAGES = 3   # subqueries released before the query; each takes an equal share of its budget
MARKER = "__dpsql_stage"


@dataclass(frozen=True)
class Stages:
    """The subqueries' SELECTs (each a query of its own, as SQL text) and the statement with a marker
    in the place of each; ``outer_sql`` writes it with released values in their places."""
    inner: tuple[str, ...]
    outer: exp.Expression
    values: TablePolicy | None = None   # a correlated stage's released values, read as a lookup (frontend/correlated.py)
    public: bool = False   # the last stage reads public tables and those values only: answered exactly
    probe: exp.Expression | None = None   # a public last stage as tried before the charge (frontend/correlated.py)

    def outer_sql(self, values: Sequence[Any]) -> str:
        """The statement with value i in the place of subquery i (None: NULL, as a typed DOUBLE)."""
        def put(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Placeholder) and node.name.startswith(MARKER):
                return literal(values[int(node.name[len(MARKER):])])
            return node
        return self.outer.transform(put).sql(dialect=Dpsql)

    def options(self, sql: str) -> QueryOptions:
        """The outer query's OPTIONS: its epsilon and delta are the whole query's."""
        refuse = lambda code, message, node: _refuse(message, node, sql, "", code)   # noqa: E731
        return query_options(self.outer, refuse) if isinstance(self.outer, exp.Select) else QueryOptions()

    def placeholder_sql(self) -> str:
        """The statement as planned before stage 1 runs: each value NULL (what the plan explains)."""
        return self.outer_sql([None] * len(self.inner))

    def probe_sql(self) -> str:
        """A public last stage over every key stage 1 may release, each value NULL (correlated.py ``probe``)."""
        assert self.probe is not None
        return self.probe.sql(dialect=Dpsql)


def literal(value: Any) -> exp.Expression:
    """A released value as a literal of its type; NULL (and a non-finite number) as a typed DOUBLE NULL."""
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, (int, decimal.Decimal)):
        return exp.Literal.number(str(value))
    if isinstance(value, float) and math.isfinite(value):
        return exp.Cast(this=exp.Literal.number(repr(value)), to=exp.DataType.build("DOUBLE"))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, datetime.date):
        return temporal_literal(value)
    return exp.Cast(this=exp.Null(), to=exp.DataType.build("DOUBLE"))


def public_stage(sql: str) -> UnsupportedConstruct:
    """DP317 for a query whose last stage (or a subquery's) is not a DP query over private data."""
    return _refuse("the query around a scalar subquery over private data reads no private table (or a stage "
                   "counts randomized reports): its stages would not be DP queries of their own", None, sql,
                   "ask the subquery alone and write its answer into the query as a literal")


def repointed(err: DpsqlError, sql: str) -> DpsqlError:
    """``err``, raised on a stage's regenerated text, pointed into the query as written: at the same
    words where they appear there once (compared without case or spacing), else at no position."""
    if err.sql is None or err.sql == sql:
        return err
    words = err.sql[err.start:err.end + 1] if err.start is not None and err.end is not None else ""
    pattern = r"\s+".join(re.escape(w) for w in words.split())
    found = list(re.finditer(pattern, sql, re.IGNORECASE)) if pattern else []
    err.sql = sql
    err.start, err.end = (found[0].start(), found[0].end() - 1) if len(found) == 1 else (None, None)
    return err


def _refuse(message: str, node: exp.Expression | None, sql: str, hint: str, code: str = "DP317") -> UnsupportedConstruct:
    start, end = span(node, sql)
    err = UnsupportedConstruct(code, message, hint=hint, sql=sql, start=start, end=end)
    err.rule = "stages"
    return err


def _private(select: exp.Select, policy: Policy) -> bool:
    """Whether a SELECT (its subqueries included) reads a private table of the policy."""
    names = {t.name.lower() for t in select.find_all(exp.Table)}
    return any(name in policy.tables and not policy.tables[name].public for name in names)


def _outer_column(select: exp.Select, policy: Policy) -> exp.Column | None:
    """A column of the subquery that names none of its own tables' columns: a correlation, or None."""
    read = tables(select)
    own = {c.lower() for t in read.values() if t in policy.tables for c in policy.tables[t].columns}
    outputs = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    for column in select.find_all(exp.Column):
        qualifier = column.table.lower()
        if (qualifier and qualifier not in read) or (not qualifier and column.name.lower() not in own | outputs):
            return column
    return None


def _is_stage(node: exp.Subquery, policy: Policy) -> bool:
    """A scalar subquery over private data: not a FROM item, not an IN list's query."""
    parent = node.parent
    if isinstance(parent, (exp.From, exp.Join)) or (isinstance(parent, exp.In) and parent.args.get("query") is node):
        return False
    return isinstance(node.this, exp.Select) and _private(node.this, policy)


def _check(node: exp.Subquery, sql: str, policy: Policy, alone: bool = False, host: exp.Select | None = None) -> None:
    """DP317 unless the subquery can be released as a stage of its own (module docstring); ``host``: the
    IN list's SELECT it may sit in (``_host``)."""
    select = node.this
    hint = ("write the subquery as one aggregate of the rows it reads, without GROUP BY and without "
            "naming a column of the outer query: SELECT AVG(x) FROM t WHERE ...")
    within = next((a for a in _ancestors(node, host) if isinstance(a, exp.Exists) or (isinstance(a, exp.Subquery) and (
        isinstance(a.parent, exp.In) or _is_stage(a, policy)))), None)
    if within is not None:
        raise _refuse("a scalar subquery over private data inside an EXISTS, an IN or another such subquery: "
                      "stages do not nest", node, sql, hint)
    if select.args.get("group") or len(select.expressions) != 1 or \
            not any(isinstance(n, exp.AggFunc) for n in select.expressions[0].walk()):
        raise _refuse("a scalar subquery over private data must be one aggregate without GROUP BY (one value, "
                      "released before the query)", select, sql, hint)
    outer = _outer_column(select, policy)
    if outer is not None and not alone:
        raise _refuse(f"the subquery over private data names {outer.sql(dialect='duckdb')}, a column of the outer "
                      "query: a correlated subquery needs one released value per key of the outer query, which "
                      "dpsql plans only for the query's one subquery", outer, sql, "ask it as the query's only subquery "
                      "over private data, or release it grouped by the column it is correlated on (SELECT key, "
                      "AVG(x) FROM t GROUP BY key) and use its answer; an uncorrelated one is a stage")


def _ancestors(node: exp.Expression, stop: exp.Expression | None = None):
    parent = node.parent
    while parent is not None and parent is not stop:
        yield parent
        parent = parent.parent


def _outside_private(statement: exp.Expression, found: list[exp.Subquery], policy: Policy) -> bool:
    """Does the statement read a private table outside its stages?"""
    inside = {id(t) for s in found for t in s.find_all(exp.Table)}
    return any(t.name.lower() in policy.tables and not policy.tables[t.name.lower()].public
               for t in statement.find_all(exp.Table) if id(t) not in inside)


def _host(node: exp.Subquery, statement: exp.Expression, policy: Policy) -> exp.Select | None:
    """The SELECT of an ``x IN (SELECT ...)`` list whose WHERE holds the statement's one correlated stage,
    when nothing outside the stage reads private data (TPC-H Q20: ``s_suppkey IN (SELECT ps_suppkey FROM
    partsupp WHERE ... AND ps_availqty > (SELECT 0.5 * SUM(l_quantity) FROM lineitem WHERE l_partkey =
    ps_partkey ...))``): the stage is released by the list's keys, the rest is public (answered exactly)."""
    host = node.parent_select
    wrapper = host.parent if host is not None else None
    if not isinstance(wrapper, exp.Subquery) or not isinstance(wrapper.parent, exp.In) or \
            wrapper.parent.args.get("query") is not wrapper or _outside_private(statement, [node], policy):
        return None
    return host if _outer_column(node.this, policy) is not None else None


def split(statement: exp.Expression, sql: str, policy: Policy, values: str = TABLE) -> Stages | None:
    """The statement's stages (module docstring), or None when it has none; DP317 for a subquery over
    private data that cannot be one. ``values``: the name of a correlated stage's table of released
    values (a connection's own, so two connections sharing a DuckDB connection never share it)."""
    found = [s for s in statement.find_all(exp.Subquery) if _is_stage(s, policy)]
    if not found:
        return None
    host = _host(found[0], statement, policy) if len(found) == 1 else None
    for node in found:
        _check(node, sql, policy, alone=len(found) == 1, host=host)
    if len(found) > MAX_STAGES:
        raise _refuse(f"{len(found)} scalar subqueries over private data: at most {MAX_STAGES} are released before "
                      "a query (each takes a share of its budget)", found[MAX_STAGES], sql,
                      "ask the subqueries as queries of their own and write their answers into this one")
    public = not _outside_private(statement, found, policy)
    if public and (len(found) > 1 or _outer_column(found[0].this, policy) is None):
        raise public_stage(sql)
    if _outer_column(found[0].this, policy) is not None:   # correlated: released by key (frontend/correlated.py)
        where = host if host is not None else statement
        two = correlated(where, found[0], tables(where) if isinstance(where, exp.Select) else {},
                         sql, policy, values, exact_last=public)
        last = statement if host is not None else two.outer
        tried = probe(last, values, two.keys) if two.keys is not None else None
        return Stages(inner=(two.inner,), outer=last, values=two.values, public=public, probe=tried)
    inner = tuple(s.this.sql(dialect=Dpsql) for s in found)
    markers = {id(s): i for i, s in enumerate(found)}
    outer = statement.transform(lambda n: exp.Placeholder(this=f"{MARKER}{markers[id(n)]}")
                                if id(n) in markers else n, copy=False)
    return Stages(inner=inner, outer=outer)
