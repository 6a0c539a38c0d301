"""Public keys pruned by the WHERE's conjuncts over public tables (issue 24, item 2): TPC-H Q5's
``n_name`` groups are the 5 nations of ``r_name = 'ASIA'``, not all 25.

A GROUP BY column of a joined public table gets its distinct values as keys (engines/duckdb.py
``public_keys``). Here that read becomes the query's own public part: the column's table, the public
tables it reaches through the query's join conditions towards their unique keys (each a lookup,
frontend/lookups.py: a many-to-one step, so the read has at most as many rows as the key's table),
the conditions between them as the relation writes them (sql/compare.py), and the WHERE's top-level
conjuncts that read only those tables' columns, guarded as the lowering guards the WHERE
(sql/guard.py): the keys are the values of the rows that pass.

Why it is free: the read touches public tables only, so the key set is a function of public data
and the query text, the same on every pair of neighbouring databases (they differ in one person's
rows of the private tables). Why it drops no group the query could fill: a row of the relation that
passes the WHERE holds, for each of these public tables, one row that meets the same join conditions
and the same conjuncts, so its key is one the read returns. A group the read does not return holds
no row; releasing it would release noise around 0. L is then min(L, the keys' number) as for any
public keys (plan/build.py ``_contribution_limits``): the row filter to the keys bounds the groups a
person reaches. A read is never kept (engines/duckdb.py ``pruned_keys``) and gives at most
KEY_LITERALS_MAX keys, written as literals; past that the column's own keys serve (a superset), so
no analyst can make dpsql keep a key table per WHERE they write.
"""
from __future__ import annotations

from sqlglot import exp

from dpsql.frontend.relation import conjuncts
from dpsql.policy.model import ColumnPolicy, Policy, TablePolicy
from dpsql.sql.build import col, ident
from dpsql.sql.guard import guarded, quoted
from dpsql.sql.totality import narrow_dates


def pruned_read(select: exp.Select, table: TablePolicy, column: ColumnPolicy, policy: Policy
                ) -> tuple[exp.Select, str] | None:
    """The read of ``column``'s keys restricted by the WHERE's public conjuncts, and those conjuncts as
    explain shows them; None when no conjunct reads only public tables the key's table reaches."""
    found = _public_rows(select, table, [column.name], policy)
    if found is None or not found[1]:
        return None
    rows, filters, _ = found
    return _read(rows, filters, [column.name], table), " AND ".join(f.sql(dialect="duckdb") for f in filters)


def joint_read(select: exp.Select, table: TablePolicy, columns: list[str], policy: Policy
               ) -> tuple[exp.Select, str] | None:
    """The distinct tuples of several GROUP BY columns of one public table (TPC-H Q20's stage: the
    (ps_partkey, ps_suppkey) pairs of partsupp), restricted by the WHERE's public conjuncts and by the
    relation's semi-joins over public tables tied to those tables (``part`` by ``p_name LIKE 'forest%'``),
    and those conditions as explain shows them; None unless every column comes from one public table.

    Why its tuples are all the groups the query can fill: a row of the relation holds one row of that
    table (a lookup, inner-joined) that meets the same joins, conjuncts and semi-joins, so its tuple is
    one the read returns; the product of the columns' key sets would hold every other combination too
    (2e9 pairs at SF 1, where partsupp holds 800k). Public tables only: a function of public data."""
    found = _public_rows(select, table, columns, policy, semi_joins=True)
    if found is None:
        return None
    rows, filters, semis = found
    return _read(rows, filters, columns, table), " AND ".join(f.sql(dialect="duckdb") for f in semis + filters)


def _public_rows(select: exp.Select, table: TablePolicy, columns: list[str], policy: Policy,
                 semi_joins: bool = False) -> tuple[exp.Select, list[exp.Expression], list[exp.Expression]] | None:
    """The rows of the public tables the columns' table reaches (one alias for all of them, else None),
    their columns named as the relation names them, the WHERE's conjuncts over those columns only, and,
    with ``semi_joins``, the relation's EXISTS over public tables tied to them, which the rows pass."""
    source, where = table.source, select.args.get("where")
    if not isinstance(source, exp.Select):
        return None
    origins = {p.alias: p.this for p in source.expressions if isinstance(p, exp.Alias)
               and isinstance(p.this, exp.Column) and p.this.table}
    inner = _inner_public(source, policy)
    keys = {origins[c].table if c in origins else None for c in columns}
    if len(keys) != 1 or None in keys or next(iter(keys)) not in inner:
        return None
    edges = [c for c in _conditions(source) if _aliases(c) <= set(inner) and len(_aliases(c)) == 2]
    reached = _reached(next(iter(keys)), edges, _unique_columns(table))
    filters = [c for c in conjuncts(where.this if where is not None else None)
               if not c.find(exp.Subquery, exp.Exists, exp.Select)
               and (names := {n.name.lower() for n in c.find_all(exp.Column)})
               and all(n in origins and origins[n].table in reached for n in names)]
    rows = exp.select(*[exp.Alias(this=origins[n].copy(), alias=ident(n)) for n in sorted(origins)
                        if origins[n].table in reached])
    rows = rows.from_(_table(inner, sorted(reached)[0]), copy=False)
    for alias in sorted(reached)[1:]:
        rows = rows.join(_table(inner, alias), join_type="CROSS", copy=False)
    semis = _public_semi_joins(source, reached, policy) if semi_joins else []
    joins = [e.copy() for e in edges if _aliases(e) <= reached] + [e.copy() for e in semis]
    if joins:
        rows = rows.where(*joins, copy=False)
    return rows, filters, semis


def _read(rows: exp.Select, filters: list[exp.Expression], columns: list[str], table: TablePolicy) -> exp.Select:
    """The distinct non-NULL values (tuples) of ``columns`` over ``rows`` that pass ``filters``, guarded
    as the lowering guards the WHERE (sql/guard.py)."""
    def types(name: str) -> str | None:
        c = table.columns.get(name)
        return c.sql_type if c is not None else None
    kept = [guarded(narrow_dates(quoted(f.copy()), types), types) for f in filters]   # as the lowering guards them
    present = [exp.Not(this=exp.Is(this=col(c), expression=exp.Null())) for c in columns]
    public = exp.Subquery(this=rows, alias=exp.TableAlias(this=ident("__public")))
    return exp.select(*[col(c) for c in columns]).distinct().from_(public, copy=False).where(*kept, *present, copy=False)


def _public_semi_joins(source: exp.Select, reached: set[str], policy: Policy) -> list[exp.Expression]:
    """The relation's [NOT] EXISTS conditions (frontend/semijoins.py wrote them, ties by sql/compare.py,
    filters guarded) that read public tables only and name no outer alias but ``reached``: public
    conditions on those tables' rows."""
    where = source.args.get("where")
    found = []
    for c in conjuncts(where.this if where is not None else None):
        inner = c.this if isinstance(c, exp.Not) else c
        if not isinstance(inner, exp.Exists):
            continue
        names = [t.name.lower() for t in inner.find_all(exp.Table)]
        own = {(t.alias or t.name).lower() for t in inner.find_all(exp.Table)}
        outer = {col.table.lower() for col in inner.find_all(exp.Column)} - own
        if all(n in policy.tables and policy.tables[n].public and not policy.tables[n].released for n in names) \
                and outer <= reached:
            found.append(c)
    return found


def _inner_public(source: exp.Select, policy: Policy) -> dict[str, str]:
    """alias -> table of the public tables the relation joins other than by a LEFT JOIN (whose columns
    may be NULL where no row matched: their conditions would not hold for such rows), and other than a
    table of released values (frontend/correlated.py: filled only when its stage runs, after planning)."""
    found = {}
    for node, side in [(source.args["from_"].this, "")] + [(j.this, j.side) for j in source.args.get("joins") or []]:
        name = node.name.lower()
        if isinstance(node, exp.Table) and name in policy.tables and policy.tables[name].public and side != "LEFT" \
                and not policy.tables[name].released:
            found[(node.alias or node.name).lower()] = name
    return found


def _conditions(source: exp.Select) -> list[exp.Expression]:
    """The relation's join conditions: each inner join's ON and the WHERE's conjuncts."""
    parts = [c for j in source.args.get("joins") or [] if j.side != "LEFT" for c in conjuncts(j.args.get("on"))]
    where = source.args.get("where")
    return parts + (conjuncts(where.this) if where is not None else [])


def _aliases(condition: exp.Expression) -> set[str]:
    return {c.table.lower() for c in condition.find_all(exp.Column)} if not condition.find(exp.Subquery) else {"?"}


def _unique_columns(table: TablePolicy) -> dict[str, set[str]]:
    """alias -> the columns a lookup is unique on (frontend/lookups.py: checked in the data)."""
    return {lookup.name.split()[-1].lower(): {c for c, _ in lookup.columns} for lookup in table.lookups}


def _reached(start: str, edges: list[exp.Expression], unique: dict[str, set[str]]) -> set[str]:
    """The public tables reached from ``start`` by steps onto a table's unique columns (many-to-one)."""
    reached, grown = {start}, True
    while grown:
        grown = False
        for other in {a for e in edges for a in _aliases(e)} - reached:
            compared = {c.name.lower() for e in edges if _aliases(e) & reached and other in _aliases(e)
                        for c in e.find_all(exp.Column) if c.table.lower() == other}
            if other in unique and unique[other] <= compared:
                reached.add(other)
                grown = True
    return reached


def _table(inner: dict[str, str], alias: str) -> exp.Table:
    return exp.Table(this=ident(inner[alias]), alias=exp.TableAlias(this=ident(alias)))
