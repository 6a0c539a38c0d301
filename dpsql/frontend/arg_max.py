"""The row whose private aggregate is the largest (or smallest), as the noisy top-1 (issue 24, item 3;
TPC-H Q15):

    WITH r (k, v) AS (SELECT l_suppkey, SUM(x) FROM lineitem WHERE ... GROUP BY l_suppkey)
    SELECT s_suppkey, s_name, v FROM supplier, r WHERE s_suppkey = k AND v = (SELECT MAX(v) FROM r)

    SELECT s_suppkey AS k, SUM(x) AS v FROM lineitem, supplier WHERE ... AND s_suppkey = l_suppkey
    GROUP BY s_suppkey ORDER BY v DESC LIMIT 1                        (what is planned: plan/top_k.py)
    then s_name looked up in supplier by the chosen s_suppkey          (public data: ``Lookup``)

The rule: a query of one CTE grouped by one expression with one aggregate beside it, joined to one
public table by an equality of a column of that table with the CTE's key, filtered by an equality of
the CTE's aggregate with its own MAX (MIN) over the CTE, and selecting the public table's columns
and the CTE's two. It asks for the group with the largest total: the top-1 of the noisy top-k, its
value released apart (or the noisy values', whichever the plan finds less noisy), grouped by the
public table's column, so its candidates are that table's keys. Rows of the CTE whose key is in no
row of the public table are not candidates (the exact query's join drops them anyway, unless one
holds the maximum: then it answers no row where this answers the best joined one). Ties: one row.
The public columns are read for the chosen key after the release: post-processing, no budget.
Any other shape is left as it is (and refused as before: a CTE that aggregates, DP102/DP201).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from sqlglot import exp

from dpsql.policy.model import Policy

KEY, VALUE = "__key", "__value"


@dataclass(frozen=True)
class Lookup:
    """The public table's columns looked up by the released key: each output (in the query's order) is
    a released column of the top-1 (``released``: the key or the value, under the output's own name)
    or a column of ``table``."""
    table: str
    column: str                                 # the public table's key, equal to the released key
    kind: str                                   # its DuckDB type (the released key's too)
    key: str                                    # the released key's and value's names in the top-1
    value: str
    outputs: tuple[tuple[str, bool, str], ...]  # (name, released, column of the top-1 or of table)

    def line(self) -> str:
        looked = [name for name, released, _ in self.outputs if not released]
        return (f"then {', '.join(looked) or 'nothing'} read from public table {self.table} where {self.column} "
                "is the chosen key (public data after the release: no budget)")


@dataclass(frozen=True)
class _Cte:
    name: str
    key: str          # the CTE's output names
    value: str
    body: exp.Select


def _cte(statement: exp.Select) -> _Cte | None:
    """The one CTE: one GROUP BY expression, two outputs (that key, then an aggregate), named."""
    ctes = statement.args.get("with_").expressions if statement.args.get("with_") else []
    if len(ctes) != 1 or not isinstance(ctes[0].this, exp.Select):
        return None
    body, alias = ctes[0].this, ctes[0].args.get("alias")
    group = body.args.get("group")
    items = body.expressions
    if group is None or len(group.expressions) != 1 or len(items) != 2 or body.args.get("having") or \
            items[0].unalias() != group.expressions[0] or items[0].find(exp.AggFunc) or \
            not isinstance(items[1].unalias(), exp.AggFunc):
        return None
    columns = [c.name for c in alias.columns] if alias is not None and alias.columns else [i.alias_or_name for i in items]
    if len(columns) != 2 or not all(columns):
        return None
    return _Cte(ctes[0].alias.lower(), columns[0].lower(), columns[1].lower(), body)


def _tables(statement: exp.Select) -> list[exp.Table]:
    """The tables of FROM and its comma joins; none when a join has a condition of its own or a side."""
    joins = statement.args.get("joins") or []
    parts = [statement.args.get("from_"), *joins]
    plain = all(not (j.args.get("on") or j.args.get("using") or j.side or j.kind) for j in joins)
    return [p.this for p in parts if p is not None and isinstance(p.this, exp.Table)] \
        if plain and all(p is None or isinstance(p.this, exp.Table) for p in parts) else []


def _named(node: exp.Expression, names: set[str], qualifiers: set[str]) -> str | None:
    """The column's name if ``node`` is a column of one of ``names`` reachable by ``qualifiers``."""
    if isinstance(node, exp.Column) and node.name.lower() in names and (not node.table or node.table.lower() in qualifiers):
        return node.name.lower()
    return None


def _filters(statement: exp.Select, cte: _Cte, public: set[str], own: set[str],
             qualifiers: set[str]) -> tuple[str, str] | None:
    """(the public column equal to the CTE's key, 'max' or 'min'), when WHERE is exactly that equality
    and the CTE's value equal to its MAX or MIN over the CTE; else None."""
    where = statement.args.get("where")
    conjuncts = list(where.this.flatten()) if where is not None and isinstance(where.this, exp.And) else []
    if len(conjuncts) != 2 or not all(isinstance(c, exp.EQ) for c in conjuncts):
        return None
    column, extreme = None, None
    for c in conjuncts:
        sides = (c.this, c.expression)
        for a, b in (sides, sides[::-1]):
            if _named(a, {cte.key}, own) and not isinstance(b, exp.Subquery):
                column = column or _named(b, public, qualifiers)
            if _named(a, {cte.value}, own) and isinstance(b, exp.Subquery):
                extreme = extreme or _extreme(b.this, cte)
    return (column, extreme) if column and extreme else None


def _extreme(select: exp.Expression, cte: _Cte) -> str | None:
    """'max' or 'min' for SELECT MAX(v) (MIN(v)) FROM the CTE, alone."""
    if not isinstance(select, exp.Select) or len(select.expressions) != 1 or select.args.get("where") or \
            [t.name.lower() for t in _tables(select)] != [cte.name]:
        return None
    node = select.expressions[0].unalias()
    if isinstance(node, (exp.Max, exp.Min)) and isinstance(node.this, exp.Column) and node.this.name.lower() == cte.value:
        return "max" if isinstance(node, exp.Max) else "min"
    return None


def arg_max(statement: exp.Expression, policy: Policy) -> tuple[exp.Expression, Lookup | None]:
    """The statement as the top-1 it asks for and the lookup after it (module docstring), or the
    statement unchanged and None when it is not of that shape."""
    if not isinstance(statement, exp.Select):
        return statement, None
    cte = _cte(statement)
    tables = _tables(statement)
    names = sorted(t.name.lower() for t in tables)
    if cte is None or len(tables) != 2 or cte.name not in names:
        return statement, None
    (table,) = [t for t in tables if t.name.lower() != cte.name]
    (ref,) = [t for t in tables if t.name.lower() == cte.name]
    if table.name.lower() not in policy.tables or not policy.tables[table.name.lower()].public:
        return statement, None
    public = set(policy.tables[table.name.lower()].columns)
    own = {"", cte.name, (ref.alias or cte.name).lower()}
    qualifiers = {"", table.name.lower(), (table.alias or table.name).lower()}
    found = _filters(statement, cte, public, own, qualifiers)
    outputs = _outputs(statement, cte, public, own, qualifiers)
    if found is None or outputs is None:
        return statement, None
    column, extreme = found
    lookup = _lookup(table, column, policy.tables[table.name.lower()].columns[column].sql_type, outputs)
    return _top_one(cte, table, lookup, extreme == "max"), lookup


def _outputs(statement: exp.Select, cte: _Cte, public: set[str], own: set[str],
             qualifiers: set[str]) -> list[tuple[str, str]] | None:
    """(name, source) of each output: the CTE's key or value (KEY, VALUE), or a column of the public table."""
    found = []
    for item in statement.expressions:
        node = item.unalias()
        source = (KEY if _named(node, {cte.key}, own) else VALUE if _named(node, {cte.value}, own)
                  else _named(node, public, qualifiers))
        if source is None:
            return None
        found.append((item.alias_or_name, source))
    return found


def _lookup(table: exp.Table, column: str, kind: str, outputs: list[tuple[str, str]]) -> Lookup:
    """The released key and value named as the query's first outputs of them (the public key column
    itself is the key), so the top-1's outputs carry the names the answer shows."""
    key = next((n for n, s in outputs if s in (KEY, column)), KEY)
    value = next((n for n, s in outputs if s == VALUE), VALUE)
    rows = tuple((n, s in (KEY, VALUE, column), key if s in (KEY, column) else value if s == VALUE else s)
                 for n, s in outputs)
    return Lookup(table.name.lower(), column, kind, key, value, rows)


def named_lookup(lookup: Lookup, names: Sequence[str | None]) -> Lookup:
    """``lookup`` with its outputs under ``names`` (DuckDB's, frontend/names.py), where one is known: the
    outputs are read from the query's SELECT list, so they are in its order."""
    outputs = tuple((name or written, released, column)
                    for name, (written, released, column) in zip(names, lookup.outputs))
    return dataclasses.replace(lookup, outputs=outputs) if len(names) == len(lookup.outputs) else lookup


def _top_one(cte: _Cte, table: exp.Table, lookup: Lookup, descending: bool) -> exp.Select:
    """SELECT t.column AS key, <aggregate> AS value FROM <the CTE's tables>, t WHERE <its WHERE> AND
    t.column = <its key> GROUP BY t.column ORDER BY value DESC|ASC LIMIT 1."""
    column = lookup.column
    body = cte.body.copy()
    inner = [body.args["from_"].this] if not body.args.get("joins") and body.args.get("from_") else []
    if len(inner) == 1 and isinstance(inner[0], exp.Table):   # its columns qualified: the public table joined beside it may share their names
        for c in body.find_all(exp.Column):
            c.set("table", c.args.get("table") or exp.to_identifier(inner[0].alias_or_name))
    key = body.expressions[0].unalias()
    public = exp.Column(this=exp.to_identifier(column), table=exp.to_identifier(table.alias_or_name))
    joined = body.join(table.copy(), on=exp.EQ(this=public.copy(), expression=key.copy()), copy=False)
    joined.set("expressions", [exp.alias_(public.copy(), lookup.key, quoted=True),
                               exp.alias_(body.expressions[1].unalias(), lookup.value, quoted=True)])
    joined.set("group", exp.Group(expressions=[public.copy()]))
    joined.set("order", exp.Order(expressions=[exp.Ordered(this=exp.column(lookup.value, quoted=True),
                                                           desc=descending)]))
    joined.set("limit", exp.Limit(expression=exp.Literal.number(1)))
    return joined
