"""Public tables join only as lookups (issue 20, finding 3).

A public table's rows are nobody's, but joined freely they multiply a person's rows before any bound
applies: ``FROM customer, nation n0, ..., nation n4`` gives each customer row 25**5 rows, so whether
one more person matched would show in the memory and the time a query takes (an out-of-memory on one
neighbour only). So in a query over private tables, every public table (each instance) must be
reached from them through equalities (ON or WHERE, written by the comparison builder) whose columns
on its side are unique together in it, as the join compares them; possibly through public tables
reached before it (nation through supplier.s_nationkey). Each row of the relation then meets at most
one row of each public table, and a person's rows are no more than their rows of the private tables.

The shape is checked here (DP207 for a public table that no equality reaches); the uniqueness in the
data by the connection, which asks the engine once per analyst (``Lookup``; api/connection.py): a
PRIMARY KEY/UNIQUE constraint on some of the columns answers without reading when every form is exact.
"""
from __future__ import annotations

from dataclasses import dataclass

from dpsql.errors import UnsupportedConstruct
from dpsql.sql.compare import Form, key_form
from dpsql.sql.positions import span
from dpsql.frontend.relation import Instance

RULE = "public_tables_as_lookups"


@dataclass(frozen=True)
class Lookup:
    """A public table joined as a lookup: its ``columns`` (each in the form its equality compares it)
    must be unique together in ``table`` for a row to meet at most one of its rows."""
    table: str
    columns: tuple[tuple[str, Form], ...]
    name: str                  # the table as the query names it ("nation n1")
    sql: str
    start: int | None = None
    end: int | None = None

    @property
    def key(self) -> tuple:
        return self.table, self.columns

    def refusal(self) -> UnsupportedConstruct:
        names = ", ".join(c for c, _ in self.columns)
        return UnsupportedConstruct(
            "DP207", f"{self.name} is joined on {names}, which {'is' if len(self.columns) == 1 else 'are'} not unique "
                     f"in table {self.table!r} as the join compares {'it' if len(self.columns) == 1 else 'them'}: a "
                     "row would meet several of its rows, and each person's rows would be multiplied",
            hint="join a public table on columns unique in it (its key), e.g. ON c_nationkey = n_nationkey",
            sql=self.sql, start=self.start, end=self.end, rule=RULE)


def lookups(instances: dict[str, Instance], edges: list, sql: str) -> tuple[Lookup, ...]:
    """The lookup of every public instance, in the order they are reached from the private ones
    (``edges``: frontend/joins.py's Edge, each an equality between two instances).

    Raises:
        UnsupportedConstruct (DP207): a public table that no equality reaches from the private ones.
    """
    reached = [a for a, i in instances.items() if not i.table.public]
    if not reached:
        return ()
    pending = [a for a, i in instances.items() if i.table.public]
    found = []
    while pending:
        columns: tuple[tuple[str, Form], ...] = ()
        for alias in pending:   # the first, in the query's order, that an equality reaches now
            columns = _columns(alias, reached, edges, instances)
            if columns:
                break
        if not columns:
            raise _unreached(instances[pending[0]], sql)
        inst = instances[alias]
        start, end = span(inst.node, sql)
        name = inst.table.name if inst.alias == inst.table.name else f"{inst.table.name} {inst.alias}"
        found.append(Lookup(inst.table.name, columns, name, sql, start, end))
        reached.append(alias)
        pending.remove(alias)
    return tuple(found)


def _columns(alias: str, reached: list[str], edges: list, instances: dict[str, Instance]) -> tuple[tuple[str, Form], ...]:
    """The columns of ``alias`` that equalities compare with reached instances, each in its form."""
    out = set()
    for e in edges:
        for own, own_column, other, other_column in ((e.a, e.a_column, e.b, e.b_column), (e.b, e.b_column, e.a, e.a_column)):
            if own == alias and other in reached:
                form = key_form(instances[own].table.columns[own_column].sql_type,
                                instances[other].table.columns[other_column].sql_type)
                assert form is not None   # the edge was written by the builder
                out.add((own_column, form))
    return tuple(sorted(out, key=repr))


def _unreached(inst: Instance, sql: str) -> UnsupportedConstruct:
    start, end = span(inst.node, sql)
    name = inst.table.name if inst.alias == inst.table.name else f"{inst.table.name} {inst.alias}"
    return UnsupportedConstruct(
        "DP207", f"{name} is a public table joined without an equality on its key (a condition-less or range join): "
                 "each of its rows would repeat every person's rows before any bound applies",
        hint="join a public table as a lookup: by equalities (ON or WHERE) on columns unique in it, e.g. "
             "ON c_nationkey = n_nationkey", sql=sql, start=start, end=end, rule=RULE)
