"""Joins: a query over several tables becomes a query over one relation, whose rows each belong to
exactly one privacy unit.

``SELECT n_name, SUM(l_extendedprice) FROM lineitem JOIN orders ON l_orderkey = o_orderkey JOIN
customer ON o_custkey = c_custkey JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name`` is
checked here and rewritten to read one virtual table (the joined relation, lowered as a subquery),
so validation, planning and lowering treat it as a table like any other. Contribution bounding (L
partitions, C rows per unit) then applies to the relation's rows, after the joins and filters, so
the sensitivity holds whatever the fan-out.

Why a joined row belongs to one unit (docs/architecture.md, "Joins"): private tables may only be
joined along their declared links (``child.via = parent.key``), whose key is unique in the data
(checked at connect, DP504), so a row of the child meets at most one row of the parent, and both
belong to the same unit; the private tables must form one chain along links (two tables that both
reference one parent would multiply a unit's rows by each other, and two tables joined only through
a public one would mix two units); public tables join as lookups (frontend/lookups.py: on columns
unique in them, so a row meets at most one of their rows). The unit of a
joined row is the unit key of its private tables (equal on matched rows; COALESCE for LEFT joins),
and when no table of the query holds it, the links' joins are added (LEFT, on a unique key: no row
is lost or repeated).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sqlglot import exp

from dpsql.errors import PrivacyViolation, UnsupportedConstruct
from dpsql.sql.compare import compare
from dpsql.frontend.lookups import lookups
from dpsql.sql.positions import span
from dpsql.sql.schemas import qualified_table_hint
from dpsql.sql.build import col
from dpsql.policy.model import Policy, TablePolicy
from dpsql.frontend import semijoins
from dpsql.frontend.relation import Instance, build, conjuncts, resolve as _resolve
from dpsql.frontend.suggest import unknown_table

def _refuse(code: str, message: str, node, sql: str, hint: str = "", cls=UnsupportedConstruct,
            rule: str = "joins_along_links"):
    start, end = span(node, sql)
    err = cls(code, message, hint=hint, sql=sql, start=start, end=end)
    err.rule = rule
    return err


@dataclass
class Edge:
    """An equality ``a.x = b.y`` between two instances, from an ON or from WHERE (``node``, as the
    user wrote it), and as the relation's SQL compares it (``written``: sql/compare.py)."""
    a: str
    a_column: str
    b: str
    b_column: str
    node: exp.Expression
    written: exp.Expression | None = None


def relate(select: exp.Expression, sql: str, policy: Policy) -> tuple[exp.Expression, Policy]:
    """The query over one relation, and the policy with that relation as a table.

    A query over one table that holds its unit's key (or is public, or row level) is returned as it
    is. Anything this module cannot prove safe is refused with a code and a caret.
    """
    if not isinstance(select, exp.Select) or select.args.get("from_") is None:
        return select, policy
    joins = select.args.get("joins") or []
    first = select.args["from_"].this
    where = select.args.get("where")
    if not joins and not any(semijoins.is_semijoin(p) for p in conjuncts(where.this if where is not None else None)):
        if not isinstance(first, exp.Table) or first.name.lower() not in policy.tables:
            return select, policy
        table = policy.tables[first.name.lower()]
        if not table.path or table.unit_key is not None:
            return select, policy   # one table that holds its unit: nothing to relate
    instances = _instances(select, sql, policy)
    found = semijoins.extract(select)
    edges = _edges(select, sql, instances, policy)
    _check_links(select, sql, instances, edges)
    for edge in edges:
        _write(edge, instances, sql)
    public = lookups(instances, edges, sql)   # DP207: a public table joined other than as a lookup
    select.meta["semi_joins"] = semijoins.lower(found, sql, instances, policy)
    relation, renames = build(select, instances, policy)
    relation = dataclasses.replace(relation, about=_about(instances, edges, found, relation), lookups=public)
    _rewrite(select, sql, instances, renames, relation)
    _prune(relation.source, select, relation.privacy_unit)
    tables = {**policy.tables, relation.name: relation}
    return select, dataclasses.replace(policy, tables=tables)


def _prune(source: exp.Select, select: exp.Select, unit: str) -> None:
    """The relation's SQL keeps only the columns the query reads (and the unit): every column of
    every joined table made TPC-H Q9's SQL five times longer, and printing and binding it cost more
    than the rest of planning. The relation's table keeps them all, for validation's messages."""
    used = {c.name for c in select.find_all(exp.Column)} | {unit}
    source.set("expressions", [p for p in source.expressions if p.alias_or_name in used])


def _about(instances: dict[str, Instance], edges: list, found: list, relation: TablePolicy) -> str:
    """What explain says of a relation: its joins, the semi-joins that filter it, whose rows they are."""
    parts = [f"joined on {', '.join(e.node.sql(dialect='duckdb') for e in edges)}"] if edges else []
    if found:
        parts.append(f"{len(found)} EXISTS/IN filter(s) tied to the row's person")
    private = [i for i in instances.values() if not i.table.public]
    if private and all(i.table.unit_key is None for i in private):
        parts.append(f"each row's person found through {', '.join(map(str, private[0].table.path))} (joins added)")
    elif private:
        root = private[0].table
        parts.append(f"each row belongs to the person {root.root}.{root.root_column}")
    return "; ".join(parts) or "one table"


# --- the tables --------------------------------------------------------------------------------------

def _instances(select: exp.Select, sql: str, policy: Policy) -> dict[str, Instance]:
    instances: dict[str, Instance] = {}
    sources = [(select.args["from_"].this, None)] + [(j.this, j) for j in select.args.get("joins") or []]
    for node, join in sources:
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            raise _refuse("DP204", "a join must name a table of the policy (subqueries in joins are not "
                                   "supported yet)", node, sql)
        if node.args.get("db") or node.args.get("catalog"):
            raise _refuse("DP201", f"qualified table names are not allowed: {node.sql()}", node, sql,
                          rule="one_private_table", hint=qualified_table_hint(node))
        name = node.name.lower()
        if name not in policy.tables:
            message, hint = unknown_table(node.name, policy)
            raise _refuse("DP201", message, node, sql, hint=hint, rule="one_private_table")
        side = ""
        if join is not None:
            side = _join_side(join, sql)
        alias = (node.alias or node.name).lower()
        if alias in instances:
            raise _refuse("DP204", f"{alias!r} names two tables of the join: give each its own alias", node, sql)
        instances[alias] = Instance(alias, policy.tables[name], node, side)
    return instances


def _join_side(join: exp.Join, sql: str) -> str:
    """"" for an inner or comma join, "LEFT" for a left join; anything else is refused."""
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if join.method or join.args.get("using") or side in ("RIGHT", "FULL") or kind in ("SEMI", "ANTI", "ASOF") \
            or (kind == "CROSS" and join.args.get("on")):
        what = join.method or ("USING" if join.args.get("using") else f"{side} {kind}".strip())
        raise _refuse("DP204", f"{what} JOIN is not supported", join, sql,
                      hint="write INNER or LEFT JOIN ... ON a.x = b.y (or list the tables and join them in WHERE)")
    return side


# --- the join conditions -----------------------------------------------------------------------------

def _edge(node: exp.Expression, instances: dict[str, Instance]) -> Edge | None:
    """``a.x = b.y`` between two different instances, else None."""
    if not isinstance(node, exp.EQ) or not isinstance(node.this, exp.Column) or \
            not isinstance(node.expression, exp.Column):
        return None
    a, b = _resolve(node.this, instances), _resolve(node.expression, instances)
    if a is None or b is None or a == b:
        return None
    return Edge(a, node.this.name.lower(), b, node.expression.name.lower(), node)


def _edges(select: exp.Select, sql: str, instances: dict[str, Instance], policy: Policy) -> list[Edge]:
    """Every join condition: all of each ON, and WHERE's top-level equalities between tables (which
    move into the relation, where they mean the same: WHERE filters the joined rows either way)."""
    edges = []
    aliases = list(instances)
    for i, join in enumerate(select.args.get("joins") or [], start=1):
        on = join.args.get("on")
        if on is None and join.side:
            raise _refuse("DP204", "a LEFT JOIN needs ON", join, sql)
        filters: list[exp.Expression] = []
        join.meta["edges"] = []
        for part in conjuncts(on):
            edge = _edge(part, instances)
            if edge is not None and aliases[i] in (edge.a, edge.b):
                edges.append(edge)
                join.meta["edges"].append(edge)
                continue
            columns = [c for c in part.find_all(exp.Column) if not isinstance(c.this, exp.Star)]
            if not columns or any(_resolve(c, instances) != aliases[i] for c in columns):
                raise _refuse("DP204", "ON may only equate a column of the joined table with a column of a table "
                                       "before it, or filter the joined table's own rows", part, sql,
                              hint="filter rows of several tables in WHERE instead")
            filters.append(part)
        if filters:   # the joined table's own rows, before it is joined (as DuckDB reads ON)
            inst = instances[aliases[i]]
            join.meta["filter"] = semijoins.guarded_filter(filters, inst.table, inst.node, inst.alias, sql, policy)
    where = select.args.get("where")
    kept = []
    for part in conjuncts(where.this if where is not None else None):
        edge = _edge(part, instances)
        if edge is not None and _joins(edge, instances):
            edges.append(edge)
        else:
            kept.append(part)   # a filter: validated as any WHERE is
            edges += [e for e in _implied(part, instances) if _joins(e, instances)]
    moved = [e for e in edges if e.node.find_ancestor(exp.Where) is not None]
    select.meta["join_filters"] = moved
    if where is not None and moved:
        select.set("where", exp.Where(this=exp.and_(*kept, copy=False)) if kept else None)
    return edges


def _joins(edge: Edge, instances: dict[str, Instance]) -> bool:
    """Whether a WHERE equality joins its tables in the relation: a link, or a public table's lookup,
    neither side LEFT-joined (WHERE filters a LEFT JOIN's NULL rows; ON would keep them)."""
    return not (instances[edge.a].side or instances[edge.b].side) and (
        _link_of(edge, instances) is not None or instances[edge.a].table.public or instances[edge.b].table.public)


def _implied(part: exp.Expression, instances: dict[str, Instance]) -> list[Edge]:
    """The equalities between two tables that every branch of an OR states (TPC-H Q19: ``(p_partkey =
    l_partkey AND ...) OR (p_partkey = l_partkey AND ...)``): the OR implies them, so they join the
    tables in the relation, and the OR stays in WHERE as a filter."""
    branches = _disjuncts(part)
    if len(branches) < 2:
        return []
    common: dict | None = None
    for branch in branches:
        found = {}
        for c in conjuncts(branch):
            edge = _edge(c, instances)
            if edge is not None:
                found[frozenset({(edge.a, edge.a_column), (edge.b, edge.b_column)})] = edge
        common = found if common is None else {k: v for k, v in common.items() if k in found}
    return list((common or {}).values())


def _disjuncts(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.Paren):
        return _disjuncts(node.this)
    if isinstance(node, exp.Or):
        return _disjuncts(node.this) + _disjuncts(node.expression)
    return [node]


def _write(edge: Edge, instances: dict[str, Instance], sql: str) -> None:
    """The edge as the relation's SQL compares it: by the comparison builder, so that no row can make it
    fail (a DATE against a TIMESTAMP_NS fails past 2262 unguarded), strings byte for byte, and in the
    form in which a link's key and a lookup's columns are checked unique (sql/compare.py)."""
    operands: list = []
    for alias, column in ((edge.a, edge.a_column), (edge.b, edge.b_column)):
        policy = instances[alias].table.columns.get(column)
        if policy is None:
            raise _refuse("DP202", f"unknown column {column!r} in table {instances[alias].table.name!r}", edge.node,
                          sql, rule="known_columns")
        operands += [col(column, alias), policy.sql_type]
    edge.written = compare(exp.EQ, *operands, node=edge.node, sql=sql)


# --- what may be joined ------------------------------------------------------------------------------

def _link_of(edge: Edge, instances: dict[str, Instance]) -> tuple[str, str] | None:
    """(child, parent) when the edge is a declared link ``child.via = parent.key``, else None."""
    for child, c_col, parent, p_col in ((edge.a, edge.a_column, edge.b, edge.b_column),
                                        (edge.b, edge.b_column, edge.a, edge.a_column)):
        link = instances[child].table.link
        if link is not None and link.column == c_col and link.references_table == instances[parent].table.name \
                and link.references_column == p_col:
            return child, parent
    return None


def _check_links(select: exp.Select, sql: str, instances: dict[str, Instance], edges: list[Edge]) -> None:
    private = [a for a, i in instances.items() if not i.table.public]
    for alias in private:
        table = instances[alias].table
        if table.row_level and len(instances) > 1:
            raise _refuse("DP206", f"table {table.name!r} is row level: joining it could give one person "
                                   "several rows with no bound", instances[alias].node, sql, cls=PrivacyViolation,
                          hint=f"declare the column that identifies a person as {table.name}'s privacy_unit")
    roots = {instances[a].table.root for a in private}
    if len(roots) > 1:
        raise _refuse("DP206", f"the query joins tables of different privacy units ({', '.join(sorted(roots))}): "
                               "a joined row would belong to two persons", instances[private[1]].node, sql,
                      cls=PrivacyViolation)
    children: dict[str, list[str]] = {a: [] for a in private}
    linked: list[tuple[str, str]] = []
    for edge in edges:
        a, b = instances[edge.a], instances[edge.b]
        if a.table.public and b.table.public:
            continue
        if a.table.public or b.table.public:
            inst, column = (b, edge.b_column) if a.table.public else (a, edge.a_column)
            if inst.table.is_identifier(column):
                raise _refuse("DP203", f"{inst.alias}.{column} identifies a person: it may only join along "
                                       "the policy's links", edge.node, sql, cls=PrivacyViolation)
            continue
        pair = _link_of(edge, instances)
        if pair is None:
            # Not a join but a filter on rows the links already joined (l_shipdate = o_orderdate);
            # it stays inside the relation, so it may not read an identifier.
            for inst, column in ((a, edge.a_column), (b, edge.b_column)):
                if inst.table.is_identifier(column):
                    raise _refuse("DP206", f"{edge.node.sql()} joins private tables off their declared links: a "
                                           "row could meet rows of another person", edge.node, sql,
                                  cls=PrivacyViolation, hint=f"declared links: {_links(instances)}")
            continue
        if pair not in linked:
            linked.append(pair)
            children[pair[1]].append(pair[0])
    for parent, kids in children.items():
        if len(kids) > 1:
            raise _refuse("DP206", f"{' and '.join(kids)} both join {parent}: each person's rows of one would "
                                   "repeat for each of the other", instances[kids[1]].node, sql, cls=PrivacyViolation)
    _connected(private, linked, instances, sql)


def _links(instances: dict[str, Instance]) -> str:
    tables = {i.table.name: i.table for i in instances.values()}
    return ", ".join(str(t.link) for t in tables.values() if t.link is not None) or "none"


def _connected(private: list[str], linked: list[tuple[str, str]], instances: dict[str, Instance], sql: str) -> None:
    """The private tables form one component along links (else a row would mix two persons)."""
    if not private:
        return
    reached, frontier = {private[0]}, [private[0]]
    while frontier:
        current = frontier.pop()
        for child, parent in linked:
            for a, b in ((child, parent), (parent, child)):
                if a == current and b not in reached:
                    reached.add(b)
                    frontier.append(b)
    missing = [a for a in private if a not in reached]
    if missing:
        raise _refuse("DP206", f"{missing[0]} is not joined to {private[0]} along a declared link: a joined row "
                               "would mix two persons' rows", instances[missing[0]].node, sql, cls=PrivacyViolation,
                      hint=f"join private tables on their links: {_links(instances)}")


def _rewrite(select: exp.Select, sql: str, instances: dict[str, Instance], renames: dict[tuple[str, str], str],
             relation: TablePolicy) -> None:
    """Point the query at the relation: FROM it, joins gone, every column by its relation name (the
    identifier node kept in place, so an error's caret still points at what the user wrote)."""
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    for column in list(select.find_all(exp.Column)):
        if isinstance(column.this, exp.Star):
            continue
        if column.table and column.table.lower() not in instances:
            raise _refuse("DP202", f"unknown table or alias {column.table!r} in {column.sql()}", column, sql,
                          rule="known_columns")
        owner = _resolve(column, instances)
        if owner is None:
            owners = [a for a, i in instances.items() if column.name.lower() in i.table.columns]
            if len(owners) > 1 and column.name.lower() not in aliases:
                raise _refuse("DP202", f"column {column.name!r} is in {' and '.join(owners)}: qualify it", column,
                              sql, rule="known_columns")
            continue   # unknown, or an output alias: validation says which
        if (owner, column.name.lower()) not in renames:
            known = ", ".join(sorted(instances[owner].table.columns))
            raise _refuse("DP202", f"unknown column {column.name!r} in {instances[owner].table.name} "
                                   f"{column.table or owner}", column, sql, rule="known_columns",
                          hint=f"its columns: {known}")
        column.this.set("this", renames[(owner, column.name.lower())])
        column.this.set("quoted", False)
        column.set("table", None)
    first = select.args["from_"].this
    table = exp.Table(this=exp.to_identifier(relation.name))
    table.this.meta.update({k: v for k, v in first.this.meta.items() if k in ("line", "col", "start", "end")})
    select.args["from_"].set("this", table)
    select.set("joins", None)
